"""Rotary position embedding (RoPE) of queries and keys, in the Hugging Face convention.

``rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2])`` and ``x_out = x * cos + rotate_half(x) *
sin`` for ``x`` in ``q`` and ``k``; with ``x1``, ``x2`` the halves of the head dimension and
``c1, c2``, ``s1, s2`` those of ``cos`` and ``sin``:

    out1 = x1 * c1 - x2 * s1,        out2 = x2 * c2 + x1 * s2.

The general formula is computed (HF's tables repeat one half, ``c1 == c2``, but nothing here
assumes it).  The map is linear in ``x``; its adjoint, the backward, is

    dx1 = dy1 * c1 + dy2 * s2,       dx2 = dy2 * c2 - dy1 * s1,

which is the forward with ``(s1, s2)`` replaced by ``(-s2, -s1)``: with HF's tables (equal
halves) the forward with ``sin`` negated.  It runs through the same kernel, a constexpr flag
(``BACKWARD``) choosing which sine half goes where; nothing else differs.  ``cos`` and ``sin``
get no gradient (like Liger-Kernel's RoPE): they are tables of the positions, not learned.

Memory traffic (the model a page divides by): RoPE does three flops an output element and
is bound by memory.  The minimum is one read of ``q`` and ``k`` and one write of each result, plus one
read of the ``cos`` and ``sin`` rows each (batch, position) uses:
``2 (Hq + Hk) B T D`` elements of q's dtype and ``2 B' T D`` of the tables' (``B'`` = 1 when
they broadcast over batch).  The kernel moves exactly that:

- one launch handles ``q`` and ``k`` together, and each program one (batch, position) pair
  with every head of both there: it loads the ``cos``/``sin`` row once into registers and
  applies it to all ``Hq + Hk`` heads, so the tables are read once per pair, not once per
  head (a per-head grid would read them ``Hq + Hk`` times, from L2 if lucky; two launches,
  one for ``q`` and one for ``k``, would read them twice and pay two launch costs);
- each head row is read once, both halves in one program (``rotate_half`` as a separate op
  would read ``x`` twice and write a temporary), and each output element written once;
- ``q`` is read through its strides: the usual input is a transposed view of a
  ``[B, T, H, D]`` projection, and copying it to ``[B, H, T, D]`` first would triple the
  traffic of ``q`` (read, write, read again).  Only a last dimension with a stride other
  than 1 is copied.  Gradients arriving with broadcast (stride-0) leading dimensions are
  read in place too.

A program walks its heads in tiles of ``[BLOCK_H, BLOCK_D]`` (``BLOCK_D`` = ``D/2`` rounded
up to a power of two, masked; ``BLOCK_H`` heads, masked at the last tile), so any number of
heads fits in registers.  The row bases carry a divisibility hint (``VEC`` elements, 16
bytes of the narrowest dtype, when every stride allows it) so the halves load and store as
16-byte vectors.  Offsets are 64-bit: tensors past 2^31 elements index correctly.  Grid: one
axis, ``B * T`` programs (CUDA allows 2^31 - 1 on axis 0; axes 1 and 2 stop at 65535, so the
head count never goes on a grid axis).  The head dimension is a compile-time constant and
the head counts choose the tiles' heights (powers of two; the model fixes both); batch,
sequence length, the head counts themselves and every stride are runtime ``int64``
arguments, so a new sequence length or batch size never recompiles.  Launches go through
:class:`~kernels._launch.FastKernel` (a few µs of host time instead of Triton's tens).

Reading order: the kernel, the launch, the eager path, autograd, the ``torch.library`` ops
that ``torch.compile`` traces, argument checks and the public functional.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from kernels._checks import ACCEPTED, check_device, check_float, check_same_device, check_tensor, eager_path
from kernels._launch import FastKernel, current_device
from kernels.plans import VECTOR_BYTES, next_power_of_2

FN = "apply_rotary_pos_emb"
MAX_GRID_X = 2**31 - 1  # CUDA's limit on grid axis 0
TILE_ELEMENTS = 2048  # elements of one half-tile [BLOCK_H, BLOCK_D]: 4 such tiles (x1, x2, out1, out2) live at once
# Where q and k are one tile each, load both before computing either.  Measured at 3596ad1 (H200,
# T = 16384, 32 / 8 heads of 128 bf16, mean of 20 calls; notes/2026-12-02-probe-pointwise-3596ad1.log):
# tile by tile at 4 warps 98.7 µs forward, together 88.3 (8 warps: 107.9 and 87.0).
TOGETHER = True

# =============================================================================== kernel


@triton.jit
def _tile_offsets(row, sh, h0, heads, HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
                  VEC: tl.constexpr):  # fmt: skip
    # [BLOCK_H, BLOCK_D] offsets of the first halves of heads h0 .. h0 + BLOCK_H of one row
    # (row: the int64 offset of head 0's first element, sh: the head stride) and the mask of
    # the heads and half elements that exist.  Head row bases are multiples of VEC elements
    # (the host checked every stride), so each half's BLOCK_D contiguous elements load and
    # store as 16-byte vectors.
    d = tl.arange(0, BLOCK_D)
    h = h0 + tl.arange(0, BLOCK_H)
    base = tl.multiple_of(row + h.to(tl.int64) * sh, VEC)
    return base[:, None] + d[None, :], (h < heads)[:, None] & (d < HALF)[None, :]


@triton.jit
def _load_halves(x_ptr, off, inside, HALF: tl.constexpr, ACC: tl.constexpr, EVEN: tl.constexpr):
    if EVEN:  # a Llama head (32 / 8 heads of 128): no per-element predicate to compute or hold
        return tl.load(x_ptr + off).to(ACC), tl.load(x_ptr + off + HALF).to(ACC)
    x1 = tl.load(x_ptr + off, mask=inside, other=0.0).to(ACC)
    return x1, tl.load(x_ptr + off + HALF, mask=inside, other=0.0).to(ACC)


@triton.jit
def _store_rotated(o_ptr, off, inside, x1, x2, c1, c2, s1, s2, HALF: tl.constexpr, EVEN: tl.constexpr):
    out1 = (x1 * c1[None, :] - x2 * s1[None, :]).to(o_ptr.dtype.element_ty)
    out2 = (x2 * c2[None, :] + x1 * s2[None, :]).to(o_ptr.dtype.element_ty)
    if EVEN:
        tl.store(o_ptr + off, out1)
        tl.store(o_ptr + off + HALF, out2)
    else:
        tl.store(o_ptr + off, out1, mask=inside)
        tl.store(o_ptr + off + HALF, out2, mask=inside)


@triton.jit
def _rotate_heads(
    x_ptr, o_ptr, x_row, o_row, x_sh, o_sh, heads, c1, c2, s1, s2,
    HALF: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr, VEC: tl.constexpr, ACC: tl.constexpr,
    EVEN: tl.constexpr,
):  # fmt: skip
    """Rotate every head of one (batch, position) row, a tile of ``BLOCK_H`` heads at a time:
    ``x_row``/``o_row`` are the int64 offsets of head 0's first element, ``x_sh``/``o_sh`` the
    head strides, ``c1..s2`` the ``[BLOCK_D]`` table halves (the sines already placed for the
    direction).  ``EVEN``: the head count is a multiple of ``BLOCK_H`` and ``HALF == BLOCK_D``,
    so no tile is masked."""
    for h0 in range(0, heads, BLOCK_H):
        x_off, inside = _tile_offsets(x_row, x_sh, h0, heads, HALF, BLOCK_H, BLOCK_D, VEC)
        o_off, _ = _tile_offsets(o_row, o_sh, h0, heads, HALF, BLOCK_H, BLOCK_D, VEC)
        x1, x2 = _load_halves(x_ptr, x_off, inside, HALF, ACC, EVEN)
        _store_rotated(o_ptr, o_off, inside, x1, x2, c1, c2, s1, s2, HALF, EVEN)


@triton.jit(
    do_not_specialize=[
        "T", "HQ", "HK", "q_sb", "q_sh", "q_st", "k_sb", "k_sh", "k_st", "qo_sb", "qo_sh", "qo_st",
        "ko_sb", "ko_sh", "ko_st", "c_sb", "c_st", "s_sb", "s_st",
    ]
)  # fmt: skip
def _rope_kernel(
    q_ptr, k_ptr, cos_ptr, sin_ptr, qo_ptr, ko_ptr,
    T: tl.int64, HQ: tl.int64, HK: tl.int64,
    q_sb: tl.int64, q_sh: tl.int64, q_st: tl.int64, k_sb: tl.int64, k_sh: tl.int64, k_st: tl.int64,
    qo_sb: tl.int64, qo_sh: tl.int64, qo_st: tl.int64, ko_sb: tl.int64, ko_sh: tl.int64, ko_st: tl.int64,
    c_sb: tl.int64, c_st: tl.int64, s_sb: tl.int64, s_st: tl.int64,
    HALF: tl.constexpr, BLOCK_HQ: tl.constexpr, BLOCK_HK: tl.constexpr, BLOCK_D: tl.constexpr,
    VEC: tl.constexpr, BACKWARD: tl.constexpr, ACC: tl.constexpr, EVEN: tl.constexpr, ONE_TILE: tl.constexpr,
):  # fmt: skip
    # One program: one (batch, position) row, every head of q and of k.  Strides are in
    # elements; a table's batch stride is 0 where it broadcasts over batch.  HQ or HK is 0
    # for a tensor the call does not compute (the backward of only one of them).
    row = tl.program_id(0).to(tl.int64)
    b = row // T
    t = row - b * T
    d = tl.arange(0, BLOCK_D)
    d_in = d < HALF
    # The table row, read once here and applied to all HQ + HK heads below.
    c_off = tl.multiple_of(b * c_sb + t * c_st, VEC) + d
    s_off = tl.multiple_of(b * s_sb + t * s_st, VEC) + d
    c1 = tl.load(cos_ptr + c_off, mask=d_in, other=0.0).to(ACC)
    c2 = tl.load(cos_ptr + c_off + HALF, mask=d_in, other=0.0).to(ACC)
    s1 = tl.load(sin_ptr + s_off, mask=d_in, other=0.0).to(ACC)
    s2 = tl.load(sin_ptr + s_off + HALF, mask=d_in, other=0.0).to(ACC)
    if BACKWARD:  # the adjoint: (s1, s2) -> (-s2, -s1); the rest of the kernel is the forward
        s1, s2 = -s2, -s1
    q_row, qo_row = b * q_sb + t * q_st, b * qo_sb + t * qo_st
    k_row, ko_row = b * k_sb + t * k_st, b * ko_sb + t * ko_st
    if ONE_TILE:
        # Both present, each one tile: q's and k's loads all issued before any arithmetic or
        # store, so the program has its whole row in flight at once (walked tile by tile, k's
        # loads would wait behind q's stores).
        qx, q_in = _tile_offsets(q_row, q_sh, 0, HQ, HALF, BLOCK_HQ, BLOCK_D, VEC)
        kx, k_in = _tile_offsets(k_row, k_sh, 0, HK, HALF, BLOCK_HK, BLOCK_D, VEC)
        q1, q2 = _load_halves(q_ptr, qx, q_in, HALF, ACC, EVEN)
        k1, k2 = _load_halves(k_ptr, kx, k_in, HALF, ACC, EVEN)
        qo, _ = _tile_offsets(qo_row, qo_sh, 0, HQ, HALF, BLOCK_HQ, BLOCK_D, VEC)
        ko, _ = _tile_offsets(ko_row, ko_sh, 0, HK, HALF, BLOCK_HK, BLOCK_D, VEC)
        _store_rotated(qo_ptr, qo, q_in, q1, q2, c1, c2, s1, s2, HALF, EVEN)
        _store_rotated(ko_ptr, ko, k_in, k1, k2, c1, c2, s1, s2, HALF, EVEN)
    else:
        _rotate_heads(q_ptr, qo_ptr, q_row, qo_row, q_sh, qo_sh, HQ, c1, c2, s1, s2,
                      HALF, BLOCK_HQ, BLOCK_D, VEC, ACC, EVEN)  # fmt: skip
        _rotate_heads(k_ptr, ko_ptr, k_row, ko_row, k_sh, ko_sh, HK, c1, c2, s1, s2,
                      HALF, BLOCK_HK, BLOCK_D, VEC, ACC, EVEN)  # fmt: skip


_ROPE = FastKernel(_rope_kernel)

# =============================================================================== launch


@functools.lru_cache(maxsize=256)
def _tiles(half: int, hq: int, hk: int) -> tuple[int, int, int, int]:
    """(BLOCK_D, BLOCK_HQ, BLOCK_HK, num_warps) for a head geometry: ``D/2`` padded to a power of
    two, and as many heads per tile as fit ``TILE_ELEMENTS`` per half-tile (all of them for
    a Llama head: 32 x 64), the rest looped over.  One warp per 512 elements of the taller
    half-tile (16 a thread: two 16-byte vectors of bf16), 1 to 8.

    Warps measured at c40eadc (H200, 32 / 8 heads of 128 bf16, T = 16384, transposed views,
    mean of 20 calls; notes/2026-12-02-probe-pointwise-c40eadc.log): the [32, 64] tiles at 8
    warps 127.7 µs forward, at 4 warps 99.5 (torch.compile's call 99.2).  A program per head
    tile instead of per row was slower at every tile size and warp count tried (half-tiles
    of 256 to 2048 elements: 133-253 µs), with fewer warps faster at each size."""
    block_d = next_power_of_2(half)
    block_hq, block_hk = (max(1, min(next_power_of_2(max(h, 1)), TILE_ELEMENTS // block_d)) for h in (hq, hk))
    warps = max(1, min(8, max(block_hq, block_hk) * block_d // 512))
    return block_d, block_hq, block_hk, warps


def _table_strides(t: torch.Tensor) -> tuple[int, int]:
    """(batch, position) strides of a ``[T, D]``, ``[1, T, D]`` or ``[B, T, D]`` table; the
    batch stride is 0 where it broadcasts over batch."""
    st = t.stride()
    if len(st) == 2:
        return 0, st[0]
    return (0 if t.shape[0] == 1 else st[0]), st[1]


def _unit_last(t: torch.Tensor) -> torch.Tensor:
    """``t``, or a contiguous copy where its last dimension is not contiguous (the kernel
    reads each half as a contiguous run)."""
    return t if t.stride(-1) == 1 else t.contiguous()


def rope_into(
    q: torch.Tensor | None,
    k: torch.Tensor | None,
    cos: torch.Tensor,
    sin: torch.Tensor,
    q_out: torch.Tensor | None,
    k_out: torch.Tensor | None,
    backward: bool = False,
    num_warps: int | None = None,
    together: bool | None = None,
) -> None:
    """Write the rotation of ``q`` into ``q_out`` and of ``k`` into ``k_out`` (the adjoint
    with ``backward``: ``q``, ``k`` are then the outputs' gradients), in one launch.

    ``q``, ``q_out``: ``[B, Hq, T, D]``; ``k``, ``k_out``: ``[B, Hk, T, D]``; any strides with a
    contiguous last dimension (the caller copies otherwise; outputs must not overlap their
    inputs).  Either pair may be ``None`` (not computed), not both.  Tables as in
    :func:`apply_rotary_pos_emb`, last dimension contiguous.  No argument checks: the
    public functional makes them.  ``num_warps``, ``together``: override the launch's
    defaults (for notes/probe_pointwise_layouts.py)."""
    ref = q if q is not None else k
    assert ref is not None
    batch, hq, seq, width = ref.shape
    half = width >> 1
    rows = batch * seq
    if rows == 0 or half == 0:
        return
    if rows > MAX_GRID_X:
        raise ValueError(f"{FN}: {batch} x {seq} (batch, position) rows exceed the grid's {MAX_GRID_X}")
    if ref.is_cuda and ref.device.index != current_device():  # Triton launches on the current GPU
        with torch.cuda.device(ref.device):
            rope_into(q, k, cos, sin, q_out, k_out, backward, num_warps, together)
        return
    # An absent pair runs no head (its count is 0); the other's tensors stand in for its
    # pointers and strides, so the key and the compiled kernel stay those of present ones.
    if q is None:
        hq = 0
        q, q_out = k, k_out
    hk = 0 if k is None else k.shape[1]
    if k is None:
        k, k_out = q, q_out
    assert q is not None and k is not None and q_out is not None and k_out is not None
    qs, ks, qos, kos = q.stride(), k.stride(), q_out.stride(), k_out.stride()
    cs, ss = _table_strides(cos), _table_strides(sin)
    # VEC: the largest power of two (at most a 16-byte vector of the narrowest dtype) that
    # divides every stride the kernel multiplies by a nonzero index (those of dimensions of
    # size 1 never are), promised to the compiler as the row bases' divisibility.  Pointer
    # alignment is Triton's own specialization (and in the key).
    bits = cs[0] | cs[1] | ss[0] | ss[1]
    if batch > 1:
        bits |= qs[0] | ks[0] | qos[0] | kos[0]
    if seq > 1:
        bits |= qs[2] | ks[2] | qos[2] | kos[2]
    bits |= qs[1] | qos[1] | ks[1] | kos[1]  # a head stride times head 0 is 0: harmless either way
    vec = VECTOR_BYTES // min(q.element_size(), cos.element_size(), sin.element_size())
    if bits & (vec - 1):
        vec = bits & -bits  # the lowest set bit: the largest power of two dividing them all
    block_d, block_hq, block_hk, warps = _tiles(half, hq, hk)
    acc = tl.float64 if ref.dtype == torch.float64 else tl.float32
    # Masks compiled out where no tile runs past the heads or the half (Nsight Compute at
    # 6b751ea, 16384 x 32 / 8 heads x 128 bf16, 8 warps: the masked kernel held 64 registers
    # a thread, 50% theoretical occupancy, 48% of issue slots busy and 65% of DRAM throughput).
    even = half == block_d and hq % block_hq == 0 and hk % block_hk == 0
    # q and k present, one tile each: their loads issued together (see the kernel)
    one_tile = (TOGETHER if together is None else together) and 0 < hq <= block_hq and 0 < hk <= block_hk
    index = ref.device.index if ref.is_cuda else -1
    key = (index, q.dtype, k.dtype, cos.dtype, sin.dtype, q_out.dtype, k_out.dtype,
           q.data_ptr() % VECTOR_BYTES == 0, k.data_ptr() % VECTOR_BYTES == 0, cos.data_ptr() % VECTOR_BYTES == 0,
           sin.data_ptr() % VECTOR_BYTES == 0, q_out.data_ptr() % VECTOR_BYTES == 0,
           k_out.data_ptr() % VECTOR_BYTES == 0)  # fmt: skip
    _ROPE.launch(
        key, index, (rows, 1, 1),
        (q, k, cos, sin, q_out, k_out, seq, hq, hk, qs[0], qs[1], qs[2], ks[0], ks[1], ks[2],
         qos[0], qos[1], qos[2], kos[0], kos[1], kos[2], cs[0], cs[1], ss[0], ss[1]),
        (half, block_hq, block_hk, block_d, vec, backward, acc, even, one_tile), num_warps or warps,
    )  # fmt: skip


# =============================================================================== eager path


def _new_like(x: torch.Tensor) -> torch.Tensor:
    # A fresh tensor of x's shape, dtype and memory layout (contiguous when x is not dense):
    # as torch's elementwise ops lay out their results.  For the usual q, a [B, H, T, D] view
    # of a [B, T, H, D] projection, a program's writes then land in one contiguous run of
    # Hq * D elements, as its reads do, instead of Hq runs of D that are T * D apart.
    return torch.empty_like(x)


def _forward(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, cos, sin = _unit_last(q), _unit_last(k), _unit_last(cos), _unit_last(sin)
    q_out, k_out = _new_like(q), _new_like(k)
    rope_into(q, k, cos, sin, q_out, k_out)
    return q_out, k_out


def _backward(
    dq_out: torch.Tensor | None, dk_out: torch.Tensor | None, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(dq, dk) from the outputs' gradients; ``None`` in, ``None`` out."""
    dq_out = None if dq_out is None else _unit_last(dq_out)
    dk_out = None if dk_out is None else _unit_last(dk_out)
    dq = None if dq_out is None else _new_like(dq_out)
    dk = None if dk_out is None else _new_like(dk_out)
    if dq_out is not None or dk_out is not None:
        rope_into(dq_out, dk_out, _unit_last(cos), _unit_last(sin), dq, dk, backward=True)
    return dq, dk


class _RoPEFunction(torch.autograd.Function):
    """The eager autograd path: launches directly, without the op dispatcher's cost.  Saves
    only the tables (the map is linear: the backward needs neither q nor k)."""

    @staticmethod
    def forward(ctx, q, k, cos, sin):  # type: ignore[no-untyped-def,override]
        ctx.save_for_backward(cos, sin)
        return _forward(q, k, cos, sin)

    @staticmethod
    def backward(ctx, dq_out, dk_out):  # type: ignore[no-untyped-def,override]
        # Grad mode is on here only under create_graph=True.  The check costs one C call where
        # once_differentiable's wrapper cost ~15 µs of the eager step's host time.
        if torch.is_grad_enabled():
            raise RuntimeError(f"{FN}: not twice differentiable (its backward ran with create_graph=True)")
        cos, sin = ctx.saved_tensors
        want_q, want_k = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        dq, dk = _backward(dq_out if want_q else None, dk_out if want_k else None, cos, sin)
        return dq, dk, None, None


# =============================================================================== registered ops
# What torch.compile, torch.export, FakeTensor and functorch see: opaque ops with fake
# implementations and autograd.  The backward is its own op (the same kernel, BACKWARD set)
# so a compiled training step traces it too; a gradient not wanted is passed and returned
# as an empty tensor (shape [0]).


@torch.library.custom_op("labnotes::rope", mutates_args=())
def _rope_op(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    return _forward(q, k, cos, sin)


@_rope_op.register_fake
def _(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _new_like(q), _new_like(k)


@torch.library.custom_op("labnotes::rope_backward", mutates_args=())
def _rope_backward_op(
    dq_out: torch.Tensor, dk_out: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, want_q: bool, want_k: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    dq, dk = _backward(dq_out if want_q else None, dk_out if want_k else None, cos, sin)
    return (dq if dq is not None else dq_out.new_empty(0)), (dk if dk is not None else dk_out.new_empty(0))


@_rope_backward_op.register_fake
def _(
    dq_out: torch.Tensor, dk_out: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, want_q: bool, want_k: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    dq = _new_like(dq_out) if want_q else dq_out.new_empty(0)
    dk = _new_like(dk_out) if want_k else dk_out.new_empty(0)
    return dq, dk


def _setup_context(ctx, inputs, output) -> None:  # type: ignore[no-untyped-def]
    q, k, cos, sin = inputs
    ctx.save_for_backward(cos, sin)
    ctx.shapes, ctx.dtype = (q.shape, k.shape), q.dtype


def _op_backward(ctx, dq_out: torch.Tensor | None, dk_out: torch.Tensor | None):  # type: ignore[no-untyped-def]
    cos, sin = ctx.saved_tensors
    want_q, want_k = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    if not (want_q or want_k):
        return None, None, None, None
    q_shape, k_shape = ctx.shapes
    # An output autograd left without a gradient has a zero one.
    if dq_out is None:
        dq_out = torch.zeros(q_shape, device=cos.device, dtype=ctx.dtype)
    if dk_out is None:
        dk_out = torch.zeros(k_shape, device=cos.device, dtype=ctx.dtype)
    dq, dk = _rope_backward_op(dq_out, dk_out, cos, sin, want_q, want_k)
    return (dq if want_q else None), (dk if want_k else None), None, None


_rope_op.register_autograd(_op_backward, setup_context=_setup_context)

# =============================================================================== functional


def _check_table(name: str, t: torch.Tensor, q: torch.Tensor) -> None:
    check_tensor(FN, name, t)
    check_float(FN, name, t)
    check_same_device(FN, name, t, "q", q)
    batch, _, seq, width = q.shape
    ok = (t.dim() == 2 or (t.dim() == 3 and t.shape[0] in (1, batch))) and tuple(t.shape[-2:]) == (seq, width)
    if not ok:
        raise ValueError(
            f"{FN}: {name} has shape {list(t.shape)}; expected [T, D], [1, T, D] or [B, T, D] = "
            f"[{seq}, {width}], [1, {seq}, {width}] or [{batch}, {seq}, {width}] (q is {list(q.shape)})"
        )


def _plainly_valid(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> bool:
    """True for a call every check below would pass, in a few µs (the checks one by one
    cost about three times that): the common case's fast path.  False sends the call
    through the checks, which name what is wrong."""
    if not (
        isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor)
        and isinstance(cos, torch.Tensor) and isinstance(sin, torch.Tensor)
    ):  # fmt: skip
        return False
    qs, ks, cs, ss = q.shape, k.shape, cos.shape, sin.shape
    dtype = q.dtype
    if len(qs) != 4 or len(ks) != 4 or k.dtype != dtype or dtype not in ACCEPTED:
        return False
    if cos.dtype not in ACCEPTED or sin.dtype not in ACCEPTED:
        return False
    batch, _, seq, width = qs
    if ks[0] != batch or ks[2] != seq or ks[3] != width or width % 2:
        return False
    for t in (cs, ss):
        if len(t) == 3:
            if (t[0] != 1 and t[0] != batch) or t[1] != seq or t[2] != width:
                return False
        elif len(t) != 2 or t[0] != seq or t[1] != width:
            return False
    if not (q.is_cuda or q.is_meta):  # the interpreter's CPU tensors take the checks
        return False
    device = q.device
    return k.device == device and cos.device == device and sin.device == device


def check_args(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    """Validate :func:`apply_rotary_pos_emb`'s arguments (see there for what is raised)."""
    if _plainly_valid(q, k, cos, sin):
        return
    check_tensor(FN, "q", q)
    check_tensor(FN, "k", k)
    check_float(FN, "q", q)
    check_float(FN, "k", k)
    check_device(FN, "q", q)
    check_same_device(FN, "k", k, "q", q)
    if q.dim() != 4:
        raise ValueError(f"{FN}: q must be 4-D [B, Hq, T, D], got shape {list(q.shape)}")
    if k.dim() != 4:
        raise ValueError(f"{FN}: k must be 4-D [B, Hk, T, D], got shape {list(k.shape)}")
    if k.dtype != q.dtype:
        raise TypeError(f"{FN}: k has dtype {k.dtype}; expected q's {q.dtype}")
    for i, what in ((0, "batch"), (2, "sequence length"), (3, "head dimension")):
        if k.shape[i] != q.shape[i]:
            raise ValueError(
                f"{FN}: k has {what} {k.shape[i]} but q has {q.shape[i]} (q {list(q.shape)}, k {list(k.shape)})"
            )
    if q.shape[3] % 2:
        raise ValueError(f"{FN}: q and k have an odd head dimension D = {q.shape[3]}; RoPE rotates pairs (D even)")
    _check_table("cos", cos, q)
    _check_table("sin", sin, q)


def apply_rotary_pos_emb(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hugging Face's ``apply_rotary_pos_emb(q, k, cos, sin)`` (``unsqueeze_dim=1``) in one
    launch: ``q * cos + rotate_half(q) * sin`` and the same for ``k``; differentiable in
    ``q`` and ``k`` and compilable.

    Args:
        q: ``[B, Hq, T, D]`` (batch, query heads, positions, head dimension; ``D`` even), any
            strides: a transposed view of a ``[B, T, Hq, D]`` projection is read in place
            (only a last dimension with a stride other than 1 costs a copy).  float16,
            bfloat16, float32 or float64, on a CUDA GPU (any of them: the kernel runs on
            ``q``'s device) or on the CPU under ``TRITON_INTERPRET=1``.
        k: ``[B, Hk, T, D]``, ``q``'s dtype and device; ``Hk`` may differ from ``Hq`` (GQA).
        cos, sin: ``[T, D]``, ``[1, T, D]`` or ``[B, T, D]`` (shared by every head; by every
            batch entry unless ``[B, T, D]``), any accepted float dtype each, any strides, on
            ``q``'s device.  The halves of ``D`` need not be equal (the general rotation
            ``out1 = x1 c1 - x2 s1``, ``out2 = x2 c2 + x1 s2`` is computed).

    Returns: ``(q_rot, k_rot)``, new tensors of ``q``'s and ``k``'s shapes, dtype and memory
    layout (as torch's elementwise ops lay out results: a transposed ``[B, T, H, D]`` view in
    gives one back; contiguous where the input is not dense), computed in float32 (float64
    for float64 inputs) from the inputs and the tables cast to it, and rounded once (HF's
    16-bit eager formula rounds after each product; this is the more accurate of the two).
    Non-finite inputs give what the formula gives in float arithmetic (``inf * 0`` is NaN).
    Gradients flow to ``q`` and ``k`` (each only where it is wanted); ``cos`` and ``sin``
    receive none (tables of positions, like Liger-Kernel's RoPE); the backward is not itself
    differentiable in eager mode.

    Raises:
        TypeError: an argument is not a tensor; a dtype is not one of the above; ``k``'s dtype
            differs from ``q``'s.
        ValueError: ``q`` or ``k`` not 4-D; their batch, sequence length or head dimension
            differ; an odd head dimension; ``cos`` or ``sin`` of another shape than the
            three above; a tensor on another device than ``q``; ``q`` on the CPU outside the
            interpreter.
    """
    check_args(q, k, cos, sin)
    if eager_path(q, k, cos, sin):
        if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
            return _RoPEFunction.apply(q, k, cos, sin)
        return _forward(q, k, cos, sin)
    return _rope_op(q, k, cos, sin)
