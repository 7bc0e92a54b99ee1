"""Softmax over the last dimension: kernels, launch plan, registered op, autograd.

Memory traffic is the whole story for softmax: the minimum is one read of ``x`` and one
write of ``y`` (forward), and one read each of ``y`` and ``dy`` plus one write of ``dx``
(backward).  The ``block`` plan moves exactly that.  The ``looped`` and ``split`` plans read
their input a second time; they try to make that second read hit L2 (evict-last on the
first read, the chunks in reverse order or the same chunk again on the second), so that
DRAM still sees close to the minimum.

Reading order, top to bottom: the Triton kernels for each plan, forward then backward; the
launchers that pick a kernel from a :class:`~kernels._rowwise.RowPlan`; the ``torch.library``
ops with their fake (meta) implementations and autograd; the public functional.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._rowwise import (
    RowPlan,
    RowPolicy,
    as_rows,
    check_rows,
    plan_rows,
    row_barrier,
    safe_shift,
    sm_count,
    take_ticket,
)

POLICY = RowPolicy()
# The backward holds y and dy but does no exp; whole rows of up to 64 KB stay in registers
# faster than looping re-reads them (H200, 8192 x 32768 bf16: 389 µs as one block against
# 527 µs looped in 8192 chunks; notes/2026-11-29-tune-plans-2545267.log).
BACKWARD_POLICY = RowPolicy(max_block_bytes=64 * 1024, chunk=16384)

# =============================================================================== forward


@triton.jit(do_not_specialize=["n_rows"])
def _fwd_block(
    x_ptr,
    y_ptr,
    n_rows,
    x_stride,
    y_stride,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
    ROWS: tl.constexpr,
):
    # One read of ROWS rows into registers, one write: the minimum traffic.
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < WIDTH)[None, :]
    rows = rows.to(tl.int64)  # rows * stride can pass 2**31 elements
    x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], mask=mask, other=float("-inf"))
    x = x.to(tl.float32)
    shift = safe_shift(tl.max(x, axis=1))
    e = tl.exp(x - shift[:, None])
    total = tl.sum(e, axis=1)
    inv = 1.0 / tl.where(total > 0, total, float("inf"))  # all -inf row: total 0, write zeros
    y = e * inv[:, None]
    tl.store(y_ptr + rows[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _fwd_looped(
    x_ptr,
    y_ptr,
    x_stride,
    y_stride,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
):
    # Pass 1 keeps a running (max, sum) per row, one exp per element: the chunk max is
    # reduced first, so the old sum is rescaled once per chunk rather than once per lane.
    # Pass 2 walks the chunks backwards, so its first reads are the chunks pass 1 loaded
    # last, which are still in L2 (and the first read asked L2 to keep them).
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    cols = tl.arange(0, BLOCK)
    NCHUNK: tl.constexpr = (WIDTH + BLOCK - 1) // BLOCK
    m = tl.full((), float("-inf"), tl.float32)
    s = tl.zeros((), tl.float32)
    for i in tl.range(0, NCHUNK):
        idx = i * BLOCK + cols
        x = tl.load(x_row + idx, mask=idx < WIDTH, other=float("-inf"), eviction_policy="evict_last")
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        shift = safe_shift(m_new)
        s = s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift), axis=0)
        m = m_new
    shift = safe_shift(m)
    inv = 1.0 / tl.where(s > 0, s, float("inf"))
    for i in tl.range(0, NCHUNK):
        idx = (NCHUNK - 1 - i) * BLOCK + cols
        x = tl.load(x_row + idx, mask=idx < WIDTH, other=float("-inf"), eviction_policy="evict_first")
        y = tl.exp(x.to(tl.float32) - shift) * inv
        tl.store(y_row + idx, y.to(y_ptr.dtype.element_ty), mask=idx < WIDTH)


@triton.jit
def _fwd_split_stats(
    x_ptr,
    stats_ptr,
    x_stride,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
    CHUNKS: tl.constexpr,
):
    # One program per (row, chunk): writes the chunk's (max, sum exp(x - max)), 8 bytes
    # per chunk, and asks L2 to keep the chunk for the write pass.
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    idx = chunk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + idx, mask=idx < WIDTH, other=float("-inf"), eviction_policy="evict_last")
    x = x.to(tl.float32)
    m = tl.max(x, axis=0)
    s = tl.sum(tl.exp(x - safe_shift(m)), axis=0)
    slot = stats_ptr + (row * CHUNKS + chunk) * 2
    tl.store(slot, m)
    tl.store(slot + 1, s)


@triton.jit
def _fwd_split_write(
    x_ptr,
    y_ptr,
    stats_ptr,
    x_stride,
    y_stride,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
    CHUNKS: tl.constexpr,
    CHUNKS_P2: tl.constexpr,
):
    # Every program merges its row's chunk statistics itself (CHUNKS pairs, tiny next to
    # the chunk) instead of a third launch doing it once per row.
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    c = tl.arange(0, CHUNKS_P2)
    slots = stats_ptr + (row * CHUNKS + c) * 2
    m_c = tl.load(slots, mask=c < CHUNKS, other=float("-inf"))
    s_c = tl.load(slots + 1, mask=c < CHUNKS, other=0.0)
    m = tl.max(m_c, axis=0)
    shift = safe_shift(m)
    s = tl.sum(s_c * tl.exp(m_c - shift), axis=0)
    inv = 1.0 / tl.where(s > 0, s, float("inf"))
    idx = chunk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + idx, mask=idx < WIDTH, other=float("-inf"), eviction_policy="evict_first")
    y = tl.exp(x.to(tl.float32) - shift) * inv
    tl.store(y_ptr + row * y_stride + idx, y.to(y_ptr.dtype.element_ty), mask=idx < WIDTH)


@triton.jit
def _fwd_split_one_launch(
    x_ptr,
    y_ptr,
    stats_ptr,
    sync_ptr,
    x_stride,
    y_stride,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
    CHUNKS: tl.constexpr,
    CHUNKS_P2: tl.constexpr,
):
    # The minimum traffic in one launch: each program reads its chunk once and keeps the
    # exponentials in registers while the row's programs swap (max, sum) through global
    # memory.  sync_ptr[0] hands out tickets in start order; sync_ptr[1 + row] counts the
    # row's chunks that have published their statistics.
    row, chunk = take_ticket(sync_ptr, CHUNKS)
    idx = chunk * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_stride + idx, mask=idx < WIDTH, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    shift = safe_shift(m)
    e = tl.exp(x - shift)
    slot = stats_ptr + (row * CHUNKS + chunk) * 2
    tl.store(slot, m)
    tl.store(slot + 1, tl.sum(e, axis=0))
    row_barrier(sync_ptr, row, CHUNKS)
    c = tl.arange(0, CHUNKS_P2)
    slots = stats_ptr + (row * CHUNKS + c) * 2
    m_c = tl.load(slots, mask=c < CHUNKS, other=float("-inf"), cache_modifier=".cg")
    s_c = tl.load(slots + 1, mask=c < CHUNKS, other=0.0, cache_modifier=".cg")
    row_shift = safe_shift(tl.max(m_c, axis=0))
    total = tl.sum(s_c * tl.exp(m_c - row_shift), axis=0)
    # Rescale this chunk's exponentials to the row's max: one exp per chunk, not per element.
    # A chunk that saw only -inf has e == 0; give it scale 0 (exp(0 - row_shift) can overflow).
    scale = tl.where(m == float("-inf"), 0.0, tl.exp(shift - row_shift)) / tl.where(total > 0, total, float("inf"))
    tl.store(y_ptr + row * y_stride + idx, (e * scale).to(y_ptr.dtype.element_ty), mask=idx < WIDTH)


# =============================================================================== backward
# dx = y * (dy - sum(y * dy)): one reduction per row, then an elementwise write.


@triton.jit(do_not_specialize=["n_rows"])
def _bwd_block(
    y_ptr,
    dy_ptr,
    dx_ptr,
    n_rows,
    y_stride,
    dy_stride,
    dx_stride,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
    ROWS: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < WIDTH)[None, :]
    rows = rows.to(tl.int64)
    y = tl.load(y_ptr + rows[:, None] * y_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + rows[:, None] * dy_stride + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    dot = tl.sum(y * dy, axis=1)
    dx = y * (dy - dot[:, None])
    tl.store(dx_ptr + rows[:, None] * dx_stride + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _bwd_looped(
    y_ptr,
    dy_ptr,
    dx_ptr,
    y_stride,
    dy_stride,
    dx_stride,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    NCHUNK: tl.constexpr = (WIDTH + BLOCK - 1) // BLOCK
    acc = tl.zeros((BLOCK,), tl.float32)  # per-lane partial dots; one reduction at the end
    for i in tl.range(0, NCHUNK):
        idx = i * BLOCK + cols
        ok = idx < WIDTH
        y = tl.load(y_ptr + row * y_stride + idx, mask=ok, other=0.0, eviction_policy="evict_last")
        dy = tl.load(dy_ptr + row * dy_stride + idx, mask=ok, other=0.0, eviction_policy="evict_last")
        acc += y.to(tl.float32) * dy.to(tl.float32)
    dot = tl.sum(acc, axis=0)
    for i in tl.range(0, NCHUNK):
        idx = (NCHUNK - 1 - i) * BLOCK + cols
        ok = idx < WIDTH
        y = tl.load(y_ptr + row * y_stride + idx, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        dy = tl.load(dy_ptr + row * dy_stride + idx, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
        tl.store(dx_ptr + row * dx_stride + idx, (y * (dy - dot)).to(dx_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _bwd_split_dots(
    y_ptr,
    dy_ptr,
    part_ptr,
    y_stride,
    dy_stride,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
    CHUNKS: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    idx = chunk * BLOCK + tl.arange(0, BLOCK)
    ok = idx < WIDTH
    y = tl.load(y_ptr + row * y_stride + idx, mask=ok, other=0.0, eviction_policy="evict_last")
    dy = tl.load(dy_ptr + row * dy_stride + idx, mask=ok, other=0.0, eviction_policy="evict_last")
    tl.store(part_ptr + row * CHUNKS + chunk, tl.sum(y.to(tl.float32) * dy.to(tl.float32), axis=0))


@triton.jit
def _bwd_split_write(
    y_ptr,
    dy_ptr,
    dx_ptr,
    part_ptr,
    y_stride,
    dy_stride,
    dx_stride,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
    CHUNKS: tl.constexpr,
    CHUNKS_P2: tl.constexpr,
):
    # The partial dots are summed in chunk order by every program: same bits every run,
    # no atomics.
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    c = tl.arange(0, CHUNKS_P2)
    dot = tl.sum(tl.load(part_ptr + row * CHUNKS + c, mask=c < CHUNKS, other=0.0), axis=0)
    idx = chunk * BLOCK + tl.arange(0, BLOCK)
    ok = idx < WIDTH
    y = tl.load(y_ptr + row * y_stride + idx, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_stride + idx, mask=ok, other=0.0, eviction_policy="evict_first").to(tl.float32)
    tl.store(dx_ptr + row * dx_stride + idx, (y * (dy - dot)).to(dx_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _bwd_split_one_launch(
    y_ptr,
    dy_ptr,
    dx_ptr,
    part_ptr,
    sync_ptr,
    y_stride,
    dy_stride,
    dx_stride,
    WIDTH: tl.constexpr,
    BLOCK: tl.constexpr,
    CHUNKS: tl.constexpr,
    CHUNKS_P2: tl.constexpr,
):
    # As _fwd_split_one_launch: y and dy are read once and stay in registers while the
    # row's partial dots are exchanged; they are summed in chunk order (deterministic).
    row, chunk = take_ticket(sync_ptr, CHUNKS)
    idx = chunk * BLOCK + tl.arange(0, BLOCK)
    ok = idx < WIDTH
    y = tl.load(y_ptr + row * y_stride + idx, mask=ok, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_stride + idx, mask=ok, other=0.0).to(tl.float32)
    tl.store(part_ptr + row * CHUNKS + chunk, tl.sum(y * dy, axis=0))
    row_barrier(sync_ptr, row, CHUNKS)
    c = tl.arange(0, CHUNKS_P2)
    dot = tl.sum(tl.load(part_ptr + row * CHUNKS + c, mask=c < CHUNKS, other=0.0, cache_modifier=".cg"), axis=0)
    tl.store(dx_ptr + row * dx_stride + idx, (y * (dy - dot)).to(dx_ptr.dtype.element_ty), mask=ok)


# =============================================================================== launchers


def plan_for(x2d: torch.Tensor, plan: str | None = None, policy: RowPolicy = POLICY) -> RowPlan:
    n_rows, width = x2d.shape
    return plan_rows(n_rows, width, x2d.element_size(), sm_count(x2d.device), policy, plan)  # type: ignore[arg-type]


def forward_rows(x2d: torch.Tensor, y2d: torch.Tensor, plan: RowPlan) -> None:
    """Write ``softmax(x2d)`` into ``y2d`` (both ``[rows, width]``, last dim contiguous)."""
    n_rows, width = x2d.shape
    if n_rows == 0 or width == 0:
        return
    if plan.kind == "block":
        grid = (triton.cdiv(n_rows, plan.rows_per_program),)
        _fwd_block[grid](
            x2d,
            y2d,
            n_rows,
            x2d.stride(0),
            y2d.stride(0),
            WIDTH=width,
            BLOCK=plan.block,
            ROWS=plan.rows_per_program,
            num_warps=plan.num_warps,
        )
    elif plan.kind == "looped":
        _fwd_looped[(n_rows,)](
            x2d, y2d, x2d.stride(0), y2d.stride(0), WIDTH=width, BLOCK=plan.block, num_warps=plan.num_warps
        )
    else:
        stats = torch.empty((n_rows, plan.chunks, 2), device=x2d.device, dtype=torch.float32)
        meta = dict(WIDTH=width, BLOCK=plan.block, CHUNKS=plan.chunks, num_warps=plan.num_warps)
        p2 = triton.next_power_of_2(plan.chunks)
        if plan.one_launch:
            sync = torch.zeros(n_rows + 1, device=x2d.device, dtype=torch.int32)
            _fwd_split_one_launch[(n_rows * plan.chunks,)](
                x2d, y2d, stats, sync, x2d.stride(0), y2d.stride(0), CHUNKS_P2=p2, **meta
            )
            return
        _fwd_split_stats[(n_rows, plan.chunks)](x2d, stats, x2d.stride(0), **meta)
        _fwd_split_write[(n_rows, plan.chunks)](x2d, y2d, stats, x2d.stride(0), y2d.stride(0), CHUNKS_P2=p2, **meta)


def backward_rows(y2d: torch.Tensor, dy2d: torch.Tensor, dx2d: torch.Tensor, plan: RowPlan) -> None:
    """Write the softmax input gradient into ``dx2d`` from the output ``y2d`` and ``dy2d``."""
    n_rows, width = y2d.shape
    if n_rows == 0 or width == 0:
        return
    strides = (y2d.stride(0), dy2d.stride(0), dx2d.stride(0))
    if plan.kind == "block":
        grid = (triton.cdiv(n_rows, plan.rows_per_program),)
        _bwd_block[grid](
            y2d,
            dy2d,
            dx2d,
            n_rows,
            *strides,
            WIDTH=width,
            BLOCK=plan.block,
            ROWS=plan.rows_per_program,
            num_warps=plan.num_warps,
        )
    elif plan.kind == "looped":
        _bwd_looped[(n_rows,)](y2d, dy2d, dx2d, *strides, WIDTH=width, BLOCK=plan.block, num_warps=plan.num_warps)
    else:
        part = torch.empty((n_rows, plan.chunks), device=y2d.device, dtype=torch.float32)
        meta = dict(WIDTH=width, BLOCK=plan.block, CHUNKS=plan.chunks, num_warps=plan.num_warps)
        p2 = triton.next_power_of_2(plan.chunks)
        if plan.one_launch:
            sync = torch.zeros(n_rows + 1, device=y2d.device, dtype=torch.int32)
            _bwd_split_one_launch[(n_rows * plan.chunks,)](y2d, dy2d, dx2d, part, sync, *strides, CHUNKS_P2=p2, **meta)
            return
        _bwd_split_dots[(n_rows, plan.chunks)](y2d, dy2d, part, strides[0], strides[1], **meta)
        _bwd_split_write[(n_rows, plan.chunks)](y2d, dy2d, dx2d, part, *strides, CHUNKS_P2=p2, **meta)


# =============================================================================== registered ops


@torch.library.custom_op("labnotes::softmax", mutates_args=())
def _softmax_op(x: torch.Tensor, plan: str | None) -> torch.Tensor:
    x2d = as_rows(x)
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    forward_rows(x2d, y.view(x2d.shape), plan_for(x2d, plan))
    return y


@_softmax_op.register_fake
def _(x: torch.Tensor, plan: str | None) -> torch.Tensor:
    return torch.empty(x.shape, device=x.device, dtype=x.dtype)


@torch.library.custom_op("labnotes::softmax_backward", mutates_args=())
def _softmax_backward_op(y: torch.Tensor, dy: torch.Tensor, plan: str | None) -> torch.Tensor:
    y2d = as_rows(y)  # the op's own contiguous output: a view
    dy2d = as_rows(dy if dy.stride(-1) == 1 else dy.contiguous())
    dx = torch.empty(y.shape, device=y.device, dtype=y.dtype)
    backward_rows(y2d, dy2d, dx.view(y2d.shape), plan_for(y2d, plan, BACKWARD_POLICY))
    return dx


@_softmax_backward_op.register_fake
def _(y: torch.Tensor, dy: torch.Tensor, plan: str | None) -> torch.Tensor:
    return torch.empty(y.shape, device=y.device, dtype=y.dtype)


def _setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    ctx.plan = inputs[1]
    ctx.save_for_backward(output)


def _backward(ctx, grad_y: torch.Tensor):  # type: ignore[no-untyped-def]
    (y,) = ctx.saved_tensors
    return _softmax_backward_op(y, grad_y, ctx.plan), None


_softmax_op.register_autograd(_backward, setup_context=_setup_context)


# =============================================================================== functional


def softmax(x: torch.Tensor, dim: int = -1, *, plan: str | None = None) -> torch.Tensor:
    """``torch.softmax(x, dim)`` over the last dimension, differentiable and compilable.

    ``plan`` forces ``"block"``, ``"looped"`` or ``"split"``; ``None`` lets the planner pick.
    The output is a new contiguous tensor of ``x``'s shape and dtype.  Rows that are partly
    ``-inf`` get valid probabilities; rows that are all ``-inf`` get zeros (not NaN).
    """
    check_rows("softmax", "x", x)
    if dim not in (-1, x.dim() - 1):
        raise ValueError(
            f"softmax: dim={dim} is not supported; only the last dimension (dim=-1) is. "
            "Move the reduced dimension last: softmax(x.movedim(dim, -1).contiguous()).movedim(-1, dim)"
        )
    if plan is not None and plan not in ("block", "looped", "split"):
        raise ValueError(f"softmax: plan must be 'block', 'looped', 'split' or None, got {plan!r}")
    return _softmax_op(x, plan)
