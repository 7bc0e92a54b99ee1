"""Row sum over the last dimension: the simplest reduction on the shared row base.

Memory traffic: one read of ``x`` and a write of one value per row; nothing else.  The row
base's extended form with no row output (``EXT_NOOUT``) does exactly that in every plan: a
row in registers (``block``), walked once in blocks by one program (``looped``: no second
pass, since there is nothing to write back), or cut into chunks over several programs
(``split``: per-chunk sums, then one program per row merges them in chunk order).  Sums are
accumulated in fp32 (fp64 for fp64), per lane and then across lanes in a fixed order: the
same bits on every run.

The backward is a broadcast: ``dx[r, :] = dy[r]``, returned as an expanded view of ``dy``
(what torch's own ``sum`` backward returns), so it moves no memory until it is consumed.

Reading order: the arithmetic, the eager path, autograd, the ``torch.library`` op and the
public functional.
"""

from __future__ import annotations

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
    check_tensor,
    eager_path,
)
from kernels._rowwise import RowCall, RowExtras, RowOp, as_rows, row_layout, run_rows
from kernels.plans import ROW_SUM_POLICY, RowPlan

# =============================================================================== arithmetic


@triton.jit
def _accumulate(m, s, a, b, c, w):
    return m, s + tl.sum(a, axis=1)


@triton.jit
def _combine(m, s, m_parts, s_parts):
    return m, s + tl.sum(s_parts, axis=1)  # chunk order: the same bits every run


@triton.jit
def _finish(m, s, WIDTH: tl.constexpr, ARG: tl.constexpr):
    return s, s  # rstat stores the first: the sum


@triton.jit
def _no_apply(a, b, c, w, m, s):  # never called: the op writes no row output
    return a, a


FORWARD = RowOp("row_sum", None, _accumulate, _combine, _no_apply, a_fill=0.0, has_b=False, finish=_finish,
                m_init=0.0, has_out=False)  # fmt: skip
POLICY = ROW_SUM_POLICY  # thresholds: kernels/plans.py
_CALL = RowCall(FORWARD, POLICY)

# =============================================================================== eager path


def sum_rows(
    x2d: torch.Tensor, out: torch.Tensor, plan: RowPlan | str | None = None, eager: bool = True
) -> RowPlan | None:
    """Write the sums of the ``[rows, width]`` rows of ``x2d`` (last dimension contiguous)
    into ``out`` (``[rows]``, contiguous).  ``plan``: a kind to force, a whole
    :class:`RowPlan`, or ``None``.  ``eager=False``: a call from the registered op (compiled
    code; see :meth:`RowCall.lane_ext`).  Returns the plan used (``None`` for the planner's,
    or when nothing ran)."""
    if x2d.shape[1] == 0:
        out.zero_()
        return None
    if plan is None:
        _CALL.lane_ext(x2d, None, x2d, rstat=out, eager=eager)
        return None
    extras = RowExtras(rstat=out)
    if isinstance(plan, RowPlan):
        vec, align = row_layout((x2d,))
        run_rows(FORWARD, plan, x2d, None, x2d, align, vec, extras)
        return plan
    return _CALL(x2d, None, x2d, plan, extras, eager)  # type: ignore[arg-type]


def _forward(x: torch.Tensor, keepdim: bool, plan: str | None, eager: bool = True) -> torch.Tensor:
    # x: at least 1-d, last dimension contiguous.
    out = torch.empty(x.shape[:-1], device=x.device, dtype=x.dtype)
    sum_rows(as_rows(x), out.view(-1), plan, eager)
    return out.unsqueeze(-1) if keepdim else out


class _RowSumFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, keepdim: bool, plan: str | None) -> torch.Tensor:  # type: ignore[override]
        ctx.shape, ctx.keepdim = x.shape, keepdim
        return _forward(x, keepdim, plan)

    @staticmethod
    def backward(ctx, dy: torch.Tensor):  # type: ignore[override]
        return (dy if ctx.keepdim else dy.unsqueeze(-1)).expand(ctx.shape), None, None


# =============================================================================== registered op


@torch.library.custom_op("labnotes::row_sum", mutates_args=())
def _row_sum_op(x: torch.Tensor, keepdim: bool, plan: str | None) -> torch.Tensor:
    return _forward(x.contiguous() if x.shape[-1] > 1 and x.stride(-1) != 1 else x, keepdim, plan, eager=False)


@_row_sum_op.register_fake
def _(x: torch.Tensor, keepdim: bool, plan: str | None) -> torch.Tensor:
    shape = (*x.shape[:-1], 1) if keepdim else x.shape[:-1]
    return torch.empty(shape, device=x.device, dtype=x.dtype)


def _setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    x, keepdim, _plan = inputs
    ctx.shape, ctx.keepdim = x.shape, keepdim


def _op_backward(ctx, dy: torch.Tensor):  # type: ignore[no-untyped-def]
    return (dy if ctx.keepdim else dy.unsqueeze(-1)).expand(ctx.shape), None, None


_row_sum_op.register_autograd(_op_backward, setup_context=_setup_context)

# =============================================================================== functional


def check_args(x: torch.Tensor, dim: int | tuple[int, ...] | list[int], plan: str | None) -> None:
    """Validate :func:`row_sum`'s arguments."""
    check_tensor("row_sum", "x", x)
    check_float("row_sum", "x", x)
    check_device("row_sum", "x", x)
    check_plan("row_sum", plan)
    dims = list(dim) if isinstance(dim, (tuple, list)) else [dim]
    n = max(x.dim(), 1)
    if len(dims) != 1 or not isinstance(dims[0], int) or not -n <= dims[0] < n or dims[0] % n != n - 1:
        raise ValueError(f"row_sum: sums over the last dimension only (dim=-1 or {n - 1}), got dim={dim!r}")


def row_sum(
    x: torch.Tensor, dim: int | tuple[int, ...] | list[int] = -1, keepdim: bool = False, *, plan: str | None = None
) -> torch.Tensor:
    """``torch.sum(x, dim=-1, keepdim=keepdim)``, differentiable and compilable.

    Args:
        x: any shape (0-d included, as torch: its own sum) on a CUDA GPU, or on the CPU
            under ``TRITON_INTERPRET=1``; float16, bfloat16, float32 or float64.  A last
            dimension with a stride other than 1 costs one copy.
        dim: the last dimension only (``-1``, ``x.dim() - 1`` or a 1-tuple of either);
            accepted so that ``torch.sum``'s calls read the same.
        keepdim: keep the summed dimension with size 1.
        plan: ``None`` lets the planner choose; ``"block"``, ``"looped"`` or ``"split"``
            forces one.

    Returns: a new tensor of ``x``'s dtype, shape ``x.shape[:-1]`` (``[..., 1]`` with
    ``keepdim``).  Accumulated in float32 (float64 for float64); an empty row sums to 0;
    NaN and infinities propagate as in ``torch.sum``.  Its gradient is ``dy`` broadcast
    along the row (an expanded view, as torch's).

    Raises:
        TypeError: ``x`` is not a tensor or has an unsupported dtype.
        ValueError: ``dim`` is not the last dimension; ``plan`` is unknown; ``x`` is on the
            CPU outside the interpreter.
    """
    # The common call first: a plain floating CUDA tensor of rows that does not need
    # autograd, the last dimension, the planner's plan, no tracer.  Every test below is one
    # the full path makes too; any that fails sends the call there.
    if (dim == -1 and plan is None and type(x) is torch.Tensor and _checks.on_gpu(x) and x.dtype in ACCEPTED
            and x.dim() == 2 and x.stride(1) == 1 and x.shape[1] and not (x.requires_grad and torch.is_grad_enabled())
            and not _is_compiling() and not _functorch_active()):  # fmt: skip
        out = torch.empty(x.shape[0], device=x.device, dtype=x.dtype)
        _CALL.lane_ext(x, None, x, rstat=out)
        return out.unsqueeze(-1) if keepdim else out
    check_args(x, dim, plan)
    if x.dim() == 0:
        return row_sum(x.reshape(1), -1, False, plan=plan).reshape(())
    if eager_path(x):
        if x.shape[-1] > 1 and x.stride(-1) != 1:
            x = x.contiguous()
        if x.requires_grad and torch.is_grad_enabled():
            return _RowSumFunction.apply(x, keepdim, plan)
        return _forward(x, keepdim, plan)
    return _row_sum_op(x, keepdim, plan)
