"""Probe: cross-entropy's looped plan at vocabulary widths (H200, bf16, device time by CUDA
events over 20 calls after warm-up; every input is past the L2).  Nsight Compute showed the
loss-only kernel at 8192 x 128256 (softmax's policy: 32768-element steps, 16 warps) with 128
registers a thread, one program per SM, 16 instructions per element and 58% of issue slots
busy (notes/2026-12-01-ncu-ce-0173ca4.txt): latency-bound with a row's loads and its
arithmetic serialized in the one resident program.  This times the step, warps and
pipelining depth that give more resident programs.  Exploration, not a study: JSON lines.

    python3 notes/probe_ce_plans.py > $OUT/probe-ce-plans.log
"""

from __future__ import annotations

import json

import torch

from bench.timing import mean_event_us as time_us
from kernels.cross_entropy import forward_rows
from kernels.plans import RowPlan

SHAPES = [(8192, 128256), (4096, 32000), (4096, 262144), (4096, 50257)]
CONFIGS = [(b, w, s) for b in (4096, 8192, 16384, 32768) for w in (4, 8, 16) for s in (1, 2)
           if 8 <= b // (32 * w) <= 64]  # fmt: skip


def main() -> None:
    dev = torch.device("cuda")
    for n, v in SHAPES:
        g = torch.Generator(device=dev).manual_seed(0)
        x = (torch.randn((n, v), generator=g, device=dev) * 2).to(torch.bfloat16)
        t = torch.randint(0, v, (n,), generator=g, device=dev)
        for block, warps, stages in [(None, None, None), *CONFIGS]:
            plan = None if block is None else RowPlan("looped", block, warps, stages=stages)
            rec = {"shape": f"{n}x{v}", "block": block, "warps": warps, "stages": stages}
            print(json.dumps(rec | measure(x, t, plan)), flush=True)


def measure(x: torch.Tensor, t: torch.Tensor, plan: RowPlan | None) -> dict[str, object]:
    n = x.shape[0]
    loss = torch.empty(n, device=x.device)
    scale = torch.full((n,), 1.0 / n, device=x.device)
    grad = torch.empty_like(x)
    try:
        fwd = time_us(lambda: forward_rows(x, t, loss, plan=plan))
        step = time_us(lambda: forward_rows(x, t, loss, grad2d=grad, row_scale=scale, plan=plan))
        used = forward_rows(x, t, loss, plan=plan)
    except Exception as exc:  # a configuration that does not compile or launch
        return {"error": repr(exc)[:200]}
    return {"plan": used.describe() if used is not None else None, "loss_us": round(fwd, 1),
            "step_us": round(step, 1), "loss_TBps": round(x.numel() * 2 / fwd / 1e6, 2),
            "step_TBps": round(x.numel() * 4 / step / 1e6, 2)}  # fmt: skip


if __name__ == "__main__":
    main()
