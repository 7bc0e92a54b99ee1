"""Probe: residual RMSNorm's fused backward (one persistent pass: dx and the weight gradient's
partials, then their column sum) at model widths (H200, bf16, device time by CUDA events over
20 calls; 4 passes of traffic: h, dy, dh read, dx written).  At 0173ca4 Nsight Compute put the
kernel at 164 us and 3.2 TB/s for 16384 x 4096 (notes/2026-12-01-ncu-ce-0173ca4.txt), 25%
occupancy: a row's reductions and stores leave its program with nothing in flight.  This
times it at 1-4 programs per SM and 4/8/16 warps, with and without issuing the next row's
loads (in their 16-bit storage type) before this row's arithmetic (``prefetch``).  JSON lines.

    python3 notes/probe_rms_bwd.py > $OUT/probe-rms-bwd.log
"""

from __future__ import annotations

import json

import torch

from bench.timing import mean_event_us as time_us
from kernels import rmsnorm
from kernels._rowwise import sm_count

SHAPES = [(16384, 4096), (8192, 5120), (8192, 7168), (4096, 4096), (4096, 8192)]


def main() -> None:
    dev = torch.device("cuda")
    sms = sm_count(dev)
    for n, w in SHAPES:
        g = torch.Generator(device=dev).manual_seed(0)
        h, dy, dh = (torch.randn((n, w), generator=g, device=dev).to(torch.bfloat16) for _ in range(3))
        weight = torch.randn(w, generator=g, device=dev).to(torch.bfloat16)
        dx = torch.empty_like(h)
        for per_sm in (1, 2, 3, 4):
            for prefetch in (False, True):
                for warps in (None, 4, 8, 16):
                    call = lambda p=per_sm * sms, f=prefetch, nw=warps, t=(h, dy, dx, weight), d=dh: (
                        rmsnorm.backward_fused(*t, 1e-6, d, p, prefetch=f, num_warps=nw)
                    )
                    try:
                        us = time_us(call)
                    except Exception as exc:  # registers or shared memory out of reach
                        print(json.dumps({"shape": f"{n}x{w}", "programs_per_sm": per_sm, "prefetch": prefetch,
                                          "warps": warps, "error": repr(exc)[:160]}), flush=True)  # fmt: skip
                        continue
                    print(json.dumps({"shape": f"{n}x{w}", "programs_per_sm": per_sm, "prefetch": prefetch,
                                      "warps": warps, "us": round(us, 1),
                                      "TBps": round(4 * h.numel() * 2 / us / 1e6, 2)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
