"""Probe (2026-12-02, seventh session): what the row sum's 95%-of-copy target at 16M bf16
elements (32 MB read) leaves room for.  Exploration, not a study.

Device time of one call from CUDA-graph replay, cold L2 (the study's timer and rotation),
bf16.  Measured in one process:
- the launch floor: a kernel that stores one value (1 program) and one a program (4096 programs);
- the read rate: ours and torch.sum from 32 MB to 1 GiB, fitted as time = fixed + bytes / rate;
- a device copy of the same 32 MB of traffic (16 MB each way), the copy peak's own kernel;
- the same one-row-a-program sum with programmatic dependent launch (PDL): each call lets
  the next one's programs start while its own last ones drain (`gdc_launch_dependents`), the
  next waits for it (`gdc_wait`) before reading.  In a graph of repeated calls that overlaps
  a call's launch with the previous call's tail; after a kernel that does not trigger early
  (most of a model's), it saves less.

    python notes/probe_rowsum_floor.py > $OUT/probe_rowsum_floor.log
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

sys.path.insert(0, ".")
sys.path.insert(0, "notes")
from probe_staged_split import copy_bandwidth  # the copy peak, measured the same way in every probe

from bench.timing import Warmup, make_timer, rotation_sets
from kernels import row_sum


@triton.jit
def _touch(out_ptr):
    tl.store(out_ptr + tl.program_id(0), 1.0)


@triton.jit
def _row_sum_rows(x_ptr, out_ptr, stride, WIDTH: tl.constexpr, PDL: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, WIDTH)
    if PDL:
        gdc_wait()  # the previous call's writes are visible from here on
        gdc_launch_dependents()  # the next call's programs may be placed while ours run
    x = tl.load(x_ptr + row * stride + cols)
    tl.store(out_ptr + row, tl.sum(x.to(tl.float32), axis=0).to(out_ptr.dtype.element_ty))


def time_us(fn, sets: int, warm: Warmup) -> float:
    warm.maybe_burst()
    fn(0)
    torch.cuda.synchronize()
    timer, _ = make_timer(fn, sets, target_ms=0.5)
    us = statistics.median(timer.sample_us() for _ in range(7))
    timer.release()
    return us


def emit(**kw: object) -> None:
    print(json.dumps(kw), flush=True)


def copy_32mb(copy: float, l2: int, warm: Warmup) -> None:
    """A device copy of 32 MB of traffic (16 MB each way), rotated like the study's cold cases."""
    sets = rotation_sets(32 << 20, l2)
    src = [torch.randn(8 << 20, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    dst = [torch.empty_like(t) for t in src]
    us = time_us(lambda i: dst[i].copy_(src[i]), sets, warm)
    emit(what="copy", MB_traffic=32, us=round(us, 2), share=round(32 * 2**20 / us / 1e3 / copy, 3))


def one_shape(rows: int, cols: int, copy: float, l2: int, warm: Warmup, fits: dict) -> None:
    nbytes = rows * cols * 2
    sets = rotation_sets(nbytes, l2)
    gen = torch.Generator(device="cuda").manual_seed(rows * 7 + cols)
    xs = [torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(sets)]
    out = [torch.empty(rows, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    ref = xs[0].double().sum(-1)
    variants = {"ours": lambda i: row_sum(xs[i]), "torch": lambda i: torch.sum(xs[i], -1)}
    if cols == 4096:
        for pdl in (False, True):
            variants[f"rows{'-pdl' if pdl else ''}"] = lambda i, p=pdl: _row_sum_rows[(rows,)](
                xs[i], out[i], xs[i].stride(0), WIDTH=cols, PDL=p, num_warps=4, launch_pdl=p
            )
    for name, fn in variants.items():
        try:
            if name.startswith("rows"):
                out[0].fill_(float("nan"))
                fn(0)
                torch.cuda.synchronize()
                err = (out[0].double() - ref).abs().max().item()
            else:
                err = (fn(0).double() - ref).abs().max().item()
            us = time_us(fn, sets, warm)
        except Exception as exc:  # reported, the probe goes on
            emit(shape=f"{rows}x{cols}", variant=name, error=repr(exc)[:300])
            continue
        if name in fits:
            fits[name].append((nbytes, us))
        emit(shape=f"{rows}x{cols}", variant=name, us=round(us, 2), MB=nbytes / 2**20,
             share=round(nbytes / us / 1e3 / copy, 3), max_abs_err=err)  # fmt: skip


def main() -> None:
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    warm = Warmup(dev)
    copy = copy_bandwidth()
    emit(copy_GBps=round(copy, 1))

    outs = [torch.empty(16384, device=dev) for _ in range(64)]
    for grid in (1, 132, 4096, 16384):
        us = time_us(lambda i, g=grid: _touch[(g,)](outs[i]), 64, warm)
        emit(what="floor", programs=grid, us=round(us, 3))

    copy_32mb(copy, l2, warm)

    fits: dict[str, list[tuple[int, float]]] = {"ours": [], "torch": []}
    for rows, cols in ((4096, 4096), (16384, 1024), (16, 1048576), (8192, 4096), (16384, 4096), (65536, 4096),
                       (131072, 4096)):  # fmt: skip
        one_shape(rows, cols, copy, l2, warm, fits)
        torch.cuda.empty_cache()
    for name, pts in fits.items():
        big = [(n, t) for n, t in pts if n >= 64 << 20]
        if len(big) >= 2:
            n0, t0 = big[0]
            n1, t1 = big[-1]
            rate = (n1 - n0) / (t1 - t0) / 1e3  # GB/s
            fixed = t0 - n0 / rate / 1e3
            emit(what="fit", variant=name, read_GBps=round(rate, 1), fixed_us=round(fixed, 2),
                 bound_32MB_us=round(fixed + (32 << 20) / rate / 1e3, 2),
                 target_32MB_us=round((32 << 20) / (0.95 * copy) / 1e3, 2))  # fmt: skip


if __name__ == "__main__":
    main()
