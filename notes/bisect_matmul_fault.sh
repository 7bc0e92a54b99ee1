#!/usr/bin/env bash
# Which combination of GEMM variants faults when they share one process (the harness's way)?
# Each variant alone passes the harness's stages (notes/probe_matmul_graph.py); all of them in
# one case fault after the torch.compile check.  Runs the first quick case (rounds 2) under
# three configurations and prints the first that passes as shell assignments for the sweep:
#   A: torch.compile without Inductor's CUDA graphs; B: no torch.compile; C: no persistent kernel.
#   eval "$(bash notes/bisect_matmul_fault.sh COMMIT)"
commit=$1; tmp=/tmp/bisect; rm -rf $tmp; mkdir -p $tmp
try() {  # name, then env assignments / bench arguments
  local name=$1; shift
  env "$@" timeout 120 python3 -m bench run matmul --quick --only fwd/bf16/127x255x65 --rounds 2 \
    --out $tmp/$name --commit "$commit" --clean ${SKIP:+--skip "$SKIP" --skip-reason bisect} >$tmp/$name.log 2>&1
  python3 - "$tmp/$name" <<'PY'
import json, pathlib, sys
files = list(pathlib.Path(sys.argv[1]).glob("*.json"))
bad = not files or any("case failed" in (v.get("error") or "") for c in json.loads(files[0].read_text())["cases"]
                       for v in c["variants"].values())
sys.exit(1 if bad else 0)
PY
}
if SKIP= try A LAB_MATMUL_COMPILE_MODE=max-autotune-no-cudagraphs; then
  echo "export LAB_MATMUL_COMPILE_MODE=max-autotune-no-cudagraphs; echo 'bisect: A (compile without its CUDA graphs) passes' >&2"
elif SKIP=compile try B X=1; then
  echo "export LAB_SKIP=compile,compile-bias-gelu LAB_SKIP_REASON='torch.compile max-autotune faulted (illegal memory access) in this process after our kernels ran; alone it passed (notes/bisect_matmul_fault.sh)'; echo 'bisect: B' >&2"
elif SKIP=triton-persistent,triton-group1,triton-group4,triton-group8 try C X=1; then
  echo "export LAB_SKIP=triton-persistent,triton-group1,triton-group4,triton-group8 LAB_SKIP_REASON='the persistent TMA kernel faulted (illegal memory access) beside the others in one process; alone it passed (notes/bisect_matmul_fault.sh)'; echo 'bisect: C' >&2"
else
  echo "echo 'bisect: nothing passes' >&2"
fi
