"""Probe (2026-12-03, ninth session): a persistent row sum with several rows in flight a
program, loads through registers (H200, bf16, device time from CUDA-graph replay, cold L2).
Exploration, not a study.

Why: the row sum's targets want 95% of the copy peak at 16M elements (32 MB read); the block
plan (one row a program, 4096 programs at 4096 x 4096) reads at 84-86%.  The floor probe
(notes/2026-12-02-probe-rowsum-floor-f901a52.log) put a kernel that stores one value at 1.09
µs with 132 programs and 3.23 with 4096: part of the gap may be the programs' scheduling.
notes/probe_rowsum.py walked rows with a persistent grid but prefetched them through shared
memory (``tl.range(num_stages=2-4)``) and lost (10.08 against 9.39 µs).  Here each of
``132 x per_sm`` programs loads ``ROWS`` whole rows at once into registers (16-byte vector
loads, no shared memory), sums them and takes the next ``ROWS``: ``ROWS x width x 2`` bytes
in flight a program.

    python3 notes/probe_rowsum_persistent.py > $OUT/probe_rowsum_persistent.log
"""

from __future__ import annotations

import json
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, ".")
sys.path.insert(0, "notes")
from probe_staged_split import copy_bandwidth  # the copy peak, measured the same way in every probe

from bench.timing import Warmup, replay_median_us, rotation_sets
from kernels import row_sum


@triton.jit(do_not_specialize=["n_rows", "stride"])
def _row_sum_rows(x_ptr, out_ptr, n_rows: tl.int64, stride: tl.int64, WIDTH: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    stride = (stride // 8) * 8  # the caller's rows are 16-byte aligned: shows the compiler the multiple
    cols = tl.arange(0, WIDTH)
    r = tl.arange(0, ROWS)
    for first in tl.range(pid * ROWS, n_rows, tl.num_programs(0) * ROWS, num_stages=1):
        rows = first + r
        x = tl.load(x_ptr + rows[:, None] * stride + cols[None, :], mask=rows[:, None] < n_rows, other=0.0)
        tl.store(out_ptr + rows, tl.sum(x.to(tl.float32), axis=1).to(out_ptr.dtype.element_ty), mask=rows < n_rows)


def persistent(x: torch.Tensor, out: torch.Tensor, per_sm: int, rows: int, warps: int) -> None:
    n, width = x.shape
    assert x.stride(0) % 8 == 0 and x.stride(1) == 1
    grid = (min(triton.cdiv(n, rows), 132 * per_sm),)
    _row_sum_rows[grid](x, out, n, x.stride(0), WIDTH=width, ROWS=rows, num_warps=warps)


def main() -> None:
    copy_gbps = copy_bandwidth()
    print(json.dumps({"copy_GBps": round(copy_gbps, 1)}), flush=True)
    warm = Warmup(torch.device("cuda"))
    for n, width in ((4096, 4096), (16384, 1024)):
        run_shape(n, width, warm, copy_gbps)


def run_shape(n: int, width: int, warm: Warmup, copy_gbps: float) -> None:
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(n + width)
    nbytes = n * width * 2
    sets = rotation_sets(nbytes, torch.cuda.get_device_properties(0).L2_cache_size)
    xs = [torch.randn(n, width, device=dev, dtype=torch.bfloat16, generator=gen) for _ in range(sets)]
    outs = [torch.empty(n, device=dev, dtype=torch.bfloat16) for _ in range(sets)]
    ref = xs[0].double().sum(-1)
    variants = {"ours": lambda i: row_sum(xs[i]), "torch": lambda i: torch.sum(xs[i], -1)}
    for per_sm in (2, 4):
        for rows in (1, 2, 4, 8):
            for warps in (4, 8):
                elems = rows * width // (32 * warps)
                if not 8 <= elems <= 64:
                    continue
                variants[f"p{per_sm}-r{rows}-w{warps}"] = lambda i, c=(per_sm, rows, warps): persistent(
                    xs[i], outs[i], *c
                )
    for name, fn in variants.items():
        warm.maybe_burst()
        try:
            outs[0].fill_(float("nan"))
            got = fn(0)
            torch.cuda.synchronize()
            got = got if isinstance(got, torch.Tensor) else outs[0]
            err = (got.double() - ref).abs().max().item()
            us = replay_median_us(fn, sets, 7)
        except Exception as e:  # reported, the sweep goes on
            print(json.dumps({"shape": f"{n}x{width}", "config": name, "error": repr(e)[:300]}), flush=True)
            continue
        share = round(nbytes / (copy_gbps * 1e3) / us, 3)
        print(json.dumps({"shape": f"{n}x{width}", "config": name, "us": round(us, 2), "copy_share": share,
                          "max_abs_err": err}), flush=True)  # fmt: skip
    xs.clear()
    outs.clear()
    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
