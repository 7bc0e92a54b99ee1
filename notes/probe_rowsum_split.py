"""Probe (2026-12-03, tenth session): the row sum's split plan on few wide rows (H200, device
time from CUDA-graph replay, cold L2).  Exploration, not a study.

Why: run rowsum_add-20261203T033947Z-a8b8a77 had the row sum at 16 x 1048576 bf16 at 11.64 µs
cold (the split) against torch.compile's 10.4 and the block plan's 9.42 for the same 32 MB at
4096 x 4096.  Its second launch merged each row's chunk sums with a program per chunk (2048
programs, all but 16 throwing their merge away); since this commit it takes one program per
row.  This times the planner's split (that change) and forced splits of other chunk lengths
against torch.sum and torch.compile, on the study's shape and on held-out ones (odd widths,
other row counts), bf16 and fp32.

    python3 notes/probe_rowsum_split.py > $OUT/probe_rowsum_split.log
"""

from __future__ import annotations

import json
import sys

import torch

sys.path.insert(0, ".")
sys.path.insert(0, "notes")
from probe_staged_split import copy_bandwidth  # the copy peak, measured the same way in every probe

from bench.timing import Warmup, replay_median_us, rotation_sets
from kernels import row_sum
from kernels.plans import RowPlan, split_geometry, warps_for
from kernels.rowsum import sum_rows

SHAPES = ((16, 1048576), (8, 2097152), (32, 524288), (48, 349525), (16, 1048575), (4, 4194304), (64, 262144))


def forced(width: int, chunk: int, block: int, warps: int) -> RowPlan:
    chunks, span = split_geometry(width, chunk, block)
    return RowPlan("split", block, warps, chunks=chunks, span=span)


def main() -> None:
    copy_gbps = copy_bandwidth()
    print(json.dumps({"copy_GBps": round(copy_gbps, 1)}), flush=True)
    warm = Warmup(torch.device("cuda"))
    for n, width in SHAPES:
        for dtype in (torch.bfloat16, torch.float32) if (n, width) == (16, 1048576) else (torch.bfloat16,):
            compiled = None
            if (n, width) in ((16, 1048576), (48, 349525)):  # compiling takes a while: two shapes
                compiled = torch.compile(lambda t: torch.sum(t, -1), dynamic=False)  # one shape each
            run_shape(n, width, dtype, warm, copy_gbps, compiled)


def run_shape(n: int, width: int, dtype: torch.dtype, warm: Warmup, copy_gbps: float, compiled) -> None:  # type: ignore[no-untyped-def]
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(n + width)
    nbytes = n * width * torch.finfo(dtype).bits // 8
    sets = rotation_sets(nbytes, torch.cuda.get_device_properties(0).L2_cache_size)
    xs = [torch.randn(n, width, device=dev, dtype=dtype, generator=gen) for _ in range(sets)]
    outs = [torch.empty(n, device=dev, dtype=dtype) for _ in range(sets)]
    ref = xs[0].double().sum(-1)
    variants = {
        "ours": lambda i: row_sum(xs[i]),
        "torch": lambda i: torch.sum(xs[i], -1),
    }
    if compiled is not None:
        variants["compile"] = lambda i: compiled(xs[i])
    for chunk in (4096, 8192, 16384, 32768, 65536):
        for block in (4096, 8192):
            if block > chunk:
                continue
            plan = forced(width + 8, chunk, block, warps_for(block))  # + the window (odd widths)
            variants[f"split-{chunk}-b{block}"] = lambda i, p=plan: sum_rows(xs[i], outs[i], p)
    for name, fn in variants.items():
        warm.maybe_burst()
        try:
            outs[0].fill_(float("nan"))
            got = fn(0)
            torch.cuda.synchronize()
            got = got if isinstance(got, torch.Tensor) else outs[0]
            err = ((got.double() - ref).abs().max() / ref.abs().max()).item()
            again = fn(0)
            torch.cuda.synchronize()
            same = bool(torch.equal(got, again if isinstance(again, torch.Tensor) else outs[0]))
            us = replay_median_us(fn, sets, 9)
        except Exception as e:  # reported, the sweep goes on
            print(json.dumps({"shape": f"{n}x{width}", "dtype": str(dtype), "config": name, "error": repr(e)[:300]}),
                  flush=True)  # fmt: skip
            continue
        share = round(nbytes / (copy_gbps * 1e3) / us, 3)
        print(json.dumps({"shape": f"{n}x{width}", "dtype": str(dtype)[6:], "config": name, "us": round(us, 2),
                          "copy_share": share, "rel_err": err, "same_bits_again": same}), flush=True)  # fmt: skip
    xs.clear()
    outs.clear()
    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
