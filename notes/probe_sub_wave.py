"""Probe (2026-12-04, twentieth session): products of about one wave or less, where cuBLAS
leads (1536³ at 0.68x, "not yet explained" on the GEMM page; 1024³, 2048³), and the
partial-wave losses (3072³, 3000x7168x3000, 2304x2048x6144, 4096³): which kernel cuBLAS
runs there (its name, from torch.profiler), and whether our persistent kernel with a
smaller tile (its split tail applied where kernels.matmul.tail_split finds one) would beat
the autotuned kernel the dispatch runs below one wave.  Device time: CUDA-graph replay
medians (bench.timing.replay_median_us, warm L2).  Exploration, not a study: JSON lines.

    python3 notes/probe_sub_wave.py > $OUT/probe_sub_wave.log
"""

from __future__ import annotations

import importlib
import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, ".")

from bench.timing import replay_median_us

km = importlib.import_module("kernels.matmul")

SHAPES = [(1024, 1024, 1024), (1536, 1536, 1536), (2048, 2048, 2048), (1536, 4096, 4096), (3072, 3072, 3072),
          (3000, 7168, 3000), (2304, 2048, 6144), (4096, 4096, 4096)]  # fmt: skip
SMALL = 2048 * 2048 * 2048  # persistent tiles other than the default only up to this size
TILES = [(128, 128, 64, 8, 3, 8), (128, 128, 64, 8, 4, 4), (128, 64, 64, 8, 4, 4), (64, 128, 64, 8, 4, 4)]


def cublas_kernels(a: torch.Tensor, b: torch.Tensor) -> list[str]:
    torch.mm(a, b)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.mm(a, b)
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})


def main() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
        b = (torch.randn(k, n, device="cuda", generator=gen) / k**0.5).to(torch.bfloat16)
        row: dict[str, object] = {"shape": f"{m}x{n}x{k}", "dispatch": km.dispatch(a, b)}
        row["cublas kernels"] = cublas_kernels(a, b)
        fns = {
            "cublas": lambda a=a, b=b: torch.mm(a, b),
            "default": lambda a=a, b=b: km.matmul(a, b),
            "autotuned": lambda a=a, b=b: km.matmul(a, b, variant="autotuned"),
            "persistent": lambda a=a, b=b: km.matmul(a, b, variant="persistent"),
            "warp_specialized": lambda a=a, b=b: km.matmul(a, b, variant="warp_specialized"),
        }
        if m * n * k <= SMALL:
            for t in TILES:
                cfg = km.TileConfig(*t)
                tiles = -(-m // t[0]) * -(-n // t[1])
                split = km.tail_split(tiles, -(-k // t[2]), 132)
                name = f"persistent {t} tail {split}"
                fns[name] = lambda a=a, b=b, cfg=cfg: km.matmul(a, b, variant="persistent", config=cfg)
        ref = a.double() @ b.double()
        times = {}
        for name, fn in fns.items():
            try:
                err = ((fn().double() - ref).norm() / ref.norm()).item()
                times[name] = (round(replay_median_us(lambda i, fn=fn: fn(), 1, samples=9), 2), f"{err:.1e}")
            except Exception as exc:  # a config that does not fit is a row, not the end of the probe
                times[name] = f"{type(exc).__name__}: {str(exc)[:120]}"
        row["us (graph replay median, rel err)"] = times
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
