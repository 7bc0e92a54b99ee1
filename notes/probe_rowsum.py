"""Probe: a persistent, software-pipelined row sum against the row base's block plan (H200,
bf16, device time from CUDA-graph replay, cold L2).  The row sum's targets want 95% of the
copy peak at 16M elements (32 MB read), where the block plan reads at 86%: one 8 KB row a
program, two 16-byte loads a thread, then a reduction with nothing in flight.  Here each
program walks rows ``pid, pid + G, ...`` and prefetches the next rows through shared memory
(``tl.range(num_stages=...)``, cp.async), so loads stay in flight across rows.
Exploration, not a study.

    python notes/probe_rowsum.py > $OUT/probe-rowsum.log
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, ".")
from bench.timing import Warmup, make_timer, rotation_sets
from kernels import row_sum


@triton.jit(do_not_specialize=["n_rows", "stride"])
def _row_sum_streamed(x_ptr, out_ptr, n_rows: tl.int64, stride: tl.int64, WIDTH: tl.constexpr, BLOCK: tl.constexpr,
                      VEC: tl.constexpr, STAGES: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for r in tl.range(pid, n_rows, tl.num_programs(0), num_stages=STAGES):
        base = tl.multiple_of(r * stride, VEC)
        if WIDTH == BLOCK:
            x = tl.load(x_ptr + base + cols)
        else:
            x = tl.load(x_ptr + base + cols, mask=cols < WIDTH, other=0.0)
        tl.store(out_ptr + r, tl.sum(x.to(tl.float32), axis=0).to(out_ptr.dtype.element_ty))


def streamed(x: torch.Tensor, out: torch.Tensor, per_sm: int, warps: int, stages: int) -> None:
    rows, width = x.shape
    grid = (min(rows, 132 * per_sm),)
    _row_sum_streamed[grid](x, out, rows, x.stride(0), WIDTH=width, BLOCK=triton.next_power_of_2(width), VEC=8,
                            STAGES=stages, num_warps=warps)  # fmt: skip


def main() -> None:
    dev = torch.device("cuda")
    a = torch.empty(1 << 28, device=dev, dtype=torch.float32)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        b.copy_(a)
    end.record()
    end.synchronize()
    copy_gbps = 2 * a.numel() * 4 * 20 / (start.elapsed_time(end) / 1e3) / 1e9
    del a, b
    print(json.dumps({"copy_GBps": round(copy_gbps, 1)}), flush=True)
    warm = Warmup(dev)
    configs = [(2, 8, 3), (4, 8, 3), (4, 8, 2), (4, 8, 4), (8, 4, 3), (4, 4, 3), (2, 16, 3)]
    for rows, cols in ((4096, 4096), (16384, 1024), (2048, 8192), (16384, 4096)):
        run_shape(rows, cols, configs, warm, copy_gbps)


def run_shape(rows: int, cols: int, configs: list, warm: Warmup, copy_gbps: float) -> None:
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(rows + cols)
    nbytes = rows * cols * 2
    sets = rotation_sets(nbytes, torch.cuda.get_device_properties(0).L2_cache_size)
    xs = [torch.randn(rows, cols, device=dev, dtype=torch.bfloat16, generator=gen) for _ in range(sets)]
    outs = [torch.empty(rows, device=dev, dtype=torch.bfloat16) for _ in range(sets)]
    ref = xs[0].double().sum(-1)
    variants = {"ours": lambda i: outs[i].copy_(row_sum(xs[i]))}
    variants["ours-noalloc"] = lambda i: row_sum(xs[i])
    variants["torch"] = lambda i: torch.sum(xs[i], -1)
    for per_sm, warps, stages in configs:
        variants[f"streamed-{per_sm}x{warps}w-s{stages}"] = lambda i, c=(per_sm, warps, stages): streamed(
            xs[i], outs[i], *c
        )
    for name, fn in variants.items():
        warm.maybe_burst()
        try:
            outs[0].fill_(float("nan"))
            fn(0)
            torch.cuda.synchronize()
            err = (outs[0].double() - ref).abs().max().item() if name.startswith(("streamed", "ours-")) else 0.0
            if name == "ours-noalloc":
                err = (row_sum(xs[0]).double() - ref).abs().max().item()
            timer, _ = make_timer(fn, sets, target_ms=0.5)
            us = statistics.median(timer.sample_us() for _ in range(7))
            timer.release()
        except Exception as e:  # reported, the sweep goes on
            print(json.dumps({"shape": f"{rows}x{cols}", "config": name, "error": repr(e)[:300]}), flush=True)
            continue
        share = nbytes / (copy_gbps * 1e3) / us  # a read-only pass against the copy's bytes per µs
        print(json.dumps({"shape": f"{rows}x{cols}", "config": name, "us": round(us, 2),
                          "copy_share": round(share, 3), "max_abs_err": err}), flush=True)  # fmt: skip
    xs.clear()
    outs.clear()
    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
