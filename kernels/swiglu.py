"""SwiGLU's pointwise part, ``y = silu(gate) * up``, forward and backward, one launch each.

In a gated MLP (``down(silu(x @ W_gate) * (x @ W_up))``) the two projections ``gate`` and
``up`` arrive as two ``[tokens, hidden]`` tensors; this operator is what sits between them
and the down projection.  ``silu(g) = g * sigmoid(g)`` and ``sigmoid(g) = 1 / (1 + exp(-g))``,
computed in fp32 registers (fp64 for fp64) and rounded once to the input dtype.

Numerics.  ``exp(-g)`` overflows to ``+inf`` for very negative ``g`` (below about -88 in
fp32): the sigmoid is then ``1 / inf = 0`` and ``silu = g * 0 = -0``, finite, where torch
gives 0 or a denormal; for very positive ``g``, ``exp(-g) = 0``, the sigmoid is 1 and
``silu = g``.  No finite ``g`` gives NaN (the other common form, ``exp(g) / (1 + exp(g))``,
is ``inf / inf`` for large ``g``).  At ``g = -inf`` it is ``-inf * 0 = NaN`` and at
``g = +inf`` it is ``+inf``, exactly what ``F.silu`` gives (``x / (1 + exp(-x))``); the
backward's ``sig * (1 + g * (1 - sig))`` is NaN at both infinities, as torch's is.

Memory traffic (the model a page divides by), per element: the forward reads ``gate`` and
``up`` and writes ``y`` (3 passes); the backward reads ``dy``, ``gate`` and ``up`` and writes
``dgate`` and ``dup`` (5 passes; 3 when only ``up`` needs a gradient: ``dup = dy * silu(gate)``
does not read ``up``, and 4 when only ``gate`` does).  PyTorch eager spends 5 passes on the
forward (``silu`` reads 1 and writes 1, the product reads 2 and writes 1) and 9 on the
backward, and keeps the activation ``silu(gate)`` alive until the backward.

What the forward keeps: ``gate`` and ``up`` themselves, the tensors the caller passed (which
the projections' own backward needs anyway), nothing it computed: the backward recomputes
the sigmoid from ``gate`` in registers, which costs a few instructions of an exp and a
division against a kernel bound by memory.  A non-contiguous input is copied for the
launch, but the copy is not saved (that would hold two more tensors until the backward); the
backward copies again.

The gradients are fresh tensors.  Liger-Kernel writes them in place over the saved ``gate``
and ``up``, which spares two allocations and lowers the backward's peak memory by two
input-sized tensors.  We do not: ``gate`` and ``up`` are the caller's tensors, which autograd may
still need (a graph run with ``retain_graph``, another use of the same projection, a hook)
and which a user may keep; overwriting them breaks any of these silently, and a registered
op that mutated its inputs could not be declared ``mutates_args=()`` for ``torch.compile``.

Launches: a program covers ``BLOCK`` elements; every program but the last covers a whole
block with no mask, so its loads and stores are 16-byte vectors; only the last program is
masked.  Offsets are 64-bit (tensors past 2^31 elements index correctly); the element count
is a runtime argument, so a new size never recompiles.  The grid is 1-D (axis 0 allows
2^31 - 1 programs: 2.2e12 elements at ``BACKWARD_BLOCK``).  Launches go through
:class:`~kernels._launch.FastKernel` (Triton's own launch path costs tens of µs of host
time a call), on the inputs' device.

Reading order: the kernels, the eager path, autograd, the ``torch.library`` ops (forward and
backward, so ``torch.compile`` traces both) and the public functional.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels._checks import check_device, check_float, check_same_device, check_tensor, eager_path
from kernels._launch import FastKernel, current_device
from kernels.plans import cdiv

# Elements per program.  From notes/probe_swiglu_blocks.py at 2150860 (H200, bf16, device time):
# at 8192 x 14336 the forward took 164.5 us at 2048 (4.28 TB/s) and 165.1 at 4096; the backward
# (5 passes) 276.6 us at 1024 (4.25 TB/s) against 309.9 at 4096 and 353.5 at 8192, the same
# order at 4096 x 11008 (107.8 against 122.1).
DEFAULT_BLOCK = 2048
BACKWARD_BLOCK = 1024
VECTOR_BYTES = 16  # the alignment Triton specializes pointers on (part of the launch key)


# =============================================================================== kernels


@triton.jit
def _forward_block(g_ptr, u_ptr, y_ptr, offs, n, MASKED: tl.constexpr):
    mask = None
    if MASKED:
        mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask)
    u = tl.load(u_ptr + offs, mask=mask)
    acc = tl.float64 if g.dtype == tl.float64 else tl.float32
    g = g.to(acc)
    sig = 1.0 / (1.0 + tl.exp(-g))  # exp(-g) = inf for very negative g: sig = 0, no NaN
    tl.store(y_ptr + offs, (g * sig * u.to(acc)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["n"])
def _swiglu_forward_kernel(g_ptr, u_ptr, y_ptr, n: tl.int64, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:  # a whole block: unmasked 16-byte vectors
        _forward_block(g_ptr, u_ptr, y_ptr, offs, n, False)
    else:  # the last, partial block
        _forward_block(g_ptr, u_ptr, y_ptr, offs, n, True)


@triton.jit
def _backward_block(
    dy_ptr, g_ptr, u_ptr, dg_ptr, du_ptr, offs, n,
    MASKED: tl.constexpr, WANT_DGATE: tl.constexpr, WANT_DUP: tl.constexpr,
):  # fmt: skip
    mask = None
    if MASKED:
        mask = offs < n
    dy = tl.load(dy_ptr + offs, mask=mask)
    g = tl.load(g_ptr + offs, mask=mask)
    acc = tl.float64 if g.dtype == tl.float64 else tl.float32
    dy = dy.to(acc)
    g = g.to(acc)
    sig = 1.0 / (1.0 + tl.exp(-g))  # recomputed: the forward saved no activation
    if WANT_DGATE:  # d/dg silu(g) = sig * (1 + g * (1 - sig)), as torch's silu_backward
        u = tl.load(u_ptr + offs, mask=mask).to(acc)
        dg = dy * u * sig * (1.0 + g * (1.0 - sig))
        tl.store(dg_ptr + offs, dg.to(dg_ptr.dtype.element_ty), mask=mask)
    if WANT_DUP:  # dup = dy * silu(g): up is not read for it
        tl.store(du_ptr + offs, (dy * (g * sig)).to(du_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["n"])
def _swiglu_backward_kernel(
    dy_ptr, g_ptr, u_ptr, dg_ptr, du_ptr, n: tl.int64,
    BLOCK: tl.constexpr, WANT_DGATE: tl.constexpr, WANT_DUP: tl.constexpr,
):  # fmt: skip
    start = tl.program_id(0).to(tl.int64) * BLOCK
    offs = start + tl.arange(0, BLOCK)
    if start + BLOCK <= n:
        _backward_block(dy_ptr, g_ptr, u_ptr, dg_ptr, du_ptr, offs, n, False, WANT_DGATE, WANT_DUP)
    else:
        _backward_block(dy_ptr, g_ptr, u_ptr, dg_ptr, du_ptr, offs, n, True, WANT_DGATE, WANT_DUP)


_FORWARD = FastKernel(_swiglu_forward_kernel)
_BACKWARD = FastKernel(_swiglu_backward_kernel)


def _warps(block: int) -> int:
    return 4 if block <= 2048 else 8


def _check_block(block: int) -> None:
    if not isinstance(block, int) or block < 16 or block & (block - 1):
        raise ValueError(f"swiglu: block must be a power of two >= 16, got {block!r}")


def _key(t: torch.Tensor) -> tuple[torch.dtype, bool]:
    # What the compiled kernel depends on for one pointer (FastKernel's contract: with the
    # device index, the launch key; the constexprs and warps are added by the cache).
    return t.dtype, t.data_ptr() % VECTOR_BYTES == 0


# =============================================================================== eager path


def swiglu_flat(gate: torch.Tensor, up: torch.Tensor, out: torch.Tensor, block: int = DEFAULT_BLOCK) -> None:
    """Write ``silu(gate) * up`` into ``out``: contiguous tensors of one element count and
    dtype on one device (a CUDA GPU, or the CPU under the interpreter); ``block`` elements per
    program (a power of two).  No checks beyond ``block``: the functional validates."""
    if block != DEFAULT_BLOCK:
        _check_block(block)
    n = out.numel()
    if n == 0:
        return
    index = gate.get_device()  # -1 on the CPU
    if index >= 0 and index != current_device():  # Triton launches on the current GPU
        with torch.cuda.device(index):
            swiglu_flat(gate, up, out, block)
        return
    # The key spelled out (a helper per pointer costs a µs of the eager call's ~20).
    key = (
        index, gate.dtype, up.dtype, out.dtype,
        gate.data_ptr() % VECTOR_BYTES == 0, up.data_ptr() % VECTOR_BYTES == 0, out.data_ptr() % VECTOR_BYTES == 0,
    )  # fmt: skip
    _FORWARD.launch(key, index, (cdiv(n, block), 1, 1), (gate, up, out, n), (block,), _warps(block))


def swiglu_backward_flat(
    dy: torch.Tensor,
    gate: torch.Tensor,
    up: torch.Tensor,
    dgate: torch.Tensor | None,
    dup: torch.Tensor | None,
    block: int = BACKWARD_BLOCK,
) -> None:
    """One launch: ``dgate = dy * up * sig * (1 + gate * (1 - sig))`` and ``dup = dy *
    silu(gate)`` (``sig = sigmoid(gate)``) into the given outputs; ``None`` for a gradient not
    wanted (its store is compiled out; without ``dgate``, ``up`` is not read).  Contiguous
    tensors of one element count and dtype on one device."""
    if block != BACKWARD_BLOCK:
        _check_block(block)
    n = gate.numel()
    if n == 0 or (dgate is None and dup is None):
        return
    index = gate.get_device()
    if index >= 0 and index != current_device():
        with torch.cuda.device(index):
            swiglu_backward_flat(dy, gate, up, dgate, dup, block)
        return
    dg = dgate if dgate is not None else dup  # a stand-in pointer the kernel never touches
    du = dup if dup is not None else dgate
    u = up if dgate is not None else gate  # up is read only for dgate
    assert dg is not None and du is not None
    _BACKWARD.launch(
        (index, *_key(dy), *_key(gate), *_key(u), *_key(dg), *_key(du)), index, (cdiv(n, block), 1, 1),
        (dy, gate, u, dg, du, n),
        (block, dgate is not None, dup is not None), _warps(block),
    )  # fmt: skip


def _forward(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    # gate and up: one shape and dtype; copied where not contiguous.  A new contiguous output.
    if not gate.is_contiguous():  # is_contiguous() is cheaper than a no-op contiguous()
        gate = gate.contiguous()
    if not up.is_contiguous():
        up = up.contiguous()
    out = torch.empty_like(gate, memory_format=torch.contiguous_format)  # empty_like: cheaper than empty
    swiglu_flat(gate, up, out)
    return out


def _backward(
    dy: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, want_dgate: bool, want_dup: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(dgate, dup), fresh contiguous tensors in gate's dtype; ``None`` where not wanted."""
    if dy.dtype != gate.dtype:
        dy = dy.to(gate.dtype)
    dy = dy.contiguous()  # an expanded gradient (of y.sum()) is materialized here
    gate = gate.contiguous()
    up = up.contiguous() if want_dgate else up
    dgate = torch.empty_like(gate, memory_format=torch.contiguous_format) if want_dgate else None
    dup = torch.empty_like(gate, memory_format=torch.contiguous_format) if want_dup else None
    swiglu_backward_flat(dy, gate, up, dgate, dup)
    return dgate, dup


class _SwiGLUFunction(torch.autograd.Function):
    """The eager autograd path: launches directly, without the op dispatcher's cost.  Saves
    the caller's ``gate`` and ``up`` (not their contiguous copies, not the activation)."""

    @staticmethod
    def forward(ctx, gate, up):  # type: ignore[no-untyped-def,override]
        ctx.save_for_backward(gate, up)
        return _forward(gate, up)

    @staticmethod
    def backward(ctx, dy):  # type: ignore[no-untyped-def,override]
        # Grad mode is on here only under create_graph=True.  The check costs one C call where
        # once_differentiable's wrapper cost ~15 µs of the eager step's host time.
        if torch.is_grad_enabled():
            raise RuntimeError("swiglu: not twice differentiable (its backward ran with create_graph=True)")
        gate, up = ctx.saved_tensors
        return _backward(dy, gate, up, ctx.needs_input_grad[0], ctx.needs_input_grad[1])


# =============================================================================== registered ops
# What torch.compile, torch.export, FakeTensor and functorch see: two opaque ops with fake
# implementations; the forward's autograd calls the backward op, so a compiled training
# step traces both as single nodes.


@torch.library.custom_op("labnotes::swiglu", mutates_args=())
def _swiglu_op(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return _forward(gate, up)


@_swiglu_op.register_fake
def _(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return torch.empty(gate.shape, device=gate.device, dtype=gate.dtype)


@torch.library.custom_op("labnotes::swiglu_backward", mutates_args=())
def _swiglu_backward_op(
    dy: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, want_dgate: bool, want_dup: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """(dgate, dup); a gradient not wanted is an empty tensor (shape [0]): a custom op
    returns tensors, not None."""
    dgate, dup = _backward(dy, gate, up, want_dgate, want_dup)
    return (dgate if dgate is not None else gate.new_empty(0)), (dup if dup is not None else gate.new_empty(0))


@_swiglu_backward_op.register_fake
def _(
    dy: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, want_dgate: bool, want_dup: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    def grad(wanted: bool) -> torch.Tensor:
        return torch.empty(gate.shape if wanted else (0,), device=gate.device, dtype=gate.dtype)

    return grad(want_dgate), grad(want_dup)


def _setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    gate, up = inputs
    ctx.save_for_backward(gate, up)


def _op_backward(ctx, dy: torch.Tensor):  # type: ignore[no-untyped-def]
    gate, up = ctx.saved_tensors
    want_dgate, want_dup = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    dgate, dup = _swiglu_backward_op(dy, gate, up, want_dgate, want_dup)
    return (dgate if want_dgate else None), (dup if want_dup else None)


_swiglu_op.register_autograd(_op_backward, setup_context=_setup_context)

# =============================================================================== functional


def check_args(gate: torch.Tensor, up: torch.Tensor) -> None:
    """Validate :func:`swiglu`'s arguments (raises as documented there)."""
    check_tensor("swiglu", "gate", gate)
    check_tensor("swiglu", "up", up)
    check_float("swiglu", "gate", gate)
    check_float("swiglu", "up", up)
    if up.dtype != gate.dtype:
        raise TypeError(f"swiglu: up has dtype {up.dtype}; expected gate's {gate.dtype} (cast one first)")
    if up.shape != gate.shape:
        raise ValueError(f"swiglu: up has shape {list(up.shape)}; expected gate's {list(gate.shape)}")
    check_same_device("swiglu", "up", up, "gate", gate)
    check_device("swiglu", "gate", gate)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``F.silu(gate) * up``, differentiable and compilable: SwiGLU's pointwise part.

    Args:
        gate: the gate projection, any shape (e.g. ``[tokens, 14336]``), any number of
            elements (0 and more than 2^31 included); float16, bfloat16, float32 or
            float64; on a CUDA GPU (any of them: the kernel runs on ``gate``'s device), or
            on the CPU under ``TRITON_INTERPRET=1``.
        up: the up projection, ``gate``'s shape, dtype and device.

        Contiguous inputs are the fast path; a non-contiguous one (e.g. a half of
        ``x.chunk(2, -1)``) is copied to a contiguous tensor first, in the forward and again
        in the backward.

    Returns: a new contiguous tensor of ``gate``'s shape and dtype, computed in float32
    (float64 for float64) and rounded once.  Non-finite values follow ``F.silu(gate) * up``
    in float64: ``gate = -inf`` gives NaN, ``+inf`` gives ``+-inf`` (times ``up``), NaN
    gives NaN; any finite ``gate``, however large, gives a finite ``silu``.

    The gradients (one launch; only those wanted are computed and returned) are
    ``dgate = dy * up * sig * (1 + gate * (1 - sig))`` and ``dup = dy * silu(gate)``,
    ``sig = sigmoid(gate)`` recomputed from the saved inputs, in the inputs' dtype, as new
    tensors (the inputs are never written).  Not twice differentiable.

    Raises:
        TypeError: ``gate`` or ``up`` is not a tensor, has a dtype other than the four above,
            or their dtypes differ.
        ValueError: their shapes differ, they are on different devices, or they are on the
            CPU outside the interpreter.
    """
    check_args(gate, up)
    if eager_path(gate, up):
        if torch.is_grad_enabled() and (gate.requires_grad or up.requires_grad):
            return _SwiGLUFunction.apply(gate, up)
        return _forward(gate, up)
    return _swiglu_op(gate, up)
