"""Probe: the looped plan on a persistent grid (``RowPlan.persist`` programs per SM, each
walking rows p, p + programs, ...) with the loop's loads pipelined through shared memory
(``stages``), for the wide rows whose second pass misses the L2 (H200, bf16, device time by
CUDA events over 20 calls after one, every input past the L2).

Why: the cross-entropy step at 8192 x 128256 reads the logits twice and writes the gradient
once (6.3 GB, 1755 us in run cross_entropy-20261201T224435Z-20f44fb: 3.6 TB/s, while its
target, 0.7x Liger's time, needs about 1640), and softmax at 4096 x 50257 runs at 76% of the
copy.  With one program per row, some 500 rows are in flight and the second pass finds only
their last blocks in the L2 (50 MB).  A grid of 1-2 programs per SM holds 132-264 rows in
flight; pipelining stages (cp.async, no registers) keep enough bytes in flight per SM.  The
persistent grid without stages was slower on 2026-11-30 (notes/2026-11-30-probe-wide-persistent-grid.log).
JSON lines.

    python3 notes/probe_looped_persist.py > $OUT/probe_looped_persist.log
"""

from __future__ import annotations

import json

import torch

from bench.timing import mean_event_us as time_us
from kernels.cross_entropy import forward_rows as ce_rows
from kernels.plans import RowPlan
from kernels.softmax import forward_rows as sm_rows

TILES = [(4096, 8), (8192, 16), (16384, 16)]
CONFIGS = [(p, b, w, s) for p in (1, 2) for b, w in TILES for s in (1, 3)]


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def plans(width: int) -> list[RowPlan | None]:
    out: list[RowPlan | None] = [None]  # the planner's choice
    out += [RowPlan("looped", b, w, stages=s, persist=p) for p, b, w, s in CONFIGS if b < width]
    return out


def probe_ce(n: int, v: int) -> None:
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    x = (torch.randn((n, v), generator=g, device=dev) * 2).to(torch.bfloat16)
    t = torch.randint(0, v, (n,), generator=g, device=dev)
    loss = torch.empty(n, device=dev)
    scale = torch.full((n,), 1.0 / n, device=dev)
    grad = torch.empty_like(x)
    want_loss = None
    for plan in plans(v):
        rec = {"op": "cross_entropy", "shape": f"{n}x{v}", "plan": plan.label if plan else "planner"}
        if plan is not None:
            rec |= {"stages": plan.stages, "warps": plan.num_warps}
        try:
            step = time_us(lambda p=plan: ce_rows(x, t, loss, grad2d=grad, row_scale=scale, plan=p))
            only = time_us(lambda p=plan: ce_rows(x, t, loss, plan=p))
        except Exception as exc:  # a configuration that does not compile or launch
            emit(**rec, error=repr(exc)[:200])
            continue
        if want_loss is None:
            want_loss = loss.clone()
        emit(**rec, step_us=round(step, 1), loss_us=round(only, 1), step_TBps=round(3 * x.numel() * 2 / step / 1e6, 2),
             loss_same=bool(torch.allclose(loss, want_loss, rtol=1e-5, atol=1e-5)))  # fmt: skip


def probe_softmax(n: int, v: int) -> None:
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1)
    x = (torch.randn((n, v), generator=g, device=dev) * 2).to(torch.bfloat16)
    y = torch.empty_like(x)
    want = torch.softmax(x.float(), dim=-1)
    for plan in plans(v):
        rec = {"op": "softmax", "shape": f"{n}x{v}", "plan": plan.label if plan else "planner"}
        if plan is not None:
            rec |= {"stages": plan.stages, "warps": plan.num_warps}
        try:
            us = time_us(lambda p=plan: sm_rows(x, y, p))
        except Exception as exc:
            emit(**rec, error=repr(exc)[:200])
            continue
        err = float((y.float() - want).abs().max())
        emit(**rec, us=round(us, 1), TBps=round(2 * x.numel() * 2 / us / 1e6, 2), max_abs_err=err)


if __name__ == "__main__":
    probe_ce(8192, 128256)
    probe_softmax(4096, 50257)
    probe_ce(4096, 50257)
