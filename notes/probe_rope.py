"""Probe: RoPE's forward at 32 q / 8 kv heads, head dim 128, bf16 (H200, device time by CUDA
events over 20 calls; every input past the L2 at T = 16384).  Run rope-20261201T223820Z-20f44fb
had ours at 109.4 us against torch.compile's 86.7 and Liger's 87.6 at T = 16384, writing
[B, H, T, D]-contiguous outputs from [B, T, H, D]-strided inputs (Hq runs of D elements, T * D
apart, per program).  This times the output layout (contiguous, or like the input) against
num_warps.  JSON lines.

    python3 notes/probe_rope.py > $OUT/probe-rope.log
"""

from __future__ import annotations

import importlib
import json

import torch

from bench.timing import mean_event_us as time_us

rope = importlib.import_module("kernels.rope")  # the module (kernels.rope is the function)


def main() -> None:
    dev = torch.device("cuda")
    d, hq, hk = 128, 32, 8
    for t in (4096, 16384):
        g = torch.Generator(device=dev).manual_seed(0)
        q = torch.randn((1, t, hq, d), generator=g, device=dev).to(torch.bfloat16).transpose(1, 2)
        k = torch.randn((1, t, hk, d), generator=g, device=dev).to(torch.bfloat16).transpose(1, 2)
        emb = torch.randn((1, t, d), generator=g, device=dev).to(torch.bfloat16)
        cos, sin = emb.cos(), emb.sin()
        moved = 2 * (q.numel() + k.numel()) * 2 + 2 * cos.numel() * 2
        for layout in ("contiguous", "like-input"):
            if layout == "contiguous":
                qo, ko = q.contiguous(), k.contiguous()
            else:
                qo, ko = torch.empty_like(q), torch.empty_like(k)
            for warps in (None, 2, 4, 8, 16):
                us = time_us(lambda w=warps, i=(q, k, cos, sin), o=(qo, ko): rope.rope_into(*i, *o, num_warps=w))
                print(json.dumps({"T": t, "layout": layout, "warps": warps, "us": round(us, 1),
                                  "TBps": round(moved / us / 1e6, 2)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
