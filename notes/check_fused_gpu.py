"""GPU smoke check of this stop's untimed code (H200): the RMSNorm fused backward against
float64 and against the row plans, with a rough event-timed comparison (a note, not a
published number: the RMSNorm study publishes), and the matmul and cross-entropy functionals
against float64 at one shape each.

    python notes/check_fused_gpu.py
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, ".")
import kernels

torch.manual_seed(0)
dev = "cuda"
bad = 0
for rows, width in ((16384, 4096), (8191, 5120), (4096, 7168), (3, 8192)):
    x = torch.randn(rows, width, device=dev, dtype=torch.bfloat16, requires_grad=True)
    r = torch.randn(rows, width, device=dev, dtype=torch.bfloat16, requires_grad=True)
    w = (1 + 0.1 * torch.randn(width, device=dev)).to(torch.bfloat16).requires_grad_()
    dy = torch.randn(rows, width, device=dev, dtype=torch.bfloat16)
    dh = torch.randn(rows, width, device=dev, dtype=torch.bfloat16)
    h64 = (x.double() + r.double()).detach().requires_grad_()
    w64 = w.double().detach().requires_grad_()
    y64 = F.rms_norm(h64, (width,), w64, 1e-6)
    gx64, gw64 = torch.autograd.grad((y64 * dy.double()).sum() + (h64 * dh.double()).sum(), (h64, w64))
    times = {}
    for plan in (None, "fused"):
        y, h = kernels.rms_norm(x, (width,), w, 1e-6, residual=r, plan=plan)
        gx, _, gw = torch.autograd.grad((y, h), (x, r, w), (dy, dh))
        ex = ((gx.double() - gx64).norm() / gx64.norm()).item()
        ew = ((gw.double() - gw64).norm() / gw64.norm()).item()
        ok = ex < 1e-2 and ew < 1e-2
        bad += not ok
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(3):
            torch.autograd.grad(kernels.rms_norm(x, (width,), w, 1e-6, residual=r, plan=plan), (x, r, w), (dy, dh))
        torch.cuda.synchronize()
        start.record()
        for _ in range(20):
            torch.autograd.grad(kernels.rms_norm(x, (width,), w, 1e-6, residual=r, plan=plan), (x, r, w), (dy, dh))
        end.record()
        torch.cuda.synchronize()
        times[plan] = start.elapsed_time(end) / 20 * 1e3
        print(f"rmsnorm {rows}x{width} plan={plan}: dx rel {ex:.2e}, dw rel {ew:.2e} {'ok' if ok else 'BAD'}")
    print(f"  eager training step, events: row plans {times[None]:.1f} us, fused {times['fused']:.1f} us")

a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
b = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
ref = a.double() @ b.double()
for variant in (None, "fixed", "persistent", "autotuned"):
    c = kernels.matmul(a, b, variant=variant)
    e = ((c.double() - ref).norm() / ref.norm()).item()
    bad += e > 1e-2
    print(f"matmul 4096^3 variant={variant}: rel {e:.2e}")
logits = torch.randn(4096, 128256, device=dev, dtype=torch.bfloat16, requires_grad=True)
target = torch.randint(0, 128256, (4096,), device=dev)
loss = kernels.cross_entropy(logits, target)
(g,) = torch.autograd.grad(loss, logits)
l64 = logits.double().detach().requires_grad_()
ref_loss = F.cross_entropy(l64, target)
(g64,) = torch.autograd.grad(ref_loss, l64)
el, eg = abs(loss.item() - ref_loss.item()), ((g.double() - g64).norm() / g64.norm()).item()
bad += el > 8e-3 * abs(ref_loss.item()) or eg > 1e-2  # the loss is returned in bf16, as torch's
print(f"cross_entropy 4096x128256: loss abs {el:.2e}, grad rel {eg:.2e}")
print("ALL OK" if not bad else f"{bad} BAD")
