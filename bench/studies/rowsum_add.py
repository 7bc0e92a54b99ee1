"""Row sum and vector add: the simplest memory-bound kernels, in block-size variants.

The question is what a "win" on a streaming kernel means: from 257 elements (launch-bound)
through 16,777,216 (DRAM-bound) to inputs several times the L2, warm and cold, every
variant's logical GB/s beside the copy peak.  A warm number above the DRAM's bandwidth is
L2 residency, not a faster kernel; the cold number says what the kernel does.

Vector add: ``kernels.add`` at each block size (``kernels.vector_add.BLOCKS``) against
``torch.add`` and ``torch.compile``.  Row sum: ``kernels.row_sum`` (the planner's plan,
and the looped and split plans forced where the planner does not take one block) against
``torch.sum(x, -1)`` and ``torch.compile``.  Traffic: add reads two inputs and writes one
(3 passes); row sum reads its input once and writes one value per row.

Every case holds ``op`` ("add" or "row_sum") and ``rows`` and ``cols`` (an add of ``n``
elements is ``1 x n``), the parameters its page reads (contract/studies.py); the page is
``publish/pages/rowsum_add.py`` with ``templates/rowsum_add.md.j2``.  The peers are named
per operator (``torch-add``, ``torch-sum``, ...): a variant's name means one thing, and one
label, across the study.
"""

from __future__ import annotations

from typing import Any

import torch

import kernels
from bench.studies import Params, Step, Tensors, Variant
from bench.studies._rows import DTYPES, TOLERANCE, element_size, ours
from kernels.plans import ROW_SUM_POLICY
from kernels.vector_add import BLOCKS, DEFAULT_BLOCK

# Elements of each add input: launch-bound, L2-resident, DRAM-bound, and 4x the H200's L2.
ADD_SIZES = [257, 65_537, 1_048_576, 4_194_305, 16_777_216, 67_108_864]
# Row sum: (rows, width) from one short row to 64M elements, and wide rows for the looped plan.
ROW_SHAPES = [(1, 257), (64, 4096), (4096, 4097), (4096, 4096), (16384, 4096), (16, 1048576), (16384, 1024)]
QUICK_ADD = [257, 16_777_216]
QUICK_ROWS = [(4096, 4096), (16, 1048576)]


def _row_sum(plan: str | None):  # type: ignore[no-untyped-def]
    """Our row sum's build, with ``plan`` forced (None: the planner's choice)."""
    return lambda case: lambda t: (kernels.row_sum(t["x"], plan=plan),)


def _compiled(fn):  # type: ignore[no-untyped-def]
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False, fullgraph=True)


class RowSumAddStudy:
    name = "rowsum_add"
    directions = ("fwd",)

    def cases(self, quick: bool) -> list[Params]:
        out: list[Params] = []
        for dtype in ("bf16",) if quick else ("bf16", "fp32"):
            for n in QUICK_ADD if quick else ADD_SIZES:
                out.append({"op": "add", "direction": "fwd", "dtype": dtype, "rows": 1, "cols": n})
            for rows, cols in QUICK_ROWS if quick else ROW_SHAPES:
                out.append({"op": "row_sum", "direction": "fwd", "dtype": dtype, "rows": rows, "cols": cols})
        return out

    def case_id(self, case: Params) -> str:
        return f"{case['op']}/{case['dtype']}/{case['rows']}x{case['cols']}"

    def options(self, quick: bool) -> dict[str, Any]:
        return {"rounds": 12 if quick else 14}

    def variants(self, case: Params) -> list[Variant]:
        if case["op"] == "add":
            out = [
                Variant(
                    "triton" if block == DEFAULT_BLOCK else f"triton-{block}",
                    f"Triton (ours), block {block}" + (" (default)" if block == DEFAULT_BLOCK else ""),
                    lambda c, b=block: lambda t: (kernels.add(t["a"], t["b"], block=b),),
                    lambda c, b=block: {"block": b},
                )
                for block in BLOCKS
            ]
            out.append(Variant("torch-add", "torch.add", lambda c: lambda t: (torch.add(t["a"], t["b"]),)))
            out.append(Variant("compile-add", "torch.compile(torch.add)", lambda c: self._compiled_add()))
            return out
        out = ours(case, _row_sum, ROW_SUM_POLICY)
        out.append(Variant("torch-sum", "torch.sum(x, -1)", lambda c: lambda t: (torch.sum(t["x"], -1),)))
        out.append(Variant("compile-sum", "torch.compile(torch.sum)", lambda c: self._compiled_sum()))
        return out

    @staticmethod
    def _compiled_add() -> Step:
        fn = _compiled(lambda a, b: torch.add(a, b))
        return lambda t: (fn(t["a"], t["b"]),)

    @staticmethod
    def _compiled_sum() -> Step:
        fn = _compiled(lambda x: torch.sum(x, -1))
        return lambda t: (fn(t["x"]),)

    def inputs(self, case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
        dtype = DTYPES[case["dtype"]]
        shape = (case["rows"], case["cols"])

        def draw() -> torch.Tensor:
            return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)

        if case["op"] == "add":
            return {"a": draw().view(-1), "b": draw().view(-1)}
        return {"x": draw()}

    def reference(self, case: Params, inputs: Tensors) -> tuple[torch.Tensor, ...]:
        if case["op"] == "add":
            return (inputs["a"].double() + inputs["b"].double(),)
        return (inputs["x"].double().sum(-1),)

    def traffic(self, case: Params) -> tuple[int, int]:
        elems = case["rows"] * case["cols"]
        size = element_size(case)
        if case["op"] == "add":
            return 3 * elems * size, elems
        return (elems + case["rows"]) * size, elems

    def tolerance(self, case: Params) -> float:
        return TOLERANCE[case["dtype"]]


STUDY = RowSumAddStudy()
