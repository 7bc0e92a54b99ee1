"""Stability: how well comparisons repeat across runs of the same suite."""

from __future__ import annotations

from typing import Any

from publish.claims import sentence
from publish.numbers import Num, Source
from publish.pages import SiteData
from publish.pages.rowgrid import OURS as GRID_OURS
from publish.pages.rowgrid import PEERS as GRID_PEERS
from publish.pages.softmax import OURS, PEERS
from publish.stability import LEVELS, suites
from publish.tables import Column, Table, Text

# Per study: our variant, and the peers whose speedups are followed across runs.
COMPARED = {
    "softmax": (OURS, list(PEERS), PEERS),
    "rowgrid": (GRID_OURS, list(GRID_PEERS), GRID_PEERS),
}


def context(data: SiteData) -> dict[str, Any]:
    cols = (
        [
            Column("suite", "Suite", numeric=False),
            Column("runs", "Runs", "runs in force that measured the suite's cases"),
            Column("n", "Comparisons", "case × peer pairs measured in two or more runs"),
        ]
        + [
            Column(f"w{int(100 * lv)}", f"Agree within {int(100 * lv)}%", "largest ratio / smallest - 1")
            for lv in LEVELS
        ]
        + [
            Column("widest", "Widest spread", numeric=False),
        ]
    )
    table = Table("stability-suites", "Run-to-run agreement of our speedup over each peer", cols)
    for study, (ours, peers, labels) in COMPARED.items():
        results = data.studies[study]
        for s in suites(results, ours, list(peers)):
            src = tuple(Source(r, statistic="speedups recomputed per run") for r in sorted(s.runs))
            row: dict[str, Any] = {
                "suite": Text(s.name),
                "runs": Num(len(s.runs), "count", src),
                "n": Num(s.comparisons, "count", src),
            }
            for lv in LEVELS:
                row[f"w{int(100 * lv)}"] = Num(
                    100 * s.within[lv] / s.comparisons,
                    "pct",
                    src,
                    note=f"{s.within[lv]} of {s.comparisons} comparisons",
                )
            if s.widest is not None:
                spread, case, peer = s.widest
                sources = tuple(c.get(ours).source("median") for c in case.repeats if c.get(ours))  # type: ignore[union-attr]
                row["widest"] = Text.rich(
                    sentence(
                        "{case} vs {peer}: {spread}",
                        case=case.case_id,
                        peer=labels[peer],
                        spread=Num(
                            100 * spread, "pct", sources, note="largest / smallest speedup across runs, minus one"
                        ),
                    )
                )
            table.rows.append(row)
    return {"suites": table, "has_repeats": bool(table.rows)}
