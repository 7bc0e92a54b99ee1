"""Probe: the kernels behind three missed targets, run a few times each so that Nsight Compute
can profile one launch (H200, bf16).  Exploration, not a study: the published numbers come
from `python -m bench run ...`.

* ``ce_loss``: cross-entropy loss only (no gradient), 8192 x 128256: 943 us in run
  cross_entropy-20261201T151117Z-f8c9bf2, reading at 2.2 TB/s where QuACK reads at 3.4.
* ``ce_step``: the in-place training step's forward kernel at the same shape (loss and
  gradient in one launch).
* ``rms_bwd``: residual RMSNorm's fused backward at 16384 x 4096 (~180 us, ~2.2 TB/s).

    ncu --clock-control none -k regex:row_ --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight ... python3 notes/probe_ncu.py ce_loss
"""

from __future__ import annotations

import sys

import torch

import kernels


def main(which: str) -> None:
    torch.manual_seed(0)
    dev = torch.device("cuda")
    if which.startswith("ce"):
        x = (torch.randn(8192, 128256, device=dev) * 2).to(torch.bfloat16)
        t = torch.randint(0, 128256, (8192,), device=dev)
        for _ in range(4):
            if which == "ce_loss":
                with torch.no_grad():
                    kernels.cross_entropy(x, t)
            else:
                xx = x.detach().requires_grad_()
                kernels.cross_entropy(xx, t, inplace_backward=True)
    elif which == "rms_bwd":
        x = torch.randn(16384, 4096, device=dev, dtype=torch.bfloat16, requires_grad=True)
        r = torch.randn(16384, 4096, device=dev, dtype=torch.bfloat16, requires_grad=True)
        w = torch.randn(4096, device=dev, dtype=torch.bfloat16, requires_grad=True)
        dy, dh = torch.randn_like(x), torch.randn_like(x)
        for _ in range(4):
            y, h = kernels.rms_norm(x, (4096,), w, 1e-6, residual=r)
            torch.autograd.grad((y, h), (x, r, w), (dy, dh))
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1])
