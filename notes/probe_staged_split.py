"""Probe: a row too wide for one program's shared memory, staged across several programs
(H200, softmax forward, device time from CUDA-graph replay, cold L2).  Exploration, not a study.

Why: at 64 x 131072 bf16 the split plan reads every row twice (reduce, then apply) and has a
launch boundary between; it reaches 61% of copy where the target is 70% and QuACK (which
keeps a row on chip across a thread-block cluster) takes 0.85x our time.  Here each of
PARTS programs copies its part of the row into shared memory (cp.async, one DRAM read),
publishes its (max, sum of exp) to a scratch vector, waits until every part of its row has
published (a per-row counter), merges the row's statistics and writes its outputs from
shared memory.  The launch is cooperative, so every program is resident at once; with more
items than resident programs each program walks items pid, pid + G, ... with G a multiple
of PARTS, so no row straddles two rounds and a waiting part waits only on resident work.
The last program out zeroes the counters for the next launch.

    python3 notes/probe_staged_split.py > $OUT/probe_staged_split.log
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy

sys.path.insert(0, ".")
from kernels.softmax import _staged_exp as _exp


@gluon.jit
def staged_split_kernel(x_ptr, y_ptr, stats_ptr, sync_ptr, n_rows, x_stride, y_stride,
                        WIDTH: gl.constexpr, CHUNK: gl.constexpr, NCHUNK: gl.constexpr, PARTS: gl.constexpr,
                        PPOW: gl.constexpr, VEC: gl.constexpr, NUM_WARPS: gl.constexpr):  # fmt: skip
    layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [NUM_WARPS], [0])
    edge_layout: gl.constexpr = gl.BlockedLayout([1], [32], [NUM_WARPS], [0])
    smem = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [NCHUNK, CHUNK], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    offs = gl.arange(0, CHUNK, layout=layout)
    n_items = n_rows * PARTS
    grid = gl.num_programs(0)
    ready = sync_ptr + 2
    for item in range(gl.program_id(0), n_items, grid):
        row = (item // PARTS).to(gl.int64)
        part = item % PARTS
        start = row * x_stride
        lead = (start % VEC).to(gl.int32)
        base = gl.multiple_of(start - lead, VEC)
        o_base = gl.multiple_of(row * y_stride - lead, VEC)
        first = gl.multiple_of(part * (NCHUNK * CHUNK), CHUNK)
        gl.thread_barrier()  # the last item's reads of shared memory are done
        for c in gl.static_range(NCHUNK):
            k = first + c * CHUNK + offs
            group = (k // VEC) * VEC - lead
            load = gl.max_constancy((group + VEC > 0) & (group < WIDTH), [VEC])
            async_copy.async_copy_global_to_shared(smem.index(c), x_ptr + base + k, mask=load)
            async_copy.commit_group()
        m = gl.full([CHUNK], float("-inf"), gl.float32, layout)
        for c in gl.static_range(NCHUNK):
            async_copy.wait_group(NCHUNK - 1 - c)
            gl.thread_barrier()
            pos = first + c * CHUNK + offs - lead
            x = smem.index(c).load(layout).to(gl.float32)
            m = gl.maximum(m, gl.where((pos >= 0) & (pos < WIDTH), x, float("-inf")))
        mp = gl.max(m, axis=0)
        sh = gl.where(mp == float("-inf"), 0.0, mp)
        s = gl.zeros([CHUNK], gl.float32, layout)
        for c in gl.static_range(NCHUNK):
            pos = first + c * CHUNK + offs - lead
            x = smem.index(c).load(layout).to(gl.float32)
            s += gl.where((pos >= 0) & (pos < WIDTH), _exp(x - sh), 0.0)
        sp = gl.sum(s, axis=0)
        gl.store(stats_ptr + 2 * item, mp)
        gl.store(stats_ptr + 2 * item + 1, sp)
        gl.thread_barrier()
        gl.atomic_add(ready + row, 1, sem="release")
        seen = gl.atomic_add(ready + row, 0, sem="acquire")
        while seen < PARTS:
            seen = gl.atomic_add(ready + row, 0, sem="acquire")
        j = gl.arange(0, PPOW, layout=edge_layout)
        at = stats_ptr + 2 * (row * PARTS + j)
        mj = gl.load(at, mask=j < PARTS, other=float("-inf"), cache_modifier=".cg")
        sj = gl.load(at + 1, mask=j < PARTS, other=0.0, cache_modifier=".cg")
        mx = gl.max(mj, axis=0)
        shift = gl.where(mx == float("-inf"), 0.0, mx)
        total = gl.sum(gl.where(j < PARTS, sj * _exp(mj - shift), 0.0), axis=0)
        inv = gl.where(total == 0.0, 0.0, 1.0 / total)
        for c in gl.static_range(NCHUNK):
            k = first + c * CHUNK + offs
            group = (k // VEC) * VEC - lead
            whole = gl.max_constancy((group >= 0) & (group + VEC <= WIDTH), [VEC])
            x = smem.index(c).load(layout).to(gl.float32)
            gl.store(y_ptr + o_base + k, (_exp(x - shift) * inv).to(y_ptr.dtype.element_ty), mask=whole)
        if part == 0:
            e = gl.arange(0, 2 * VEC, layout=edge_layout)
            tail = ((lead + WIDTH) // VEC) * VEC
            ke = gl.where(e < VEC, e, tail + e - VEC)
            pe = ke - lead
            ge = (ke // VEC) * VEC - lead
            partial = (pe >= 0) & (pe < WIDTH) & ((ge < 0) | (ge + VEC > WIDTH)) & ((e < VEC) | (tail > 0))
            xe = gl.load(x_ptr + base + ke, mask=partial, other=0.0).to(gl.float32)
            gl.store(y_ptr + o_base + ke, (_exp(xe - shift) * inv).to(y_ptr.dtype.element_ty), mask=partial)
    gl.thread_barrier()
    if gl.atomic_add(sync_ptr + 1, 1, sem="acq_rel") == grid - 1:
        z = gl.arange(0, 1024, layout=edge_layout)
        for r in range(0, n_rows, 1024):
            gl.store(ready + r + z, gl.zeros([1024], gl.int32, edge_layout), mask=r + z < n_rows)
        gl.store(sync_ptr + z, gl.zeros([1024], gl.int32, edge_layout), mask=z < 2)


_GRID: dict[tuple, int] = {}


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def plan(width: int, esize: int, parts: int, chunk: int) -> tuple[int, int]:
    vec = 16 // esize
    window = width + vec - 1
    nchunk = cdiv(cdiv(window, chunk), parts)
    return nchunk, vec


def staged_split(x: torch.Tensor, y: torch.Tensor, parts: int, chunk: int, warps: int, scratch) -> None:
    rows, width = x.shape
    nchunk, vec = plan(width, x.element_size(), parts, chunk)
    stats, sync = scratch
    ppow = max(2, 1 << (parts - 1).bit_length())
    args = (x, y, stats, sync, rows, x.stride(0), y.stride(0))
    consts = dict(WIDTH=width, CHUNK=chunk, NCHUNK=nchunk, PARTS=parts, PPOW=ppow, VEC=vec, NUM_WARPS=warps)
    key = (x.dtype, width, rows, parts, chunk, warps)
    grid = _GRID.get(key)
    if grid is None:
        from kernels._launch import resident_programs

        compiled = staged_split_kernel.warmup(*args, grid=(1,), **consts, num_warps=warps,
                                              launch_cooperative_grid=True)  # fmt: skip
        resident = resident_programs(compiled, warps, x.device.index or 0)
        grid = _GRID[key] = min(rows * parts, resident // parts * parts)
        print(json.dumps({"kernel": key[1:], "smem": compiled.metadata.shared, "regs": compiled.n_regs,
                          "resident": resident, "grid": grid}), flush=True)  # fmt: skip
    staged_split_kernel[(grid,)](*args, **consts, num_warps=warps, launch_cooperative_grid=True)


def copy_bandwidth() -> float:
    """GB/s of a device-to-device copy (read + write), measured here."""
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
    return 2 * a.numel() * 4 * 20 / (start.elapsed_time(end) / 1e3) / 1e9


def staged_split_variants(variants, xs, ys, rows, cols, esize, dev) -> None:  # type: ignore[no-untyped-def]
    """This probe's kernel in every parts x (chunk, warps) that fits shared memory."""
    for parts in (2, 3, 4, 6, 8, 16, 32):
        for chunk, warps in ((4096, 8), (2048, 4)):
            nchunk, _ = plan(cols, esize, parts, chunk)
            if nchunk * chunk * esize > 200 * 1024 or (nchunk * chunk * esize < 16 * 1024 and parts > 2):
                continue
            if parts > 1 and nchunk * chunk * esize * parts < cols * esize - chunk * esize:
                continue
            scratch = (torch.empty(rows * parts * 2, device=dev), torch.zeros(rows + 2, device=dev, dtype=torch.int32))
            variants[f"ss-p{parts}-c{chunk}w{warps}"] = lambda i, c=(parts, chunk, warps), s=scratch: staged_split(
                xs[i], ys[i], *c, s
            )


SHAPES = ((64, 131072, torch.bfloat16), (64, 131072, torch.float32), (64, 131075, torch.bfloat16),
          (128, 131072, torch.bfloat16), (8, 1048576, torch.bfloat16), (4096, 151936, torch.bfloat16),
          (256, 65536, torch.bfloat16), (1024, 100003, torch.bfloat16))  # fmt: skip


def main(shapes=SHAPES, add_variants=staged_split_variants) -> None:  # type: ignore[no-untyped-def]
    """Time torch.softmax, ours and the variants ``add_variants`` adds at every shape (cold L2,
    graph replay), each checked against float64 twice (the second launch after the first)."""
    sys.path.insert(0, ".")
    from bench.timing import Warmup

    copy_gbps = copy_bandwidth()
    print(json.dumps({"copy_GBps": round(copy_gbps, 1)}), flush=True)
    warm = Warmup(torch.device("cuda"))
    for rows, cols, dtype in shapes:
        run_shape(rows, cols, dtype, warm, copy_gbps, add_variants)


def run_shape(rows: int, cols: int, dtype: torch.dtype, warm: object, copy_gbps: float, add_variants) -> None:  # type: ignore[no-untyped-def]
    from bench.timing import make_timer, rotation_sets
    from kernels import softmax

    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(rows + cols)
    esize = torch.tensor([], dtype=dtype).element_size()
    nbytes = rows * cols * esize * 2
    sets = rotation_sets(nbytes, torch.cuda.get_device_properties(0).L2_cache_size)
    xs = [(torch.randn(rows, cols, device=dev, generator=gen) * 3).to(dtype) for _ in range(sets)]
    ys = [torch.empty_like(x) for x in xs]
    ref = torch.softmax(xs[0].double(), -1)
    variants = {"torch": lambda i: torch.softmax(xs[i], -1), "ours": lambda i: softmax(xs[i])}
    add_variants(variants, xs, ys, rows, cols, esize, dev)
    for name, fn in variants.items():
        warm.maybe_burst()  # type: ignore[attr-defined]
        try:
            ys[0].fill_(float("nan"))
            out = fn(0)
            torch.cuda.synchronize()
            got = out if isinstance(out, torch.Tensor) else ys[0]
            err = (got.double() - ref).abs().max().item()
            fn(0)  # a second launch: the counters were put back to zero
            torch.cuda.synchronize()
            got2 = out if isinstance(out, torch.Tensor) else ys[0]
            err = max(err, (got2.double() - ref).abs().max().item())
            timer, _ = make_timer(fn, sets, target_ms=0.5)
            us = statistics.median(timer.sample_us() for _ in range(7))
            timer.release()
        except Exception as exc:  # reported, the probe goes on
            print(json.dumps({"shape": f"{rows}x{cols}", "config": name, "error": repr(exc)[:400]}), flush=True)
            continue
        share = nbytes / (copy_gbps * 1e3) / us
        print(json.dumps({"shape": f"{rows}x{cols}", "dtype": str(dtype)[6:], "config": name, "us": round(us, 2),
                          "copy_share": round(share, 3), "max_abs_err": err}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
