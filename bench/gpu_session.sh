#!/usr/bin/env bash
# One device session: the stages named in $1 (comma-separated), in order, each under its own
# time limit so that one slow stage cannot starve the others.  Everything lands under $OUT.
#
#   bash bench/gpu_session.sh sweep-quick,tests,tune COMMIT DIRTY(0|1)
#
# Stages: tests (pytest -m gpu), tune (python -m bench.tune_plans), sweep-quick, sweep-fwd,
# sweep-bwd, sweep (python -m bench run softmax ...).  Liger-Kernel comes as a carried wheel in .whl/.
# LAB_TESTS_K=expr limits the tests stage to pytest -k expr.
set -u -o pipefail
stages=$1; commit=$2; dirty=$3
out=${OUT:-/tmp/out}; mkdir -p "$out/runs"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/tmp/inductor
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
flag=--clean; [ "$dirty" = "1" ] && flag=--dirty
nvidia-smi --query-gpu=name,driver_version,clocks.sm,utilization.gpu,temperature.gpu --format=csv > "$out/gpu.txt" 2>&1
sweep() { timeout "$1" python3 -m bench run softmax "${@:2}" --out "$out/runs" --commit "$commit" $flag 2>&1 | tee -a "$out/sweep.log"; }
IFS=, read -ra list <<< "$stages"
for s in "${list[@]}"; do
  echo "=== $s $(date -u +%T)"
  case $s in
    tests) timeout 240 python3 -m pytest -m gpu -q -x --no-header -p no:cacheprovider ${LAB_TESTS_K:+-k "$LAB_TESTS_K"} \
             tests/test_softmax_gpu.py 2>&1 | tee "$out/gpu-tests.log" | tail -25 ;;
    tune) timeout 240 python3 -m bench.tune_plans --out "$out" 2>&1 | tee "$out/tune.log" ;;
    sweep-quick) sweep 240 --quick ;;
    sweep-fwd) sweep 560 --only "fwd/" ;;
    sweep-bwd) sweep 560 --only "fwd+bwd/" ;;
    sweep) sweep 580 ;;
  esac
done
(cd "$out" && tar czf runs.tar.gz runs && rm -rf runs)
ls -la "$out"
