"""The tables of a comparison page: per direction and dtype, our time and the speedup over
each peer (device time, then eager calls) and every variant's median; and the summary, one
line per peer.  Table ids are ``<study>-<direction>-<dtype>[-...]``: permanent anchors.

Every number comes from the tidy frame of the runs: a case's measurements
(:class:`publish.results.Measurement`) read their median, interval, bandwidth and share of
the copy peak from the frame pivoted to one row per measurement
(:class:`publish.frame.Stats`), and every win, loss and unresolved is the one verdict
(:func:`publish.results.verdict`) on those numbers."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from contract import studies
from publish.claims import sentence
from publish.numbers import Num
from publish.results import CaseResult, Measurement
from publish.studypage.common import (
    DEVICE_TIME,
    EAGER_CALL,
    bare,
    count,
    l2_cell,
    refusal,
    slug,
    time_or_why,
)
from publish.studypage.spec import (
    BANDWIDTH,
    DIRECTION_TITLES,
    EAGER,
    EAGER_TIMES,
    L2_MODES,
    SPEED,
    THROUGHPUT,
    TIMES,
    StudyView,
)
from publish.tables import Column, Table, Text


def _title(direction: str, dtype: str) -> str:
    return f"{DIRECTION_TITLES.get(direction, direction)}, {dtype}"


def _cases(view: StudyView, direction: str, dtype: str) -> list[CaseResult]:
    """The cases of one direction and dtype, by shape, each L2 mode in turn."""
    out = []
    for dims in view.shapes(direction, dtype):
        for l2 in L2_MODES:
            c = view.find(direction=direction, dtype=dtype, l2=l2, **dims)
            if c is not None:
                out.append(c)
    return out


def present(view: StudyView, cases: list[CaseResult]) -> list[str]:
    """The peers these cases offered (a peer of another operator has no column here)."""
    return [p for p in view.peers if any(p in c.variants for c in cases)]


def _shape_help(view: StudyView) -> str:
    names = studies.shape(view.study)
    return "M × N × K: C[M, N] = A[M, K] · B[K, N]" if names == ("rows", "cols", "k") else "rows × width"


def rate_columns(view: StudyView) -> list[Column]:
    """The rates the spec shows beside our time: bandwidth and share of the copy, and/or
    TFLOP/s and share of the bf16 matrix rate, each measured in the same run."""
    out = []
    for rate in view.spec.rates:
        if rate == BANDWIDTH:
            out += [
                Column("gbps", "GB/s", "bytes counted from the problem / median device time"),
                Column("pct", "% copy", "of the device-copy bandwidth measured in the same run"),
            ]
        elif rate == THROUGHPUT:
            out += [
                Column("tflops", "TFLOP/s", "flops counted from the problem / median device time"),
                Column("pct_mm", "% mm peak", "of the cuBLAS bf16 matrix rate measured in the same run"),
            ]
    return out


def rate_cells(view: StudyView, ours: Measurement) -> dict[str, Num]:
    out: dict[str, Num] = {}
    for rate in view.spec.rates:
        if rate == BANDWIDTH:
            gbps = ours.gbps()
            out |= {"gbps": Num(gbps.value, "GBps_bare", gbps.sources, gbps.note), "pct": ours.pct_copy()}
        elif rate == THROUGHPUT and ours.flops > 0:
            t = ours.tflops()
            out |= {"tflops": Num(t.value, "TFLOPs_bare", t.sources, t.note), "pct_mm": ours.pct_mm()}
    return out


def has_eager(view: StudyView, cases: list[CaseResult]) -> bool:
    return any(c.eager().get(view.ours) is not None for c in cases)


def speed_table(view: StudyView, direction: str, dtype: str) -> Table | None:
    cases = _cases(view, direction, dtype)
    if not cases:
        return None
    peers = present(view, cases)
    cols = [
        Column("shape", "Shape", _shape_help(view), numeric=False),
        Column("l2", "L2", "cold: inputs come from DRAM; warm: the same buffers every call", numeric=False),
        Column("ours", "Ours (µs)", f"median time of our kernel: {DEVICE_TIME}"),
        Column("ours_eager", "Ours, eager call (µs)", f"median of our {EAGER_CALL}: a different measurement"),
        *rate_columns(view),
    ] + [
        Column(p, f"vs {label}", f"{label} time / our time, {DEVICE_TIME}: above 1.00× we are faster")
        for p, label in ((p, view.label(p)) for p in peers)
    ]
    table = Table(
        f"{view.study}-{slug(direction)}-{dtype}",
        f"{_title(direction, dtype)}: our time and speedup over each peer ({DEVICE_TIME}; our {EAGER_CALL} beside it)",
        cols,
    )
    for c in cases:
        ours = c.get(view.ours)
        row: dict[str, Any] = {"shape": c.shape, "l2": l2_cell(c)}
        if ours is None:
            row["ours"] = refusal(c, view.ours)
        else:
            row |= {"ours": bare(ours.time()), **rate_cells(view, ours)}
        row["ours_eager"] = time_or_why(c.eager(), view.ours)
        for peer in peers:
            row[peer] = c.speedup(view.ours, peer) or refusal(c, peer)
        table.rows.append(row)
    return table


def eager_table(view: StudyView, direction: str, dtype: str) -> Table | None:
    """The same cases through the eager call: our time and the speedup over each peer's
    eager call, decided by the same verdict rule."""
    cases = _cases(view, direction, dtype)
    if not has_eager(view, cases):
        return None
    peers = present(view, cases)
    cols = [
        Column("shape", "Shape", _shape_help(view), numeric=False),
        Column("l2", "L2", numeric=False),
        Column("ours", "Ours, eager call (µs)", f"median of our {EAGER_CALL}"),
        Column("device", "Ours, device (µs)", f"median of our {DEVICE_TIME}, for reference"),
    ] + [
        Column(p, f"vs {label}", f"{label}'s eager call / ours ({EAGER_CALL}): above 1.00× ours is faster")
        for p, label in ((p, view.label(p)) for p in peers)
    ]
    table = Table(
        f"{view.study}-{slug(direction)}-{dtype}-eager",
        f"{_title(direction, dtype)}: the {EAGER_CALL}, ours and the speedup over each peer's",
        cols,
    )
    for c in cases:
        e = c.eager()
        row: dict[str, Any] = {
            "shape": c.shape,
            "l2": l2_cell(c),
            "ours": time_or_why(e, view.ours),
            "device": time_or_why(c, view.ours),
        }
        for peer in peers:
            row[peer] = e.speedup(view.ours, peer) or refusal(e, peer)
        table.rows.append(row)
    return table


def time_table(view: StudyView, direction: str, dtype: str, *, eager: bool = False) -> Table | None:
    """Ours and every peer's median (variants that are neither have tables of their own)."""
    cases = _cases(view, direction, dtype)
    if not cases or (eager and not has_eager(view, cases)):
        return None
    present = [v for v in (view.ours, *view.peers) if any(v in c.variants for c in cases)]
    measure = EAGER_CALL if eager else DEVICE_TIME
    cols = [Column("shape", "Shape", numeric=False), Column("l2", "L2", numeric=False)] + [
        Column(v, view.label(v), f"median µs, {measure}") for v in present
    ]
    table = Table(
        f"{view.study}-{slug(direction)}-{dtype}-{'eager-times' if eager else 'times'}",
        f"{_title(direction, dtype)}: median time of ours and every peer (µs), {measure}",
        cols,
    )
    for c in cases:
        seen = c.eager() if eager else c
        row: dict[str, Any] = {"shape": c.shape, "l2": l2_cell(c)}
        for v in present:
            row[v] = time_or_why(seen, v)
        table.rows.append(row)
    return table


def summary_table(view: StudyView) -> Table:
    """One line per peer: in how many cases ours was faster, unresolved or slower, on device
    time and as an eager call, and the widest loss: the page's answer in one table."""
    cols = [Column("peer", "Peer", numeric=False)]
    for key, label in (("dev", "Device time"), ("eag", "Eager call")):
        cols += [
            Column(f"{key}_win", f"{label}: ours faster", "cases where the one verdict is a win"),
            Column(f"{key}_tie", f"{label}: unresolved", "cases where the difference is not resolved: shown as a tie"),
            Column(f"{key}_loss", f"{label}: ours slower", "cases where the one verdict is a loss"),
        ]
    cols.append(Column("worst", "Widest loss (device)", "the lowest resolved speedup, and its case", numeric=False))
    table = Table(
        f"{view.study}-summary", "Ours against each peer: cases won, unresolved and lost, every shape and dtype", cols
    )
    timed = view.timed()
    for peer in view.peers:
        label = view.label(peer)
        row: dict[str, Any] = {"peer": Text(label)}
        compared_any = False
        for key, eager in (("dev", False), ("eag", True)):
            outcomes = [(c, view.outcome(c.eager() if eager else c, peer)) for c in timed]
            compared = [c for c, o in outcomes if o is not None]
            compared_any |= bool(compared)
            for outcome, col in (("win", "win"), ("unresolved", "tie"), ("loss", "loss")):
                found = [c for c, o in outcomes if o == outcome]
                row[f"{key}_{col}"] = (
                    count(len(found), compared, f"{outcome} against {label} in {len(found)} of {len(compared)} cases")
                    if compared
                    else Text("—", "not measured")
                )
        if not compared_any:
            continue
        losses = [c for c in timed if view.outcome(c, peer) == "loss"]
        if losses:
            worst = min(losses, key=lambda c: c.ratio(peer, view.ours).value)  # type: ignore[union-attr]
            row["worst"] = Text.rich(
                sentence("{x} at {case}", x=worst.speedup(view.ours, peer), case=worst.case_id.replace("x", "×"))  # type: ignore[arg-type]
            )
        else:
            row["worst"] = Text("none", "no resolved loss on device time")
        table.rows.append(row)
    return table


def section_line(view: StudyView, direction: str, dtype: str) -> Markup:
    """What a collapsed section holds, in one line: its cases, and where ours lost."""
    cases = [c for c in view.where(direction=direction, dtype=dtype) if c.get(view.ours) is not None]
    lost = [c for c in cases if any(view.outcome(c, p) == "loss" for p in view.peers)]
    eager = [c for c in cases if any(view.outcome(c.eager(), p) == "loss" for p in view.peers)]
    text = sentence(
        "{n} cases; ours slower than some peer in {k} on device time",
        n=count(len(cases), cases, "cases in force"),
        k=count(len(lost), cases, "cases with a resolved loss, device time"),
    )
    if any(c.eager().get(view.ours) for c in cases):
        text += sentence(" and in {e} as an eager call", e=count(len(eager), cases, "cases with a resolved eager loss"))
    return text


def sections(view: StudyView) -> list[dict[str, Any]]:
    """One collapsed section per direction and dtype the data hold, with the tables the spec
    asks for."""
    wanted = view.spec.tables
    out = []
    for direction in view.directions():
        for dtype in view.dtypes():
            speed = speed_table(view, direction, dtype)
            if speed is None:
                continue
            out.append(
                {
                    "direction": direction,
                    "dtype": dtype,
                    "id": speed.id,
                    "title": _title(direction, dtype),
                    "line": section_line(view, direction, dtype),
                    "speed": speed if SPEED in wanted else None,
                    "eager": eager_table(view, direction, dtype) if EAGER in wanted else None,
                    "times": time_table(view, direction, dtype) if TIMES in wanted else None,
                    "eager_times": time_table(view, direction, dtype, eager=True) if EAGER_TIMES in wanted else None,
                }
            )
    return out
