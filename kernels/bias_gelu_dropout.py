"""Bias + GELU (tanh approximation) + dropout in one pass, forward and backward.

``out = dropout(gelu_tanh(input + bias), p)``: what ``F.dropout(F.gelu(input + bias,
approximate="tanh"), p, training)`` computes, in one launch instead of three (torch eager
writes ``input + bias``, then the activation, then the output and a byte mask).

Arithmetic.  ``z = input + bias`` and everything after it in float32 registers (float64 for
float64), rounded once at the store.  GELU and its derivative are
:mod:`kernels._activations`' (``z / (1 + exp(-2u))`` from one ``ex2.approx.ftz`` and one
``rcp.approx.ftz`` in float32; that module says why, and what non-finite inputs give: what
torch's float64 ``gelu`` gives).

Dropout.  The keep decision of the element at 64-bit linear offset ``o`` is
``r(o) >= round(p * 2^32)``, with ``r(o)`` a 32-bit Philox4x32-10 output (Triton's
``tl.randint4x``, the generator behind ``tl.rand``) of key ``seed`` and counter
``start + o % QUARTER``, ``start = o - o % BLOCK`` (the program's first offset), output lane
``(o % BLOCK) // QUARTER``: one Philox call yields the four keep bits of four elements a
quarter block apart, so each element costs a quarter of a Philox evaluation and every load
stays one contiguous vector per thread.  The counter is a 64-bit number that grows with the
offset (``start + o % QUARTER``, within a block of ``o``; both of its 32-bit words enter
Philox), so elements past 2^31 and 2^32 draw their own numbers (``tl.rand`` with an int32
offset would repeat them).  The decision depends only on
``(seed, o)``: the mask is never stored, the backward regenerates it.  Kept elements are
scaled by ``1 / (1 - p)`` (in float64 on the host, rounded to the compute type); dropped
elements are multiplied by 0, as torch multiplies, so a dropped ``nan`` or ``inf`` stays
``nan``.  ``p`` is applied at a resolution of 2^-32.  ``p == 0`` or ``training=False``: no
dropout and no random numbers drawn; ``p == 1``: the output is ``gelu * 0`` (zeros), no random
numbers, as torch.

Seeds.  ``seed=None`` draws a seed in ``[0, 2^63 - 1)`` from torch's default CPU generator
(one ``torch.randint``; ``torch.manual_seed(s)`` makes calls reproducible), at call time: under
``torch.compile`` the draw is a graph op that runs on every call, outside the registered op,
which takes the seed as an explicit int (a compiled graph with backend ``aot_eager`` draws
the same seed as eager from the same generator state; inductor draws its own random numbers
for graph ops, so only a given seed makes compiled and eager bitwise equal).  The same seed
gives the same bits on every call and every GPU: the mask is a function of the seed and each
element's flat offset only (not of the launch, the row count or the timing).

Memory traffic (the model a page divides by): the forward reads ``input`` once and writes
``out`` once (plus the ``[F]`` bias, which every row shares and L2 serves): 2 passes, the
minimum.  It stores nothing else: not the mask (1 byte an element written here and read by
the backward, a quarter more traffic on bf16 in each direction) and not the activation
(recomputed from ``input``).  The backward reads ``dy`` and ``input`` and writes ``dx`` (3
passes; the mask and ``gelu'`` are recomputed in registers, Philox costing compute, not
bytes), and the bias gradient reads ``dx`` once more: a fixed-order column sum
(``kernels._rowwise.column_sum``: fp32 partials, no atomics, the same bits every run).  That
fourth pass is the price of determinism with a flat layout, whose blocks straddle rows: a
block cannot own a column's partial sum without a ``[programs, F]`` scratch or atomics.  A
backward that folded the partial sums into its pass (programs walking one block of columns
down 16-128 rows, for F a multiple of the block) was measured and dropped (H200, bf16,
p = 0.1, notes/2026-12-02-probe-pointwise-3596ad1.log): 468 µs at 16384 x 8192 against 439 for
this kernel and the column sum, 148 against 126 at 8192 x 4096.  The backward holds 122
registers a thread (four quarters of keep bits live at once), the folded one 145, so three
programs fit an SM and the folded grid ran in waves.

Layout.  ``input`` is viewed as a flat contiguous vector of ``n = rows * F`` elements; the
bias index of offset ``o`` is ``o % F``, computed once per quarter block (a vector load of
the bias when ``F`` is a multiple of ``QUARTER``; a wrapped gather otherwise).  A program
covers ``BLOCK`` elements; all but the last run unmasked (16-byte vectors).  ``n``, ``F``,
the seed, the threshold and the scale are runtime arguments: a new row count, ``p`` or seed
never recompiles; the bias mode (4 values) derives from ``F`` only.

Reading order: the kernels, the eager path, autograd, the ``torch.library`` ops and the
public functional.
"""

from __future__ import annotations

import numbers
import threading

import torch
import triton
import triton.language as tl

from kernels._activations import gelu_tanh, gelu_tanh_grad
from kernels._checks import check_device, check_float, check_same_device, check_tensor, eager_path
from kernels._launch import FastKernel, current_device
from kernels._rowwise import column_sum
from kernels.plans import VECTOR_BYTES, cdiv

QUARTER = 1024  # elements per quarter block: 8 per thread at 4 warps, one 16-byte vector of bf16
BLOCK = 4 * QUARTER  # elements per program (8 KB of bf16 read and 8 KB written)
NUM_WARPS = 4
SEED_BOUND = 2**63 - 1  # seeds drawn for seed=None lie in [0, SEED_BOUND); given seeds in [0, 2^63)
_TWO32 = 2**32

# Bias modes (a constexpr chosen from F alone): how a quarter block finds its bias columns.
NO_BIAS, BIAS_ALIGNED, BIAS_WRAP_ONCE, BIAS_WRAP_MANY = 0, 1, 2, 3

# =============================================================================== kernels


@triton.jit
def _bias_cols(s, width, BIAS: tl.constexpr, QUARTER: tl.constexpr):
    """The bias columns ``(s + i) % width`` of the quarter block starting at offset ``s``."""
    i = tl.arange(0, QUARTER)
    c = s % width  # one 64-bit remainder per quarter block
    if BIAS == 1:  # width % QUARTER == 0: the quarter lies inside one row, c a multiple of QUARTER
        cols = tl.max_contiguous(tl.multiple_of(c + i, QUARTER), QUARTER)
    elif BIAS == 2:  # width >= QUARTER: the quarter wraps into the next row at most once
        cols = c + i
        cols = tl.where(cols >= width, cols - width, cols)
    else:  # width < QUARTER: many rows per quarter; 32-bit remainder (c + i < 2 QUARTER)
        cols = (c.to(tl.int32) + i) % width.to(tl.int32)
    return cols


@triton.jit
def _scaled(v, r, threshold, scale32, scale64, DROPOUT: tl.constexpr):
    # v times the scale where kept, times 0 where dropped (as torch multiplies: a dropped nan
    # or inf gives nan).  Keep: r >= round(p 2^32), probability 1 - p.  Without dropout the
    # scale is 1, or 0 for p = 1.  The scale arrives twice, as fp32 and as fp64, so that each
    # compute type multiplies by its own rounding of 1 / (1 - p) with no cast: a float
    # argument is a typed scalar compiled but a Python float under the interpreter, where a
    # select of it would make it float32; hence float64 selects between two products.
    if v.dtype == tl.float64:
        if DROPOUT:
            return tl.where(r >= threshold.to(tl.uint32), v * scale64, v * 0.0)
        else:
            return v * scale64
    else:
        if DROPOUT:
            return v * tl.where(r >= threshold.to(tl.uint32), scale32, 0.0)  # a select and one multiply
        else:
            return v * scale32


@triton.jit
def _lane(r0, r1, r2, r3, K: tl.constexpr):
    # Philox output lane K: the random bits of quarter K
    return r0 if K == 0 else (r1 if K == 1 else (r2 if K == 2 else r3))


@triton.jit
def _randoms(seed, start, QUARTER: tl.constexpr, V: tl.constexpr, DROPOUT: tl.constexpr):
    # Four blocks of 32 random bits: Philox counter start + i (64-bit, both words used) gives
    # lane k to element i of quarter k.  Without dropout: zeros, never read.
    #
    # Computed as a [V, QUARTER / V] tile (V elements per 16-byte vector), counter
    # start + V j + m at [m, j], then transposed and flattened: the same numbers in the same
    # order, but Triton's default layout of that tile gives thread t exactly the elements its
    # vector loads hold, so the keep bits meet the data without a trip through shared memory
    # (a plain [QUARTER] vector sits one element per thread, 128 apart, and each quarter paid
    # a shared-memory shuffle of its keep bits and a barrier).
    m = tl.arange(0, V)[:, None]
    j = tl.arange(0, QUARTER // V)[None, :]
    if DROPOUT:
        r0, r1, r2, r3 = tl.randint4x(seed, start + V * j + m)
        r0 = tl.reshape(tl.trans(r0), [QUARTER])
        r1 = tl.reshape(tl.trans(r1), [QUARTER])
        r2 = tl.reshape(tl.trans(r2), [QUARTER])
        r3 = tl.reshape(tl.trans(r3), [QUARTER])
    else:
        r0 = tl.zeros([QUARTER], tl.uint32)
        r1 = r0
        r2 = r0
        r3 = r0
    return r0, r1, r2, r3


@triton.jit
def _fwd_quarter(
    x_ptr, b_ptr, y_ptr, s, n, width, r, threshold, scale32, scale64,
    QUARTER: tl.constexpr, BIAS: tl.constexpr, DROPOUT: tl.constexpr, MASKED: tl.constexpr,
):  # fmt: skip
    offs = s + tl.arange(0, QUARTER)
    if MASKED:  # noqa: SIM108 (a static branch of the jit)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    else:
        x = tl.load(x_ptr + offs)
    acc = tl.float64 if x.dtype == tl.float64 else tl.float32
    z = x.to(acc)
    if BIAS != 0:
        z += tl.load(b_ptr + _bias_cols(s, width, BIAS, QUARTER)).to(acc)  # columns always < width: no mask
    y = _scaled(gelu_tanh(z), r, threshold, scale32, scale64, DROPOUT).to(y_ptr.dtype.element_ty)
    if MASKED:
        tl.store(y_ptr + offs, y, mask=offs < n)
    else:
        tl.store(y_ptr + offs, y)


@triton.jit(do_not_specialize=["n", "width", "seed", "threshold"])
def _bgd_forward_kernel(
    x_ptr, b_ptr, y_ptr, n: tl.int64, width: tl.int64, seed: tl.int64, threshold: tl.int64, scale32,
    scale64: tl.float64, QUARTER: tl.constexpr, V: tl.constexpr, BIAS: tl.constexpr, DROPOUT: tl.constexpr,
):  # fmt: skip
    # Program pid covers offsets [start, start + 4 QUARTER) as four quarters; 64-bit offsets.
    start = tl.program_id(0).to(tl.int64) * (4 * QUARTER)
    r0, r1, r2, r3 = _randoms(seed, start, QUARTER, V, DROPOUT)
    if start + 4 * QUARTER <= n:  # a whole block: unmasked 16-byte vectors
        for k in tl.static_range(4):
            _fwd_quarter(x_ptr, b_ptr, y_ptr, start + k * QUARTER, n, width, _lane(r0, r1, r2, r3, k), threshold,
                         scale32, scale64, QUARTER, BIAS, DROPOUT, False)  # fmt: skip
    else:
        for k in tl.static_range(4):
            _fwd_quarter(x_ptr, b_ptr, y_ptr, start + k * QUARTER, n, width, _lane(r0, r1, r2, r3, k), threshold,
                         scale32, scale64, QUARTER, BIAS, DROPOUT, True)  # fmt: skip


@triton.jit
def _bwd_quarter(
    dy_ptr, x_ptr, b_ptr, dx_ptr, s, n, width, r, threshold, scale32, scale64,
    QUARTER: tl.constexpr, BIAS: tl.constexpr, DROPOUT: tl.constexpr, MASKED: tl.constexpr,
):  # fmt: skip
    offs = s + tl.arange(0, QUARTER)
    if MASKED:
        dy = tl.load(dy_ptr + offs, mask=offs < n, other=0.0)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    else:
        dy = tl.load(dy_ptr + offs)
        x = tl.load(x_ptr + offs)
    acc = tl.float64 if x.dtype == tl.float64 else tl.float32
    z = x.to(acc)
    if BIAS != 0:
        z += tl.load(b_ptr + _bias_cols(s, width, BIAS, QUARTER)).to(acc)
    g = _scaled(dy.to(acc), r, threshold, scale32, scale64, DROPOUT)
    dx = (g * gelu_tanh_grad(z)).to(dx_ptr.dtype.element_ty)
    if MASKED:
        tl.store(dx_ptr + offs, dx, mask=offs < n)
    else:
        tl.store(dx_ptr + offs, dx)


@triton.jit(do_not_specialize=["n", "width", "seed", "threshold"])
def _bgd_backward_kernel(
    dy_ptr, x_ptr, b_ptr, dx_ptr, n: tl.int64, width: tl.int64, seed: tl.int64, threshold: tl.int64, scale32,
    scale64: tl.float64, QUARTER: tl.constexpr, V: tl.constexpr, BIAS: tl.constexpr, DROPOUT: tl.constexpr,
):  # fmt: skip
    # The forward's blocks, counters and lanes exactly: the same keep bits, regenerated.
    start = tl.program_id(0).to(tl.int64) * (4 * QUARTER)
    r0, r1, r2, r3 = _randoms(seed, start, QUARTER, V, DROPOUT)
    if start + 4 * QUARTER <= n:
        for k in tl.static_range(4):
            _bwd_quarter(dy_ptr, x_ptr, b_ptr, dx_ptr, start + k * QUARTER, n, width, _lane(r0, r1, r2, r3, k),
                         threshold, scale32, scale64, QUARTER, BIAS, DROPOUT, False)  # fmt: skip
    else:
        for k in tl.static_range(4):
            _bwd_quarter(dy_ptr, x_ptr, b_ptr, dx_ptr, start + k * QUARTER, n, width, _lane(r0, r1, r2, r3, k),
                         threshold, scale32, scale64, QUARTER, BIAS, DROPOUT, True)  # fmt: skip


_FORWARD = FastKernel(_bgd_forward_kernel)
_BACKWARD = FastKernel(_bgd_backward_kernel)

# =============================================================================== eager path


def bias_mode(width: int, has_bias: bool) -> int:
    """The bias constexpr for rows ``width`` wide (see ``_bias_cols``)."""
    if not has_bias:
        return NO_BIAS
    if width % QUARTER == 0:
        return BIAS_ALIGNED
    return BIAS_WRAP_ONCE if width >= QUARTER else BIAS_WRAP_MANY


def dropout_args(p: float) -> tuple[bool, int, float]:
    """(dropout on, threshold, scale) for an effective ``p`` in [0, 1] (0 when not training):
    random keep bits only for 0 < p < 1; otherwise a plain multiplier, 1 or (p = 1) 0."""
    if p <= 0.0:
        return False, 0, 1.0
    if p >= 1.0:
        return False, 0, 0.0
    return True, min(int(p * _TWO32 + 0.5), _TWO32 - 1), 1.0 / (1.0 - p)


# Host-side memos (a training run uses a handful of p values and widths): the per-call work
# is then the pointers' alignment, a few dict lookups and the launch.
_DROPOUT_ARGS: dict[float, tuple[bool, int, float]] = {}
_CONSTS: dict[tuple[int, int, bool, bool], tuple[int, int, int, bool]] = {}


def _launch(kernel: FastKernel, tensors: tuple[torch.Tensor, ...], width: int, p: float, seed: int,
            has_bias: bool) -> None:  # fmt: skip
    # tensors: the kernel's pointer arguments, contiguous and of one dtype (the callers cast),
    # the last one (the output) sized n.  The launch key: device, each pointer's dtype and
    # 16-byte alignment (what Triton specializes on besides the constexprs).
    out = tensors[-1]
    n = out.numel()
    if n == 0:
        return
    d = _DROPOUT_ARGS.get(p)
    if d is None:
        d = dropout_args(p)
        if len(_DROPOUT_ARGS) < 256:  # bounded: a schedule of p values does not grow it forever
            _DROPOUT_ARGS[p] = d
    dropout, threshold, scale = d
    size = out.element_size()
    ck = (size, width, has_bias, dropout)
    consts = _CONSTS.get(ck)
    if consts is None:
        consts = _CONSTS[ck] = (QUARTER, VECTOR_BYTES // size, bias_mode(width, has_bias), dropout)
    index = out.get_device()  # -1 on the CPU (the interpreter)
    # every pointer's dtype, not only the output's: forward_flat and backward_flat are public,
    # and a call mixing dtypes must not reuse a launcher compiled for one
    key = (index, *[(t.dtype, t.data_ptr() % VECTOR_BYTES == 0) for t in tensors])
    args = (*tensors, n, width, seed if dropout else 0, threshold, scale, scale)
    grid = (cdiv(n, BLOCK), 1, 1)
    if index >= 0 and index != current_device():  # Triton launches on the current GPU
        with torch.cuda.device(index):
            kernel.launch(key, index, grid, args, consts, NUM_WARPS)
        return
    kernel.launch(key, index, grid, args, consts, NUM_WARPS)


def forward_flat(x: torch.Tensor, bias: torch.Tensor | None, out: torch.Tensor, p: float, seed: int) -> None:
    """Write ``dropout(gelu_tanh(x + bias), p)`` into ``out``: contiguous tensors of one shape
    and dtype whose last dimension is the bias's ``[F]`` (contiguous); ``p`` the effective
    probability (0 for no dropout), ``seed`` an int in [0, 2^63)."""
    if bias is not None:
        _launch(_FORWARD, (x, bias, out), bias.shape[0], p, seed, True)
    elif out.numel():
        _launch(_FORWARD, (x, x, out), 1, p, seed, False)  # no bias: the width is never read


def backward_flat(
    dy: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None, dx: torch.Tensor, p: float, seed: int
) -> None:
    """Write ``dx = dy * keep / (1 - p) * gelu_tanh'(x + bias)`` into ``dx``, the keep bits
    regenerated from ``(seed, offset)`` as :func:`forward_flat` drew them."""
    if bias is not None:
        _launch(_BACKWARD, (dy, x, bias, dx), bias.shape[0], p, seed, True)
    elif dx.numel():
        _launch(_BACKWARD, (dy, x, x, dx), 1, p, seed, False)


def _forward(x: torch.Tensor, bias: torch.Tensor | None, p: float, seed: int) -> torch.Tensor:
    x = x.contiguous()
    if bias is not None:
        bias = bias.contiguous()
    out = torch.empty_like(x, memory_format=torch.contiguous_format)
    forward_flat(x, bias, out, p, seed)
    return out


def _backward(
    dy: torch.Tensor, x: torch.Tensor, bias: torch.Tensor | None, p: float, seed: int, want_db: bool
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(dx, db): db the column sum of dx over every leading dimension, ``None`` unless wanted."""
    if dy.dtype != x.dtype:
        dy = dy.to(x.dtype)
    dy = dy.contiguous()  # an expanded gradient (of out.sum()) is copied here
    x = x.contiguous()
    if bias is not None:
        bias = bias.contiguous()
    dx = torch.empty_like(x, memory_format=torch.contiguous_format)
    backward_flat(dy, x, bias, dx, p, seed)
    if not want_db or bias is None:
        return dx, None
    width = bias.shape[0]
    if dx.numel() == 0:
        return dx, torch.zeros(width, device=x.device, dtype=bias.dtype)
    return dx, column_sum(dx.view(-1, width), out_dtype=bias.dtype)


class _BiasGeluDropoutFunction(torch.autograd.Function):
    """The eager autograd path: launches directly, without the op dispatcher's cost.  Saves
    the input and the bias; the seed and p ride on ctx (the mask is regenerated)."""

    @staticmethod
    def forward(ctx, x, bias, p, seed):  # type: ignore[no-untyped-def,override]
        ctx.save_for_backward(x, bias)
        ctx.p, ctx.seed = p, seed
        return _forward(x, bias, p, seed)

    @staticmethod
    def backward(ctx, dy):  # type: ignore[no-untyped-def,override]
        x, bias = ctx.saved_tensors
        want_db = bias is not None and ctx.needs_input_grad[1]
        dx, db = _backward(dy, x, bias, ctx.p, ctx.seed, want_db)
        return (dx if ctx.needs_input_grad[0] else None), db, None, None


# =============================================================================== registered ops
# What torch.compile, torch.export, FakeTensor and functorch see.  p is the effective
# probability (0 when not training); the seed is an explicit int (drawn by the functional,
# outside the op, when the caller gives none), so the op is a pure function of its arguments.


@torch.library.custom_op("labnotes::bias_gelu_dropout", mutates_args=())
def _bias_gelu_dropout_op(input: torch.Tensor, bias: torch.Tensor | None, p: float, seed: int) -> torch.Tensor:
    return _forward(input, bias, p, seed)


@_bias_gelu_dropout_op.register_fake
def _(input: torch.Tensor, bias: torch.Tensor | None, p: float, seed: int) -> torch.Tensor:
    return torch.empty(input.shape, device=input.device, dtype=input.dtype)


@torch.library.custom_op("labnotes::bias_gelu_dropout_backward", mutates_args=())
def _bias_gelu_dropout_backward_op(
    dy: torch.Tensor, input: torch.Tensor, bias: torch.Tensor | None, p: float, seed: int, want_db: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, db); db is empty (shape [0]) unless ``want_db``."""
    dx, db = _backward(dy, input, bias, p, seed, want_db)
    return dx, (db if db is not None else input.new_empty(0))


@_bias_gelu_dropout_backward_op.register_fake
def _(
    dy: torch.Tensor, input: torch.Tensor, bias: torch.Tensor | None, p: float, seed: int, want_db: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    dx = torch.empty(input.shape, device=input.device, dtype=input.dtype)
    if want_db and bias is not None:
        return dx, torch.empty(bias.shape, device=bias.device, dtype=bias.dtype)
    return dx, input.new_empty(0)


def _setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    x, bias, p, seed = inputs
    ctx.save_for_backward(x, bias)
    ctx.p, ctx.seed = p, seed


def _op_backward(ctx, dy: torch.Tensor):  # type: ignore[no-untyped-def]
    x, bias = ctx.saved_tensors
    want_db = bias is not None and ctx.needs_input_grad[1]
    dx, db = _bias_gelu_dropout_backward_op(dy, x, bias, ctx.p, ctx.seed, want_db)
    return dx, (db if want_db else None), None, None


_bias_gelu_dropout_op.register_autograd(_op_backward, setup_context=_setup_context)

# =============================================================================== functional

_local = threading.local()


def draw_seed() -> int:
    """A seed in ``[0, SEED_BOUND)`` from torch's default CPU generator: the value
    ``int(torch.randint(0, SEED_BOUND, ()))`` gives, which is what a compiled graph runs.
    Eagerly it fills a per-thread 0-d buffer instead (half the host time, same value and
    generator state afterwards)."""
    if torch.compiler.is_compiling():
        return int(torch.randint(0, SEED_BOUND, (), dtype=torch.int64))
    buf = getattr(_local, "seed", None)
    if buf is None:
        buf = _local.seed = torch.empty((), dtype=torch.int64)
    return int(buf.random_(0, SEED_BOUND).item())


def check_args(input: torch.Tensor, bias: torch.Tensor | None, p: float, training: bool, seed: int | None) -> float:
    """Validate :func:`bias_gelu_dropout`'s arguments; returns the effective p (0 when not training)."""
    fn = "bias_gelu_dropout"
    check_tensor(fn, "input", input)
    check_float(fn, "input", input)
    check_device(fn, "input", input)
    check_tensor(fn, "bias", bias, optional=True)
    if bias is not None:
        check_same_device(fn, "bias", bias, "input", input)
        if bias.dtype != input.dtype:
            raise TypeError(f"{fn}: bias has dtype {bias.dtype}; expected input's {input.dtype}")
        if input.dim() == 0:
            raise ValueError(f"{fn}: input must have a last dimension [..., F] for a bias, got a 0-d tensor")
        if tuple(bias.shape) != (input.shape[-1],):
            raise ValueError(
                f"{fn}: bias has shape {list(bias.shape)}; expected [F] = [{input.shape[-1]}], the last dimension "
                f"of input's {list(input.shape)}"
            )
    if type(p) is not float and (not isinstance(p, numbers.Real) or isinstance(p, bool)):  # type(): 1 us less
        raise TypeError(f"{fn}: p must be a real number in [0, 1], got {p!r}")
    if not 0.0 <= p <= 1.0:  # NaN fails too
        raise ValueError(f"{fn}: p must be in [0, 1], got {p!r}")
    if not isinstance(training, bool):
        raise TypeError(f"{fn}: training must be a bool, got {training!r}")
    if seed is not None:
        if type(seed) is not int and (isinstance(seed, bool) or not isinstance(seed, (int, torch.SymInt))):
            raise TypeError(f"{fn}: seed must be an int or None, got {type(seed).__name__}")
        if type(seed) is int and not 0 <= seed < 2**63:
            raise ValueError(f"{fn}: seed must be in [0, 2**63), got {seed}")
    return float(p) if training else 0.0


def bias_gelu_dropout(
    input: torch.Tensor,
    bias: torch.Tensor | None = None,
    p: float = 0.0,
    *,
    training: bool = True,
    seed: int | None = None,
) -> torch.Tensor:
    """``F.dropout(F.gelu(input + bias, approximate="tanh"), p, training)`` in one pass,
    differentiable and compilable.

    Args:
        input: ``[..., F]`` on a CUDA GPU (any of them: the kernels run on ``input``'s
            device), or on the CPU under ``TRITON_INTERPRET=1``; float16, bfloat16, float32
            or float64; any number of rows, 0 included (0-d without a bias).  Strided
            inputs are copied to contiguous first.
        bias: ``[F]``, ``input``'s dtype and device, or ``None`` (no bias).  Its gradient is
            the sum of the input gradient over every leading dimension, in fp32 partials
            and a fixed order: the same bits every run, no atomics.
        p: the probability of dropping an element, a real number in ``[0, 1]``; kept
            elements are scaled by ``1 / (1 - p)``.  ``p == 1`` gives zeros (``gelu * 0``).
            A runtime argument: a new ``p`` never recompiles.
        training: ``False`` (or ``p == 0``): no dropout, no random numbers drawn (nor for
            ``p == 1`` or an empty input, as torch).
        seed: an int in ``[0, 2**63)``: the keep mask is a pure function of ``(seed,
            element offset)``, so the same seed gives bitwise the same output (and
            gradients).  ``None`` draws one from torch's default CPU generator at call time
            (``torch.manual_seed(s)`` then makes a sequence of calls reproducible; under
            ``torch.compile`` the draw runs in the graph, every call).  Ignored (nothing
            drawn) without dropout.

    Returns: a new contiguous tensor of ``input``'s shape and dtype, computed in float32
    (float64 for float64) and rounded once.  Non-finite values follow torch:
    ``gelu(inf) = inf``, ``gelu(-inf) = nan``, NaN propagates, and a dropped ``nan``/``inf``
    gives ``nan`` (dropout multiplies by 0, as torch).  The mask is never stored: the backward
    regenerates it from the seed.

    Raises:
        TypeError: ``input`` or ``bias`` is not a tensor or not one of the float dtypes
            above, or ``bias``'s dtype differs from ``input``'s; ``p`` is not a real
            number; ``training`` is not a bool; ``seed`` is not an int.
        ValueError: ``bias`` is not ``[F]``; ``p`` outside ``[0, 1]`` or NaN; ``seed``
            outside ``[0, 2**63)``; tensors on different devices; ``input`` on the CPU
            outside the interpreter.
    """
    p_eff = check_args(input, bias, p, training, seed)
    if 0.0 < p_eff < 1.0:
        if seed is None:
            seed = draw_seed() if input.numel() else 0  # as torch: nothing drawn for no elements
    else:
        seed = 0  # no random numbers: the seed is not read
    if eager_path(input, bias):
        if torch.is_grad_enabled() and (input.requires_grad or (bias is not None and bias.requires_grad)):
            return _BiasGeluDropoutFunction.apply(input, bias, p_eff, seed)
        return _forward(input, bias, p_eff, seed)
    return _bias_gelu_dropout_op(input, bias, p_eff, seed)
