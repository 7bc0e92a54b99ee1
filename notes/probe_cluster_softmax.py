"""Probe (2026-12-03): softmax of a wide row held in registers across a thread-block cluster
(H200, forward, device time from CUDA-graph replay, cold L2).  Exploration, not a study.

Why: at 64 x 131072 bf16 the split plan reads every row twice and none of its 16.8 MB of
output can be written before the whole row is reduced; it reaches 61% of copy (target 70%)
and 1.16x QuACK.  The two staged-across-programs probes (notes/probe_staged_split*.py) put
one row over the whole GPU with a cooperative launch and per-row counters: one round, every
phase serialized across the machine.  Here the P programs of a row are launched as one
*cluster* (cuLaunchKernelEx's cluster dimension, through Triton's own launcher with
num_ctas = P in the launch metadata; the kernel itself is compiled for one CTA).  The
hardware schedules a cluster's programs together, so a program may wait for the other
programs of its row without any deadlock, at any grid size and in any number of waves:
clusters come and go independently, so one cluster's writes overlap another's reads.

Each program loads its CHUNK of the row once (into registers), takes its max m and
e = exp(x - m) and their sum s, stores (m, s) to a scratch vector, meets the other programs
of its cluster at a cluster barrier (barrier.cluster.arrive.release / wait.acquire: cluster
scope orders the stores before the other programs' loads), merges the row's P pairs and
writes y = e * exp(m - M) / S.  One DRAM read and one write an element, one exponential an
element (RECOMPUTE=True keeps x in its own dtype instead of e in fp32, and takes a second).

    python3 notes/probe_cluster_softmax.py > $OUT/probe_cluster_softmax.log
"""

from __future__ import annotations

import json
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, "notes")
sys.path.insert(0, ".")
from probe_staged_split import main  # the timing harness (cold L2, graph replay, float64 check)

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _cluster_barrier(token):
    # Every thread of every program of the cluster arrives (release: its earlier stores are
    # visible at cluster scope to whoever acquires) and waits (acquire).  The result is
    # ``token`` itself, so the loads that use it cannot be issued before the barrier.
    return tl.inline_asm_elementwise(
        "barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n\tmov.b32 $0, $1;",
        "=r,r", [token], dtype=tl.int32, is_pure=False, pack=1,
    )  # fmt: skip


@triton.jit(do_not_specialize=["x_stride", "y_stride"])
def cluster_softmax_kernel(x_ptr, y_ptr, stats_ptr, x_stride: tl.int64, y_stride: tl.int64,
                           WIDTH: tl.constexpr, P: tl.constexpr, CHUNK: tl.constexpr, VEC: tl.constexpr,
                           RECOMPUTE: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    row = (pid // P).to(tl.int64)
    part = pid % P
    start = row * x_stride
    lead = (start % VEC).to(tl.int32)  # the row's first element sits lead elements past a 16-byte boundary
    base = tl.multiple_of(start - lead, VEC)
    o_base = tl.multiple_of(row * y_stride - lead, VEC)
    k = part * CHUNK + tl.arange(0, CHUNK)
    pos = k - lead
    inside = (pos >= 0) & (pos < WIDTH)
    group = (k // VEC) * VEC - lead
    load = tl.max_constancy((group + VEC > 0) & (group < WIDTH), VEC)
    x = tl.load(x_ptr + base + k, mask=load, other=float("-inf"), eviction_policy="evict_first")
    xf = tl.where(inside, x.to(tl.float32), float("-inf"))
    m = tl.max(xf, axis=0)
    sh = tl.where(m == float("-inf"), 0.0, m)
    e = tl.exp2((xf - sh) * LOG2E)
    s = tl.sum(e, axis=0)
    slot = stats_ptr + pid.to(tl.int64) * 2
    tl.store(slot, m)
    tl.store(slot + 1, s)
    first = _cluster_barrier(part) - part + (row * P).to(tl.int32)  # row * P, after the barrier
    p = tl.arange(0, P)
    ms = tl.load(stats_ptr + (first + p).to(tl.int64) * 2, cache_modifier=".cg")
    ss = tl.load(stats_ptr + (first + p).to(tl.int64) * 2 + 1, cache_modifier=".cg")
    big = tl.max(ms, axis=0)
    bsh = tl.where(big == float("-inf"), 0.0, big)
    total = tl.sum(ss * tl.exp2((ms - bsh) * LOG2E), axis=0)
    if RECOMPUTE:  # noqa: SIM108  (a Triton branch on a constexpr)
        y = tl.exp2((xf - bsh) * LOG2E) / total
    else:
        y = e * (tl.exp2((sh - bsh) * LOG2E) / total)
    y = y.to(y_ptr.dtype.element_ty)
    store = tl.max_constancy((group >= 0) & (group + VEC <= WIDTH), VEC)
    tl.store(y_ptr + o_base + k, y, mask=store)  # whole 16-byte groups: vector stores
    if (part == 0) | (part == (WIDTH + lead - 1) // CHUNK):  # the row's partial end groups, element-wise
        tl.store(y_ptr + o_base + k, y, mask=inside & ~store)


_COMPILED: dict[tuple, object] = {}


def cluster_softmax(x: torch.Tensor, y: torch.Tensor, parts: int, warps: int, recompute: bool, stats) -> None:
    rows, width = x.shape
    vec = 16 // x.element_size()
    aligned = x.stride(0) % vec == 0 and y.stride(0) % vec == 0 and x.data_ptr() % 16 == 0 == y.data_ptr() % 16
    chunk = triton.next_power_of_2(-(-(width + (0 if aligned else vec - 1)) // parts))
    consts = dict(WIDTH=width, P=parts, CHUNK=chunk, VEC=vec, RECOMPUTE=recompute)
    args = (x, y, stats, x.stride(0), y.stride(0))
    key = (x.dtype, width, parts, warps, recompute)
    hit = _COMPILED.get(key)
    if hit is None:
        compiled = cluster_softmax_kernel.warmup(*args, grid=(1,), **consts, num_warps=warps)
        compiled._init_handles()
        hit = _COMPILED[key] = compiled
        ptx = compiled.asm["ptx"]
        print(json.dumps({"kernel": [width, parts, chunk, warps, recompute], "regs": compiled.n_regs,
                          "spills": compiled.n_spills, "smem": compiled.metadata.shared,
                          "order": [ln.strip()[:40] for ln in ptx.splitlines()
                                    if "barrier.cluster" in ln or "st.global.b32" in ln or "ld.global.cg" in ln][:8]}),
              flush=True)  # fmt: skip
    compiled = hit
    compiled.run.launch(rows, 1, 1, torch.cuda.current_stream().cuda_stream, compiled.function, False, False,
                        None, None, (warps, parts, compiled.metadata.shared), None, None, None, *args,
                        *consts.values())  # fmt: skip


def cluster_variants(variants, xs, ys, rows, cols, esize, dev) -> None:  # type: ignore[no-untyped-def]
    """This probe's kernel for every cluster size and warp count whose chunk is 8 to 64
    elements a thread."""
    vec = 16 // esize
    for parts in (2, 4, 8, 16):
        chunk = triton.next_power_of_2(-(-(cols + (0 if cols % vec == 0 else vec - 1)) // parts))
        for warps in (4, 8, 16):
            per_thread = chunk // (32 * warps)
            if not 8 <= per_thread <= 64 or parts * chunk > 1.3 * cols:
                continue
            stats = torch.empty(rows * parts * 2, device=dev)
            for recompute in (False, True):
                if recompute and per_thread < 32:
                    continue
                name = f"cl-p{parts}-w{warps}" + ("-re" if recompute else "")
                variants[name] = lambda i, c=(parts, warps, recompute), s=stats: cluster_softmax(xs[i], ys[i], *c, s)


# The first run (notes/2026-12-03-probe-cluster-softmax-b9e3ba0.log) sized every chunk for a
# row window VEC - 1 elements wider than the row, so power-of-two widths got chunks twice too
# big; an aligned row (lead 0, checked by the caller) needs no such margin.
SHAPES = ((64, 131072, torch.bfloat16), (128, 131072, torch.bfloat16), (256, 65536, torch.bfloat16),
          (8192, 32768, torch.bfloat16))  # fmt: skip

if __name__ == "__main__":
    main(SHAPES, cluster_variants)
