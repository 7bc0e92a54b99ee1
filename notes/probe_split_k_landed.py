"""Probe (2026-12-06, twenty-third session): one-launch split-K as the library now runs it.

Why: the one-launch split-K (each tile's last program sums the partials; workspace and
counters kept per stream) replaced the two-launch form at 06c3dc0.  The probe of the kernel
alone (notes/2026-12-05a-probe-split-one-launch-342e58f.log) put its device time within 2% of
the two-launch form at 9 of 10 decode shapes, and the eager-gap probe
(notes/2026-12-05e-probe-split-eager-gap-2237255.log) put one launch through the cached
launcher at about 10 µs less host time than two.  Prediction: the library's eager split-K call
now costs about what the autotuned kernel's does (one launch each, no allocation), so at
decode shapes the eager gap of 10-30 µs closes to a few µs; device time unchanged.

For each decode shape (bf16, ``x @ w`` with x [M, K] and w [K, N]): µs a call of
``torch.mm``, ``matmul(variant="autotuned")`` and ``matmul(variant="split_k")`` by

- ``loop``: bench.timing.rotated_loops_us (host and device together, best and median of
  ROUNDS rounds of CALLS calls, the order rotated), as a user's Python loop runs them;
- ``replay``: bench.timing.replay_median_us (CUDA-graph replay, warm L2: one input set).

Ratios within one run only (host time depends on the host's CPU).  One JSON line a shape.

    python3 notes/probe_split_k_landed.py > $OUT/probe_split_k_landed.log
"""

from __future__ import annotations

import json
import sys

import torch

sys.path.insert(0, ".")

from bench.timing import replay_median_us, rotated_loops_us
from kernels import matmul

SHAPES = [(1, 4096, 4096), (16, 4096, 4096), (64, 4096, 4096), (128, 4096, 4096), (16, 4096, 14336),
          (64, 4096, 14336), (1, 256, 8192), (48, 5120, 6144)]  # (M, N, K)  # fmt: skip
CALLS = 200
ROUNDS = 7


def shape_row(m: int, n: int, k: int) -> dict[str, object]:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / k**0.5
    fns = {
        "torch.mm": lambda: torch.mm(x, w),
        "autotuned": lambda: matmul(x, w, variant="autotuned"),
        "split_k": lambda: matmul(x, w, variant="split_k"),
    }
    ref = torch.mm(x.double(), w.double())
    err = {name: float((fn().double() - ref).norm() / ref.norm()) for name, fn in fns.items()}
    loops = rotated_loops_us(fns, CALLS, ROUNDS, warmup=20)
    replay = {name: round(replay_median_us(lambda _s, fn=fn: fn(), 1, 15), 2) for name, fn in fns.items()}
    return {"shape": f"{m}x{n}x{k}", "loop_best_median_us": loops, "replay_us": replay, "rel_err": err,
            "split_over_autotuned_loop": round(loops["split_k"][0] / loops["autotuned"][0], 3),
            "split_over_autotuned_replay": round(replay["split_k"] / replay["autotuned"], 3)}  # fmt: skip


def main() -> None:
    torch.manual_seed(0)
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)
    for m, n, k in SHAPES:
        print(json.dumps(shape_row(m, n, k)), flush=True)


if __name__ == "__main__":
    main()
