"""Probe: residual RMSNorm's fused backward (one persistent pass: dx and the weight gradient's
partials, then their column sum) at model widths (H200, bf16, device time by CUDA events over
20 calls; 3 passes of traffic without a residual (h, dy read, dx written), 4 with one).

At 0173ca4 Nsight Compute put the kernel at 164 us and 3.2 TB/s for 16384 x 4096
(notes/2026-12-01-ncu-ce-0173ca4.txt), and the probe at 2150860 found no setting of programs
per SM, warps or register prefetch that won everywhere.  On 2026-12-02 its PTX showed why it
was slow: with runtime row strides the compiler proved no alignment and every load and store
moved one element (``ld.global.b16``).  The kernel now shows the strides' multiple
(``_row_start``), and can have the compiler prefetch rows through shared memory (cp.async,
``stages``).  This times 1-3 programs per SM x warps x stages 1-3 (and register prefetch at
one stage) after that fix.  JSON lines.

    python3 notes/probe_rms_bwd.py > $OUT/probe_rms_bwd.log
"""

from __future__ import annotations

import json

import torch

from bench.timing import mean_event_us as time_us
from kernels import rmsnorm
from kernels._rowwise import sm_count

SHAPES = [(16384, 4096), (8192, 5120), (8192, 7168), (4096, 8192), (512, 4096), (2048, 2048), (1024, 4096)]


def main() -> None:
    dev = torch.device("cuda")
    sms = sm_count(dev)
    for n, w in SHAPES:
        g = torch.Generator(device=dev).manual_seed(0)
        h, dy, dh = (torch.randn((n, w), generator=g, device=dev).to(torch.bfloat16) for _ in range(3))
        weight = torch.randn(w, generator=g, device=dev).to(torch.bfloat16)
        dx = torch.empty_like(h)
        want = rmsnorm.backward_fused(h, dy, dx, weight, 1e-6, None, prefetch=False, num_warps=None, stages=1)
        want_dx = dx.clone()
        configs = [(p, nw, st, False) for p in (1, 2, 3) for nw in (None, 4 if w <= 2048 else 16) for st in (1, 2, 3)]
        configs += [(1, None, 1, True), (2, None, 1, True)]
        for residual in (False, True) if (n, w) == (16384, 4096) else (False,):
            for per_sm, warps, stages, prefetch in configs:
                args = (h, dy, dx, weight, 1e-6, dh if residual else None, per_sm * sms)
                kw = {"prefetch": prefetch, "num_warps": warps, "stages": stages}

                def call(args=args, kw=kw):  # type: ignore[no-untyped-def]
                    return rmsnorm.backward_fused(*args, **kw)

                rec = {"shape": f"{n}x{w}", "residual": residual, "programs_per_sm": per_sm, "warps": warps,
                       "stages": stages, "prefetch": prefetch}  # fmt: skip
                try:
                    us = time_us(call)
                    dw = call()
                except Exception as exc:  # registers or shared memory out of reach
                    print(json.dumps(rec | {"error": repr(exc)[:160]}), flush=True)
                    continue
                if not residual:  # the same math at every setting: dx bitwise, dw to fp32 rounding
                    rec["dx_same"] = bool(torch.equal(dx, want_dx))
                    rec["dw_rel"] = float(((dw.float() - want.float()).norm() / want.float().norm()).item())
                passes = 4 if residual else 3
                print(json.dumps(rec | {"us": round(us, 1), "TBps": round(passes * h.numel() * 2 / us / 1e6, 2)}),
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
