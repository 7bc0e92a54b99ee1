"""Vector add, ``out = a + alpha * b``: the simplest memory-bound kernel, in block-size variants.

Memory traffic: two reads and one write per element; nothing else.  A program covers
``block`` elements; every program but the last covers a whole block and runs with no mask,
so its loads and stores are 16-byte vectors (a mask against a runtime length that is not
a multiple of the vector would split them into single elements); only the last program is
masked.  Offsets are 64-bit: tensors past 2^31 elements index correctly.  ``block`` is a
compile-time constant (``BLOCKS``: the variants the block-size study times); the length is
a runtime argument, so a new length never recompiles.

The backward passes the gradient through: ``da = dy``, ``db = alpha * dy`` (summed back to
an input's shape where it was broadcast), with no kernel for ``alpha = 1``.

Reading order: the kernel, the eager path, autograd, the ``torch.library`` op and the
public functional.
"""

from __future__ import annotations

import numbers

import torch
import triton
import triton.language as tl

from kernels import _checks
from kernels._checks import (
    ACCEPTED,
    FLOAT_NAMES,
    _functorch_active,
    _is_compiling,
    check_device,
    check_same_device,
    check_tensor,
    eager_path,
)
from kernels._launch import FastKernel, current_device
from kernels.plans import cdiv

BLOCKS = (1024, 2048, 4096, 8192)  # elements per program: the block-size variants
DEFAULT_BLOCK = 4096  # 8 KB of bf16 per input per program; the study checks this choice
_BLOCK_CHOICES = (None, *BLOCKS)  # what add's block= accepts (a tuple: no hashing of what a caller passes)


@triton.jit(do_not_specialize=["n"])
def add_kernel(a_ptr, b_ptr, out_ptr, n: tl.int64, alpha, BLOCK: tl.constexpr, HAS_ALPHA: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:  # a whole block: unmasked 16-byte vectors
        a = tl.load(a_ptr + offs)
        b = tl.load(b_ptr + offs)
    else:
        a = tl.load(a_ptr + offs, mask=offs < n)
        b = tl.load(b_ptr + offs, mask=offs < n)
    acc = tl.float64 if a.dtype == tl.float64 else tl.float32
    if HAS_ALPHA:  # noqa: SIM108 (a static branch of the jit)
        v = a.to(acc) + alpha * b.to(acc)
    else:
        v = a.to(acc) + b.to(acc)
    v = v.to(out_ptr.dtype.element_ty)
    if start + BLOCK <= n:
        tl.store(out_ptr + offs, v)
    else:
        tl.store(out_ptr + offs, v, mask=offs < n)


def _warps(block: int) -> int:
    return 4 if block <= 2048 else 8


# Launched through FastKernel: Triton's own launch path cost 38-42 µs of host time per call
# on the H200 machine, at any length, against torch.add's 6.5 (notes/probe_rowsum_host.py,
# 2026-12-02).  The key holds what the compiled code depends on besides the constexprs: the
# device, the three pointers' dtypes and their 16-byte alignment (n is int64 and never
# specialized; alpha is an fp32 argument).
_ADD = FastKernel(add_kernel)


def add_flat(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, alpha: float = 1.0, block: int | None = None) -> None:
    """``out = a + alpha * b`` over contiguous tensors of one shape and dtype (any device the
    interpreter or a GPU runs)."""
    n = out.numel()
    if n == 0:
        return
    block = block or DEFAULT_BLOCK
    index = a.get_device()
    pa, pb, po = a.data_ptr(), b.data_ptr(), out.data_ptr()
    key = (index, a.dtype, b.dtype, out.dtype, pa & 15 == 0, pb & 15 == 0, po & 15 == 0)
    args = (a, b, out, n, float(alpha))
    consts = (block, alpha != 1)
    grid = (cdiv(n, block), 1, 1)
    if index >= 0 and index != current_device():
        with torch.cuda.device(index):
            _ADD.launch(key, index, grid, args, consts, _warps(block))
        return
    _ADD.launch(key, index, grid, args, consts, _warps(block))


def _forward(a: torch.Tensor, b: torch.Tensor, alpha: float, block: int | None) -> torch.Tensor:
    # a and b: the result dtype, broadcast to one shape; copied where not contiguous.
    a = a.contiguous()
    b = b.contiguous()
    out = torch.empty(a.shape, device=a.device, dtype=a.dtype)
    add_flat(a, b, out, alpha, block)
    return out


class _AddFunction(torch.autograd.Function):
    # Its inputs are already cast and broadcast (autograd sums the gradient of a broadcast
    # input back to its shape and casts it back to its dtype).

    @staticmethod
    def forward(ctx, a, b, alpha, block):  # type: ignore[no-untyped-def,override]
        ctx.alpha = alpha
        return _forward(a, b, alpha, block)

    @staticmethod
    def backward(ctx, dy):  # type: ignore[no-untyped-def,override]
        return dy, (dy if ctx.alpha == 1 else dy * ctx.alpha), None, None


# =============================================================================== registered op


@torch.library.custom_op("labnotes::add", mutates_args=())
def _add_op(a: torch.Tensor, b: torch.Tensor, alpha: float, block: int | None) -> torch.Tensor:
    return _forward(a, b, alpha, block)


@_add_op.register_fake
def _(a: torch.Tensor, b: torch.Tensor, alpha: float, block: int | None) -> torch.Tensor:
    return torch.empty(a.shape, device=a.device, dtype=a.dtype)


def _setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    _a, _b, alpha, _block = inputs
    ctx.alpha = alpha


def _op_backward(ctx, dy: torch.Tensor):  # type: ignore[no-untyped-def]
    return dy, (dy if ctx.alpha == 1 else dy * ctx.alpha), None, None


_add_op.register_autograd(_op_backward, setup_context=_setup_context)

# =============================================================================== functional


def result_dtype(a: torch.Tensor, b: torch.Tensor) -> torch.dtype:
    """``torch.result_type(a, b)`` for floating results, in a form ``torch.compile`` traces: a
    0-d tensor does not widen a dimensioned one of its category (``bf16[n] + fp32[]`` is
    bf16), otherwise the two dtypes promote."""
    if (a.dim() == 0) != (b.dim() == 0) and a.dtype.is_floating_point and b.dtype.is_floating_point:
        return b.dtype if a.dim() == 0 else a.dtype
    return torch.promote_types(a.dtype, b.dtype)


def check_args(a: torch.Tensor, b: torch.Tensor, alpha: float, block: int | None) -> torch.dtype:
    """Validate :func:`add`'s arguments; returns the result dtype (torch's type promotion)."""
    check_tensor("add", "a", a)
    check_tensor("add", "b", b)
    if not isinstance(alpha, numbers.Real) or isinstance(alpha, bool):
        raise TypeError(f"add: alpha must be a real number, got {alpha!r}")
    dtype = result_dtype(a, b)
    if dtype not in ACCEPTED:
        raise TypeError(f"add: a ({a.dtype}) and b ({b.dtype}) promote to {dtype}; expected {FLOAT_NAMES}")
    if b.dim() > 0:
        check_same_device("add", "b", b, "a", a)
    check_device("add", "a", a)
    if block is not None and block not in BLOCKS:
        raise ValueError(f"add: block must be one of {BLOCKS} or None, got {block!r}")
    try:
        torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError as e:
        raise ValueError(f"add: shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from e
    return dtype


def add(a: torch.Tensor, b: torch.Tensor, *, alpha: float = 1, block: int | None = None) -> torch.Tensor:
    """``torch.add(a, b, alpha=alpha)``, differentiable and compilable.

    Args:
        a, b: tensors on one CUDA GPU (a 0-d ``b`` may be on the CPU, as torch allows), or
            on the CPU under ``TRITON_INTERPRET=1``.  Their promoted dtype (torch's rules)
            must be float16, bfloat16, float32 or float64.  Shapes broadcast as in torch;
            the fast case is one shape, both contiguous: anything else costs a copy of the
            broadcast or strided input first.
        alpha: the multiplier of ``b``.
        block: elements per program, one of ``BLOCKS``; ``None`` for ``DEFAULT_BLOCK``.

    Returns: a new contiguous tensor of the broadcast shape and the promoted dtype; summed
    in float32 (float64 for float64) and rounded once.

    Raises:
        TypeError: an argument is not a tensor (or ``alpha`` not a real number), or the
            promoted dtype is not one of the above.
        ValueError: shapes that do not broadcast, tensors on different devices, an unknown
            ``block``, ``a`` on the CPU outside the interpreter.
    """
    # The common call first: two plain contiguous CUDA tensors of one shape and float dtype
    # on one GPU, a plain alpha, a block it accepts, no autograd, no tracer.  Every test here
    # is one the full path makes too; any that fails sends the call there.
    if (block in _BLOCK_CHOICES and type(a) is torch.Tensor and type(b) is torch.Tensor and type(alpha) in (int, float)
            and a.dtype is b.dtype and a.dtype in ACCEPTED and a.shape == b.shape and _checks.on_gpu(a)
            and _checks.on_gpu(b) and a.get_device() == b.get_device() and a.is_contiguous() and b.is_contiguous()
            and not (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)) and not _is_compiling()
            and not _functorch_active()):  # fmt: skip
        out = torch.empty_like(a)
        add_flat(a, b, out, float(alpha), block)
        return out
    dtype = check_args(a, b, alpha, block)
    if b.device != a.device:
        b = b.to(a.device)
    if a.dtype != dtype:
        a = a.to(dtype)
    if b.dtype != dtype:
        b = b.to(dtype)
    if a.shape != b.shape:
        a, b = torch.broadcast_tensors(a, b)
    if eager_path(a):
        if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
            return _AddFunction.apply(a, b, float(alpha), block)
        return _forward(a, b, float(alpha), block)
    return _add_op(a, b, float(alpha), block)
