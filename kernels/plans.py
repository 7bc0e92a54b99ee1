"""Row plans: which kernel layout covers a ``[rows, width]`` problem (pure Python).

No torch and no Triton here: the site scores the planner on stored grid runs (regret
against the best measured plan in every cell) by calling these same functions, and it
builds without either.  :mod:`kernels._rowwise` launches the plans.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

PlanKind = Literal["block", "looped", "split", "staged"]
PLAN_KINDS: tuple[PlanKind, ...] = ("block", "looped", "split")
STAGED: PlanKind = "staged"  # a plan kind only operators with a staged kernel accept
STAGED_CHUNK = 4096  # elements a staged chunk (cp.async group); 2048-8192 timed within 1%
STAGED_WARPS = 8
STAGED_MAX_BYTES = 224 * 1024  # of the 227 KB a program may hold, room left for the reductions' scratch
MAX_SPLIT_CHUNKS = 1024  # per row: the merge loads a row's statistics as one vector
VECTOR_BYTES = 16  # one 128-bit load or store per thread and step


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class RowPlan:
    """How a ``[rows, width]`` problem is covered.

    ``block``: row elements one program holds at a time.  ``rows_per_program``: narrow rows
    packed into one program (``block`` plan).  ``chunks``: programs per row, and ``span``:
    blocks each of them walks (``split`` plan; a chunk is ``block * span`` elements).
    ``stages``: software-pipelining depth of the chunk loops.  ``evict``: ask L2 to keep a
    row's first read for its second (``looped``).  ``staged``: the whole row held in shared
    memory, ``chunks`` chunks of ``block`` elements copied in at once, one read of the row
    (an operator that has a staged kernel, on a GPU that runs it: :func:`plan_rows`).
    ``one_launch``: the split's two passes in
    one launch (as many programs as the GPU holds at once), taking reduce and then apply items
    in order from one counter, each apply waiting for its own row's reduce items.
    """

    kind: PlanKind
    block: int
    num_warps: int
    rows_per_program: int = 1
    chunks: int = 1
    span: int = 1
    stages: int = 1
    evict: bool = True
    one_launch: bool = False

    def describe(self) -> dict[str, int | str | bool]:
        return {
            "plan": self.kind,
            "block": self.block,
            "num_warps": self.num_warps,
            "rows_per_program": self.rows_per_program,
            "chunks": self.chunks,
            "span": self.span,
            "stages": self.stages,
            "evict": self.evict,
            "one_launch": self.one_launch,
        }

    @property
    def label(self) -> str:
        """A short name: ``block-4096``, ``looped-8192``, ``split-4096x2``, ``split-2048-1launch``."""
        if self.kind == "block":
            return f"block-{self.block}" + (f"-{self.rows_per_program}rows" if self.rows_per_program > 1 else "")
        if self.kind == "looped":
            return f"looped-{self.block}"
        if self.kind == "staged":
            return f"staged-{self.block}x{self.chunks}"
        span = f"x{self.span}" if self.span > 1 else ""
        return f"split-{self.block}{span}" + ("-1launch" if self.one_launch else "")


@dataclass(frozen=True)
class RowPolicy:
    """An operator's thresholds for the planner.

    ``max_block_bytes``: widest row (input bytes, window included) kept whole in registers.
    ``chunk``: elements per step of the looped plan.
    ``split_chunk``: elements per program of the split plan (``narrow_split_chunk`` for rows
    up to ``narrow_split_width`` elements, which have few chunks to spread).
    ``split_rows_per_sm``: split while ``rows < split_rows_per_sm * SMs``.
    ``pack_elems``, ``max_rows_per_program``: narrow rows are packed into programs of up to
    this many elements and rows once there are ``pack_min_rows_per_sm * SMs`` rows or more
    (with fewer, one row per program starts more programs and finishes sooner).
    ``wide_chunk``: the looped plan's chunk for rows of ``wide_width`` elements or more (0:
    ``chunk``).
    ``chunk_waste`` (off when negative; then ``wide_chunk`` applies): the looped plan takes the
    largest chunk of ``chunk, 2 chunk, ...`` up to ``max_chunk`` (and below the row's power of
    two) whose last step is full enough that the padding it walks is at most this share of
    the row.  Longer steps mean fewer passes of the loop's fixed costs, but a width just past
    a step (32769) would walk almost a whole empty step.
    ``looped_warps`` (0: ``warps_for`` the step) and ``looped_stages``: the looped plan's warps
    and software-pipelining depth.  ``one_launch_bytes``: an eager call (no CUDA-graph
    capture) whose split plan reads at most this many bytes of input takes the one-launch split
    instead (``RowPlan.one_launch``): one launch costs the host less than two, where the host,
    not the GPU, sets the pace of a loop of calls; past it the one launch's longer device time
    would set the pace instead (not part of :func:`plan_rows`, which chooses for device time).
    ``staged_row_bytes`` (low, high): rows whose staged footprint (whole ``STAGED_CHUNK``
    chunks, window included) is above low and at most high bytes, too wide for a block and
    many enough not to split, are held in shared memory (``staged``); (0, 0) never.  The
    caller turns it off where the operator has no staged kernel or the GPU cannot run it.
    """

    max_block_bytes: int = 16 * 1024
    chunk: int = 8192
    split_chunk: int = 4096
    narrow_split_chunk: int = 2048
    narrow_split_width: int = 65536
    split_rows_per_sm: float = 1.0
    pack_elems: int = 2048
    max_rows_per_program: int = 4
    pack_min_rows_per_sm: float = 8.0
    wide_chunk: int = 0
    wide_width: int = 98304
    chunk_waste: float = -1.0
    max_chunk: int = 32768
    looped_warps: int = 0
    looped_stages: int = 1
    one_launch_bytes: int = 0
    staged_row_bytes: tuple[int, int] = (0, 0)


def warps_for(block_elems: int) -> int:
    """Warps for a program that holds ``block_elems`` values at once (16-64 per thread;
    32 warps measured no faster than 16 at 32768 on the H200)."""
    if block_elems <= 2048:
        return 4
    if block_elems <= 8192:
        return 8
    return 16


def split_geometry(span_elems: int, chunk: int, block: int) -> tuple[int, int]:
    """(chunks, span) for ``span_elems`` (a row plus its alignment window) cut into programs
    of ``chunk`` elements walked in blocks of ``block``, with at most MAX_SPLIT_CHUNKS per
    row: wider rows get longer chunks rather than more of them.  A row narrower than one
    chunk is one chunk of the blocks it fills (no program walks blocks past the row's end)."""
    span = max(1, min(chunk // block, cdiv(span_elems, block)))
    chunks = cdiv(span_elems, block * span)
    if chunks > MAX_SPLIT_CHUNKS:
        span = cdiv(cdiv(span_elems, block), MAX_SPLIT_CHUNKS)
        chunks = cdiv(span_elems, block * span)
    return chunks, span


def looped_chunk(span_elems: int, whole: int, policy: RowPolicy) -> int:
    """The looped plan's step for rows spanning ``span_elems`` (window included; ``whole``:
    its power of two) under ``policy`` (see ``RowPolicy.chunk_waste``)."""
    if policy.chunk_waste < 0:
        return policy.wide_chunk if policy.wide_chunk and span_elems >= policy.wide_width else policy.chunk
    chunk, step = policy.chunk, policy.chunk * 2
    while step <= policy.max_chunk and step < whole:
        if cdiv(span_elems, step) * step - span_elems <= policy.chunk_waste * span_elems:
            chunk = step
        step *= 2
    return chunk


def plan_rows(
    n_rows: int,
    width: int,
    elem_bytes: int,
    sm_count: int,
    policy: RowPolicy,
    force: PlanKind | None = None,
    pad: int = 0,
) -> RowPlan:
    """Choose (or, with ``force``, build) the plan for ``n_rows`` rows of ``width`` elements
    of ``elem_bytes`` bytes on a GPU with ``sm_count`` multiprocessors.  ``pad``: elements
    the alignment window may add in front of a row (``VEC - 1`` for misaligned rows, else 0).

    Raises ``ValueError`` for an unknown ``force``."""
    if force is not None and force not in (*PLAN_KINDS, STAGED):
        raise ValueError(f"plan must be one of {(*PLAN_KINDS, STAGED)} or None, got {force!r}")
    staged_chunks = cdiv(width + pad, STAGED_CHUNK)
    staged_bytes = staged_chunks * STAGED_CHUNK * elem_bytes
    low, high = policy.staged_row_bytes
    whole = next_power_of_2(max(width + pad, 1))
    kind: PlanKind
    if force is not None:
        kind = force
    elif whole * elem_bytes <= policy.max_block_bytes:
        kind = "block"
    elif n_rows < policy.split_rows_per_sm * sm_count:
        kind = "split"
    elif low < staged_bytes <= high:
        kind = STAGED
    else:
        kind = "looped"

    if kind == "block":
        pack = n_rows >= policy.pack_min_rows_per_sm * sm_count
        rows_per_program = max(1, min(policy.max_rows_per_program, policy.pack_elems // whole)) if pack else 1
        return RowPlan("block", whole, warps_for(whole * rows_per_program), rows_per_program)
    if kind == STAGED:
        if staged_bytes > STAGED_MAX_BYTES:
            raise ValueError(
                f"plan 'staged': a row of {width} elements of {elem_bytes} bytes takes {staged_bytes} bytes of "
                f"shared memory, more than the {STAGED_MAX_BYTES} a program may hold"
            )
        return RowPlan(STAGED, STAGED_CHUNK, STAGED_WARPS, chunks=staged_chunks)
    if kind == "looped":
        block = min(looped_chunk(width + pad, whole, policy), whole)
        return RowPlan("looped", block, policy.looped_warps or warps_for(block), stages=policy.looped_stages)
    chunk = policy.narrow_split_chunk if width <= policy.narrow_split_width else policy.split_chunk
    block = min(chunk, whole)
    chunks, span = split_geometry(width + pad, chunk, block)
    return RowPlan("split", block, warps_for(block), chunks=chunks, span=span)


@dataclass(frozen=True)
class ColumnPlan:
    """A reduction down the rows of ``[rows, width]`` (one result per column): programs of
    ``block_cols`` columns by ``rows_per_split`` rows write fp32 partial sums, ``splits``
    per column, which a second launch adds in a fixed order (deterministic, no atomics)."""

    block_cols: int
    rows_per_split: int
    splits: int
    num_warps: int


def plan_columns(n_rows: int, width: int, sm_count: int, block_cols: int = 256) -> ColumnPlan:
    """Enough row splits that column blocks times splits give every SM about four programs,
    each still summing at least 64 rows."""
    block_cols = min(block_cols, next_power_of_2(max(width, 1)))
    col_blocks = cdiv(max(width, 1), block_cols)
    want = max(1, (4 * sm_count) // col_blocks)
    splits = max(1, min(want, cdiv(max(n_rows, 1), 64)))
    rows_per_split = cdiv(max(n_rows, 1), splits)
    return ColumnPlan(block_cols, rows_per_split, cdiv(max(n_rows, 1), rows_per_split), 4)


# The thresholds fitted on the row-plan grid runs rowgrid-20261130T014849Z-b48a875 and
# ...015312Z-b48a875 (H200; the lowest mean regret of 1152 candidate policies, 2.4%, 2.35% on
# the held-out run): whole rows up to 32 KB; wider ones loop in the longest step of 4096 ...
# 32768 elements that pads the row by at most 30%, or split into 2048-element chunks while
# there are fewer rows than half the SMs.  Softmax shipped them until 2026-12-02; the other
# row operators (cross-entropy, RMSNorm) start from them, with their own evidence below.
ROW_POLICY_B48A875 = RowPolicy(
    max_block_bytes=32 * 1024,
    chunk=4096,
    chunk_waste=0.3,
    split_chunk=2048,
    narrow_split_chunk=2048,
    split_rows_per_sm=0.5,
)

# Softmax's forward policy, fitted on the row-plan grid run rowgrid-20261202T184902Z-48b96d9
# (H200, bf16, cold L2; the first grid runs that timed the staged plan) as the lowest mean
# regret of 3456 candidate policies, 1.8%, and scored on the held-out run
# rowgrid-20261202T185335Z-48b96d9: mean regret 1.8%, 90th percentile 6.5%, 21 of 314 cells
# over 10% (fitting on that run instead picks the same policy).  The policy before it
# (ROW_POLICY_B48A875 with the staged plan from 64 KB) scored 3.4%, 10.8% and 38 cells there:
# it looped rows of 32000 elements (62.5 KB), which the staged plan took in 0.88-0.93x the time
# at 500-8192 rows, and it stepped rows of 50-100 K elements 4096 or 8192 at a time, where
# 16384-element steps were faster.
# Rows up to 32 KB stay whole in registers; rows of more than 32 KB and up to 110 KB (two
# programs an SM in 227 KB of shared memory) are staged where the GPU runs the staged plan
# (Hopper), else loop in 16384-element steps, as wider rows do (32768 from 98304 elements);
# fewer rows than the SMs split into 2048-element chunks.
# Staging was first probed on the H200 (notes/probe_gluon_staged.py, 2026-12-02,
# notes/2026-12-02-probe-gluon-staged-7889eca.log): 4096 x 50257 took 226.7-229.8 µs staged
# against 297 looped; 8192 x 32768 (64 KB rows) 291.0-293.7 against 283.5.
# Eager calls of the split plan reading up to 8 MB take the one-launch split: on the H200
# (notes/probe_l2.py, 2026-12-02) it cost the host 19.1-19.6 µs a call against 26.9-28.2 for
# the two launches (4 x 32769, 64 x 131072 bf16; torch.softmax 11.0).  Its device time is
# about twice the two launches' (4 x 32769: 6.2-7.1 µs against 3.7; 64 x 131072: 18-26 against
# 13.3-14.5, notes/2026-12-02-probe-split-queue-8cdc8c2.log), below that host cost only on
# small calls: at 64 x 131072 (16.8 MB) eager calls took 26.6-27.6 µs with it (run
# softmax-20261202T160526Z-8cdc8c2-quick) against 21.6 with two launches (run
# softmax-20261201T072307Z-ebbf780).
SOFTMAX_POLICY_FITTED_ON = "rowgrid-20261202T184902Z-48b96d9"
SOFTMAX_POLICY = RowPolicy(
    max_block_bytes=32 * 1024,
    chunk=16384,
    wide_chunk=32768,
    chunk_waste=-1.0,
    split_chunk=2048,
    narrow_split_chunk=2048,
    split_rows_per_sm=1.0,
    one_launch_bytes=8 << 20,
    staged_row_bytes=(32 * 1024, 110 * 1024),
)
# The backward holds y and dy but does no exp: whole rows of up to 64 KB stay in registers
# faster than looping re-reads them (H200, 8192 x 32768 bf16: 389 µs as one block against
# 527 µs looped in 8192 chunks; notes/2026-11-29-tune-plans-2545267.log).
SOFTMAX_BACKWARD_POLICY = RowPolicy(max_block_bytes=64 * 1024, chunk=16384, one_launch_bytes=8 << 20)

# Cross-entropy's policies: softmax's geometry (one max-sum pass, then, for the step, a write
# of every element) with the looped plan's own steps, from notes/probe_ce_plans.py at 2150860
# (H200, bf16, device time, every input past the L2; logs in notes/2026-12-01-probes-2150860/).
# Over 8192x128256, 4096x32000, 4096x262144 and 4096x50257, against softmax's policy of then
# (ROW_POLICY_B48A875):
# - loss only (no gradient): 4096-element steps, 4 warps, 2 stages: 0.82x the time (geometric
#   mean; 0.67x at 8192x128256, at worst 0.95x);
# - loss and gradient in one pass: 4096-element steps, 8 warps, 1 stage: 0.93x (at worst 0.98x).
# Checked in run cross_entropy-20261201T224435Z-20f44fb against run ...151117Z-f8c9bf2 (softmax's
# policy), bf16, cold L2, device time: the loss alone took 0.67x-0.87x the time at every width
# (8192x128256: 629.8 against 942.7 us); the training step 0.88x-0.98x at V = 32000, 128256,
# 151936 and 262144 but 1.11x-1.12x at V = 50257 (8192x50257: 948.9 against 850.8 us), where
# the probe had the 4096 step at 0.90x: the odd width's rows are misaligned (a window of 7
# elements more a row) and softmax's 8192 step walks fewer of them.  Not yet explained;
# the next probe times the step at 50257 through the autograd path the study uses.
CROSS_ENTROPY_LOSS_POLICY = replace(
    ROW_POLICY_B48A875,
    chunk=4096,
    chunk_waste=-1.0,
    looped_warps=4,
    looped_stages=2,
    one_launch_bytes=0,
    staged_row_bytes=(0, 0),
)
CROSS_ENTROPY_POLICY = replace(
    ROW_POLICY_B48A875, chunk=4096, chunk_waste=-1.0, looped_warps=8, one_launch_bytes=0, staged_row_bytes=(0, 0)
)

# RMSNorm's policies: the thresholds softmax shipped until 2026-12-02 (ROW_POLICY_B48A875:
# the same row geometry, a cheaper statistic); the row-plan grid's RMSNorm runs scored them
# (the grid page's one-rule claim).
# The forward holds x and the residual, so whole rows stay in registers up to 32 KB of x;
# the backward holds h, dy and the residual's gradient, and keeps whole rows to 32 KB too.
# No staged plan (no staged kernel).  Eager calls of the split reading at most 8 MB take one
# launch, as softmax's do: a launch less of host time, where such calls are host-bound
# (notes/probe_rowsum_host.py times both forms; the device-time planner is unchanged).
RMSNORM_POLICY = replace(ROW_POLICY_B48A875, one_launch_bytes=8 << 20)
# The grid run each operator's shipped forward thresholds were fitted on (the grid page
# scores them as held out on every other run); RMSNorm's came from softmax's cells.
POLICY_FITTED_ON: dict[str, str] = {"softmax": SOFTMAX_POLICY_FITTED_ON}
RMSNORM_BACKWARD_POLICY = RowPolicy(max_block_bytes=32 * 1024, chunk=8192)
# Row sum: one read, no second pass, so rows stay whole up to 32 KB and wider ones loop in
# 8192-element blocks (a single pass keeps the looped plan at the minimum traffic).
ROW_SUM_POLICY = RowPolicy(max_block_bytes=32 * 1024, chunk=8192, split_chunk=8192, narrow_split_chunk=4096)
