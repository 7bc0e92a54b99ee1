"""Probe: the kernels behind missed targets, run a few times each so that Nsight Compute can
profile launches (H200, bf16).  Each probe warms up (compiles; torch.compile autotunes) before
``cudaProfilerStart``, so ``ncu --profile-from-start off`` sees only the timed calls.
Exploration, not a study: the published numbers come from `python -m bench run ...`.

* ``ce_loss``: cross-entropy loss only (no gradient), 8192 x 128256: 943 us in run
  cross_entropy-20261201T151117Z-f8c9bf2, reading at 2.2 TB/s where QuACK reads at 3.4.
* ``ce_step``: the in-place training step's forward kernel at the same shape (loss and
  gradient in one launch).
* ``ce_step_50257``: the training step at 8192 x 50257, 1.11x slower under cross-entropy's own
  policy (run cross_entropy-20261201T224435Z-20f44fb) than under softmax's.
* ``rms_bwd``: residual RMSNorm's fused backward at 16384 x 4096 (~180 us, ~2.2 TB/s).
* ``split_reduce``: softmax's split plan at 64 x 131072, its reduce launch alone (8.4-9.4 us
  for 16.8 MB in notes/2026-12-02-probe-split-coop-0a038a5.log), beside ``rowsum_16mb``, the
  row sum's block plan over the same 16.8 MB (2048 x 4096), whose fixed cost is ~3 us less.
* ``split_whole``: the whole two-launch split at 64 x 131072.
* ``mm_spread_N`` / ``mm_whole_N``: the persistent GEMM at N³ bf16 with its stream-K tail
  and without (at 4096³ the tail cost 30 µs more than it saved, at 8192³ it saved 46 µs:
  notes/2026-12-03-probe-matmul-streamk-6406b22.log; ran at 6cc31e8, the tail has since been
  removed, so these two probes now time the same kernel).
* ``mm_gG_N``: the persistent GEMM at N³ bf16 with its own tile (128x256x64, 3 stages, 8 warps)
  in groups of G tile rows (``mm_g1_8192``, ``mm_g8_8192``, ``mm_g16_8192``, ...): the GEMM
  page reads that grouped and row-major orders run level beyond the L2 because the tiles in
  flight share their K slices at any moment; the L2 hit rate and the DRAM bytes read of each
  order test that reading (2026-12-06).
* ``rope`` / ``rope_compile``: RoPE's forward at T = 16384, 32 / 8 heads, head dim 128: ours
  104 us, torch.compile's 85 in run rope-20261201T225422Z-b6cb1d3.

    ncu --clock-control none --profile-from-start off --section SpeedOfLight ... \\
        python3 notes/probe_ncu.py ce_loss
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable

import torch

import kernels


def _call(which: str) -> Callable[[], object]:
    dev = torch.device("cuda")
    if which.startswith("ce"):
        v = 50257 if which == "ce_step_50257" else 128256
        x = (torch.randn(8192, v, device=dev) * 2).to(torch.bfloat16)
        t = torch.randint(0, v, (8192,), device=dev)
        if which == "ce_loss":
            return lambda: kernels.cross_entropy(x, t)
        if which == "ce_step_50257":
            xg = x.requires_grad_()
            return lambda: torch.autograd.grad(kernels.cross_entropy(xg, t), xg)
        return lambda: kernels.cross_entropy(x.detach().requires_grad_(), t, inplace_backward=True)
    if which == "rms_bwd":
        x = torch.randn(16384, 4096, device=dev, dtype=torch.bfloat16, requires_grad=True)
        r = torch.randn(16384, 4096, device=dev, dtype=torch.bfloat16, requires_grad=True)
        w = torch.randn(4096, device=dev, dtype=torch.bfloat16, requires_grad=True)
        dy, dh = torch.randn_like(x), torch.randn_like(x)
        return lambda: torch.autograd.grad(kernels.rms_norm(x, (4096,), w, 1e-6, residual=r), (x, r, w), (dy, dh))
    if which in ("split_reduce", "split_whole"):
        sys.path.insert(0, "notes")
        from probe_l2 import reduce_only

        from kernels.softmax import forward_rows, plan_for

        x = torch.randn(64, 131072, device=dev, dtype=torch.bfloat16)
        y = torch.empty_like(x)
        plan = plan_for(x, y)[0]
        print("plan", plan, flush=True)
        if which == "split_whole":
            return lambda: forward_rows(x, y, plan)
        run = reduce_only(plan)
        return lambda: run(x, y)
    if which == "rowsum_16mb":
        x = torch.randn(2048, 4096, device=dev, dtype=torch.bfloat16)
        return lambda: kernels.row_sum(x)
    if which.startswith("rope"):
        q = torch.randn(1, 16384, 32, 128, device=dev, dtype=torch.bfloat16).transpose(1, 2)
        k = torch.randn(1, 16384, 8, 128, device=dev, dtype=torch.bfloat16).transpose(1, 2)
        emb = torch.randn(1, 16384, 128, device=dev, dtype=torch.bfloat16)
        cos, sin = emb.cos(), emb.sin()
        if which == "rope":
            return lambda: kernels.rope(q, k, cos, sin)
        from bench.studies.rope import hf_rope

        fn = torch.compile(hf_rope)
        return lambda: fn(q, k, cos, sin)
    if re.fullmatch(r"mm_g\d+_\d+", which):
        from kernels.matmul import PERSISTENT_CONFIG, matmul

        group, n = (int(v) for v in which[4:].split("_"))
        a = torch.randn(n, n, device=dev).to(torch.bfloat16)
        b = torch.randn(n, n, device=dev).to(torch.bfloat16)
        config = dataclasses.replace(PERSISTENT_CONFIG, group_m=group)
        print("config", config, flush=True)
        return lambda: matmul(a, b, variant="persistent", config=config)
    if which.startswith("mm_"):  # mm_spread_4096 / mm_whole_4096 / mm_spread_8192 / mm_whole_8192
        import importlib

        mm = importlib.import_module("kernels.matmul")
        _, how, size = which.split("_")
        n = int(size)
        a = torch.randn(n, n, device=dev).to(torch.bfloat16)
        b = torch.randn(n, n, device=dev).to(torch.bfloat16)
        mm.STREAM_K_MIN_GAIN = 0.01 if how == "spread" else 2.0
        return lambda: mm.matmul(a, b, variant="persistent")
    raise SystemExit(f"unknown probe {which!r}")


def main(which: str) -> None:
    torch.manual_seed(0)
    call = _call(which)
    with (
        torch.no_grad()
        if which in ("ce_loss", "rope", "rope_compile", "split_reduce", "split_whole", "rowsum_16mb")
        or which.startswith("mm_")
        else torch.enable_grad()
    ):
        for _ in range(3):
            call()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for _ in range(2):
            call()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main(sys.argv[1])
