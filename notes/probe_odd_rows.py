"""Probe (2026-12-04, sixteenth session): where the time goes when rows are not 16-byte
aligned, after the TMA copies (kernels.matmul.tma_copy) went in at 1a2e484.

1. K = 4100 (a's rows 8200 bytes): run matmul-20261204T104056Z-1a2e484 had the
   warp-specialized kernel (the dispatch's choice) at 269 µs and the persistent one at 225.
   Is it the copy, the 65th (nearly empty) K step, or the kernel?  M = N = 4096, K = 4032,
   4096, 4100, 4104, 4160; each kernel on a as it lies (copied inside where K = 4100) and on a
   copy made outside the timed call; the copy alone; cuBLAS.
2. 8192x50257x768 (an odd N): ours 1.32 ms, torch.compile 0.99 (it pads N to 50264 and runs
   cuBLAS).  The same product with N padded to 50264 in ours (aligned output rows: TMA stores,
   the warp-specialized kernel) and in cuBLAS; ours with the weight copied outside.

Device time: CUDA graphs of CALLS calls on the same buffers (warm), interleaved rounds, median
µs.  JSON lines.

    python3 notes/probe_odd_rows.py > $OUT/probe_odd_rows.log
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
from collections.abc import Callable

import torch

sys.path.insert(0, ".")

from bench import timing

km = importlib.import_module("kernels.matmul")  # the package exports a function of this name

ROUNDS = 9
CALLS = 10


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def graphed(fn: Callable[[], object]) -> Callable[[], None]:
    return timing.graphed(fn, CALLS)  # CALLS calls in one graph


def device_us(fns: dict[str, Callable[[], object]]) -> dict[str, float]:
    replays = {k: graphed(f) for k, f in fns.items()}
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for name, replay in replays.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            replay()
            e.record()
            e.synchronize()
            times[name].append(s.elapsed_time(e) * 1000 / CALLS)
    return {k: round(statistics.median(v), 1) for k, v in times.items()}


def main() -> None:
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    bf = torch.bfloat16
    for k in (4032, 4096, 4100, 4104, 4160):
        a = torch.randn((4096, k), generator=g, device=dev).to(bf)
        b = torch.randn((k, 4096), generator=g, device=dev).to(bf)
        a_c = km.tma_copy(a)
        fns = {
            "ws": lambda a=a, b=b: km.matmul(a, b, variant="warp_specialized"),
            "persistent": lambda a=a, b=b: km.matmul(a, b, variant="persistent"),
            "ws a pre-copied": lambda a=a_c, b=b: km.matmul(a, b, variant="warp_specialized"),
            "persistent a pre-copied": lambda a=a_c, b=b: km.matmul(a, b, variant="persistent"),
            "copy of a": lambda a=a: km.tma_copy(a),
            "cublas": lambda a=a, b=b: torch.mm(a, b),
        }
        emit(shape=f"4096x4096x{k}", a_stride=a_c.stride(0), **device_us(fns))
    a = torch.randn((8192, 768), generator=g, device=dev).to(bf)
    b = torch.randn((768, 50257), generator=g, device=dev).to(bf)
    b_c = km.tma_copy(b)
    b_pad = torch.zeros((768, 50264), device=dev, dtype=bf)
    b_pad[:, :50257] = b
    fns = {
        "ours (default)": lambda: km.matmul(a, b),
        "ours b pre-copied": lambda: km.matmul(a, b_c),
        "copy of b": lambda: km.tma_copy(b),
        "ours N padded (default)": lambda: km.matmul(a, b_pad),
        "ours N padded, persistent": lambda: km.matmul(a, b_pad, variant="persistent"),
        "cublas": lambda: torch.mm(a, b),
        "cublas N padded": lambda: torch.mm(a, b_pad),
    }
    emit(shape="8192x50257x768", **device_us(fns))


if __name__ == "__main__":
    main()
