"""A study's current results: for every case id, the newest run that measured it.

Comparisons are always made inside one case of one run (all variants of a case were timed
interleaved, on the same GPU state), never across runs.  Each value leaves here as a
:class:`~publish.numbers.Num` carrying its provenance.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from publish.numbers import Num, Source
from publish.runs import Run
from publish.stats import Ratio, Summary, ratio, summarize


@dataclass(frozen=True)
class Measurement:
    run: Run
    case_id: str
    variant: str
    raw: dict[str, Any]
    bytes: int

    @cached_property
    def summary(self) -> Summary | None:
        return summarize(self.raw["samples_us"]) if self.raw["samples_us"] else None

    @property
    def error(self) -> str | None:
        return self.raw["error"]

    @property
    def ok(self) -> bool:
        return self.summary is not None

    @property
    def meta(self) -> dict[str, Any]:
        return self.raw.get("meta") or {}

    @property
    def check(self) -> dict[str, Any] | None:
        """The correctness check recorded before timing: relative L2 error per output."""
        return self.raw.get("check")

    def source(self, statistic: str) -> Source:
        s = self.summary
        n = s.n if s else 0
        l2 = self.case_id.rsplit("/", 1)[-1]  # case ids end with the L2 mode
        parts = [f"L2 {l2}", f"timer {self.raw.get('timer')}, {self.raw.get('calls_per_sample')} calls per sample"]
        if s is not None:
            parts.insert(
                0,
                f"IQR {s.q1:.4g}-{s.q3:.4g} µs (spread {100 * s.spread:.1f}%), "
                f"95% CI of the median {s.lo:.4g}-{s.hi:.4g} µs",
            )
        return Source(self.run.run_id, self.case_id, self.variant, f"{statistic} of {n} samples", " · ".join(parts))

    def time(self) -> Num:
        assert self.summary is not None, f"{self.case_id}/{self.variant} has no samples"
        return Num(self.summary.median, "us", (self.source("median"),))

    def gbps(self) -> Num:
        assert self.summary is not None
        return Num(
            self.bytes / (self.summary.median * 1e3),
            "GBps",
            (self.source("bytes / median"),),
            note=f"{self.bytes:,} bytes counted from the problem",
        )

    def pct_copy(self) -> Num:
        assert self.summary is not None
        gbps = self.bytes / (self.summary.median * 1e3)
        peak = self.run.copy_peak
        return Num(
            100 * gbps / peak,
            "pct",
            (self.source("bytes / median"),),
            note=f"of the {peak:,.0f} GB/s device copy measured in the same run",
        )


@dataclass(frozen=True)
class CaseResult:
    run: Run
    case_id: str
    params: dict[str, Any]
    bytes: int
    variants: dict[str, Measurement]
    repeats: tuple[CaseResult, ...] = ()  # every measurement of this case, this one included, oldest first

    def get(self, variant: str) -> Measurement | None:
        m = self.variants.get(variant)
        return m if m is not None and m.ok else None

    def speedup(self, ours: str, peer: str) -> Num | None:
        """How many times faster ``ours`` ran than ``peer``: peer median / our median.

        Counted as a win or a loss only when the 95% interval excludes 1.00x *and*, where
        the case was measured in several runs, the difference exceeds the run-to-run spread
        of this ratio; otherwise it is shown as unresolved."""
        a, b = self.get(ours), self.get(peer)
        if a is None or b is None:
            return None
        r = self.ratio(peer, ours)
        assert r is not None
        notes = [
            f"{peer} {b.summary.median:.4g} µs / {ours} {a.summary.median:.4g} µs; "  # type: ignore[union-attr]
            f"95% interval {r.lo:.3f}-{r.hi:.3f}×"
        ]
        resolved = r.resolved
        spread = self.run_spread(peer, ours)
        if spread is not None:
            values, rel = spread
            notes.append(
                f"across {len(values)} runs {min(values):.3f}-{max(values):.3f}× (run-to-run spread {100 * rel:.1f}%)"
            )
            if abs(r.value - 1) <= rel:
                resolved = False
                notes.append("the difference is within the run-to-run spread")
        if not r.resolved:
            notes.append("the intervals overlap")
        notes.append("resolved" if resolved else "unresolved: shown as a tie")
        css = "tie" if not resolved else ("win" if r.value > 1 else "loss")
        return Num(r.value, "x", (a.source("median"), b.source("median")), note="; ".join(notes), css=css)

    def run_spread(self, num: str, den: str) -> tuple[list[float], float] | None:
        """This ratio in every run that measured the case, and its spread: (max - min) / median."""
        values = [r.value for c in self.repeats if (r := c.ratio(num, den)) is not None]
        if len(values) < 2:
            return None
        values.sort()
        return values, (values[-1] - values[0]) / statistics.median(values)

    def ratio(self, num: str, den: str) -> Ratio | None:
        a, b = self.get(num), self.get(den)
        if a is None or b is None:
            return None
        return ratio(a.summary, b.summary)  # type: ignore[arg-type]

    @property
    def shape(self) -> str:
        return f"{self.params['rows']}×{self.params['cols']}"


class StudyResults:
    """The newest measurement of every case of one study, across its runs."""

    def __init__(self, study: str, runs: list[Run]) -> None:
        self.study = study
        self.runs = [r for r in runs if r.study == study]
        history: dict[str, list[CaseResult]] = {}
        for run in self.runs:  # oldest first: the newest measurement of a case is the one shown
            for entry in run.doc["cases"]:
                variants = {
                    name: Measurement(run, entry["id"], name, raw, int(entry["bytes"]))
                    for name, raw in entry["variants"].items()
                }
                case = CaseResult(run, entry["id"], entry["case"], int(entry["bytes"]), variants)
                history.setdefault(entry["id"], []).append(case)
        self.cases: dict[str, CaseResult] = {
            case_id: dataclasses.replace(found[-1], repeats=tuple(found)) for case_id, found in history.items()
        }

    def find(self, **params: Any) -> CaseResult | None:
        found = self.where(**params)
        return found[0] if found else None

    def where(self, **params: Any) -> list[CaseResult]:
        out = [c for c in self.cases.values() if all(c.params.get(k) == v for k, v in params.items())]
        return sorted(out, key=lambda c: (c.params.get("cols", 0), c.params.get("rows", 0)))

    @property
    def used_runs(self) -> list[Run]:
        ids = {c.run.run_id for c in self.cases.values()}
        return [r for r in self.runs if r.run_id in ids]
