"""Probe (2026-12-03, ninth session): softmax of a wide row staged in the shared memory of a
thread-block cluster, its statistics exchanged through distributed shared memory (H200, bf16
forward, device time from CUDA-graph replay, cold L2).  Exploration, not a study.

Why: the register-held cluster forms (notes/probe_cluster_softmax.py and
notes/probe_cluster_dsmem_softmax.py) keep each program's chunk in registers as fp32: at
64 x 131072, 16.8 MB of bf16 becomes 33.5 MB of fp32, the whole register file of the H200, so
the compiled kernels (63-115 registers a thread) hold only 2-5 programs an SM and the grid
runs in two or more waves, each loading, meeting and writing in series.  QuACK instead
stages the row in shared memory (127 KB an SM at this shape, 30 MB across the GPU): one
wave.  Here, in Gluon (which can allocate shared memory): each of the P programs of a row
(one cluster) copies its part of the row into shared memory with 16-byte cp.async, takes
its max and sum of exp from there, writes the pair into every cluster member's slot
(``mapa`` + ``st.shared::cluster``, inline PTX: Gluon has no op for another CTA's shared
memory, nor a reduction across CTAs), meets the cluster at a barrier, merges the P pairs
and writes ``exp(x - M) / S`` from shared memory.  One DRAM read and one write an element,
two exponentials.  The slots sit past the kernel's own shared memory (``slot_off``, from
the compiled kernel's size; the launch asks for ``slot_off + 8 P`` bytes).  Rows must be
16-byte aligned and ``P * NCHUNK * CHUNK`` wide (the probe's shapes are).

    python3 notes/probe_cluster_staged_softmax.py > $OUT/probe_cluster_staged_softmax.log
"""

from __future__ import annotations

import json
import sys

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy

sys.path.insert(0, "notes")
sys.path.insert(0, ".")
from probe_cluster_dsmem_softmax import ARRIVE, GET, PUT, SYNC, WAIT  # the cluster's PTX
from probe_staged_split import main  # the timing harness (cold L2, graph replay, float64 check)


@gluon.jit
def _exp(x):
    return gl.inline_asm_elementwise(
        "ex2.approx.ftz.f32 $0, $1;", "=f,f", [x * 1.4426950408889634], dtype=gl.float32, is_pure=True, pack=1
    )


@gluon.jit
def _arrive(token):
    return gl.inline_asm_elementwise(ARRIVE, "=r,r", [token], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _wait(token):
    return gl.inline_asm_elementwise(WAIT, "=r,r", [token], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _sync(token):
    return gl.inline_asm_elementwise(SYNC, "=r,r", [token], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _put(rank, offset, m, s):
    return gl.inline_asm_elementwise(PUT, "=r,r,r,f,f", [rank, offset, m, s], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _get(offset, token):
    return gl.inline_asm_elementwise(GET, "=f,=f,r,r", [offset, token], dtype=(gl.float32, gl.float32),
                                     is_pure=False, pack=1)  # fmt: skip


@gluon.jit(do_not_specialize=["x_stride", "y_stride", "slot_off"])
def cluster_staged_kernel(x_ptr, y_ptr, x_stride: gl.int64, y_stride: gl.int64, slot_off: gl.int32,
                          P: gl.constexpr, CHUNK: gl.constexpr, NCHUNK: gl.constexpr, VEC: gl.constexpr,
                          NUM_WARPS: gl.constexpr):  # fmt: skip
    layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [NUM_WARPS], [0])
    small: gl.constexpr = gl.BlockedLayout([1], [32], [NUM_WARPS], [0])
    smem = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [NCHUNK, CHUNK], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    pid = gl.program_id(0)
    row = (pid // P).to(gl.int64)
    part = pid % P
    p = gl.arange(0, P, layout=small)
    started = _arrive(p * 0 + part)
    base = gl.multiple_of(row * x_stride + part * (NCHUNK * CHUNK), VEC)
    o_base = gl.multiple_of(row * y_stride + part * (NCHUNK * CHUNK), VEC)
    offs = gl.arange(0, CHUNK, layout=layout)
    for c in gl.static_range(NCHUNK):
        async_copy.async_copy_global_to_shared(smem.index(c), x_ptr + base + c * CHUNK + offs)
        async_copy.commit_group()
    m = gl.full([CHUNK], float("-inf"), gl.float32, layout)
    for c in gl.static_range(NCHUNK):
        async_copy.wait_group(NCHUNK - 1 - c)
        gl.thread_barrier()
        m = gl.maximum(m, smem.index(c).load(layout).to(gl.float32))
    mx = gl.max(m, axis=0)
    shift = gl.where(mx == float("-inf"), 0.0, mx)
    s = gl.zeros([CHUNK], gl.float32, layout)
    for c in gl.static_range(NCHUNK):
        s += _exp(smem.index(c).load(layout).to(gl.float32) - shift)
    total = gl.sum(s, axis=0)
    ready = _wait(started) - started  # zeros, once every program of the cluster has started
    zero = gl.zeros([P], gl.float32, small)
    done = _put(p + ready, ready + slot_off + part * 8, zero + mx, zero + total)
    token = _sync(done)
    ms, ss = _get(slot_off + p * 8, token)
    big = gl.max(ms, axis=0)
    bsh = gl.where(big == float("-inf"), 0.0, big)
    whole = gl.sum(gl.where(ss == 0.0, 0.0, ss * _exp(ms - bsh)), axis=0)
    inv = gl.where(whole == 0.0, 0.0, 1.0 / whole)
    for c in gl.static_range(NCHUNK):
        y = _exp(smem.index(c).load(layout).to(gl.float32) - bsh) * inv
        gl.store(y_ptr + o_base + c * CHUNK + offs, y.to(y_ptr.dtype.element_ty))


_COMPILED: dict[tuple, tuple] = {}


def cluster_staged(x: torch.Tensor, y: torch.Tensor, parts: int, chunk: int, warps: int) -> None:
    rows, width = x.shape
    vec = 16 // x.element_size()
    nchunk = width // (parts * chunk)
    assert nchunk * parts * chunk == width and x.stride(0) % vec == 0 and y.stride(0) % vec == 0
    consts = dict(P=parts, CHUNK=chunk, NCHUNK=nchunk, VEC=vec, NUM_WARPS=warps)
    key = (x.dtype, width, parts, chunk, warps)
    hit = _COMPILED.get(key)
    if hit is None:
        compiled = cluster_staged_kernel.warmup(x, y, x.stride(0), y.stride(0), 1024, grid=(1,), **consts,
                                                num_warps=warps)  # fmt: skip
        compiled._init_handles()
        slot_off = -(-compiled.metadata.shared // 16) * 16
        hit = _COMPILED[key] = (compiled, slot_off)
        print(json.dumps({"kernel": [width, parts, chunk, nchunk, warps], "regs": compiled.n_regs,
                          "spills": compiled.n_spills, "smem": compiled.metadata.shared}), flush=True)  # fmt: skip
    compiled, slot_off = hit
    compiled.run.launch(rows, 1, 1, torch.cuda.current_stream().cuda_stream, compiled.function, False, False,
                        None, None, (warps, parts, slot_off + 8 * parts), None, None, None,
                        x, y, x.stride(0), y.stride(0), slot_off, *consts.values())  # fmt: skip


def staged_variants(variants, xs, ys, rows, cols, esize, dev) -> None:  # type: ignore[no-untyped-def]
    for parts in (4, 8, 16):
        for chunk in (2048, 4096):
            for warps in (4, 8):
                per = cols // parts
                if per % chunk or per // chunk > 8 or chunk // (32 * warps) < 8:
                    continue
                name = f"cs-p{parts}-c{chunk}-w{warps}"
                variants[name] = lambda i, c=(parts, chunk, warps): cluster_staged(xs[i], ys[i], *c)


SHAPES = ((64, 131072, torch.bfloat16), (128, 131072, torch.bfloat16), (256, 65536, torch.bfloat16),
          (32, 262144, torch.bfloat16))  # fmt: skip

if __name__ == "__main__":
    main(SHAPES, staged_variants)
