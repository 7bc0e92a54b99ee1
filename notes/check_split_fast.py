"""Check: the eager split path (RowCall's two-launch fast path) against float64 torch, forward
and backward, several dtypes, row counts and widths, then its host cost (H200).

    python notes/check_split_fast.py
"""

from __future__ import annotations

import sys
import time

import torch

sys.path.insert(0, ".")
import kernels

sm = sys.modules["kernels.softmax"]
bad = 0
for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64):
    for rows, cols in ((1, 50257), (4, 32769), (64, 131072), (3, 1048577), (20, 65536)):
        g = torch.Generator(device="cuda").manual_seed(rows * 31 + cols)
        x = (torch.randn(rows, cols, device="cuda", generator=g) * 4).to(dtype).requires_grad_()
        for call in range(3):  # the first call compiles, the later ones take the fast path
            y = kernels.softmax(x)
            dy = torch.randn(rows, cols, device="cuda", generator=g).to(dtype)
            (dx,) = torch.autograd.grad(y, x, dy)
            ref = torch.softmax(x.double(), -1)
            dref = ref * (dy.double() - (ref * dy.double()).sum(-1, keepdim=True))
            e, de = (y.double() - ref).abs().max().item(), (dx.double() - dref).abs().max().item()
            tol = 1e-12 if dtype == torch.float64 else 2e-5 if dtype == torch.float32 else 4e-3
            ok = e <= tol and de <= tol * 10
            bad += not ok
            if not ok or call == 2:
                print(dtype, rows, cols, call, "err", e, de, "OK" if ok else "FAIL", flush=True)
preps = [p for p in sm._FORWARD_CALL._prepared.values() if p.plan.kind == "split"]
print("split prepared:", len(preps), "with the fast pair:", sum(p.pair is not None for p in preps))
x = torch.randn(4, 32769, device="cuda", dtype=torch.bfloat16)
for label, fn in (("ours", lambda: kernels.softmax(x)), ("torch", lambda: torch.softmax(x, -1))):
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(300):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    print("host us per call 4x32769", label, round((t1 - t0) / 300 * 1e6, 1), flush=True)
print("FAILURES", bad)
