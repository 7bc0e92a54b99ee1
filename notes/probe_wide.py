"""Probe: wide-row softmax plans on the GPU, every configuration forced, at the shapes the
issue's targets name (H200, bf16 forward, device time from CUDA-graph replay, cold L2 by
rotating through input sets).  Exploration, not a study: it prints a table and a JSON line per
configuration; the published numbers come from `python -m bench run softmax` / `rowgrid`.

    python notes/probe_wide.py > $OUT/probe.log
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch

sys.path.insert(0, ".")
from bench.timing import Warmup, make_timer, rotation_sets
from kernels import _rowwise
from kernels.plans import RowPlan, looped_programs, split_geometry
from kernels.softmax import forward_rows, plan_for

LOOPED_WIDTHS = [(4096, 50257), (8192, 32768), (4096, 151936), (2048, 65536), (4096, 32769), (4096, 32000)]
SPLIT_SHAPES = [(64, 131072), (8, 1048576), (1000, 50257), (132, 50257), (4, 32769)]
LOOPED = [(8192, 8), (16384, 8), (16384, 16), (32768, 16)]
L2_SHARES = [0.25, 0.5, 0.75]  # looped grids capped so the rows in flight fill this share of L2
SPLIT = [(2048, 4), (4096, 8), (8192, 16)]


def time_us(fn_for_set, sets: int) -> float:
    timer, _eager = make_timer(fn_for_set, sets, target_ms=0.5)
    samples = [timer.sample_us() for _ in range(7)]
    timer.release()
    return statistics.median(samples)


def run_shape(rows: int, cols: int, plans: dict[str, RowPlan | None], warm: Warmup, copy_gbps: float) -> None:
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(rows * 7919 + cols)
    nbytes = rows * cols * 2 * 2
    sets = rotation_sets(nbytes, torch.cuda.get_device_properties(0).L2_cache_size)
    xs = [torch.randn(rows, cols, device=dev, dtype=torch.bfloat16, generator=gen) * 3 for _ in range(sets)]
    ys = [torch.empty_like(x) for x in xs]
    ref = torch.softmax(xs[0].double(), dim=-1)
    floor = nbytes / copy_gbps / 1e3
    for name, plan in plans.items():
        warm.maybe_burst()
        _rowwise.SPLIT_PDL = not name.endswith("-nopdl")
        try:
            if plan is None:

                def fn(i: int) -> None:
                    torch.softmax(xs[i], dim=-1)

                ys[0] = torch.softmax(xs[0], dim=-1)
            else:

                def fn(i: int, plan: RowPlan = plan) -> None:
                    forward_rows(xs[i], ys[i], plan)

            fn(0)
            torch.cuda.synchronize()
            err = (ys[0].double() - ref).abs().max().item()
            us = time_us(fn, sets)
        except Exception as e:  # a configuration that does not compile or launch is reported
            print(json.dumps({"shape": f"{rows}x{cols}", "config": name, "error": repr(e)[:300]}), flush=True)
            continue
        row = {"shape": f"{rows}x{cols}", "config": name, "us": round(us, 2), "copy_share": round(floor / us, 3)}
        print(json.dumps({**row, "max_abs_err": err, "sets": sets}), flush=True)
    xs.clear()
    ys.clear()
    torch.cuda.empty_cache()


def main() -> None:
    dev = torch.device("cuda")
    a = torch.empty(1 << 28, device=dev, dtype=torch.float32)
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        b.copy_(a)
    torch.cuda.synchronize()
    copy_gbps = 2 * a.numel() * 4 * 20 / (time.perf_counter() - t0) / 1e9
    del a, b
    print(json.dumps({"copy_GBps": round(copy_gbps, 1)}), flush=True)
    warm = Warmup(dev)
    for rows, cols in LOOPED_WIDTHS:
        x = torch.empty(rows, cols, device=dev, dtype=torch.bfloat16)
        planned = plan_for(x, x)[0]
        plans: dict[str, RowPlan | None] = {"torch": None, f"planner:{planned.label}": planned}
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        for block, warps in LOOPED:
            plans[f"looped-{block}w{warps}"] = RowPlan("looped", block, warps)
            for share in L2_SHARES:
                programs = looped_programs(cols * 2, 132, l2, share)
                name = f"looped-{block}w{warps}-l2x{share}-p{programs}"
                plans[name] = RowPlan("looped", block, warps, programs=programs)
        run_shape(rows, cols, plans, warm, copy_gbps)
    for rows, cols in SPLIT_SHAPES:
        x = torch.empty(rows, cols, device=dev, dtype=torch.bfloat16)
        planned = plan_for(x, x)[0]
        plans = {"torch": None, f"planner:{planned.label}": planned}
        pad = 7 if rows > 1 and cols % 8 else 0
        for chunk, warps in SPLIT:
            chunks, span = split_geometry(cols + pad, chunk, chunk)
            plans[f"split-{chunk}w{warps}"] = RowPlan("split", chunk, warps, chunks=chunks, span=span)
            plans[f"split-{chunk}w{warps}-nopdl"] = RowPlan("split", chunk, warps, chunks=chunks, span=span)
        for block, warps in LOOPED[:2]:
            plans[f"looped-{block}w{warps}"] = RowPlan("looped", block, warps)
        run_shape(rows, cols, plans, warm, copy_gbps)


if __name__ == "__main__":
    main()
