"""Probe (2026-12-04, fifteenth session): where an eager split-K call's host time goes.

Why: notes/2026-12-04-probe-split-shallow-b64f7c0.log timed split-K's eager calls at 24-45
µs where its device time was 11-20 and the autotuned kernel's eager call 16-31; the earlier
host probe (notes/2026-12-03-probe-mm-host-6ddedea.log) had split-K at 36.8 µs a call against
the autotuned kernel's 20.0 at 16x4096x4096.  This times the call and its pieces (the
workspace's allocation, each launch from the prepared tuple) on a product small enough that
the host sets the pace (1x8192x256: 16 splits of 2 tiles), and profiles the call.  JSON lines
and a cProfile listing.

    python3 notes/probe_split_k_host.py > $OUT/probe_split_k_host.log
"""

from __future__ import annotations

import cProfile
import importlib
import io
import json
import pstats
import sys
import time
from collections.abc import Callable

import torch

sys.path.insert(0, ".")

km = importlib.import_module("kernels.matmul")  # the package exports a function of this name
N_CALLS = 3000


def host_us(fn: Callable[[], object]) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(N_CALLS):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / N_CALLS * 1e6)
    return round(best, 2)


def main() -> None:
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    m, n, k = 1, 256, 8192
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16, generator=gen)
    b = torch.randn(k, n, device=dev, dtype=torch.bfloat16, generator=gen)
    out = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
    index = dev.index or 0
    prepared = km._prepare(a, b, out, None, None, None, "split_k", None, None, None, index)
    _, keys, grids, _, consts, warps, stages, tails = prepared
    ws = torch.empty(tails[2], device=dev, dtype=torch.float32)
    ep = (out, out, out, out)
    row = {
        "torch.mm": host_us(lambda: torch.mm(a, b)),
        "matmul default": host_us(lambda: km.matmul(a, b)),
        "matmul autotuned": host_us(lambda: km.matmul(a, b, variant="autotuned")),
        "matmul split_k": host_us(lambda: km.matmul(a, b, variant="split_k")),
        "_split_launch": host_us(lambda: km._split_launch(a, b, ep, index, prepared)),
        "torch.empty workspace": host_us(lambda: torch.empty(tails[2], device=dev, dtype=torch.float32)),
        "torch.empty output": host_us(lambda: torch.empty((m, n), device=dev, dtype=torch.bfloat16)),
        "split launch": host_us(
            lambda: km._SPLIT.launch(keys[0], index, grids[0], (a, b, ws, *tails[0]), consts[0], warps, stages)
        ),
        "reduce launch": host_us(
            lambda: km._SPLIT_REDUCE.launch(keys[1], index, grids[1], (ws, *ep, *tails[1]), consts[1], 4, 1)
        ),
        "splits": tails[2][0],
    }
    print(json.dumps(row), flush=True)
    for variant in ("split_k", "autotuned"):
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(N_CALLS):
            km.matmul(a, b, variant=variant)
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(20)
        print(f"--- cProfile, {N_CALLS} calls, variant={variant}\n{text.getvalue()}", flush=True)


if __name__ == "__main__":
    main()
