"""GEMM: ``a @ b`` with fused epilogues, in five variants kept side by side, autograd, op and functional.

Memory traffic: a GEMM of ``[M, K] @ [K, N]`` must read ``a`` and ``b`` once and write ``c``
once (2·(MK + KN + MN) bytes in fp16/bf16) and does 2·MNK flops.  A tile of ``BLOCK_M x
BLOCK_N`` outputs reads a ``BLOCK_M x K`` strip of ``a`` and a ``K x BLOCK_N`` strip of ``b``;
every strip is read by a whole row (column) of tiles, so what reaches DRAM depends on which
tiles run together and share their strips in L2.  The *grouped order* launches ``GROUP_M``
rows of tiles column by column, so that the programs resident at one time share a few strips
of ``b`` and of ``a`` instead of streaming all of ``b`` once per row of tiles (the grouping
study times GROUP_M 1/4/8 with one tile).  At 4096³ and above the operands do not fit in
L2 and the kernel is compute bound only if this reuse works; small-M (decode) shapes are the
opposite: ``b`` (the weight) is read once and is the whole cost, so the question there is
only whether enough programs run to pull DRAM bandwidth (split-K).

The variants:

* ``fixed``: one tile (``FIXED_CONFIG``), pointer loads, grouped order; M, N, K and the
  strides are runtime values (what still compiles anew: below).
* ``autotuned``: the same kernel body with N and K compile-time (per weight shape) and the
  tile, stages and warps chosen by ``triton.autotune``, keyed on a power-of-two bucket of M
  (so a new M in a bucket neither recompiles nor re-tunes), N, K, the layouts and the dtypes.
  The first call of a new key times every config: call it once before capturing a CUDA graph.
* ``persistent``: one program per SM walks the tiles in grouped order (``tile += NUM_SMS``),
  loading through TMA tensor descriptors made on the device (``tl.make_tensor_descriptor``;
  Hopper's copy engine moves the tiles into shared memory without the warps issuing
  addresses), the loop nest flattened so the pipeline does not drain between tiles.
  Default tile 128x256x64, 3 stages, 8 warps, grouped by 16 tile rows (the tile that reached
  ~0.97-1.0x cuBLAS at 4096³/8192³ on the H200 in one probe; the group from a second,
  ``PERSISTENT_CONFIG``).  An operand TMA cannot read as it lies (an inner stride that is
  not 1, a row stride or base that is not 16-byte aligned: a vocabulary of 50257, a K not a multiple of 8)
  is read from a copy that it can (:func:`tma_copy`); GPUs before Hopper take the same
  persistent loop with pointer loads.  The descriptors need global scratch (``triton.set_allocator``, set
  lazily with a torch allocation).  The Triton interpreter runs the descriptors too, so the
  CPU tests cover the TMA path's indexing (not its hardware).  ``c`` is stored through
  pointers, not a TMA store, to keep the epilogue's loads and edge masks in one form: a TMA
  store of two half tiles was built and timed at db8affa and bought nothing (4096³ and 8192³,
  bf16 and fp16, within 1% of the pointer stores either way;
  notes/2026-12-02-probe-matmul-tiles-db8affa.log), so it went again.  TF32 reads an operand
  that wgmma cannot take from shared memory (a 32-bit MN-major one) into registers instead
  (``REG_OPERAND``, in the kernel's docstring), in tiles of its own (``PERSISTENT_CONFIG_TF32``).
* ``warp_specialized``: the persistent loop split between partitions of one program, in
  Gluon (:mod:`kernels._matmul_ws`, which says how): a producer warp issues the TMA loads into
  a ring of stages, and two consumer warpgroups multiply, each running its epilogue while the
  other's main loop keeps the tensor cores busy.  fp16/bf16 on Hopper, N a multiple of 16
  bytes (its TMA store; :func:`ws_eligible`), operands copied as for ``persistent``; every
  other call of this variant runs ``persistent``.  Default tile: :func:`ws_config`'s pick
  from the GPU's table (:func:`ws_tiles`): ping-pong's ``WS_CONFIG`` on the H200, and on an
  H100 SXM also the cooperative ``COOP_CONFIG`` (both consumers on one 128x256 tile) for
  plain products where its waves cost less.  Gluon does not run in the interpreter: the CPU tests compile it for sm_90
  and check the instructions; the GPU tests run it.
* ``split_k``: for decode-like shapes (M = 1..128, large K) the output has too few tiles to
  occupy the GPU; K is cut into ``splits`` ranges, each program writes an fp32 partial tile
  to a workspace ``[splits, M, N]`` and counts itself in on its tile's counter, and the last
  of a tile's programs to arrive sums the partials in split order (the same bits on every run,
  whatever the arrival order) and applies the epilogue: one launch, whose workspace and
  counters are kept per stream.  The workspace costs 2·4·splits·M·N bytes of traffic, small
  beside the weight's 2·K·N when M is small.

Operands are read in place with their own strides: ``a.T`` or ``b.T`` is the same memory with
swapped strides, never a copy.  The one exception is the TMA kernels' (``persistent`` and
``warp_specialized`` on Hopper): an operand whose other stride or base is not a multiple of 16
bytes is copied, once per call, into a buffer whose row stride is (:func:`tma_copy`; the
product reads it many times, the copy once: at 8192x50257x768 bf16, the weight a 77 MB copy,
the pointer-loaded kernels took 5.2 ms and cuBLAS 5.1).  Each operand's layout (inner dimension contiguous, outer
dimension contiguous, or neither) is a compile-time constant, so contiguous loads vectorize
while the strides themselves stay runtime values; a stride that is a multiple of 16 bytes is
announced the same way (``(s // VEC) * VEC`` lets the compiler see the multiple).

What compiles anew: the layouts, dtypes, epilogue, tile, and whether N and K are multiples of
16 bytes and K of BLOCK_K (the autotuned kernel: N's and K's values).  Never M's value when
``a`` is ``[M, K]`` with K contiguous (a linear layer's forward, every decode step).  Where M
is a contiguous or the reduction dimension (``a.T`` operands; the weight gradient ``Aᵀ·dZ``,
whose K is M) those multiples are compile-time too: at most four versions of a kernel.

Epilogues run on the fp32 accumulator before the one store: ``bias`` (+ bias[N]),
``bias_gelu`` (gelu_tanh(acc + bias)) and ``residual`` (+ residual[M, N]).  Fused, they cost
one read of the bias (or residual) and no extra pass over ``c``; unfused (cuBLAS then the
op) they cost a write and a read of ``c`` more per op.  What a fused epilogue costs instead is
instructions while the tensor cores wait (no warp runs the next tile's main loop meanwhile):
GELU comes from :mod:`kernels._activations` (two MUFU instructions and a few FMAs an output;
the form with ``tl.exp`` and a full division took about 20).  At 8192³ bf16 the earlier form
ran 60-75 µs (4%) behind the plain product (run matmul-20261201T145556Z-b2a50f2-quick); this
one 38-50 µs (notes/2026-12-02-probe-matmul-tiles-{f73b7c2,db8affa}.log), which is what the
SFU allows: 16 MUFU results per SM and clock make 2 x 8192² of them at least 36 µs when no
main loop runs beside them.  cuBLASLt's GELU epilogue shows no such cost (1630 µs against its
plain product's 1653 in the same probe): its epilogue runs in other warps while the next tile's
product proceeds, which Triton 3.6 does not do on Hopper (``warp_specialize`` compiled to the
same one-partition kernel for sm_90): ``warp_specialized`` does it by hand.

Backward: ``dA = dZ·Bᵀ`` and ``dB = Aᵀ·dZ`` with the same kernels, passing the views ``b.T``
and ``a.T`` (swapped strides, no copies), and only the gradients that are needed.  ``dZ`` is
the output gradient, times gelu'(z) for ``bias_gelu``; the bias gradient is the column sum of
``dZ`` (a fixed-order reduction, deterministic).  gelu' needs the pre-activation ``z = a@b +
bias``: the forward stores it (one more ``[M, N]`` write in the forward and one read in the
backward, and ``[M, N]`` elements kept alive between them) when a gradient is needed,
instead of recomputing it with a second GEMM in the backward (2·MNK flops more).  For large K
the GEMM costs far more than the memory, hence the choice; without grad the extra store is
skipped.

Reading order: the kernels (shared tile helpers, four variants, the epilogue backward; the
fifth variant, in Gluon, is kernels/_matmul_ws.py), the launch plan (configs, default
dispatch, layouts, launches), autograd, the ``torch.library`` ops that ``torch.compile``
traces, and the public functional.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import io
import textwrap
import tokenize
from dataclasses import dataclass, replace
from typing import Any

import torch
import triton
import triton.language as tl
from triton.runtime import _allocation

from kernels import _checks
from kernels._activations import gelu_tanh, gelu_tanh_grad
from kernels._checks import check_device, check_same_device, check_tensor, eager_path
from kernels._launch import INTERPRETER, FastKernel, capturing, current_device, current_stream
from kernels._matmul_ws import ws_matmul_kernel
from kernels._rowwise import column_sum, sm_count
from kernels.plans import cdiv, next_power_of_2

VARIANTS = ("fixed", "autotuned", "persistent", "warp_specialized", "split_k")
EPILOGUES = (None, "bias", "bias_gelu", "residual")
PRECISIONS = ("tf32", "ieee")
DTYPES = (torch.float16, torch.bfloat16, torch.float32)

_EPILOGUE_CODE = {None: 0, "bias": 1, "bias_gelu": 2, "residual": 3}
# Operand layouts (compile-time): which of a 2-D operand's dimensions is contiguous.
_GENERAL, _INNER, _OUTER = 0, 1, 2

# =============================================================================== kernels
# Every integer argument is tl.int64 and runtime (do_not_specialize): offsets such as
# m * stride_am may pass 2^31, and a new M (or stride that follows M) must not recompile.

_INTERPRETED = tl.constexpr(INTERPRETER)


@triton.jit
def _dot(a, b, acc, PRECISION: tl.constexpr):
    if _INTERPRETED and a.dtype == tl.bfloat16:
        # The interpreter keeps bf16 as uint16 bit patterns and its dot multiplies those: widen
        # first (exact: every bf16 is an fp32, and the products are accumulated in fp32 anyway).
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc, input_precision=PRECISION)


@triton.jit
def _in_registers(x):
    # An identity the compiler cannot see through: the TF32 dot takes an fp32 operand it
    # cannot read as K-major from shared memory (wgmma's 32-bit operands must be K-major) from
    # registers instead (one ld.shared per element, overlapped with the previous wgmma), where
    # it would otherwise copy the tile through registers into a K-major buffer in shared
    # memory and wait for every wgmma before the next copy (see _mm_persistent_kernel).
    if _INTERPRETED:
        return x
    else:
        return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _hint(stride, VEC: tl.constexpr):
    # The host checked stride % VEC == 0 (VEC elements = 16 bytes); (s // VEC) * VEC shows the
    # compiler the multiple (for 16-byte vector loads) without specializing on the value.
    if VEC > 1:
        return (stride // VEC) * VEC
    else:
        return stride


@triton.jit
def _offsets(rows, cols, s0, s1, LAYOUT: tl.constexpr):
    # [R, C] element offsets of a 2-D operand; the contiguous dimension is not multiplied.
    if LAYOUT == 1:
        return rows[:, None] * s0 + cols[None, :]
    elif LAYOUT == 2:
        return rows[:, None] + cols[None, :] * s1
    else:
        return rows[:, None] * s0 + cols[None, :] * s1


@triton.jit
def _grouped(tile, num_m, num_n, GROUP_M: tl.constexpr):
    # Tile -> (tile row, tile column), GROUP_M tile rows at a time, column by column inside a group.
    per_group = GROUP_M * num_n
    group = tile // per_group
    first_m = group * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % size_m
    pid_n = (tile % per_group) // size_m
    return pid_m, pid_n


@triton.jit
def _mainloop(
    a_ptr, b_ptr, pid_m, pid_n, M, N, K, k_start, k_tiles, s_am, s_ak, s_bk, s_bn,
    A_LAYOUT: tl.constexpr, B_LAYOUT: tl.constexpr, A_VEC: tl.constexpr, B_VEC: tl.constexpr,
    M_VEC: tl.constexpr, N_VEC: tl.constexpr, K_VEC: tl.constexpr, EVEN_K: tl.constexpr,
    PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):  # fmt: skip
    # fp32 accumulator of one output tile over k_tiles blocks of K from k_start.  Rows past M
    # and columns past N wrap around (% M, % N): every load is in bounds without a mask, and
    # the wrapped rows are never stored.  Only the K tail is masked.  The hints: the strided
    # dimension's stride is a multiple of 16 bytes (A_VEC, B_VEC), and where M (N) is the
    # contiguous dimension and a multiple of VEC (M_VEC, N_VEC) a wrapped index vector is still
    # contiguous in aligned runs of VEC (a wrap falls on a multiple of M): 16-byte loads.  With
    # K a multiple of VEC (K_VEC) the K-tail mask is constant over such runs: the masked loads
    # of a K that is not a multiple of BLOCK_K stay 16-byte vectors too.
    s_am = _hint(s_am, A_VEC) if A_LAYOUT == 1 else s_am
    s_ak = _hint(s_ak, A_VEC) if A_LAYOUT == 2 else s_ak
    s_bk = _hint(s_bk, B_VEC) if B_LAYOUT == 1 else s_bk
    s_bn = _hint(s_bn, B_VEC) if B_LAYOUT == 2 else s_bn
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    if A_LAYOUT == 2 and M_VEC > 1:
        rm = tl.max_contiguous(tl.multiple_of(rm, M_VEC), M_VEC)
    if B_LAYOUT == 1 and N_VEC > 1:
        rn = tl.max_contiguous(tl.multiple_of(rn, N_VEC), N_VEC)
    rk = tl.arange(0, BLOCK_K)
    k_end = _hint(K, K_VEC)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for i in range(0, k_tiles):
        k = k_start + i * BLOCK_K + rk
        a_off = _offsets(rm, k, s_am, s_ak, A_LAYOUT)
        b_off = _offsets(k, rn, s_bk, s_bn, B_LAYOUT)
        if EVEN_K:
            a = tl.load(a_ptr + a_off)
            b = tl.load(b_ptr + b_off)
        else:
            a = tl.load(a_ptr + a_off, mask=k[None, :] < k_end, other=0.0)
            b = tl.load(b_ptr + b_off, mask=k[:, None] < k_end, other=0.0)
        acc = _dot(a, b, acc, PRECISION)
    return acc


@triton.jit
def _finish(
    acc, rm, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
    EPILOGUE: tl.constexpr, STORE_PRE: tl.constexpr, R_LAYOUT: tl.constexpr, R_VEC: tl.constexpr,
    C_VEC: tl.constexpr, C_I32: tl.constexpr = False,
):  # fmt: skip
    # The epilogue on the fp32 tile, then the one store of c (and of the pre-activation z for
    # the backward of bias_gelu).  c and z are ours: contiguous [M, N], row stride s_cm = N;
    # with N a multiple of VEC (C_VEC) the column mask is constant over aligned runs of VEC and
    # the stores stay 16-byte vectors.  Without (an odd N) every element is its own 2-byte
    # store, and the store's layout gives a thread one column of all BLOCK_M rows: 64-bit
    # offsets then take two registers an element, and the persistent kernel's 128x256 tile
    # spilled (255 registers, 74 spills at 8192x50257x768, run matmul-20261204T102927Z-1888150).
    # C_I32 (the host's promise that (M + BLOCK_M) * N < 2^31) keeps them 32-bit: 178 registers,
    # no spill (ptxas for sm_90).
    mask = (rm[:, None] < M) & (rn[None, :] < _hint(N, C_VEC))
    if EPILOGUE == 1 or EPILOGUE == 2:
        bias = tl.load(bias_ptr + rn * s_bias, mask=rn < N, other=0.0).to(tl.float32)
        acc = acc + bias[None, :]
    if EPILOGUE == 3:
        s_rm = _hint(s_rm, R_VEC) if R_LAYOUT == 1 else s_rm
        res = tl.load(res_ptr + _offsets(rm, rn, s_rm, s_rn, R_LAYOUT), mask=mask, other=0.0)
        acc = acc + res.to(tl.float32)
    if C_I32:
        c_off = rm.to(tl.int32)[:, None] * s_cm.to(tl.int32) + rn.to(tl.int32)[None, :]
    else:
        c_off = rm[:, None] * _hint(s_cm, C_VEC) + rn[None, :]
    if EPILOGUE == 2:
        if STORE_PRE:
            tl.store(pre_ptr + c_off, acc.to(pre_ptr.dtype.element_ty), mask=mask)
        acc = gelu_tanh(acc)
    tl.store(c_ptr + c_off, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _finish_in_parts(
    acc, row0, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
    EPILOGUE: tl.constexpr, STORE_PRE: tl.constexpr, R_LAYOUT: tl.constexpr, R_VEC: tl.constexpr,
    C_VEC: tl.constexpr, C_I32: tl.constexpr, PARTS: tl.constexpr,
):  # fmt: skip
    # _finish on the tile's rows from row0, whole (PARTS 1) or in 2 or 4 blocks of rows.
    BM: tl.constexpr = acc.shape[0]
    BN: tl.constexpr = acc.shape[1]
    if PARTS == 1:
        _finish(acc, row0 + tl.arange(0, BM), rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
                EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC, C_I32)  # fmt: skip
    elif PARTS == 2:
        h0, h1 = tl.split(tl.permute(tl.reshape(acc, (2, BM // 2, BN)), (1, 2, 0)))
        rows = row0 + tl.arange(0, BM // 2)
        _finish(h0, rows, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
                EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC, C_I32)  # fmt: skip
        _finish(h1, rows + BM // 2, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
                EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC, C_I32)  # fmt: skip
    else:
        h0, h1 = tl.split(tl.permute(tl.reshape(acc, (2, 2, BM // 4, BN)), (2, 3, 1, 0)))
        q0, q1 = tl.split(h0)
        q2, q3 = tl.split(h1)
        rows = row0 + tl.arange(0, BM // 4)
        _finish(q0, rows, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
                EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC, C_I32)  # fmt: skip
        _finish(q1, rows + BM // 4, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
                EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC, C_I32)  # fmt: skip
        _finish(q2, rows + BM // 2, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
                EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC, C_I32)  # fmt: skip
        _finish(q3, rows + 3 * BM // 4, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
                EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC, C_I32)  # fmt: skip


# The compile-time description of one problem, in every GEMM kernel's signature: operand
# layouts (_GENERAL/_INNER/_OUTER) and their 16-byte hints, the epilogue, the dot precision.
@triton.jit(do_not_specialize=["M", "N", "K", "s_am", "s_ak", "s_bk", "s_bn", "s_cm", "s_bias", "s_rm", "s_rn"])
def _mm_fixed_kernel(
    a_ptr, b_ptr, c_ptr, pre_ptr, bias_ptr, res_ptr, M: tl.int64, N: tl.int64, K: tl.int64,
    s_am: tl.int64, s_ak: tl.int64, s_bk: tl.int64, s_bn: tl.int64, s_cm: tl.int64, s_bias: tl.int64,
    s_rm: tl.int64, s_rn: tl.int64,
    A_LAYOUT: tl.constexpr, B_LAYOUT: tl.constexpr, R_LAYOUT: tl.constexpr, A_VEC: tl.constexpr,
    B_VEC: tl.constexpr, M_VEC: tl.constexpr, C_VEC: tl.constexpr, R_VEC: tl.constexpr, K_VEC: tl.constexpr,
    EVEN_K: tl.constexpr,
    EPILOGUE: tl.constexpr, STORE_PRE: tl.constexpr, PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    """One program per output tile, grouped order; M, N, K and every stride runtime."""
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _grouped(tl.program_id(0).to(tl.int64), num_m, num_n, GROUP_M)
    acc = _mainloop(a_ptr, b_ptr, pid_m, pid_n, M, N, K, 0, tl.cdiv(K, BLOCK_K), s_am, s_ak, s_bk, s_bn,
                    A_LAYOUT, B_LAYOUT, A_VEC, B_VEC, M_VEC, C_VEC, K_VEC, EVEN_K, PRECISION,
                    BLOCK_M, BLOCK_N, BLOCK_K)  # fmt: skip
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    _finish(acc, rm, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
            EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC)  # fmt: skip


@triton.jit(do_not_specialize=["M", "m_bucket", "s_am", "s_ak", "s_bk", "s_bn", "s_cm", "s_bias", "s_rm", "s_rn"])
def _mm_tuned_body(
    a_ptr, b_ptr, c_ptr, pre_ptr, bias_ptr, res_ptr, M: tl.int64, m_bucket: tl.int64,
    s_am: tl.int64, s_ak: tl.int64, s_bk: tl.int64, s_bn: tl.int64, s_cm: tl.int64, s_bias: tl.int64,
    s_rm: tl.int64, s_rn: tl.int64,
    N: tl.constexpr, K: tl.constexpr, A_LAYOUT: tl.constexpr, B_LAYOUT: tl.constexpr, R_LAYOUT: tl.constexpr,
    A_VEC: tl.constexpr, B_VEC: tl.constexpr, M_VEC: tl.constexpr, C_VEC: tl.constexpr, R_VEC: tl.constexpr,
    EPILOGUE: tl.constexpr, STORE_PRE: tl.constexpr, PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    """The fixed kernel's body with N and K compile-time (per weight shape); ``m_bucket`` (the
    power-of-two bucket of M) is only the autotuner's key."""
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _grouped(tl.program_id(0).to(tl.int64), num_m, num_n, GROUP_M)
    acc = _mainloop(a_ptr, b_ptr, pid_m, pid_n, M, N, K, 0, tl.cdiv(K, BLOCK_K), s_am, s_ak, s_bk, s_bn,
                    A_LAYOUT, B_LAYOUT, A_VEC, B_VEC, M_VEC, C_VEC, 1, K % BLOCK_K == 0, PRECISION,
                    BLOCK_M, BLOCK_N, BLOCK_K)  # fmt: skip
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    _finish(acc, rm, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
            EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC)  # fmt: skip


@triton.jit
def _tile_product(
    a_ptr, b_ptr, a_desc, b_desc, pid_m, pid_n, M, N, K, k0, k1, s_am, s_ak, s_bk, s_bn,
    A_LAYOUT: tl.constexpr, B_LAYOUT: tl.constexpr, A_VEC: tl.constexpr, B_VEC: tl.constexpr,
    M_VEC: tl.constexpr, C_VEC: tl.constexpr, K_VEC: tl.constexpr, EVEN_K: tl.constexpr,
    PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    USE_TMA: tl.constexpr, REG_OPERAND: tl.constexpr,
):  # fmt: skip
    # The persistent kernel's fp32 accumulator of tile (pid_m, pid_n) over K blocks [k0, k1).
    if USE_TMA:
        om = (pid_m * BLOCK_M).to(tl.int32)
        on = (pid_n * BLOCK_N).to(tl.int32)
        if REG_OPERAND == 1:
            acc_t = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            for ki in range(k0, k1):
                ok = ki * BLOCK_K
                acc_t = _dot(_in_registers(b_desc.load([ok, on]).T), a_desc.load([om, ok]).T, acc_t, PRECISION)
            acc = acc_t.T
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for ki in range(k0, k1):
                ok = ki * BLOCK_K
                a = a_desc.load([om, ok]) if A_LAYOUT == 1 else a_desc.load([ok, om]).T
                b = b_desc.load([ok, on]) if B_LAYOUT == 1 else b_desc.load([on, ok]).T
                acc = _dot(_in_registers(a) if REG_OPERAND == 2 else a, b, acc, PRECISION)
    else:
        acc = _mainloop(a_ptr, b_ptr, pid_m, pid_n, M, N, K, k0 * BLOCK_K, k1 - k0, s_am, s_ak, s_bk, s_bn,
                        A_LAYOUT, B_LAYOUT, A_VEC, B_VEC, M_VEC, C_VEC, K_VEC, EVEN_K, PRECISION,
                        BLOCK_M, BLOCK_N, BLOCK_K)  # fmt: skip
    return acc


@triton.jit(do_not_specialize=["M", "N", "K", "s_am", "s_ak", "s_bk", "s_bn", "s_cm", "s_bias", "s_rm", "s_rn",
                               "tail_tiles", "tail_splits"])  # fmt: skip
def _mm_persistent_kernel(
    a_ptr, b_ptr, c_ptr, pre_ptr, bias_ptr, res_ptr, part_ptr, count_ptr, M: tl.int64, N: tl.int64, K: tl.int64,
    s_am: tl.int64, s_ak: tl.int64, s_bk: tl.int64, s_bn: tl.int64, s_cm: tl.int64, s_bias: tl.int64,
    s_rm: tl.int64, s_rn: tl.int64, tail_tiles: tl.int64, tail_splits: tl.int64,
    A_LAYOUT: tl.constexpr, B_LAYOUT: tl.constexpr, R_LAYOUT: tl.constexpr, A_VEC: tl.constexpr,
    B_VEC: tl.constexpr, M_VEC: tl.constexpr, C_VEC: tl.constexpr, R_VEC: tl.constexpr, K_VEC: tl.constexpr,
    EVEN_K: tl.constexpr,
    EPILOGUE: tl.constexpr, STORE_PRE: tl.constexpr, PRECISION: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
    USE_TMA: tl.constexpr, REG_OPERAND: tl.constexpr, C_I32: tl.constexpr, SPLIT_TAIL: tl.constexpr,
):  # fmt: skip
    """One program per SM; program p computes tiles p, p + NUM_SMS, ... in grouped order.

    USE_TMA: a and b are read through device-side tensor descriptors (TMA; out-of-bounds
    boxes are zero-filled by the hardware, so no masks and no wrap-around).  A transposed
    operand (its outer dimension contiguous, _OUTER) gets a descriptor over its memory as it
    lies, and the loaded tile is transposed in the dot.  The interpreter runs the descriptors
    too (numpy); without USE_TMA (a layout TMA cannot read, or a GPU before Hopper) the same
    loop loads through pointers.  Tile and K counters are 32-bit (descriptor coordinates
    are; 2^31 tiles would be an output of 2^44 elements).

    REG_OPERAND (TF32 through TMA only; 0 elsewhere): wgmma reads a 32-bit operand from shared
    memory only K-major, and Triton 3.6 makes an MN-major one K-major by copying each tile
    through registers into a second buffer and waiting for every wgmma before the next copy
    (5.7x behind cuBLAS at 4096³, run matmul-20261203T144707Z-e7a7746).  The first operand
    may come from registers in any layout, so: 1 (row-major a and b, the common case: b is
    MN-major) computes the transposed product Cᵀ = Bᵀ·Aᵀ with Bᵀ read into registers and Aᵀ
    K-major from shared memory, and transposes the accumulator once per tile; 2 (a MN-major,
    b K-major) reads a into registers.  Both operands MN-major stay on the copy (0).

    SPLIT_TAIL: the last ``tail_tiles`` tiles (in grouped order: the partial last wave) are
    split along K into ``tail_splits`` ranges of whole BLOCK_K steps, one a program, after
    the whole tiles (the data-parallel + split-K hybrid of Osama et al., "Stream-K", PPoPP
    2023).  Program p takes range p // tail_tiles of tile p % tail_tiles, so the programs
    that run together read the same K range of different tiles: they share its blocks in L2
    as whole tiles do.  (Stream-K's own plan, contiguous ranges over tiles and K, put
    programs at different K on tiles that share a strip; at the LM head's dA it read the
    weight from DRAM once a program and ran 5% behind whole tiles,
    notes/2026-12-04d-probe-stream-k-0eeb4de.log.)  Each range's fp32 partial goes to the
    program's slot of ``part_ptr`` (BLOCK_M x BLOCK_N), then the program counts itself in at
    the tile's counter (``count_ptr``: one int32 a tile, zero on entry and on exit).  On the
    GPU every range's program waits until all of the tile's ranges have arrived (the launch
    is cooperative: every program is resident, so the wait ends), then sums its share of the
    tile's 16-row parts from every slot in range order and runs the epilogue on them; the
    last of a second count resets the counter.  Under the interpreter, which runs programs
    one after another, the last to arrive sums every part.  Either way the sum's order is the
    range order: the same bits on every call."""
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    num_tiles = (num_m * num_n).to(tl.int32)
    k_tiles = tl.cdiv(K, BLOCK_K).to(tl.int32)
    a_desc = a_ptr
    b_desc = b_ptr
    if USE_TMA:
        if A_LAYOUT == 1:
            a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[s_am, 1], block_shape=[BLOCK_M, BLOCK_K])
        else:
            a_desc = tl.make_tensor_descriptor(a_ptr, shape=[K, M], strides=[s_ak, 1], block_shape=[BLOCK_K, BLOCK_M])
        if B_LAYOUT == 1:
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[s_bk, 1], block_shape=[BLOCK_K, BLOCK_N])
        else:
            b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[s_bn, 1], block_shape=[BLOCK_N, BLOCK_K])
    # Element-wise stores (an odd N) with an epilogue tensor: the tile in row parts, fewer
    # offsets live at once (ptxas for sm_90 at 8192x50257x768: bias + GELU with the
    # pre-activation's store spilled 1160 bytes whole, 104 in halves, none in quarters; the
    # residual 580 whole, none in halves, 484 in quarters; bias and none, none whole).
    PARTS: tl.constexpr = 1 if C_VEC != 1 else (4 if EPILOGUE == 2 else (2 if EPILOGUE == 3 else 1))
    dp_tiles = num_tiles - tail_tiles.to(tl.int32) if SPLIT_TAIL else num_tiles
    for tile in tl.range(tl.program_id(0), dp_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _grouped(tile, num_m, num_n, GROUP_M)
        acc = _tile_product(a_ptr, b_ptr, a_desc, b_desc, pid_m, pid_n, M, N, K, 0, k_tiles, s_am, s_ak, s_bk, s_bn,
                            A_LAYOUT, B_LAYOUT, A_VEC, B_VEC, M_VEC, C_VEC, K_VEC, EVEN_K, PRECISION,
                            BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, REG_OPERAND)  # fmt: skip
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        _finish_in_parts(acc, pid_m * BLOCK_M, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
                         EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC, C_I32, PARTS)  # fmt: skip
    if SPLIT_TAIL:
        p = tl.program_id(0)
        if p < tail_tiles * tail_splits:
            t = p % tail_tiles.to(tl.int32)
            per = tl.cdiv(k_tiles, tail_splits.to(tl.int32))  # K steps a range: none empty (tail_split)
            k0 = p // tail_tiles.to(tl.int32) * per
            k1 = tl.minimum(k_tiles, k0 + per)
            pid_m, pid_n = _grouped(dp_tiles + t, num_m, num_n, GROUP_M)
            acc = _tile_product(a_ptr, b_ptr, a_desc, b_desc, pid_m, pid_n, M, N, K, k0, k1, s_am, s_ak, s_bk,
                                s_bn, A_LAYOUT, B_LAYOUT, A_VEC, B_VEC, M_VEC, C_VEC, K_VEC, EVEN_K, PRECISION,
                                BLOCK_M, BLOCK_N, BLOCK_K, USE_TMA, REG_OPERAND)  # fmt: skip
            # The partial to this program's slot (L2: 128 KB for 128x256), then the counter.
            rows = tl.arange(0, BLOCK_M)
            cols = tl.arange(0, BLOCK_N)
            tl.store(part_ptr + p.to(tl.int64) * (BLOCK_M * BLOCK_N) + rows[:, None] * BLOCK_N + cols[None, :], acc)
            tl.debug_barrier()  # every warp's stores are issued before the release below
            arrived = tl.atomic_add(count_ptr + t, 1, sem="acq_rel", scope="gpu")
            row0 = pid_m * BLOCK_M
            rn = pid_n * BLOCK_N + cols
            if _INTERPRETED:  # programs run one after another: the last to arrive sums every part
                if arrived == tail_splits - 1:
                    tl.atomic_xchg(count_ptr + t, 0, sem="relaxed", scope="gpu")
                    _finish_split_tail(part_ptr, t, tail_tiles, tail_splits, 0, 1, row0, rn, M, N, c_ptr, s_cm,
                                       pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn, EPILOGUE, STORE_PRE,
                                       R_LAYOUT, R_VEC, C_VEC, C_I32, BLOCK_M, BLOCK_N)  # fmt: skip
            else:
                # Every range's program sums its share of the tile's row parts, once all have
                # arrived (the launch is cooperative: every program is resident, so the wait
                # ends); then a second count, whose last arrival resets the counter.
                seen = arrived + 1
                while seen < tail_splits:
                    seen = tl.atomic_add(count_ptr + t, 0, sem="acquire", scope="gpu")
                tl.debug_barrier()
                _finish_split_tail(part_ptr, t, tail_tiles, tail_splits, p // tail_tiles.to(tl.int32),
                                   tail_splits, row0, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr,
                                   s_rm, s_rn, EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC, C_I32, BLOCK_M,
                                   BLOCK_N)  # fmt: skip
                if tl.atomic_add(count_ptr + t, 1, sem="relaxed", scope="gpu") == 2 * tail_splits - 1:
                    tl.atomic_xchg(count_ptr + t, 0, sem="relaxed", scope="gpu")


@triton.jit
def _finish_split_tail(
    part_ptr, t, tail_tiles, splits, share, shares, row0, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr,
    s_rm, s_rn, EPILOGUE: tl.constexpr, STORE_PRE: tl.constexpr, R_LAYOUT: tl.constexpr, R_VEC: tl.constexpr,
    C_VEC: tl.constexpr, C_I32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):  # fmt: skip
    # Tail tile t's row parts share, share + shares, ...: the sum of the tile's range partials
    # (slots t, t + tail_tiles, ...) in range order, then the epilogue and the store.  Parts of
    # 16 rows (the whole tile and a slot in registers would be twice the accumulator), four
    # slots' loads in flight.  One program summing a whole tile split 11 ways (1.4 MB of
    # slots) was most of the partial wave's time (notes/2026-12-04d-probe-stream-k-b5aab6a.log),
    # hence the shares.  Loads bypass L1 (.cg): other SMs wrote the slots.
    ROWS: tl.constexpr = 16
    TILE: tl.constexpr = BLOCK_M * BLOCK_N
    cols = tl.arange(0, BLOCK_N)
    for part in range(share, BLOCK_M // ROWS, shares):
        rows = part * ROWS + tl.arange(0, ROWS)
        at = rows[:, None] * BLOCK_N + cols[None, :]  # 32-bit offsets from each slot's scalar base
        tot = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
        for s in range(0, splits, 4):
            x0 = tl.load(part_ptr + (t + s * tail_tiles) * TILE + at, cache_modifier=".cg")
            x1 = tl.load(part_ptr + (t + (s + 1) * tail_tiles) * TILE + at, mask=s + 1 < splits, other=0.0,
                         cache_modifier=".cg")  # fmt: skip
            x2 = tl.load(part_ptr + (t + (s + 2) * tail_tiles) * TILE + at, mask=s + 2 < splits, other=0.0,
                         cache_modifier=".cg")  # fmt: skip
            x3 = tl.load(part_ptr + (t + (s + 3) * tail_tiles) * TILE + at, mask=s + 3 < splits, other=0.0,
                         cache_modifier=".cg")  # fmt: skip
            tot = (((tot + x0) + x1) + x2) + x3
        _finish(tot, row0 + rows, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
                EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC, C_I32)  # fmt: skip


@triton.jit
def _split_partial(
    a_ptr, b_ptr, M, N, K, k_per_split, s_am, s_ak, s_bk, s_bn,
    A_LAYOUT: tl.constexpr, B_LAYOUT: tl.constexpr, A_VEC: tl.constexpr, B_VEC: tl.constexpr,
    M_VEC: tl.constexpr, C_VEC: tl.constexpr, K_VEC: tl.constexpr, EVEN_K: tl.constexpr,
    PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):  # fmt: skip
    # Program (tile, split) of split-K: the fp32 partial over its range of K, its split, and
    # where the tile lies in a contiguous [M, N] (rows, columns, N hinted a multiple of C_VEC,
    # the mask).  Shared with the one-launch form timed by notes/probe_split_one_launch.py.
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _grouped(tl.program_id(0).to(tl.int64), num_m, num_n, GROUP_M)
    split = tl.program_id(1).to(tl.int64)
    k_start = split * _hint(k_per_split, BLOCK_K)
    k_tiles = tl.cdiv(tl.minimum(K - k_start, k_per_split), BLOCK_K)
    acc = _mainloop(a_ptr, b_ptr, pid_m, pid_n, M, N, K, k_start, k_tiles, s_am, s_ak, s_bk, s_bn,
                    A_LAYOUT, B_LAYOUT, A_VEC, B_VEC, M_VEC, C_VEC, K_VEC, EVEN_K, PRECISION,
                    BLOCK_M, BLOCK_N, BLOCK_K)  # fmt: skip
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n = _hint(N, C_VEC)
    mask = (rm[:, None] < M) & (rn[None, :] < n)
    return acc, split, rm, rn, n, mask


@triton.jit(do_not_specialize=["M", "N", "K", "k_per_split", "splits", "s_am", "s_ak", "s_bk", "s_bn", "s_cm",
                               "s_bias", "s_rm", "s_rn"])  # fmt: skip
def _mm_split_kernel(
    a_ptr, b_ptr, ws_ptr, count_ptr, c_ptr, pre_ptr, bias_ptr, res_ptr, M: tl.int64, N: tl.int64, K: tl.int64,
    k_per_split: tl.int64, splits: tl.int64, s_am: tl.int64, s_ak: tl.int64, s_bk: tl.int64, s_bn: tl.int64,
    s_cm: tl.int64, s_bias: tl.int64, s_rm: tl.int64, s_rn: tl.int64,
    A_LAYOUT: tl.constexpr, B_LAYOUT: tl.constexpr, A_VEC: tl.constexpr, B_VEC: tl.constexpr,
    M_VEC: tl.constexpr, C_VEC: tl.constexpr, K_VEC: tl.constexpr, EVEN_K: tl.constexpr,
    PRECISION: tl.constexpr, R_LAYOUT: tl.constexpr, R_VEC: tl.constexpr, EPILOGUE: tl.constexpr,
    STORE_PRE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):  # fmt: skip
    """Split-K in one launch.  Program (tile, split) writes the fp32 partial of its K range
    [split·k_per_split, +k_per_split) (k_per_split a multiple of BLOCK_K, so only the last split
    meets the K tail) to ws[split], then counts itself in on the tile's counter; the last of the
    tile's ``splits`` programs to arrive sums the partials in split order from zero (the same
    bits on every run, whatever the arrival order), runs the epilogue, stores, and sets the
    counter back to zero for the next call."""
    tile = tl.program_id(0)
    acc, split, rm, rn, n, mask = _split_partial(a_ptr, b_ptr, M, N, K, k_per_split, s_am, s_ak, s_bk, s_bn,
                                                 A_LAYOUT, B_LAYOUT, A_VEC, B_VEC, M_VEC, C_VEC, K_VEC, EVEN_K,
                                                 PRECISION, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)  # fmt: skip
    off = rm[:, None] * n + rn[None, :]
    tl.store(ws_ptr + split * M * n + off, acc, mask=mask)
    # Every warp's stores are issued before the release; the acquire of the last arrival makes
    # all of the tile's partials visible to it.  Its loads bypass L1 (.cg): other SMs wrote them.
    tl.debug_barrier()
    arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
    if arrived == splits - 1:
        tot = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in range(0, splits):
            tot += tl.load(ws_ptr + s * M * n + off, mask=mask, other=0.0, cache_modifier=".cg")
        _finish(tot, rm, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
                EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC)  # fmt: skip
        tl.atomic_xchg(count_ptr + tile, 0, sem="relaxed", scope="gpu")


@triton.jit(do_not_specialize=["rows", "cols", "s0", "s1", "ld"])
def _pad_copy_kernel(
    src_ptr, dst_ptr, rows: tl.int64, cols: tl.int64, s0: tl.int64, s1: tl.int64, ld: tl.int64,
    VEC: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):  # fmt: skip
    """``dst[r, c] = src[r, c]`` for c < cols and 0 for cols ≤ c < ld (tma_copy's padding):
    ``dst`` is contiguous rows of ``ld`` elements, a multiple of VEC (16 bytes), so every store
    is a 16-byte vector (the store mask is constant over runs of VEC); ``src`` has any strides,
    its rows read in coalesced runs of 2- or 4-byte loads.  One read and one write of the
    operand: torch's strided copy into the same padded view moved 1.7 TB/s at 768x50257 bf16
    (92 µs, notes/2026-12-04-probe-odd-rows-309c05d.log), this kernel 3.2 (``_PAD_BLOCK``)."""
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    x = tl.load(src_ptr + r[:, None] * s0 + c[None, :] * s1, mask=(r[:, None] < rows) & (c[None, :] < cols), other=0.0)
    ld = _hint(ld, VEC)
    tl.store(dst_ptr + r[:, None] * ld + c[None, :], x, mask=(r[:, None] < rows) & (c[None, :] < ld))


@triton.jit(do_not_specialize=["n"])
def _gelu_backward_kernel(dy_ptr, z_ptr, dz_ptr, n: tl.int64, BLOCK: tl.constexpr):
    """dz = dy * gelu_tanh'(z) over contiguous tensors (one read of each, one write).  Every
    program but the last covers a whole block unmasked (16-byte vectors; a mask against the
    runtime n would split them), as in kernels/vector_add.py."""
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:
        dy = tl.load(dy_ptr + offs).to(tl.float32)
        z = tl.load(z_ptr + offs).to(tl.float32)
        tl.store(dz_ptr + offs, (dy * gelu_tanh_grad(z)).to(dz_ptr.dtype.element_ty))
    else:
        dy = tl.load(dy_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        z = tl.load(z_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        tl.store(dz_ptr + offs, (dy * gelu_tanh_grad(z)).to(dz_ptr.dtype.element_ty), mask=offs < n)


# =============================================================================== launch plan


@dataclass(frozen=True)
class TileConfig:
    """A tile: ``block_m x block_n`` outputs per program, ``block_k`` deep steps, ``group_m``
    tile rows per group of the grouped order, ``num_stages`` software-pipeline stages,
    ``num_warps`` warps per program.  Blocks are powers of two, block_m/block_n/block_k ≥ 16."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int
    num_stages: int
    num_warps: int

    def astuple(self) -> tuple[int, int, int, int, int, int]:
        return (self.block_m, self.block_n, self.block_k, self.group_m, self.num_stages, self.num_warps)


@dataclass(frozen=True)
class WsTile:
    """A tile the warp-specialized kernel picks from (:func:`ws_config`), with its fitted cost.

    ``tile_time``: one tile's whole K, per 128x256 of output, over the persistent kernel's
    128x256 tile's (ping-pong's is the model's unit, the comment on ``TAIL_COST_STEPS``).
    ``epilogue_steps``: the tile's exposed epilogue in 64-deep K steps, charged once a tile,
    so its time grows as ``tile_time * (1 + epilogue_steps / k_steps)`` at shallow K.  A
    cooperative tile's two consumers store their tile together with no matrix instruction
    issued beside it; ping-pong's consumer stores while the other's main loop keeps the tensor
    cores busy, so its epilogue is hidden (0 steps).  ``epilogues``: whether it runs the fused
    epilogues; a cooperative entry fitted on plain products takes plain products only."""

    config: TileConfig
    tile_time: float
    epilogue_steps: float = 0.0
    epilogues: bool = True


FIXED_CONFIG = TileConfig(128, 128, 32, 8, 3, 4)
# The probe's tile (see the module docstring) in groups of 16 tile rows: notes/probe_matmul_tiles.py
# at f73b7c2 (H200, interleaved rounds beside cuBLAS; notes/2026-12-02-probe-matmul-tiles-f73b7c2.log)
# timed GROUP_M 1/4/8/16, 3-4 stages and five other tiles: groups of 16 were the fastest of
# the 128x256x64 variants at 4096³ in both dtypes (0.989x and 0.995x cuBLAS's speed, where
# groups of 8 were 0.960x and 0.992x) and at 8192³ (1.044x and 1.056x against 1.023x
# both); 256x128, 128x128 and 128-deep steps were 3-30% slower everywhere.
PERSISTENT_CONFIG = TileConfig(128, 256, 64, 16, 3, 8)
PERSISTENT_CONFIG_FP32 = TileConfig(128, 128, 32, 8, 3, 8)  # 4-byte operands: the 16-bit tile's shared memory
# TF32 with the MN-major operand in registers (REG_OPERAND): notes/probe_tf32.py at f6eec13
# (notes/2026-12-03-probe-tf32-f6eec13.log) timed seven tiles.  256x128x32 was the fastest at
# 2048³, 4096³ and 8192³ (0.76-0.77x cuBLAS's speed, where 128x128x32 reached 0.55-0.61x);
# with too few of its tiles to fill the GPU (1024³: 32) 128x128x64 was (0.68x against 0.44x).
PERSISTENT_CONFIG_TF32 = TileConfig(256, 128, 32, 8, 3, 8)
PERSISTENT_CONFIG_TF32_FEW = TileConfig(128, 128, 64, 8, 3, 8)  # under half the SMs' worth of the above
# The warp-specialized kernel (kernels/_matmul_ws.py): ping-pong 128x128 tiles (4 warps a tile)
# in groups of 8 tile rows, 5 stages of 32 KB beside the consumers' two 32 KB output tiles.
# The stages from notes/probe_gluon_ws_gemm.py (2026-12-03, H200): 3 stages starved the ring
# (279 µs at 4096³ bf16), 4 ran 1.5-6% behind 5 at 4096³ and 8192³.
WS_CONFIG = TileConfig(128, 128, 64, 8, 5, 4)
# The warp-specialized tiles (WsTile) ws_config picks from, fitted on the H200.
WS_TILES: tuple[WsTile, ...] = (WsTile(WS_CONFIG, 1.0),)
# A cooperative 128x256 tile (two consumer warpgroups of 64 rows, 8 warps) in 32-deep steps, 6
# stages: the 144 KB in flight of 3 stages of 64-deep steps, whole output tiles beside them
# (214 KB).  Each output reads 25% fewer operand bytes than ping-pong's 128x128 tiles.
COOP_CONFIG = TileConfig(128, 256, 32, 8, 6, 8)
# Tables fitted on another GPU, by a part of the name torch gives it (ws_tiles); any other GPU
# runs WS_TILES.  H100 SXM: ping-pong ran at 0.84x cuBLAS's speed at bf16 4096³
# (notes/2026-12-07b-probe-ws-configs-e4782a5-h100.log; 0.88x in
# notes/2026-12-06c-probe-ws-configs-5b93630-h100.log) where the H200 runs it at 0.98x, and
# 0.95-1.18x the persistent kernel's time over the probes' shapes; the cooperative tile ran
# 0.91-1.02x the persistent kernel's where both run whole waves.  Each entry in the persistent
# tile's time, as the model's unit says: notes/score_ws_tables.py --grid on those two logs and
# notes/2026-12-07b-probe-ws-configs-h100-shapes-9712256-h100.log (13 shapes) puts the lowest
# regret (mean 0.07%, worst 0.97%) at ping-pong 1.035-1.085 with the cooperative tile at 1.0;
# 1.06 and 1.0 then held 0.90% and 3.4% on nine shapes held out
# (notes/2026-12-07c-probe-ws-configs-h100-heldout-43a8ecb-h100.log), where the table before
# (ping-pong 1.0, the cooperative tile 0.935) lost 3.9% and 24% (2432x6912x7000: whole
# cooperative waves against the persistent kernel's split tail).  At 1.0 the cooperative tile
# ties the persistent kernel's whole waves, and WS_MIN_WAVES decides, as for ping-pong on the
# H200.  With an epilogue ping-pong alone runs (nothing else was fitted), and at 1.06 the
# persistent kernel takes those products (bias + GELU at 8192³: 1656.8 µs against 1885.2).
# The study's H100 runs of this table (matmul-20261207T152830Z-e363c4c, ten forward shapes;
# matmul-20261207T152404Z-e363c4c, the epilogues): the default within 0.8% and 0.9% of the
# fastest forced kernel on average, 5.0% and 4.0% at worst; bias + GELU 8192³ 1624.0 µs
# against ping-pong's 1794.0.
WS_TILES_BY_GPU: tuple[tuple[str, tuple[WsTile, ...]], ...] = (
    ("H100 80GB HBM3", (WsTile(WS_CONFIG, 1.06), WsTile(COOP_CONFIG, 1.0, epilogues=False))),
)
WS_SHARED_LIMIT = 227 * 1024  # what one program may use on Hopper
SPLIT_K_BLOCK_N = 128
# The interpreter runs programs one after another in numpy: small tiles, so that the tests'
# small odd shapes still span several tiles and several K steps.
INTERPRETER_CONFIG = TileConfig(32, 32, 32, 2, 1, 4)

# Default dispatch thresholds, from the GEMM study's runs on the H200.  Split-K only where K is
# deep: a deep K read by as few programs as the output has tiles is what split-K is for, and it
# costs a workspace and an atomic a program where the autotuned kernel needs neither.  Every
# threshold here was measured with the two-launch form (a reduce kernel after the partials),
# which one launch replaced at 06c3dc0 (landed 2026-12-06): device time within 2% at 9 of 10 decode shapes,
# 7.6% behind at 128x4096x4096, and one launch less of host time an eager call
# (notes/2026-12-05a-probe-split-one-launch-342e58f.log and
# 2026-12-05e-probe-split-eager-gap-2237255.log).  At K = 4096 with split-K's tile before
# SPLIT_K_CONFIG (run matmul-20261201T072628Z-ebbf780) the autotuned kernel's device time was
# within 7% of split-K's at M = 1 and ahead at every other M; with the current tile, see below.
SPLIT_K_MAX_M = 128  # decode-like: at most this many rows ...
SPLIT_K_MIN_K = 8192  # ... a deep K ...
# ... or, for a call captured in a CUDA graph (whose replays pay no host time a call), 16-bit
# and K from SPLIT_K_GRAPH_MIN_K.  Before 2026-12-05, stored runs with the current tile (from
# 20261204T045154Z, notes/score_decode_rule.py) timed it at K = 4096 in three
# (matmul-20261204T051531Z-a14ec25, -190851Z-a7194ad, -191440Z-a7194ad): against the autotuned
# kernel, split-K ran 1.02-1.81x ahead on the device at 1, 16 and 64 x 4096x4096 (cold
# 1.02-1.35x; the autotuned kernel's own time moved from run to run with its choice of tile),
# while its eager call ran 1.42-2.21x behind at every one of those cells (its second launch
# and workspace: 43.8 against 19.8 µs at bf16 16x4096x4096 cold, run -191440Z).  The first form
# of this rule also capped the rows at 64, the most the studied shapes showed split-K ahead at
# (128x4096x4096 was 0.77-1.00x).  The eleventh held-out set, chosen before it ran (run
# matmul-20261205T021419Z-342e58f), found the cap wrong: at 80x4096x5120 split-K ran 1.60x
# ahead of the autotuned kernel (18.5 against 29.6 µs warm; the autotuner had taken a 16-row
# tile), as the earlier held-out 120x1536x6144 had (1.31-1.33x warm over 7 runs).  The twelfth,
# chosen before the rule without the cap ran (run matmul-20261205T023152Z-466decf), found it
# right at 96x4096x6144, 72x2048x4608, 24x4096x3584 and 32x11008x4096, and wrong on warm L2
# where the autotuner takes its 64x64x64 tile at 112-128 rows and K = 4096 (128x3072x4096 1.39x,
# 112x5120x4096 1.05x; level or right on cold).  Over every stored decode cell (76 from 13
# runs, all now in view; notes/2026-12-05c-score-decode-rule-aa8daa6.log): device regret geomean
# 1.012 without the cap (worst 1.39), 1.035 with the 64-row cap (worst 1.59), 1.011 with one at
# 96 rows (worst 1.32).  No cap: without one every miss is on warm L2 and at 112-128 rows;
# a 96-row cap loses 120x1536x6144 on both L2 states (1.32 warm, 1.24 cold) and would be
# fitted with every result in view.  Below K = 4096 the cells split: 12x2560x3072 split-K
# 1.17x warm, 1.08x cold (one run); 8x6144x3072 the autotuned kernel 1.07x warm, 1.08x cold
# (median of 6 runs; split-K was ahead in 2 of them).  So the K bound stays.
SPLIT_K_GRAPH_MIN_K = 4096
MAX_SPLITS = 16
# ... and an output of at most half a wave of split-K's tiles: with more, one split a tile is
# all a wave holds, and split-K is the autotuned kernel plus the partials' round trip.  At 11008x8192
# (86 tiles of 128 columns) the autotuned kernel was level or ahead at M = 4, 16 and 128
# (notes/2026-12-04-probe-split-decode-589dd89.log).
SPLIT_K_MAX_WAVE = 0.5
# Split-K's 16-bit tile (block_m from M's bucket, up to 128): notes/probe_split_decode.py timed
# ten tiles and three split counts on four weights (4096x14336, 2048x8192, 6144x16384,
# 11008x8192; M = 1 to 128).  128x64 boxes of the weight, 6 stages, 4 warps, split to fill one
# wave, was within 5% of the best candidate at 19 of the 24 products (the worst 12%, at
# 2048x8192 M = 128) and 1.1-1.7x ahead of the previous tile (128-deep, 4 stages, splits for
# two programs an SM: three rounds of programs on 132 SMs at M = 32, where one fits an SM).
SPLIT_K_CONFIG = TileConfig(16, SPLIT_K_BLOCK_N, 64, 1, 6, 4)  # block_m: M's bucket
SPLIT_K_CONFIG_FP32 = TileConfig(64, SPLIT_K_BLOCK_N, 64, 1, 4, 4)  # block_m: M's bucket up to 64
PERSISTENT_MIN_MNK = 1024**3  # TF32: persistent on Hopper from M·N·K of 1024³ up
# 16-bit operands: persistent from one wave of its 128x256 tiles up.  At 1024³ (32 tiles) the
# autotuned kernel's smaller tiles ran 2x faster (7.7 µs against 15.2, bf16, run
# matmul-20261201T072628Z-ebbf780; fp16 7.8 against 15.3, matmul-20261203T145510Z-e7a7746),
# at 2048³ (128 tiles on 132 SMs) 3% faster, and at 16384x1024x1024 (512 tiles) the
# persistent kernel was 10% ahead (57.0 against 62.9).
PERSISTENT_MIN_WAVES = 1
WS_MIN_WAVES = 4  # warp_specialized from this many 128x128 tiles' worth of output per SM
# The persistent kernel's partial last wave split along K (tail_split): below TAIL_MAX_WAVES
# waves of its tiles, into at most TAIL_MAX_SPLITS ranges, all but the last of at least
# TAIL_MIN_STEPS K steps.  notes/2026-12-04d-probe-stream-k-aed534c.log (warm, µs, split tail /
# whole tiles / the warp-specialized kernel / cuBLAS): 11 ranges 209.7 / 326.8 / 260.9 / 193.0
# at 6144x768x16384 and 113.6 / 175.3 / 140.3 / 98.1 at 3072x1536x8192, 4 ranges 124.4 / 171.9
# / 139.5 / 109.4 at 2560x2048x8192; 2 ranges 151.9 / 176.4 / 142.5 at 1536x4096x8192.
# From two to nine waves (notes/2026-12-04e-probe-tail-waves-a99058f.log, 24 shapes) the split
# tail beat whole tiles everywhere: 862.1 against 939.8 at 6528x5376x8192 (8.1 waves).
#
# Which kernel, from one wave of persistent tiles up (default_variant), is a cost in
# tile-times of the persistent kernel (one 128x256 tile's whole K):
# - the persistent kernel with its tail split s ways: W whole waves + 1/s + TAIL_COST_STEPS/K
#   steps (the partials' write, wait and sum: about 15 K steps of a tile on the median of
#   that probe's products, 2 to 25 among them, at K from 2048 to 8192);
# - with whole tiles: its waves, rounded up;
# - the warp-specialized kernel (ws_cost, with ws_config's tile): its tiles' waves rounded
#   up, each wave its tile's area over the persistent tile's times its WsTile time at this K
#   (ping-pong 128x128: half a tile-time; the two consumers take a tile each, handed out one
#   at a time, so its last wave is filled in half tiles; a cooperative 128x256 or 256x128
#   tile, both consumers on one: a whole tile-time at its fitted tile-time, and its exposed
#   epilogue's K steps over K's), and WS_K_TAIL_STEPS K steps more a tile where K is not a
#   multiple of its step.  The model was fitted with ping-pong 128x128 tiles.
# The model put each of that probe's 24 plain products within 3% of its measured time ratio
# between the two kernels, and the 11 of the earlier probes (the split-tail and whole-tile
# rows of notes/2026-12-04d-probe-stream-k-aed534c.log and -probe-tail-bound-0a22e1c.log
# cited above) within 5%.  Four at a model ratio of 1.002 ran the warp-specialized kernel
# 0.6-2% faster, so the split tail needs a relative margin of TAIL_MARGIN (which gives up
# 1-2% at two rows of 1.003-1.005 that ran the split tail faster).  Not in the model: the
# warp-specialized kernel's residual epilogue, 6% behind the split tail where the model has
# them level (2944x7680x4096).  WS_K_TAIL_STEPS: the warp-specialized kernel ran 5% behind the
# persistent one at 4096x4096x4100 (65 K steps) and 3001x4001x5001 (79), where the model has
# them level, and 13% behind the model at 3000x7168x3000 (47): held-out shapes of runs
# matmul-20261204T142003Z-b3b9b87 and matmul-20261204T171416Z-afd40a6, which fitting this
# moved to TUNED_ON in bench/studies/matmul.py.
TAIL_MAX_WAVES = 16
TAIL_MAX_SPLITS = 16
TAIL_MIN_STEPS = 8
TAIL_COST_STEPS = 15
TAIL_MARGIN = 0.01
WS_K_TAIL_STEPS = 4
_GELU_BLOCK = 1024


def _tuned_configs() -> list[triton.Config]:
    if INTERPRETER:
        c = INTERPRETER_CONFIG
        return [triton.Config({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "BLOCK_K": c.block_k, "GROUP_M": c.group_m},
                              num_stages=c.num_stages, num_warps=c.num_warps)]  # fmt: skip
    tiles = [
        (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 64, 3, 8),
        (128, 128, 32, 4, 4), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (64, 128, 32, 4, 4),
        (64, 64, 64, 4, 4), (32, 128, 64, 4, 4), (16, 128, 128, 4, 4), (16, 64, 128, 4, 4),
        (32, 64, 128, 4, 4),
    ]  # fmt: skip
    return [
        triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_stages=s, num_warps=w)
        for m, n, k, s, w in tiles
    ]


def _prune(configs: list[triton.Config], named_args: dict[str, Any], **kwargs: Any) -> list[triton.Config]:
    """Drop tiles much taller than the M bucket (they compute padding) and tiles whose pipeline
    does not fit the 227 KB of shared memory an H100/H200 program may use."""
    bucket = int(named_args["m_bucket"])
    size = named_args["a_ptr"].element_size()
    kept = [
        c
        for c in configs
        if c.kwargs["BLOCK_M"] <= max(16, bucket)
        and (c.kwargs["BLOCK_M"] + c.kwargs["BLOCK_N"]) * c.kwargs["BLOCK_K"] * size * c.num_stages <= 220 * 1024
    ]
    return kept or [min(configs, key=lambda c: c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"])]


_mm_tuned_kernel = triton.autotune(
    configs=_tuned_configs(),
    key=["m_bucket", "N", "K", "A_LAYOUT", "B_LAYOUT", "PRECISION"],  # the autotuner adds the dtypes
    prune_configs_by={"early_config_prune": _prune},
)(_mm_tuned_body)


def m_bucket(m: int) -> int:
    """The autotuner's bucket of M: the next power of two, at least 16."""
    return max(16, next_power_of_2(max(m, 1)))


@functools.cache
def _capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


def default_config(
    variant: str, dtype: torch.dtype, m: int = 0, n: int = 0, precision: str | None = None, sms: int = 132,
    reg: int = 1, k: int = 0, epilogue: str | None = None, tiles: tuple[WsTile, ...] | None = None,
) -> TileConfig | None:  # fmt: skip
    """The tile a variant runs when no ``config`` is given (``None`` for ``autotuned``, which
    picks its own) for an ``[m, k] @ [k, n]`` product (with ``epilogue``; the warp-specialized
    kernel's tile is :func:`ws_config`'s from ``tiles``, the GPU's :func:`ws_tiles`, or
    :data:`WS_TILES` where None) on a GPU of ``sms`` SMs.  ``reg``: the
    persistent kernel's ``REG_OPERAND`` (TF32 only: with no operand in registers both are
    staged in shared memory, and the 64-deep few-tiles tile does not fit; 32-deep does).
    Under the interpreter every variant runs ``INTERPRETER_CONFIG``."""
    if variant == "autotuned":
        return None
    if INTERPRETER:
        return INTERPRETER_CONFIG
    wide = dtype == torch.float32
    if variant in ("persistent", "warp_specialized"):  # fp32 runs the persistent kernel (ws_eligible)
        if wide and precision == "tf32":
            big = PERSISTENT_CONFIG_TF32
            if 2 * cdiv(m, big.block_m) * cdiv(n, big.block_n) >= sms:
                return big
            # both operands in shared memory: 3 stages of 128x64 + 64x128 fp32 boxes and the
            # 64 KB accumulator's staging need 262,168 B (compiled for sm_90), over the 232,448
            # a program may use; 32-deep steps need half the ring.
            return PERSISTENT_CONFIG_TF32_FEW if reg else PERSISTENT_CONFIG_FP32
        if wide:
            return PERSISTENT_CONFIG_FP32
        return PERSISTENT_CONFIG if variant == "persistent" else ws_config(m, n, k, sms, epilogue, tiles)
    if variant == "split_k":
        return split_config(m, dtype)
    return FIXED_CONFIG


def default_variant(
    m: int, n: int, k: int, device: torch.device, dtype: torch.dtype = torch.bfloat16, epilogue: str | None = None,
    precision: str | None = None, tma: bool = True, captured: bool = False,
) -> str:  # fmt: skip
    """The variant ``matmul(variant=None)`` runs for an ``[m, k] @ [k, n]`` product on ``device``
    (``precision``: float32's, ``"tf32"`` or ``"ieee"``; ``tma``: whether the warp-specialized
    kernel can run, :func:`ws_eligible`: 16-bit operands on Hopper; ``captured``: whether the
    call is being captured in a CUDA graph, whose replays pay no host time per call).

    - Decode-like (at most ``SPLIT_K_MAX_M`` rows): ``split_k`` where K is at least
      ``SPLIT_K_MIN_K`` (captured and 16-bit: at least ``SPLIT_K_GRAPH_MIN_K``; the constants'
      comment gives the runs) and split-K's tiles (:func:`split_config`) fill at most
      ``SPLIT_K_MAX_WAVE`` of a wave, else ``autotuned``.
    - IEEE float32: ``autotuned`` (FMA, not tensor cores: no TMA pipeline to feed; it ran 1.9x
      ahead of the persistent kernel at 1024³ and 7% at 4096³, run
      matmul-20261203T144707Z-e7a7746).
    - On Hopper (compute capability 9.x): TF32 products of at least ``PERSISTENT_MIN_MNK`` run
      ``persistent`` (its operand in registers, ``REG_OPERAND``).  16-bit products from
      ``PERSISTENT_MIN_WAVES`` wave of the persistent kernel's 128x256 tiles up run the kernel
      of the lower cost in tile-times (the comment on ``TAIL_COST_STEPS`` gives the model and
      its probe): ``persistent`` where its partial last wave splits along K
      (:func:`tail_split`; not at an N that is not a multiple of 8 with an epilogue, which
      runs whole tiles) and costs at least ``TAIL_MARGIN`` (relative) less than
      ``warp_specialized``; else, by
      whole waves, ``warp_specialized`` where it costs less, or the same with at least
      ``WS_MIN_WAVES`` waves of 128x128 tiles' worth of output, ``persistent`` otherwise.  Both read an
      operand TMA cannot read from an aligned copy (:func:`tma_copy`); where the
      warp-specialized kernel cannot run (``tma`` false), ``persistent``.  ``autotuned`` below
      one wave.
    - ``autotuned`` otherwise; ``fixed`` under the interpreter (the autotuner has nothing to
      time there).

    Why (run matmul-20261203T202619Z-b035874, the first to time shapes held out from the
    earlier rule, which ran the persistent kernel for every 16-bit product of a wave or more):
    at 8192x50257x768 (N odd: no TMA) the persistent kernel's pointer loads compiled to no
    matrix instruction (348 spilled registers) and took 32.4 ms where the autotuned kernel
    took 5.2 (so such operands are now copied for TMA, and the pointer loop is for GPUs
    before Hopper); the warp-specialized kernel ran 1.15x ahead of the persistent one at 3072³ and
    at 2000x5120x5120, 1.06x at 4096x11008x4096, level at 4096x4096x11008.  In the studied
    runs it was level at 4096³ (bf16; fp16 0.5-1.6% behind) and 1-1.5% ahead at 8192³.
    Split-K's half-wave bound: notes/2026-12-04-probe-split-decode-589dd89.log (at 11008x8192,
    86 tiles, the autotuned kernel was level or ahead); under it, run
    matmul-20261204T045154Z-74975d6 had the choice within 4% of cuBLAS on five held-out
    decode products and ahead of split-K on the sixth (16x9216x8192, autotuned: 38.3 against
    40.8 µs).  An odd N, whose output rows TMA cannot write, went to the persistent kernel
    until the warp-specialized kernel could store such rows through pointers; then
    (notes/2026-12-04c-probe-ws-odd-n-ea106a4.log, warm, x @ w.T) it ran 954.7 µs against
    1113.5 at 8192x50257x768, 765.1 against 814.7 at 16384x11001x1536, 107.3 against 138.5 at
    2048x4097x4096 and 116.0 against 139.3 at 1536x6001x4096, and 2331.5 against 2275.6 at
    4096x50257x4096 (2% behind), so an odd N follows the same waves as an aligned one.  The
    last-wave rule (notes/2026-12-04c-probe-waves-6910a9b.log, warm): at 192 persistent tiles
    (1.45 waves) the warp-specialized kernel's 384 ran 1330.5 µs against 1495.1 at the LM
    head's dA (8192x768x50257) and 142.0 against 183.0 at 1536x4096x8192; at 144 (1.09
    waves) 266.3 against 335.9 at 6144x768x16384 and 140.8 against 176.1 at 3072x1536x8192;
    at 128 tiles each (whole waves both) it was 1-3% behind (4096x1024x32768,
    2048x2048x16384).  The split tail and the costs: the comment on ``TAIL_COST_STEPS``."""
    if INTERPRETER or device.type != "cuda":
        return "fixed"
    sms = sm_count(device)
    if m <= SPLIT_K_MAX_M:  # decode-like: the weight's read is the cost, not the tiles' arithmetic
        tiles = cdiv(m, split_config(m, dtype).block_m) * cdiv(n, SPLIT_K_BLOCK_N)
        graph = captured and dtype != torch.float32
        deep = k >= (SPLIT_K_GRAPH_MIN_K if graph else SPLIT_K_MIN_K)
        return "split_k" if deep and tiles <= SPLIT_K_MAX_WAVE * sms else "autotuned"
    index = device.index if device.index is not None else current_device()
    if _capability(index)[0] != 9:
        return "autotuned"
    if dtype == torch.float32:
        return "persistent" if precision == "tf32" and m * n * k >= PERSISTENT_MIN_MNK else "autotuned"
    tiles = cdiv(m, PERSISTENT_CONFIG.block_m) * cdiv(n, PERSISTENT_CONFIG.block_n)
    if tiles < PERSISTENT_MIN_WAVES * sms:
        return "autotuned"
    if not tma:
        return "persistent"
    # Costs in tile-times of the persistent kernel (the comment on TAIL_COST_STEPS).  An odd
    # N with an epilogue runs whole tiles in fewer stages there (_prepare): no split, and the
    # warp-specialized kernel's K tail is not weighed against it.
    k_tiles = cdiv(k, PERSISTENT_CONFIG.block_k)
    full_stages = n % 8 == 0 or epilogue is None
    splits = tail_split(tiles, k_tiles, sms)[1] if full_stages else 1
    table = ws_tiles(device)
    cfg = ws_config(m, n, k, sms, epilogue, table)
    ws = ws_cost(cfg, m, n, k, sms, full_stages, table)
    ws_count, ws_area = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n), cfg.block_m * cfg.block_n
    if splits > 1 and ws > (tiles // sms + 1 / splits + TAIL_COST_STEPS / k_tiles) * (1 + TAIL_MARGIN):
        return "persistent"
    whole = cdiv(tiles, sms)
    # Whole tiles, level: the warp-specialized kernel from WS_MIN_WAVES of its waves (1-1.5%
    # ahead at 8192³, level at 4096³), the persistent kernel below (6% ahead at 5120x1280x5120).
    if ws < whole or (ws == whole and ws_count * ws_area >= WS_MIN_WAVES * sms * 128 * 128):
        return "warp_specialized"
    return "persistent"


def ws_cost(
    config: TileConfig, m: int, n: int, k: int, sms: int, full_stages: bool = True,
    tiles: tuple[WsTile, ...] | None = None,
) -> float:  # fmt: skip
    """The warp-specialized kernel's time with ``config`` for an ``[m, k] @ [k, n]`` product on
    ``sms`` SMs, in tile-times of the persistent kernel (the comment on ``TAIL_COST_STEPS``):
    its tiles' waves rounded up, each wave the tile's area over the persistent tile's times its
    :class:`WsTile` time at this K (``tile_time * (1 + epilogue_steps / k_steps)``; a tile-time
    of 1 and no epilogue term for a config not in ``tiles``, the GPU's table of :func:`ws_tiles`,
    :data:`WS_TILES` where None), and ``WS_K_TAIL_STEPS``
    K steps more a tile where K is not a multiple of its step (``full_stages``: the kernel
    runs its whole ring; an odd N with an epilogue does not, and no tail is charged)."""
    count = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    k_steps = max(1, cdiv(k, PERSISTENT_CONFIG.block_k))  # an empty K (k=0: no steps) costs one
    k_tail = WS_K_TAIL_STEPS / k_steps if k % config.block_k and full_stages else 0.0
    entry = next((t for t in (WS_TILES if tiles is None else tiles) if t.config == config), WsTile(config, 1.0))
    area = config.block_m * config.block_n / (PERSISTENT_CONFIG.block_m * PERSISTENT_CONFIG.block_n)
    return cdiv(count, sms) * area * entry.tile_time * (1 + entry.epilogue_steps / k_steps) * (1 + k_tail)


def ws_config(
    m: int, n: int, k: int, sms: int, epilogue: str | None = None, tiles: tuple[WsTile, ...] | None = None
) -> TileConfig:
    """The tile the warp-specialized kernel runs for an ``[m, k] @ [k, n]`` product (with
    ``epilogue``) on ``sms`` SMs when no ``config`` is given: of ``tiles`` (the GPU's table,
    :func:`ws_tiles`; :data:`WS_TILES` where None) those that take ``epilogue``, the one of
    the lowest :func:`ws_cost`, the first listed on a tie.  The choice is made once per call
    signature (the prepared launch), so a run of one weight shape over M compiles at most one
    kernel a listed tile."""
    table = WS_TILES if tiles is None else tiles
    full_stages = n % 8 == 0 or epilogue is None
    fits = [t.config for t in table if epilogue is None or t.epilogues]
    return min(fits, key=lambda c: ws_cost(c, m, n, k, sms, full_stages, table))


@functools.cache
def _gpu_name(index: int) -> str:
    return torch.cuda.get_device_name(index) if torch.cuda.is_available() else ""


def ws_tiles(device: torch.device) -> tuple[WsTile, ...]:
    """The warp-specialized tiles :func:`ws_config` picks from on ``device``: the table of
    :data:`WS_TILES_BY_GPU` whose key is part of the GPU's name (``torch.cuda.get_device_name``),
    else :data:`WS_TILES` (the H200's; also for CPU tensors).  Raises nothing: a GPU no table
    names runs the H200's."""
    if device.type != "cuda":
        return WS_TILES
    name = _gpu_name(device.index if device.index is not None else current_device())
    return next((table for key, table in WS_TILES_BY_GPU if key in name), WS_TILES)


def dispatch(
    a: torch.Tensor, b: torch.Tensor, epilogue: str | None = None, precision: str | None = None,
    captured: bool = False,
) -> str:  # fmt: skip
    """The variant ``matmul(a, b, variant=None, ...)`` runs: :func:`default_variant` at these
    operands' shapes, with whether the warp-specialized kernel can run them
    (:func:`ws_eligible`), called eagerly or (``captured``) while a CUDA graph is captured.
    The sweep records both, so its record is the call's own choice under each timer."""
    (m, k), n = a.shape, b.shape[1]
    return default_variant(m, n, k, a.device, a.dtype, epilogue, precision, ws_eligible(a, b), captured)


@functools.cache
def dispatch_rule() -> str:
    """A fingerprint of the dispatch, ten hex digits: the code of :func:`default_variant`,
    :func:`dispatch`, :func:`ws_eligible` and :func:`tail_split` (what the choice reads: tokens, without the
    docstrings and comments, so an edit of words or layout is the same rule) and the values of
    the module's constants they read.  The sweep records it beside each default call, so the
    page scores the dispatch's regret only on cases run under one rule, not on choices a later
    rule changed."""
    tokens: list[str] = []
    names: set[str] = set()
    for fn in _RULE_FUNCTIONS:
        source = textwrap.dedent(inspect.getsource(fn))
        doc = ast.get_docstring(ast.parse(source).body[0], clean=False)
        tokens += [
            t.string
            for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type not in _LAYOUT_TOKENS and not (t.type == tokenize.STRING and doc and doc in t.string)
        ]
        names |= set(fn.__code__.co_names)  # the globals (and attributes) it reads
    consts = [f"{n}={globals()[n]!r}" for n in sorted(names) if n in globals() and _constant(globals()[n])]
    return hashlib.sha256("\n".join([" ".join(tokens), *consts]).encode()).hexdigest()[:10]


_LAYOUT_TOKENS = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)


def _constant(value: Any) -> bool:
    if isinstance(value, tuple):  # a table of constants (WS_TILES; WS_TILES_BY_GPU's pairs)
        return all(_constant(v) for v in value)
    return isinstance(value, (bool, int, float, str, TileConfig, WsTile))


def _ws_ring_and_tiles(config: TileConfig, element_size: int) -> tuple[int, int]:
    consumer_rows = config.block_m // (config.num_warps // 4)
    ring = config.num_stages * (config.block_m + config.block_n) * config.block_k
    return ring * element_size, 2 * consumer_rows * config.block_n * element_size


def ws_epilogue_split(config: TileConfig, element_size: int = 2) -> bool:
    """Whether the warp-specialized kernel with ``config`` stores each consumer's output tile
    as two halves of its columns (``SPLIT`` in kernels/_matmul_ws.py): where the ring beside
    two whole output tiles would exceed :data:`WS_SHARED_LIMIT` and half-width tiles fit (a
    cooperative tile with 4 stages, ping-pong 128 x 128 with 6)."""
    ring, tiles = _ws_ring_and_tiles(config, element_size)
    return ring + tiles + 1024 > WS_SHARED_LIMIT


def ws_shared_bytes(config: TileConfig, element_size: int = 2) -> int:
    """Shared memory (bytes) of the warp-specialized kernel with ``config``: the ring
    (``num_stages`` stages of an ``a`` and a ``b`` box) and the two consumers' output tiles,
    half width where :func:`ws_epilogue_split`, plus 1 KB for barriers and alignment."""
    ring, tiles = _ws_ring_and_tiles(config, element_size)
    return ring + (tiles // 2 if ws_epilogue_split(config, element_size) else tiles) + 1024


def ws_eligible(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the warp-specialized kernel runs ``a @ b`` (else ``variant="warp_specialized"``
    runs the persistent kernel): float16/bfloat16 operands on a GPU of compute capability 9.x
    (wgmma and the ``setmaxnreg`` partitions are sm_90 instructions), ``K ≥ 1`` and every
    dimension below 2^31 (TMA coordinates are 32-bit).  An operand TMA cannot read as it lies
    is read from :func:`tma_copy`'s copy; an output whose rows are not 16-byte aligned (N not
    a multiple of 8 for 16-bit outputs) is written through pointers instead of TMA stores."""
    if INTERPRETER or not a.is_cuda or a.dtype not in (torch.float16, torch.bfloat16):
        return False
    (m, k), n = a.shape, b.shape[1]
    if k == 0 or max(m, n, k) >= 2**31:
        return False
    index = a.device.index if a.device.index is not None else current_device()
    return _capability(index)[0] == 9


def split_config(m: int, dtype: torch.dtype) -> TileConfig:
    """Split-K's tile for ``m`` rows of ``dtype``: ``SPLIT_K_CONFIG`` (16-bit) or
    ``SPLIT_K_CONFIG_FP32`` with ``block_m`` M's bucket (:func:`m_bucket`), up to its own."""
    if INTERPRETER:
        return INTERPRETER_CONFIG
    if dtype == torch.float32:
        return replace(SPLIT_K_CONFIG_FP32, block_m=min(SPLIT_K_CONFIG_FP32.block_m, m_bucket(m)))
    return replace(SPLIT_K_CONFIG, block_m=min(SPLIT_K_MAX_M, m_bucket(m)))


def split_count(m: int, n: int, k: int, config: TileConfig, sms: int) -> tuple[int, int]:
    """(splits, k_per_split) of split-K: as many splits as one wave of programs holds (tiles x
    splits ≤ ``sms``; a weight read is the cost, and a second round of programs would start
    when the first has read its share), at least 1, at most ``MAX_SPLITS`` and at most one per
    K block; ``k_per_split`` is a multiple of ``block_k`` and no split is empty.  One wave
    against two programs an SM: 33.9 against 35.4 µs at 1x4096x14336, 12.4 against 15.4 at
    1x2048x8192 (notes/2026-12-04-probe-split-decode-589dd89.log)."""
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    k_blocks = cdiv(k, config.block_k)
    splits = max(1, min(sms // tiles, k_blocks, MAX_SPLITS))
    k_per_split = cdiv(k_blocks, splits) * config.block_k
    return cdiv(k, k_per_split), k_per_split


def tail_split(tiles: int, k_tiles: int, sms: int) -> tuple[int, int]:
    """(tail tiles, splits) of the persistent kernel's ``tiles`` (each ``k_tiles`` steps of
    ``block_k``) on ``sms`` programs: the last, partial wave of ``tiles % sms`` tiles is split
    along K into ``splits`` ranges (``SPLIT_TAIL`` in :func:`_mm_persistent_kernel`'s
    docstring); (0, 1): every tile whole.

    With whole tiles the partial wave costs a whole tile-time: 144 tiles on 132 SMs take two
    for 1.09 tiles of work each.  Split into ``sms // (tiles % sms)`` ranges (at most
    ``TAIL_MAX_SPLITS`` and at most ``k_tiles // TAIL_MIN_STEPS``, so every range but the last
    has at least ``TAIL_MIN_STEPS`` steps; then as few as keep the same range length, so none
    is empty), it costs ``1 / splits`` of one, plus an fp32 partial per range written and
    read back, and summed by the ranges' programs together.  Used from one wave up, below
    ``TAIL_MAX_WAVES`` waves (beyond, the partial wave is a small part of the time), with at
    least two splits (the constants' comment gives the probe).  Raises nothing; ``tiles``, ``k_tiles`` and
    ``sms`` are positive."""
    tail = tiles % sms
    if tiles < sms or tail == 0 or tiles >= TAIL_MAX_WAVES * sms:
        return 0, 1
    splits = min(sms // tail, k_tiles // TAIL_MIN_STEPS, TAIL_MAX_SPLITS)
    splits = cdiv(k_tiles, cdiv(k_tiles, max(splits, 1)))  # no empty range
    return (tail, splits) if splits >= 2 else (0, 1)


# what dispatch_rule fingerprints
_RULE_FUNCTIONS = (default_variant, dispatch, ws_eligible, tail_split, split_config, ws_config, ws_cost, ws_tiles)


def _layout(t: torch.Tensor) -> tuple[int, int, int, int]:
    """(layout, s0, s1, vec): which dimension is contiguous (a dimension of size 1 counts as
    contiguous: its index is always 0), the strides, and VEC when the other stride is a
    multiple of 16 bytes (1 otherwise)."""
    (n0, n1), (s0, s1) = t.shape, t.stride()
    vec = 16 // t.element_size()
    if s1 == 1 or n1 == 1:
        return _INNER, s0, 1, vec if s0 % vec == 0 else 1
    if s0 == 1 or n0 == 1:
        return _OUTER, 1, s1, vec if s1 % vec == 0 else 1
    return _GENERAL, s0, s1, 1


def reg_operand(a_layout: int, b_layout: int) -> int:
    """The persistent kernel's REG_OPERAND for TF32 operands read through TMA: 1 where only
    ``b`` is MN-major (its rows contiguous: the product is computed transposed with ``bᵀ``
    in registers), 2 where only ``a`` is (``a`` in registers), 0 where neither or both are."""
    if a_layout == _INNER and b_layout == _INNER:
        return 1
    if a_layout == _OUTER and b_layout == _OUTER:
        return 2
    return 0


def _tma_ok(t: torch.Tensor, layout: int, vec: int) -> bool:
    # TMA: the contiguous dimension has stride 1, the other stride and the base are 16-byte multiples.
    return layout != _GENERAL and vec > 1 and t.data_ptr() % 16 == 0


def _tma_available(index: int) -> bool:
    # The TMA kernels' descriptors: Hopper and later, and the interpreter (which runs them in numpy).
    return INTERPRETER or _capability(index)[0] >= 9


# The row pitch of tma_copy's copies, in bytes, for rows of at least 8 times this (shorter
# rows: 16, TMA's minimum; the padding adds at most an eighth).
TMA_ROW_ALIGN = 128


def tma_copy(t: torch.Tensor) -> torch.Tensor:
    """``t`` (2-D, on any device) as a view of a new buffer that TMA can read: the same values,
    shape and layout (a transposed operand stays transposed; one with no unit stride becomes
    row-major), the contiguous dimension's rows padded to a multiple of ``TMA_ROW_ALIGN`` (128)
    bytes where they are at least 1 KB long, else of 16 (TMA's minimum), the base 16-byte
    aligned, the padding zero.  Costs one read and one write of ``t`` (one launch of
    ``_pad_copy_kernel``, on the current stream).

    Why: a row stride that is not a multiple of 16 bytes (``[K, N]`` with N = 50257, ``[M,
    K]`` with K not a multiple of 8) or a misaligned base is out of TMA's reach; the pointer-loaded kernels
    then read 2-byte elements and ran 5-6x below the copy-then-TMA rate (8192x50257x768 bf16:
    the autotuned kernel 5.2 ms, cuBLAS 5.1, run matmul-20261203T223642Z-ec17b0f).  The
    128-byte pitch: with rows padded to 16 bytes only, a TMA box row straddles 128-byte lines,
    and the warp-specialized kernel ran 4-19% behind the persistent one on every held-out
    odd-N product of run matmul-20261204T135548Z-98bc581; with 128 it ran 1023 µs against
    1224 at 8192x50257x768 and 2544 against 3411 at 4096x50257x4096
    (notes/2026-12-04c-probe-tma-pitch-f98bdef.log)."""
    outer = _layout(t)[0] == _OUTER
    src = t.T if outer else t  # now its rows (the dimension of unit stride, or none) are the ones to pad
    rows, cols = src.shape
    vec = 16 // t.element_size()
    row_bytes = TMA_ROW_ALIGN if cols * t.element_size() >= 8 * TMA_ROW_ALIGN else 16
    ld = cdiv(cols * t.element_size(), row_bytes) * row_bytes // t.element_size()
    buf = torch.empty((rows, ld), dtype=t.dtype, device=t.device)
    if rows and cols:
        index = t.get_device()
        grid = (cdiv(rows, _PAD_BLOCK[0]), cdiv(ld, _PAD_BLOCK[1]), 1)
        args = (src, buf, rows, cols, *src.stride(), ld)
        key = _launch_key(index, (src, buf))
        if index >= 0 and index != current_device():
            with torch.cuda.device(index):
                _PAD_COPY.launch(key, index, grid, args, (vec, *_PAD_BLOCK), 4, 1)
        else:
            _PAD_COPY.launch(key, index, grid, args, (vec, *_PAD_BLOCK), 4, 1)
    view = buf[:, :cols]
    return view.T if outer else view


def _tma_copies(a: torch.Tensor, b: torch.Tensor) -> tuple[bool, bool]:
    # Which operands a TMA kernel reads from tma_copy's copy (dimensions below 2^31: its coordinates are 32-bit).
    if max(*a.shape, b.shape[1]) >= 2**31:
        return False, False
    (a_lay, *_, a_vec), (b_lay, *_, b_vec) = _layout(a), _layout(b)
    return not _tma_ok(a, a_lay, a_vec), not _tma_ok(b, b_lay, b_vec)


_FIXED = FastKernel(_mm_fixed_kernel)
_PERSISTENT = FastKernel(_mm_persistent_kernel)
_WS = FastKernel(ws_matmul_kernel)
_TUNED = FastKernel(_mm_tuned_body)  # the autotuner's choice, launched directly (see _run)
# (device, M bucket, constexprs, operand dtypes and alignment) -> the config the autotuner chose
_TUNED_CHOICE: dict[tuple[Any, ...], triton.Config] = {}
_SPLIT = FastKernel(_mm_split_kernel)
_GELU_BACKWARD = FastKernel(_gelu_backward_kernel)
_PAD_COPY = FastKernel(_pad_copy_kernel)
# Rows x columns a program of the pad copy (4 warps): 4 x 1024 moved 2.9-3.2 TB/s on the
# odd-row operands and the two held out from the choice, 16 x 256 2.3-2.6 and torch's strided
# copy 1.6-1.7; a contiguous copy of the same bytes 3.8-4.2 (notes/2026-12-04-probe-pad-copy-5ece7a3.log).
_PAD_BLOCK = (4, 1024)

_recording: list[Any] | None = None  # compiled_kernels() collects the compiled kernels here


def _launch(kernel: FastKernel, tensors: tuple[torch.Tensor, ...], index: int, grid, args, consts, warps, stages,
            coop: bool = False):  # fmt: skip
    if _recording is not None:  # Triton's own launch, which returns the compiled kernel
        compiled = kernel.launch_uncached(grid, args, consts, warps, stages, coop=coop)
        if not INTERPRETER:
            _recording.append(compiled)
        return
    kernel.launch(_launch_key(index, tensors), index, grid, args, consts, warps, stages, coop=coop)


def _launch_key(index: int, tensors: tuple[torch.Tensor, ...]) -> tuple[Any, ...]:
    # What a compiled launch depends on besides its constexprs: the device, each pointer's
    # dtype and 16-byte alignment (FastKernel's contract).
    return (index, *[t.dtype for t in tensors], *[t.data_ptr() % 16 == 0 for t in tensors])


def _tensor_allocator(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    # Global scratch for the device-side TMA descriptors (128 bytes per program), on the
    # current device (the launch runs under the tensors' device guard).
    return torch.empty(size, dtype=torch.int8, device="cuda")


def _ensure_allocator() -> None:
    # triton.set_allocator sets a ContextVar: a thread (autograd's device threads among them)
    # starts without one, so this runs before every TMA kernel's launch and sets it where unset.
    if isinstance(_allocation._allocator.get(), _allocation.NullAllocator):
        triton.set_allocator(_tensor_allocator)


def _precision_name(dtype: torch.dtype, precision: str | None) -> str:
    return precision if dtype == torch.float32 and precision else "tf32"  # 16-bit operands ignore it


# A prepared launch per call signature (device, variant as asked — None for the default, whose
# choice is made on the miss —, epilogue, precision, config, shapes, strides, dtypes and
# alignment of every tensor): the choice of variant, layouts, vector widths, tile and grid
# below cost ~10-20 µs of Python per call; the hit costs one key and a dict lookup.  M is part
# of the key (grid), so a sweep over M fills one entry per M.
_PREPARED: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _run(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, pre: torch.Tensor | None, bias: torch.Tensor | None,
    residual: torch.Tensor | None, variant: str | None, epilogue: str | None, precision: str | None,
    config: TileConfig | None, index: int,
) -> None:  # fmt: skip
    """Launch ``variant`` (``None``: :func:`default_variant`'s, chosen once per key) for ``out =
    epilogue(a @ b)`` (M, N ≥ 1) on GPU ``index`` (-1: the CPU); ``pre`` receives z for bias_gelu."""
    cacheable = _recording is None
    # A decode shape's choice depends on whether the call is being captured in a CUDA graph
    # (default_variant): asked (one call into torch's C++) only where the answer can matter.
    captured = variant is None and a.shape[0] <= SPLIT_K_MAX_M and capturing()
    if cacheable:
        key = (index, variant, epilogue, precision, config, a.shape, a.stride(), b.shape, b.stride(), a.dtype,
               b.dtype, a.data_ptr() % 16 == 0, b.data_ptr() % 16 == 0, out.data_ptr() % 16 == 0, captured)  # fmt: skip
        if pre is not None or bias is not None or residual is not None:
            key += (_signature(pre), _signature(bias), _signature(residual))
        hit = _PREPARED.get(key)
        if hit is not None:
            kernel, launch_key, grid, tail, consts, warps, stages, tma, (copy_a, copy_b), plan = hit
            ep = (out, pre if pre is not None else out, bias if bias is not None else out,
                  residual if residual is not None else out)  # fmt: skip
            if kernel is _SPLIT:
                _split_launch(a, b, ep, index, hit)
                return
            if tma:
                _ensure_allocator()
            a = tma_copy(a) if copy_a else a
            b = tma_copy(b) if copy_b else b
            scratch = _tail_buffers(out, index, plan) if kernel is _PERSISTENT else ()
            kernel.launch(launch_key, index, grid, (a, b, *ep, *scratch, *tail), consts, warps, stages,
                          coop=plan is not None)  # fmt: skip
            return
    if variant is None:  # in the prepared launch's key as None: a hit skips this choice
        variant = dispatch(a, b, epilogue, precision, captured)
        if cacheable and not captured and a.shape[0] <= SPLIT_K_MAX_M:
            in_graph = dispatch(a, b, epilogue, precision, True)
            if in_graph != variant:
                # No kernel module may load while a graph is captured (cuModuleLoadData is
                # refused), so the first eager calls, the warm-up before a capture, also run
                # what a captured call would launch; the eager choice then overwrites ``out``.
                _run(a, b, out, pre, bias, residual, in_graph, epilogue, precision, config, index)
    copies = (False, False)
    if variant in ("persistent", "warp_specialized") and a.shape[1] > 0 and _tma_available(index):
        copies = _tma_copies(a, b)
        a = tma_copy(a) if copies[0] else a
        b = tma_copy(b) if copies[1] else b
    prepared = _prepare(a, b, out, pre, bias, residual, variant, epilogue, precision, config, index)
    if prepared is None:  # the autotuner's first call of a key: launched already
        return
    if prepared[0] is _SPLIT:  # one launch, with a workspace and counters
        _split_launch(a, b, prepared[3], index, prepared)
        if cacheable:  # without the tensors: an entry must not keep this call's output alive
            _remember(key, (*prepared[:3], None, *prepared[4:], copies, None))
        return
    kernel, launch_key, grid, args, consts, warps, stages, tma, plan = prepared
    if tma and not INTERPRETER:
        _ensure_allocator()
    tensors = 8 if kernel is _PERSISTENT else 6  # the persistent kernel's split-tail buffers follow the six
    if _recording is not None:
        _launch(kernel, args[:tensors], index, grid, args, consts, warps, stages, coop=plan is not None)
        return
    kernel.launch(launch_key, index, grid, args, consts, warps, stages, coop=plan is not None)
    if cacheable:
        _remember(key, (kernel, launch_key, grid, args[tensors:], consts, warps, stages, tma and not INTERPRETER,
                        copies, plan))  # fmt: skip


# The tile counters of split-K and of the persistent kernel's split tail, zero between
# launches (the program that finishes a tile resets its counter): one buffer per device and
# stream, so that two streams never share one.  Both kernels may use the same buffer: calls on
# one stream run one after another.
_COUNTERS: dict[tuple[int, int], torch.Tensor] = {}


def _stream_counters(device: torch.device, index: int, n: int) -> torch.Tensor:
    """The eager int32 counters (zero) of GPU ``index``'s current stream (-1: the CPU), at least ``n``."""
    key = (index, current_stream(index) if index >= 0 else 0)
    counters = _COUNTERS.get(key)
    if counters is None or counters.numel() < n:
        counters = _COUNTERS[key] = torch.zeros(max(n, 1024), device=device, dtype=torch.int32)
    return counters


def _tail_buffers(out: torch.Tensor, index: int, plan: tuple[int, int] | None) -> tuple[torch.Tensor, ...]:
    """The persistent kernel's two tensors for its split tail (:func:`tail_split`), ``plan`` =
    (partial-slot elements, tail tiles): a fresh fp32 slot buffer and the counters; ``(out,
    out)`` placeholders (never read) without a split tail.  Under a CUDA-graph capture the counters are a new zeroed
    tensor (its memset is a node of the graph, run at every replay), not the eager buffer."""
    if plan is None:
        return out, out
    parts = torch.empty(plan[0], device=out.device, dtype=torch.float32)
    if index >= 0 and capturing():
        return parts, torch.zeros(plan[1], device=out.device, dtype=torch.int32)
    return parts, _stream_counters(out.device, index, plan[1])


def _signature(t: torch.Tensor | None) -> tuple[Any, ...] | None:
    # What a prepared launch depends on in an epilogue tensor: everything but its address.
    return None if t is None else (t.shape, t.stride(), t.dtype, t.data_ptr() % 16 == 0)


def _remember(key: tuple[Any, ...], entry: tuple[Any, ...]) -> None:
    if len(_PREPARED) >= 4096:  # a sweep over many M: start again rather than grow without bound
        _PREPARED.clear()
    _PREPARED[key] = entry


def _prepare(
    a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, pre: torch.Tensor | None, bias: torch.Tensor | None,
    residual: torch.Tensor | None, variant: str, epilogue: str | None, precision: str | None,
    config: TileConfig | None, index: int,
) -> tuple[Any, ...] | None:  # fmt: skip
    """(kernel, launch key, grid, args, consts, warps, stages, uses TMA, split-tail plan) for one
    launch of ``variant`` on these operands (a TMA kernel's already copied where :func:`tma_copy`
    applies; the plan, the persistent kernel's (:func:`_tail_buffers`), else None); None
    where the launch happened here (the autotuner's choosing call)."""
    (m, k), n = a.shape, b.shape[1]
    a_lay, s_am, s_ak, a_vec = _layout(a)
    b_lay, s_bk, s_bn, b_vec = _layout(b)
    vec = 16 // out.element_size()
    c_vec = vec if n % vec == 0 else 1  # N a multiple of 16 bytes (fixed per weight shape)
    # M a multiple of 16 bytes, only where M is a's contiguous dimension (a.T): elsewhere M's
    # value must not enter the compiled kernel's key (a new M would compile anew).
    m_vec = vec if a_lay == _OUTER and m % vec == 0 else 1
    k_vec = vec if k % vec == 0 else 1
    code = _EPILOGUE_CODE[epilogue]
    store_pre = pre is not None
    pre_t = pre if pre is not None else out
    bias_t = bias if bias is not None else out
    res_t = residual if residual is not None else out
    s_bias = bias.stride(0) if bias is not None else 0
    r_lay, s_rm, s_rn, r_vec = _layout(residual) if residual is not None else (_INNER, 0, 1, 1)
    prec = _precision_name(a.dtype, precision)
    tensors = (a, b, out, pre_t, bias_t, res_t)
    if k == 0:  # acc = 0 everywhere: the fixed kernel's K loop runs no step, its epilogue still applies
        variant = "fixed"
        config = config or default_config("fixed", a.dtype, m)
    if variant == "autotuned":
        args = (*tensors, m, m_bucket(m), s_am, s_ak, s_bk, s_bn, out.stride(0), s_bias, s_rm, s_rn)
        head = (n, k, a_lay, b_lay, r_lay, a_vec, b_vec, m_vec, c_vec, r_vec, code, store_pre, prec)
        # The autotuner's own launch binds and hashes every argument (tens of µs of host time per
        # call): it runs once per key, to choose; later calls launch its choice directly.
        launch_key = _launch_key(index, tensors)
        choice_key = (launch_key, m_bucket(m), head)
        chosen = _TUNED_CHOICE.get(choice_key)
        if chosen is None or _recording is not None:
            grid = lambda meta: (cdiv(m, meta["BLOCK_M"]) * cdiv(n, meta["BLOCK_N"]),)
            names = ("N", "K", "A_LAYOUT", "B_LAYOUT", "R_LAYOUT", "A_VEC", "B_VEC", "M_VEC", "C_VEC", "R_VEC",
                     "EPILOGUE", "STORE_PRE", "PRECISION")  # fmt: skip
            compiled = _mm_tuned_kernel[grid](*args, **dict(zip(names, head, strict=True)))
            if _recording is not None and not INTERPRETER:
                _recording.append(compiled)
            _TUNED_CHOICE[choice_key] = _mm_tuned_kernel.best_config
            return None
        kw = chosen.kwargs
        grid = (cdiv(m, kw["BLOCK_M"]) * cdiv(n, kw["BLOCK_N"]), 1, 1)
        consts = (*head, kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"], kw["GROUP_M"])
        return _TUNED, launch_key, grid, args, consts, chosen.num_warps, chosen.num_stages, False, None
    if variant == "warp_specialized":
        if ws_eligible(a, b):
            cfg = config or ws_config(m, n, k, sm_count(a.device), epilogue, ws_tiles(a.device))
            a_t, b_t = a_lay == _OUTER, b_lay == _OUTER  # read through descriptors of the memory as it lies
            split = ws_epilogue_split(cfg, a.element_size())
            consts = (a_t, b_t, code, store_pre, cfg.block_m, cfg.block_n, cfg.block_k, cfg.group_m,
                      cfg.num_stages, cfg.num_warps == 8, c_vec > 1, split)  # fmt: skip
            tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
            args = (*tensors, m, n, k, s_ak if a_t else s_am, s_bn if b_t else s_bk, s_bias, s_rm, s_rn)
            return (_WS, _launch_key(index, tensors), (min(sm_count(a.device), tiles), 1, 1), args, consts, 4, 1, True,
                    None)  # fmt: skip
        variant = "persistent"  # an odd N, fp32, or a GPU before Hopper (a config applies as given)
    use_tma = (
        variant == "persistent" and _tma_available(index) and _tma_ok(a, a_lay, a_vec) and _tma_ok(b, b_lay, b_vec)
    )
    reg = reg_operand(a_lay, b_lay) if use_tma and a.dtype == torch.float32 and prec == "tf32" else 0
    cfg = config or default_config(variant, a.dtype, m, n, prec if a.dtype == torch.float32 else None,
                                   sm_count(a.device), reg)  # fmt: skip
    assert cfg is not None
    strides = (s_am, s_ak, s_bk, s_bn, out.stride(0), s_bias, s_rm, s_rn)
    even_k = k % cfg.block_k == 0
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    tile = (cfg.block_m, cfg.block_n, cfg.block_k, cfg.group_m)
    if variant == "fixed":
        consts = (a_lay, b_lay, r_lay, a_vec, b_vec, m_vec, c_vec, r_vec, k_vec, even_k, code, store_pre, prec, *tile)
        return (_FIXED, _launch_key(index, tensors), (tiles, 1, 1), (*tensors, m, n, k, *strides), consts,
                cfg.num_warps, cfg.num_stages, False, None)  # fmt: skip
    if variant == "persistent":
        sms = sm_count(a.device)
        # 32-bit output offsets where the output's rows are not 16-byte vectors (_finish says why)
        # and every offset a tile computes, its masked rows included, fits
        c_i32 = c_vec == 1 and (m + cfg.block_m) * n < 2**31
        # Not at an output whose rows are not 16-byte vectors with an epilogue: compiled for
        # sm_90 with 3 stages the split-tail kernel asked for 278,552 bytes of shared memory
        # there too, over the 232,448 a program may use; with the 2 stages below it was not
        # timed or tested, so such tiles run whole.
        tail, splits = tail_split(tiles, cdiv(k, cfg.block_k), sms) if c_vec > 1 or not code else (0, 1)
        plan = (tail * splits * cfg.block_m * cfg.block_n, tail) if tail else None
        scratch = _tail_buffers(out, index, plan)
        consts = (a_lay, b_lay, r_lay, a_vec, b_vec, m_vec, c_vec, r_vec, k_vec, even_k, code, store_pre, prec,
                  *tile, sms, use_tma, reg, c_i32, tail > 0)  # fmt: skip
        # An output whose rows are not 16-byte vectors, with an epilogue: the epilogue's layout
        # conversions take 96 KB of shared memory beside the 3-stage ring (278,552 bytes for
        # sm_90, over the 232,448 a program may use: every such launch failed); 2 stages fit.
        stages = cfg.num_stages if c_vec > 1 or not code or config is not None else min(cfg.num_stages, 2)
        return (_PERSISTENT, _launch_key(index, (*tensors, *scratch)), (min(sms, tiles), 1, 1),
                (*tensors, *scratch, m, n, k, *strides, tail, splits), consts, cfg.num_warps, stages,
                use_tma, plan)  # fmt: skip
    # split_k: one launch (_split_launch) with a workspace and the tiles' counters.  In this
    # tuple's slots: "args" the epilogue's four tensors; "tail" the scalar arguments, the
    # workspace's shape and the number of tiles (one counter each).
    splits, k_per_split = split_count(m, n, k, cfg, sm_count(a.device))
    ep = (out, pre_t, bias_t, res_t)
    key = _launch_key(index, (a, b)) + tuple(t.dtype for t in ep) + tuple(t.data_ptr() % 16 == 0 for t in ep)
    tails = ((m, n, k, k_per_split, splits, *strides), (splits, m, n), tiles)
    consts = (a_lay, b_lay, a_vec, b_vec, m_vec, c_vec, k_vec, even_k, prec, r_lay, r_vec, code, store_pre, *tile)
    return _SPLIT, key, (tiles, splits, 1), ep, consts, cfg.num_warps, cfg.num_stages, tails


def _split_launch(
    a: torch.Tensor, b: torch.Tensor, epilogue_tensors: tuple[torch.Tensor, ...], index: int, prepared: tuple[Any, ...]
) -> None:  # fmt: skip
    """Split-K's one launch (``prepared`` from :func:`_prepare`): the partial products into an
    fp32 workspace ``[splits, M, N]``, each tile summed by its last program to finish."""
    _, key, grid, _, consts, warps, stages, (scalars, shape, tiles), *_ = prepared
    ws, counters = _split_buffers(a.device, index, shape, tiles)
    args = (a, b, ws, counters, *epilogue_tensors, *scalars)
    if _recording is not None:
        _launch(_SPLIT, (a, b, ws, counters, *epilogue_tensors), index, grid, args, consts, warps, stages)
        return
    _SPLIT.launch(key, index, grid, args, consts, warps, stages)


# Split-K's workspace, kept per device and stream up to this many fp32 elements (32 MiB): a
# fresh one from the allocator cost an eager call 5-9 µs of host time on the H200's host
# (notes/2026-12-05e-probe-split-eager-gap-2237255.log).  Calls on one stream run in order,
# so one call's partials are summed before the next call's are written; a larger workspace
# (split-K forced on a large output) is taken fresh for the call.
SPLIT_K_KEPT_WORKSPACE = 1 << 23
SPLIT_K_KEPT_STREAMS = 8  # at most this many kept (a program that makes a stream a call frees them)
_WORKSPACES: dict[tuple[int, int], torch.Tensor] = {}


def _split_buffers(
    device: torch.device, index: int, shape: tuple[int, int, int], tiles: int
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """Split-K's fp32 workspace of ``shape`` and int32 counters (zero) for ``tiles`` tiles.  Under
    a CUDA-graph capture both are new tensors from the graph's pool (the counters' memset a
    node of the graph), never the eager ones, which a replay must not share."""
    size = shape[0] * shape[1] * shape[2]
    if index >= 0 and capturing():
        return (torch.empty(shape, device=device, dtype=torch.float32),
                torch.zeros(tiles, device=device, dtype=torch.int32))  # fmt: skip
    counters = _stream_counters(device, index, tiles)
    if size > SPLIT_K_KEPT_WORKSPACE:
        return torch.empty(shape, device=device, dtype=torch.float32), counters
    key = (index, current_stream(index) if index >= 0 else 0)
    ws = _WORKSPACES.get(key)
    if ws is None or ws.numel() < size:
        if ws is None and len(_WORKSPACES) >= SPLIT_K_KEPT_STREAMS:  # streams made and dropped: bounded
            _WORKSPACES.clear()
        ws = _WORKSPACES[key] = torch.empty(max(size, 1 << 16), device=device, dtype=torch.float32)
    return ws[:size].view(shape), counters


def _forward(
    a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, residual: torch.Tensor | None,
    variant: str | None, epilogue: str | None, precision: str | None, config: TileConfig | None, save_pre: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """(out, pre): out = epilogue(a @ b), a new contiguous ``[M, N]`` tensor of a's dtype; pre is
    the pre-activation a @ b + bias when ``save_pre`` and the epilogue is bias_gelu, else None."""
    m, n = a.shape[0], b.shape[1]
    out = a.new_empty((m, n))
    pre = torch.empty_like(out) if save_pre and epilogue == "bias_gelu" else None
    if m == 0 or n == 0:
        return out, pre
    index = a.get_device()  # -1 on the CPU
    if index >= 0 and index != current_device():  # Triton launches on the current GPU
        with torch.cuda.device(index):
            _run(a, b, out, pre, bias, residual, variant, epilogue, precision, config, index)
    else:
        _run(a, b, out, pre, bias, residual, variant, epilogue, precision, config, index)
    return out, pre


def gelu_backward(dy: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """``dy * gelu_tanh'(z)`` (the gradient reaching ``z`` through the bias_gelu epilogue), in
    ``z``'s dtype, computed in fp32."""
    dy = dy.to(z.dtype).contiguous()
    z = z.contiguous()
    dz = torch.empty_like(z)
    n = z.numel()
    if n == 0:
        return dz
    index = z.device.index if z.is_cuda else -1
    grid = (cdiv(n, _GELU_BLOCK), 1, 1)
    if z.is_cuda and index != current_device():
        with torch.cuda.device(z.device):
            _launch(_GELU_BACKWARD, (dy, z, dz), index, grid, (dy, z, dz, n), (_GELU_BLOCK,), 4, 1)
    else:
        _launch(_GELU_BACKWARD, (dy, z, dz), index, grid, (dy, z, dz, n), (_GELU_BLOCK,), 4, 1)
    return dz


def bias_grad(dz: torch.Tensor) -> torch.Tensor:
    """The bias gradient: ``dz`` summed over its rows, in fp32 and a fixed order (deterministic)."""
    if dz.shape[1] > 1 and dz.stride(1) != 1:
        dz = dz.contiguous()  # e.g. the expanded gradient of out.sum()
    return column_sum(dz)


# =============================================================================== autograd


def _grads(
    dout: torch.Tensor, a: torch.Tensor | None, b: torch.Tensor | None, pre: torch.Tensor | None,
    needs: tuple[bool, bool, bool, bool], variant: str | None, epilogue: str | None, precision: str | None,
    config: TileConfig | None, ops: bool,
) -> tuple[torch.Tensor | None, ...]:  # fmt: skip
    """(da, db, dbias, dresidual), each only where ``needs`` says.  ``ops``: call the registered
    ops (under a tracer) instead of the eager functions."""
    need_a, need_b, need_bias, need_res = needs
    dz = dout
    if epilogue == "bias_gelu" and (need_a or need_b or need_bias):
        assert pre is not None
        dz = _gelu_backward_op(dout, pre) if ops else gelu_backward(dout, pre)
    cfg = None if config is None else list(config.astuple())
    if (
        not ops
        and need_a
        and need_b
        and a is not None
        and b is not None
        and _one_copy_of_dz(dz, a, b, variant, precision)
    ):
        dz = tma_copy(dz)  # both products read dZ: one copy TMA can read, not one in each
    da = db = dbias = None
    if need_a:  # dA = dZ · Bᵀ: b.T is b's memory with swapped strides
        assert b is not None
        da = (_matmul_op(dz, b.T, None, None, variant, None, precision, cfg, False)[0] if ops
              else _forward(dz, b.T, None, None, variant, None, precision, config, False)[0])  # fmt: skip
    if need_b:  # dB = Aᵀ · dZ
        assert a is not None
        db = (_matmul_op(a.T, dz, None, None, variant, None, precision, cfg, False)[0] if ops
              else _forward(a.T, dz, None, None, variant, None, precision, config, False)[0])  # fmt: skip
    if need_bias:
        dbias = _bias_grad_op(dz) if ops else bias_grad(dz)
    dres = dout if need_res else None
    return da, db, dbias, dres


def _one_copy_of_dz(
    dz: torch.Tensor, a: torch.Tensor, b: torch.Tensor, variant: str | None, precision: str | None
) -> bool:  # fmt: skip
    # Whether both backward products run a TMA kernel on a dZ that TMA cannot read as it lies
    # (an odd N: an LM head's dZ is [tokens, 50257]), each of which would copy it (823 MB at
    # 8192x50257 bf16, about 0.45 ms a copy).  Asked once per signature: both choices read
    # only dZ's layout and alignment, the shapes (K is a's columns), the dtype and the device,
    # and answering cost 10-15 µs of host time per step at 127x255x65 on the GPU host, about
    # a quarter of the training step's gap to torch's there (notes/probe_step_host.py).
    key = (dz.get_device(), dz.dtype, dz.shape, dz.stride(), dz.data_ptr() % 16 == 0, a.shape[1], variant,
           precision)  # fmt: skip
    hit = _ONE_COPY.get(key)
    if hit is None:
        hit = _ONE_COPY[key] = _one_copy_choice(dz, a, b, variant, precision)
        if len(_ONE_COPY) >= 4096:  # a sweep over many M: start again rather than grow without bound
            _ONE_COPY.clear()
    return hit


def _one_copy_choice(
    dz: torch.Tensor, a: torch.Tensor, b: torch.Tensor, variant: str | None, precision: str | None
) -> bool:  # fmt: skip
    if dz.shape[0] == 0 or dz.shape[1] == 0 or not any(_tma_copies(dz, dz)):
        return False
    if not _tma_available(dz.get_device()):
        return False
    tma = ("persistent", "warp_specialized")
    return (variant or dispatch(dz, b.T, None, precision)) in tma and (
        variant or dispatch(a.T, dz, None, precision)
    ) in tma


_ONE_COPY: dict[tuple[Any, ...], bool] = {}


class _MatmulFunction(torch.autograd.Function):
    """The eager autograd path: launches directly, without the op dispatcher's cost.  ``opts``:
    (variant, epilogue, precision, config), one argument rather than four for autograd to
    walk on every call."""

    @staticmethod
    def forward(ctx, a, b, bias, residual, opts):  # type: ignore[no-untyped-def,override]
        variant, epilogue, precision, config = opts
        out, pre = _forward(a, b, bias, residual, variant, epilogue, precision, config, epilogue == "bias_gelu")
        need_a, need_b = ctx.needs_input_grad[:2]
        ctx.save_for_backward(a if need_b else None, b if need_a else None, pre)  # only what a gradient reads
        ctx.opts = opts
        return out

    @staticmethod
    def backward(ctx, dout):  # type: ignore[no-untyped-def,override]
        a, b, pre = ctx.saved_tensors
        return (*_grads(dout, a, b, pre, ctx.needs_input_grad[:4], *ctx.opts, ops=False), None)


# Function.apply without its Python wrapper (about 1.5 µs a call here, more on the GPU host:
# a signature check and a pass over every argument for functorch's dead wrappers).  Only for
# matmul's eager path, which runs outside functorch transforms (eager_path) and unwraps its
# tensors itself (a tensor leaked from a finished torch.func transform is still a wrapper).
_apply_matmul = super(torch.autograd.Function, _MatmulFunction).apply
_unwrap_if_dead = torch._C._functorch.unwrap_if_dead


# =============================================================================== registered ops
# What torch.compile, torch.export, FakeTensor and functorch see.  The op returns (out, pre):
# pre is the pre-activation kept for bias_gelu's backward, an empty [0] tensor otherwise.


def _config(cfg: list[int] | None) -> TileConfig | None:
    return None if cfg is None else TileConfig(*cfg)


@torch.library.custom_op("labnotes::matmul", mutates_args=())
def _matmul_op(
    a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None, residual: torch.Tensor | None,
    variant: str | None, epilogue: str | None, precision: str | None, config: list[int] | None, save_pre: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    out, pre = _forward(a, b, bias, residual, variant, epilogue, precision, _config(config), save_pre)
    return out, pre if pre is not None else out.new_empty(0)


@_matmul_op.register_fake
def _(a, b, bias, residual, variant, epilogue, precision, config, save_pre):  # type: ignore[no-untyped-def]
    out = a.new_empty((a.shape[0], b.shape[1]))
    return out, (out.new_empty(out.shape) if save_pre and epilogue == "bias_gelu" else out.new_empty(0))


@torch.library.custom_op("labnotes::matmul_gelu_backward", mutates_args=())
def _gelu_backward_op(dy: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    return gelu_backward(dy, z)


@_gelu_backward_op.register_fake
def _(dy: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    return torch.empty(z.shape, device=z.device, dtype=z.dtype)


@torch.library.custom_op("labnotes::matmul_bias_grad", mutates_args=())
def _bias_grad_op(dz: torch.Tensor) -> torch.Tensor:
    return bias_grad(dz)


@_bias_grad_op.register_fake
def _(dz: torch.Tensor) -> torch.Tensor:
    return torch.empty(dz.shape[1], device=dz.device, dtype=dz.dtype)


def _setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    a, b, _bias, _residual, variant, epilogue, precision, config, _ = inputs
    need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    ctx.save_for_backward(a if need_b else None, b if need_a else None, output[1] if epilogue == "bias_gelu" else None)
    ctx.opts = (variant, epilogue, precision, _config(config))


def _op_backward(ctx, dout: torch.Tensor, _dpre: torch.Tensor):  # type: ignore[no-untyped-def]
    a, b, pre = ctx.saved_tensors
    needs = tuple(ctx.needs_input_grad[:4])
    return (*_grads(dout, a, b, pre, needs, *ctx.opts, ops=True), None, None, None, None, None)


_matmul_op.register_autograd(_op_backward, setup_context=_setup_context)

# =============================================================================== functional


# The common call's arguments that need no further check: a plain product's variant (or None)
# and precision for 16-bit operands; float32 needs a precision (the full check says so).
_PLAIN_VARIANTS = (None, *VARIANTS)  # a tuple: membership by equality, so an unhashable variant is refused by name
_HALF_DTYPES = frozenset((torch.float16, torch.bfloat16))


def _common_call(a: Any, b: Any, variant: Any, precision: Any) -> bool:
    """True when :func:`_check` would pass a call with no epilogue, bias, residual or config:
    two 2-D tensors of one accepted dtype on one GPU (on the CPU under the interpreter) whose
    inner dimensions agree.  A cheaper test than the full one (no device objects); anything
    it does not accept goes through the full check, which names what is wrong."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dtype != b.dtype:
        return False
    if a.dtype in _HALF_DTYPES:
        if precision is not None and precision not in PRECISIONS:
            return False
    elif a.dtype != torch.float32 or precision not in PRECISIONS:
        return False
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0] or variant not in _PLAIN_VARIANTS:
        return False
    if a.is_cuda:
        return b.is_cuda and a.get_device() == b.get_device()
    return a.is_cpu and b.is_cpu and _checks.INTERPRETER  # the flag check_device reads


def _check(a: Any, b: Any, bias: Any, residual: Any, variant: Any, epilogue: Any, precision: Any, config: Any) -> None:
    """Validate :func:`matmul`'s arguments (each error names the argument)."""
    plain = epilogue is None and bias is None and residual is None and config is None
    if plain and _common_call(a, b, variant, precision):
        return
    for name, t in (("a", a), ("b", b)):
        check_tensor("matmul", name, t)
        if t.dim() != 2:
            raise ValueError(f"matmul: {name} must be 2-D, got shape {list(t.shape)}")
        if t.dtype not in DTYPES:
            raise TypeError(f"matmul: {name} has dtype {t.dtype}; expected float16, bfloat16 or float32")
    if b.dtype != a.dtype:
        raise TypeError(f"matmul: b has dtype {b.dtype} but a has {a.dtype}; pass operands of one dtype")
    check_device("matmul", "a", a)
    check_same_device("matmul", "b", b, "a", a)
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"matmul: inner dimensions differ: a is {list(a.shape)} and b is {list(b.shape)} (a.shape[1] != b.shape[0])"
        )
    if variant is not None and variant not in VARIANTS:
        raise ValueError(f"matmul: variant must be one of {VARIANTS} or None, got {variant!r}")
    if epilogue not in EPILOGUES:
        raise ValueError(f"matmul: epilogue must be one of {EPILOGUES}, got {epilogue!r}")
    if precision is not None and precision not in PRECISIONS:
        raise ValueError(f"matmul: precision must be 'tf32', 'ieee' or None, got {precision!r}")
    if a.dtype == torch.float32 and precision is None:
        raise ValueError(
            "matmul: float32 operands need precision='tf32' (tensor cores, 10-bit mantissa products) "
            "or precision='ieee' (full float32); the choice is never made silently"
        )
    if epilogue is None and bias is None and residual is None and config is None:
        return  # the common call: nothing further to check
    n = b.shape[1]
    wants_bias = epilogue in ("bias", "bias_gelu")
    for name, t, wanted, shape in (("bias", bias, wants_bias, [n]), ("residual", residual, epilogue == "residual",
                                                                     [a.shape[0], n])):  # fmt: skip
        if t is None:
            if wanted:
                raise ValueError(f"matmul: epilogue={epilogue!r} needs {name}, got None")
            continue
        if not wanted:
            raise ValueError(f"matmul: {name} was given but epilogue={epilogue!r} does not use it")
        check_tensor("matmul", name, t, optional=True)
        if list(t.shape) != shape:
            raise ValueError(f"matmul: {name} must have shape {shape}, got {list(t.shape)}")
        if t.dtype != a.dtype:
            raise TypeError(f"matmul: {name} has dtype {t.dtype} but a has {a.dtype}")
        check_same_device("matmul", name, t, "a", a)
    if config is not None:
        if not isinstance(config, TileConfig):
            raise TypeError(f"matmul: config must be a TileConfig or None, got {type(config).__name__}")
        if variant == "autotuned":
            raise ValueError("matmul: config does not apply to variant='autotuned' (it picks its own tile)")
        blocks = (config.block_m, config.block_n, config.block_k)
        if any(v < 16 or v & (v - 1) for v in blocks):
            raise ValueError(f"matmul: config blocks must be powers of two ≥ 16, got {blocks}")
        if config.group_m < 1 or config.num_stages < 1 or config.num_warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"matmul: config needs group_m ≥ 1, num_stages ≥ 1 and num_warps in 1..16, got {config}")
        if variant == "warp_specialized" and a.dtype != torch.float32:  # fp32 runs the persistent kernel
            _check_ws_config(config, a.element_size())


def _check_ws_config(config: TileConfig, element_size: int) -> None:
    # The warp-specialized kernel's limits: 4 warps a tile (ping-pong) or 8 (cooperative: two
    # warpgroups split the rows), each warpgroup's accumulator at most 128 x 128 fp32 in its
    # registers with 64 or 128 rows (wgmma's 64-row instructions), boxes of at most 256 and a
    # K step of at most 128 bytes (the 128-byte swizzle), and the shared memory of one program.
    if config.num_warps not in (4, 8):
        raise ValueError(f"matmul: warp_specialized needs num_warps 4 (ping-pong) or 8 (cooperative), got {config}")
    rows = config.block_m // (config.num_warps // 4)
    if rows not in (64, 128) or config.block_n > 256 or rows * config.block_n > 128 * 128:
        raise ValueError(
            f"matmul: warp_specialized needs 64 or 128 rows a warpgroup and at most 128 x 128 outputs a "
            f"warpgroup (block_m / (num_warps / 4) x block_n), got {config}"
        )
    if config.block_k * element_size > 128:
        raise ValueError(f"matmul: warp_specialized needs block_k x element size ≤ 128 bytes, got {config}")
    need = ws_shared_bytes(config, element_size)
    if need > WS_SHARED_LIMIT:
        raise ValueError(
            f"matmul: warp_specialized with {config} needs {need} bytes of shared memory, over the "
            f"{WS_SHARED_LIMIT} a Hopper program may use (fewer stages or a smaller tile)"
        )


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    variant: str | None = None,
    epilogue: str | None = None,
    bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    precision: str | None = None,
    config: TileConfig | None = None,
) -> torch.Tensor:
    """``epilogue(a @ b)``, differentiable and compilable.

    Args:
        a: ``[M, K]``; b: ``[K, N]``.  Both float16, both bfloat16 or both float32, on one
            CUDA GPU (the kernels run on that GPU, whichever is current), or on the CPU under
            ``TRITON_INTERPRET=1``.  Any strides: ``w.T`` (a transposed operand) is read in
            place.  The one copy: the TMA kernels (``persistent``, ``warp_specialized``, on
            Hopper) read an operand whose other stride or base is not a multiple of 16 bytes
            from a padded copy made for the call (:func:`tma_copy`: one more read and write
            of that operand, and its size in memory until the call returns).
        variant: ``"fixed"``, ``"autotuned"``, ``"persistent"`` (TMA, one program per SM),
            ``"warp_specialized"`` (TMA producer and two consumer warpgroups, fp16/bf16 on
            Hopper; :func:`ws_eligible`) or ``"split_k"`` (decode shapes); ``None`` chooses
            (:func:`default_variant`).
        epilogue: ``None``; ``"bias"`` (+ ``bias[N]``); ``"bias_gelu"`` (tanh-GELU of
            ``a @ b + bias``); ``"residual"`` (+ ``residual[M, N]``).  Applied to the fp32
            accumulator before the one store.
        bias: ``[N]``, a's dtype and device; required by and only allowed with the bias epilogues.
        residual: ``[M, N]`` of any strides, a's dtype and device; only with ``"residual"``.
        precision: float32 operands need ``"tf32"`` (tensor-core TF32 products) or ``"ieee"``
            (full fp32 products); float16/bfloat16 ignore it.
        config: a :class:`TileConfig` forcing the tile of ``fixed``, ``persistent``,
            ``warp_specialized`` (``num_warps`` 4: ping-pong, 8: cooperative) or ``split_k``
            (not ``autotuned``).

    Returns: a new contiguous ``[M, N]`` tensor of a's dtype, accumulated in fp32.  ``M`` or
    ``N`` zero gives an empty tensor; ``K`` zero gives zeros passed through the epilogue.

    Raises:
        TypeError: an operand is not a tensor, has a dtype other than the three above, or
            the dtypes of a, b, bias, residual differ; config not a TileConfig.
        ValueError: an operand is not 2-D; inner dimensions differ; tensors on different
            devices, or on the CPU outside the interpreter; float32 without ``precision``;
            an unknown variant, epilogue or precision; bias/residual missing, unexpected or
            of the wrong shape; a config that is invalid, given to ``autotuned``, or beyond
            the warp-specialized kernel's registers or shared memory.
    """
    _check(a, b, bias, residual, variant, epilogue, precision, config)
    grad = torch.is_grad_enabled() and (
        a.requires_grad or b.requires_grad or (bias is not None and bias.requires_grad)
        or (residual is not None and residual.requires_grad)
    )  # fmt: skip
    if eager_path(a, b, bias, residual):
        if grad:
            opts = (variant, epilogue, precision, config)
            bias = bias if bias is None else _unwrap_if_dead(bias)
            residual = residual if residual is None else _unwrap_if_dead(residual)
            return _apply_matmul(_unwrap_if_dead(a), _unwrap_if_dead(b), bias, residual, opts)
        return _forward(a, b, bias, residual, variant, epilogue, precision, config, False)[0]
    save_pre = epilogue == "bias_gelu" and grad
    cfg = None if config is None else list(config.astuple())
    return _matmul_op(a, b, bias, residual, variant, epilogue, precision, cfg, save_pre)[0]


def compiled_kernels(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    variant: str,
    epilogue: str | None = None,
    bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
    precision: str | None = None,
    config: TileConfig | None = None,
) -> list:
    """Run ``matmul(a, b, ...)`` once (no grad) and return the Triton compiled kernel(s) it
    launched, in launch order (``n_regs``, ``n_spills``, ``metadata.shared``, ``asm["sass"]`` /
    ``asm["cubin"]``): one for every variant.  Empty under the
    interpreter (nothing is compiled) and for an empty output.  Same arguments and errors as
    :func:`matmul`."""
    global _recording
    _check(a, b, bias, residual, variant, epilogue, precision, config)
    found: list[Any] = []
    _recording = found
    try:
        with torch.no_grad():
            _forward(a, b, bias, residual, variant, epilogue, precision, config, False)
    finally:
        _recording = None
    return found
