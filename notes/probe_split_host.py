"""Probe: host cost of an eager softmax call whose plan is the two-launch split (H200).

python notes/probe_split_host.py
"""

from __future__ import annotations

import sys
import time

import torch

sys.path.insert(0, ".")
import kernels

sm = sys.modules["kernels.softmax"]


def host_us(fn, n: int = 300) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


for rows, cols in ((4, 32769), (64, 131072), (32, 127), (1024, 1024)):
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    kernels.softmax(x)
    torch.cuda.synchronize()
    preps = [p for p in sm._FORWARD_CALL._prepared.values() if True]
    info = [(p.plan.label, [b is not None for b in p.bound], p.single is not None) for p in preps]
    print(
        f"{rows}x{cols}",
        "ours",
        round(host_us(lambda x=x: kernels.softmax(x)), 1),
        "torch",
        round(host_us(lambda x=x: torch.softmax(x, -1)), 1),
        info,
        flush=True,
    )
    for step in preps[-1].steps:
        print("   step", step.launcher.kernel.fn.__name__, "pdl", step.pdl, flush=True)
    import cProfile
    import pstats

    pr = cProfile.Profile()
    pr.enable()
    for _ in range(200):
        kernels.softmax(x)
    pr.disable()
    torch.cuda.synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(8)
