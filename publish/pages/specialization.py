"""The specialization study: one RMSNorm source with its sizes compile-time or runtime.

Its comparison is the shipped choice (model-fixed sizes constexpr, the row count runtime)
against the three other ways to pass the same sizes, and against our production RMSNorm
and ``F.rms_norm`` for scale.  Beside the generic summary and losses it has its own tables,
read from each variant's meta (bench/studies/specialization.py): what the compiled kernels
are made of (registers, spills, shared memory) and what the sweep of batch sizes cost each
way in compilations and first-call time.  The prose is ``templates/specialization.md.j2``.
"""

from __future__ import annotations

import statistics
from typing import Any

from publish.claims import Claim, sentence
from publish.numbers import Num, Source
from publish.results import CaseResult, Measurement
from publish.studypage.claims import eager_flips, pairwise
from publish.studypage.common import cases_evidence, meta_num
from publish.studypage.spec import EAGER_LOSSES, LOSSES, SUMMARY, Case, SpeedupsAt, StudyPage, StudyView
from publish.tables import Column, Table, Text

MODES = ("spec-model_fixed", "spec-all_constexpr", "spec-all_runtime", "spec-triton_default")
OURS = "spec-model_fixed"  # how kernels.rms_norm passes its sizes: the width constexpr, the row count runtime
PEERS = (*MODES[1:], "triton", "torch")


def _widths(view: StudyView) -> list[int]:
    return sorted({int(c.params["cols"]) for c in view.results.cases.values()})


def _cases(view: StudyView, width: int, l2: str = "warm") -> list[CaseResult]:
    found = [c for c in view.results.cases.values() if c.params["cols"] == width and c.params.get("l2") == l2]
    return sorted(found, key=lambda c: int(c.params["rows"]))


def _compiles(cases: list[CaseResult], mode: str) -> tuple[int, list[Measurement]]:
    """(compilations this mode's source had over these cases, the measurements read)."""
    read = [m for c in cases if (m := c.get(mode)) is not None and isinstance(m.meta.get("compiled_now"), int)]
    return sum(int(m.meta["compiled_now"]) for m in read), read


def _spills(c: CaseResult, mode: str) -> float:
    n = meta_num(c, mode, "spills")
    return n.value if isinstance(n, Num) else 0.0


# ----------------------------------------------------------------------------- tables


def code_table(view: StudyView) -> Table | None:
    """Per hidden size and mode: registers per thread, spills and shared memory of the
    kernel each mode compiled (the largest batch size's, where they differ by batch)."""
    rows = []
    for width in _widths(view):
        cases = _cases(view, width)
        for mode in MODES:
            found = [c for c in cases if (m := c.get(mode)) is not None and "regs" in m.meta]
            if not found:
                continue
            last = found[-1]
            regs = sorted({str(c.variants[mode].meta["regs"]) for c in found})
            rows.append(
                {
                    "width": Text(str(width)),
                    "mode": Text(view.label(mode)),
                    "regs": meta_num(last, mode, "regs"),
                    "spills": meta_num(last, mode, "spills"),
                    "smem": meta_num(last, mode, "smem_bytes"),
                    "varies": Text("the same at every batch size" if len(regs) == 1 else "differ by batch size"),
                }
            )
    if not rows:
        return None
    cols = [
        Column("width", "Hidden size", numeric=False),
        Column("mode", "Sizes passed as", numeric=False),
        Column("regs", "Registers / thread", "read from the compiled kernel"),
        Column("spills", "Spills", "registers spilled to local memory"),
        Column("smem", "Shared memory (bytes)", "per program"),
        Column(
            "varies",
            "Registers across batch sizes",
            "whether the register count differs between the kernels compiled for each batch size (the next "
            "table counts the kernels)",
            numeric=False,
        ),
    ]
    table = Table("specialization-code", "What each way compiles to (largest batch size)", cols)
    table.rows.extend(rows)
    return table


def compile_table(view: StudyView) -> Table | None:
    """Per hidden size and mode: compilations over the sweep of batch sizes, and the first
    call's wall time with and without a compilation."""
    rows = []
    for width in _widths(view):
        cases = _cases(view, width)
        for mode in MODES:
            count, read = _compiles(cases, mode)
            if not read:
                continue
            src = tuple(Source(m.run.run_id, m.case_id, m.variant, "compilations at this batch size") for m in read)
            compiled = [float(m.meta["first_call_ms"]) for m in read if m.meta["compiled_now"] > 0]
            cached = [float(m.meta["first_call_ms"]) for m in read if m.meta["compiled_now"] == 0]
            rows.append(
                {
                    "width": Text(str(width)),
                    "mode": Text(view.label(mode)),
                    "batches": Num(len(read), "count", src),
                    "compiles": Num(count, "count", src),
                    "first": Num(statistics.median(compiled), "ms", src) if compiled else Text("none compiled"),
                    "reuse": Num(statistics.median(cached), "ms", src) if cached else Text("every call compiled"),
                }
            )
    if not rows:
        return None
    cols = [
        Column("width", "Hidden size", numeric=False),
        Column("mode", "Sizes passed as", numeric=False),
        Column("batches", "Batch sizes met", "distinct row counts, in sweep order"),
        Column("compiles", "Compilations", "new kernels the source was compiled into"),
        Column("first", "First call, compiling", "median wall time of a first call that compiled"),
        Column("reuse", "First call, reusing", "median wall time of a first call that did not"),
    ]
    table = Table("specialization-compiles", "What a sweep of batch sizes costs each way", cols)
    table.rows.extend(rows)
    return table


# ----------------------------------------------------------------------------- observations


def compile_observations(view: StudyView) -> list[Claim]:
    """Every-size constexpr compiles once per batch size; model-fixed once per hidden size."""
    cases = [c for c in view.results.cases.values() if c.params.get("l2") == "warm"]
    per_mode = {mode: _compiles(cases, mode) for mode in MODES}
    if not per_mode[OURS][1] or not per_mode["spec-all_constexpr"][1]:
        return []
    batches = len({(c.params["rows"], c.params["cols"]) for c in cases})
    widths = len(_widths(view))
    src = tuple(
        Source(m.run.run_id, m.case_id, m.variant, "compilations") for _, read in per_mode.values() for m in read
    )
    ours, everything = per_mode[OURS][0], per_mode["spec-all_constexpr"][0]
    return [
        Claim(
            "compiles-per-batch",
            sentence(
                "Over {n} shapes ({w} hidden sizes, each at every batch size), every size constexpr compiled "
                "{a} kernels and model-fixed sizes {b}.",
                n=Num(batches, "count", src),
                w=Num(widths, "count", src),
                a=Num(everything, "count", src),
                b=Num(ours, "count", src),
            ),
            everything >= batches and ours <= widths,
            hypothesis="every size constexpr compiles a kernel per new shape, model-fixed sizes one per hidden size",
        )
    ]


def speed_observations(view: StudyView) -> list[Claim]:
    """What compile-time sizes buy at run time, counted by the one verdict."""
    cases = [c for c in view.results.cases.values() if OURS in c.variants]
    out = []
    rows_const = pairwise(
        view,
        "constexpr-rows-buy-nothing",
        cases,
        "spec-all_constexpr",
        OURS,
        "Device time (graph replay): a compile-time row count beat the runtime one in {k} of {n} cases and lost {l} "
        "({u} within the noise; the widest gap {x}, {case}).",
        lambda won, lost, n: won == 0,
        hypothesis="knowing the batch size buys nothing worth a compilation per batch size: a compile-time row count "
        "never beats the runtime one",
    )
    width_const = pairwise(
        view,
        "constexpr-width-pays",
        cases,
        OURS,
        "spec-all_runtime",
        "Device time (graph replay): a compile-time width beat the every-size-runtime kernel in {k} of {n} cases and "
        "lost {l} ({u} within the noise; up to {x}, {case}).",
        lambda won, lost, n: lost == 0 and won >= n / 2,
        hypothesis="the hidden size is worth its one compilation: a compile-time width never loses to the "
        "every-size-runtime kernel and wins in at least half the cases",
    )
    out += [c for c in (rows_const, width_const) if c is not None]
    with_spills = [c for c in cases if any((m := c.get(mode)) is not None and "spills" in m.meta for mode in MODES)]
    if with_spills:
        spilled = [c for c in with_spills if any(_spills(c, mode) > 0 for mode in MODES)]
        out.append(
            Claim(
                "no-spills",
                sentence(
                    "Kernels of {n} cases recorded their spills; {k} of them spilled.",
                    n=Num(len(with_spills), "count"),
                    k=Num(len(spilled), "count"),
                ),
                not spilled,
                hypothesis="no mode's kernel spills registers at any shape the runs compiled",
                evidence=cases_evidence("spilled", spilled),
            )
        )
    return out


def extra(view: StudyView) -> dict[str, Any]:
    return {"code": code_table(view), "compiles": compile_table(view)}


PAGE = StudyPage(
    study="specialization",
    title="Specialization",
    summary="one RMSNorm kernel with its sizes compile-time or runtime: run time, registers and spills, and how "
    "many compilations a sweep of batch sizes costs",
    ours=OURS,
    peers=PEERS,
    tables=frozenset({SUMMARY, LOSSES, EAGER_LOSSES}),
    # a serving batch at a hidden size that is not a power of two, with cold L2
    evidence=(SpeedupsAt(Case("fwd", "bf16", 8191, 5120), ("spec-all_constexpr", "spec-all_runtime")),),
    observations=(compile_observations, speed_observations, eager_flips),
    extra=extra,
)
