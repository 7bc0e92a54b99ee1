"""Softmax: its arithmetic on the shared row base, its plans, autograd, op and functional.

Memory traffic is the whole story: the minimum is one read of ``x`` and one write of ``y``
(forward), and one read each of ``y`` and ``dy`` plus one write of ``dx`` (backward).  The
``block`` plan moves exactly that.  The ``looped`` and ``split`` plans read their input a
second time and try to find it in L2 (evict-last on the first read, the chunks in reverse
order on the second), so that DRAM still sees close to the minimum.

Reading order: the arithmetic (jit functions the generic row kernels of
:mod:`kernels._rowwise` call), the plan policies, the eager launch path, autograd, the
``torch.library`` ops that ``torch.compile`` traces, and the public functional.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy

from kernels._checks import (
    ACCEPTED,
    FLOAT_NAMES,
    _functorch_active,
    _is_compiling,
    check_device,
    check_float,
    check_plan,
    check_tensor,
    eager_path,
)
from kernels._rowwise import (
    RowCall,
    RowOp,
    as_rows,
    exp,
    inverse_or_zero,
    merge_max_sum,
    row_layout,
    run_rows,
    safe_shift,
)
from kernels.plans import PLAN_KINDS, SOFTMAX_BACKWARD_POLICY, SOFTMAX_POLICY, STAGED, RowPlan

# =============================================================================== arithmetic
# Tiles are [R, B]; statistics [R].  Forward: a = x, statistics (max, sum of exp(x - max)).
# Backward: a = y, b = dy, statistic s = sum(y * dy); dx = y * (dy - s).


@triton.jit
def _fwd_row(a, b):
    m = tl.max(a, axis=1)
    e = exp(a - safe_shift(m)[:, None])  # one exp per element, reused for the output
    s = tl.sum(e, axis=1)
    return e * inverse_or_zero(s)[:, None], m, s


@triton.jit
def _fwd_accumulate(m, s, a, b):
    return merge_max_sum(m, s, a, 1.0)


@triton.jit
def _fwd_combine(m, s, m_parts, s_parts):
    return merge_max_sum(m, s, m_parts, s_parts)


@triton.jit
def _fwd_apply(a, b, m, s):
    return exp(a - safe_shift(m)[:, None]) * inverse_or_zero(s)[:, None]


@triton.jit
def _bwd_row(a, b):
    dot = tl.sum(a * b, axis=1)
    return a * (b - dot[:, None]), dot, dot


@triton.jit
def _bwd_accumulate(m, s, a, b):
    return m, s + tl.sum(a * b, axis=1)


@triton.jit
def _bwd_combine(m, s, m_parts, s_parts):
    return m, s + tl.sum(s_parts, axis=1)  # chunk order: the same bits every run


@triton.jit
def _bwd_apply(a, b, m, s):
    return a * (b - s[:, None])


# ------------------------------------------------------------------ the staged plan (Gluon)
# A row of up to ~110 KB held in shared memory: every chunk is copied in at once (cp.async,
# up to ~110 KB in flight a program, two programs an SM), then three passes over shared
# memory take the max, the sum of exp and the outputs.  DRAM sees one read of x and one
# write of y, where the looped plan reads x twice and finds only part of the second read in
# L2.  Written in Gluon, Triton's dialect with explicit layouts and shared memory, which the
# tensor language cannot allocate; it compiles for NVIDIA GPUs only (no interpreter).
# Rows are read through the row base's 16-byte window (``lead`` elements of the row before
# them, see kernels/_rowwise.py): whole 16-byte groups are copied and stored as vectors and
# the at most two partial groups at a row's ends are stored element by element.


@gluon.jit
def _staged_exp(x):
    # e^x as one ex2.approx.ftz (kernels/_rowwise.py: exp)
    return gl.inline_asm_elementwise(
        "ex2.approx.ftz.f32 $0, $1;", "=f,f", [x * 1.4426950408889634], dtype=gl.float32, is_pure=True, pack=1
    )


@gluon.jit(do_not_specialize=["n_rows", "a_stride", "b_stride", "c_stride", "out_stride", "out2_stride"])
def staged_softmax_kernel(
    a_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, rstat_ptr,
    n_rows: gl.int64, a_stride: gl.int64, b_stride: gl.int64, c_stride: gl.int64, out_stride: gl.int64,
    out2_stride: gl.int64,
    WIDTH: gl.constexpr, CHUNK: gl.constexpr, NCHUNK: gl.constexpr, VEC: gl.constexpr, ALIGN: gl.constexpr,
    A_CAST: gl.constexpr, NUM_WARPS: gl.constexpr,
):  # fmt: skip
    # One row a program (the row base's signature; b, c, w, out2 and rstat are never read).
    # x and y share their lead: the planner stages rows only where row_layout found one.
    layout: gl.constexpr = gl.BlockedLayout([VEC], [32], [NUM_WARPS], [0])
    edge_layout: gl.constexpr = gl.BlockedLayout([1], [32], [NUM_WARPS], [0])
    smem = gl.allocate_shared_memory(a_ptr.dtype.element_ty, [NCHUNK, CHUNK], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    row = gl.program_id(0).to(gl.int64)
    start = row * a_stride
    o_start = row * out_stride
    if ALIGN == 2:
        lead = (start % VEC).to(gl.int32)
        base = gl.multiple_of(start - lead, VEC)
        o_base = gl.multiple_of(o_start - lead, VEC)
    else:  # rows on the 16-byte grid: no window
        lead = 0
        base = gl.multiple_of(start, VEC)
        o_base = gl.multiple_of(o_start, VEC)
    offs = gl.arange(0, CHUNK, layout=layout)
    for c in gl.static_range(NCHUNK):
        k = c * CHUNK + offs
        group = (k // VEC) * VEC - lead
        load = gl.max_constancy((group + VEC > 0) & (group < WIDTH), [VEC])
        async_copy.async_copy_global_to_shared(smem.index(c), a_ptr + base + k, mask=load)
        async_copy.commit_group()
    m = gl.full([CHUNK], float("-inf"), gl.float32, layout)
    for c in gl.static_range(NCHUNK):
        async_copy.wait_group(NCHUNK - 1 - c)
        gl.thread_barrier()
        pos = c * CHUNK + offs - lead
        x = smem.index(c).load(layout).to(A_CAST).to(gl.float32)
        m = gl.maximum(m, gl.where((pos >= 0) & (pos < WIDTH), x, float("-inf")))
    # safe_shift and inverse_or_zero (kernels/_rowwise.py): an all -inf row writes zeros; a
    # NaN or +inf anywhere makes the sum, and so every output, NaN
    mx = gl.max(m, axis=0)
    shift = gl.where(mx == float("-inf"), 0.0, mx)
    s = gl.zeros([CHUNK], gl.float32, layout)
    for c in gl.static_range(NCHUNK):
        pos = c * CHUNK + offs - lead
        x = smem.index(c).load(layout).to(A_CAST).to(gl.float32)
        s += gl.where((pos >= 0) & (pos < WIDTH), _staged_exp(x - shift), 0.0)
    total = gl.sum(s, axis=0)
    inv = gl.where(total == 0.0, 0.0, 1.0 / total)
    for c in gl.static_range(NCHUNK):
        k = c * CHUNK + offs
        group = (k // VEC) * VEC - lead
        whole = gl.max_constancy((group >= 0) & (group + VEC <= WIDTH), [VEC])
        x = smem.index(c).load(layout).to(A_CAST).to(gl.float32)
        y = _staged_exp(x - shift) * inv
        gl.store(out_ptr + o_base + k, y.to(out_ptr.dtype.element_ty), mask=whole)
    if ALIGN == 2 or WIDTH % VEC != 0:  # rows with partial 16-byte groups at their ends
        e = gl.arange(0, 2 * VEC, layout=edge_layout)
        tail = ((lead + WIDTH) // VEC) * VEC
        k = gl.where(e < VEC, e, tail + e - VEC)
        pos = k - lead
        group = (k // VEC) * VEC - lead
        partial = (pos >= 0) & (pos < WIDTH) & ((group < 0) | (group + VEC > WIDTH)) & ((e < VEC) | (tail > 0))
        xe = gl.load(a_ptr + base + k, mask=partial, other=0.0).to(A_CAST).to(gl.float32)
        gl.store(out_ptr + o_base + k, (_staged_exp(xe - shift) * inv).to(out_ptr.dtype.element_ty), mask=partial)


FORWARD = RowOp(
    "softmax", _fwd_row, _fwd_accumulate, _fwd_combine, _fwd_apply, a_fill=float("-inf"), has_b=False,
    staged=staged_softmax_kernel,
)  # fmt: skip
BACKWARD = RowOp("softmax_backward", _bwd_row, _bwd_accumulate, _bwd_combine, _bwd_apply, a_fill=0.0, has_b=True)

# =============================================================================== plans

POLICY = SOFTMAX_POLICY  # thresholds and their evidence: kernels/plans.py
BACKWARD_POLICY = SOFTMAX_BACKWARD_POLICY

_FORWARD_CALL = RowCall(FORWARD, POLICY)
_BACKWARD_CALL = RowCall(BACKWARD, BACKWARD_POLICY)


def plan_for(
    x2d: torch.Tensor, y2d: torch.Tensor, force: str | None = None, dy2d: torch.Tensor | None = None
) -> tuple[RowPlan, int, int]:
    """(plan, vec, align) the eager path launches for these ``[rows, width]`` tensors: the
    forward's for ``softmax(x2d)`` into ``y2d``, or with ``dy2d`` the backward's."""
    if dy2d is None:
        return _FORWARD_CALL.plan(x2d, None, y2d, force)  # type: ignore[arg-type]
    return _BACKWARD_CALL.plan(x2d, dy2d, y2d, force)  # type: ignore[arg-type]


# =============================================================================== eager path


def forward_rows(x2d: torch.Tensor, y2d: torch.Tensor, plan: RowPlan | str | None = None) -> RowPlan | None:
    """Write ``softmax(x2d)`` into ``y2d`` (both ``[rows, width]`` with a contiguous last
    dimension; ``y2d``'s dtype may differ, as with ``dtype=``).  ``plan``: a plan kind to
    force, a whole :class:`RowPlan` (the studies time every plan through this), or ``None``.
    Returns the plan used (``None`` for an empty tensor)."""
    if isinstance(plan, RowPlan):
        vec, align = row_layout((x2d, y2d))
        run_rows(FORWARD, plan, x2d, None, y2d, align, vec)
        return plan
    return _FORWARD_CALL(x2d, None, y2d, plan)  # type: ignore[arg-type]


def backward_rows(
    y2d: torch.Tensor, dy2d: torch.Tensor, dx2d: torch.Tensor, plan: RowPlan | str | None = None
) -> RowPlan | None:
    """Write the softmax input gradient ``y * (dy - sum(y * dy))`` into ``dx2d`` (all three
    ``[rows, width]`` with a contiguous last dimension)."""
    if isinstance(plan, RowPlan):
        vec, align = row_layout((y2d, dy2d, dx2d))
        run_rows(BACKWARD, plan, y2d, dy2d, dx2d, align, vec)
        return plan
    return _BACKWARD_CALL(y2d, dy2d, dx2d, plan)  # type: ignore[arg-type]


def _forward(x: torch.Tensor, plan: str | None, out_dtype: torch.dtype, eager: bool = True) -> torch.Tensor:
    # x: last dimension contiguous, at least 1-D.  The output is new and contiguous.
    # eager=False: called by the registered op (RowCall.__call__ says why it matters).
    if out_dtype == x.dtype and x.is_contiguous():
        y = torch.empty_like(x)  # the same layout, without parsing the keywords
    else:
        y = torch.empty_like(x, dtype=out_dtype, memory_format=torch.contiguous_format)
    if x.dim() == 2 and eager:
        if plan is None:
            _FORWARD_CALL.lane(x, None, y)
        else:
            _FORWARD_CALL(x, None, y, plan)  # type: ignore[arg-type]
    else:
        x2d = as_rows(x)
        _FORWARD_CALL(x2d, None, y.view(x2d.shape), plan, eager=eager)  # type: ignore[arg-type]
    return y


def _backward(
    y: torch.Tensor, dy: torch.Tensor, plan: str | None, x_dtype: torch.dtype, eager: bool = True
) -> torch.Tensor:
    if dy.device != y.device:
        raise ValueError(f"softmax backward: dy is on {dy.device} but y is on {y.device}")
    if dy.dtype != y.dtype:
        dy = dy.to(y.dtype)
    if dy.shape[-1] > 1 and dy.stride(-1) != 1:
        dy = dy.contiguous()  # e.g. the expanded gradient of y.sum()
    if plan == STAGED:  # a forward-only plan: the backward's planner chooses
        plan = None
    if x_dtype == y.dtype and y.is_contiguous():
        dx = torch.empty_like(y)  # the same layout, without parsing the keywords
    else:
        dx = torch.empty_like(y, dtype=x_dtype, memory_format=torch.contiguous_format)
    if y.dim() == 2 and eager:
        if plan is None:
            _BACKWARD_CALL.lane(y, dy, dx)
        else:
            _BACKWARD_CALL(y, dy, dx, plan)  # type: ignore[arg-type]
    else:
        y2d = as_rows(y)
        _BACKWARD_CALL(y2d, as_rows(dy), dx.view(y2d.shape), plan, eager=eager)  # type: ignore[arg-type]
    return dx


class _SoftmaxFunction(torch.autograd.Function):
    """The eager autograd path: launches directly, without the op dispatcher's cost."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, plan: str | None, out_dtype: torch.dtype) -> torch.Tensor:  # type: ignore[override]
        y = _forward(x, plan, out_dtype)
        ctx.save_for_backward(y)
        ctx.plan, ctx.x_dtype = plan, x.dtype
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):  # type: ignore[override]
        (y,) = ctx.saved_tensors
        return _backward(y, dy, ctx.plan, ctx.x_dtype), None, None


# =============================================================================== registered ops
# What torch.compile, torch.export, FakeTensor and functorch see: opaque ops with fake
# implementations and autograd, over the last dimension of a last-dim-contiguous tensor.


@torch.library.custom_op("labnotes::softmax", mutates_args=())
def _softmax_op(x: torch.Tensor, plan: str | None, dtype: torch.dtype | None) -> torch.Tensor:
    return _forward(x.contiguous() if x.stride(-1) != 1 else x, plan, dtype or x.dtype, eager=False)


@_softmax_op.register_fake
def _(x: torch.Tensor, plan: str | None, dtype: torch.dtype | None) -> torch.Tensor:
    return torch.empty(x.shape, device=x.device, dtype=dtype or x.dtype)


@torch.library.custom_op("labnotes::softmax_backward", mutates_args=())
def _softmax_backward_op(y: torch.Tensor, dy: torch.Tensor, plan: str | None, x_dtype: torch.dtype) -> torch.Tensor:
    return _backward(y, dy, plan, x_dtype, eager=False)


@_softmax_backward_op.register_fake
def _(y: torch.Tensor, dy: torch.Tensor, plan: str | None, x_dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(y.shape, device=y.device, dtype=x_dtype)


def _setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    x, plan, _ = inputs
    ctx.plan, ctx.x_dtype = plan, x.dtype
    ctx.save_for_backward(output)


def _op_backward(ctx, dy: torch.Tensor):  # type: ignore[no-untyped-def]
    (y,) = ctx.saved_tensors
    return _softmax_backward_op(y, dy, ctx.plan, ctx.x_dtype), None, None


_softmax_op.register_autograd(_op_backward, setup_context=_setup_context)

# =============================================================================== functional


def check_args(x: torch.Tensor, dim: int, dtype: torch.dtype | None, plan: str | None) -> torch.dtype:
    """Validate :func:`softmax`'s arguments; returns the output dtype.  (A function of its
    own so that the dispatch study can time validation alone.)"""
    check_tensor("softmax", "x", x)
    check_plan("softmax", plan, (*PLAN_KINDS, STAGED))
    if dtype is None:
        check_float("softmax", "x", x, " (or pass dtype=)")
    elif dtype not in ACCEPTED:
        raise TypeError(f"softmax: dtype must be {FLOAT_NAMES}, got {dtype}")
    check_device("softmax", "x", x)
    n = max(x.dim(), 1)
    if not -n <= dim < n:
        raise IndexError(f"softmax: dim={dim} is out of range for a {x.dim()}-d tensor (expected [{-n}, {n - 1}])")
    return x.dtype if dtype is None else dtype


def softmax(
    x: torch.Tensor, dim: int = -1, *, dtype: torch.dtype | None = None, plan: str | None = None
) -> torch.Tensor:
    """``torch.nn.functional.softmax(x, dim, dtype=dtype)``, differentiable and compilable.

    Args:
        x: a tensor of any shape (0-d included) on a CUDA GPU (any of them: the kernels run
            on ``x``'s device), or on the CPU under ``TRITON_INTERPRET=1``.  float16,
            bfloat16, float32 or float64; other dtypes only with a floating ``dtype``.
        dim: the dimension to normalize, negative counts from the end.  The last dimension
            is the fast one; any other is moved last with one copy of ``x``, and the result
            is returned as a view in ``x``'s dimension order (not contiguous).  A last
            dimension with a stride other than 1 also costs one copy.
        dtype: as in torch: ``x`` is cast to it before the operation, and the output has it
            (the cast happens in registers, not as a separate copy, for floating ``x``).
        plan: ``None`` lets the planner choose; ``"block"`` (whole rows in registers),
            ``"looped"`` (one program walks a row twice), ``"split"`` (a row's chunks over
            many programs, two launches) or ``"staged"`` (the forward only: the row held in
            shared memory, one read; an NVIDIA GPU of compute capability 9.x, 16/32-bit
            tensors, not under the interpreter) forces one.  The planner's split, on an eager call
            (no CUDA-graph capture) reading at most 8 MB, runs as one launch instead: a few
            µs less host time per call, a few µs more device time
            (``kernels.plans.SOFTMAX_POLICY`` has the measurements).

    Returns: a new tensor of ``x``'s shape with dtype ``dtype`` or ``x.dtype``.  Statistics
    are accumulated in float32 (float64 for float64).  Non-finite inputs give what
    ``torch.softmax`` gives (a row holding NaN or +inf is all NaN), except that a row that is
    entirely ``-inf`` gives zeros, not NaN, and its gradient is zero (masked attention rows).

    Raises:
        TypeError: ``x`` is not a tensor, has an unsupported dtype, or ``dtype`` is not a
            floating dtype.
        IndexError: ``dim`` is out of range for ``x``.
        ValueError: ``plan`` is not one of the names above; ``x`` is on the CPU outside the
            interpreter, or on another non-CUDA device.
    """
    # The common call first: a plain floating CUDA tensor that does not need autograd, the
    # last dimension, the planner's plan, no tracer.  Every test below is one the full path
    # makes too; any that fails sends the call there.
    if (dtype is None and plan is None and dim == -1 and type(x) is torch.Tensor and x.is_cuda
            and x.dtype in ACCEPTED and x.dim() and (x.stride(-1) == 1 or x.shape[-1] <= 1)
            and not (x.requires_grad and torch.is_grad_enabled()) and not _is_compiling()
            and not _functorch_active()):  # fmt: skip
        return _forward(x, None, x.dtype)
    out_dtype = check_args(x, dim, dtype, plan)
    if x.dtype not in ACCEPTED:
        x = x.to(out_dtype)  # e.g. integers with dtype=torch.float32: torch casts first too
    ndim = x.dim()
    if ndim == 0:
        return softmax(x.reshape(1), 0, dtype=dtype, plan=plan).reshape(())
    if dim % ndim != ndim - 1:
        moved = x.movedim(dim, -1).contiguous()
        return softmax(moved, -1, dtype=dtype, plan=plan).movedim(-1, dim)
    if eager_path(x):
        if x.shape[-1] > 1 and x.stride(-1) != 1:
            x = x.contiguous()
        if x.requires_grad and torch.is_grad_enabled():
            return _SoftmaxFunction.apply(x, plan, out_dtype)
        return _forward(x, plan, out_dtype)
    return _softmax_op(x, plan, dtype)
