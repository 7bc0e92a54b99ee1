#!/usr/bin/env bash
# One device session: the stages named in $1 (comma-separated), in order, each under its own
# time limit so that one slow stage cannot starve the others.  Everything lands under $OUT;
# run files are packed into runs.tar.gz (the device tool returns at most 8 files).
#
#   bash bench/gpu_session.sh tests,sweep-quick,grid COMMIT DIRTY(0|1)
#
# Stages: tests (pytest -m gpu: softmax, RMSNorm), tests-new (GEMM, cross-entropy, specialization), probe (notes/probe_resident.py), sweep / sweep-quick (softmax study; LAB_SOFTMAX_ONLY=text runs only the case ids holding it),
# rmsnorm / rmsnorm-quick, rowsum / rowsum-quick (row sum and vector add), grid / grid-quick (row-plan
# grid: softmax's and RMSNorm's cells; grid-rmsnorm: RMSNorm's alone; grid-softmax: softmax's alone), dispatch / dispatch-quick,
# specialization / specialization-quick (LAB_SPEC_S), linear_cross_entropy / -quick (LAB_LCE_S),
# pointwise / pointwise-quick (the RoPE, SwiGLU and bias + GELU + dropout studies, LAB_POINTWISE_S each; LAB_POINTWISE="rope swiglu" a subset),
# probes (notes/probe_ce_plans.py, probe_rms_bwd.py, probe_swiglu_blocks.py, or LAB_PROBES="probe_pointwise_layouts ...": JSON lines), ncu (notes/ncu_session.sh), cross_entropy / cross_entropy-quick (LAB_CE_S its time
# limit, LAB_CE_ONLY=text runs only the case ids holding it, e.g. "fwd+bwd/bf16": torch.compile compiles every
# case afresh and each case records every variant's peak memory first, so a full sweep may take several calls),
# matmul / matmul-quick (GEMM; LAB_MATMUL_S its time limit, LAB_MATMUL_ONLY=text runs only the case ids
# holding it, e.g. "fwd/bf16" or "mm_bias", alternatives split on "|"; LAB_MATMUL_ROUNDS its samples per variant: torch.compile max-autotune compiles every case afresh, so a full
# sweep may take several calls; LAB_MATMUL_COMPILE_MODE=max-autotune-no-cudagraphs times Inductor's kernels
# without its own CUDA graphs, bench/studies/matmul.py says why).  Wheels: Liger-Kernel in .whl/; QuACK's
# parts in .quack0/ .quack1/ .quack2/, each carried by its own call, back to back (copied to /tmp/quack,
# which lives as long as the machine; installed once the last part is there): either the raw halves
# ../shared/device/quack-prepare.sh writes, or those repacked by bench/quack_xz.sh so that each fits a
# call beside the working tree.  Stage "gpu-tests" runs every GPU test file in parallel processes
# (pytest-xdist: Triton compiles on the CPU, and these check results, not times).  LAB_TESTS_K=expr limits the tests,
# LAB_TESTS_FILES="tests/a.py tests/b.py" the files.
set -u -o pipefail
stages=$1; commit=$2; dirty=$3
out=${OUT:-/tmp/out}; mkdir -p "$out/runs"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor TRITON_CACHE_DIR=/tmp/triton-cache
site=/tmp/site
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $site .whl/*.whl
fi
for part in .quack0 .quack1 .quack2; do  # each carried by its own call, back to back
  if [ -d $part ]; then mkdir -p /tmp/quack && cp $part/* /tmp/quack/ && echo "quack $part staged"; fi
done
if [ -f /tmp/quack/cu13.name ] && [ -d .quack2 ]; then  # the CUDA 13 library wheel in two raw halves
  cat /tmp/quack/cu13.part.* > "/tmp/quack/$(cat /tmp/quack/cu13.name)" \
    && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-quack /tmp/quack/*.whl \
    && echo "quack installed"
elif [ -f /tmp/quack/cu13.xz.parts ] && [ ! -d /tmp/site-quack ] \
     && [ "$(ls /tmp/quack/cu13.xz.part.* | wc -l)" = "$(cat /tmp/quack/cu13.xz.parts)" ]; then
  # the same wheel unpacked and recompressed with xz (63 MiB against 88), so that each half fits a call
  # beside the working tree: its files are the wheel's own, extracted where pip --target would put them
  # pip first: `pip install --target` skips a package folder that already exists there (the CUDA 13
  # wheel's files share nvidia_cutlass_dsl/ with the base wheels), so the archive is laid over it after.
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-quack /tmp/quack/*.whl \
    && cat /tmp/quack/cu13.xz.part.* | python3 -c "import sys, tarfile; \
tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('/tmp/site-quack')" \
    && PYTHONPATH=/tmp/site-quack:/tmp/site-quack/nvidia_cutlass_dsl/dsl_packages python3 -c "import quack.softmax" \
    && echo "quack installed"
fi
export PYTHONPATH=$PWD:$site${PYTHONPATH:+:$PYTHONPATH}
if [ -d /tmp/site-quack ]; then
  export PYTHONPATH=$PYTHONPATH:/tmp/site-quack:/tmp/site-quack/nvidia_cutlass_dsl/dsl_packages
fi
flag=--clean; [ "$dirty" = "1" ] && flag=--dirty
nvidia-smi --query-gpu=name,driver_version,clocks.sm,utilization.gpu,temperature.gpu --format=csv > "$out/gpu.txt" 2>&1
bench() { timeout "$1" python3 -m bench run "${@:2}" --out "$out/runs" --commit "$commit" $flag \
  ${LAB_SKIP:+--skip "$LAB_SKIP" --skip-reason "$LAB_SKIP_REASON"} 2>&1 | tee -a "$out/bench.log" | grep -v "^  " ; }
IFS=, read -ra list <<< "$stages"
for s in "${list[@]}"; do
  echo "=== $s $(date -u +%T)"; nvidia-smi --query-gpu=index,name --format=csv,noheader | tr '\n' ';'; echo
  case $s in
    tests) timeout ${LAB_TESTS_S:-240} python3 -m pytest -m gpu -q --no-header -p no:cacheprovider ${LAB_TESTS_K:+-k "$LAB_TESTS_K"} \
             tests/test_softmax_gpu.py tests/test_rmsnorm_gpu.py 2>&1 | tee "$out/gpu-tests.log" | tail -25 ;;
    gpu-tests) timeout ${LAB_TESTS_S:-300} python3 -m pytest -m gpu -q --no-header -p no:cacheprovider -n ${LAB_TESTS_N:-6} \
             ${LAB_TESTS_K:+-k "$LAB_TESTS_K"} ${LAB_TESTS_FILES:-tests/test_softmax_gpu.py tests/test_rmsnorm_gpu.py \
             tests/test_matmul_gpu.py tests/test_cross_entropy_gpu.py tests/test_linear_cross_entropy_gpu.py \
             tests/test_specialization.py tests/test_rope_gpu.py tests/test_swiglu_gpu.py \
             tests/test_bias_gelu_dropout_gpu.py tests/test_column_sum.py} 2>&1 | tee "$out/gpu-tests.log" | tail -40 ;;
    checks) for c in check_fused_gpu check_split_fast; do timeout 150 python3 notes/$c.py > "$out/$c.log" 2>&1; done ;;
    tests-new) timeout ${LAB_TESTS_S:-300} python3 -m pytest -m gpu -q --no-header -p no:cacheprovider \
             ${LAB_TESTS_K:+-k "$LAB_TESTS_K"} tests/test_matmul_gpu.py tests/test_cross_entropy_gpu.py \
             tests/test_specialization.py 2>&1 | tee "$out/gpu-tests-new.log" | tail -25 ;;
    sweep-quick) bench 120 softmax --quick ;;
    sweep) bench ${LAB_SWEEP_S:-330} softmax ${LAB_SOFTMAX_ONLY:+--only "$LAB_SOFTMAX_ONLY"} ;;
    rmsnorm-quick) bench 120 rmsnorm --quick ;;
    rmsnorm) bench ${LAB_RMSNORM_S:-300} rmsnorm ;;
    rowsum-quick) bench 90 rowsum_add --quick ;;
    rowsum) bench ${LAB_ROWSUM_S:-150} rowsum_add ;;
    grid-quick) bench 120 rowgrid --quick ;;
    grid) bench ${LAB_GRID_S:-520} rowgrid ;;
    grid-rmsnorm) bench ${LAB_GRID_S:-280} rowgrid --only rmsnorm ;;
    grid-softmax) bench ${LAB_GRID_S:-300} rowgrid --only "^fwd/" ;;
    specialization-quick) bench 120 specialization --quick ;;
    specialization) bench ${LAB_SPEC_S:-240} specialization ;;
    cross_entropy-quick) bench ${LAB_CE_S:-300} cross_entropy --quick ;;
    cross_entropy) bench ${LAB_CE_S:-570} cross_entropy ${LAB_CE_ONLY:+--only "$LAB_CE_ONLY"} ;;
    linear_cross_entropy) bench ${LAB_LCE_S:-300} linear_cross_entropy ;;
    linear_cross_entropy-quick) bench 150 linear_cross_entropy --quick ;;
    pointwise) for st in ${LAB_POINTWISE:-rope swiglu bias_gelu_dropout}; do bench ${LAB_POINTWISE_S:-170} $st; done ;;
    pointwise-quick) for st in rope swiglu bias_gelu_dropout; do bench 90 $st --quick; done ;;
    matmul-quick) bench ${LAB_MATMUL_S:-420} matmul --quick ;;
    matmul) bench ${LAB_MATMUL_S:-570} matmul ${LAB_MATMUL_ONLY:+--only "$LAB_MATMUL_ONLY"} \
              ${LAB_MATMUL_ROUNDS:+--rounds $LAB_MATMUL_ROUNDS} ;;
    dispatch-quick) bench 90 dispatch --quick ;;
    dispatch) bench 110 dispatch ;;
    probe) timeout ${LAB_PROBE_S:-200} python3 notes/probe_resident.py 2>&1 | tee "$out/probe-resident.log" | tail -80 ;;
    probes) for p in ${LAB_PROBES:-probe_ce_plans probe_rms_bwd probe_swiglu_blocks}; do
              timeout ${LAB_PROBE_S:-150} python3 notes/$p.py > "$out/$p.log" 2>&1; tail -4 "$out/$p.log"; done ;;
    ncu) bash notes/ncu_session.sh ;;
  esac
done
(cd "$out" && tar czf runs.tar.gz runs bench.log 2>/dev/null; rm -rf runs)
ls -la "$out"
