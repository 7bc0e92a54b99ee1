"""Probe (2026-12-03, ninth session): the cluster-launched softmax of
``notes/probe_cluster_softmax.py`` with the row's statistics exchanged through distributed
shared memory instead of L2 (H200, forward, device time from CUDA-graph replay, cold L2).
Exploration, not a study.

Why: the cluster form (P programs of a row launched as one thread-block cluster, the row held
in registers, read once and written once) tied the shipped split at 64 x 131072 (13.86 µs
against 13.43; QuACK 11.3, target 70% of copy = about 11.4), exchanging each program's
(max, sum) through a global scratch vector: a store, a cluster barrier and P loads from L2
(about a microsecond each way) sit between every program's read and its write.  QuACK
exchanges them through the cluster's shared memory.  Triton 3.6 cannot express that (a
reduction over a layout split across CTAs fails ``isReduceWithinCTA`` in Gluon too, and no
op reaches another CTA's shared memory), so here it is inline PTX: each program writes its
pair into slot ``part`` of every cluster member's shared memory (``mapa`` +
``st.shared::cluster``), meets the cluster at a barrier (release / acquire at cluster scope),
and reads the P pairs from its own shared memory.  The slots sit at byte ``OFF`` of the
kernel's dynamic shared memory (Triton's own scratch for the in-CTA reductions sits below
it; the launch asks for ``OFF + 8 P`` bytes).  A first cluster barrier (arrive at the start,
wait before the first remote store) makes sure every program of the cluster has started
before its shared memory is written.

    python3 notes/probe_cluster_dsmem_softmax.py > $OUT/probe_cluster_dsmem_softmax.log

Its first run (notes/2026-12-03-probe-cluster-dsmem-softmax-3e350ae-wronggrid.log) launched
``rows * P`` clusters, P times the grid (the launcher's grid counts clusters): its times are
P times the work and its P = 16 results read and wrote past the rows; not results.
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
OFF = 16384  # bytes: the exchange slots' offset in dynamic shared memory


# The cluster's PTX, shared with notes/probe_cluster_staged_softmax.py (Gluon).
ARRIVE = tl.constexpr("barrier.cluster.arrive.relaxed.aligned;\n\tmov.b32 $0, $1;")
WAIT = tl.constexpr("barrier.cluster.wait.aligned;\n\tmov.b32 $0, $1;")
SYNC = tl.constexpr(
    "barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;\n\tmov.b32 $0, $1;"
)
# (m, s) into byte ``offset`` of cluster member ``rank``'s shared memory ...
PUT = tl.constexpr(
    "{\n\t.reg .u32 a, r;\n\tmov.u32 a, global_smem;\n\tadd.u32 a, a, $2;\n\t"
    "mapa.shared::cluster.u32 r, a, $1;\n\tst.shared::cluster.v2.f32 [r], {$3, $4};\n\tmov.b32 $0, 0;\n\t}"
)
# ... and the pair at byte ``offset`` of this program's own (the token orders it after the barrier).
GET = tl.constexpr(
    "{\n\t.reg .u32 a;\n\tmov.u32 a, global_smem;\n\tadd.u32 a, a, $2;\n\tld.shared.v2.f32 {$0, $1}, [a];\n\t}"
)


@triton.jit
def _arrive(token):
    return tl.inline_asm_elementwise(ARRIVE, "=r,r", [token], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _wait(token):
    return tl.inline_asm_elementwise(WAIT, "=r,r", [token], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _sync(token):
    return tl.inline_asm_elementwise(SYNC, "=r,r", [token], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _put(rank, offset, m, s):
    return tl.inline_asm_elementwise(PUT, "=r,r,r,f,f", [rank, offset, m, s], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _get(offset, token):
    return tl.inline_asm_elementwise(GET, "=f,=f,r,r", [offset, token], dtype=(tl.float32, tl.float32),
                                     is_pure=False, pack=1)  # fmt: skip


@triton.jit(do_not_specialize=["x_stride", "y_stride"])
def dsmem_softmax_kernel(x_ptr, y_ptr, x_stride: tl.int64, y_stride: tl.int64, WIDTH: tl.constexpr,
                         P: tl.constexpr, CHUNK: tl.constexpr, VEC: tl.constexpr, OFFSET: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    row = (pid // P).to(tl.int64)
    part = pid % P  # this program's rank in its cluster (the cluster is P consecutive programs)
    started = _arrive(part)
    start = row * x_stride
    lead = (start % VEC).to(tl.int32)
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
    p = tl.arange(0, P)
    ready = _wait(started) - started  # 0, once every program of the cluster has started
    done = _put(
        p + ready, OFFSET + part * 8 + ready * 0, m + tl.zeros((P,), tl.float32), s + tl.zeros((P,), tl.float32)
    )
    token = _sync(tl.sum(done, axis=0))
    ms, ss = _get(OFFSET + p * 8, token + p * 0)
    big = tl.max(ms, axis=0)
    bsh = tl.where(big == float("-inf"), 0.0, big)
    total = tl.sum(ss * tl.exp2((ms - bsh) * LOG2E), axis=0)
    y = (e * (tl.exp2((sh - bsh) * LOG2E) / total)).to(y_ptr.dtype.element_ty)
    store = tl.max_constancy((group >= 0) & (group + VEC <= WIDTH), VEC)
    tl.store(y_ptr + o_base + k, y, mask=store)
    if (part == 0) | (part == (WIDTH + lead - 1) // CHUNK):
        tl.store(y_ptr + o_base + k, y, mask=inside & ~store)


_COMPILED: dict[tuple, object] = {}


def dsmem_softmax(x: torch.Tensor, y: torch.Tensor, parts: int, warps: int) -> None:
    rows, width = x.shape
    vec = 16 // x.element_size()
    aligned = x.stride(0) % vec == 0 and y.stride(0) % vec == 0 and x.data_ptr() % 16 == 0 == y.data_ptr() % 16
    chunk = triton.next_power_of_2(-(-(width + (0 if aligned else vec - 1)) // parts))
    consts = dict(WIDTH=width, P=parts, CHUNK=chunk, VEC=vec, OFFSET=OFF)
    args = (x, y, x.stride(0), y.stride(0))
    key = (x.dtype, width, parts, warps)
    hit = _COMPILED.get(key)
    if hit is None:
        compiled = dsmem_softmax_kernel.warmup(*args, grid=(1,), **consts, num_warps=warps)
        compiled._init_handles()
        assert compiled.metadata.shared <= OFF, compiled.metadata.shared  # Triton's scratch below the slots
        hit = _COMPILED[key] = compiled
        ptx = compiled.asm["ptx"]
        print(json.dumps({"kernel": [width, parts, chunk, warps], "regs": compiled.n_regs,
                          "spills": compiled.n_spills, "smem": compiled.metadata.shared,
                          "order": [ln.strip()[:44] for ln in ptx.splitlines()
                                    if "cluster" in ln or "ld.shared.v2" in ln][:10]}),
              flush=True)  # fmt: skip
    compiled = hit
    compiled.run.launch(rows, 1, 1, torch.cuda.current_stream().cuda_stream, compiled.function, False, False,
                        None, None, (warps, parts, OFF + 8 * parts), None, None, None, *args,
                        *consts.values())  # fmt: skip


def dsmem_variants(variants, xs, ys, rows, cols, esize, dev) -> None:  # type: ignore[no-untyped-def]
    vec = 16 // esize
    for parts in (4, 8, 16):
        chunk = triton.next_power_of_2(-(-(cols + (0 if cols % vec == 0 else vec - 1)) // parts))
        for warps in (4, 8, 16):
            per_thread = chunk // (32 * warps)
            if not 8 <= per_thread <= 64:
                continue
            variants[f"dsm-p{parts}-w{warps}"] = lambda i, c=(parts, warps): dsmem_softmax(xs[i], ys[i], *c)


SHAPES = ((64, 131072, torch.bfloat16), (128, 131072, torch.bfloat16), (256, 65536, torch.bfloat16),
          (64, 131075, torch.bfloat16), (32, 262144, torch.bfloat16), (8192, 32768, torch.bfloat16))  # fmt: skip

if __name__ == "__main__":
    main(SHAPES, dsmem_variants)
