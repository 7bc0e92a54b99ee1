"""Stability: how well comparisons repeat across runs of the same suite."""

from __future__ import annotations

from typing import Any

from contract import studies
from publish.claims import sentence
from publish.numbers import Num, Source
from publish.pages import SiteData, study_pages
from publish.results import RunSpread
from publish.stability import FLOOR_QUANTILE, LEVELS, noise_floor, suites
from publish.stats import quantile
from publish.tables import Column, Table, Text


def context(data: SiteData) -> dict[str, Any]:
    cols = (
        [
            Column("suite", "Suite", numeric=False),
            Column("runs", "Repeat runs", "runs of one clean commit on one GPU that measured the suite's cases"),
            Column("n", "Comparisons", "case × peer pairs measured in two or more runs of one commit"),
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
    # Every study whose page compares ours with peers (its spec, publish/pages/<study>.py).
    for spec in (s for s in study_pages() if s.compares):
        results, ours = data.studies[spec.study], spec.ours
        for s in suites(results, ours, list(spec.peers)):
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
                group = set((case.repeat_spread(peer, ours) or RunSpread(0, "")).runs)
                sources = tuple(
                    c.get(ours).source("median")  # type: ignore[union-attr]
                    for c in case.repeats
                    if c.get(ours) and c.run.run_id in group
                )
                row["widest"] = Text.rich(
                    sentence(
                        "{case} vs {peer}: {spread}",
                        case=case.case_id,
                        peer=results.label(peer),
                        spread=Num(
                            100 * spread,
                            "pct",
                            sources,
                            note="largest / smallest speedup across repeat runs at one commit, minus one",
                        ),
                    )
                )
            table.rows.append(row)
    return {"suites": table, "has_repeats": bool(table.rows), "floors": floors_table(data)}


def floors_table(data: SiteData) -> Table:
    """The noise floor of each study: how far each variant's median moved between repeat
    runs at one commit on one GPU.  The Compare page flags only changes beyond it."""
    cols = [
        Column("study", "Study", numeric=False),
        Column("groups", "Repeat runs", "runs at one clean commit on one GPU", numeric=False),
        Column("pairs", "Case/variant pairs", "measured in two or more runs of one commit"),
        Column("median", "Median spread", "largest / smallest median - 1"),
        Column("typical", f"{100 * FLOOR_QUANTILE:.0f}th percentile", "the floor for a case not repeated"),
        Column("largest", "Largest"),
    ]
    title = "Noise floor: how far one variant's time moved between runs of one commit"
    table = Table("stability-noise-floor", title, cols)
    for study in studies.names():
        floor = noise_floor(data.runs, study, stats=data.stats)
        row: dict[str, Any] = {"study": Text(study)}
        if not floor.groups:
            row["groups"] = Text("none", "no two runs of this study at one commit on one GPU are in force")
            table.rows.append(row)
            continue
        src = tuple(Source(r.run_id, statistic="repeat run at one commit") for r in floor.runs)
        values = sorted(floor.per_case.values())
        row["groups"] = Text(
            "; ".join(f"{g.commit[:7]}: {len(g.runs)} runs" for g in floor.groups),
            "; ".join(", ".join(r.run_id for r in g.runs) for g in floor.groups),
        )
        row["pairs"] = Num(len(values), "count", src)
        for key, q in (("median", 0.5), ("typical", FLOOR_QUANTILE), ("largest", 1.0)):
            if not values:  # e.g. two partial sweeps of one commit that measured different cases
                row[key] = Text("—", "the repeat runs measured no case and variant in common")
                continue
            row[key] = Num(100 * quantile(values, q), "pct", src, note=f"quantile {q:g} of {len(values)} spreads")
        table.rows.append(row)
    return table
