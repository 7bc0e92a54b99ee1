"""The row sum and vector add case study: the simplest memory-bound kernels, their block-size
sweep, and when a warm "win" is only L2 residency.  Its cases hold two operators (``op``:
"add", an add of n elements stored as 1 x n, and "row_sum"), so its tables and charts are
its own, per operator and dtype, beside the shared summary, targets and losses of
:mod:`publish.studypage`; the prose is ``templates/rowsum_add.md.j2``.  Peers and labels
come from the run files; the copy peak and the L2 from the run that measured each case."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from publish.charts import Chart, dots
from publish.claims import Claim, sentence
from publish.numbers import Num, definition
from publish.results import CaseResult
from publish.studypage.charts import ceiling, style
from publish.studypage.claims import eager_flips
from publish.studypage.common import DEVICE_TIME, cases_evidence, l2_cell, missing, refusal
from publish.studypage.spec import (
    DTYPE_ORDER,
    EAGER_LOSSES,
    L2_MODES,
    LOSSES,
    SUMMARY,
    Case,
    CopyShare,
    CopyShareAt,
    StudyPage,
    StudyView,
    Target,
)
from publish.tables import Column, Table, Text

OURS = "triton"  # add: the default block; row sum: the planner's choice
# Named per operator by the bench (a name means one variant, with one label, across the study).
PEERS = ("torch-add", "compile-add", "torch-sum", "compile-sum")
OPS = {"add": "Vector add", "row_sum": "Row sum"}
# Set, not measured: the target (issue 8's performance list; the study catalogue's "within 5% of copy peak").
COPY_TARGET = definition(95, "pct", "target: fraction of the copy bandwidth measured in the same run")
# The 16M-element cases the bench measures (bench/studies/rowsum_add.py): an add of n
# elements is stored as 1 x n; the row sum at three row widths.
SIXTEEN_M = (
    Case("fwd", "bf16", 1, 16777216, op="add"),
    Case("fwd", "bf16", 4096, 4096, op="row_sum"),
    Case("fwd", "bf16", 16384, 1024, op="row_sum"),
    Case("fwd", "bf16", 16, 1048576, op="row_sum"),
)


def _name(case: Case) -> str:
    return f"target-copy-{case.op.replace('_', '')}-{case.rows}x{case.cols}-cold"  # type: ignore[union-attr]


# ----------------------------------------------------------------------------- what the data hold


def _ops(view: StudyView) -> list[tuple[str, str]]:
    """(op, dtype) pairs the data hold, add first, bf16 first."""
    found = {(str(c.params["op"]), str(c.params["dtype"])) for c in view.results.cases.values()}
    order = list(OPS)
    return sorted(found, key=lambda od: (order.index(od[0]) if od[0] in order else len(order), _dtype_rank(od[1])))


def _dtype_rank(dtype: str) -> int:
    return DTYPE_ORDER.index(dtype) if dtype in DTYPE_ORDER else len(DTYPE_ORDER)


def _shapes(view: StudyView, op: str, dtype: str) -> list[tuple[int, int]]:
    seen = {(c.params["rows"], c.params["cols"]) for c in view.results.where(op=op, dtype=dtype)}
    return sorted(seen, key=lambda rc: (rc[0] * rc[1], rc[1]))


def _find(view: StudyView, op: str, dtype: str, rows: int, cols: int, l2: str) -> CaseResult | None:
    return view.results.find(op=op, dtype=dtype, rows=rows, cols=cols, l2=l2)


def _size(op: str, c: CaseResult) -> str:
    """An add by its elements; a row sum by its shape."""
    return f"{c.params['cols']}" if op == "add" else c.shape


def _variants(cases: list[CaseResult]) -> list[str]:
    """Ours, our other variants (block sizes, forced plans), then the peers, as run."""
    seen = [v for c in cases for v in c.variants]
    mine = sorted({v for v in seen if v.startswith(OURS + "-")}, key=lambda v: (len(v), v))
    return [v for v in (OURS, *mine, *PEERS) if v in seen]


def _label(cases: list[CaseResult], variant: str) -> str:
    """What these cases' run files call ``variant`` (ours is labelled per operator)."""
    return next(c.variants[variant].label for c in cases if variant in c.variants)


def above_dram(c: CaseResult | None, variant: str) -> bool:
    """Whether ``variant`` moved more logical bytes per second than the DRAM copy measured in
    the same run.  The copy is torch's copy kernel, one read and one write per byte, not a
    ceiling of the memory: a kernel that mostly reads can pass it from DRAM too."""
    m = c.get(variant) if c is not None else None
    return m is not None and m.gbps().value > c.run.copy_peak  # type: ignore[union-attr]


def l2_resident(warm: CaseResult, cold: CaseResult | None, variant: str) -> bool:
    """Whether the warm number of ``variant`` is L2 residency: above the DRAM copy warm,
    while its cold case (inputs rotated through more than the L2) is not.  Where both pass
    the copy, the kernel reads DRAM faster than the copy does and the L2 has nothing to do
    with it.  With no cold case from DRAM (none, or one whose rotating inputs fit in the L2),
    the warm footprint must fit in the run's L2."""
    if not above_dram(warm, variant):
        return False
    if cold is not None and not cold.within_l2 and cold.get(variant) is not None:
        return not above_dram(cold, variant)
    return warm.bytes < warm.run.env["gpu"]["l2_bytes"]


def residency(view: StudyView, warm: CaseResult | None, cold: CaseResult | None) -> Text:
    """What the warm number of one size measures, decided from the data: L2 residency where
    ours moved more than the DRAM copy warm but not cold (and then whether a warm win
    survives cold L2), a rate above the copy from DRAM where cold passes it too, else the
    kernel within the copy's rate."""
    if warm is None or warm.get(OURS) is None:
        return Text("—", "ours has no warm time at this size")
    ours = warm.get(OURS)
    assert ours is not None
    if not above_dram(warm, OURS):
        return Text.rich(sentence("not above the DRAM copy ({pct} of it)", pct=ours.pct_copy()))
    if not l2_resident(warm, cold, OURS):
        cold_ours = cold.get(OURS) if cold is not None and not cold.within_l2 else None
        if cold_ours is None:
            return Text.rich(sentence("above the DRAM copy ({pct} of it), on inputs larger than the L2",
                                      pct=ours.pct_copy()))  # fmt: skip
        return Text.rich(
            sentence(
                "not L2 residency: {pct} of the DRAM copy, and {cold_pct} cold (faster from DRAM than the copy)",
                pct=ours.pct_copy(),
                cold_pct=cold_ours.pct_copy(),
            )
        )
    wins = [p for p in PEERS if view.outcome(warm, p) == "win"]
    lost_cold = [p for p in wins if not _cold_win(view, cold, p)]
    if lost_cold:
        return Text.rich(
            sentence(
                "warm win is L2 residency: {pct} of the DRAM copy warm; cold, no win over {peers}",
                pct=ours.pct_copy(),
                peers=", ".join(view.label(p) for p in lost_cold),
            )
        )
    return Text.rich(sentence("L2 residency: {pct} of the DRAM copy", pct=ours.pct_copy()))


# ----------------------------------------------------------------------------- tables


def residency_table(view: StudyView, op: str, dtype: str) -> Table | None:
    """Per size: ours cold and warm, against the copy peak, the speedup over each peer in
    both, and what the warm number measures."""
    shapes = _shapes(view, op, dtype)
    if not shapes:
        return None
    cases = view.results.where(op=op, dtype=dtype)
    peers = [p for p in PEERS if any(p in c.variants for c in cases)]
    cols = [
        Column("size", "Elements" if op == "add" else "Shape", numeric=False),
        Column("cold_from", "Cold inputs from", "where the cold case's inputs can come from", numeric=False),
        Column("cold", "Ours, cold (GB/s)", f"bytes counted from the problem / median {DEVICE_TIME}, cold L2"),
        Column("cold_pct", "% copy, cold", "of the device-copy bandwidth measured in the same run"),
        Column("warm", "Ours, warm (GB/s)", "the same, warm L2: may exceed the DRAM copy"),
        Column("warm_pct", "% copy, warm", "above 100%: inputs read from L2"),
    ]
    for p in peers:
        label = _label(cases, p)
        for l2 in ("warm", "cold"):
            cols.append(Column(f"{p}_{l2}", f"vs {label}, {l2}", f"{label} time / ours, {l2} L2"))
    cols.append(Column("reads", "Warm number is", "decided per row from the data", numeric=False))
    table = Table(
        f"rowsum_add-{op.replace('_', '')}-{dtype}",
        f"{OPS.get(op, op)}, {dtype}: ours warm and cold against the copy peak, and what a warm win measures "
        f"({DEVICE_TIME})",
        cols,
    )
    for rows, width in shapes:
        found = {l2: _find(view, op, dtype, rows, width, l2) for l2 in L2_MODES}
        any_case = found["cold"] or found["warm"]
        assert any_case is not None
        row: dict[str, Any] = {"size": _size(op, any_case)}
        for l2, c in found.items():
            ours = c.get(OURS) if c is not None else None
            if ours is None:
                row[l2] = refusal(c, OURS) if c is not None else Text("—", f"not measured with {l2} L2")
            else:
                gbps = ours.gbps()
                row[l2] = Num(gbps.value, "GBps_bare", gbps.sources, gbps.note)
                row[f"{l2}_pct"] = ours.pct_copy()
            for p in peers:
                row[f"{p}_{l2}"] = (c.speedup(OURS, p) or refusal(c, p)) if c is not None else None
        cold = found["cold"]
        row["cold_from"] = (
            Text("—", "not measured with cold L2")
            if cold is None
            else Text("fit in L2", "the rotating input sets together hold less than the L2") if cold.within_l2
            else Text("DRAM", "the rotating input sets together exceed the L2")
        )  # fmt: skip
        row["reads"] = residency(view, found["warm"], found["cold"])
        table.rows.append(row)
    return table


def sweep_table(view: StudyView, op: str, dtype: str) -> Table | None:
    """Every variant's logical GB/s (each block size, each forced plan, the peers), per size
    and L2 mode, with the fastest by median."""
    cases = [
        c
        for rows, width in _shapes(view, op, dtype)
        for l2 in L2_MODES
        if (c := _find(view, op, dtype, rows, width, l2)) is not None
    ]
    if not cases:
        return None
    variants = _variants(cases)
    cols = [
        Column("size", "Elements" if op == "add" else "Shape", numeric=False),
        Column("l2", "L2", numeric=False),
    ]
    how = f"GB/s, bytes counted from the problem / median {DEVICE_TIME}"
    cols += [Column(v, _label(cases, v), how) for v in variants]
    cols.append(Column("fastest", "Fastest", "lowest median device time", numeric=False))
    table = Table(
        f"rowsum_add-{op.replace('_', '')}-{dtype}-sweep",
        f"{OPS.get(op, op)}, {dtype}: every variant's bandwidth, GB/s ({DEVICE_TIME})",
        cols,
    )
    for c in cases:
        row: dict[str, Any] = {"size": _size(op, c), "l2": l2_cell(c)}
        timed = []
        for v in variants:
            m = c.get(v)
            if m is None:
                row[v] = refusal(c, v)
                continue
            gbps = m.gbps()
            row[v] = Num(gbps.value, "GBps_bare", gbps.sources, gbps.note)
            timed.append(m)
        best = min(timed, key=lambda m: m.summary.median) if timed else None  # type: ignore[union-attr]
        row["fastest"] = Text(best.label) if best is not None else Text("—", "no variant has a time")
        table.rows.append(row)
    return table


def extra(view: StudyView) -> dict[str, Any]:
    """The tables per operator and dtype, each with its title and chart."""
    out = []
    for op, dtype in _ops(view):
        out.append(
            {
                "id": f"rowsum_add-{op.replace('_', '')}-{dtype}",
                "title": f"{OPS.get(op, op)}, {dtype}",
                # (the charts are bf16's: each placed before its operator's bf16 table)
                "op_chart": f"rowsum_add-{op.replace('_', '')}-residency" if dtype == "bf16" else None,
                "residency": residency_table(view, op, dtype),
                "sweep": sweep_table(view, op, dtype),
            }
        )
    # (the shared sections, whose eager tables say whether any eager call was measured, are
    # not this page's: it says so itself)
    return {"ops": out, "has_eager": any(c.eager().get(OURS) is not None for c in view.results.cases.values())}


# ----------------------------------------------------------------------------- charts


def residency_chart(op: str):  # type: ignore[no-untyped-def]
    """Ours and torch, warm and cold, in GB/s over the size, with the copy peak: where the
    warm markers rise above the line, the number is the L2's, not the kernel's."""

    def chart(view: StudyView) -> Chart | None:
        shapes = _shapes(view, op, "bf16")
        pairs = [{l2: _find(view, op, "bf16", r, w, l2) for l2 in L2_MODES} for r, w in shapes]
        pairs = [p for p in pairs if any(c is not None and c.get(OURS) is not None for c in p.values())]
        if not pairs:
            return None
        series, styles = [], []
        for v in (OURS, f"torch-{'add' if op == 'add' else 'sum'}"):
            for l2 in L2_MODES:
                points: list[Num | Text] = []
                for p in pairs:
                    c = p[l2]
                    m = c.get(v) if c is not None else None
                    points.append(m.gbps() if m is not None else missing(c, v) if c is not None else Text("not run"))
                found = [c for p in pairs if (c := p[l2]) is not None]
                if any(v in c.variants for c in found):
                    series.append((f"{_label(found, v)}, {l2} L2", points))
                    styles.append(style(view, v, hollow=l2 == "warm"))
        every = [c for p in pairs for c in p.values() if c is not None]
        return dots(
            f"rowsum_add-{op.replace('_', '')}-residency",
            f"{OPS.get(op, op)}, bf16: achieved bandwidth, warm and cold L2, against the DRAM copy ({DEVICE_TIME})",
            [_size(op, next(c for c in p.values() if c is not None)) for p in pairs],
            series,
            "GB/s (bytes counted from the problem; log scale)",
            log_y=True,
            ref=ceiling(every, "device copy", "GB/s", lambda r: r.copy_peak),
            styles=styles,
        )

    return chart


# ----------------------------------------------------------------------------- observations


def _cold_win(view: StudyView, cold: CaseResult | None, peer: str) -> bool:
    return cold is not None and view.outcome(cold, peer) == "win"


def residency_observations(view: StudyView) -> list[Claim]:
    """How many warm cases are L2 residency (above the DRAM copy warm, not cold), how many
    pass the copy from DRAM as well, and how many warm wins do not survive cold L2: the
    study's question, counted."""
    warm = [c for c in view.results.where(l2="warm") if c.get(OURS) is not None]
    if not warm:
        return []

    def cold_of(c: CaseResult) -> CaseResult | None:
        p = c.params
        return _find(view, p["op"], p["dtype"], p["rows"], p["cols"], "cold")

    resident = [c for c in warm if l2_resident(c, cold_of(c), OURS)]
    from_dram = [c for c in warm if above_dram(c, OURS) and c not in resident]
    hollow = [
        c for c in resident if any(view.outcome(c, p) == "win" and not _cold_win(view, cold_of(c), p) for p in PEERS)
    ]
    text = (
        "Device time (graph replay): in {k} of the {n} warm cases ours moved more logical bytes per second "
        "than the DRAM copy measured in the same run and did not with cold L2: those inputs were read from L2, "
        "so the warm number is the L2's bandwidth, not the kernel's rate from memory."
    )
    if from_dram:
        text += (
            " In {d} more, ours passed the copy cold as well: the copy is torch's copy kernel, one read and one "
            "write per byte, not a ceiling, and a kernel that mostly reads streams from DRAM a little faster."
        )
    out = [
        Claim(
            "warm-above-dram",
            sentence(text, k=Num(len(resident), "count"), n=Num(len(warm), "count"), d=Num(len(from_dram), "count")),
            True,
            evidence=cases_evidence("L2 residency", resident) + cases_evidence("above the copy cold too", from_dram),
        )
    ]
    if hollow:
        out.append(
            Claim(
                "warm-win-is-residency",
                sentence(
                    "Device time (graph replay): in {k} "
                    + ("warm case" if len(hollow) == 1 else "warm cases")
                    + ", a warm win over a peer comes with bandwidth above the DRAM copy and is not a win with cold "
                    "L2: L2 residency, not a faster kernel (the tables mark each).",
                    k=Num(len(hollow), "count"),
                ),
                True,
                evidence=cases_evidence("warm win, not a cold win", hollow),
            )
        )
    return out


def block_observations(view: StudyView) -> list[Claim]:
    """Whether the default block of the add is ever beaten (by the one verdict) by another
    block size, with cold L2."""
    cases = [c for c in view.results.where(op="add", l2="cold") if c.get(OURS) is not None]
    blocks = sorted({v for c in cases for v in c.variants if v.startswith(OURS + "-")})
    if not cases or not blocks:
        return []
    beaten = [c for c in cases if any(view.outcome(c, b) == "loss" for b in blocks)]
    return [
        Claim(
            "default-block-holds",
            sentence(
                "Device time (graph replay): with cold L2, {ours} was beaten by another block size in {k} of the {n} "
                "add cases; in the others every block was slower or within the noise.",
                ours=_label(cases, OURS),
                k=Num(len(beaten), "count"),
                n=Num(len(cases), "count"),
            ),
            not beaten,
            hypothesis="the default block is the add's best: no other block size beats it with cold L2",
            evidence=cases_evidence("another block faster", beaten),
        )
    ]


def _after_residency(view: StudyView, found: list[CaseResult]) -> Markup:
    """Under a copy-share target: whether any of its cases sat in L2 (its number is then not
    the DRAM's)."""
    inside = [c for c in found if c.within_l2]
    if not inside:
        return Markup("")
    return sentence(" The cold input sets of {ids} fit in the L2, so its number is not the DRAM's.",
                    ids=", ".join(c.case_id for c in inside))  # fmt: skip


# ----------------------------------------------------------------------------- the page

PAGE = StudyPage(
    study="rowsum_add",
    op_words={"add": "vector add", "row_sum": "row sum"},
    title="Row sum and vector add",
    summary="the simplest memory-bound kernels, in block-size and plan variants against torch and torch.compile, "
    "warm and cold: when a warm win is only L2 residency",
    ours=OURS,
    peers=PEERS,
    tables=frozenset({SUMMARY, LOSSES, EAGER_LOSSES}),  # the per-operator tables are the page's own (extra)
    charts=(residency_chart("add"), residency_chart("row_sum")),
    targets=tuple(Target(_name(c), CopyShare(COPY_TARGET), c, ("cold",), after=_after_residency) for c in SIXTEEN_M),
    evidence=tuple(CopyShareAt(c) for c in SIXTEEN_M[:2]),
    observations=(residency_observations, block_observations, eager_flips),
    extra=extra,
)
