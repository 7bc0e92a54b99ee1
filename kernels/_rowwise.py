"""Shared base for row-wise operators (softmax now; RMSNorm, row sum and cross-entropy next).

Every row-wise operator reduces over the last dimension of a ``[rows, width]`` view and
faces the same two questions, answered here once:

* **Which plan?**  A row that fits in registers is loaded once (``block``).  A wider row is
  walked in chunks by one program (``looped``: statistics pass, then a second read to
  write), or cut into chunks spread over several programs (``split``: one launch writes
  per-chunk statistics, a second merges them and writes).  Looping reads the row twice
  but keeps one program per row; splitting also reads it twice, and pays a second launch,
  but puts ``rows * chunks`` programs on the GPU, which is what few wide rows need.
* **How to view the input?**  Validation that names the bad argument, and a 2-D row view
  that keeps the caller's row stride instead of copying.

The width is the model's (hidden size, vocabulary), so everything the plan derives from
the width may be a compile-time constant.  The row count changes per batch: the plan
reads it only to choose between kernels, never to specialise one, so a new batch size
reuses the compiled kernel of its plan.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from typing import Literal

import torch
import triton
import triton.language as tl

PlanKind = Literal["block", "looped", "split"]
PLAN_KINDS: tuple[PlanKind, ...] = ("block", "looped", "split")
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@dataclass(frozen=True)
class RowPlan:
    """How one launch covers a ``[rows, width]`` problem.

    ``block`` is the number of row elements one program holds at a time; ``rows_per_program``
    packs several narrow rows into one program so that a 127-wide row does not leave most
    lanes idle.  ``chunks`` is the number of programs per row (``split`` only).
    """

    kind: PlanKind
    block: int
    num_warps: int
    rows_per_program: int = 1
    chunks: int = 1
    one_launch: bool = False

    def describe(self) -> dict[str, int | str | bool]:
        return {
            "plan": self.kind,
            "block": self.block,
            "num_warps": self.num_warps,
            "rows_per_program": self.rows_per_program,
            "chunks": self.chunks,
            "one_launch": self.one_launch,
        }


@dataclass(frozen=True)
class RowPolicy:
    """An operator's thresholds for the planner (the defaults are softmax's, measured on
    an H200: notes/2026-11-29-tune-plans-2545267.log).

    ``max_block_bytes``: widest row (in input bytes) kept whole in one program; wider rows
    held in registers cost occupancy more than the second read of looping costs.
    ``chunk``: elements per step of the looped plan.
    ``split_chunk``: elements per program of the split plan (halved for rows up to
    ``narrow_split_width``, which have few chunks to spread).
    ``split_rows_per_sm``: split while ``rows < split_rows_per_sm * SMs`` (few rows cannot
    fill the GPU with one program each).
    ``pack_elems``: narrow rows are packed into programs of up to this many elements, at
    most ``max_rows_per_program`` rows.
    """

    max_block_bytes: int = 16 * 1024
    chunk: int = 8192
    split_chunk: int = 4096
    narrow_split_width: int = 65536
    split_rows_per_sm: float = 1.0
    pack_elems: int = 2048
    max_rows_per_program: int = 4


def warps_for(block_elems: int) -> int:
    """Warps for a program that holds ``block_elems`` values at once (16-64 per thread;
    32 warps measured no faster than 16 at 32768)."""
    if block_elems <= 2048:
        return 4
    if block_elems <= 8192:
        return 8
    return 16


def plan_rows(
    n_rows: int,
    width: int,
    elem_bytes: int,
    sm_count: int,
    policy: RowPolicy,
    force: PlanKind | None = None,
) -> RowPlan:
    """Choose (or, with ``force``, build) the plan for ``n_rows`` rows of ``width`` elements."""
    if force is not None and force not in PLAN_KINDS:
        raise ValueError(f"plan must be one of {PLAN_KINDS} or None, got {force!r}")
    whole = triton.next_power_of_2(max(width, 1))
    fits = whole * elem_bytes <= policy.max_block_bytes
    kind: PlanKind
    if force is not None:
        kind = force
    elif fits:
        kind = "block"
    elif n_rows < policy.split_rows_per_sm * sm_count:
        kind = "split"
    else:
        kind = "looped"

    if kind == "block":
        rows_per_program = max(1, min(policy.max_rows_per_program, policy.pack_elems // whole))
        return RowPlan("block", whole, warps_for(whole * rows_per_program), rows_per_program)
    if kind == "looped":
        block = min(policy.chunk, whole)
        return RowPlan("looped", block, warps_for(block))
    block = min(policy.split_chunk // (2 if width <= policy.narrow_split_width else 1), whole)
    chunks = triton.cdiv(width, block)
    return RowPlan("split", block, warps_for(block), chunks=chunks)


def one_launch_split_ok(chunks: int, sm_count: int) -> bool:
    """Whether a row's ``chunks`` programs may wait for each other inside one launch.

    Programs take their (row, chunk) from an atomic ticket, so every row but the one being
    handed out has all its programs resident or finished; only that last row waits, on at
    most ``chunks - 1`` resident programs.  It cannot deadlock while those fit on the GPU
    beside one more program: at two programs per SM (far below what these small programs
    allow) that is ``chunks <= 2 * SMs``.  The interpreter runs programs one after another,
    so a program waiting for another would wait forever: there, always two launches.
    """
    return not INTERPRETER and chunks <= 2 * sm_count


# --------------------------------------------------------------------------- input checks


# Read once at import: the functional's checks are traced by torch.compile, which should
# see a constant here rather than an environment lookup.
INTERPRETER = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def check_rows(name: str, arg: str, t: torch.Tensor) -> None:
    """Raise a ``TypeError``/``ValueError`` naming ``arg`` when ``t`` cannot be a row input."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: {arg} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() == 0:
        raise ValueError(f"{name}: {arg} must have at least one dimension, got a 0-d tensor")
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name}: {arg} has dtype {t.dtype}; expected float16, bfloat16 or float32")
    on_cpu_ok = t.device.type == "cpu" and INTERPRETER
    if t.device.type not in ("cuda", "meta") and not on_cpu_ok:
        raise ValueError(
            f"{name}: {arg} is on device '{t.device}'; expected a CUDA tensor "
            "(CPU tensors run only under TRITON_INTERPRET=1)"
        )
    if t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(
            f"{name}: {arg} must be contiguous in its last dimension (stride 1), got stride "
            f"{t.stride(-1)}; pass {arg}.contiguous()"
        )


def as_rows(t: torch.Tensor) -> torch.Tensor:
    """A ``[rows, width]`` view of ``t`` that keeps its row stride (no copy when the leading
    dimensions collapse into one stride, which covers slices like ``x[:, :width]``)."""
    width = t.shape[-1]
    rows = math.prod(t.shape[:-1])
    try:
        return t.view(rows, width)
    except RuntimeError:
        # Leading dimensions that no single stride describes (a permuted batch): one copy.
        return t.reshape(rows, width)


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """Multiprocessors of ``device``; the H200's 132 under the interpreter."""
    if device.type != "cuda":
        return 132
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


# --------------------------------------------------------------------------- jit helpers


@triton.jit
def safe_shift(m):
    """The value to subtract before ``exp``: the running max, or 0 where the max is -inf.

    A lane or chunk that has seen only ``-inf`` (a masked prefix of attention scores) has
    max ``-inf``; shifting by it would compute ``exp(-inf - -inf) = exp(nan)``.  Shifting by
    0 instead gives ``exp(-inf) = 0`` and keeps its sum at 0.
    """
    return tl.where(m == float("-inf"), 0.0, m)


@triton.jit
def take_ticket(sync_ptr, CHUNKS: tl.constexpr):
    """(row, chunk) for this program, handed out in start order by an atomic ticket.

    Block indices do not promise start order; tickets do.  Every row below the one being
    handed out then has all its programs resident or finished, which is what lets a row's
    programs wait for each other without deadlock (see one_launch_split_ok)."""
    ticket = tl.atomic_add(sync_ptr, 1)
    return (ticket // CHUNKS).to(tl.int64), ticket % CHUNKS


@triton.jit
def row_barrier(sync_ptr, row, CHUNKS: tl.constexpr):
    """Publish this program's per-chunk result, then wait until the row's CHUNKS programs
    have all published.  The barrier orders this program's stores before the release; the
    acquire orders the loads that follow after every release of the row."""
    tl.debug_barrier()
    tl.atomic_add(sync_ptr + 1 + row, 1, sem="release")
    arrived = tl.atomic_add(sync_ptr + 1 + row, 0, sem="acquire")
    while arrived < CHUNKS:
        arrived = tl.atomic_add(sync_ptr + 1 + row, 0, sem="acquire")
