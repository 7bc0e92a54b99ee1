"""Compare: the latest two runs of each study, case by case.  A change is flagged only when
the one verdict resolves it: significant over the samples (Mann-Whitney U) *and* larger
than the noise floor that repeat runs at one commit measured (the Stability page)."""

from __future__ import annotations

from typing import Any

from contract import studies
from publish.compare import Change, compare_runs, smallest_p, tally, untestable_note
from publish.numbers import Num, Source, definition
from publish.pages import SiteData
from publish.runs import Run
from publish.stability import FLOOR_QUANTILE, NoiseFloor, noise_floor
from publish.tables import Column, Table, Text

THRESHOLD = 0.05
NOISE_ROWS = 25  # the largest changes within the noise floor, shown for a reader to judge
ALPHA = 0.01


def _gpu(run: Run) -> tuple[str, int]:
    g = run.env["gpu"]
    return str(g["name"]), int(g["sm_count"])


def _pair(data: SiteData, study: str) -> tuple[Run, Run] | None:
    """The latest two runs of the study, on one GPU, that share cases (a quick run only with
    a quick run)."""
    runs = [r for r in data.runs if r.study == study]
    for i in range(len(runs) - 1, 0, -1):
        b = runs[i]
        for a in reversed(runs[:i]):
            if _gpu(a) == _gpu(b) and {c["id"] for c in a.doc["cases"]} & {c["id"] for c in b.doc["cases"]}:
                return a, b
    return None


def _columns() -> list[Column]:
    return [
        Column("case", "Case", numeric=False),
        Column("variant", "Variant", numeric=False),
        Column("a", "A (µs)", "median of run A"),
        Column("b", "B (µs)", "median of run B"),
        Column("change", "Change", "B median / A median - 1"),
        Column("floor", "Noise floor", "the spread this case and variant showed across repeat runs at one commit"),
        Column("p", "p", "two-sided Mann-Whitney U over the raw samples of the two runs"),
        Column("verdict", "Verdict", numeric=False),
    ]


def _measured(run: Run, case_id: str, variant: str) -> bool:
    return any(e["id"] == case_id and (e["variants"].get(variant) or {}).get("samples_us") for e in run.doc["cases"])


def _floor_sources(c: Change, floor: NoiseFloor) -> tuple[Source, ...]:
    # A floor measured for this case and variant cites the repeat runs that measured it; the
    # study's typical floor (a case no repeat run measured) cites the repeat runs as a whole.
    if (c.case_id, c.variant) in floor.per_case:
        return tuple(
            Source(r.run_id, c.case_id, c.variant, "median, repeat run")
            for r in floor.runs
            if _measured(r, c.case_id, c.variant)
        )
    return tuple(Source(r.run_id, statistic="repeat run at one commit (the study's typical floor)") for r in floor.runs)


def _row(c: Change, a: Run, b: Run, floor: NoiseFloor) -> dict[str, Any]:
    sa = Source(a.run_id, c.case_id, c.variant, f"median of {c.a.n} samples")
    sb = Source(b.run_id, c.case_id, c.variant, f"median of {c.b.n} samples")
    css = {"regression": "loss", "improvement": "win"}.get(c.verdict, "tie")
    row: dict[str, Any] = {
        "case": Text(c.case_id),
        "variant": Text(c.variant),
        "a": Num(c.a.median, "us_bare", (sa,)),
        "b": Num(c.b.median, "us_bare", (sb,)),
        "change": Num(100 * c.change, "pct_signed", (sa, sb), note=c.decision.note(), css=css),
        "p": Num(c.p, "p", (sa, sb), note=f"Mann-Whitney U, two-sided; smallest p possible here {c.smallest_p:.2g}"),
        "verdict": Text(c.verdict, "; ".join(c.decision.reasons) or "resolved", css=css),
    }
    if c.floor is not None:
        runs = _floor_sources(c, floor)
        row["floor"] = Num(100 * c.floor.value, "pct", runs or (sa, sb), note=c.floor.measured)
    else:
        row["floor"] = Text("none", "no repeat runs at one commit measured this study")
    return row


def _floor_summary(floor: NoiseFloor) -> dict[str, Any]:
    """The floor the section used, as linked numbers."""
    src = tuple(Source(r.run_id, statistic="repeat run at one commit") for r in floor.runs)
    typical = floor.typical
    return {
        "groups": [{"commit": g.commit[:7], "gpu": g.gpu, "runs": [r.run_id for r in g.runs]} for g in floor.groups],
        "pairs": Num(len(floor.per_case), "count", src) if src else None,
        "typical": Num(
            100 * typical,
            "pct",
            src,
            note=f"{100 * FLOOR_QUANTILE:.0f}th percentile of the case/variant spreads across repeat runs",
        )
        if typical is not None and src
        else None,
        "quantile": f"{100 * FLOOR_QUANTILE:.0f}th",
    }


def context(data: SiteData) -> dict[str, Any]:
    sections = []
    for study in studies.names():
        pair = _pair(data, study)
        if pair is None:
            continue
        a, b = pair
        floor = noise_floor(data.runs, study, stats=data.stats)
        changes = compare_runs(a, b, floor=floor, threshold=THRESHOLD, alpha=ALPHA, stats=data.stats)
        t = tally(changes)
        flagged = Table(f"compare-{study}", f"{study}: every change flagged between the latest two runs", _columns())
        for c in sorted((c for c in changes if c.decision.resolved), key=lambda c: -abs(c.change)):
            flagged.rows.append(_row(c, a, b, floor))
        noise = Table(
            f"compare-{study}-noise",
            f"{study}: the {min(NOISE_ROWS, t.within_noise)} largest changes significant over the samples but no "
            "larger than the noise floor (not flagged)",
            _columns(),
        )
        for c in sorted((c for c in changes if c.within_noise), key=lambda c: -abs(c.change))[:NOISE_ROWS]:
            noise.rows.append(_row(c, a, b, floor))
        src = (Source(a.run_id, statistic="case/variant pairs in both runs"), Source(b.run_id))
        counts = [(c.a.n, c.b.n) for c in changes]
        sections.append(
            {
                "study": study,
                "a": a,
                "b": b,
                "same_commit": a.doc["code"]["commit"] == b.doc["code"]["commit"],
                "table": flagged,
                "noise": noise if noise.rows else None,
                "floor": _floor_summary(floor),
                "pairs": Num(t.pairs, "count", src),
                "tested": Num(t.pairs - t.untestable, "count", src),
                "untestable": Num(t.untestable, "count", src) if t.untestable else None,
                "untestable_note": untestable_note(t, ALPHA),
                "min_p": Num(max(smallest_p(na, nb) for na, nb in counts), "p", src) if counts else None,
                "regressions": Num(t.regressions, "count", src),
                "improvements": Num(t.improvements, "count", src),
                "within_noise": Num(t.within_noise, "count", src),
            }
        )
    return {
        "sections": sections,
        "threshold": definition(100 * THRESHOLD, "pct", "set, not measured: the smallest change flagged"),
        "alpha": definition(ALPHA, "p", "set, not measured: the significance level"),
    }
