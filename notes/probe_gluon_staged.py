"""Probe: softmax rows staged in shared memory through Gluon (Triton 3.6's explicit layout and
shared-memory dialect), so that DRAM sees one read and one write (H200, bf16 forward, device
time from CUDA-graph replay, cold L2).  Exploration, not a study.

Why: the looped plan reads a 4096 x 50257 row twice; Nsight Compute counted 517-595 MB read
from DRAM for 412 MB of input (the second read misses L2 a quarter to 44% of the time), and
the plan reaches 76% of copy where the target is 85%.  Triton's tensor language cannot keep a
100 KB row on chip (registers: one program an SM at best); Gluon can allocate shared memory.
Here one program holds one row: every chunk of it is copied with ``cp.async`` into shared
memory at once (up to ~110 KB, so two programs an SM), then three passes over shared memory
take the max, the sum of exp, and write the outputs.  Rows are read through the 16-byte
window the row base uses (``kernels/_rowwise.py``: a misaligned row starts ``lead`` elements
into its window); whole 16-byte groups are stored as vectors, and the at most two partial
groups at a row's ends element by element.

    python3 notes/probe_gluon_staged.py > $OUT/probe_gluon_staged.log

The kernel here is the probe's, as it ran at 7889eca; the one the planner launches, built
from it with torch's semantics for non-finite rows and ``dtype=``, is
``kernels.softmax.staged_softmax_kernel``.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy

LOG2E = gl.constexpr(1.4426950408889634)


@gluon.jit
def _ex2(x):
    return gl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=gl.float32, is_pure=True,
                                     pack=1)  # fmt: skip


@gluon.jit
def staged_softmax_kernel(x_ptr, y_ptr, x_stride, y_stride, WIDTH: gl.constexpr, CHUNK: gl.constexpr,
                          NCHUNK: gl.constexpr, NUM_WARPS: gl.constexpr):  # fmt: skip
    layout: gl.constexpr = gl.BlockedLayout([8], [32], [NUM_WARPS], [0])
    edge_layout: gl.constexpr = gl.BlockedLayout([1], [32], [NUM_WARPS], [0])
    smem = gl.allocate_shared_memory(gl.bfloat16, [NCHUNK, CHUNK], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    row = gl.program_id(0).to(gl.int64)
    start = row * x_stride
    lead = (start % 8).to(gl.int32)
    base = gl.multiple_of(start - lead, 8)
    o_start = row * y_stride
    o_base = gl.multiple_of(o_start - lead, 8)  # the probe passes x and y with one row stride
    offs = gl.arange(0, CHUNK, layout=layout)
    # every chunk of the row in flight at once
    for c in gl.static_range(NCHUNK):
        k = c * CHUNK + offs
        group = (k // 8) * 8 - lead
        load = gl.max_constancy((group + 8 > 0) & (group < WIDTH), [8])
        async_copy.async_copy_global_to_shared(smem.index(c), x_ptr + base + k, mask=load)
        async_copy.commit_group()
    m = gl.full([CHUNK], float("-inf"), gl.float32, layout)
    for c in gl.static_range(NCHUNK):
        async_copy.wait_group(NCHUNK - 1 - c)
        gl.thread_barrier()
        pos = c * CHUNK + offs - lead
        x = smem.index(c).load(layout).to(gl.float32)
        m = gl.maximum(m, gl.where((pos >= 0) & (pos < WIDTH), x, float("-inf")))
    mx = gl.max(m, axis=0)
    s = gl.zeros([CHUNK], gl.float32, layout)
    for c in gl.static_range(NCHUNK):
        pos = c * CHUNK + offs - lead
        x = smem.index(c).load(layout).to(gl.float32)
        e = _ex2((x - mx) * LOG2E)
        s += gl.where((pos >= 0) & (pos < WIDTH), e, 0.0)
    inv = 1.0 / gl.sum(s, axis=0)
    for c in gl.static_range(NCHUNK):
        k = c * CHUNK + offs
        group = (k // 8) * 8 - lead
        whole = gl.max_constancy((group >= 0) & (group + 8 <= WIDTH), [8])
        x = smem.index(c).load(layout).to(gl.float32)
        y = _ex2((x - mx) * LOG2E) * inv
        gl.store(y_ptr + o_base + k, y.to(gl.bfloat16), mask=whole)
    # the at most two partial groups at the row's ends, element by element
    e = gl.arange(0, 16, layout=edge_layout)
    tail = ((lead + WIDTH) // 8) * 8
    k = gl.where(e < 8, e, tail + e - 8)
    pos = k - lead
    group = (k // 8) * 8 - lead
    partial = (pos >= 0) & (pos < WIDTH) & ((group < 0) | (group + 8 > WIDTH)) & ((e < 8) | (tail > 0))
    xe = gl.load(x_ptr + base + k, mask=partial, other=0.0).to(gl.float32)
    gl.store(y_ptr + o_base + k, (_ex2((xe - mx) * LOG2E) * inv).to(gl.bfloat16), mask=partial)


def staged(x: torch.Tensor, y: torch.Tensor, chunk: int, warps: int) -> None:
    rows, width = x.shape
    nchunk = -(-(width + 7) // chunk)
    staged_softmax_kernel[(rows,)](x, y, x.stride(0), y.stride(0), WIDTH=width, CHUNK=chunk, NCHUNK=nchunk,
                                   NUM_WARPS=warps, num_warps=warps)  # fmt: skip


def main() -> None:
    sys.path.insert(0, ".")
    from bench.timing import Warmup

    dev = torch.device("cuda")
    a = torch.empty(1 << 28, device=dev, dtype=torch.float32)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
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
    for rows, cols in ((4096, 50257), (1000, 50257), (4096, 32000), (8192, 32768), (4096, 50264)):
        run_shape(rows, cols, warm, copy_gbps)


def run_shape(rows: int, cols: int, warm: object, copy_gbps: float) -> None:
    from bench.timing import make_timer, rotation_sets
    from kernels import softmax

    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(rows + cols)
    nbytes = rows * cols * 2 * 2
    sets = rotation_sets(nbytes, torch.cuda.get_device_properties(0).L2_cache_size)
    xs = [torch.randn(rows, cols, device=dev, dtype=torch.bfloat16, generator=gen) * 3 for _ in range(sets)]
    ys = [torch.empty_like(x) for x in xs]
    ref = torch.softmax(xs[0].double(), -1)
    variants = {"torch": lambda i: torch.softmax(xs[i], -1), "ours": lambda i: softmax(xs[i])}
    for chunk, warps in ((4096, 8), (2048, 8), (4096, 16), (8192, 8), (8192, 16)):
        if -(-(cols + 7) // chunk) * chunk * 2 > 227 * 1024:  # more shared memory than a program may hold
            continue
        variants[f"staged-{chunk}w{warps}"] = lambda i, c=(chunk, warps): staged(xs[i], ys[i], *c)
    for name, fn in variants.items():
        warm.maybe_burst()  # type: ignore[attr-defined]
        try:
            ys[0].fill_(float("nan"))
            out = fn(0)
            torch.cuda.synchronize()
            got = out if isinstance(out, torch.Tensor) else ys[0]
            err = (got.double() - ref).abs().max().item()
            timer, _ = make_timer(fn, sets, target_ms=0.5)
            us = statistics.median(timer.sample_us() for _ in range(7))
            timer.release()
        except Exception as exc:  # reported, the probe goes on
            print(json.dumps({"shape": f"{rows}x{cols}", "config": name, "error": repr(exc)[:400]}), flush=True)
            continue
        share = nbytes / (copy_gbps * 1e3) / us
        print(json.dumps({"shape": f"{rows}x{cols}", "config": name, "us": round(us, 2),
                          "copy_share": round(share, 3), "max_abs_err": err}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
