"""Residual RMSNorm: its arithmetic on the shared row base, autograd, ops and functional.

``h = x + residual`` (in fp32 registers), ``y = h * rsqrt(mean(h^2) + eps) * weight``; the
updated residual ``h`` is written beside ``y`` by the same launch.  Without a residual it
is plain RMSNorm (``h = x``, nothing written but ``y``); without a weight, ``weight = 1``.

Memory traffic (the model a page divides by): the forward reads ``x`` and the residual and
writes ``y`` and ``h`` (4 passes over ``[rows, width]``; 2 without a residual), plus one
read of the weight, which every row shares and L2 serves after the first rows.  The
backward recomputes the inverse RMS from ``h`` instead of storing it: it reads ``h``,
``dy`` (and ``dh``, the gradient reaching the updated residual) and writes ``dx``, which is
also the residual's gradient (one tensor, not two).  It stores the recomputed inverse RMS,
4 bytes a row, for the weight gradient, a column reduction that reads ``dy`` and ``h`` once
more and sums ``dy * h * rstd`` down the rows in fp32 partials and a fixed order: no atomics,
the same bits on every run.  The ``looped`` and ``split`` plans read their row inputs a
second time, ideally from L2, as for softmax.

Reading order: the arithmetic (jit functions the generic row kernels of
:mod:`kernels._rowwise` call, in the base's extended form: a = x or h, b = dy, c = the
residual or its gradient, w = the weight), the eager path, autograd, the ``torch.library``
ops that ``torch.compile`` traces, argument checks and the public functional.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import torch
import triton
import triton.language as tl

from kernels import _checks
from kernels._checks import (
    ACCEPTED,
    _functorch_active,
    _is_compiling,
    check_device,
    check_float,
    check_plan,
    check_same_device,
    check_tensor,
    eager_path,
)
from kernels._launch import FastKernel, current_device
from kernels._rowwise import RowCall, RowExtras, RowOp, column_sum, row_layout, row_vec, run_rows, sm_count
from kernels.plans import PLAN_KINDS, RMSNORM_BACKWARD_POLICY, RMSNORM_POLICY, RowPlan, next_power_of_2

# =============================================================================== arithmetic
# Tiles are [R, B]; statistics [R] (m, s).  Forward: s = sum(h^2), finished into the inverse
# RMS r.  Backward: m = sum(h^2) and s = sum(dy * w * h), finished into r and
# r^3 * s / width, so that dx = r * dy * w - h * r^3 * s / width (+ dh).


@triton.jit
def _rsqrt(v):
    # fp32: the correctly rounded square root and a division (rsqrt.approx is 2^-22 off; the
    # few instructions more are nothing next to a row's loads).  fp64 likewise.
    return 1.0 / tl.sqrt_rn(v) if v.dtype == tl.float32 else 1.0 / tl.sqrt(v)


@triton.jit
def _fwd_accumulate(m, s, a, b, c, w):
    h = a + c
    return m, s + tl.sum(h * h, axis=1)


@triton.jit
def _sum_both(m, s, m_parts, s_parts):
    return m + tl.sum(m_parts, axis=1), s + tl.sum(s_parts, axis=1)  # chunk order: the same bits every run


@triton.jit
def _fwd_finish(m, s, WIDTH: tl.constexpr, EPS: tl.constexpr):
    r = _rsqrt(s / WIDTH + EPS)
    return r, r


@triton.jit
def _fwd_apply(a, b, c, w, m, s):
    h = a + c
    return h * m[:, None] * w, h


@triton.jit
def _fwd_residual(a, b, c, w):
    # The split plans write h in their reduce pass (RowOp.early_out2); their apply reads h
    # back as a, with c = 0, and normalizes h as stored: what F.rms_norm(x + residual) sees.
    return a + c


@triton.jit
def _bwd_accumulate(m, s, a, b, c, w):
    return m + tl.sum(a * a, axis=1), s + tl.sum(b * w * a, axis=1)


@triton.jit
def _bwd_finish(m, s, WIDTH: tl.constexpr, EPS: tl.constexpr):
    r = _rsqrt(m / WIDTH + EPS)
    return r, r * r * r * s / WIDTH


@triton.jit
def _bwd_apply(a, b, c, w, m, s):
    dx = m[:, None] * b * w - a * s[:, None] + c
    return dx, dx


FORWARD = RowOp("rms_norm", None, _fwd_accumulate, _sum_both, _fwd_apply, a_fill=0.0, has_b=False,
                finish=_fwd_finish, m_init=0.0, early_out2=_fwd_residual)  # fmt: skip
BACKWARD = RowOp("rms_norm_backward", None, _bwd_accumulate, _sum_both, _bwd_apply, a_fill=0.0, has_b=True,
                 finish=_bwd_finish, m_init=0.0)  # fmt: skip

# =============================================================================== fused backward
# The row plans' backward writes dx, and the weight gradient then reads dy and h a second
# time for a column sum: 6 passes over [rows, width] for the minimum's 4 (h, dy, dh in; dx
# out).  The fused plan runs persistent programs, a few per SM, each walking rows pid,
# pid + programs, ... with the weight held in registers, and folds dy * h * rstd into an
# fp32 row of partial weight gradients as it goes: the second read disappears, and what is
# left is a [programs, width] fp32 partial (a few MB) that a column sum adds in a fixed
# order.  Row i always lands in program i % programs, so the bits depend only on the number
# of programs (fixed by the GPU's SM count), never on timing.  Rows wider than
# FUSED_MAX_WIDTH would not fit one program's registers: they keep the row plans.

FUSED_MAX_WIDTH = 8192
PLANS = (*PLAN_KINDS, "fused")  # what rms_norm(plan=) accepts
# Programs per SM and rows in flight, from notes/probe_rms_bwd.py at f73b7c2 (H200, bf16,
# the kernel alone, device time by events; notes/2026-12-02-probe-rms-bwd-f73b7c2.log): rows
# up to 4096 wide at 2 programs per SM and 3 stages (16384 x 4096: 109.2 us, 3.69 TB/s, where
# the one-element loads took 164-183 and the vector loads without stages 134.5; with a
# residual 141.4 against 154.7), wider rows at 1 program per SM (16 warps; 96-99 registers
# a thread leave room for no second) and 3 stages (8192 x 5120: 92.2 against 134.8 for the
# old default, 8192 x 7168: 105.2 against 150.0, 4096 x 8192: 63-69 against 90.1).
FUSED_STAGES = 3
FUSED_SMEM_BYTES = 200 * 1024  # of the 227 KB a program may use on an H100/H200: room for the reductions
# The planner's backward (plan=None) takes the fused pass from this width up (to
# FUSED_MAX_WIDTH).  Set from run rmsnorm-20261201T071616Z-ebbf780 (H200, training step,
# device time): fused against the row plans with a column sum was 0.69x the time at 16384x4096
# bf16 (313 against 453 us), 0.74x at 4096x4096, 0.79-0.68x at 8192x5120 and 8192x7168; at
# 1024x1024 it lost in every dtype (19.2 against 16.7 us in bf16: a program walks one narrow
# row at a time where the row plan packs two).  Held out: at 512x4097 (rows off the 16-byte
# grid, read one element at a time) the row plans won in run rmsnorm-20261202T094537Z-2a0bb53
# (28.2 against 32.2 us), so run rmsnorm-20261202T113110Z-57ce648 timed a default that also
# wanted aligned rows; there the fused pass, at one program per SM and 3 stages, won at
# 512x4097 too (27.5 against 30.1 us cold): the width alone decides again.
FUSED_MIN_WIDTH = 2048


@triton.jit
def _row_start(r, stride, VEC: tl.constexpr):
    """``r * stride``, shown to be a multiple of VEC (the host checked every stride and base:
    see :func:`kernels._rowwise.row_vec`).  Strides are runtime values (a new stride never recompiles), so
    without this the compiler can prove no alignment and loads and stores one element at a
    time: the fused backward did, until 2026-12-02 (PTX for sm_90: 16 ``ld.global.b16`` a row
    tile where 2 ``ld.global.v4.b32`` do)."""
    start = r * stride
    if VEC > 1:
        start = tl.multiple_of(start, VEC)
    return start


@triton.jit
def _bwd_fused_loads(h_ptr, dy_ptr, dh_ptr, r, rows, cols, inside, h_stride, dy_stride, dh_stride,
                     HAS_DH: tl.constexpr, VEC: tl.constexpr):  # fmt: skip
    """One row's h, dy and dh tiles ([1, BLOCK] in their storage dtype; zeros past the last row)."""
    live = inside[None, :] & (r[:, None] < rows)
    h = tl.load(h_ptr + _row_start(r, h_stride, VEC)[:, None] + cols[None, :], mask=live, other=0.0)
    dy = tl.load(dy_ptr + _row_start(r, dy_stride, VEC)[:, None] + cols[None, :], mask=live, other=0.0)
    dh = h * 0.0
    if HAS_DH:
        dh = tl.load(dh_ptr + _row_start(r, dh_stride, VEC)[:, None] + cols[None, :], mask=live, other=0.0)
    return h, dy, dh


@triton.jit(do_not_specialize=["rows", "h_stride", "dy_stride", "dh_stride", "dx_stride"])
def _bwd_fused_kernel(
    h_ptr, dy_ptr, dh_ptr, w_ptr, dx_ptr, part_ptr,
    rows: tl.int64, h_stride: tl.int64, dy_stride: tl.int64, dh_stride: tl.int64, dx_stride: tl.int64,
    WIDTH: tl.constexpr, BLOCK: tl.constexpr, EPS: tl.constexpr, HAS_DH: tl.constexpr, ACC: tl.constexpr,
    PREFETCH: tl.constexpr, VEC: tl.constexpr, STAGES: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < WIDTH
    w = tl.load(w_ptr + cols, mask=inside, other=0.0).to(ACC)
    dw = tl.zeros([BLOCK], dtype=ACC)
    # PREFETCH issues the next row's loads before this row's arithmetic, kept in their 16-bit
    # storage type (registers: 150 a thread at 4096 wide and 8 warps, one program per SM).
    # STAGES > 1 has the compiler do the same through shared memory instead (cp.async, STAGES - 1
    # rows ahead, no registers held: 93 a thread at 3 stages, as without).  With two programs
    # per SM (the registers allow no more), a row's reductions and stores otherwise leave the
    # SM with nothing in flight.  Timed at 2150860, when the loads were still one element at a
    # time (see _row_start; notes/2026-12-01-probes-2150860/probe_rms_bwd.log, 1-4 programs per
    # SM x 4/8/16 warps): no PREFETCH setting won everywhere.  16384 x 4096 stayed best without
    # it (183.5 us); 8192 x 5120 went from 160.2 to 132.7 us with it at one program per SM,
    # 4096 x 8192 from 144.1 to 116.1 at one program per SM without it.
    if PREFETCH:  # (a static branch)
        r = (tl.zeros([], tl.int64) + pid)[None]  # [1]: the row tiles are [1, BLOCK], as on the row base
        h_next, dy_next, dh_next = _bwd_fused_loads(h_ptr, dy_ptr, dh_ptr, r, rows, cols, inside, h_stride,
                                                    dy_stride, dh_stride, HAS_DH, VEC)  # fmt: skip
    for row in tl.range(pid, rows, programs, num_stages=STAGES):
        r = (tl.zeros([], tl.int64) + row)[None]
        if PREFETCH:
            h, dy, dh = h_next.to(ACC), dy_next.to(ACC), dh_next.to(ACC)
            h_next, dy_next, dh_next = _bwd_fused_loads(h_ptr, dy_ptr, dh_ptr, r + programs, rows, cols, inside,
                                                        h_stride, dy_stride, dh_stride, HAS_DH, VEC)  # fmt: skip
        else:
            h, dy, dh = _bwd_fused_loads(h_ptr, dy_ptr, dh_ptr, r, rows, cols, inside, h_stride, dy_stride,
                                         dh_stride, HAS_DH, VEC)  # fmt: skip
            h, dy, dh = h.to(ACC), dy.to(ACC), dh.to(ACC)
        m, s = _bwd_accumulate(tl.zeros([1], ACC), tl.zeros([1], ACC), h, dy, dh, w[None, :])
        rstd, scale = _bwd_finish(m, s, WIDTH, EPS)
        dx, _ = _bwd_apply(h, dy, dh, w[None, :], rstd, scale)
        dx_at = dx_ptr + _row_start(r, dx_stride, VEC)[:, None] + cols[None, :]
        tl.store(dx_at, dx.to(dx_ptr.dtype.element_ty), mask=inside[None, :])
        dw += tl.sum(dy * h * rstd[:, None], axis=0)
    tl.store(part_ptr + pid.to(tl.int64) * WIDTH + cols, dw, mask=inside)


_BWD_FUSED = FastKernel(_bwd_fused_kernel)


def fused_applies(width: int, weight: torch.Tensor | None) -> bool:
    """Whether the fused backward covers this problem (a weight whose gradient is wanted,
    rows that fit one program)."""
    return weight is not None and 0 < width <= FUSED_MAX_WIDTH


def fused_by_default(width: int, weight: torch.Tensor | None) -> bool:
    """Whether the planner's backward (``plan=None``) takes the fused pass: where it
    applies and the rows are at least ``FUSED_MIN_WIDTH`` wide (see there)."""
    return fused_applies(width, weight) and width >= FUSED_MIN_WIDTH


def fused_geometry(block: int, row_bytes: int) -> tuple[int, int, int]:
    """(programs per SM, warps, stages) of the fused pass for rows held in ``block``-element
    tiles, ``row_bytes`` bytes of input rows a row (h, dy and dh together): see
    ``FUSED_STAGES``.  Stages drop where their shared memory would not fit."""
    per_sm = 2 if block <= 4096 else 1
    warps = 4 if block <= 1024 else 8 if block <= 4096 else 16
    stages = FUSED_STAGES
    while stages > 1 and stages * row_bytes > FUSED_SMEM_BYTES:
        stages -= 1
    return per_sm, warps, stages


def backward_fused(
    h2d: torch.Tensor,
    dy2d: torch.Tensor,
    dx2d: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    dh2d: torch.Tensor | None = None,
    programs: int | None = None,
    *,
    prefetch: bool = False,
    num_warps: int | None = None,
    stages: int | None = None,
) -> torch.Tensor:
    """Write dx into ``dx2d`` and return the weight gradient (``[width]``, the weight's dtype)
    from one persistent pass over ``h2d``, ``dy2d`` (and ``dh2d``) plus a column sum of the
    programs' partials.  Row tensors ``[rows, width]`` with a contiguous last dimension,
    ``width <= FUSED_MAX_WIDTH``; ``programs``: how many (at most one per row), ``num_warps``
    and ``stages`` (rows in flight through shared memory): defaults from
    :func:`fused_geometry`; ``prefetch``: load the next row into registers before this row's
    arithmetic (the last four for notes/probe_rms_bwd.py)."""
    n_rows, width = h2d.shape
    acc_dtype = torch.float64 if h2d.dtype == torch.float64 else torch.float32
    if n_rows == 0:
        return torch.zeros(width, device=h2d.device, dtype=weight.dtype)
    if h2d.is_cuda and h2d.device.index != current_device():  # Triton launches on the current GPU
        with torch.cuda.device(h2d.device):
            return backward_fused(h2d, dy2d, dx2d, weight, eps, dh2d, programs, prefetch=prefetch,
                                  num_warps=num_warps, stages=stages)  # fmt: skip
    block = next_power_of_2(width)
    dh = h2d if dh2d is None else dh2d
    row_bytes = block * sum(t.element_size() for t in ((h2d, dy2d) if dh2d is None else (h2d, dy2d, dh2d)))
    per_sm, warps, fit_stages = fused_geometry(block, row_bytes)
    programs = min(n_rows, programs or per_sm * sm_count(h2d.device))
    part = torch.empty((programs, width), device=h2d.device, dtype=acc_dtype)
    warps = num_warps or warps
    index = h2d.device.index if h2d.is_cuda else -1
    key = (index, *[(t.dtype, t.data_ptr() % 16 == 0) for t in (h2d, dy2d, dh, weight, dx2d, part)])
    acc = tl.float64 if acc_dtype == torch.float64 else tl.float32
    rows_t = (h2d, dy2d, dh, dx2d)
    _BWD_FUSED.launch(
        key, index, (programs, 1, 1),
        (h2d, dy2d, dh, weight, dx2d, part, n_rows, h2d.stride(0), dy2d.stride(0), dh.stride(0), dx2d.stride(0)),
        (width, block, float(eps), dh2d is not None, acc, prefetch, row_vec(rows_t), stages or fit_stages),
        warps,
    )  # fmt: skip
    return column_sum(part, out_dtype=weight.dtype)


# =============================================================================== plans

POLICY = RMSNORM_POLICY  # thresholds: kernels/plans.py
BACKWARD_POLICY = RMSNORM_BACKWARD_POLICY

_FORWARD_CALL = RowCall(FORWARD, POLICY)
_BACKWARD_CALL = RowCall(BACKWARD, BACKWARD_POLICY)


def plan_for(x2d: torch.Tensor, y2d: torch.Tensor, force: str | None = None) -> tuple[RowPlan, int, int]:
    """(plan, vec, align) the eager path launches for the forward over these ``[rows, width]`` tensors."""
    return _FORWARD_CALL.plan(x2d, None, y2d, force)  # type: ignore[arg-type]


# =============================================================================== eager path


def forward_rows(
    x2d: torch.Tensor,
    y2d: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float,
    residual2d: torch.Tensor | None = None,
    h2d: torch.Tensor | None = None,
    plan: RowPlan | str | None = None,
    eager: bool = True,
) -> RowPlan | None:
    """Write RMSNorm of ``x2d (+ residual2d)`` into ``y2d`` and, with a residual, the sum
    into ``h2d``.  Row tensors are ``[rows, width]`` with a contiguous last dimension, the
    weight ``[width]`` contiguous.  ``plan``: a kind to force, a whole :class:`RowPlan` (the
    studies time every plan through this), or ``None``.  ``eager=False``: a call from the
    registered op (compiled code; see :meth:`RowCall.lane_ext`).  Returns the plan used
    (``None`` for the planner's, which :func:`plan_for` names)."""
    if (residual2d is None) != (h2d is None):
        raise ValueError("rms_norm: residual and the updated residual's output come together")
    if plan is None:
        _FORWARD_CALL.lane_ext(x2d, None, y2d, residual2d, weight, h2d, None, float(eps), eager)
        return None
    extras = RowExtras(c=residual2d, w=weight, out2=h2d, arg=float(eps))
    if isinstance(plan, RowPlan):
        vec, align = row_layout(tuple(t for t in (x2d, y2d, residual2d, h2d) if t is not None))
        run_rows(FORWARD, plan, x2d, None, y2d, align, vec, extras)
        return plan
    return _FORWARD_CALL(x2d, None, y2d, plan, extras, eager)  # type: ignore[arg-type]


def backward_rows(
    h2d: torch.Tensor,
    dy2d: torch.Tensor,
    dx2d: torch.Tensor,
    weight: torch.Tensor | None,
    eps: float,
    dh2d: torch.Tensor | None = None,
    rstd: torch.Tensor | None = None,
    plan: RowPlan | str | None = None,
    eager: bool = True,
) -> RowPlan | None:
    """Write the input gradient into ``dx2d`` from ``h2d`` (the normalized input), ``dy2d``
    and, with a residual, ``dh2d`` (the gradient reaching the updated residual, added
    through).  ``rstd`` (``[rows]`` fp32), if given, receives each row's recomputed inverse
    RMS (the weight gradient's row scale).  ``eager``: as for :func:`forward_rows`.  Returns
    the plan used (``None`` for the
    planner's, which :func:`plan_for` names)."""
    if plan is None:
        _BACKWARD_CALL.lane_ext(h2d, dy2d, dx2d, dh2d, weight, None, rstd, float(eps), eager)
        return None
    extras = RowExtras(c=dh2d, w=weight, rstat=rstd, arg=float(eps))
    if isinstance(plan, RowPlan):
        vec, align = row_layout(tuple(t for t in (h2d, dy2d, dx2d, dh2d) if t is not None))
        run_rows(BACKWARD, plan, h2d, dy2d, dx2d, align, vec, extras)
        return plan
    return _BACKWARD_CALL(h2d, dy2d, dx2d, plan, extras, eager)  # type: ignore[arg-type]


def _rows(t: torch.Tensor, width: int) -> torch.Tensor:
    """``[rows, width]`` over the trailing dimensions, a view where the strides allow (the
    normalized dimensions contiguous as one block), else one copy."""
    if t.dim() == 2 and t.shape[1] == width and (width <= 1 or t.stride(1) == 1):
        return t  # already rows: no view to make (a view costs a microsecond of host time)
    rows = t.numel() // width if width else math.prod(t.shape[: t.dim() - 1])
    t2 = t.reshape(rows, width)
    return t2 if width <= 1 or t2.stride(1) == 1 else t2.contiguous()


def _flat(weight: torch.Tensor | None, width: int) -> torch.Tensor | None:
    # The weight as the [width] contiguous vector the kernels index by column.
    if weight is None:
        return None
    if weight.dim() == 1 and (width <= 1 or weight.stride(0) == 1):
        return weight
    w = weight.reshape(width)
    return w if width <= 1 or w.stride(0) == 1 else w.contiguous()


def _forward(
    x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor | None, eps: float, width: int,
    plan: str | None, eager: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    # New contiguous outputs: y, and h with a residual, allocated as rows and viewed in x's
    # shape only where it has other dimensions.
    if plan == "fused":  # a backward plan: the forward takes the planner's choice
        plan = None
    x2d = _rows(x, width)
    y2d = torch.empty_like(x2d, memory_format=torch.contiguous_format)  # empty_like: a third of empty's host time
    h2d = None if residual is None else torch.empty_like(x2d, memory_format=torch.contiguous_format)
    forward_rows(x2d, y2d, _flat(weight, width), eps, None if residual is None else _rows(residual, width), h2d, plan,
                 eager)  # fmt: skip
    if x.dim() == 2 and x2d.shape[1] == x.shape[1]:
        return y2d, h2d
    return y2d.view(x.shape), None if h2d is None else h2d.view(x.shape)


def _backward(
    h: torch.Tensor, dy: torch.Tensor, dh: torch.Tensor | None, weight: torch.Tensor | None, eps: float, width: int,
    plan: str | None, want_dw: bool, eager: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """(dx, dw): dx also the residual's gradient; dw ``None`` unless ``want_dw``.  ``eager``:
    False from the registered ops (see :meth:`RowCall.lane_ext`)."""
    if dy.dtype != h.dtype:
        dy = dy.to(h.dtype)
    if dh is not None and dh.dtype != h.dtype:
        dh = dh.to(h.dtype)
    h2d = _rows(h, width)
    dy2d = _rows(dy, width)  # an expanded gradient (of y.sum()) is copied here
    dx2d = torch.empty_like(h2d, memory_format=torch.contiguous_format)
    if plan is None and want_dw and fused_by_default(width, weight):
        plan = "fused"
    if plan == "fused":
        if want_dw and fused_applies(width, weight):
            assert weight is not None
            dh2d = None if dh is None else _rows(dh, width)
            dw = backward_fused(h2d, dy2d, dx2d, _flat(weight, width), eps, dh2d)  # type: ignore[arg-type]
            return (dx2d if h.dim() == 2 and h2d.shape[1] == h.shape[1] else dx2d.view(h.shape)), dw
        plan = None  # nothing to fuse (no weight gradient) or rows too wide: the planner's row plan
    rstd_dtype = torch.float64 if h.dtype == torch.float64 else torch.float32
    rstd = torch.empty(h2d.shape[0], device=h.device, dtype=rstd_dtype) if want_dw else None
    backward_rows(h2d, dy2d, dx2d, _flat(weight, width), eps, None if dh is None else _rows(dh, width), rstd, plan,
                  eager)  # fmt: skip
    dx = dx2d if h.dim() == 2 and h2d.shape[1] == h.shape[1] else dx2d.view(h.shape)
    dw = None
    if want_dw:
        assert weight is not None and rstd is not None
        if h2d.shape[0] == 0:
            dw = torch.zeros(width, device=h.device, dtype=weight.dtype)
        else:
            dw = column_sum(dy2d, y=h2d, row_scale=rstd, out_dtype=weight.dtype)
    return dx, dw


class _RMSNormFunction(torch.autograd.Function):
    """The eager autograd path: launches directly, without the op dispatcher's cost.  Saves
    ``h`` (the updated residual, or ``x`` itself without one: no copy) and the weight."""

    @staticmethod
    def forward(ctx, x, residual, weight, eps, width, plan):  # type: ignore[no-untyped-def,override]
        y, h = _forward(x, residual, weight, eps, width, plan)
        ctx.save_for_backward(x if h is None else h, weight)
        ctx.eps, ctx.width, ctx.plan, ctx.has_residual = eps, width, plan, residual is not None
        if h is None:
            return y
        return y, h

    @staticmethod
    def backward(ctx, dy, dh=None):  # type: ignore[no-untyped-def,override]
        h, weight = ctx.saved_tensors
        if dy is None:
            dy = torch.zeros_like(h)
        want_dw = weight is not None and ctx.needs_input_grad[2]
        dx, dw = _backward(h, dy, dh if ctx.has_residual else None, weight, ctx.eps, ctx.width, ctx.plan, want_dw)
        dw = None if dw is None else dw.view(weight.shape)
        return dx, (dx if ctx.has_residual and ctx.needs_input_grad[1] else None), dw, None, None, None


# =============================================================================== registered ops
# What torch.compile, torch.export, FakeTensor and functorch see: opaque ops with fake
# implementations and autograd.  Two forward ops: a custom op may not return an alias of its
# input, and without a residual the "updated residual" would be x itself.


@torch.library.custom_op("labnotes::rms_norm", mutates_args=())
def _rms_norm_op(
    x: torch.Tensor, weight: torch.Tensor | None, eps: float, width: int, plan: str | None
) -> torch.Tensor:
    return _forward(x, None, weight, eps, width, plan, eager=False)[0]


@_rms_norm_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor | None, eps: float, width: int, plan: str | None) -> torch.Tensor:
    return torch.empty(x.shape, device=x.device, dtype=x.dtype)


@torch.library.custom_op("labnotes::rms_norm_residual", mutates_args=())
def _rms_norm_residual_op(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, width: int, plan: str | None
) -> tuple[torch.Tensor, torch.Tensor]:
    y, h = _forward(x, residual, weight, eps, width, plan, eager=False)
    assert h is not None
    return y, h


@_rms_norm_residual_op.register_fake
def _(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None, eps: float, width: int, plan: str | None
) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty(x.shape, device=x.device, dtype=x.dtype), torch.empty(x.shape, device=x.device, dtype=x.dtype)


@torch.library.custom_op("labnotes::rms_norm_backward", mutates_args=())
def _rms_norm_backward_op(
    h: torch.Tensor, dy: torch.Tensor, dh: torch.Tensor | None, weight: torch.Tensor | None, eps: float, width: int,
    plan: str | None, want_dw: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(dx, dw); dw is empty (shape [0]) unless ``want_dw``."""
    dx, dw = _backward(h, dy, dh, weight, eps, width, plan, want_dw, eager=False)
    return dx, (dw if dw is not None else h.new_empty(0))


@_rms_norm_backward_op.register_fake
def _(
    h: torch.Tensor, dy: torch.Tensor, dh: torch.Tensor | None, weight: torch.Tensor | None, eps: float, width: int,
    plan: str | None, want_dw: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    dx = torch.empty(h.shape, device=h.device, dtype=h.dtype)
    if want_dw and weight is not None:
        return dx, torch.empty(width, device=h.device, dtype=weight.dtype)
    return dx, h.new_empty(0)


def _op_grads(ctx, h: torch.Tensor, dy: torch.Tensor, dh: torch.Tensor | None):  # type: ignore[no-untyped-def]
    weight = ctx.saved_tensors[1]
    want_dw = weight is not None and ctx.needs_input_grad[-4]  # weight: fourth from the end in both ops
    dx, dw = _rms_norm_backward_op(h, dy, dh, weight, ctx.eps, ctx.width, ctx.plan, want_dw)
    return dx, (dw.view(weight.shape) if want_dw else None)


def _setup_plain(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    x, weight, eps, width, plan = inputs
    ctx.eps, ctx.width, ctx.plan, ctx.has_residual = eps, width, plan, False
    ctx.save_for_backward(x, weight)


def _backward_plain(ctx, dy: torch.Tensor):  # type: ignore[no-untyped-def]
    dx, dw = _op_grads(ctx, ctx.saved_tensors[0], dy, None)
    return dx, dw, None, None, None


def _setup_residual(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    _x, _residual, weight, eps, width, plan = inputs
    ctx.eps, ctx.width, ctx.plan, ctx.has_residual = eps, width, plan, True
    ctx.save_for_backward(output[1], weight)


def _backward_residual(ctx, dy: torch.Tensor, dh: torch.Tensor):  # type: ignore[no-untyped-def]
    h = ctx.saved_tensors[0]
    dx, dw = _op_grads(ctx, h, torch.zeros_like(h) if dy is None else dy, dh)
    return dx, dx, dw, None, None, None


_rms_norm_op.register_autograd(_backward_plain, setup_context=_setup_plain)
_rms_norm_residual_op.register_autograd(_backward_residual, setup_context=_setup_residual)

# =============================================================================== functional


def check_args(
    x: torch.Tensor,
    normalized_shape: Sequence[int],
    weight: torch.Tensor | None,
    eps: float | None,
    residual: torch.Tensor | None,
    plan: str | None,
) -> tuple[float, int]:
    """Validate :func:`rms_norm`'s arguments; returns (eps, width)."""
    check_tensor("rms_norm", "x", x)
    check_float("rms_norm", "x", x)
    check_device("rms_norm", "x", x)
    check_plan("rms_norm", plan, PLANS)
    shape: tuple[int, ...] | None = tuple(normalized_shape)
    if not all(type(n) is int for n in shape):  # what indexes like an int (a NumPy integer), as torch takes it
        try:
            shape = tuple(operator.index(n) for n in shape)
        except TypeError:
            shape = None
    if shape is None or not all(n >= 0 for n in shape):
        raise TypeError(f"rms_norm: normalized_shape must be a sequence of non-negative ints, got {normalized_shape!r}")
    if not shape:
        raise ValueError("rms_norm: normalized_shape must name at least one dimension (torch refuses () too)")
    if len(shape) > x.dim() or tuple(x.shape[x.dim() - len(shape) :]) != shape:
        raise ValueError(
            f"rms_norm: normalized_shape {list(shape)} must match the trailing dimensions of x, shape {list(x.shape)}"
        )
    for name, t in (("weight", weight), ("residual", residual)):
        check_tensor("rms_norm", name, t, optional=True)
        if t is not None:
            check_same_device("rms_norm", name, t, "x", x)
            check_float("rms_norm", name, t)
    if weight is not None and tuple(weight.shape) != shape:
        raise ValueError(f"rms_norm: weight has shape {list(weight.shape)}; expected normalized_shape {list(shape)}")
    if residual is not None:
        if residual.shape != x.shape:
            raise ValueError(f"rms_norm: residual has shape {list(residual.shape)}; expected x's {list(x.shape)}")
        if residual.dtype != x.dtype:
            raise TypeError(f"rms_norm: residual has dtype {residual.dtype}; expected x's {x.dtype}")
    if eps is None:  # torch: the epsilon of the type it computes in (float32 for 16-bit inputs)
        eps = torch.finfo(torch.float64 if x.dtype == torch.float64 else torch.float32).eps
    elif not isinstance(eps, (int, float)) or isinstance(eps, bool):
        raise TypeError(f"rms_norm: eps must be a real number or None, got {eps!r}")
    return float(eps), math.prod(shape)


_DEFAULT_EPS = {t: torch.finfo(torch.float64 if t == torch.float64 else torch.float32).eps for t in ACCEPTED}
_SEQUENCES = (tuple, list, torch.Size)


def _common_call(
    x: Any, normalized_shape: Any, weight: Any, eps: Any, residual: Any, plan: str | None
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None:
    # The common eager call, recognized before check_args and served by RowCall.lane_ext:
    # plain contiguous CUDA tensors of one dtype on one GPU, the last dimension normalized,
    # a weight of that width or none, a float eps or none, the planner's plan, no autograd,
    # no tracer.  Every test here is one check_args makes too; any that fails (None) sends
    # the call down the full path, which raises the errors.
    if not (plan is None and type(x) is torch.Tensor and _checks.on_gpu(x) and x.dtype in ACCEPTED and x.dim() >= 2
            and x.is_contiguous() and (eps is None or type(eps) is float)):  # fmt: skip
        return None
    width = x.shape[-1]
    if type(normalized_shape) is int:
        if normalized_shape != width:
            return None
    elif type(normalized_shape) not in _SEQUENCES or len(normalized_shape) != 1 or normalized_shape[0] != width:
        return None
    index = x.get_device()
    grad = x.requires_grad
    if weight is not None:
        if not (type(weight) in (torch.Tensor, torch.nn.Parameter) and weight.dtype in ACCEPTED
                and weight.dim() == 1 and weight.shape[0] == width and weight.is_contiguous()
                and _checks.on_gpu(weight) and weight.get_device() == index):  # fmt: skip
            return None
        grad = grad or weight.requires_grad
    if residual is not None:
        if not (type(residual) is torch.Tensor and residual.dtype == x.dtype and residual.shape == x.shape
                and residual.is_contiguous() and _checks.on_gpu(residual)
                and residual.get_device() == index):  # fmt: skip
            return None
        grad = grad or residual.requires_grad
    if (grad and torch.is_grad_enabled()) or not width or _is_compiling() or _functorch_active():
        return None
    y = torch.empty_like(x)
    h = None if residual is None else torch.empty_like(x)
    eps = _DEFAULT_EPS[x.dtype] if eps is None else eps
    if x.dim() == 2:
        _FORWARD_CALL.lane_ext(x, None, y, residual, weight, h, None, eps)
    else:
        _FORWARD_CALL.lane_ext(
            x.view(-1, width), None, y.view(-1, width), None if residual is None else residual.view(-1, width),
            weight, None if h is None else h.view(-1, width), None, eps,
        )  # fmt: skip
    return y if h is None else (y, h)


def rms_norm(
    x: torch.Tensor,
    normalized_shape: Sequence[int] | int | torch.Tensor,
    weight: torch.Tensor | float | None = None,
    eps: float | None = None,
    *,
    residual: torch.Tensor | None = None,
    plan: str | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``torch.nn.functional.rms_norm(x, normalized_shape, weight, eps)``, with an optional
    residual added first; differentiable and compilable.

    Args:
        x: ``[..., *normalized_shape]`` on a CUDA GPU (any of them: the kernels run on
            ``x``'s device), or on the CPU under ``TRITON_INTERPRET=1``; float16, bfloat16,
            float32 or float64; any number of rows, 0 included.
        normalized_shape: the trailing dimensions normalized together, at least one (an int
            for one; NumPy integers are taken as ints, as torch takes them).  A
            tensor here is taken as the weight (``rms_norm(x, weight, eps)``, the form of
            the project's design notes); the next positional argument is then ``eps``.
        weight: ``normalized_shape``, any accepted float dtype, on ``x``'s device; ``None``
            for no scaling.  Its gradient is reduced over rows deterministically.
        eps: added to the mean square; ``None`` gives what ``F.rms_norm`` uses: the epsilon
            of the type it computes in, ``torch.finfo(torch.float32).eps`` for float16,
            bfloat16 and float32 inputs (not the 16-bit types' own, whatever its docstring
            says; checked against torch 2.13) and float64's for float64.
        residual: ``x``'s shape and dtype.  Given, ``h = x + residual`` (summed in fp32) is
            normalized and returned as the updated residual, in the same launch.  The
            statistic is always that of the fp32 sum; the block and looped plans scale the
            fp32 sum, the split plan (few rows too wide for one program) scales ``h`` as
            returned, rounded to ``x``'s dtype (as ``F.rms_norm(x + residual)`` does): its
            second pass reads ``h`` back instead of ``x`` and ``residual``, half the bytes.
        plan: ``None`` lets the planner choose (its backward is the fused pass below for
            rows ``FUSED_MIN_WIDTH`` to ``FUSED_MAX_WIDTH`` wide when the weight's gradient
            is wanted, a row plan and a column sum otherwise); ``"block"``, ``"looped"`` or
            ``"split"`` forces one row plan, forward and backward (as for softmax);
            ``"fused"`` keeps the planner's forward and runs the backward as one persistent
            pass that also sums the weight gradient's partials (rows up to
            ``FUSED_MAX_WIDTH`` wide; the row plans otherwise).

    Returns: ``y`` (``x``'s shape and dtype, new and contiguous), or with a residual the
    pair ``(y, h)``.  Statistics are accumulated in float32 (float64 for float64).  A row
    holding NaN is NaN; a row holding +-inf is NaN at the infinities and 0 elsewhere (what
    ``F.rms_norm`` gives).  The gradient of ``x`` and of the residual is one tensor.

    Raises:
        TypeError: ``x``, ``weight`` or ``residual`` is not a tensor or has an unsupported
            dtype (the residual must have ``x``'s); ``normalized_shape`` is not ints;
            ``eps`` is not a real number (any real one is accepted, negative included, as
            torch accepts it).
        ValueError: shapes that do not match, an empty ``normalized_shape``, a tensor on
            another device, an unknown ``plan``, ``x`` on the CPU outside the interpreter.
    """
    fast = _common_call(x, normalized_shape, weight, eps, residual, plan)
    if fast is not None:
        return fast
    if isinstance(normalized_shape, torch.Tensor):  # rms_norm(x, weight, eps)
        if weight is not None and eps is not None:
            raise TypeError("rms_norm: with a weight in place of normalized_shape, pass at most eps after it")
        normalized_shape, weight, eps = tuple(normalized_shape.shape), normalized_shape, weight  # type: ignore[assignment]
    if isinstance(normalized_shape, int) or hasattr(normalized_shape, "__index__"):  # one int (a NumPy one too)
        normalized_shape = (normalized_shape,)  # type: ignore[assignment]
    eps_value, width = check_args(x, normalized_shape, weight, eps, residual, plan)  # type: ignore[arg-type]
    if eager_path(x):
        grad = torch.is_grad_enabled() and (
            x.requires_grad
            or (weight is not None and weight.requires_grad)
            or (residual is not None and residual.requires_grad)
        )
        if grad:
            return _RMSNormFunction.apply(x, residual, weight, eps_value, width, plan)
        y, h = _forward(x, residual, weight, eps_value, width, plan)
        return y if h is None else (y, h)
    if residual is None:
        return _rms_norm_op(x, weight, eps_value, width, plan)
    return _rms_norm_residual_op(x, residual, weight, eps_value, width, plan)
