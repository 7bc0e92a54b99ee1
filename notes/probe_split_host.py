"""Probe: host cost of an eager softmax call whose plan is the two-launch split (H200), where
it goes (cProfile), and whether the apply launch's PDL attribute costs host time.

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

# The apply launch without its programmatic-dependent-launch attribute: host time unchanged
# (H200, 4 x 32769: 44.9 us as shipped, 46.6 without PDL; torch.empty alone 4.1).
x = torch.randn(4, 32769, device="cuda", dtype=torch.bfloat16)
kernels.softmax(x)
prep = next(p for p in sm._FORWARD_CALL._prepared.values() if p.plan.kind == "split")
b = list(prep.bound[1])
b[4] = 0
prep.bound[1] = tuple(b)
print("apply without PDL", round(host_us(lambda: kernels.softmax(x)), 1), flush=True)
print("torch.empty alone", round(host_us(lambda: torch.empty(256, device="cuda")), 1), flush=True)
