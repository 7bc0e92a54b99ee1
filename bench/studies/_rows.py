"""What the row-wise studies (softmax, RMSNorm, row sum) share: dtypes and tolerances, the
planner's plan for a case (so a variant's meta says what it timed), our variants with the
multi-program plans forced on wide rows, the case loop, a peer package's version, and the
16-byte rows QuACK requires.  Not a study: the registry lists no ``_rows``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

import torch

from bench.studies import Params, Refused, Step, Variant
from kernels._rowwise import ALIGN_ROWS, ALIGN_WINDOW
from kernels.plans import VECTOR_BYTES, RowPlan, RowPolicy, plan_rows

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
TOLERANCE = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2}  # relative L2 error against float64
FORCED = ("looped", "split")  # the multi-program plans timed beside the planner's choice on wide rows


def element_size(case: Params) -> int:
    return torch.empty((), dtype=DTYPES[case["dtype"]]).element_size()


def sms() -> int:
    """The SMs of the GPU the planner plans for (the H200's without one: CPU tests)."""
    return torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 132


def pad(case: Params) -> int:
    """The alignment window the planner sizes blocks for (contiguous rows of this width)."""
    vec = VECTOR_BYTES // element_size(case)
    align = ALIGN_ROWS if case["cols"] % vec == 0 or case["rows"] == 1 else ALIGN_WINDOW
    return vec - 1 if align == ALIGN_WINDOW else 0


def plan(case: Params, policy: RowPolicy, force: str | None = None) -> RowPlan:
    """The plan a kernel on the row base takes for this case (``force``: a plan kind)."""
    return plan_rows(case["rows"], case["cols"], element_size(case), sms(), policy, force, pad(case))  # type: ignore[arg-type]


def plan_meta(policy: RowPolicy, backward: RowPolicy | None, force: str | None) -> Callable[[Params], dict[str, Any]]:
    """A variant's meta: the plan it runs (and, for a training step, its backward's)."""

    def meta(case: Params) -> dict[str, Any]:
        out: dict[str, Any] = plan(case, policy, force).describe()
        if backward is not None and case["direction"] == "fwd+bwd":
            out["backward"] = plan(case, backward, force).describe()
        return out

    return meta


def ours(
    case: Params,
    build: Callable[[str | None], Callable[[Params], Step]],
    policy: RowPolicy,
    backward: RowPolicy | None = None,
) -> list[Variant]:
    """Our variant (the planner's choice) and, where a row is too wide for one program, each
    multi-program plan forced, so a page can show why the planner chose and how large the
    noise is.  ``build(plan)`` gives the variant's build for a forced plan (None: the
    planner's)."""
    out = [Variant("triton", "Triton (ours, planner's choice)", build(None), plan_meta(policy, backward, None))]
    if plan(case, policy).kind != "block":
        for kind in FORCED:
            meta = plan_meta(policy, backward, kind)
            out.append(Variant(f"triton-{kind}", f"Triton, {kind} plan forced", build(kind), meta))
    return out


def row_cases(
    op: str,
    directions: Sequence[str],
    quick: bool,
    shapes: Sequence[tuple[int, int]],
    other_dtypes: Sequence[tuple[int, int]],
    quick_shapes: Sequence[tuple[int, int]],
    **extra: Any,
) -> list[Params]:
    """Every direction × dtype × shape: bf16 at every shape, fp16 and fp32 (the same code
    with other element sizes) at a few; ``quick``: bf16 at the quick shapes."""
    out: list[Params] = []
    for direction in directions:
        for dtype in ("bf16",) if quick else ("bf16", "fp16", "fp32"):
            for rows, cols in quick_shapes if quick else shapes if dtype == "bf16" else other_dtypes:
                out.append({"op": op, "direction": direction, "dtype": dtype, "rows": rows, "cols": cols, **extra})
    return out


def row_case_id(case: Params) -> str:
    return f"{case['direction']}/{case['dtype']}/{case['rows']}x{case['cols']}"


def package_meta(package: str, entry: str) -> Callable[[Params], dict[str, Any]]:
    """A peer's meta: its package's installed version and the entry point timed."""

    def meta(case: Params) -> dict[str, Any]:
        try:
            return {"version": metadata.version(package), "entry": entry}
        except metadata.PackageNotFoundError:
            return {}

    return meta


def require_16_byte_rows(case: Params) -> None:
    """QuACK (quack-kernels 0.6.5) copies rows in 16-byte vectors and asserts the width allows it."""
    width = case["cols"] * element_size(case)
    if width % 16:
        raise Refused(f"QuACK needs rows of a multiple of 16 bytes; width {case['cols']} is {width} bytes")
