"""Fast float32 special functions (one MUFU instruction each: ``exp2``, ``rcp``, and through
:func:`mufu` the row base's ``exp`` and ``log`` and cross-entropy's tanh), and GELU (tanh
approximation) with its derivative, shared by the kernels that apply it: the GEMM's
``bias_gelu`` epilogue and backward (:mod:`kernels.matmul`) and the bias + GELU + dropout pass
(:mod:`kernels.bias_gelu_dropout`).

``gelu_tanh(z) = 0.5 z (1 + tanh(u))`` with ``u = sqrt(2/pi) (z + 0.044715 z^3)``, evaluated
through one exponential as ``z / (1 + e)``, ``e = exp(-2u)`` (``1 + tanh(u) = 2 sigmoid(2u)``):
no ``1 - 2 / (1 + e)`` cancellation for negative ``z`` (where ``1 + tanh(u)`` is tiny and an
absolute error in ``tanh`` becomes a large relative one: ``tanh.approx.f32``, one instruction
with a relative error bound of about 2^-11, may put 1 + tanh(u) some 20% off at ``z = -3``,
where it is 0.0024) and no ``inf / inf``.  The derivative is ``s + 2 z q
u'`` with ``s = 1 / (1 + e)`` and ``q = s (1 - s) = 1 / (2 + e + 1/e)``; it never divides inf
by inf either.

Why not ``tl.exp`` and ``/``: compiled float32 takes ``e`` from one ``ex2.approx.ftz`` and each
reciprocal from one ``rcp.approx.ftz`` (errors of an ulp or two, inside the float32
tolerance).  ``tl.exp`` is the non-flushing ``ex2.approx.f32``, which ptxas wraps in four more
instructions to scale denormals, and the full-range division is about eight.  Where these run
the instructions are the cost: the dropout pass is near the point where instructions, not
bytes, set its time, and the GEMM's epilogue runs between two tiles' main loops with the
tensor cores idle (at 8192³ with 128 x 256 tiles each thread applies GELU to 128 outputs per
tile, about 16 tiles per SM).

Non-finite inputs give what torch's float64 ``gelu`` gives: ``gelu(+inf) = inf``,
``gelu(-inf) = nan``, NaN stays NaN, a large negative ``z`` gives ``-0.0`` (``e`` overflows to
inf and ``1 / inf = 0``); the gradient is NaN at +-inf (and, in float32, where ``z^2``
overflows), as torch's.  float64 takes ``tl.exp2`` and true divisions; so does the Triton
interpreter, which has no inline PTX.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels._launch import INTERPRETER

# Inline PTX (MUFU instructions, griddepcontrol) only in compiled code: the interpreter has none.
COMPILED = tl.constexpr(not INTERPRETER)
GELU_C = tl.constexpr(0.7978845608028654)  # sqrt(2 / pi)
GELU_A = tl.constexpr(0.044715)
_GELU_K2 = tl.constexpr(-2.0 * 0.7978845608028654 * 1.4426950408889634)  # exp(-2u) = 2^(K2 (z + a z^3))
_GELU_C3A = tl.constexpr(3.0 * 0.044715 * 0.7978845608028654)  # u' = C + 3 a C z^2


@triton.jit
def mufu(x, ASM: tl.constexpr):
    """One special-function (MUFU) instruction ``ASM`` (``"ex2.approx.ftz.f32 $0, $1;"``) on
    float32 ``x``: compiled code only (the interpreter runs no inline PTX)."""
    return tl.inline_asm_elementwise(ASM, "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def exp2(x):
    """2^x: one ``ex2.approx.ftz`` compiled in float32 (relative error about 2^-22, results
    below 2^-126 flushed to 0: e only ever enters through 1 + e and 1 / e, where a flushed
    e reads as 0 and 1 / 0 as inf, the limits the formulas want).  ``tl.exp2`` otherwise."""
    if COMPILED and x.dtype == tl.float32:
        return mufu(x, "ex2.approx.ftz.f32 $0, $1;")
    else:
        return tl.exp2(x)


@triton.jit
def rcp(x):
    """1 / x: one ``rcp.approx.ftz`` compiled in float32 (within an ulp or so).  1 / inf = 0,
    1 / 0 = inf, NaN stays NaN.  A division otherwise."""
    if COMPILED and x.dtype == tl.float32:
        return mufu(x, "rcp.approx.ftz.f32 $0, $1;")
    else:
        return 1.0 / x


@triton.jit
def _gelu_e(z):
    """e = exp(-2u), u = sqrt(2/pi) (z + 0.044715 z^3): z = +inf gives 0, -inf gives inf."""
    return exp2(z * (1.0 + GELU_A * z * z) * _GELU_K2)


@triton.jit
def gelu_tanh(z):
    """``F.gelu(z, approximate="tanh")`` = z * sigmoid(2u) = z / (1 + e), in z's dtype (fp32 or fp64)."""
    return z * rcp(1.0 + _gelu_e(z))


@triton.jit
def gelu_tanh_grad(z):
    """d gelu_tanh(z) / dz = s + 2 z q u', s = sigmoid(2u) = 1 / (1 + e),
    q = s (1 - s) = 1 / (2 + e + 1/e)."""
    e = _gelu_e(z)
    s = rcp(1.0 + e)
    q = rcp(2.0 + e + rcp(e))  # e = 0 or inf: q = 0, never nan
    du = GELU_C + _GELU_C3A * z * z
    return s + (2.0 * z * q) * du  # (z q) first: 0 for large |z| before du overflows (torch's order)
