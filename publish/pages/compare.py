"""Compare: the latest two runs of each study, case by case, with a significance test."""

from __future__ import annotations

from typing import Any

from publish.compare import compare_runs
from publish.numbers import Num, Source
from publish.pages import STUDIES, SiteData
from publish.tables import Column, Table, Text


def _pair(data: SiteData, study: str) -> tuple[Any, Any] | None:
    """The latest two runs of the study that share cases (a quick run only with a quick run)."""
    runs = [r for r in data.runs if r.study == study]
    for i in range(len(runs) - 1, 0, -1):
        b = runs[i]
        for a in reversed(runs[:i]):
            if {c["id"] for c in a.doc["cases"]} & {c["id"] for c in b.doc["cases"]}:
                return a, b
    return None


def context(data: SiteData) -> dict[str, Any]:
    sections = []
    for study in STUDIES:
        pair = _pair(data, study)
        if pair is None:
            continue
        a, b = pair
        changes = compare_runs(a, b)
        cols = [
            Column("case", "Case", numeric=False),
            Column("variant", "Variant", numeric=False),
            Column("a", "A (µs)"),
            Column("b", "B (µs)"),
            Column("change", "Change", "B median / A median - 1"),
            Column("p", "p", "two-sided Mann-Whitney U over the raw samples", numeric=True),
            Column("verdict", "Verdict", numeric=False),
        ]
        table = Table(f"compare-{study}", f"{study}: every change flagged between the latest two runs", cols)
        shown = [c for c in changes if c.verdict != "unchanged"]
        for c in sorted(shown, key=lambda c: -abs(c.change)):
            sa = Source(a.run_id, c.case_id, c.variant, f"median of {c.a.n} samples")
            sb = Source(b.run_id, c.case_id, c.variant, f"median of {c.b.n} samples")
            table.rows.append(
                {
                    "case": Text(c.case_id),
                    "variant": Text(c.variant),
                    "a": Num(c.a.median, "us_bare", (sa,)),
                    "b": Num(c.b.median, "us_bare", (sb,)),
                    "change": Num(
                        100 * c.change, "pct_signed", (sa, sb), css="loss" if c.verdict == "regression" else "win"
                    ),
                    "p": Num(c.p, "p", (sa, sb), note="Mann-Whitney U, two-sided"),
                    "verdict": Text(c.verdict, css="loss" if c.verdict == "regression" else "win"),
                }
            )
        src = (Source(a.run_id, statistic="case/variant pairs in both runs"), Source(b.run_id))
        sections.append(
            {
                "study": study,
                "a": a,
                "b": b,
                "table": table,
                "pairs": Num(len(changes), "count", src),
                "regressions": Num(sum(c.verdict == "regression" for c in changes), "count", src),
                "improvements": Num(sum(c.verdict == "improvement" for c in changes), "count", src),
            }
        )
    return {"sections": sections}
