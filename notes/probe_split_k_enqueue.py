"""Probe (2026-12-04, fifteenth session; run at fbd0e5f, output in notes/README.md): the time to
enqueue 300 eager calls against the time until they finish, per call (µs, the best of five
rounds), for torch.mm, the autotuned kernel and split-K.  Where the two agree, the host set
the pace.  (What ran was this code typed on one line a statement; laid out here.)

    python3 notes/probe_split_k_enqueue.py
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from collections.abc import Callable

import torch

sys.path.insert(0, ".")
km = importlib.import_module("kernels.matmul")  # the package exports a function of this name
SHAPES = [(1, 4096, 4096), (32, 4096, 4096), (1, 2048, 6144), (64, 8192, 2048), (1, 256, 8192)]


def enqueue_and_total(fn: Callable[[], object]) -> tuple[float, float]:
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    enq, tot = [], []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(300):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        enq.append((t1 - t) / 300 * 1e6)
        tot.append((t2 - t) / 300 * 1e6)
    return round(min(enq), 1), round(min(tot), 1)


def main() -> None:
    dev = torch.device("cuda")
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        fns = {
            "mm": lambda a=a, b=b: torch.mm(a, b),
            "auto": lambda a=a, b=b: km.matmul(a, b, variant="autotuned"),
            "sk": lambda a=a, b=b: km.matmul(a, b, variant="split_k"),
        }
        print(json.dumps({"shape": f"{m}x{n}x{k}", **{k2: enqueue_and_total(f) for k2, f in fns.items()}}), flush=True)


if __name__ == "__main__":
    main()
