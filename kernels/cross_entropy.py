"""Cross-entropy over class indices: loss and logits gradient in one pass, on the shared row base.

``loss_i = lse(z_i) - sum_j q_ij z_ij`` with ``z = softcap * tanh(x / softcap)`` (or ``z = x``)
and the smoothed target ``q_ij = (1 - eps) [j == t_i] + eps / V``; that is torch's
``(1 - eps) * nll + eps / V * sum_j -log p_j``.  Ignored rows (``t_i == ignore_index``)
contribute nothing; ``mean`` divides by the rows not ignored (NaN when all are, as torch).

One pass over the logits: a row's statistics are the running log-sum-exp ``L`` and the running
``T = sum_j q_j z_j`` (two numbers, what the row base carries per row; ``L`` is merged per tile
as ``log(exp(L - M) + sum exp(z - M))``, one log per tile and lane on top of softmax's exps),
finished into the row's loss ``L - T``.  The price of one number for the log-sum-exp: a
probability ``exp(z - L)`` is off by up to a few half-ulps of ``|L|`` relative (~1e-6 for
logits of tens; 5e-4 for fp32 logits of 1e4, where torch's max-shifted softmax is exact; a
bf16 logit of that size is itself only good to 40).  The apply step writes the gradient
``w_i (softmax(z)_j - q_ij) dz/dx`` over the logits (``dz/dx = 1 - (z / softcap)^2``), in
fp32 registers (the true class's ``p - (1 - eps)`` never passes through a 16-bit value).
``w_i`` is the row's scale: 0 for an ignored row, ``1 / (rows not ignored)`` for ``mean``, 1
otherwise; an upstream gradient other than 1 is multiplied in by the backward (in place; a
launch that exits at once when it is 1, so ``loss.backward()`` pays nothing for it).

Where the gradient goes (the memory result): by default into a new ``[N, V]`` buffer, so the
caller's logits stay intact, which costs what torch's own gradient costs.  With
``inplace_backward=True`` it is written over the logits themselves, as Liger does: no second
``[N, V]`` tensor exists, and the logits hold the gradient after the forward (anything else
that reads them afterwards, such as another loss or a saved activation, sees the gradient;
that is the trade-off, and why it is opt-in).  Logits the call had to copy anyway (a class
dimension not last, a strided last dimension) are written over without asking: the copy is
the function's own.  The backward runs once: a second one (``retain_graph``) raises.

Reading order: the arithmetic (jit functions the generic row kernels of
:mod:`kernels._rowwise` call, in the extended form with a per-row index, a per-row scale and
``ARG = (softcap or 0, 1 - eps, eps / V, 16-bit logits)``), the eager path, autograd, the ``torch.library``
op that ``torch.compile`` traces, argument checks and the public functional.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels._activations import COMPILED, rcp
from kernels._checks import check_device, check_float, check_plan, check_same_device, check_tensor, eager_path
from kernels._launch import FastKernel, current_device
from kernels._rowwise import (
    RowCall,
    RowExtras,
    RowOp,
    exp,
    log,
    row_layout,
    row_vec,
    run_rows,
    safe_shift,
    sm_count,
)
from kernels.plans import (
    CROSS_ENTROPY_LOSS_POLICY,
    CROSS_ENTROPY_POLICY,
    RowPlan,
    cdiv,
    next_power_of_2,
)

# =============================================================================== arithmetic
# Tiles are [R, B]: a = the logits x; c = the row base's column marker of the target (1 at the
# target's column, 0 at the row's others, -1 on lanes outside the row); w = the row's scale
# ([R, 1]).  Statistics [R]: m = the running log-sum-exp L of z, s = the running T.


@triton.jit
def _tanh(y, FAST: tl.constexpr):
    # tanh through exp (the interpreter has no tanh).  FAST (compiled, float32 statistics of
    # 16-bit logits): 1 - 2 / (1 + e^(2y)) in two MUFU instructions (ex2.approx.ftz and
    # rcp.approx.ftz): absolute error about 2^-21, which is what a loss or a softmax sees of
    # z = cap * tanh(x / cap) (2^-21 * 30 = 1.4e-5, under a 16-bit logit's own rounding).  The
    # exact form costs a full-range division and a branchless series per element, in each of
    # the two passes: soft-capping ran 3.4x the plain loss at 8192 x 128256 (bc8b644).  +-inf
    # -> +-1 and NaN -> NaN either way.  Otherwise: the odd series below 1/8 (relative error
    # < 2e-10 there, where 1 - e^(-2|y|) would cancel), (1 - e) / (1 + e) above.
    fast: tl.constexpr = FAST and COMPILED and y.dtype == tl.float32
    if fast:
        r = rcp(1.0 + exp(2.0 * y))
        t = 1.0 - 2.0 * r
    else:
        ay = tl.abs(y)
        e = exp(-2.0 * ay)
        big = (1.0 - e) / (1.0 + e)
        y2 = y * y
        small = ay * (1.0 + y2 * (-0.3333333333333333 + y2 * (0.13333333333333333 + y2 * -0.05396825396825397)))
        t = tl.where(ay < 0.125, small, big)
        t = tl.where(y < 0, -t, t)
    return t


@triton.jit
def _capped(a, CAP: tl.constexpr, FAST: tl.constexpr):
    """(z, t): z = CAP * tanh(a / CAP) and t = tanh(a / CAP) (the backward's 1 - t^2)."""
    t = _tanh(a * (1.0 / CAP), FAST)  # the reciprocal is folded at compile time: no division
    return CAP * t, t


@triton.jit
def _accumulate(m, s, a, b, c, w, ARG: tl.constexpr):
    CAP: tl.constexpr = ARG[0]
    KEEP: tl.constexpr = ARG[1]
    SPREAD: tl.constexpr = ARG[2]
    inside = c >= 0
    z = a
    if CAP > 0:
        z, _ = _capped(a, CAP, ARG[3])
    z = tl.where(inside, z, float("-inf"))  # lanes past the row: no mass
    big = tl.maximum(m, tl.max(z, axis=1))
    shift = safe_shift(big)
    total = exp(m - shift) + tl.sum(exp(z - shift[:, None]), axis=1)
    q = KEEP * c + SPREAD
    # q == 0 (no smoothing, not the target) adds nothing, also where z is -inf (0 * -inf is NaN)
    t = tl.sum(tl.where(inside & (q != 0.0), q * z, 0.0), axis=1)
    return shift + log(total), s + t


@triton.jit
def _combine(m, s, m_parts, s_parts):
    big = tl.maximum(m, tl.max(m_parts, axis=1))
    shift = safe_shift(big)
    total = exp(m - shift) + tl.sum(exp(m_parts - shift[:, None]), axis=1)
    return shift + log(total), s + tl.sum(s_parts, axis=1)  # chunk order: the same bits every run


@triton.jit
def _finish(m, s, WIDTH: tl.constexpr, ARG: tl.constexpr):
    return m - s, m  # rstat: the row's loss L - T; apply: L


@triton.jit
def _apply(a, b, c, w, m, s, ARG: tl.constexpr):
    CAP: tl.constexpr = ARG[0]
    KEEP: tl.constexpr = ARG[1]
    SPREAD: tl.constexpr = ARG[2]
    if CAP > 0:
        z, t = _capped(a, CAP, ARG[3])
        g = (exp(z - s[:, None]) - (KEEP * c + SPREAD)) * w * (1.0 - t * t)
    else:
        g = (exp(a - s[:, None]) - (KEEP * c + SPREAD)) * w
    return g, g


@triton.jit
def _no_apply(a, b, c, w, m, s, ARG: tl.constexpr):  # never called: the loss-only op writes no row
    return a, a


FORWARD = RowOp("cross_entropy", None, _accumulate, _combine, _apply, a_fill=float("-inf"), has_b=False,
                finish=_finish, m_init=float("-inf"), args=True)  # fmt: skip
LOSS_ONLY = RowOp("cross_entropy_loss", None, _accumulate, _combine, _no_apply, a_fill=float("-inf"), has_b=False,
                  finish=_finish, m_init=float("-inf"), has_out=False, args=True)  # fmt: skip

# =============================================================================== plans
# Thresholds and where they come from: kernels/plans.py (CROSS_ENTROPY_POLICY).
POLICY = CROSS_ENTROPY_POLICY
LOSS_POLICY = CROSS_ENTROPY_LOSS_POLICY
_FORWARD_CALL = RowCall(FORWARD, POLICY)
_LOSS_CALL = RowCall(LOSS_ONLY, LOSS_POLICY)


def plan_for(x2d: torch.Tensor, force: str | None = None) -> tuple[RowPlan, int, int]:
    """(plan, vec, align) the eager path launches for logits ``x2d`` (gradient written over a
    buffer laid out like them)."""
    return _FORWARD_CALL.plan(x2d, None, x2d, force)  # type: ignore[arg-type]


# =============================================================================== eager path

_REDUCTIONS = ("mean", "sum", "none")


def _arg(
    softcap: float | None, label_smoothing: float, width: int, dtype: torch.dtype
) -> tuple[float, float, float, bool]:
    # the 4th: 16-bit logits take the fast tanh (their own rounding dwarfs its 2^-21)
    fast = dtype in (torch.float16, torch.bfloat16)
    return (float(softcap or 0.0), 1.0 - float(label_smoothing), float(label_smoothing) / width, fast)


def forward_rows(
    x2d: torch.Tensor,
    target: torch.Tensor,
    loss_rows: torch.Tensor,
    *,
    grad2d: torch.Tensor | None = None,
    row_scale: torch.Tensor | None = None,
    label_smoothing: float = 0.0,
    softcap: float | None = None,
    plan: RowPlan | str | None = None,
) -> RowPlan | None:
    """Per-row losses of logits ``x2d`` (``[rows, width]``, last dimension contiguous) into
    ``loss_rows`` (``[rows]``, fp32; fp64 for fp64 logits), not masked for ignored rows, and
    with ``grad2d`` the gradient ``row_scale[i] * (softmax - q)`` through the soft cap (it
    may be ``x2d`` itself: the in-place mode).  ``target`` is ``[rows]`` int64; a target
    outside ``[0, width)`` picks no column.  ``plan``: a kind to force, a whole
    :class:`RowPlan`, or ``None``.  Returns the plan used."""
    arg = _arg(softcap, label_smoothing, x2d.shape[1], x2d.dtype)
    if target.shape[0] > 1 and target.stride(0) != 1:
        target = target.contiguous()  # the kernels read target[row] at a unit stride
    if grad2d is None:
        op, call, out = LOSS_ONLY, _LOSS_CALL, x2d
        extras = RowExtras(rstat=loss_rows, index=target, arg=arg)
    else:
        if row_scale is None:
            raise ValueError("cross_entropy: the gradient needs row_scale")
        op, call, out = FORWARD, _FORWARD_CALL, grad2d
        extras = RowExtras(w=row_scale, w_per_row=True, rstat=loss_rows, index=target, arg=arg)
    if isinstance(plan, RowPlan):
        vec, align = row_layout((x2d, out))
        run_rows(op, plan, x2d, None, out, align, vec, extras)
        return plan
    return call(x2d, None, out, plan, extras)  # type: ignore[arg-type]


# The rows' bookkeeping (which are ignored, which targets are out of range, the scale of the
# gradient, the reduction) runs in two small kernels of our own around the row kernel: as
# torch ops it was about 17 launches of a few µs of host time each (target masks, wheres,
# sums, casts), several times the row kernel's own host cost.  The reduction sums in one
# program in a fixed order: the same bits every call.

_SMALL_BLOCK = 1024  # rows a program of the two bookkeeping kernels handles at a time
_NONE, _SUM, _MEAN = 0, 1, 2


@triton.jit
def _row_state(t_ptr, i, n_rows, ignore_index, width):
    """(valid, bad) for rows ``i``: not ignored; not ignored and out of ``[0, width)``."""
    t = tl.load(t_ptr + i, mask=i < n_rows, other=ignore_index)
    valid = t != ignore_index
    return valid, valid & ((t < 0) | (t >= width))


@triton.jit(do_not_specialize=["n_rows", "ignore_index", "width"])
def _row_scale_kernel(t_ptr, scale_ptr, n_rows: tl.int64, ignore_index: tl.int64, width: tl.int64,
                      MEAN: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    # One program: count the rows not ignored, then write each row's gradient scale: 0 for an
    # ignored row, NaN for a target out of range, else 1 (1 / count for mean).  Reads N
    # targets twice and writes N scales: nothing next to the [N, V] pass.
    offs = tl.arange(0, BLOCK).to(tl.int64)
    one = tl.full([], 1.0, scale_ptr.dtype.element_ty)
    inv = one
    if MEAN:
        count = tl.zeros([BLOCK], tl.int64)
        for start in range(0, n_rows, BLOCK):
            valid, _ = _row_state(t_ptr, start + offs, n_rows, ignore_index, width)
            count += valid.to(tl.int64)
        inv = one / tl.maximum(tl.sum(count, axis=0), 1).to(scale_ptr.dtype.element_ty)
    for start in range(0, n_rows, BLOCK):
        i = start + offs
        valid, bad = _row_state(t_ptr, i, n_rows, ignore_index, width)
        w = tl.where(bad, float("nan"), tl.where(valid, inv, 0.0))
        tl.store(scale_ptr + i, w.to(scale_ptr.dtype.element_ty), mask=i < n_rows)


@triton.jit(do_not_specialize=["n_rows", "ignore_index", "width"])
def _reduce_kernel(loss_ptr, t_ptr, out_ptr, n_rows: tl.int64, ignore_index: tl.int64, width: tl.int64,
                   REDUCTION: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    # A row's loss: 0 where ignored (whatever its logits held, as torch), NaN where its target
    # is out of range, else the row kernel's.  "none": one program per BLOCK rows writes them
    # in the output dtype; "sum" / "mean": one program adds them in a fixed order (and for
    # mean divides by the rows not ignored: 0 / 0 = NaN when every row is, as torch).
    offs = tl.arange(0, BLOCK).to(tl.int64)
    if REDUCTION == 0:
        i = tl.program_id(0).to(tl.int64) * BLOCK + offs
        valid, bad = _row_state(t_ptr, i, n_rows, ignore_index, width)
        v = tl.load(loss_ptr + i, mask=valid, other=0.0)  # an ignored row's loss is never read: 0
        v = tl.where(bad, float("nan"), v)
        tl.store(out_ptr + i, v.to(out_ptr.dtype.element_ty), mask=i < n_rows)
    else:
        total = tl.zeros([BLOCK], loss_ptr.dtype.element_ty)
        count = tl.zeros([BLOCK], tl.int64)
        for start in range(0, n_rows, BLOCK):
            i = start + offs
            valid, bad = _row_state(t_ptr, i, n_rows, ignore_index, width)
            v = tl.load(loss_ptr + i, mask=valid, other=0.0)
            total += tl.where(bad, float("nan"), v)
            count += valid.to(tl.int64)
        result = tl.sum(total, axis=0)
        if REDUCTION == 2:
            result = result / tl.sum(count, axis=0).to(loss_ptr.dtype.element_ty)
        tl.store(out_ptr, result.to(out_ptr.dtype.element_ty))


_ROW_SCALE = FastKernel(_row_scale_kernel)
_REDUCE = FastKernel(_reduce_kernel)


def _bookkeeping(kernel: FastKernel, grid: int, tensors: tuple[torch.Tensor, ...], n_rows: int,
                 ignore_index: int, width: int, mode: int) -> None:  # fmt: skip
    ref = tensors[0]
    if ref.is_cuda and ref.device.index != current_device():  # Triton launches on the current GPU
        with torch.cuda.device(ref.device):
            return _bookkeeping(kernel, grid, tensors, n_rows, ignore_index, width, mode)
    index = ref.device.index if ref.is_cuda else -1
    key = (index, *[(t.dtype, t.data_ptr() % 16 == 0) for t in tensors])
    kernel.launch(key, index, (grid, 1, 1), (*tensors, n_rows, ignore_index, width), (mode, _SMALL_BLOCK), 4)
    return None


def _forward(
    x: torch.Tensor, target: torch.Tensor, ignore_index: int, reduction: str, label_smoothing: float,
    softcap: float | None, plan: str | None, want_grad: bool, grad_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """(loss, grad) for 2-D logits ``x`` (last dimension contiguous) and 1-D targets; ``grad``
    (``None`` unless ``want_grad``) is ``grad_out`` when given (``x`` itself: in place).

    A target out of range (not ``ignore_index``) makes its row's loss and gradient NaN: torch
    raises on the CPU and asserts on the GPU; a check here would cost a host sync per call."""
    n_rows, width = x.shape
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    if target.shape[0] > 1 and target.stride(0) != 1:
        target = target.contiguous()  # the kernels read target[row] at a unit stride
    loss_rows = torch.empty(n_rows, device=x.device, dtype=acc)
    grad = None
    if want_grad:
        grad = torch.empty_like(x, memory_format=torch.contiguous_format) if grad_out is None else grad_out
        scale = torch.empty(n_rows, device=x.device, dtype=acc)
        _bookkeeping(_ROW_SCALE, 1, (target, scale), n_rows, ignore_index, width, int(reduction == "mean"))
        forward_rows(x, target, loss_rows, grad2d=grad, row_scale=scale, label_smoothing=label_smoothing,
                     softcap=softcap, plan=plan)  # fmt: skip
    else:
        forward_rows(x, target, loss_rows, label_smoothing=label_smoothing, softcap=softcap, plan=plan)
    if reduction == "none":
        loss = torch.empty(n_rows, device=x.device, dtype=x.dtype)
        _bookkeeping(_REDUCE, cdiv(n_rows, _SMALL_BLOCK), (loss_rows, target, loss), n_rows, ignore_index, width,
                     _NONE)  # fmt: skip
    else:
        loss = torch.empty((), device=x.device, dtype=x.dtype)
        mode = _SUM if reduction == "sum" else _MEAN
        _bookkeeping(_REDUCE, 1, (loss_rows, target, loss), n_rows, ignore_index, width, mode)
    return loss, grad


@triton.jit(do_not_specialize=["n_rows", "stride", "blocks"])
def _scale_rows_kernel(grad_ptr, g_ptr, n_rows: tl.int64, stride: tl.int64, blocks: tl.int64,
                       WIDTH: tl.constexpr, BLOCK: tl.constexpr, VEC: tl.constexpr, SCALAR: tl.constexpr):  # fmt: skip
    # grad[row] *= g[row] (SCALAR: g[0] for every row), in place, in fp32; a row whose factor
    # is exactly 1 is left alone (no traffic: loss.backward() costs nothing).  A persistent
    # grid walks the (row, block) tiles: with one program per tile, loss.backward() at
    # 8192 x 128256 launched 262,144 programs only to read g = 1 and leave, about 200 us of
    # the training step (the row kernel alone took 1544 us, the study's step 1755; notes/
    # 2026-12-02-probe-looped-persist-76c6e5c.log); on this grid the step took 1579 us (run
    # cross_entropy-20261202T115638Z-1f2a9e2).  SCALAR and g = 1: every program leaves after
    # one load.  VEC > 1: the host checked that the base is 16-byte aligned and the
    # stride a multiple of VEC elements; multiple_of shows it to the compiler, which otherwise
    # reads a runtime stride's rows one element at a time.
    pid = tl.program_id(0).to(tl.int64)
    tiles = n_rows * blocks
    g0 = tl.load(g_ptr)
    if SCALAR:
        tiles = tl.where(g0 == 1.0, 0, tiles)
    for tile in tl.range(pid, tiles, tl.num_programs(0)):
        row = tile // blocks
        cols = (tile % blocks) * BLOCK + tl.arange(0, BLOCK)
        g = g0 if SCALAR else tl.load(g_ptr + row)  # (a static choice of the jit)
        if g != 1.0:
            start = row * stride
            if VEC > 1:
                start = tl.multiple_of(start, VEC)
            ptrs = grad_ptr + start + cols
            v = tl.load(ptrs, mask=cols < WIDTH, other=0.0)
            if v.dtype == tl.float64:  # noqa: SIM108 (a static branch of the jit)
                v = v * g
            else:
                v = (v.to(tl.float32) * g.to(tl.float32)).to(v.dtype)
            tl.store(ptrs, v, mask=cols < WIDTH)


_SCALE_PROGRAMS_PER_SM = 8  # the scale kernel's persistent grid: 32 warps an SM at 4 a program


def scale_rows_(grad: torch.Tensor, dloss: torch.Tensor) -> torch.Tensor:
    """``grad *= dloss`` in place: ``grad`` ``[rows, width]`` with a unit column stride (its
    rows may lie any distance apart; ValueError otherwise), ``dloss`` a scalar (mean, sum) or
    ``[rows]`` (none)."""
    n_rows, width = grad.shape
    if n_rows == 0 or width == 0:
        return grad
    if width > 1 and grad.stride(1) != 1:
        raise ValueError(f"scale_rows_: grad's columns must be adjacent (strides {tuple(grad.stride())})")
    g = dloss.to(grad.dtype if grad.dtype == torch.float64 else torch.float32).contiguous()
    block = min(4096, next_power_of_2(width))
    blocks = cdiv(width, block)
    if grad.is_cuda and grad.device.index != current_device():
        with torch.cuda.device(grad.device):
            return scale_rows_(grad, dloss)
    # Through the cached launcher (Triton's own kernel[grid] path costs tens of µs of host time).
    index = grad.device.index if grad.is_cuda else -1
    key = (index, grad.dtype, g.dtype, grad.data_ptr() % 16 == 0, g.data_ptr() % 16 == 0)
    args = (grad, g, n_rows, grad.stride(0), blocks)
    vec = row_vec((grad,))
    programs = min(n_rows * blocks, _SCALE_PROGRAMS_PER_SM * sm_count(grad.device))
    _SCALE_ROWS.launch(key, index, (programs, 1, 1), args, (width, block, vec, g.dim() == 0), 4)
    return grad


_SCALE_ROWS = FastKernel(_scale_rows_kernel)


class _CrossEntropyFunction(torch.autograd.Function):
    """The eager autograd path: the forward writes the gradient (into a new buffer, or over
    the logits with ``inplace``) and the backward scales it by the upstream gradient."""

    @staticmethod
    def forward(ctx, x, target, ignore_index, reduction, label_smoothing, softcap, plan, inplace):  # type: ignore[no-untyped-def,override]
        loss, grad = _forward(x, target, ignore_index, reduction, label_smoothing, softcap, plan, True,
                              x if inplace else None)  # fmt: skip
        ctx.save_for_backward(grad)
        ctx.reduction, ctx.done = reduction, False
        return loss

    @staticmethod
    def backward(ctx, dloss):  # type: ignore[no-untyped-def,override]
        if ctx.done:
            raise RuntimeError(
                "cross_entropy: backward ran a second time (retain_graph); the gradient was scaled in place "
                "by the first and handed to autograd"
            )
        ctx.done = True
        (grad,) = ctx.saved_tensors
        scale_rows_(grad, dloss)
        return grad, None, None, None, None, None, None, None


# =============================================================================== registered op
# What torch.compile, torch.export, FakeTensor and functorch see: an opaque op returning the
# loss and (when asked) the gradient as a new tensor (a custom op may neither alias nor, with
# autograd, mutate its input: under the tracer the gradient is never written in place), and
# a backward in plain torch ops that the compiler fuses.


@torch.library.custom_op("labnotes::cross_entropy", mutates_args=())
def _cross_entropy_op(
    x: torch.Tensor, target: torch.Tensor, ignore_index: int, reduction: str, label_smoothing: float,
    softcap: float | None, plan: str | None, want_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    """(loss, grad); grad is empty (shape [0]) unless ``want_grad``."""
    x = x if x.shape[-1] <= 1 or x.stride(-1) == 1 else x.contiguous()
    loss, grad = _forward(x, target, ignore_index, reduction, label_smoothing, softcap, plan, want_grad)
    return loss, (grad if grad is not None else x.new_empty(0))


@_cross_entropy_op.register_fake
def _(
    x: torch.Tensor, target: torch.Tensor, ignore_index: int, reduction: str, label_smoothing: float,
    softcap: float | None, plan: str | None, want_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor]:  # fmt: skip
    shape = (x.shape[0],) if reduction == "none" else ()
    loss = torch.empty(shape, device=x.device, dtype=x.dtype)
    grad = torch.empty(x.shape, device=x.device, dtype=x.dtype) if want_grad else x.new_empty(0)
    return loss, grad


def _setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    ctx.reduction, ctx.want_grad = inputs[3], inputs[7]
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(output[1])


def _op_backward(ctx, dloss: torch.Tensor, _dgrad: torch.Tensor):  # type: ignore[no-untyped-def]
    if not ctx.want_grad:
        raise RuntimeError("cross_entropy: the op was called with want_grad=False; no gradient was computed")
    (grad,) = ctx.saved_tensors
    g = dloss.unsqueeze(-1) if ctx.reduction == "none" else dloss
    return (grad * g).to(grad.dtype), None, None, None, None, None, None, None


_cross_entropy_op.register_autograd(_op_backward, setup_context=_setup_context)

# =============================================================================== functional

FN = "cross_entropy"


def check_args(
    x: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None, ignore_index: int, reduction: str,
    label_smoothing: float, softcap: float | None, plan: str | None,
) -> None:  # fmt: skip
    """Validate :func:`cross_entropy`'s arguments (raises; see there)."""
    check_tensor(FN, "input", x)
    check_tensor(FN, "target", target)
    if weight is not None:
        raise NotImplementedError(
            "cross_entropy: weight= (per-class weights) is not supported; use torch.nn.functional.cross_entropy"
        )
    check_float(FN, "input", x)
    if target.is_floating_point():
        raise NotImplementedError(
            "cross_entropy: class-probability targets (a floating target) are not supported; pass class indices"
        )
    if target.dtype != torch.int64:
        raise TypeError(f"cross_entropy: target has dtype {target.dtype}; expected int64 class indices")
    check_device(FN, "input", x)
    check_same_device(FN, "target", target, "input", x)
    if x.dim() == 0:
        raise ValueError("cross_entropy: input must have a class dimension: [C], [N, C] or [N, C, d1, ...]")
    expected = () if x.dim() == 1 else (x.shape[0], *x.shape[2:])
    if tuple(target.shape) != tuple(expected):
        raise ValueError(
            f"cross_entropy: target has shape {list(target.shape)}; input of shape {list(x.shape)} needs "
            f"{list(expected)} (class dimension 1 removed)"
        )
    check_loss_options(FN, ignore_index, reduction, label_smoothing, softcap)
    check_plan(FN, plan)


def check_loss_options(
    fn: str, ignore_index: int, reduction: str, label_smoothing: float, softcap: float | None
) -> None:
    """The loss options :func:`cross_entropy` and the fused linear cross-entropy share (raises
    TypeError or ValueError naming ``fn`` and the argument)."""
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{fn}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"{fn}: ignore_index must be an int, got {ignore_index!r}")
    if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)):
        raise TypeError(f"{fn}: label_smoothing must be a float, got {label_smoothing!r}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{fn}: label_smoothing must be in [0, 1], got {label_smoothing}")
    number = isinstance(softcap, (int, float)) and not isinstance(softcap, bool)
    if softcap is not None and not (number and softcap > 0 and math.isfinite(softcap)):
        raise ValueError(f"{fn}: softcap must be a positive finite float or None, got {softcap!r}")


def cross_entropy(
    input: torch.Tensor,
    target: torch.Tensor,
    weight: torch.Tensor | None = None,
    size_average: bool | None = None,
    ignore_index: int = -100,
    reduce: bool | None = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    *,
    softcap: float | None = None,
    inplace_backward: bool = False,
    plan: str | None = None,
) -> torch.Tensor:
    """``torch.nn.functional.cross_entropy`` for class-index targets, with an optional logit
    soft cap; differentiable and compilable.  Positional arguments are torch's.

    Args:
        input: logits ``[C]``, ``[N, C]`` or ``[N, C, d1, ...]`` (the class dimension is
            moved last with one copy) on a CUDA GPU (the kernels run on its device) or on
            the CPU under ``TRITON_INTERPRET=1``; float16, bfloat16, float32 or float64.
        target: int64 class indices, ``input``'s shape without dimension 1.  A target
            outside ``[0, C)`` other than ``ignore_index`` is not checked on the host (that
            would cost a sync): its row's loss and gradient are NaN, so the loss shows it.
        weight: must be ``None`` (NotImplementedError otherwise).
        size_average, reduce: torch's deprecated pair, mapped onto ``reduction`` as torch does.
        ignore_index: rows with this target add 0 to the loss and get a zero gradient.
        reduction: ``"mean"`` (over the rows not ignored; NaN when every row is ignored, as
            torch), ``"sum"`` or ``"none"`` (per-row losses, ``target``'s shape).
        label_smoothing: ``eps`` in [0, 1], torch's formula (ignored rows excluded from it too).
        softcap: ``z = softcap * tanh(x / softcap)`` before the softmax (Gemma's final logit
            soft cap), with its derivative in the gradient; ``None`` for none.
        inplace_backward: write the gradient over ``input`` (2-D, contiguous rows) instead
            of a new buffer: no second ``[N, C]`` tensor, but ``input`` holds the gradient
            after this call.  Only on the eager path (under ``torch.compile``, FakeTensor or
            functorch the op returns the gradient as a new tensor and ``input`` is untouched).
        plan: ``None`` lets the planner choose; ``"block"``, ``"looped"`` or ``"split"``
            forces one (as for softmax).

    Returns: the loss in ``input``'s dtype (a scalar, or per-row with ``"none"``); accumulated
    in float32 (float64 for float64).  Non-finite logits give torch's results: a row holding
    NaN or +inf has a NaN loss and gradient, a -inf logit at the target gives +inf (and with
    label smoothing a -inf logit anywhere does).  The gradient is computed by the forward;
    the backward only scales it and may run once.

    Precision on logits of large magnitude: a row's log-sum-exp is carried as one number of
    the accumulation dtype, so the loss and each probability are off by a few half-ulps of
    ``|lse|`` (float32, measured on the CPU: 3e-5 at logits of 1e3, 2e-3 at 1e5, 0.5 at 1e7;
    at 1e8 the log of the row's sum is lost beside the max and a loss of ``log C`` reads 0).
    torch subtracts the row max before the log and stays exact there: for float32 logits
    that large, pass float64 logits (the log-sum-exp is then carried in float64: 1e-8 at 1e8).

    Raises:
        NotImplementedError: ``weight`` given, or floating (class-probability) targets.
        TypeError: an unsupported dtype of ``input`` or ``target``, a non-int
            ``ignore_index``, a non-number ``label_smoothing``.
        ValueError: shapes that do not match, devices that differ, ``input`` on the CPU
            outside the interpreter, an unknown ``reduction`` or ``plan``, ``label_smoothing``
            outside [0, 1], a ``softcap`` that is not a positive finite number.
    """
    if size_average is not None or reduce is not None:
        reduction = torch.nn._reduction.legacy_get_string(size_average, reduce)
    check_args(input, target, weight, ignore_index, reduction, label_smoothing, softcap, plan)
    x, t = input, target
    if x.dim() == 1:
        x, t = x.unsqueeze(0), t.unsqueeze(0)
    elif x.dim() > 2:
        x, t = x.movedim(1, -1).reshape(-1, x.shape[1]), t.reshape(-1)
    if x.shape[-1] > 1 and x.stride(-1) != 1:
        x = x.contiguous()
    eps = float(label_smoothing)
    cap = None if softcap is None else float(softcap)
    if x.shape[0] == 0 or x.shape[1] == 0:
        loss = _empty_case(x, t, ignore_index, reduction, eps, cap, plan)
    elif eager_path(x):
        if torch.is_grad_enabled() and x.requires_grad:
            # Logits this call copied (class dimension moved, strided rows) are its own to overwrite.
            owned = x.untyped_storage().data_ptr() != input.untyped_storage().data_ptr()
            loss = _CrossEntropyFunction.apply(x, t, ignore_index, reduction, eps, cap, plan,
                                               inplace_backward or owned)  # fmt: skip
        else:
            loss = _forward(x, t, ignore_index, reduction, eps, cap, plan, False)[0]
    else:
        want_grad = torch.is_grad_enabled() and x.requires_grad
        loss = _cross_entropy_op(x, t, ignore_index, reduction, eps, cap, plan, want_grad)[0]
    if reduction == "none":
        return loss.reshape(target.shape)
    return loss


def _empty_case(
    x: torch.Tensor, t: torch.Tensor, ignore_index: int, reduction: str, eps: float, cap: float | None,
    plan: str | None,
) -> torch.Tensor:  # fmt: skip
    # No rows or no classes: torch's results through differentiable torch ops (no kernel).
    if x.shape[0] == 0:
        if reduction == "none":
            return x.sum(-1)
        total = x.sum() * 0.0
        return total if reduction == "sum" else total / 0.0
    raise ValueError("cross_entropy: input has 0 classes")
