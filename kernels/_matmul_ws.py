"""The warp-specialized Hopper GEMM of :mod:`kernels.matmul` (variant ``"warp_specialized"``),
written in Gluon because Triton 3.6 compiles ``tl.range(warp_specialize=True)`` to a single
partition on sm_90.

Why warp specialization: in the one-partition persistent kernel, the same warps that issue
the tensor-core instructions also run each tile's epilogue (bias, GELU, the conversion and the
store), and the tensor cores wait meanwhile; at 8192³ bf16 a GELU epilogue cost 38-50 µs of
1650 that way.  Here the work is split between partitions of one program (one per SM):

- a *producer* warp issues the TMA loads of every K step of every tile the program owns into
  an ``S``-stage ring of shared memory (``ready`` / ``empty`` mbarriers per stage); TMA reads
  out-of-bounds boxes as zeros, so edges and a K tail need no masks;
- two *consumer* warpgroups run async wgmma on the ring (one group in flight, fp32
  accumulators in registers; ``setmaxnreg`` gives them 232 registers a thread and the
  producer 40), then the epilogue, and store the tile through their own shared tile and a
  TMA store (which clips the edges) or, where the output's rows are not 16-byte aligned (an
  odd N), pointer stores read back from that tile (``_drain``).

Two schedules, chosen by the tile's warps (``TileConfig.num_warps``):

- *ping-pong* (4 warps a tile): each consumer owns every other tile (``BLOCK_M x BLOCK_N``,
  at most 128 x 128 fp32 in one warpgroup's registers).  A pair of ``turn`` mbarriers hands
  the ring over a whole tile at a time, so one consumer's epilogue runs while the other's main
  loop keeps the tensor cores busy.  (Without the turn, the second consumer would wait on a
  stage several fills ahead, and one phase parity cannot tell those fills apart.)
- *cooperative* (8 warps a tile): both consumers work on the same tile, each on half of its
  rows, and share each stage's ``b`` box.  Per flop it loads a third less from L2 than
  ping-pong's 128 x 128 tiles (a 256 x 128 tile reads 48 KB a K step for 4.2 Mflop, two
  128 x 128 tiles 64 KB), but the epilogue is no longer hidden.

Operands are read in place: ``a`` as ``[M, K]`` row-major or, transposed (``A_T``), through a
descriptor of its memory ``[K, M]`` whose shared tile is handed to wgmma permuted; ``b`` as
``[K, N]`` or, transposed (``B_T``, the ``x @ w.T`` of a linear layer), ``[N, K]``.  TMA needs
a unit inner stride, 16-byte-aligned bases and row strides; the host hands the kernel an
operand that has none of these as :func:`kernels.matmul.tma_copy`'s copy.

Evidence that led here: notes/probe_gluon_ws_gemm.py (2026-12-03, H200): ping-pong with 5
stages ran bias + GELU at 8192³ bf16 in 1665.5 µs against addmm + GELU's 1706.3 (11 of 12
paired rounds faster) and the plain 8192³ bf16 product at 1.012x cuBLAS's speed.
"""

from __future__ import annotations

import triton.language as tl  # the argument annotations Triton reads (types fixed: FastKernel's cache key)
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from kernels._activations import GELU_A, GELU_C

# Registers a thread (setmaxnreg): two consumer warpgroups and a producer warp, 2 x 128 x 232 +
# 32 x 40 ≤ 65,536 (the multiprocessor's register file).
CONSUMER_REGS = gl.constexpr(232)
PRODUCER_REGS = gl.constexpr(40)
_TWO_LOG2E = gl.constexpr(2.8853900817779268)  # 2 / ln 2: exp(-2u) = 2^(-2u / ln 2)


@gluon.jit
def _tile(t, num_m, num_n, GROUP_M: gl.constexpr):
    # Tile index -> (tile row, tile column), GROUP_M tile rows at a time (the grouped order of
    # kernels/matmul.py: programs running together share strips of a and b in L2).
    group = GROUP_M * num_n
    first_m = (t // group) * GROUP_M
    size_m = gl.minimum(num_m - first_m, GROUP_M)
    return first_m + (t % group) % size_m, (t % group) // size_m


# Rows of the tile a consumer stores at a time where the output's rows are not 16-byte aligned.
_STORE_ROWS = gl.constexpr(16)


@gluon.jit
def _drain(c_smem, dst, row0, col0, M, N):
    # Pointer stores of the tile staged in c_smem to the contiguous [M, N] at ``dst``, for an
    # output whose rows are not 16-byte aligned (N not a multiple of 8: a vocabulary of 50257), out of TMA's
    # reach.  The accumulator's layout puts a warp's 32 lanes on 8 rows, so its 2-byte stores
    # would each touch 8 rows; read back from shared memory in a layout whose lanes hold 32
    # consecutive columns of one row, each warp instruction writes 64 contiguous bytes.
    # _STORE_ROWS rows at a time keep the 64-bit addresses' registers few.  Under ping-pong the
    # other consumer's main loop runs meanwhile.
    BM: gl.constexpr = c_smem.shape[0]
    BN: gl.constexpr = c_smem.shape[1]
    rows_layout: gl.constexpr = gl.BlockedLayout([1, 1], [1, 32], [4, 1], [1, 0])
    cols = col0 + gl.arange(0, BN, layout=gl.SliceLayout(0, rows_layout))
    for r in gl.static_range(0, BM, _STORE_ROWS):
        rows = row0 + r + gl.arange(0, _STORE_ROWS, layout=gl.SliceLayout(1, rows_layout))
        part = c_smem.slice(r, _STORE_ROWS, dim=0).load(rows_layout)  # after the compiler's barrier
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        gl.store(dst + rows.to(gl.int64)[:, None] * N + cols[None, :], part, mask=mask)


@gluon.jit
def _store_box(val, dst, c_smem, row0, col0, M, N, C_TMA: gl.constexpr):
    # One box of the output (or of the pre-activation) through this consumer's shared tile.
    # C_TMA: ``dst`` is a descriptor and one asynchronous TMA store writes the box (the next
    # write of c_smem waits for it to leave); else ``dst`` is a pointer (_drain).
    if C_TMA:
        tma.store_wait(0)
        c_smem.store(val)
        fence_async_shared()
        tma.async_copy_shared_to_global(dst, [row0, col0], c_smem)
    else:
        c_smem.store(val)
        _drain(c_smem, dst, row0, col0, M, N)


@gluon.jit
def _store(val, dst, c_smem, row0, col0, M, N, C_TMA: gl.constexpr, SPLIT: gl.constexpr):
    # The consumer's [BM, BN] tile, whole or (SPLIT) as two [BM, BN / 2] halves through a
    # shared tile of half the width: 16 or 32 KB less shared memory a consumer, which buys the
    # ring a stage.  The accumulator's layout holds a column's high bit in registers, so the
    # reshape / permute / split below renames registers and moves no data.
    val = val.to(c_smem.dtype)
    if SPLIT:
        BM: gl.constexpr = val.shape[0]
        HALF: gl.constexpr = val.shape[1] // 2
        lo, hi = gl.split(gl.permute(gl.reshape(val, [BM, 2, HALF]), (0, 2, 1)))
        _store_box(lo, dst, c_smem, row0, col0, M, N, C_TMA)
        _store_box(hi, dst, c_smem, row0, col0 + HALF, M, N, C_TMA)
    else:
        _store_box(val, dst, c_smem, row0, col0, M, N, C_TMA)


@gluon.jit
def _producer(
    a_desc, b_desc, a_bufs, b_bufs, ready, empty, num_tiles, num_m, num_n, k_steps,
    TM: gl.constexpr, BN: gl.constexpr, BK: gl.constexpr, S: gl.constexpr, GROUP_M: gl.constexpr,
    A_T: gl.constexpr, B_T: gl.constexpr,
):  # fmt: skip
    # Fill i of the ring goes to stage i % S once its consumers released fill i - S (a fresh
    # barrier passes the wait on parity 1, so the first S fills do not wait).
    i = 0
    for t in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        pid_m, pid_n = _tile(t, num_m, num_n, GROUP_M)
        om = pid_m * TM
        on = pid_n * BN
        for k in range(k_steps):
            s = i % S
            mbarrier.wait(empty.index(s), ((i // S) & 1) ^ 1)
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            if A_T:
                tma.async_copy_global_to_shared(a_desc, [k * BK, om], ready.index(s), a_bufs.index(s))
            else:
                tma.async_copy_global_to_shared(a_desc, [om, k * BK], ready.index(s), a_bufs.index(s))
            if B_T:
                tma.async_copy_global_to_shared(b_desc, [on, k * BK], ready.index(s), b_bufs.index(s))
            else:
                tma.async_copy_global_to_shared(b_desc, [k * BK, on], ready.index(s), b_bufs.index(s))
            i += 1


@gluon.jit
def _a_view(stage, WG: gl.constexpr, BM: gl.constexpr, A_T: gl.constexpr, COOP: gl.constexpr):
    # This consumer's [BM, BK] operand in a stage of a: all of it, or its half of the rows (COOP).
    if A_T:
        if COOP:
            stage = stage.slice(WG * BM, BM, dim=1)
        return stage.permute((1, 0))
    else:
        if COOP:
            stage = stage.slice(WG * BM, BM, dim=0)
        return stage


@gluon.jit
def _consumer(
    c_desc, pre_desc, bias_ptr, res_ptr, M, N, s_bias, s_rm, s_rn, a_bufs, b_bufs, ready, empty, turn,
    c_smem, num_tiles, num_m, num_n, k_steps,
    WG: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr, S: gl.constexpr, GROUP_M: gl.constexpr,
    A_T: gl.constexpr, B_T: gl.constexpr, COOP: gl.constexpr, EPILOGUE: gl.constexpr, STORE_PRE: gl.constexpr,
    C_TMA: gl.constexpr, SPLIT: gl.constexpr,
):  # fmt: skip
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    pid, nprog = gl.program_id(0), gl.num_programs(0)
    if COOP:
        first = pid
        step = nprog
    else:
        first = pid + WG * nprog
        step = 2 * nprog
    m = 0
    for t in range(first, num_tiles, step):
        j = (t - pid) // nprog  # the tile's place in this program's sequence: where its fills sit in the ring
        pid_m, pid_n = _tile(t, num_m, num_n, GROUP_M)
        acc = gl.zeros((BM, BN), gl.float32, layout)
        i0 = j * k_steps
        if not COOP:
            mbarrier.wait(turn.index(WG), (m & 1) ^ (1 - WG))  # consumer 0's first tile passes at once
        for k in range(k_steps):
            i = i0 + k
            s = i % S
            mbarrier.wait(ready.index(s), (i // S) & 1)
            a = _a_view(a_bufs.index(s), WG, BM, A_T, COOP)
            b = b_bufs.index(s).permute((1, 0)) if B_T else b_bufs.index(s)
            acc = warpgroup_mma(a, b, acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=(acc, a, b))[0]
            mbarrier.arrive(empty.index((i + S - 1) % S), count=1, pred=k > 0)  # the step before has retired
        if not COOP:
            mbarrier.arrive(turn.index(1 - WG), count=1)
        m += 1  # noqa: SIM113 (a jit loop: no enumerate)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index((i0 + k_steps - 1) % S), count=1)
        # The epilogue, on the fp32 accumulator (the stores clip at M and N).
        row0 = pid_m * (2 * BM) + WG * BM if COOP else pid_m * BM
        col0 = pid_n * BN
        if EPILOGUE == 1 or EPILOGUE == 2:  # + bias[N]
            cols = col0 + gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
            acc = acc + gl.load(bias_ptr + cols * s_bias, mask=cols < N, other=0.0).to(gl.float32)[None, :]
        if EPILOGUE == 3:  # + residual[M, N], any strides
            rows = row0 + gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
            cols = col0 + gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
            mask = (rows[:, None] < M) & (cols[None, :] < N)
            offs = rows.to(gl.int64)[:, None] * s_rm + cols.to(gl.int64)[None, :] * s_rn
            acc = acc + gl.load(res_ptr + offs, mask=mask, other=0.0).to(gl.float32)
        if EPILOGUE == 2:
            if STORE_PRE:  # the pre-activation for the backward, through the same shared tile
                _store(acc, pre_desc, c_smem, row0, col0, M, N, C_TMA, SPLIT)
            # tanh-GELU as z * sigmoid(2u) = z / (1 + exp(-2u)), u = sqrt(2/pi) (z + 0.044715 z^3)
            u = GELU_C * (acc + GELU_A * acc * acc * acc)
            acc = acc / (1.0 + gl.exp2(-_TWO_LOG2E * u))
        _store(acc, c_desc, c_smem, row0, col0, M, N, C_TMA, SPLIT)
    if C_TMA:
        tma.store_wait(0)


# Integer arguments have fixed types and are not specialized on (a new M compiles nothing new);
# the host sends only M, N, K below 2^31 here (ws_eligible).
@gluon.jit(do_not_specialize=["M", "N", "K", "s_a", "s_b", "s_bias", "s_rm", "s_rn"])
def ws_matmul_kernel(
    a_ptr, b_ptr, c_ptr, pre_ptr, bias_ptr, res_ptr, M: tl.int32, N: tl.int32, K: tl.int32,
    s_a: tl.int64, s_b: tl.int64, s_bias: tl.int64, s_rm: tl.int64, s_rn: tl.int64,
    A_T: gl.constexpr, B_T: gl.constexpr, EPILOGUE: gl.constexpr, STORE_PRE: gl.constexpr,
    BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_K: gl.constexpr, GROUP_M: gl.constexpr,
    S: gl.constexpr, COOP: gl.constexpr, C_TMA: gl.constexpr, SPLIT: gl.constexpr,
):  # fmt: skip
    """``c[M, N] = epilogue(a @ b)`` for fp16/bf16, one program per SM (grid ≤ tiles).

    ``a``: ``[M, K]`` with row stride ``s_a`` or (``A_T``) its memory ``[K, M]`` with row
    stride ``s_a``; ``b``: ``[K, N]`` or (``B_T``) ``[N, K]``, row stride ``s_b``.  ``c`` and
    ``pre`` are contiguous ``[M, N]``, written by TMA stores where C_TMA (N a multiple of 16
    bytes), else by pointer stores.  EPILOGUE: 0 none, 1 bias, 2 bias + tanh-GELU (STORE_PRE:
    z to ``pre`` too), 3 residual (strides ``s_rm``, ``s_rn``).  A tile is ``BLOCK_M x
    BLOCK_N`` (split by rows between the consumers when COOP), K steps of ``BLOCK_K``, ``S``
    ring stages; SPLIT stores each consumer's tile as two halves of its columns.  Launch with
    4 warps (the first consumer; the partitions add the rest)."""
    dtype: gl.constexpr = a_ptr.dtype.element_ty
    if COOP:
        BM: gl.constexpr = BLOCK_M // 2
    else:
        BM: gl.constexpr = BLOCK_M
    if A_T:
        a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_K, BLOCK_M], dtype)
        a_desc = tma.make_tensor_descriptor(a_ptr, [K, M], [s_a, 1], [BLOCK_K, BLOCK_M], a_layout)
        a_bufs = gl.allocate_shared_memory(dtype, [S, BLOCK_K, BLOCK_M], a_layout)
    else:
        a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, BLOCK_K], dtype)
        a_desc = tma.make_tensor_descriptor(a_ptr, [M, K], [s_a, 1], [BLOCK_M, BLOCK_K], a_layout)
        a_bufs = gl.allocate_shared_memory(dtype, [S, BLOCK_M, BLOCK_K], a_layout)
    if B_T:
        b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_N, BLOCK_K], dtype)
        b_desc = tma.make_tensor_descriptor(b_ptr, [N, K], [s_b, 1], [BLOCK_N, BLOCK_K], b_layout)
        b_bufs = gl.allocate_shared_memory(dtype, [S, BLOCK_N, BLOCK_K], b_layout)
    else:
        b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_K, BLOCK_N], dtype)
        b_desc = tma.make_tensor_descriptor(b_ptr, [K, N], [s_b, 1], [BLOCK_K, BLOCK_N], b_layout)
        b_bufs = gl.allocate_shared_memory(dtype, [S, BLOCK_K, BLOCK_N], b_layout)
    if SPLIT:
        BOX_N: gl.constexpr = BLOCK_N // 2
    else:
        BOX_N: gl.constexpr = BLOCK_N
    c_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BM, BOX_N], dtype)
    if C_TMA:
        c_desc = tma.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BOX_N], c_layout)
        pre_desc = tma.make_tensor_descriptor(pre_ptr, [M, N], [N, 1], [BM, BOX_N], c_layout)
    else:  # rows not 16-byte aligned: stored through pointers (_store)
        c_desc = c_ptr
        pre_desc = pre_ptr
    c0 = gl.allocate_shared_memory(dtype, [BM, BOX_N], c_layout)
    c1 = gl.allocate_shared_memory(dtype, [BM, BOX_N], c_layout)
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(turn.index(0), count=1)
    mbarrier.init(turn.index(1), count=1)
    ready = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(S):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=2 if COOP else 1)  # every consumer reading the stage releases it
    num_m = gl.cdiv(M, BLOCK_M)
    num_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    num_tiles = num_m * num_n
    gl.warp_specialize(
        [
            (_consumer, (c_desc, pre_desc, bias_ptr, res_ptr, M, N, s_bias, s_rm, s_rn, a_bufs, b_bufs, ready,
                         empty, turn, c0, num_tiles, num_m, num_n, k_steps, 0, BM, BLOCK_N, S, GROUP_M, A_T, B_T,
                         COOP, EPILOGUE, STORE_PRE, C_TMA, SPLIT)),
            (_consumer, (c_desc, pre_desc, bias_ptr, res_ptr, M, N, s_bias, s_rm, s_rn, a_bufs, b_bufs, ready,
                         empty, turn, c1, num_tiles, num_m, num_n, k_steps, 1, BM, BLOCK_N, S, GROUP_M, A_T, B_T,
                         COOP, EPILOGUE, STORE_PRE, C_TMA, SPLIT)),
            (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, num_tiles, num_m, num_n, k_steps, BLOCK_M,
                         BLOCK_N, BLOCK_K, S, GROUP_M, A_T, B_T)),
        ],
        [4, 1],
        [CONSUMER_REGS, PRODUCER_REGS],
    )  # fmt: skip
