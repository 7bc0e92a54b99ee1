"""Probe (2026-12-03, tenth session): RMSNorm with a residual at model widths that are not
powers of two, block plan by warps and looped plan by step, against Liger (H200, bf16, device
time from CUDA-graph replay, cold L2).  Exploration, not a study.

Why: run rmsnorm-20261203T085201Z-41e9e87 had the forward at 4096 x 14336 cold at 123.1 µs
against Liger's 115.1, QuACK's 116.6 and torch.compile's 119.9: the planner's block plan holds a
row of 14336 in a 16384-wide block of 16 warps (12.5% of it masked), two inputs at once.

    python3 notes/probe_rms_wide_block.py > $OUT/probe_rms_wide_block.log
"""

from __future__ import annotations

import json
import sys

import torch

sys.path.insert(0, ".")
sys.path.insert(0, "notes")

from bench.timing import Warmup, replay_median_us, rotation_sets
from kernels import rms_norm
from kernels.plans import RowPlan
from kernels.rmsnorm import forward_rows

EPS = 1e-6


def main() -> None:
    warm = Warmup(torch.device("cuda"))
    try:
        from bench.studies.rmsnorm import _liger_fn

        liger, entry = _liger_fn()
    except Exception as e:  # reported: the probe goes on without it
        liger, entry = None, repr(e)[:200]
    print(json.dumps({"liger": entry}), flush=True)
    for n, width in ((4096, 14336), (2048, 14336), (8192, 5120), (4096, 7168), (4096, 12288)):
        run_shape(n, width, warm, liger)


def run_shape(n: int, width: int, warm: Warmup, liger) -> None:  # type: ignore[no-untyped-def]
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(width)
    nbytes = 4 * n * width * 2
    sets = rotation_sets(nbytes, torch.cuda.get_device_properties(0).L2_cache_size)
    xs = [torch.randn(n, width, device=dev, dtype=torch.bfloat16, generator=gen) for _ in range(sets)]
    rs = [torch.randn(n, width, device=dev, dtype=torch.bfloat16, generator=gen) for _ in range(sets)]
    w = torch.randn(width, device=dev, dtype=torch.bfloat16, generator=gen)
    ys = [torch.empty_like(xs[0]) for _ in range(sets)]
    hs = [torch.empty_like(xs[0]) for _ in range(sets)]
    variants = {"ours": lambda i: rms_norm(xs[i], (width,), w, EPS, residual=rs[i])}
    if liger is not None:
        variants["liger"] = lambda i: liger(xs[i], rs[i], w)
    whole = 1 << (width - 1).bit_length()
    for warps in (4, 8, 16, 32):
        plan = RowPlan("block", whole, warps)
        variants[f"block-{whole}-w{warps}"] = lambda i, p=plan: forward_rows(xs[i], ys[i], w, EPS, rs[i], hs[i], p)
    for chunk in (2048, 4096, 8192):
        for warps in (4, 8):
            plan = RowPlan("looped", chunk, warps)
            variants[f"looped-{chunk}-w{warps}"] = lambda i, p=plan: forward_rows(xs[i], ys[i], w, EPS, rs[i], hs[i], p)
    h = xs[0].double() + rs[0].double()
    ref = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * w.double()
    for name, fn in variants.items():
        warm.maybe_burst()
        try:
            ys[0].fill_(float("nan"))
            got = fn(0)
            torch.cuda.synchronize()
            y = got[0] if isinstance(got, tuple) else ys[0]
            err = ((y.double() - ref).norm() / ref.norm()).item()
            us = replay_median_us(fn, sets, 9)
        except Exception as e:  # reported, the sweep goes on
            print(json.dumps({"shape": f"{n}x{width}", "config": name, "error": repr(e)[:300]}), flush=True)
            continue
        print(json.dumps({"shape": f"{n}x{width}", "config": name, "us": round(us, 2), "rel_err": err}), flush=True)
    for held in (xs, rs, ys, hs):
        held.clear()
    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
