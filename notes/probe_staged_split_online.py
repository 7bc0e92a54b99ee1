"""Probe (written 2026-12-02, not yet run on a GPU): the row staged across several programs,
redesigned after notes/probe_staged_split.py measured slower than the split everywhere
(notes/2026-12-02-probe-staged-split-780b38a.log).  Exploration, not a study.

What that probe's numbers pointed at, and what changes here:
- the exponentials ran twice after the last chunk landed (sum pass, then output pass), on
  the critical path of a launch that has no other rows to overlap with.  Here each chunk is
  folded into per-thread running statistics as soon as it lands, one exponential an element
  (a thread holds PER consecutive elements of a chunk, so its max and sum need no exchange
  with other threads); only the output pass runs after the wait;
- 230-255 registers a thread kept one program on an SM and ran the work in two rounds.
  Here a thread holds PER elements at a time (16 bf16 at 4096-element chunks and 8 warps),
  so several programs fit an SM, and the launcher takes the one-round configurations only
  (programs = rows x parts, at most what is resident).

Otherwise as there: parts publish (max, sum) to a scratch vector, a per-row counter says
when a row's parts are all in, the last program out zeroes the counters, the launch is
cooperative.

    python3 notes/probe_staged_split_online.py > $OUT/probe_staged_split_online.log
"""

from __future__ import annotations

import json

import torch
from probe_staged_split import _exp, main, plan  # the shipped kernel's e^x, the timing harness and the row plan
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy


@gluon.jit
def staged_split_online_kernel(x_ptr, y_ptr, stats_ptr, sync_ptr, n_rows, x_stride, y_stride,
                               WIDTH: gl.constexpr, CHUNK: gl.constexpr, NCHUNK: gl.constexpr,
                               PARTS: gl.constexpr, PPOW: gl.constexpr, VEC: gl.constexpr, PER: gl.constexpr,
                               NUM_WARPS: gl.constexpr):  # fmt: skip
    R: gl.constexpr = CHUNK // PER  # one line of PER consecutive elements a thread
    layout: gl.constexpr = gl.BlockedLayout([1, PER], [32, 1], [NUM_WARPS, 1], [1, 0])
    lines: gl.constexpr = gl.SliceLayout(1, layout)
    edge_layout: gl.constexpr = gl.BlockedLayout([1], [32], [NUM_WARPS], [0])
    smem = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [NCHUNK, R, PER], gl.SwizzledSharedLayout(1, 1, 1, [1, 0]))
    offs = gl.arange(0, R, layout=lines)[:, None] * PER + gl.arange(0, PER, layout=gl.SliceLayout(0, layout))[None, :]
    n_items = n_rows * PARTS
    grid = gl.num_programs(0)
    ready = sync_ptr + 2
    for item in range(gl.program_id(0), n_items, grid):  # one round where the launcher can
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
            load = gl.max_constancy((group + VEC > 0) & (group < WIDTH), [1, VEC])
            async_copy.async_copy_global_to_shared(smem.index(c), x_ptr + base + k, mask=load)
            async_copy.commit_group()
        # fold every chunk as it lands: per-thread running max and sum of exp (one exp an element)
        m = gl.full([R], float("-inf"), gl.float32, lines)
        s = gl.zeros([R], gl.float32, lines)
        for c in gl.static_range(NCHUNK):
            async_copy.wait_group(NCHUNK - 1 - c)
            gl.thread_barrier()
            pos = first + c * CHUNK + offs - lead
            x = gl.where((pos >= 0) & (pos < WIDTH), smem.index(c).load(layout).to(gl.float32), float("-inf"))
            mn = gl.maximum(m, gl.max(x, axis=1))
            sh = gl.where(mn == float("-inf"), 0.0, mn)
            s = s * _exp(m - sh) + gl.sum(_exp(x - sh[:, None]), axis=1)
            m = mn
        mp = gl.max(m, axis=0)
        shp = gl.where(mp == float("-inf"), 0.0, mp)
        sp = gl.sum(s * _exp(m - shp), axis=0)
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
            whole = gl.max_constancy((group >= 0) & (group + VEC <= WIDTH), [1, VEC])
            x = smem.index(c).load(layout).to(gl.float32)
            gl.store(y_ptr + o_base + k, (_exp(x - shift) * inv).to(y_ptr.dtype.element_ty), mask=whole)
        if part == 0:  # the at most two partial 16-byte groups at the row's ends
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


_GRID: dict[tuple, int | None] = {}


def staged_split(x: torch.Tensor, y: torch.Tensor, parts: int, chunk: int, warps: int, scratch) -> None:
    """One round or nothing: raises where rows x parts programs are more than are resident."""
    rows, width = x.shape
    nchunk, vec = plan(width, x.element_size(), parts, chunk)
    stats, sync = scratch
    consts = dict(WIDTH=width, CHUNK=chunk, NCHUNK=nchunk, PARTS=parts, PPOW=max(2, 1 << (parts - 1).bit_length()),
                  VEC=vec, PER=chunk // (32 * warps), NUM_WARPS=warps)  # fmt: skip
    args = (x, y, stats, sync, rows, x.stride(0), y.stride(0))
    key = (x.dtype, width, rows, parts, chunk, warps)
    if key not in _GRID:
        from kernels._launch import resident_programs

        compiled = staged_split_online_kernel.warmup(*args, grid=(1,), **consts, num_warps=warps,
                                                     launch_cooperative_grid=True)  # fmt: skip
        resident = resident_programs(compiled, warps, x.device.index or 0)
        _GRID[key] = rows * parts if rows * parts <= resident else None
        print(json.dumps({"kernel": key[1:], "smem": compiled.metadata.shared, "regs": compiled.n_regs,
                          "resident": resident, "programs": rows * parts}), flush=True)  # fmt: skip
    grid = _GRID[key]
    if grid is None:
        raise RuntimeError("more programs than are resident: not one round")
    staged_split_online_kernel[(grid,)](*args, **consts, num_warps=warps, launch_cooperative_grid=True)


def online_variants(variants, xs, ys, rows, cols, esize, dev) -> None:  # type: ignore[no-untyped-def]
    """This probe's kernel in every parts x (chunk, warps) that fits shared memory."""
    for parts in (2, 3, 4, 6, 8, 16, 32):
        for chunk, warps in ((4096, 8), (2048, 4), (8192, 16)):
            nchunk, _ = plan(cols, esize, parts, chunk)
            if nchunk * chunk * esize > 200 * 1024 or nchunk * chunk * esize * parts < cols * esize - chunk * esize:
                continue
            scratch = (torch.empty(rows * parts * 2, device=dev), torch.zeros(rows + 2, device=dev, dtype=torch.int32))
            variants[f"online-p{parts}-c{chunk}w{warps}"] = lambda i, c=(parts, chunk, warps), s=scratch: staged_split(
                xs[i], ys[i], *c, s
            )


SHAPES = ((64, 131072, torch.bfloat16), (64, 131075, torch.bfloat16), (32, 262144, torch.bfloat16),
          (64, 131072, torch.float32), (8, 1048576, torch.bfloat16))  # fmt: skip


if __name__ == "__main__":
    main(SHAPES, online_variants)
