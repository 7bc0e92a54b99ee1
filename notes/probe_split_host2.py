"""Probe: where the host time of an eager split-plan softmax call goes (H200).

python notes/probe_split_host2.py
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


x = torch.randn(4, 32769, device="cuda", dtype=torch.bfloat16)
kernels.softmax(x)
torch.cuda.synchronize()
prep = next(p for p in sm._FORWARD_CALL._prepared.values() if p.plan.kind == "split")
print("as shipped", round(host_us(lambda: kernels.softmax(x)), 1), flush=True)
launch0 = prep.bound[0][0]
print("launch object", type(launch0), getattr(launch0, "__module__", None), getattr(launch0, "__qualname__", None))
b = list(prep.bound[1])
b[4] = 0
prep.bound[1] = tuple(b)
print("apply without PDL", round(host_us(lambda: kernels.softmax(x)), 1), flush=True)
scratch = torch.empty(4 * 32 * 2, device="cuda")
print("torch.empty alone", round(host_us(lambda: torch.empty(256, device="cuda")), 1), flush=True)
