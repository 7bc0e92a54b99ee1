"""Fused linear + cross-entropy: ``cross_entropy(input @ weight.T + bias, target)`` without
the full ``[N, V]`` logits.

The lm-head projection runs over chunks of tokens.  Each chunk's logits ``[C, V]`` (C rows of
the input) exist once, in the input's dtype: cross-entropy's row kernel
(:func:`kernels.cross_entropy.forward_rows`) reads them once for the per-row loss and writes
the gradient over the logits in place, and two products turn that gradient into the
chunk's input gradient (``dlogits @ weight``) and its share of the weight gradient
(``weight_grad += dlogits.T @ input_chunk``, accumulated in the weight's dtype by cuBLAS,
fp32 inside each product).  Memory beyond the inputs and the gradients: one chunk of
logits, plus O(N) per-row statistics.  The chunk (:func:`chunk_rows`) holds a quarter of the
weight's elements (``C = H / 4``): fewer chunks mean fewer passes of the weight gradient's
accumulation over its ``[V, H]`` buffer, the cost this schedule adds to the unfused step.

Two schedules, the same arithmetic:

* ``reduction`` mean or sum, eager: the upstream gradient is one scalar, so the forward
  computes the gradients as it goes and the backward scales them (rows whose factor is 1,
  i.e. ``loss.backward()``, cost no traffic).  No logits are kept between the two.
* ``reduction="none"`` (a per-token upstream gradient), and under ``torch.compile`` for
  every reduction: the forward computes losses only and the backward recomputes each
  chunk's logits with the row scale ``dloss[i]``.  One more product per chunk, and the
  per-token gradient is exact (computing it in the forward with an assumed upstream of 1
  is the public bug this avoids).

Reading order: the chunk loop, the autograd function, the registered ops, the functional.
"""

from __future__ import annotations

import math

import torch

from kernels._checks import check_device, check_float, check_same_device, check_tensor, eager_path
from kernels.cross_entropy import check_loss_options, forward_rows, scale_rows_
from kernels.plans import next_power_of_2

FN = "linear_cross_entropy"


def chunk_rows(n: int, hidden: int, vocab: int) -> int:
    """Rows per chunk of logits, at most ``n``: the larger of ``hidden // 4`` (rounded down to
    a power of two) and the power of two near ``n * hidden / vocab``.

    Why: every chunk's weight-gradient product reads and writes the whole ``[V, H]``
    gradient again, so ``ceil(N / C)`` chunks cost ``ceil(N / C) * 2 * V * H`` elements of
    traffic (and as many roundings of the accumulated gradient in its dtype).  With
    ``C = H / 4`` a chunk of logits ``[C, V]`` is a quarter of the weight gradient, which the
    step must hold anyway, and the re-reads total ``8 * N * V`` elements: about what the
    unfused step moves through its ``[N, V]`` logits.  Where the vocabulary is small
    (``V < 4 * N``-ish), the chunk about the input's size (``C ~ N * H / V``, Liger-Kernel's
    rule) is the larger and is taken."""
    quarter = 1 << max(0, (max(1, hidden // 4)).bit_length() - 1)
    near_input = next_power_of_2(max(1, math.ceil(n * hidden / max(vocab, 1))))
    return max(1, min(n, max(quarter, near_input)))


# =============================================================================== the chunk loop


def _row_scale(
    target: torch.Tensor, vocab: int, ignore_index: int, reduction: str, dloss: torch.Tensor | None,
    acc: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """(valid, bad, scale): rows not ignored, rows whose target is out of range (NaN, as
    cross_entropy), and each row's factor on ``softmax - q`` (in ``acc``, on the device: no sync)."""
    valid = target != ignore_index
    bad = valid & ((target < 0) | (target >= vocab))
    scale = valid.to(acc)
    if reduction == "mean":
        scale = scale / valid.sum().clamp_min(1)
    if dloss is not None:
        scale = scale * dloss.to(acc)
    return valid, bad, torch.where(bad, torch.nan, scale)


Needs = tuple[bool, bool, bool]  # which of the input, weight and bias gradients to compute
_NONE: Needs = (False, False, False)


def _chunks(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, t: torch.Tensor, ignore_index: int, reduction: str,
    eps: float, cap: float | None, chunk: int, needs: Needs = _NONE, dloss: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
    """(per-row losses masked as torch's, input grad, weight grad, bias grad) for 2-D ``x``
    ``[N, H]``, ``w`` ``[V, H]``: each gradient only where ``needs`` asks, for an upstream
    gradient ``dloss`` (``None``: 1).  Losses in fp32 (fp64 for fp64)."""
    n, vocab = x.shape[0], w.shape[0]
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    grads = any(needs)
    valid, bad, scale = _row_scale(t, vocab, ignore_index, reduction, dloss, acc)
    loss_rows = torch.empty(n, device=x.device, dtype=acc)
    # Row-major whatever the inputs' layout (a transposed weight, say): the backward scales the
    # gradients row by row in place (scale_rows_ reads each row at a unit column stride).
    gx = torch.empty_like(x, memory_format=torch.contiguous_format) if needs[0] else None
    gw = torch.zeros_like(w, memory_format=torch.contiguous_format) if needs[1] else None
    gb = torch.zeros(vocab, device=x.device, dtype=acc) if needs[2] and b is not None else None
    wt = w.t()
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        xc = x[start:stop]
        logits = torch.mm(xc, wt) if b is None else torch.addmm(b, xc, wt)  # [C, V], the only one alive
        if not grads:
            forward_rows(logits, t[start:stop], loss_rows[start:stop], label_smoothing=eps, softcap=cap)
        else:
            forward_rows(logits, t[start:stop], loss_rows[start:stop], grad2d=logits, row_scale=scale[start:stop],
                         label_smoothing=eps, softcap=cap)  # fmt: skip
            if gx is not None:
                torch.mm(logits, w, out=gx[start:stop])
            if gw is not None:
                gw.addmm_(logits.t(), xc)
            if gb is not None:
                gb += logits.sum(0, dtype=acc)
        # Freed before the next chunk's product allocates its own: otherwise two chunks of
        # logits are alive at the peak.
        del logits
    loss_rows = torch.where(valid, loss_rows, 0.0)  # an ignored row's loss is 0 (torch)
    loss_rows = torch.where(bad, torch.nan, loss_rows)
    return loss_rows, gx, gw, (gb.to(x.dtype) if gb is not None else None)


def _reduce(loss_rows: torch.Tensor, valid_count: torch.Tensor, reduction: str, dtype: torch.dtype) -> torch.Tensor:
    if reduction == "none":
        return loss_rows.to(dtype)
    if reduction == "sum":
        return loss_rows.sum().to(dtype)
    return (loss_rows.sum() / valid_count).to(dtype)  # every row ignored: 0 / 0 = NaN, as torch


# =============================================================================== autograd (eager)


class _LinearCrossEntropyFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b, t, ignore_index, reduction, eps, cap, chunk):  # type: ignore[no-untyped-def,override]
        needs = (ctx.needs_input_grad[0], ctx.needs_input_grad[1], b is not None and ctx.needs_input_grad[2])
        early = reduction != "none"  # a scalar upstream gradient: the gradients now, scaled later
        loss_rows, gx, gw, gb = _chunks(x, w, b, t, ignore_index, reduction, eps, cap, chunk, needs if early else _NONE)
        ctx.args, ctx.needs, ctx.early = (ignore_index, reduction, eps, cap, chunk), needs, early
        if early:
            ctx.save_for_backward(gx, gw, gb)
        else:
            ctx.save_for_backward(x, w, b, t)
        return _reduce(loss_rows, (t != ignore_index).sum(), reduction, x.dtype)

    @staticmethod
    def backward(ctx, dloss):  # type: ignore[no-untyped-def,override]
        if ctx.early:
            gx, gw, gb = ctx.saved_tensors
            for g in (gx, gw, gb):
                if g is not None:
                    scale_rows_(g.view(-1, g.shape[-1]) if g.dim() > 1 else g.view(1, -1), dloss)
        else:
            x, w, b, t = ctx.saved_tensors
            _, gx, gw, gb = _chunks(x, w, b, t, *ctx.args, needs=ctx.needs, dloss=dloss)
        return gx, gw, gb, None, None, None, None, None, None


# =============================================================================== registered ops
# What torch.compile traces: the loss-only forward and a backward op that recomputes the
# chunks with the upstream gradient (one schedule for every reduction; no aliasing, no
# mutation of inputs).


@torch.library.custom_op("labnotes::linear_cross_entropy", mutates_args=())
def _lce_op(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, t: torch.Tensor, ignore_index: int, reduction: str,
    eps: float, cap: float | None, chunk: int,
) -> torch.Tensor:  # fmt: skip
    loss_rows = _chunks(x, w, b, t, ignore_index, reduction, eps, cap, chunk)[0]
    return _reduce(loss_rows, (t != ignore_index).sum(), reduction, x.dtype)


@_lce_op.register_fake
def _(x, w, b, t, ignore_index, reduction, eps, cap, chunk):  # type: ignore[no-untyped-def]
    shape = (x.shape[0],) if reduction == "none" else ()
    return torch.empty(shape, device=x.device, dtype=x.dtype)


@torch.library.custom_op("labnotes::linear_cross_entropy_backward", mutates_args=())
def _lce_backward_op(
    dloss: torch.Tensor, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, t: torch.Tensor,
    ignore_index: int, reduction: str, eps: float, cap: float | None, chunk: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """(input grad, weight grad, bias grad; the last empty without a bias)."""
    needs = (True, True, b is not None)
    _, gx, gw, gb = _chunks(x, w, b, t, ignore_index, reduction, eps, cap, chunk, needs, dloss)
    return gx, gw, (gb if gb is not None else x.new_empty(0))  # type: ignore[return-value]


@_lce_backward_op.register_fake
def _(dloss, x, w, b, t, ignore_index, reduction, eps, cap, chunk):  # type: ignore[no-untyped-def]
    gb = torch.empty_like(b) if b is not None else x.new_empty(0)
    row_major = torch.contiguous_format
    return torch.empty_like(x, memory_format=row_major), torch.empty_like(w, memory_format=row_major), gb


def _setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    x, w, b, t, *rest = inputs
    ctx.save_for_backward(x, w, b, t)
    ctx.rest = rest


def _op_backward(ctx, dloss):  # type: ignore[no-untyped-def]
    x, w, b, t = ctx.saved_tensors
    gx, gw, gb = _lce_backward_op(dloss, x, w, b, t, *ctx.rest)
    return gx, gw, (gb if b is not None else None), None, None, None, None, None, None


_lce_op.register_autograd(_op_backward, setup_context=_setup_context)


# =============================================================================== functional


def check_args(
    x: torch.Tensor, w: torch.Tensor, target: torch.Tensor, b: torch.Tensor | None, ignore_index: int,
    reduction: str, label_smoothing: float, softcap: float | None, chunk_size: int | None,
) -> None:  # fmt: skip
    """Validate :func:`linear_cross_entropy`'s arguments (raises; see there)."""
    check_tensor(FN, "input", x)
    check_tensor(FN, "weight", w)
    check_tensor(FN, "target", target)
    check_tensor(FN, "bias", b, optional=True)
    check_float(FN, "input", x)
    check_device(FN, "input", x)
    for name, t in (("weight", w), ("target", target), ("bias", b)):
        if t is not None:
            check_same_device(FN, name, t, "input", x)
    if w.dtype != x.dtype or (b is not None and b.dtype != x.dtype):
        raise TypeError(f"{FN}: weight and bias must have input's dtype {x.dtype}")
    if x.dim() < 1 or w.dim() != 2 or w.shape[1] != x.shape[-1]:
        raise ValueError(
            f"{FN}: weight must be [V, H] with H = input.shape[-1]; got input {list(x.shape)}, weight {list(w.shape)}"
        )
    if w.shape[0] == 0:
        raise ValueError(f"{FN}: weight has 0 classes")
    if b is not None and tuple(b.shape) != (w.shape[0],):
        raise ValueError(f"{FN}: bias must be [V] = [{w.shape[0]}], got {list(b.shape)}")
    if target.dtype != torch.int64:
        raise TypeError(f"{FN}: target has dtype {target.dtype}; expected int64 class indices")
    if tuple(target.shape) != tuple(x.shape[:-1]):
        raise ValueError(
            f"{FN}: target has shape {list(target.shape)}; input {list(x.shape)} needs {list(x.shape[:-1])}"
        )
    check_loss_options(FN, ignore_index, reduction, label_smoothing, softcap)
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"{FN}: chunk_size must be a positive int or None, got {chunk_size!r}")


def linear_cross_entropy(
    input: torch.Tensor,
    weight: torch.Tensor,
    target: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    ignore_index: int = -100,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
    softcap: float | None = None,
    chunk_size: int | None = None,
) -> torch.Tensor:
    """``F.cross_entropy(F.linear(input, weight, bias), target, ...)`` without the full logits;
    differentiable (input, weight and bias) and compilable.

    Args:
        input: hidden states ``[..., H]`` (float16, bfloat16, float32 or float64) on a CUDA
            GPU (the kernels run on its device) or on the CPU under ``TRITON_INTERPRET=1``.
        weight: the lm head ``[V, H]`` (``nn.Linear``'s layout), input's dtype and device.
        target: int64 class indices, ``input.shape[:-1]``.
        bias: ``[V]`` or ``None``.
        ignore_index, reduction, label_smoothing, softcap: as :func:`kernels.cross_entropy`
            (``reduction="none"`` returns ``target``'s shape, and its backward takes a
            per-token upstream gradient).
        chunk_size: tokens per chunk of logits; ``None`` chooses :func:`chunk_rows`.

    Returns: the loss in input's dtype; the logits are accumulated in fp32 by each product
    and rounded to input's dtype once per chunk (as ``F.linear`` would round them).  The
    weight gradient is accumulated over the ``ceil(N / chunk)`` chunks in the weight's dtype
    (fp32 inside each product): one rounding per chunk, where the unfused step rounds once.  Peak
    memory above the inputs: the gradients plus one ``[chunk, V]`` block of logits.

    Raises:
        TypeError: a non-tensor argument, an unsupported or mismatched dtype, a non-int64
            target, a non-int ``ignore_index``, a non-number ``label_smoothing``.
        ValueError: shapes that do not match, devices that differ, CPU tensors outside the
            interpreter, an unknown ``reduction``, ``label_smoothing`` outside [0, 1], a
            ``softcap`` that is not a positive finite number, a bad ``chunk_size``.
    """
    check_args(input, weight, target, bias, ignore_index, reduction, label_smoothing, softcap, chunk_size)
    x = input.reshape(-1, input.shape[-1])
    t = target.reshape(-1)
    n, hidden, vocab = x.shape[0], x.shape[1], weight.shape[0]
    eps = float(label_smoothing)
    cap = None if softcap is None else float(softcap)
    if n == 0:  # torch's results through differentiable torch ops (no kernel)
        logits = torch.nn.functional.linear(x, weight, bias)
        loss = torch.nn.functional.cross_entropy(logits, t, ignore_index=ignore_index, reduction=reduction)
        return loss.reshape(target.shape) if reduction == "none" else loss
    chunk = chunk_size or chunk_rows(n, hidden, vocab)
    if x.stride(-1) != 1:
        x = x.contiguous()
    needs_grad = torch.is_grad_enabled() and any(v is not None and v.requires_grad for v in (x, weight, bias))
    if eager_path(x, weight, bias, t):
        if needs_grad:
            loss = _LinearCrossEntropyFunction.apply(x, weight, bias, t, ignore_index, reduction, eps, cap, chunk)
        else:
            loss_rows = _chunks(x, weight, bias, t, ignore_index, reduction, eps, cap, chunk)[0]
            loss = _reduce(loss_rows, (t != ignore_index).sum(), reduction, x.dtype)
    else:
        loss = _lce_op(x, weight, bias, t, ignore_index, reduction, eps, cap, chunk)
    return loss.reshape(target.shape) if reduction == "none" else loss
