"""Shared base for row-wise operators: softmax, RMSNorm, the row sum and cross-entropy.

Every row-wise operator reduces over the last dimension of a ``[rows, width]`` view and then
writes an elementwise function of the row and the reduced statistics.  Everything but that
arithmetic lives here, once, and an operator supplies only a :class:`RowOp`: four small jit
functions (the whole-row function of the block plan, the running accumulation over a chunk,
the merge of per-chunk statistics, and the elementwise apply).  Its *extended form* (see
``EXT`` above the kernels) adds, each only where a call has it, a third row input ``c``, a
per-column vector ``w``, a second row output, a per-row statistic output, a finishing step
once per row, and no row output at all: RMSNorm (residual in, weight, updated residual out,
the backward's inverse RMS out) and the row sum use it; softmax, which uses none of it,
compiles to the same code as before it existed.

* **Plans** (:func:`plan_rows`).  A row that fits in registers is loaded once (``block``,
  several narrow rows packed per program when there are many).  A wider row is walked in
  chunks by one program (``looped``: a statistics pass, then a second read, ideally from
  L2, to write), or cut into chunks spread over several programs (``split``: one launch
  writes per-chunk statistics, a second merges them and writes; or both passes in one
  launch whose programs take reduce and then apply items in order from one counter, each
  apply waiting only for its own row, which the eager path of a policy with
  ``one_launch_bytes`` takes on small calls).
  Splitting pays when rows are too few to give every SM a program.  An operator may also
  bring a ``staged`` kernel (``RowOp.staged``: softmax's forward, in Gluon) that holds a row
  of up to ~110 KB in shared memory and reads it once; the planner takes it only where the
  operator has one and the GPU runs it (:meth:`RowCall.plan`).  A reduction *down* the rows (a column sum, which
  RMSNorm's weight gradient needs) has its own plan (:func:`plan_columns`, :func:`column_sum`).
* **Row geometry** (:func:`row_layout`, :func:`row_window`, :func:`window_masks`).  Triton
  issues a 16-byte load only where it can prove the address is 16-byte aligned *and* the
  mask is constant over the vector; a width such as 50257 breaks both, and every load and
  store becomes a 2-byte one.  So rows are read through a window that starts at the 16-byte
  boundary at or before the row's first element, loads are masked per 16-byte group (the
  few neighbouring elements inside a group are read and discarded, never written), whole
  groups are stored as vectors, and the at most two partial groups at a row's ends are
  stored element by element (:func:`edge_offsets`).
* **Launch scaffolding** (:func:`run_rows`, :class:`RowLauncher`).  Grids within the
  hardware's limits (rows beyond 2^31 - 1 programs are launched in batches), scratch for
  split statistics, the device guard for tensors on a GPU other than the current one, and
  the cached launch of :mod:`kernels._launch`.

The width is the model's (hidden size, vocabulary), so everything the plan derives from the
width is a compile-time constant.  The row count changes per batch: the plan reads it only
to choose between kernels, never to specialise one, so a new batch size reuses the compiled
kernel of its plan.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Any

import torch
import triton
import triton.language as tl
from triton import knobs
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait

from kernels._activations import COMPILED, mufu
from kernels._launch import (
    INTERPRETER,
    FastKernel,
    capturing,
    current_device,
    current_stream,
    launch_options,
    resident_programs,
)
from kernels.plans import (
    STAGED,
    VECTOR_BYTES,
    ColumnPlan,
    PlanKind,
    RowPlan,
    RowPolicy,
    cdiv,
    plan_columns,
    plan_rows,
)

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
MAX_GRID_X = 2**31 - 1  # CUDA's limit on grid axis 0; axes 1 and 2 stop at 65535, so only axis 0 is used
ALIGN_NONE, ALIGN_ROWS, ALIGN_WINDOW = 0, 1, 2
_STAGED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@functools.cache
def _capability(index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(index)


# =============================================================================== row views


def as_rows(t: torch.Tensor) -> torch.Tensor:
    """A ``[rows, width]`` view of ``t`` (last dimension contiguous) that keeps its row
    stride instead of copying; leading dimensions that no single stride describes (a
    permuted batch) cost one copy."""
    width = t.shape[-1]
    rows = math.prod(t.shape[:-1])
    try:
        return t.view(rows, width)
    except RuntimeError:
        return t.reshape(rows, width)


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """Multiprocessors of ``device``; the H200's 132 for CPU tensors (the interpreter)."""
    if device.type != "cuda":
        return 132
    return _sm_count(device.index if device.index is not None else current_device())


def row_layout(tensors: Sequence[torch.Tensor]) -> tuple[int, int]:
    """(VEC, ALIGN) for 2-D row tensors read or written together.

    ``VEC``: elements in one 16-byte vector of the narrowest dtype.  ``ALIGN``: ALIGN_ROWS
    when every row of every tensor starts on a 16-byte boundary; ALIGN_WINDOW when rows are
    misaligned but by the same amount in every tensor (one window per row serves them all);
    ALIGN_NONE otherwise (plain element offsets, which Triton cannot vectorize)."""
    vec = VECTOR_BYTES // min(t.element_size() for t in tensors)
    if any(t.data_ptr() % VECTOR_BYTES for t in tensors):
        return vec, ALIGN_NONE
    if tensors[0].shape[0] <= 1:
        return vec, ALIGN_ROWS
    first = tensors[0].stride(0) % vec
    if any(t.stride(0) % vec != first for t in tensors):
        return vec, ALIGN_NONE
    return vec, ALIGN_ROWS if first == 0 else ALIGN_WINDOW


def row_vec(tensors: Sequence[torch.Tensor]) -> int:
    """VEC (see :func:`row_layout`) where every row of every tensor starts on a 16-byte
    boundary, else 1: for kernels that take runtime row strides and show the compiler their
    multiple (``tl.multiple_of``), which it cannot see in a runtime value."""
    vec, align = row_layout(tensors)
    return vec if align == ALIGN_ROWS else 1


# =============================================================================== jit helpers


@triton.jit
def safe_shift(m):
    """The value to subtract before ``exp``: the running max, or 0 where the max is -inf.

    A lane, chunk or row that has seen only ``-inf`` (masked attention scores) has max
    ``-inf``; shifting by it would compute ``exp(-inf - -inf) = exp(nan)``.  Shifting by 0
    gives ``exp(-inf) = 0`` and keeps its sum at 0.  NaN and +inf pass through, so a row
    holding either ends with a NaN sum and NaN outputs, as in ``torch.softmax``."""
    return tl.where(m == float("-inf"), 0.0, m)


@triton.jit
def merge_max_sum(m, s, m_part, s_part):
    """Fold ``[R, B]`` pairs (max, sum of exp(x - max)) into the running ``[R]`` (m, s).
    Raw values x are the pairs (x, 1): ``merge_max_sum(m, s, x, 1.0)``.  One exp per
    element and one rescale of the running sum per block, not per element."""
    m_new = tl.maximum(m, tl.max(m_part, axis=1))
    shift = safe_shift(m_new)
    s = s * exp(m - shift) + tl.sum(s_part * exp(m_part - shift[:, None]), axis=1)
    return m_new, s


@triton.jit
def exp(x):
    """e^x in two instructions for float32 (a multiply and one ``ex2.approx.ftz``: relative
    error about 2^-22, results below 2^-126 flushed to 0).  ``tl.exp`` compiles to the
    non-flushing ``ex2.approx.f32``, which ptxas wraps in four more instructions per element
    to scale denormals: on the wide-row loops that was the issue slots the SM ran out of
    before the memory did.  NaN and +-inf map as ``tl.exp`` maps them; float64 keeps ``tl.exp``."""
    if COMPILED and x.dtype == tl.float32:
        return mufu(x * 1.4426950408889634, "ex2.approx.ftz.f32 $0, $1;")
    else:
        return tl.exp(x)


@triton.jit
def log(x):
    """ln x for float32 in two instructions (one ``lg2.approx.ftz`` and a multiply: absolute
    error about 2^-22 in log2, subnormal inputs read as 0 and give -inf).  ``tl.log`` calls
    libdevice's ``logf``, about twenty instructions with a branch: cross-entropy's per-lane
    statistics took one per lane and step, 16 calls in the loss loop's body (PTX of the
    4096 x 32000 loss plan), where the loss-only forward ran at 1.3 TB/s.  0 -> -inf,
    +inf -> +inf and NaN -> NaN, as ``tl.log``; float64 keeps ``tl.log``."""
    if COMPILED and x.dtype == tl.float32:
        return 0.6931471805599453 * mufu(x, "lg2.approx.ftz.f32 $0, $1;")
    else:
        return tl.log(x)


@triton.jit
def inverse_or_zero(s):
    """1 / s, and 0 for a zero sum (a row of only -inf writes zeros); a NaN sum stays NaN."""
    return tl.where(s == 0.0, 0.0, 1.0 / s)


@triton.jit
def row_window(rows, stride, VEC: tl.constexpr, ALIGN: tl.constexpr):
    """(base, lead) for ``[R]`` int64 row indices: the offset loads of a row start at, and how
    many elements of the previous row precede the row's first element in its window.  The
    base is a multiple of VEC unless ALIGN is ALIGN_NONE."""
    start = rows * stride
    if ALIGN == 2:
        lead = start % VEC
        base = tl.multiple_of(start - lead, VEC)
    elif ALIGN == 1:
        lead = start * 0
        base = tl.multiple_of(start, VEC)
    else:
        lead = start * 0
        base = start
    return base, lead


@triton.jit
def row_bases(rows, a_stride, b_stride, out_stride, VEC: tl.constexpr, ALIGN: tl.constexpr):
    """The window bases of a, b and out for ``[R]`` rows, and the rows' lead, as ``[R, 1]``
    columns (rows read together share one lead: :func:`row_layout` promises it)."""
    a_base, lead = row_window(rows, a_stride, VEC, ALIGN)
    b_base, _lead_b = row_window(rows, b_stride, VEC, ALIGN)
    o_base, _lead_o = row_window(rows, out_stride, VEC, ALIGN)
    return a_base[:, None], b_base[:, None], o_base[:, None], lead[:, None]


@triton.jit
def window_masks(k, lead, WIDTH: tl.constexpr, VEC: tl.constexpr, ALIGN: tl.constexpr, LANE_TILE: tl.constexpr):
    """Masks over window offsets ``k`` of rows with ``lead`` ([R, 1]); ``k`` is ``[R, B]``
    (contiguous along axis 1) or, with LANE_TILE, a ``[LANES, UNROLL]`` lane tile of one row
    (contiguous along axis 0, see :func:`lane_offsets`).
    ``load``: the 16-byte group touches the row (constant per group, so loads vectorize);
    ``inside``: the element is the row's; ``store``: the whole group is the row's."""
    if k.dtype == tl.int32:
        # lead < VEC: with 32-bit offsets every mask compares in 32 bits (64-bit compares
        # and subtractions cost two instructions each, per element of every masked block).
        lead = lead.to(tl.int32)
    pos = k - lead
    inside = (pos >= 0) & (pos < WIDTH)
    if ALIGN == 0:
        return inside, inside, inside
    group = (k // VEC) * VEC - lead
    if LANE_TILE:
        load = tl.max_constancy((group + VEC > 0) & (group < WIDTH), [VEC, 1])
        store = tl.max_constancy((group >= 0) & (group + VEC <= WIDTH), [VEC, 1])
    else:
        load = tl.max_constancy((group + VEC > 0) & (group < WIDTH), [1, VEC])
        store = tl.max_constancy((group >= 0) & (group + VEC <= WIDTH), [1, VEC])
    return load, inside, store


@triton.jit
def edge_offsets(lead, WIDTH: tl.constexpr, VEC: tl.constexpr):
    """Window offsets ([R, 2 VEC]) of the at most two partially filled groups at the ends of
    rows with ``lead`` ([R, 1]), and the mask of their elements that the group-wise store
    skipped.  Stored element by element: 2 VEC lanes per row, not the whole row."""
    e = tl.arange(0, 2 * VEC)[None, :]
    tail = ((lead + WIDTH) // VEC) * VEC
    k = tl.where(e < VEC, e, tail + e - VEC)
    pos = k - lead
    group = (k // VEC) * VEC - lead
    partial = (pos >= 0) & (pos < WIDTH) & ((group < 0) | (group + VEC > WIDTH))
    return k, partial & ((e < VEC) | (tail > 0))


@triton.jit
def _load_ab(
    a_ptr,
    b_ptr,
    a_base,
    b_base,
    k,
    load,
    inside,
    A_CAST: tl.constexpr,
    A_FILL: tl.constexpr,
    HAS_B: tl.constexpr,
    ACC: tl.constexpr,
    POLICY: tl.constexpr,
):
    # The loads of one tile.  Elements of neighbouring rows inside a 16-byte group are read
    # (the group is one vector) and replaced by the fill value, never used.
    a = tl.load(a_ptr + a_base + k, mask=load, other=A_FILL, eviction_policy=POLICY)
    a = tl.where(inside, a.to(A_CAST).to(ACC), A_FILL)
    if HAS_B:
        b = tl.load(b_ptr + b_base + k, mask=load, other=0.0, eviction_policy=POLICY)
        b = tl.where(inside, b.to(ACC), 0.0)
    else:
        b = a
    return a, b


@triton.jit
def _out(v, ptr):
    # The output element type; float64 statistics reach 16-bit outputs through float32 (a
    # direct float64 -> bfloat16 cast is wrong in the Triton interpreter).
    if v.dtype == tl.float64 and ptr.dtype.element_ty != tl.float64:
        v = v.to(tl.float32)
    return v.to(ptr.dtype.element_ty)


@triton.jit
def lane_offsets(i, LANES: tl.constexpr, UNROLL: tl.constexpr, WIDE: tl.constexpr):
    # Window offsets [LANES, UNROLL] of block i (LANES * UNROLL elements): element (l, u) is
    # at i * BLOCK + u * LANES + l.  Threads hold 16-byte runs along the lanes and UNROLL of
    # them each, so folding a block into per-lane statistics (axis 1) never leaves a
    # thread's registers: no shuffles, no shared memory, no barrier per block.  Lanes meet
    # once per row (:func:`lanes_to_row`).
    k = tl.arange(0, UNROLL)[None, :] * LANES + tl.arange(0, LANES)[:, None]
    if WIDE:
        return i.to(tl.int64) * (LANES * UNROLL) + k
    return i * (LANES * UNROLL) + k


@triton.jit
def _load_full(a_ptr, b_ptr, a_base, b_base, k, A_CAST: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr,
               POLICY: tl.constexpr):  # fmt: skip
    # A block wholly inside the row: no masks (a misaligned row's masks cost more
    # instructions per element than the arithmetic).
    a = tl.load(a_ptr + a_base + k, eviction_policy=POLICY).to(A_CAST).to(ACC)
    if HAS_B:  # noqa: SIM108 (a static branch of the jit)
        b = tl.load(b_ptr + b_base + k, eviction_policy=POLICY).to(ACC)
    else:
        b = a
    return a, b


@triton.jit
def _load_lanes(
    a_ptr, b_ptr, a_base, b_base, k, lead, full,
    WIDTH: tl.constexpr, VEC: tl.constexpr, ALIGN: tl.constexpr,
    A_CAST: tl.constexpr, A_FILL: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr, POLICY: tl.constexpr,
):  # fmt: skip
    # A lane tile, masked only where it is not ``full``.
    if full:
        a, b = _load_full(a_ptr, b_ptr, a_base, b_base, k, A_CAST, HAS_B, ACC, POLICY)
    else:
        load, inside, _store = window_masks(k, lead, WIDTH, VEC, ALIGN, True)
        a, b = _load_ab(a_ptr, b_ptr, a_base, b_base, k, load, inside, A_CAST, A_FILL, HAS_B, ACC, POLICY)
    return a, b


@triton.jit
def _store_lanes(out_ptr, o_base, k, v, lead, full, WIDTH: tl.constexpr, VEC: tl.constexpr, ALIGN: tl.constexpr):
    if full:
        tl.store(out_ptr + o_base + k, _out(v, out_ptr))
    else:
        _load, _inside, store = window_masks(k, lead, WIDTH, VEC, ALIGN, True)
        tl.store(out_ptr + o_base + k, _out(v, out_ptr), mask=store)


@triton.jit
def lanes_to_row(m, s, COMBINE: tl.constexpr, ACC: tl.constexpr, M_INIT: tl.constexpr):
    """Fold ``[LANES]`` per-lane statistics into the row's, returned as ``[1]`` splats of
    scalars: statistics in the lanes' layout would make the compiler convert every tile
    they meet to that layout, through shared memory (a splat takes whatever layout its use
    needs).  The lanes reach COMBINE as the transpose of a ``[LANES, 1]`` column, which
    keeps their registers where they are; a ``[1, LANES]`` row was a transpose through
    shared memory (four ``ldmatrix`` and two more barriers a fold, tests/test_codegen.py)."""
    m, s = COMBINE(tl.full((1,), M_INIT, ACC), tl.zeros((1,), ACC), tl.trans(m[:, None]), tl.trans(s[:, None]))
    return tl.zeros((1,), ACC) + tl.max(m, axis=0), tl.zeros((1,), ACC) + tl.max(s, axis=0)


# ------------------------------------------------------------------ the extended form
# EXT (a constexpr bit set; 0 for the two-tile form softmax uses) adds, each only where its
# bit is set, so the two-tile form compiles to exactly what it was:
#   EXT_ON    the op's functions take (a, b, c, w) and apply returns (out, out2); a FINISH
#             turns the row's reduced statistics into what apply needs (once per row)
#   EXT_C     c, a third row input (RMSNorm's residual; the gradient of its second output)
#   EXT_W     w, a vector indexed by column (RMSNorm's weight): every row reads it, so after
#             the first rows it comes from L2; its traffic is one width, not one per row
#   EXT_OUT2  out2, a second row output (RMSNorm's updated residual)
#   EXT_RSTAT rstat[row] = the finished first statistic (RMSNorm's inverse RMS; a row sum)
#   EXT_NOOUT no row output at all: only rstat (a reduction such as the row sum)
#   EXT_IDX   in place of c, a per-row integer idx[row] (cross-entropy's target): the op's c
#             is then the tile's column marker, 1 at column idx[row], 0 at the row's other
#             columns and -1 at lanes outside the row (whose a is the fill); an idx outside
#             [0, width) marks no column.  It exists only in registers
#   EXT_WROW  w is indexed by row, not column: one value per row ([rows]; a per-row scale)
#   EXT_ARGS  the op's accumulate and apply take ARG too (after w), as finish does
# Missing inputs reach the op as the scalars c = 0 and w = 1.

EXT_ON, EXT_C, EXT_W, EXT_OUT2, EXT_RSTAT, EXT_NOOUT = 1, 2, 4, 8, 16, 32
EXT_IDX, EXT_WROW, EXT_ARGS = 64, 128, 256


@triton.jit
def extra_bases(rows, c_stride, out2_stride, VEC: tl.constexpr, ALIGN: tl.constexpr):
    """Window bases of c and out2 for ``[R]`` rows, as ``[R, 1]`` columns (same lead as a's)."""
    c_base, _lead_c = row_window(rows, c_stride, VEC, ALIGN)
    o2_base, _lead_o2 = row_window(rows, out2_stride, VEC, ALIGN)
    return c_base[:, None], o2_base[:, None]


@triton.jit
def row_inputs(c_ptr, w_ptr, c_base, rows, lead, live, EXT: tl.constexpr):
    """The per-row inputs of the extended form, read once per row: with EXT_IDX, ``c_base``
    becomes the window offset of the row's indexed column ([R, 1]; :func:`_load_cw` compares
    tile offsets with it); with EXT_WROW, ``w_ptr`` becomes the row's value of w ([R, 1]).
    Without either bit both pass through unchanged (nothing is loaded)."""
    if EXT & 64:
        idx = tl.load(c_ptr + rows, mask=live, other=-1).to(tl.int64)
        c_base = idx[:, None] + lead
    if EXT & 128:
        w_ptr = tl.load(w_ptr + rows, mask=live, other=0.0)[:, None]
    return c_base, w_ptr


@triton.jit
def _load_cw(c_ptr, w_ptr, c_base, k, lead, load, inside, MASKED: tl.constexpr, EXT: tl.constexpr,
             ALIGN: tl.constexpr, ACC: tl.constexpr, POLICY: tl.constexpr):  # fmt: skip
    # c and w of a tile at window offsets k: masked like a (MASKED) or not (a block wholly
    # inside the row).  w is indexed by column, k - lead, which is k itself unless the row
    # is read through a shifted window.
    if ALIGN == 2:  # noqa: SIM108 (a static branch of the jit)
        wk = k - lead
    else:
        wk = k
    if EXT & 64:  # the column marker of a per-row index (row_inputs made c_base its offset)
        at = c_base
        if k.dtype == tl.int32:
            # Offsets of 32 bits (the row is narrower than 2^31 - 4096): compare in 32 bits,
            # not 64 (two instructions per element fewer).  The clamp keeps an index outside
            # the row outside it (below any offset, or past the row's last one).
            at = tl.minimum(tl.maximum(c_base, -8), 2**31 - 9).to(tl.int32)
        if MASKED:
            c = tl.where(inside, tl.where(k == at, 1.0, 0.0), -1.0).to(ACC)
        else:
            c = tl.where(k == at, 1.0, 0.0).to(ACC)
    elif EXT & 2:
        if MASKED:
            c = tl.load(c_ptr + c_base + k, mask=load, other=0.0, eviction_policy=POLICY)
            c = tl.where(inside, c.to(ACC), 0.0)
        else:
            c = tl.load(c_ptr + c_base + k, eviction_policy=POLICY).to(ACC)
    else:
        c = 0.0
    if EXT & 128:  # one value per row, loaded by row_inputs
        w = w_ptr.to(ACC)
    elif EXT & 4:
        if MASKED:  # noqa: SIM108 (a static branch of the jit)
            w = tl.load(w_ptr + wk, mask=inside, other=0.0).to(ACC)
        else:
            w = tl.load(w_ptr + wk).to(ACC)
    else:
        w = 1.0
    return c, w


@triton.jit
def _load_cw_lanes(c_ptr, w_ptr, c_base, k, lead, full, WIDTH: tl.constexpr, VEC: tl.constexpr,
                   ALIGN: tl.constexpr, EXT: tl.constexpr, ACC: tl.constexpr, POLICY: tl.constexpr):  # fmt: skip
    # As _load_lanes, for c and w (nothing at all in the two-tile form).
    if EXT & 198:  # c, w, a row index or a per-row w
        if full:
            c, w = _load_cw(c_ptr, w_ptr, c_base, k, lead, None, None, False, EXT, ALIGN, ACC, POLICY)
        else:
            load, inside, _store = window_masks(k, lead, WIDTH, VEC, ALIGN, True)
            c, w = _load_cw(c_ptr, w_ptr, c_base, k, lead, load, inside, True, EXT, ALIGN, ACC, POLICY)
    else:
        c, w = 0.0, 1.0
    return c, w


@triton.jit
def _fold(ACCUMULATE: tl.constexpr, m, s, a, b, c, w, EXT: tl.constexpr, ARG: tl.constexpr):
    if EXT & 256:
        m, s = ACCUMULATE(m, s, a, b, c, w, ARG)
    elif EXT:
        m, s = ACCUMULATE(m, s, a, b, c, w)
    else:
        m, s = ACCUMULATE(m, s, a, b)
    return m, s


@triton.jit
def _finish(FINISH: tl.constexpr, m, s, EXT: tl.constexpr, WIDTH: tl.constexpr, ARG: tl.constexpr):
    # Once per row, after the last merge: the statistics apply needs (RMSNorm: the inverse RMS).
    if EXT:
        m, s = FINISH(m, s, WIDTH, ARG)
    return m, s


@triton.jit
def _store_rstat(rstat_ptr, rows, m, mask, EXT: tl.constexpr):
    if EXT & 16:
        tl.store(rstat_ptr + rows, _out(m, rstat_ptr), mask=mask)


@triton.jit
def _emit(APPLY: tl.constexpr, a, b, c, w, m, s, out_ptr, o_base, out2_ptr, o2_base, k, mask, EXT: tl.constexpr,
          ARG: tl.constexpr):  # fmt: skip
    # The outputs of a tile (``mask`` None: all of it).  Two-tile form: apply(a, b, m, s).
    if EXT:
        if EXT & 256:
            y, y2 = APPLY(a, b, c, w, m, s, ARG)
        else:
            y, y2 = APPLY(a, b, c, w, m, s)
        tl.store(out_ptr + o_base + k, _out(y, out_ptr), mask=mask)
        if EXT & 8:
            tl.store(out2_ptr + o2_base + k, _out(y2, out2_ptr), mask=mask)
    else:
        tl.store(out_ptr + o_base + k, _out(APPLY(a, b, m, s), out_ptr), mask=mask)


@triton.jit
def _emit_lanes(APPLY: tl.constexpr, a, b, c, w, m, s, out_ptr, o_base, out2_ptr, o2_base, k, lead, full,
                WIDTH: tl.constexpr, VEC: tl.constexpr, ALIGN: tl.constexpr, EXT: tl.constexpr,
                ARG: tl.constexpr):  # fmt: skip
    if EXT:
        if full:
            _emit(APPLY, a, b, c, w, m, s, out_ptr, o_base, out2_ptr, o2_base, k, None, EXT, ARG)
        else:
            _load, _inside, store = window_masks(k, lead, WIDTH, VEC, ALIGN, True)
            _emit(APPLY, a, b, c, w, m, s, out_ptr, o_base, out2_ptr, o2_base, k, store, EXT, ARG)
    else:
        _store_lanes(out_ptr, o_base, k, APPLY(a, b, m, s), lead, full, WIDTH, VEC, ALIGN)


@triton.jit
def _edges(a_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, a_base, b_base, c_base, o_base, o2_base, lead, m, s,
           live, lo, hi, RANGED: tl.constexpr, WIDTH: tl.constexpr, VEC: tl.constexpr, ALIGN: tl.constexpr,
           ACC: tl.constexpr, A_CAST: tl.constexpr, A_FILL: tl.constexpr, HAS_B: tl.constexpr, APPLY: tl.constexpr,
           EXT: tl.constexpr, ARG: tl.constexpr):  # fmt: skip
    # The at most two partial 16-byte groups at the ends of rows, element by element, where
    # ``live`` allows, and with RANGED only those at window offsets [lo, hi) (a chunk's).
    if ALIGN == 2 or (ALIGN == 1 and WIDTH % VEC != 0):
        ke, edge = edge_offsets(lead, WIDTH, VEC)
        mask = edge & live
        if RANGED:
            mask = mask & (ke >= lo) & (ke < hi)
        ae, be = _load_ab(a_ptr, b_ptr, a_base, b_base, ke, mask, edge, A_CAST, A_FILL, HAS_B, ACC, "")
        ce, we = _load_cw(c_ptr, w_ptr, c_base, ke, lead, mask, edge, True, EXT, ALIGN, ACC, "")
        _emit(APPLY, ae, be, ce, we, m, s, out_ptr, o_base, out2_ptr, o2_base, ke, mask, EXT, ARG)


# =============================================================================== generic row kernels
# Every kernel takes (a, b, c, w, out, out2, rstat): softmax's forward uses a = x (no b);
# its backward a = y, b = dy; the rest only in the extended form (EXT, above), where a
# missing tensor is passed as a and never read.  Integer arguments are int64 and never
# specialized (see kernels/_launch.py).

_INTS = ["n_rows", "a_stride", "b_stride", "c_stride", "out_stride", "out2_stride"]


@triton.jit(do_not_specialize=_INTS)
def row_block_kernel(
    a_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, rstat_ptr,
    n_rows: tl.int64, a_stride: tl.int64, b_stride: tl.int64, c_stride: tl.int64, out_stride: tl.int64,
    out2_stride: tl.int64,
    WIDTH: tl.constexpr, BLOCK: tl.constexpr, ROWS: tl.constexpr, VEC: tl.constexpr, ALIGN: tl.constexpr,
    ACC: tl.constexpr, A_CAST: tl.constexpr, A_FILL: tl.constexpr, HAS_B: tl.constexpr,
    ROW_FN: tl.constexpr, APPLY: tl.constexpr, ACCUMULATE: tl.constexpr,
    EXT: tl.constexpr, FINISH: tl.constexpr, M_INIT: tl.constexpr, ARG: tl.constexpr,
):  # fmt: skip
    # One read of ROWS whole rows into registers and one write: the minimum traffic.
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    live = (rows < n_rows)[:, None]
    a_base, b_base, o_base, lead = row_bases(rows, a_stride, b_stride, out_stride, VEC, ALIGN)
    c_base, o2_base = extra_bases(rows, c_stride, out2_stride, VEC, ALIGN)
    c_base, w_ptr = row_inputs(c_ptr, w_ptr, c_base, rows, lead, rows < n_rows, EXT)
    k = tl.arange(0, BLOCK)[None, :]
    load, inside, store = window_masks(k, lead, WIDTH, VEC, ALIGN, False)
    a, b = _load_ab(a_ptr, b_ptr, a_base, b_base, k, load & live, inside, A_CAST, A_FILL, HAS_B, ACC, "")
    if EXT:
        c, w = _load_cw(c_ptr, w_ptr, c_base, k, lead, load & live, inside, True, EXT, ALIGN, ACC, "")
        m, s = _fold(ACCUMULATE, tl.full((ROWS,), M_INIT, ACC), tl.zeros((ROWS,), ACC), a, b, c, w, EXT, ARG)
        m, s = FINISH(m, s, WIDTH, ARG)
        _store_rstat(rstat_ptr, rows, m, rows < n_rows, EXT)
        if not (EXT & 32):
            _emit(APPLY, a, b, c, w, m, s, out_ptr, o_base, out2_ptr, o2_base, k, store & live, EXT, ARG)
    else:
        out, m, s = ROW_FN(a, b)
        tl.store(out_ptr + o_base + k, _out(out, out_ptr), mask=store & live)
    if not (EXT & 32):
        _edges(a_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, a_base, b_base, c_base, o_base, o2_base, lead, m, s,
               live, 0, 0, False, WIDTH, VEC, ALIGN, ACC, A_CAST, A_FILL, HAS_B, APPLY, EXT, ARG)  # fmt: skip


@triton.jit(do_not_specialize=_INTS)
def row_looped_kernel(
    a_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, rstat_ptr,
    n_rows: tl.int64, a_stride: tl.int64, b_stride: tl.int64, c_stride: tl.int64, out_stride: tl.int64,
    out2_stride: tl.int64,
    WIDTH: tl.constexpr, BLOCK: tl.constexpr, LANES: tl.constexpr, VEC: tl.constexpr, ALIGN: tl.constexpr,
    ACC: tl.constexpr, A_CAST: tl.constexpr, A_FILL: tl.constexpr, HAS_B: tl.constexpr,
    ACCUMULATE: tl.constexpr, COMBINE: tl.constexpr, APPLY: tl.constexpr, STAGES: tl.constexpr,
    EVICT: tl.constexpr, EXT: tl.constexpr, FINISH: tl.constexpr, M_INIT: tl.constexpr, ARG: tl.constexpr,
):  # fmt: skip
    # Pass 1 folds the row block by block into per-lane statistics; pass 2 walks the blocks
    # backwards, so its first reads are the blocks pass 1 loaded last, still in L2 (and pass
    # 1 asked L2 to keep them; pass 2 lets them go).  Fewer rows in flight, so that more of
    # each is still in L2 for pass 2, measured slower: a persistent grid of 1-2 programs per SM
    # walking the rows, with 1 or 3 pipelining stages, took 1.1-1.9x the time of one program
    # per row for cross-entropy at 8192 x 128256 and softmax at 4096 x 50257 (H200,
    # notes/2026-12-02-probe-looped-persist-76c6e5c.log; again, after 2026-11-30's probe
    # without stages).  Blocks wholly inside the row run
    # unmasked; the at most two others (the window's first, the row's last) masked.  An op
    # with no row output (EXT_NOOUT) reads the row once.
    UNROLL: tl.constexpr = BLOCK // LANES
    rows = tl.program_id(0).to(tl.int64) + tl.arange(0, 1)
    a_base, b_base, o_base, lead = row_bases(rows, a_stride, b_stride, out_stride, VEC, ALIGN)
    c_base, o2_base = extra_bases(rows, c_stride, out2_stride, VEC, ALIGN)
    c_base, w_ptr = row_inputs(c_ptr, w_ptr, c_base, rows, lead, rows < n_rows, EXT)
    PAD: tl.constexpr = VEC - 1 if ALIGN == 2 else 0
    NCHUNK: tl.constexpr = (WIDTH + PAD + BLOCK - 1) // BLOCK
    WIDE: tl.constexpr = WIDTH + PAD + BLOCK >= 2**31
    LO: tl.constexpr = 1 if ALIGN == 2 else 0
    HI: tl.constexpr = WIDTH // BLOCK
    TAIL: tl.constexpr = HI if HI > LO else LO
    FIRST: tl.constexpr = "evict_last" if EVICT and not (EXT & 32) else ""
    SECOND: tl.constexpr = "evict_first" if EVICT else ""
    m = tl.full((LANES,), M_INIT, ACC)
    s = tl.zeros((LANES,), ACC)
    for i in tl.range(0, LO):
        k = lane_offsets(i, LANES, UNROLL, WIDE)
        a, b = _load_lanes(a_ptr, b_ptr, a_base, b_base, k, lead, False, WIDTH, VEC, ALIGN,
                           A_CAST, A_FILL, HAS_B, ACC, FIRST)  # fmt: skip
        c, w = _load_cw_lanes(c_ptr, w_ptr, c_base, k, lead, False, WIDTH, VEC, ALIGN, EXT, ACC, FIRST)
        m, s = _fold(ACCUMULATE, m, s, a, b, c, w, EXT, ARG)
    for i in tl.range(LO, HI, num_stages=STAGES):
        k = lane_offsets(i, LANES, UNROLL, WIDE)
        a, b = _load_full(a_ptr, b_ptr, a_base, b_base, k, A_CAST, HAS_B, ACC, FIRST)
        c, w = _load_cw_lanes(c_ptr, w_ptr, c_base, k, lead, True, WIDTH, VEC, ALIGN, EXT, ACC, FIRST)
        m, s = _fold(ACCUMULATE, m, s, a, b, c, w, EXT, ARG)
    for i in tl.range(TAIL, NCHUNK):
        k = lane_offsets(i, LANES, UNROLL, WIDE)
        a, b = _load_lanes(a_ptr, b_ptr, a_base, b_base, k, lead, False, WIDTH, VEC, ALIGN,
                           A_CAST, A_FILL, HAS_B, ACC, FIRST)  # fmt: skip
        c, w = _load_cw_lanes(c_ptr, w_ptr, c_base, k, lead, False, WIDTH, VEC, ALIGN, EXT, ACC, FIRST)
        m, s = _fold(ACCUMULATE, m, s, a, b, c, w, EXT, ARG)
    m, s = lanes_to_row(m, s, COMBINE, ACC, M_INIT)
    m, s = _finish(FINISH, m, s, EXT, WIDTH, ARG)
    _store_rstat(rstat_ptr, rows, m, None, EXT)
    if not (EXT & 32):
        for i in tl.range(0, NCHUNK - TAIL):
            k = lane_offsets(NCHUNK - 1 - i, LANES, UNROLL, WIDE)
            a, b = _load_lanes(a_ptr, b_ptr, a_base, b_base, k, lead, False, WIDTH, VEC, ALIGN,
                               A_CAST, A_FILL, HAS_B, ACC, SECOND)  # fmt: skip
            c, w = _load_cw_lanes(c_ptr, w_ptr, c_base, k, lead, False, WIDTH, VEC, ALIGN, EXT, ACC, SECOND)
            _emit_lanes(APPLY, a, b, c, w, m, s, out_ptr, o_base, out2_ptr, o2_base, k, lead, False,
                        WIDTH, VEC, ALIGN, EXT, ARG)  # fmt: skip
        for i in tl.range(0, HI - LO, num_stages=STAGES):
            k = lane_offsets(HI - 1 - i, LANES, UNROLL, WIDE)
            a, b = _load_full(a_ptr, b_ptr, a_base, b_base, k, A_CAST, HAS_B, ACC, SECOND)
            c, w = _load_cw_lanes(c_ptr, w_ptr, c_base, k, lead, True, WIDTH, VEC, ALIGN, EXT, ACC, SECOND)
            _emit(APPLY, a, b, c, w, m, s, out_ptr, o_base, out2_ptr, o2_base, k, None, EXT, ARG)
        for i in tl.range(0, LO):
            k = lane_offsets(i, LANES, UNROLL, WIDE)
            a, b = _load_lanes(a_ptr, b_ptr, a_base, b_base, k, lead, False, WIDTH, VEC, ALIGN,
                               A_CAST, A_FILL, HAS_B, ACC, SECOND)  # fmt: skip
            c, w = _load_cw_lanes(c_ptr, w_ptr, c_base, k, lead, False, WIDTH, VEC, ALIGN, EXT, ACC, SECOND)
            _emit_lanes(APPLY, a, b, c, w, m, s, out_ptr, o_base, out2_ptr, o2_base, k, lead, False,
                        WIDTH, VEC, ALIGN, EXT, ARG)  # fmt: skip
        _edges(a_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, a_base, b_base, c_base, o_base, o2_base, lead, m, s,
               True, 0, 0, False, WIDTH, VEC, ALIGN, ACC, A_CAST, A_FILL, HAS_B, APPLY, EXT, ARG)  # fmt: skip


@triton.jit
def _split_position(pid, CHUNKS: tl.constexpr, SPAN: tl.constexpr, WIDE: tl.constexpr):
    row = (pid // CHUNKS).to(tl.int64) + tl.arange(0, 1)
    chunk = pid % CHUNKS
    if WIDE:  # noqa: SIM108 (a static branch of the jit, not a value choice)
        first = chunk.to(tl.int64) * SPAN
    else:
        first = chunk * SPAN
    return row, chunk, first


@triton.jit
def _reduce_chunk(
    a_ptr, b_ptr, c_ptr, w_ptr, out2_ptr, stats_ptr, item,
    n_rows, a_stride, b_stride, c_stride, out_stride, out2_stride,
    WIDTH: tl.constexpr, BLOCK: tl.constexpr, LANES: tl.constexpr, VEC: tl.constexpr, ALIGN: tl.constexpr,
    ACC: tl.constexpr, A_CAST: tl.constexpr, A_FILL: tl.constexpr, HAS_B: tl.constexpr,
    ACCUMULATE: tl.constexpr, COMBINE: tl.constexpr, CHUNKS: tl.constexpr, SPAN: tl.constexpr,
    EXT: tl.constexpr, M_INIT: tl.constexpr, ARG: tl.constexpr, EARLY: tl.constexpr,
):  # fmt: skip
    # Chunk ``item`` = (row, chunk) reduces its SPAN blocks and writes the chunk's two
    # statistics (8 bytes in fp32) to stats[row, chunk]; it asks L2 to keep the chunk for the
    # apply pass, which reads it again.  With EARLY (RowOp.early_out2) it also writes the
    # second output, which needs no statistic, and the apply pass reads that one tensor back
    # instead of the inputs it came from (RMSNorm: h instead of x and the residual, half the
    # bytes the apply reads, and the bytes that stay in L2 are the ones just written).
    UNROLL: tl.constexpr = BLOCK // LANES
    PAD: tl.constexpr = VEC - 1 if ALIGN == 2 else 0
    WIDE: tl.constexpr = WIDTH + PAD + BLOCK >= 2**31
    LO: tl.constexpr = 1 if ALIGN == 2 else 0
    HI: tl.constexpr = WIDTH // BLOCK
    POLICY: tl.constexpr = "" if EXT & 32 else "evict_last"
    row, chunk, first = _split_position(item, CHUNKS, SPAN, WIDE)
    a_base, b_base, _o_base, lead = row_bases(row, a_stride, b_stride, out_stride, VEC, ALIGN)
    c_base, o2_base = extra_bases(row, c_stride, out2_stride, VEC, ALIGN)
    c_base, w_ptr = row_inputs(c_ptr, w_ptr, c_base, row, lead, row < n_rows, EXT)
    if SPAN == 1:
        # A chunk of one block is folded as one [1, BLOCK] row tile: one reduction across the
        # program, where per-lane statistics cost a rescale per lane and another merge across
        # lanes (softmax: 33 MUFU instructions a thread for 16 elements against 17, and 296
        # instructions in all; the reduce launch was issue-bound at 64 x 131072, Nsight
        # Compute in notes/2026-12-02-ncu-split-8b70a7c.txt).
        k = first * BLOCK + tl.arange(0, BLOCK)[None, :]
        if (first >= LO) & (first < HI):
            a, b = _load_full(a_ptr, b_ptr, a_base, b_base, k, A_CAST, HAS_B, ACC, POLICY)
            c, w = _load_cw(c_ptr, w_ptr, c_base, k, lead, None, None, False, EXT, ALIGN, ACC, POLICY)
            _early(EARLY, a, b, c, w, out2_ptr, o2_base, k, None)
        else:
            load, inside, _store = window_masks(k, lead, WIDTH, VEC, ALIGN, False)
            a, b = _load_ab(a_ptr, b_ptr, a_base, b_base, k, load, inside, A_CAST, A_FILL, HAS_B, ACC, POLICY)
            c, w = _load_cw(c_ptr, w_ptr, c_base, k, lead, load, inside, True, EXT, ALIGN, ACC, POLICY)
            _early(EARLY, a, b, c, w, out2_ptr, o2_base, k, inside)
        m, s = _fold(ACCUMULATE, tl.full((1,), M_INIT, ACC), tl.zeros((1,), ACC), a, b, c, w, EXT, ARG)
    else:
        m = tl.full((LANES,), M_INIT, ACC)
        s = tl.zeros((LANES,), ACC)
        for j in tl.range(0, SPAN):
            i = first + j
            k = lane_offsets(i, LANES, UNROLL, WIDE)
            whole = (i >= LO) & (i < HI)
            a, b = _load_lanes(a_ptr, b_ptr, a_base, b_base, k, lead, whole, WIDTH, VEC, ALIGN,
                               A_CAST, A_FILL, HAS_B, ACC, POLICY)  # fmt: skip
            c, w = _load_cw_lanes(c_ptr, w_ptr, c_base, k, lead, whole, WIDTH, VEC, ALIGN, EXT, ACC, POLICY)
            if EARLY is not None:
                if whole:
                    _early(EARLY, a, b, c, w, out2_ptr, o2_base, k, None)
                else:
                    _load, inside, _store = window_masks(k, lead, WIDTH, VEC, ALIGN, True)
                    _early(EARLY, a, b, c, w, out2_ptr, o2_base, k, inside)
            m, s = _fold(ACCUMULATE, m, s, a, b, c, w, EXT, ARG)
        m, s = lanes_to_row(m, s, COMBINE, ACC, M_INIT)
    slot = stats_ptr + (row * CHUNKS + chunk) * 2
    tl.store(slot, m)
    tl.store(slot + 1, s)


@triton.jit
def _early(EARLY: tl.constexpr, a, b, c, w, out2_ptr, o2_base, k, mask):
    # The reduce pass's write of the second output (RowOp.early_out2), element by element
    # inside the row where ``mask`` is given (a tile at the row's ends: the apply pass reads
    # every element back, the partial 16-byte groups included).
    if EARLY is not None:
        tl.store(out2_ptr + o2_base + k, _out(EARLY(a, b, c, w), out2_ptr), mask=mask)


@triton.jit
def _merge_row_stats(
    stats_ptr, row, CHUNKS: tl.constexpr, COMBINE: tl.constexpr, ACC: tl.constexpr, CACHE: tl.constexpr,
    M_INIT: tl.constexpr,
):  # fmt: skip
    # Every program of a row merges the row's CHUNKS statistics itself (a few hundred bytes,
    # tiny next to its chunk) instead of a third launch doing it once per row.
    CP2: tl.constexpr = triton.next_power_of_2(CHUNKS)
    c = tl.arange(0, CP2)[None, :]
    slots = stats_ptr + (row[:, None] * CHUNKS + c) * 2
    m_c = tl.load(slots, mask=c < CHUNKS, other=M_INIT, cache_modifier=CACHE)
    s_c = tl.load(slots + 1, mask=c < CHUNKS, other=0.0, cache_modifier=CACHE)
    m, s = COMBINE(tl.full((1,), M_INIT, ACC), tl.zeros((1,), ACC), m_c, s_c)
    # Back through scalars: statistics laid out like the small [1, CHUNKS] tile would make the
    # compiler convert every [1, BLOCK] tile they meet to that layout, through shared memory.
    # A splat of a scalar takes whatever layout its use needs.
    return tl.zeros((1,), ACC) + tl.max(m, axis=0), tl.zeros((1,), ACC) + tl.max(s, axis=0)


@triton.jit
def _apply_chunk(
    a_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, rstat_ptr, stats_ptr, item,
    n_rows, a_stride, b_stride, c_stride, out_stride, out2_stride,
    WIDTH: tl.constexpr, BLOCK: tl.constexpr, LANES: tl.constexpr, VEC: tl.constexpr, ALIGN: tl.constexpr,
    ACC: tl.constexpr, A_CAST: tl.constexpr, A_FILL: tl.constexpr, HAS_B: tl.constexpr,
    COMBINE: tl.constexpr, APPLY: tl.constexpr, CHUNKS: tl.constexpr, SPAN: tl.constexpr,
    EXT: tl.constexpr, FINISH: tl.constexpr, M_INIT: tl.constexpr, ARG: tl.constexpr, WAIT: tl.constexpr,
    READS_OUT2: tl.constexpr,
):  # fmt: skip
    # Chunk ``item`` merges its row's statistics and writes its outputs, reading the chunk
    # again (from L2, where the reduce pass asked to keep it).  WAIT: launched as a
    # programmatic dependent of the reduce launch, the program reads its first block (the
    # input, which the reduce does not write) before it waits for the reduce's statistics;
    # with READS_OUT2 its input is the reduce's second output, so it waits first.
    UNROLL: tl.constexpr = BLOCK // LANES
    PAD: tl.constexpr = VEC - 1 if ALIGN == 2 else 0
    WIDE: tl.constexpr = WIDTH + PAD + BLOCK >= 2**31
    LO: tl.constexpr = 1 if ALIGN == 2 else 0
    HI: tl.constexpr = WIDTH // BLOCK
    row, chunk, first = _split_position(item, CHUNKS, SPAN, WIDE)
    if EXT & 32:  # no row output: one program per row merges and writes rstat
        if WAIT:
            gdc_wait()
        m, s = _merge_row_stats(stats_ptr, row, CHUNKS, COMBINE, ACC, ".cg", M_INIT)
        m, s = _finish(FINISH, m, s, EXT, WIDTH, ARG)
        _store_rstat(rstat_ptr, row, m, chunk == 0, EXT)
    else:
        a_base, b_base, o_base, lead = row_bases(row, a_stride, b_stride, out_stride, VEC, ALIGN)
        c_base, o2_base = extra_bases(row, c_stride, out2_stride, VEC, ALIGN)
        c_base, w_ptr = row_inputs(c_ptr, w_ptr, c_base, row, lead, row < n_rows, EXT)
        full = (first >= LO) & (first < HI)
        k = lane_offsets(first, LANES, UNROLL, WIDE)
        if WAIT and READS_OUT2:
            gdc_wait()
        a, b = _load_lanes(a_ptr, b_ptr, a_base, b_base, k, lead, full, WIDTH, VEC, ALIGN,
                           A_CAST, A_FILL, HAS_B, ACC, "evict_first")  # fmt: skip
        c, w = _load_cw_lanes(c_ptr, w_ptr, c_base, k, lead, full, WIDTH, VEC, ALIGN, EXT, ACC, "evict_first")
        if WAIT and not READS_OUT2:
            gdc_wait()
        m, s = _merge_row_stats(stats_ptr, row, CHUNKS, COMBINE, ACC, ".cg", M_INIT)
        m, s = _finish(FINISH, m, s, EXT, WIDTH, ARG)
        _store_rstat(rstat_ptr, row, m, chunk == 0, EXT)
        _emit_lanes(APPLY, a, b, c, w, m, s, out_ptr, o_base, out2_ptr, o2_base, k, lead, full,
                    WIDTH, VEC, ALIGN, EXT, ARG)  # fmt: skip
        for j in tl.range(1, SPAN):
            i = first + j
            full = (i >= LO) & (i < HI)
            k = lane_offsets(i, LANES, UNROLL, WIDE)
            a, b = _load_lanes(a_ptr, b_ptr, a_base, b_base, k, lead, full, WIDTH, VEC, ALIGN,
                               A_CAST, A_FILL, HAS_B, ACC, "evict_first")  # fmt: skip
            c, w = _load_cw_lanes(c_ptr, w_ptr, c_base, k, lead, full, WIDTH, VEC, ALIGN, EXT, ACC, "evict_first")
            _emit_lanes(APPLY, a, b, c, w, m, s, out_ptr, o_base, out2_ptr, o2_base, k, lead, full,
                        WIDTH, VEC, ALIGN, EXT, ARG)  # fmt: skip
        _edges(a_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, a_base, b_base, c_base, o_base, o2_base, lead, m, s,
               True, first * BLOCK, (first + SPAN) * BLOCK, True, WIDTH, VEC, ALIGN, ACC, A_CAST, A_FILL, HAS_B,
               APPLY, EXT, ARG)  # fmt: skip


@triton.jit(do_not_specialize=_INTS)
def row_split_reduce_kernel(
    a_ptr, b_ptr, c_ptr, w_ptr, out2_ptr, stats_ptr,
    n_rows: tl.int64, a_stride: tl.int64, b_stride: tl.int64, c_stride: tl.int64, out_stride: tl.int64,
    out2_stride: tl.int64,
    WIDTH: tl.constexpr, BLOCK: tl.constexpr, LANES: tl.constexpr, VEC: tl.constexpr, ALIGN: tl.constexpr,
    ACC: tl.constexpr, A_CAST: tl.constexpr, A_FILL: tl.constexpr, HAS_B: tl.constexpr,
    ACCUMULATE: tl.constexpr, COMBINE: tl.constexpr, CHUNKS: tl.constexpr, SPAN: tl.constexpr,
    EXT: tl.constexpr, FINISH: tl.constexpr, M_INIT: tl.constexpr, ARG: tl.constexpr, EARLY: tl.constexpr,
):  # fmt: skip
    # One program per (row, chunk).
    if COMPILED:  # the apply launch may start as this one's last programs run
        gdc_launch_dependents()
    _reduce_chunk(a_ptr, b_ptr, c_ptr, w_ptr, out2_ptr, stats_ptr, tl.program_id(0),
                  n_rows, a_stride, b_stride, c_stride, out_stride, out2_stride,
                  WIDTH, BLOCK, LANES, VEC, ALIGN, ACC, A_CAST, A_FILL, HAS_B, ACCUMULATE, COMBINE, CHUNKS, SPAN,
                  EXT, M_INIT, ARG, EARLY)  # fmt: skip


@triton.jit(do_not_specialize=_INTS)
def row_split_apply_kernel(
    a_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, rstat_ptr, stats_ptr,
    n_rows: tl.int64, a_stride: tl.int64, b_stride: tl.int64, c_stride: tl.int64, out_stride: tl.int64,
    out2_stride: tl.int64,
    WIDTH: tl.constexpr, BLOCK: tl.constexpr, LANES: tl.constexpr, VEC: tl.constexpr, ALIGN: tl.constexpr,
    ACC: tl.constexpr, A_CAST: tl.constexpr, A_FILL: tl.constexpr, HAS_B: tl.constexpr,
    COMBINE: tl.constexpr, APPLY: tl.constexpr, CHUNKS: tl.constexpr, SPAN: tl.constexpr,
    EXT: tl.constexpr, FINISH: tl.constexpr, M_INIT: tl.constexpr, ARG: tl.constexpr,
    READS_OUT2: tl.constexpr,
):  # fmt: skip
    # One program per (row, chunk), a programmatic dependent of the reduce launch: that hides
    # the gap between the launches, a few µs that rows of a few hundred KB cannot afford
    # (gdc_wait returns at once without a dependent launch).  READS_OUT2: a is the reduce's
    # second output (launched with a = out2 and the extended flags of a one-input call).  An
    # op with no row output (EXT_NOOUT) has only the merge to do: one program per row, the
    # item of its first chunk (a program per chunk would each read the row's statistics and
    # all but one throw them away: 2048 programs for 16 rows of 1048576).
    item = tl.program_id(0).to(tl.int64) * CHUNKS if EXT & 32 else tl.program_id(0)  # a batch may hold 2^31 items
    _apply_chunk(a_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, rstat_ptr, stats_ptr, item,
                 n_rows, a_stride, b_stride, c_stride, out_stride, out2_stride,
                 WIDTH, BLOCK, LANES, VEC, ALIGN, ACC, A_CAST, A_FILL, HAS_B, COMBINE, APPLY, CHUNKS, SPAN,
                 EXT, FINISH, M_INIT, ARG, COMPILED, READS_OUT2)  # fmt: skip


@triton.jit(do_not_specialize=_INTS)
def row_split_one_launch_kernel(
    a_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, rstat_ptr, stats_ptr, sync_ptr,
    n_rows: tl.int64, a_stride: tl.int64, b_stride: tl.int64, c_stride: tl.int64, out_stride: tl.int64,
    out2_stride: tl.int64,
    WIDTH: tl.constexpr, BLOCK: tl.constexpr, LANES: tl.constexpr, VEC: tl.constexpr, ALIGN: tl.constexpr,
    ACC: tl.constexpr, A_CAST: tl.constexpr, A_FILL: tl.constexpr, HAS_B: tl.constexpr,
    ACCUMULATE: tl.constexpr, COMBINE: tl.constexpr, APPLY: tl.constexpr, CHUNKS: tl.constexpr, SPAN: tl.constexpr,
    EXT: tl.constexpr, FINISH: tl.constexpr, M_INIT: tl.constexpr, ARG: tl.constexpr, EARLY: tl.constexpr,
):  # fmt: skip
    # The split in one launch, its work handed out in order from one counter: tickets
    # [0, n) are the (row, chunk) reduce items, [n, 2n) the apply items, row by row.  A
    # program takes a ticket, does the item, takes the next.  An apply item waits only for
    # its own row's reduce items (a counter per row), so the DRAM reads of the last rows'
    # reduce overlap the first rows' apply (its reads from L2 and its DRAM writes): no grid
    # barrier and no launch boundary draining the GPU between the passes.  It cannot
    # deadlock at any grid size: every reduce ticket is handed out before any apply ticket,
    # to a program that is running and never waits during a reduce item, so a waiting apply
    # item waits only on work in progress.  The next ticket is fetched while the current
    # item runs (its atomic's round trip hidden).
    #
    # sync: [tickets, programs out, ready[0 .. n_rows)], all zero at launch.  The last
    # program out puts them back to zero for the next launch on the stream (a CUDA graph's
    # replays too), so the scratch needs zeroing once, when allocated.
    n_items = (n_rows * CHUNKS).to(tl.int32)  # the launcher keeps 2 n below 2^31
    ready = sync_ptr + 2
    ticket = tl.atomic_add(sync_ptr, 1, sem="relaxed")
    while ticket < 2 * n_items:
        following = tl.atomic_add(sync_ptr, 1, sem="relaxed")
        if ticket < n_items:
            _reduce_chunk(a_ptr, b_ptr, c_ptr, w_ptr, out2_ptr, stats_ptr, ticket.to(tl.int64),
                          n_rows, a_stride, b_stride, c_stride, out_stride, out2_stride,
                          WIDTH, BLOCK, LANES, VEC, ALIGN, ACC, A_CAST, A_FILL, HAS_B, ACCUMULATE, COMBINE,
                          CHUNKS, SPAN, EXT, M_INIT, ARG, EARLY)  # fmt: skip
            tl.debug_barrier()  # the statistics' stores, every thread's, before the release
            tl.atomic_add(ready + ticket // CHUNKS, 1, sem="release")
        else:
            item = ticket - n_items
            seen = tl.atomic_add(ready + item // CHUNKS, 0, sem="acquire")
            while seen < CHUNKS:
                seen = tl.atomic_add(ready + item // CHUNKS, 0, sem="acquire")
            if EARLY is None:
                _apply_chunk(a_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, rstat_ptr, stats_ptr, item.to(tl.int64),
                             n_rows, a_stride, b_stride, c_stride, out_stride, out2_stride,
                             WIDTH, BLOCK, LANES, VEC, ALIGN, ACC, A_CAST, A_FILL, HAS_B, COMBINE, APPLY, CHUNKS,
                             SPAN, EXT, FINISH, M_INIT, ARG, False, False)  # fmt: skip
            else:  # a = the second output, read back without c and not written again (EXT_C | EXT_OUT2 = 10)
                _apply_chunk(out2_ptr, b_ptr, c_ptr, w_ptr, out_ptr, out2_ptr, rstat_ptr, stats_ptr, item.to(tl.int64),
                             n_rows, out2_stride, b_stride, c_stride, out_stride, out2_stride,
                             WIDTH, BLOCK, LANES, VEC, ALIGN, ACC, A_CAST, A_FILL, HAS_B, COMBINE, APPLY, CHUNKS,
                             SPAN, EXT - (EXT & 10), FINISH, M_INIT, ARG, False, True)  # fmt: skip
        ticket = following
    tl.debug_barrier()
    if tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel") == tl.num_programs(0) - 1:
        for r in tl.range(0, n_rows, 1024):
            at = r + tl.arange(0, 1024)
            tl.store(ready + at, tl.zeros((1024,), tl.int32), mask=at < n_rows)
        tl.store(sync_ptr + tl.arange(0, 2), tl.zeros((2,), tl.int32))


# =============================================================================== launching


@dataclass(frozen=True)
class RowOp:
    """What a row-wise operator supplies: its arithmetic as jit functions over ``[R, B]``
    tiles ``a`` and ``b`` (``b`` is ``a`` when the operator has one input) and ``[R]``
    statistics ``(m, s)``.

    ``row(a, b) -> (out, m, s)``: a whole row at once (block plan).
    ``accumulate(m, s, a, b) -> (m, s)``: fold one chunk into the running statistics.
    ``combine(m, s, m_parts, s_parts) -> (m, s)``: fold ``[R, C]`` per-chunk statistics.
    ``apply(a, b, m, s) -> out``: the output elements from the row's statistics.
    ``a_fill``: the value masked elements of ``a`` take (the reduction's identity).

    The extended form (``finish`` set; see ``EXT`` above the kernels) adds the tiles ``c``
    (a third row input) and ``w`` (a per-column vector), both ``0``/``1`` scalars when a call
    has none: ``accumulate(m, s, a, b, c, w)``, ``finish(m, s, WIDTH, ARG) -> (m, s)`` once
    per row after the last merge (``ARG``: a compile-time float of the call, RMSNorm's eps),
    ``apply(a, b, c, w, m, s) -> (out, out2)``; ``row`` is unused (the block plan
    accumulates, finishes and applies).  ``m_init``: the identity of ``m`` (``-inf`` for a
    running max, ``0`` for a sum).  ``has_out``: whether the op writes a row output at all
    (a row sum writes only the per-row ``rstat``).  ``args``: ``accumulate`` and ``apply``
    take ``ARG`` as a last argument too (cross-entropy's soft cap and label smoothing); ``ARG``
    may then be a tuple of floats.  ``staged``: the op's kernel for the ``staged`` plan (a
    Gluon kernel with the row kernels' signature), or None where it has none.
    ``early_out2``: ``(a, b, c, w) -> out2`` where the second output needs no statistic
    (RMSNorm's updated residual, ``a + c``): the split plans then write it in their reduce
    pass and their apply pass reads it back in place of ``a`` and ``c`` (one row of bytes
    to read in the apply instead of two, and the one just written, likeliest still in L2).
    ``apply`` then sees ``a = out2`` as stored (rounded to its dtype) and ``c = 0``."""

    name: str
    row: Any
    accumulate: Any
    combine: Any
    apply: Any
    a_fill: float
    has_b: bool
    finish: Any = None
    m_init: float = float("-inf")
    has_out: bool = True
    args: bool = False
    staged: Any = None
    early_out2: Any = None

    @property
    def extended(self) -> bool:
        return self.finish is not None


@dataclass(frozen=True)
class RowExtras:
    """A call's tensors beyond (a, b, out), for an extended :class:`RowOp`: ``c``
    ``[rows, width]`` (a third input), ``w`` ``[width]`` contiguous (per column), ``out2``
    ``[rows, width]`` (a second output), ``rstat`` ``[rows]`` contiguous (the finished first
    statistic of each row), ``arg`` (the op's compile-time float, or a tuple of floats for an
    op with ``args``).  ``index`` ``[rows]`` integer, in place of ``c``: a per-row column
    index the op sees as a column marker (EXT_IDX); ``w_per_row``: ``w`` is ``[rows]``, one
    value per row (EXT_WROW).  Row tensors share a's 16-byte layout (:func:`row_layout` is
    taken over all of them)."""

    c: torch.Tensor | None = None
    w: torch.Tensor | None = None
    out2: torch.Tensor | None = None
    rstat: torch.Tensor | None = None
    arg: float | tuple[float, ...] = 0.0
    index: torch.Tensor | None = None
    w_per_row: bool = False

    def flags(self, op: RowOp) -> int:
        if not op.extended:
            return 0
        return (EXT_ON | (EXT_C if self.c is not None else 0) | (EXT_W if self.w is not None else 0)
                | (EXT_OUT2 if self.out2 is not None else 0) | (EXT_RSTAT if self.rstat is not None else 0)
                | (0 if op.has_out else EXT_NOOUT) | (EXT_IDX if self.index is not None else 0)
                | (EXT_WROW if self.w is not None and self.w_per_row else 0)
                | (EXT_ARGS if op.args else 0))  # fmt: skip

    def row_tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(t for t in (self.c, self.out2) if t is not None)


_NO_EXTRAS = RowExtras()
ROW_ROLES = ("a", "b", "c", "w", "out", "out2", "rstat")
_ROLE_INDEX = {r: i for i, r in enumerate((*ROW_ROLES, "stats", "sync"))}  # _Prepared.bound_call's pointers
_STRIDE_INDEX = {r: i for i, r in enumerate(("a", "b", "c", "out", "out2"))}  # and its strides

_TL_DTYPES = {
    torch.float16: tl.float16,
    torch.bfloat16: tl.bfloat16,
    torch.float32: tl.float32,
    torch.float64: tl.float64,
}


class RowLauncher:
    """One generic row kernel, launched through :class:`~kernels._launch.FastKernel` on the
    GPU that holds the tensors, in batches when the rows need more than 2^31 - 1 programs."""

    def __init__(self, fn: Any) -> None:
        self.kernel = FastKernel(fn)
        self.uncached = False  # True: Triton's own launch path every time (the dispatch study)

    def __call__(
        self,
        tensors: Sequence[torch.Tensor],
        n_rows: int,
        strides: Sequence[int],
        consts: tuple[Any, ...],
        num_warps: int,
        rows_per_program: int = 1,
        programs_per_row: int = 1,
        pdl: bool = False,
        per_column: Sequence[bool] = (),
        coop: bool = False,
    ) -> None:
        """``per_column[i]``: tensor i is indexed by column, not row (never sliced into batches).
        ``coop``: a cooperative launch of at most as many programs as the GPU holds at once
        (the kernel walks the ``rows * programs_per_row`` items itself)."""
        device = tensors[0].device
        index = device.index if device.type == "cuda" else -1
        per_launch = (MAX_GRID_X // programs_per_row) * rows_per_program
        if n_rows <= per_launch or coop:  # a cooperative grid is capped by the GPU, not the rows
            batches = [(tensors, n_rows)]
        else:  # only past 2^31 - 1 programs: the same kernel over row slices
            keep = list(per_column) + [False] * (len(tensors) - len(per_column))
            batches = [([t if whole else t[r0 : r0 + per_launch] for t, whole in zip(tensors, keep, strict=True)],
                        min(per_launch, n_rows - r0)) for r0 in range(0, n_rows, per_launch)]  # fmt: skip
        guard = index >= 0 and index != current_device()
        for views, rows in batches:
            key = (index, *[(t.dtype, t.data_ptr() % VECTOR_BYTES == 0) for t in views])
            args = (*views, rows, *strides)
            if guard:  # Triton launches on the current device; a tensor elsewhere needs its own
                with torch.cuda.device(index):
                    self._launch(key, index, rows, args, consts, num_warps, rows_per_program, programs_per_row, pdl,
                                 coop)  # fmt: skip
            else:
                self._launch(key, index, rows, args, consts, num_warps, rows_per_program, programs_per_row, pdl, coop)

    def _launch(
        self, key: tuple[Any, ...], index: int, rows: int, args: tuple[Any, ...], consts: tuple[Any, ...],
        num_warps: int, rows_per_program: int, programs_per_row: int, pdl: bool, coop: bool,
    ) -> None:  # fmt: skip
        programs = cdiv(rows, rows_per_program) * programs_per_row
        if coop:
            programs = min(programs, self.kernel.resident(key, args, consts, num_warps, index))
        if self.uncached:
            self.kernel.launch_uncached((programs, 1, 1), args, consts, num_warps, pdl=pdl, coop=coop)
        else:
            self.kernel.launch(key, index, (programs, 1, 1), args, consts, num_warps, pdl=pdl, coop=coop)


_BLOCK_L = RowLauncher(row_block_kernel)
_LOOPED_L = RowLauncher(row_looped_kernel)
_SPLIT_REDUCE_L = RowLauncher(row_split_reduce_kernel)
_SPLIT_APPLY_L = RowLauncher(row_split_apply_kernel)
_ONE_LAUNCH_L = RowLauncher(row_split_one_launch_kernel)
_STAGED_L: dict[Any, RowLauncher] = {}


def _staged_launcher(kernel: Any) -> RowLauncher:
    found = _STAGED_L.get(kernel)
    if found is None:
        found = _STAGED_L[kernel] = RowLauncher(kernel)
    return found


LAUNCHERS = (_BLOCK_L, _LOOPED_L, _SPLIT_REDUCE_L, _SPLIT_APPLY_L, _ONE_LAUNCH_L)


@dataclass(frozen=True)
class _Step:
    """One launch of a plan: its kernel, constexprs, the tensors it takes (by role: a, b,
    c, w, out, out2, rstat, stats, sync) and how many programs it puts on the grid."""

    launcher: RowLauncher
    consts: tuple[Any, ...]
    roles: tuple[str, ...]
    rows_per_program: int = 1
    programs_per_row: int = 1
    pdl: bool = False  # a programmatic dependent launch of the step before it
    coop: bool = False  # a cooperative launch of at most the programs the GPU holds at once
    strides: tuple[str, ...] = ("a", "b", "c", "out", "out2")  # whose row strides the kernel's five are


def _steps(
    op: RowOp, plan: RowPlan, width: int, vec: int, align: int, a_dtype: torch.dtype, out_dtype: torch.dtype,
    ext: int = 0, arg: float | tuple[float, ...] = 0.0,
) -> list[_Step]:  # fmt: skip
    acc = tl.float64 if torch.float64 in (a_dtype, out_dtype) else tl.float32
    # The forward casts its input to the output dtype first (torch's dtype= semantics).
    cast = _TL_DTYPES[out_dtype] if not op.has_b else acc
    shape = (width, plan.block, vec, align, acc, cast, op.a_fill, op.has_b)
    tail = (ext, op.finish, op.m_init, (arg if isinstance(arg, tuple) else float(arg)) if ext else 0.0)
    early = op.early_out2 if ext & EXT_OUT2 else None
    if plan.kind == "block":
        consts = (*shape[:2], plan.rows_per_program, *shape[2:], op.row, op.apply, op.accumulate, *tail)
        return [_Step(_BLOCK_L, consts, ROW_ROLES, rows_per_program=plan.rows_per_program)]
    # Lane tiles (lane_offsets): one 16-byte vector per thread across the block's width.
    lanes = (width, plan.block, min(plan.block, plan.num_warps * 32 * vec), *shape[2:])
    if plan.one_launch:
        roles = (*ROW_ROLES, "stats", "sync")
        consts = (*lanes, op.accumulate, op.combine, op.apply, plan.chunks, plan.span, *tail, early)
        return [_Step(_ONE_LAUNCH_L, consts, roles, 1, plan.chunks, coop=True)]
    if plan.kind == STAGED:
        if op.staged is None or ext or acc == tl.float64:
            raise ValueError(f"{op.name}: no staged plan for this call")
        consts = (width, plan.block, plan.chunks, vec, align, cast, plan.num_warps)
        return [_Step(_staged_launcher(op.staged), consts, ROW_ROLES)]
    if plan.kind == "looped":
        consts = (*lanes, op.accumulate, op.combine, op.apply, plan.stages, plan.evict, *tail)
        return [_Step(_LOOPED_L, consts, ROW_ROLES)]
    reduce = _Step(_SPLIT_REDUCE_L, (*lanes, op.accumulate, op.combine, plan.chunks, plan.span, *tail, early),
                   ("a", "b", "c", "w", "out2", "stats"), 1, plan.chunks)  # fmt: skip
    per_row = 1 if ext & EXT_NOOUT else plan.chunks  # the merge alone: a program per row (as the kernel maps it)
    if early is None:
        apply = _Step(_SPLIT_APPLY_L, (*lanes, op.combine, op.apply, plan.chunks, plan.span, *tail, False),
                      (*ROW_ROLES, "stats"), 1, per_row, pdl=not INTERPRETER)  # fmt: skip
    else:  # a = the reduce's second output, read back without c and not written again
        tail_apply = (ext & ~(EXT_C | EXT_OUT2), *tail[1:], True)
        apply = _Step(_SPLIT_APPLY_L, (*lanes, op.combine, op.apply, plan.chunks, plan.span, *tail_apply),
                      ("out2", "b", "c", "w", "out", "out2", "rstat", "stats"), 1, per_row, pdl=not INTERPRETER,
                      strides=("out2", "b", "c", "out", "out2"))  # fmt: skip
    return [reduce, apply]


def _scratch(plan: RowPlan, n_rows: int, device: torch.device | int, acc64: bool) -> dict[str, torch.Tensor]:
    if plan.kind != "split":
        return {}
    # Per-chunk statistics: 8 bytes per chunk in fp32, a few KB next to the row's data.
    dtype = torch.float64 if acc64 else torch.float32
    shape = (n_rows, plan.chunks, 2)  # by rows: a launch over a batch of rows takes its slice
    if plan.one_launch:
        stats, sync = _one_launch_scratch(n_rows, plan.chunks, device, dtype)
        return {"stats": stats[: n_rows * plan.chunks * 2].view(shape), "sync": sync}
    return {"stats": torch.empty(shape, device=device, dtype=dtype)}


def _compile_ahead(
    op: RowOp, plan: RowPlan, a: torch.Tensor, b: torch.Tensor | None, out: torch.Tensor, extras: RowExtras,
    vec: int, align: int,
) -> None:  # fmt: skip
    """Compile and load the kernels of ``plan`` for these tensors without launching them."""
    n_rows, width = a.shape
    tensors = _row_tensors(a, b, out, extras)
    tensors.update(_scratch(plan, n_rows, a.device, torch.float64 in (a.dtype, out.dtype)))
    for step in _steps(op, plan, width, vec, align, a.dtype, out.dtype, extras.flags(op), extras.arg):
        kernel = step.launcher.kernel
        compiled = kernel.fn.warmup(
            *[tensors[r] for r in step.roles], n_rows, *_strides(tensors, step.strides), grid=(1,),
            **dict(zip(kernel.const_names, step.consts, strict=True)), num_warps=plan.num_warps, num_stages=3,
            **launch_options(step.pdl, step.coop),
        )  # fmt: skip
        compiled._init_handles()


# The one-launch split's scratch on each (device, stream, dtype), reused call after call: its
# statistics (grown as needed; a launch runs after the one before it on its stream has
# finished) and its counters (tickets, programs out, one per row), zeroed when allocated (the
# kernel leaves them as it found them).  A CUDA-graph capture takes buffers of its own, which
# the graph keeps.
_ONE_LAUNCH_SCRATCH: dict[tuple[int, int, torch.dtype], tuple[torch.Tensor, torch.Tensor]] = {}


def _one_launch_scratch(
    n_rows: int, chunks: int, device: torch.device | int, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """(statistics, counters) for a one-launch split over ``n_rows`` rows of ``chunks`` chunks.
    Raises ValueError past 2^30 chunks in one launch (its tickets are 32-bit)."""
    if n_rows * chunks >= 2**30:
        raise ValueError(f"the one-launch split takes fewer than 2^30 chunks a launch, not {n_rows} x {chunks}")
    n_stats, n_sync = n_rows * chunks * 2, 2 + n_rows
    if isinstance(device, int):
        index = device
    else:
        device = torch.device(device)
        index = (device.index if device.index is not None else current_device()) if device.type == "cuda" else -1
    if index < 0 or capturing():
        return (torch.empty(n_stats, device=device, dtype=dtype),
                torch.zeros(n_sync, device=device, dtype=torch.int32))  # fmt: skip
    return _cached_scratch(index, n_stats, n_sync, dtype)


def _cached_scratch(index: int, n_stats: int, n_sync: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    # The current stream's entry of _ONE_LAUNCH_SCRATCH, grown to hold n_stats and n_sync.
    key = (index, current_stream(index), dtype)
    found = _ONE_LAUNCH_SCRATCH.get(key)
    if found is None or found[0].numel() < n_stats or found[1].numel() < n_sync:
        found = _ONE_LAUNCH_SCRATCH[key] = (
            torch.empty(max(n_stats, 4096), device=index, dtype=dtype),
            torch.zeros(max(n_sync, 1024), device=index, dtype=torch.int32),
        )
    return found


def _split_stats(n_rows: int, chunks: int, index: int, dtype: torch.dtype) -> torch.Tensor:
    """The two-launch split's per-chunk statistics (``n_rows * chunks * 2`` values of
    ``dtype``) on GPU ``index`` for :meth:`_Prepared.bound_call`, which serves user calls
    only (not compiled code): the stream's cached buffer (the next call's reduce launch
    starts after this call's apply launch ends, so one buffer serves them all); in a
    CUDA-graph capture a buffer of its own, which the graph keeps.  No counters: the two
    launches need none, and zeroed counters allocated in a capture put a fill kernel in every
    replay (about a microsecond a call: the row sum at 16 x 1048576 bf16 took 11.3 µs against
    10.3 without it, notes/2026-12-03-probe-rowsum-split-719d350.log)."""
    n_stats = n_rows * chunks * 2
    if n_rows * chunks >= 2**30 or capturing():
        return torch.empty(n_stats, device=index, dtype=dtype)
    return _cached_scratch(index, n_stats, 0, dtype)[0]


def _c_role(a: torch.Tensor, extras: RowExtras) -> torch.Tensor:
    # The tensor in c's place: c, the per-row index (EXT_IDX), or a (never read).
    if extras.c is not None:
        return extras.c
    return a if extras.index is None else extras.index


def _row_tensors(
    a: torch.Tensor, b: torch.Tensor | None, out: torch.Tensor, extras: RowExtras
) -> dict[str, torch.Tensor]:
    # Every role filled: a tensor the call lacks is passed as a (or out) and never read.
    bb = a if b is None else b
    return {
        "a": a, "b": bb, "c": _c_role(a, extras), "w": a if extras.w is None else extras.w,
        "out": out, "out2": out if extras.out2 is None else extras.out2,
        "rstat": out if extras.rstat is None else extras.rstat,
    }  # fmt: skip


def _strides(t: dict[str, torch.Tensor], roles: tuple[str, ...] = ("a", "b", "c", "out", "out2")) -> tuple[int, ...]:
    return tuple(t[r].stride(0) for r in roles)


def run_rows(
    op: RowOp, plan: RowPlan, a: torch.Tensor, b: torch.Tensor | None, out: torch.Tensor, align: int, vec: int,
    extras: RowExtras = _NO_EXTRAS,
) -> None:  # fmt: skip
    """Write ``op`` over the ``[rows, width]`` tensors ``a`` (and ``b``, and ``extras``) into
    ``out`` (and ``extras.out2``, ``extras.rstat``).

    The general launch path (any plan, any device, any row count); :class:`RowCall` is the
    eager fast path in front of it.  Row tensors have a contiguous last dimension;
    ``(vec, align)`` come from :func:`row_layout` over the same tensors, which the plan was
    made for."""
    n_rows, width = a.shape
    if n_rows == 0 or width == 0:
        return
    tensors = _row_tensors(a, b, out, extras)
    tensors.update(_scratch(plan, n_rows, a.device, torch.float64 in (a.dtype, out.dtype)))
    for step in _steps(op, plan, width, vec, align, a.dtype, out.dtype, extras.flags(op), extras.arg):
        step.launcher(
            [tensors[r] for r in step.roles], n_rows, _strides(tensors, step.strides), step.consts, plan.num_warps,
            step.rows_per_program, step.programs_per_row, step.pdl,
            [r == "w" and not extras.w_per_row for r in step.roles], step.coop,
        )  # fmt: skip


class _Prepared:
    """The launches of one plan for one layout, dtypes and device, resolved once: each call
    passes raw pointers and strides straight to the compiled kernels' launchers (no argument
    binding, no specialization key, no ``data_ptr()`` or pointer-attribute query per tensor
    inside the launcher, no launch hooks)."""

    __slots__ = ("acc64", "bound", "fast", "index", "one", "pair", "plan", "resident", "single", "steps")

    def __init__(self, plan: RowPlan, steps: list[_Step], index: int, acc64: bool) -> None:
        self.plan, self.steps, self.index, self.acc64 = plan, steps, index, acc64
        self.bound: list[tuple[Any, ...] | None] = [None] * len(steps)
        self.resident = [0] * len(steps)  # a cooperative step's most programs (0 until compiled)
        # One launch over the row roles with no scratch (block and looped plans): the whole
        # call in one tuple, bound after the first launch compiled the kernel.
        self.single: tuple[Any, ...] | None = None
        # The two-launch split without extras, likewise: both launches and the scratch's
        # dtype, bound once both kernels are compiled (see split_call).
        self.pair: tuple[Any, ...] | None = None
        # The one-launch split without extras, likewise (see one_launch_call).
        self.one: tuple[Any, ...] | None = None
        # Every step of any plan, with or without extras, once all are bound (see bound_call).
        self.fast: tuple[Any, ...] | None = None

    def __call__(
        self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, n_rows: int, extras: RowExtras = _NO_EXTRAS
    ) -> None:
        single = self.single
        if single is not None and extras is _NO_EXTRAS:
            launch, function, metadata, coop, pdl, rows_per_program, consts = single
            pa, po, sa, so = a.data_ptr(), out.data_ptr(), a.stride(0), out.stride(0)
            launch(
                -(-n_rows // rows_per_program), 1, 1, current_stream(self.index), function, coop, pdl,
                None, None, metadata, None, None, None,
                pa, b.data_ptr(), pa, pa, po, po, po, n_rows, sa, b.stride(0), sa, so, so, *consts,
            )  # fmt: skip
            return
        if self.pair is not None and extras is _NO_EXTRAS:
            self.split_call(a.data_ptr(), b.data_ptr(), out.data_ptr(), a.stride(0), b.stride(0), out.stride(0), n_rows)
            return
        if self.one is not None and extras is _NO_EXTRAS:
            self.one_launch_call(
                a.data_ptr(), b.data_ptr(), out.data_ptr(), a.stride(0), b.stride(0), out.stride(0), n_rows
            )
            return
        plan = self.plan
        tensors = _row_tensors(a, b, out, extras)
        strides = _strides(tensors)
        if single is not None:
            launch, function, metadata, coop, pdl, rows_per_program, consts = single
            launch(
                -(-n_rows // rows_per_program), 1, 1, current_stream(self.index), function, coop, pdl,
                None, None, metadata, None, None, None,
                *[tensors[r].data_ptr() for r in ROW_ROLES], n_rows, *strides, *consts,
            )  # fmt: skip
            return
        scratch = _scratch(plan, n_rows, self.index, self.acc64) if plan.kind == "split" else None
        stream = -1
        ptrs: dict[str, int] | None = None  # every role's pointer, read once for all the steps
        for i, step in enumerate(self.steps):
            bound = self.bound[i]
            grid = cdiv(n_rows, step.rows_per_program) * step.programs_per_row
            if bound is None:  # the first call of this key: Triton compiles and launches
                everything = {**tensors, **(scratch or {})}
                args = (*[everything[r] for r in step.roles], n_rows, *_strides(tensors, step.strides))
                fn = step.launcher.kernel.fn
                consts = dict(zip(step.launcher.kernel.const_names, step.consts, strict=True))
                options = launch_options(step.pdl, step.coop)
                if step.coop:  # as many programs as the GPU holds at once, known once compiled
                    compiled = fn.warmup(*args, grid=(1,), **consts, num_warps=plan.num_warps, num_stages=3, **options)
                    self.resident[i] = resident_programs(compiled, plan.num_warps, self.index)
                    grid = min(grid, self.resident[i])
                compiled = fn[(grid,)](*args, **consts, num_warps=plan.num_warps, num_stages=3, **options)
                launcher = compiled.run
                if launcher.global_scratch_size == 0 and launcher.profile_scratch_size == 0:
                    bound = (launcher.launch, compiled.function, compiled.packed_metadata,
                             launcher.launch_cooperative_grid, launcher.launch_pdl)  # fmt: skip
                    self.bound[i] = bound
                    if len(self.steps) == 1 and step.roles == ROW_ROLES:
                        self.single = (*bound, step.rows_per_program, step.consts)
                    elif i == 1:
                        self.pair = self.bind_pair()
                    elif step.coop:
                        self.one = (bound, step.consts, self.resident[i], self.plan.chunks,
                                    torch.float64 if self.acc64 else torch.float32)  # fmt: skip
                    if None not in self.bound:
                        self.fast = self.bind_fast()
                continue
            if step.coop:
                grid = min(grid, self.resident[i])
            if stream == -1:
                stream = current_stream(self.index)
            launch, function, metadata, coop, pdl = bound
            if ptrs is None:
                ptrs = {k: v.data_ptr() for k, v in tensors.items()}
                if scratch:
                    ptrs.update({k: v.data_ptr() for k, v in scratch.items()})
            launch(grid, 1, 1, stream, function, coop, pdl, None, None, metadata, None, None, None,
                   *[ptrs[r] for r in step.roles], n_rows, *_strides(tensors, step.strides), *step.consts)  # fmt: skip

    def bind_pair(self) -> tuple[Any, ...] | None:
        """The two-launch split's launches for :meth:`split_call`, once both are bound."""
        if self.plan.kind != "split" or self.plan.one_launch or len(self.steps) != 2 or None in self.bound:
            return None
        if any(step.programs_per_row != self.plan.chunks for step in self.steps):  # its grids are rows x chunks
            return None
        dtype = torch.float64 if self.acc64 else torch.float32
        return (self.bound[0], self.steps[0].consts, self.bound[1], self.steps[1].consts, self.plan.chunks, dtype)

    def bind_fast(self) -> tuple[Any, ...]:
        """Every step's bound launch with getters of its pointers from (a, b, c, w, out, out2,
        rstat, stats, sync) and of its strides from (a, b, c, out, out2), for
        :meth:`bound_call`."""
        steps = tuple(
            (*bound, itemgetter(*[_ROLE_INDEX[r] for r in step.roles]),
             itemgetter(*[_STRIDE_INDEX[r] for r in step.strides]), step.rows_per_program, step.programs_per_row,
             self.resident[i] if step.coop else 0, step.consts)
            for i, (bound, step) in enumerate(zip(self.bound, self.steps, strict=True))
        )  # fmt: skip
        scratch = ("one" if self.plan.one_launch else "split") if self.plan.kind == "split" else None
        return steps, scratch, self.plan.chunks, torch.float64 if self.acc64 else torch.float32

    def bound_call(self, ptrs: tuple[int, ...], strides: tuple[int, ...], n_rows: int) -> None:
        """Any plan's launches, extras included, from the seven row roles' pointers and the
        five row strides (as :meth:`RowCall._lookup` reads them) once :attr:`fast` is bound:
        the split's scratch and the compiled launches, nothing else.  RMSNorm's residual
        call and the row sum take it (tests/test_launch_paths.py checks it argument by
        argument against the general path)."""
        steps, scratch, chunks, dtype = self.fast  # type: ignore[misc]
        if scratch == "split":
            ptrs = (*ptrs, _split_stats(n_rows, chunks, self.index, dtype).data_ptr())
        elif scratch == "one":
            stats, sync = _one_launch_scratch(n_rows, chunks, self.index, dtype)
            ptrs = (*ptrs, stats.data_ptr(), sync.data_ptr())
        stream = current_stream(self.index)
        for launch, function, metadata, coop, pdl, roles, stride_roles, per_program, per_row, most, consts in steps:
            grid = -(-n_rows // per_program) * per_row
            launch(min(grid, most) if most else grid, 1, 1, stream, function, coop, pdl, None, None, metadata,
                   None, None, None, *roles(ptrs), n_rows, *stride_roles(strides), *consts)  # fmt: skip

    def split_call(self, pa: int, pb: int, po: int, sa: int, sb: int, so: int, n_rows: int) -> None:
        """The two-launch split of a call without extras: one scratch allocation (the chunks'
        statistics; not the stream's cached buffer, since compiled code calls this too, and
        under ``mode="reduce-overhead"`` a cache allocated in a warm-up would sit in the CUDA
        graphs' private pool) and the two compiled launches, nothing else.  The general path above cost
        45-51 µs of host time per call on the H200 (4 x 32769 bf16; torch.softmax 10.5;
        notes/probe_split_host.py).  Its launches are checked argument by argument against
        the general path's (tests/test_launch_paths.py); notes/check_split_fast.py checks it
        on a GPU."""
        (l0, f0, m0, c0, p0), consts0, (l1, f1, m1, c1, p1), consts1, chunks, dtype = self.pair  # type: ignore[misc]
        stats = torch.empty(n_rows * chunks * 2, device=self.index, dtype=dtype)
        ps = stats.data_ptr()
        grid = n_rows * chunks
        stream = current_stream(self.index)
        l0(grid, 1, 1, stream, f0, c0, p0, None, None, m0, None, None, None,
           pa, pb, pa, pa, po, ps, n_rows, sa, sb, sa, so, so, *consts0)  # fmt: skip
        l1(grid, 1, 1, stream, f1, c1, p1, None, None, m1, None, None, None,
           pa, pb, pa, pa, po, po, po, ps, n_rows, sa, sb, sa, so, so, *consts1)  # fmt: skip

    def one_launch_call(self, pa: int, pb: int, po: int, sa: int, sb: int, so: int, n_rows: int) -> None:
        """The one-launch split of a call without extras: the stream's cached scratch and one
        cooperative launch (checked against the general path by tests/test_launch_paths.py)."""
        (launch, function, metadata, coop, pdl), consts, resident, chunks, dtype = self.one  # type: ignore[misc]
        stats, sync = _one_launch_scratch(n_rows, chunks, self.index, dtype)
        launch(min(n_rows * chunks, resident), 1, 1, current_stream(self.index), function, coop, pdl,
               None, None, metadata, None, None, None,
               pa, pb, pa, pa, po, po, po, stats.data_ptr(), sync.data_ptr(), n_rows, sa, sb, sa, so, so,
               *consts)  # fmt: skip


_HOOKS = knobs.runtime.launch_enter_hook  # a profiler's hooks need Triton's own launch path
_GENERAL: Any = object()  # RowCall.lane: this key's plan is not one bound launch


class _SplitLane:
    """RowCall.lane's entry for a key whose plan is the split: the prepared one-launch form
    (taken by calls that read at most ``one_launch_bytes``, outside a capture) and the
    two-launch form (the rest), each filled once the first call of its form has bound it."""

    __slots__ = ("one", "pair")

    def __init__(self) -> None:
        self.one: _Prepared | None = None
        self.pair: _Prepared | None = None

    def fill(self, prepared: _Prepared) -> None:
        if prepared.one is not None or (prepared.fast is not None and prepared.plan.one_launch):
            self.one = prepared
        elif prepared.pair is not None or prepared.fast is not None:
            self.pair = prepared


class RowCall:
    """The eager launch path of one :class:`RowOp` under one policy.

    Everything a call's plan and compiled kernels depend on (width, dtypes, which of the
    row-count thresholds the call falls under, the 16-byte alignment of pointers and rows,
    the device, and for an extended op which extra tensors it has and its ``arg``) keys a
    :class:`_Prepared` launch, so that after the first call of a key only pointers, strides
    and the grid are computed.  Calls the fast path does not cover (CPU tensors under the
    interpreter, a tensor on a GPU other than the current one, more rows than one launch
    holds, a launch hook installed by a profiler) take :func:`run_rows`."""

    def __init__(self, op: RowOp, policy: RowPolicy) -> None:
        self.op, self.policy = op, policy
        self._unstaged = replace(policy, staged_row_bytes=(0, 0))
        self._prepared: dict[tuple[Any, ...], _Prepared] = {}
        self._thresholds: dict[int, tuple[float, float, int]] = {}
        self._lane: dict[tuple[Any, ...], Any] = {}  # see lane(): a bound launch, a _SplitLane or _GENERAL

    def lane(self, a: torch.Tensor, b: torch.Tensor | None, out: torch.Tensor) -> None:
        """``self(a, b, out)`` for a call with no extras and the planner's plan, at the least
        host cost.

        Where the prepared launch is one bound kernel launch (block and looped plans), the
        call is that launch and nothing else: the key is read from the tensors, the launch
        taken from a dict of its own, and the compiled launcher called.  A key whose plan is
        the split goes straight to the split's bound launches (one launch or two, by the rule
        ``__call__`` applies), without ``__call__``'s second key and lookup.  Any other plan,
        and every call the dict cannot serve (the first of a key or of a split's form,
        another GPU, a profiler's launch hook), goes to ``__call__``."""
        n_rows, width = a.shape
        index = a.get_device()
        th = self._thresholds.get(index)
        if th is None or not n_rows:
            self(a, b, out)
            return
        pa, po, sa, so = a.data_ptr(), out.data_ptr(), a.stride(0), out.stride(0)
        if b is None:
            pb, sb, b_dtype = pa, sa, None
        else:
            pb, sb, b_dtype = b.data_ptr(), b.stride(0), b.dtype
        key = (width, a.dtype, b_dtype, out.dtype, index, n_rows < th[0], n_rows >= th[1], n_rows <= 1,
               pa & 15, pb & 15, po & 15, sa & 7, sb & 7, so & 7)  # fmt: skip
        hit = self._lane.get(key)
        if type(hit) is _SplitLane:
            # The split, straight to its bound launches: what __call__ would do after a
            # second lookup (the same rule for the one launch, the same key otherwise).
            if index == current_device() and not _HOOKS.calls:
                one = (n_rows < th[0] and n_rows * width * a.element_size() <= self.policy.one_launch_bytes
                       and not capturing())  # fmt: skip
                prepared = hit.one if one else hit.pair
                if prepared is not None and n_rows * prepared.plan.chunks <= MAX_GRID_X:
                    if one:
                        prepared.one_launch_call(pa, pb, po, sa, sb, so, n_rows)
                    else:
                        prepared.split_call(pa, pb, po, sa, sb, so, n_rows)
                    return
            self(a, b, out)
            found = self._lookup(a, b, out, None, _NO_EXTRAS)
            if found is not None:
                hit.fill(found[0])
            return
        if hit is not None:
            if hit is not _GENERAL and n_rows <= hit[6] and index == current_device() and not _HOOKS.calls:
                launch, function, metadata, coop, pdl, rows_per_program, _limit, consts = hit
                launch(
                    -(-n_rows // rows_per_program), 1, 1, current_stream(index), function, coop, pdl,
                    None, None, metadata, None, None, None, pa, pb, pa, pa, po, po, po, n_rows, sa, sb, sa, so, so,
                    *consts,
                )  # fmt: skip
                return
            self(a, b, out)
            return
        self(a, b, out)
        found = self._lookup(a, b, out, None, _NO_EXTRAS) if width else None
        if found is not None:
            single = found[0].single
            if found[0].one is not None or found[0].pair is not None:
                entry = self._lane[key] = _SplitLane()
                entry.fill(found[0])
            elif single is None:
                self._lane[key] = _GENERAL
            else:
                launch, function, metadata, coop, pdl, rows_per_program, consts = single
                limit = MAX_GRID_X * rows_per_program
                self._lane[key] = (launch, function, metadata, coop, pdl, rows_per_program, limit, consts)

    def lane_ext(
        self, a: torch.Tensor, b: torch.Tensor | None, out: torch.Tensor, c: torch.Tensor | None = None,
        w: torch.Tensor | None = None, out2: torch.Tensor | None = None, rstat: torch.Tensor | None = None,
        arg: float = 0.0, eager: bool = True,
    ) -> None:  # fmt: skip
        """``self(a, b, out, None, RowExtras(c=c, w=w, out2=out2, rstat=rstat, arg=arg))`` at
        the least host cost: :meth:`lane` for a call with extras (RMSNorm's residual, weight
        and updated residual, its backward's inverse RMS, the row sum's output), any plan.

        The key is read from the tensors; a hit launches the prepared plan's bound launches
        (:meth:`_Prepared.bound_call`) with no :class:`RowExtras` built and no second lookup.
        The first call of a key (or of a split's one- or two-launch form), another GPU, a
        profiler's launch hook, and more rows than one launch holds go to ``__call__``.
        ``eager=False`` (calls from a registered op: compiled code, tracers): a key whose plan
        is the split goes to ``__call__`` as compiled code every time, since the bound split
        keeps its statistics in a buffer cached across calls, which a warm-up under
        ``mode="reduce-overhead"`` would allocate in the CUDA graphs' private pool; the other
        plans take no scratch and keep the bound launch."""
        n_rows, width = a.shape
        index = a.get_device()
        th = self._thresholds.get(index)
        key = None
        if th is not None and n_rows and width:
            pa, po, sa, so = a.data_ptr(), out.data_ptr(), a.stride(0), out.stride(0)
            pb, sb = (pa, sa) if b is None else (b.data_ptr(), b.stride(0))
            pc, sc = (pa, sa) if c is None else (c.data_ptr(), c.stride(0))
            po2, so2 = (po, so) if out2 is None else (out2.data_ptr(), out2.stride(0))
            pw = pa if w is None else w.data_ptr()
            prs = po if rstat is None else rstat.data_ptr()
            key = (
                width, a.dtype, None if b is None else b.dtype, out.dtype, index, n_rows < th[0], n_rows >= th[1],
                n_rows <= 1, pa & 15, pb & 15, po & 15, sa & 7, sb & 7, so & 7, arg,
                None if c is None else c.dtype, pc & 15, sc & 7, None if w is None else w.dtype, pw & 15,
                None if out2 is None else out2.dtype, po2 & 15, so2 & 7, None if rstat is None else rstat.dtype,
                prs & 15,
            )  # fmt: skip
            hit = self._lane.get(key)
            if hit is not None and hit is not _GENERAL and index == current_device() and not _HOOKS.calls:
                if type(hit) is _SplitLane and not eager:  # compiled code: not the cached scratch
                    hit = None
                elif type(hit) is _SplitLane:  # the rule __call__ applies to the one-launch split
                    one = (n_rows < th[0] and n_rows * width * a.element_size() <= self.policy.one_launch_bytes
                           and not capturing())  # fmt: skip
                    hit = hit.one if one else hit.pair
                if hit is not None and n_rows * hit.plan.chunks <= MAX_GRID_X * hit.plan.rows_per_program:
                    hit.bound_call((pa, pb, pc, pw, po, po2, prs), (sa, sb, sc, so, so2), n_rows)
                    return
        extras = RowExtras(c=c, w=w, out2=out2, rstat=rstat, arg=arg)
        self(a, b, out, None, extras, eager=eager)
        if key is None or arg != arg:  # a NaN arg never finds its key again: not remembered
            return
        found = self._lookup(a, b, out, None, extras, eager)
        if found is None or found[0].fast is None:
            return
        prepared = found[0]
        if prepared.plan.kind == "split":
            entry = self._lane.get(key)
            if type(entry) is not _SplitLane:
                entry = self._lane[key] = _SplitLane()
            entry.fill(prepared)
        else:
            self._lane[key] = prepared

    def plan(
        self, a: torch.Tensor, b: torch.Tensor | None, out: torch.Tensor, force: PlanKind | None,
        extras: RowExtras = _NO_EXTRAS,
    ) -> tuple[RowPlan, int, int]:  # fmt: skip
        """(plan, vec, align) for a call: what the eager path would launch."""
        tensors = (a, out) if b is None else (a, b, out)
        if extras is not _NO_EXTRAS:
            tensors = (*tensors, *extras.row_tensors())
        if not self.op.has_out:
            tensors = tensors[:1] if b is None else tensors[:2]
        vec, align = row_layout(tensors)
        pad = vec - 1 if align == ALIGN_WINDOW else 0
        n_rows, width = a.shape
        staged = self._stages(a, b, out, extras, align)
        if force == STAGED and not staged:
            raise ValueError(
                f"{self.op.name}: plan 'staged' needs an NVIDIA GPU of compute capability 9.x (it is a Gluon "
                "kernel: no interpreter), 16- or 32-bit tensors whose rows share their 16-byte alignment, "
                "and no extras"
            )
        policy = self.policy if staged else self._unstaged
        return plan_rows(n_rows, width, a.element_size(), sm_count(a.device), policy, force, pad), vec, align

    def _stages(
        self, a: torch.Tensor, b: torch.Tensor | None, out: torch.Tensor, extras: RowExtras, align: int
    ) -> bool:  # fmt: skip
        # Whether this call may take the staged plan: the op has a staged kernel, which is
        # Gluon (NVIDIA only, timed on sm_90, no interpreter), a one-input call without
        # extras, 16/32-bit tensors, and rows that share their lead (the kernel reads x and
        # writes y through one window).
        return bool(
            self.op.staged is not None and not INTERPRETER and a.is_cuda and b is None and extras is _NO_EXTRAS
            and align != ALIGN_NONE and a.dtype in _STAGED_DTYPES and out.dtype in _STAGED_DTYPES
            and _capability(a.get_device())[0] == 9
        )  # fmt: skip

    def prepare(
        self, a: torch.Tensor, b: torch.Tensor | None, out: torch.Tensor, force: PlanKind | None = None,
        extras: RowExtras = _NO_EXTRAS,
    ) -> _Prepared | None:  # fmt: skip
        """The prepared launch for a call, or ``None`` where the fast path does not apply."""
        found = self._lookup(a, b, out, force, extras)
        return None if found is None else found[0]

    def _lookup(
        self, a: torch.Tensor, b: torch.Tensor | None, out: torch.Tensor, force: PlanKind | None,
        extras: RowExtras, eager: bool = True,
    ) -> tuple[_Prepared, tuple[int, ...], tuple[int, ...]] | None:  # fmt: skip
        # (prepared launch, the pointers of the seven roles, the five row strides): each read
        # once per call, for the key and for the launch.  A role the call lacks is passed as
        # a (c, w) or out (out2, rstat), as _row_tensors does, and never read.
        index = a.get_device()
        if index < 0 or INTERPRETER or _HOOKS.calls or index != current_device():
            return None
        n_rows, width = a.shape
        th = self._thresholds.get(index)
        if th is None:
            sms = sm_count(a.device)
            policy = self.policy
            th = self._thresholds[index] = (policy.split_rows_per_sm * sms, policy.pack_min_rows_per_sm * sms, sms)
        pa, po, sa, so = a.data_ptr(), out.data_ptr(), a.stride(0), out.stride(0)
        if b is None:
            b_dtype, pb, sb = a.dtype, pa, sa
        else:
            b_dtype, pb, sb = b.dtype, b.data_ptr(), b.stride(0)
        few = n_rows < th[0]
        # Eager calls of the split plan reading up to one_launch_bytes take one launch;
        # a capture keeps the two (only then is the capture state asked: it costs the host),
        # and so do calls from compiled code (``eager=False``): the one launch's scratch is
        # cached across calls, and under torch.compile's CUDA graphs (mode="reduce-overhead")
        # its warm-up runs would allocate that cache in the graphs' private memory pool.
        one = bool(eager and few and force is None
                   and n_rows * width * a.element_size() <= self.policy.one_launch_bytes
                   and not capturing())  # fmt: skip
        key: tuple[Any, ...] = (
            width, a.dtype, b_dtype, out.dtype, index, force, few, n_rows >= th[1], n_rows <= 1,
            pa & 15, pb & 15, po & 15, sa & 7, sb & 7, so & 7, one,
        )  # fmt: skip
        if extras is _NO_EXTRAS:
            ptrs, strides = (pa, pb, pa, pa, po, po, po), (sa, sb, sa, so, so)
        else:
            c = _c_role(a, extras)
            w = a if extras.w is None else extras.w
            o2 = out if extras.out2 is None else extras.out2
            rs = out if extras.rstat is None else extras.rstat
            pc, pw, po2, prs, sc, so2 = (
                c.data_ptr(),
                w.data_ptr(),
                o2.data_ptr(),
                rs.data_ptr(),
                c.stride(0),
                o2.stride(0),
            )
            ptrs, strides = (pa, pb, pc, pw, po, po2, prs), (sa, sb, sc, so, so2)
            key = (*key, extras.flags(self.op), extras.arg, c.dtype, pc & 15, w.dtype, pw & 15, o2.dtype, po2 & 15,
                   rs.dtype, prs & 15, sc & 7, so2 & 7)  # fmt: skip
        prepared = self._prepared.get(key)
        if prepared is None:
            plan, vec, align = self.plan(a, b, out, force, extras)
            if one and plan.kind == "split":
                # A CUDA-graph capture of this call will take the two-launch split: compile and
                # load its kernels now, since a module cannot be loaded while a stream captures
                # (a capture after an eager warm-up is how graphs are usually made).
                _compile_ahead(self.op, plan, a, b, out, extras, vec, align)
                plan = replace(plan, one_launch=True)
            acc64 = torch.float64 in (a.dtype, out.dtype)
            steps = _steps(self.op, plan, width, vec, align, a.dtype, out.dtype, extras.flags(self.op), extras.arg)
            prepared = self._prepared[key] = _Prepared(plan, steps, index, acc64)
        return prepared, ptrs, strides

    def __call__(
        self, a: torch.Tensor, b: torch.Tensor | None, out: torch.Tensor, force: PlanKind | None = None,
        extras: RowExtras = _NO_EXTRAS, eager: bool = True,
    ) -> RowPlan | None:  # fmt: skip
        """Launch the plan for ``out = op(a, b)`` (``force``: a plan kind, or the planner's).
        ``eager=False`` for calls from a registered op (compiled code, tracers): never the
        one-launch split, whose scratch is cached across calls.  Returns the plan, or None
        for an empty tensor."""
        n_rows, width = a.shape
        if n_rows == 0 or width == 0:
            return None
        found = self._lookup(a, b, out, force, extras, eager)
        if found is not None:
            prepared, ptrs, strides = found
            plan = prepared.plan
            if n_rows * plan.chunks <= MAX_GRID_X * plan.rows_per_program:
                single = prepared.single
                if single is not None:  # one launch, no scratch: straight to the compiled launcher
                    launch, function, metadata, coop, pdl, rows_per_program, consts = single
                    launch(
                        -(-n_rows // rows_per_program), 1, 1, current_stream(prepared.index), function, coop, pdl,
                        None, None, metadata, None, None, None, *ptrs, n_rows, *strides, *consts,
                    )  # fmt: skip
                elif prepared.pair is not None and extras is _NO_EXTRAS:
                    pa, pb, _pc, _pw, po, _po2, _prs = ptrs
                    prepared.split_call(pa, pb, po, strides[0], strides[1], strides[3], n_rows)
                elif prepared.one is not None and extras is _NO_EXTRAS:
                    pa, pb, _pc, _pw, po, _po2, _prs = ptrs
                    prepared.one_launch_call(pa, pb, po, strides[0], strides[1], strides[3], n_rows)
                else:
                    prepared(a, a if b is None else b, out, n_rows, extras)
                return plan
        plan, vec, align = self.plan(a, b, out, force, extras)
        run_rows(self.op, plan, a, b, out, align, vec, extras)  # also batches rows past the grid's limit
        return plan


# =============================================================================== column sum


@triton.jit(do_not_specialize=["n_rows", "width", "stride", "y_stride", "rows_per_split"])
def _column_partial_sum(
    x_ptr, y_ptr, scale_ptr, part_ptr, n_rows: tl.int64, width: tl.int64, stride: tl.int64, y_stride: tl.int64,
    rows_per_split: tl.int64, BLOCK_COLS: tl.constexpr, BLOCK_ROWS: tl.constexpr, HAS_Y: tl.constexpr,
    HAS_SCALE: tl.constexpr, ACC: tl.constexpr, VEC: tl.constexpr,
):  # fmt: skip
    # Program (column block, row split) sums its rows of its columns in fp32: x (times y, times
    # scale[row]) read once, BLOCK_COLS fp32 partials written (fp64 for fp64).  The sum runs
    # in BLOCK_ROWS slots per column kept in registers and folds them once at the end: folding
    # every step took a shared-memory reduction and its barriers per BLOCK_ROWS rows (3
    # bar.sync in the loop), which left the loop waiting instead of loading.  The order is
    # fixed (row r of a split goes to slot r mod BLOCK_ROWS), so the bits are the same on every
    # run and for every row count that splits the same way.
    cols = tl.program_id(0) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    split = tl.program_id(1).to(tl.int64)
    acc = tl.zeros((BLOCK_ROWS, BLOCK_COLS), ACC)
    r0 = split * rows_per_split
    # width is a multiple of VEC too: written so, the column mask is visibly constant over
    # each vector, which it must be for the loads to be vectors.
    width_v = (width // VEC) * VEC
    for i in range(0, rows_per_split, BLOCK_ROWS):
        rows = r0 + i + tl.arange(0, BLOCK_ROWS)
        ok = (rows < n_rows) & (rows < r0 + rows_per_split)
        mask = ok[:, None] & (cols < width_v)[None, :]
        # Row bases are multiples of VEC elements (the host checked the strides): 16-byte
        # vector loads.  Without the hint a runtime stride leaves the compiler one element a
        # load (H200, 8192 x 4096 bf16: about 0.7 TB/s).
        xb = tl.multiple_of(rows * stride, VEC)
        v = tl.load(x_ptr + xb[:, None] + cols[None, :], mask=mask, other=0).to(ACC)
        if HAS_Y:
            yb = tl.multiple_of(rows * y_stride, VEC)
            v *= tl.load(y_ptr + yb[:, None] + cols[None, :], mask=mask, other=0).to(ACC)
        if HAS_SCALE:
            v *= tl.load(scale_ptr + rows, mask=ok, other=0).to(ACC)[:, None]
        acc += tl.where(mask, v, 0.0)
    tl.store(part_ptr + split * width + cols, tl.sum(acc, axis=0), mask=cols < width)


@triton.jit(do_not_specialize=["splits", "width"])
def _column_final_sum(
    part_ptr, out_ptr, splits: tl.int64, width: tl.int64, BLOCK_COLS: tl.constexpr, ACC: tl.constexpr
):
    cols = tl.program_id(0) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    acc = tl.zeros((BLOCK_COLS,), ACC)
    for s in range(0, splits):  # a fixed order: the same bits every run
        acc += tl.load(part_ptr + s * width + cols, mask=cols < width, other=0.0)
    if out_ptr.dtype.element_ty.primitive_bitwidth == 16:
        # float64 sums reach a 16-bit output through float32, as torch rounds a double to
        # c10::BFloat16 / Half (and the Triton interpreter's direct float64 -> bfloat16 cast
        # reinterprets bits: 1.5 becomes 9e-41)
        acc = acc.to(tl.float32)
    tl.store(out_ptr + cols, acc.to(out_ptr.dtype.element_ty), mask=cols < width)


def column_sum(
    x: torch.Tensor,
    plan: ColumnPlan | None = None,
    *,
    y: torch.Tensor | None = None,
    row_scale: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Sum of a ``[rows, width]`` tensor (fp16/bf16/fp32, last dimension contiguous) over its
    rows: shape ``[width]``, ``out_dtype`` (default ``x``'s), accumulated in fp32 (fp64 when
    ``x`` or ``out_dtype`` is) in a fixed
    order, so the result has the same bits on every run, and for any row count that splits
    the same way (what RMSNorm's weight gradient needs).  With ``y`` (``x``'s shape, last
    dimension contiguous) the sum is of ``x * y``; with ``row_scale`` (``[rows]``) each row is
    first multiplied by its scale: RMSNorm's ``dw = sum_rows(dy * h * rstd)``.

    Raises ``ValueError`` for a tensor that is not 2-D with a contiguous last dimension, or
    a ``y`` / ``row_scale`` of the wrong shape."""
    if x.dim() != 2 or (x.shape[1] > 1 and x.stride(1) != 1):
        raise ValueError(f"column_sum: x must be 2-D with a contiguous last dimension, got shape {tuple(x.shape)}")
    if y is not None and (y.shape != x.shape or (y.shape[1] > 1 and y.stride(1) != 1)):
        raise ValueError(f"column_sum: y must have x's shape {tuple(x.shape)} and a contiguous last dimension")
    if row_scale is not None and (row_scale.shape != (x.shape[0],) or (x.shape[0] > 1 and row_scale.stride(0) != 1)):
        raise ValueError(f"column_sum: row_scale must be a contiguous vector of {x.shape[0]} rows")
    n_rows, width = x.shape
    out = torch.empty(width, device=x.device, dtype=out_dtype or x.dtype)
    if width == 0:
        return out
    if n_rows == 0:
        return out.zero_()
    plan = plan or plan_columns(n_rows, width, sm_count(x.device))
    wide = torch.float64 if torch.float64 in (x.dtype, out.dtype) else torch.float32
    part = torch.empty((plan.splits, width), device=x.device, dtype=wide)
    acc = tl.float64 if wide == torch.float64 else tl.float32
    col_blocks = cdiv(width, plan.block_cols)
    if x.is_cuda and x.device.index != current_device():  # Triton launches on the current GPU
        with torch.cuda.device(x.device):
            return column_sum(x, plan, y=y, row_scale=row_scale, out_dtype=out_dtype)
    # Both launches through the cached launchers (Triton's own kernel[grid] path costs tens of
    # µs of host time per launch, a training step's eager backward pays it twice).
    yy = x if y is None else y
    scale = x if row_scale is None else row_scale
    index = x.device.index if x.is_cuda else -1
    key = (index, *[(t.dtype, t.data_ptr() % VECTOR_BYTES == 0) for t in (x, yy, scale, part, out)])
    # VEC: the largest power of two, up to a 16-byte vector of the narrower dtype, dividing the
    # width and both row strides (the stride of a single row never multiplies a nonzero row).
    vec = VECTOR_BYTES // min(x.element_size(), yy.element_size())
    bits = width | ((x.stride(0) | yy.stride(0)) if n_rows > 1 else 0)
    vec = min(vec, bits & -bits)
    _COLUMN_PARTIAL.launch(
        key, index, (col_blocks, plan.splits, 1),
        (x, yy, scale, part, n_rows, width, x.stride(0), yy.stride(0), plan.rows_per_split),
        (plan.block_cols, COLUMN_BLOCK_ROWS, y is not None, row_scale is not None, acc, vec), plan.num_warps,
    )  # fmt: skip
    _COLUMN_FINAL.launch(key, index, (col_blocks, 1, 1), (part, out, plan.splits, width), (plan.block_cols, acc), 4)
    return out


COLUMN_BLOCK_ROWS = 16  # row slots per column of the partial sums (see _column_partial_sum)
_COLUMN_PARTIAL = FastKernel(_column_partial_sum)
_COLUMN_FINAL = FastKernel(_column_final_sum)
