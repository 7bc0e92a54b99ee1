"""A study's current results: for every case id, the newest run that measured it.

Comparisons are always made inside one case of one run (all variants of a case were timed
interleaved, on the same GPU state), never across runs.  Each value leaves here as a
:class:`~publish.numbers.Num` carrying its provenance.
"""

from __future__ import annotations

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

    def source(self, statistic: str) -> Source:
        s = self.summary
        detail = ""
        if s is not None:
            detail = (
                f"IQR {s.q1:.3g}-{s.q3:.3g} µs ({100 * s.spread:.1f}%), 95% CI of median {s.lo:.3g}-{s.hi:.3g} µs"
                f" · timer {self.raw.get('timer')}, {self.raw.get('calls_per_sample')} calls per sample"
            )
        n = s.n if s else 0
        return Source(self.run.run_id, self.case_id, self.variant, f"{statistic} of {n} samples", detail)

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

    def get(self, variant: str) -> Measurement | None:
        m = self.variants.get(variant)
        return m if m is not None and m.ok else None

    def speedup(self, ours: str, peer: str) -> Num | None:
        """How many times faster ``ours`` ran than ``peer``: peer median / our median."""
        a, b = self.get(ours), self.get(peer)
        if a is None or b is None:
            return None
        r = self.ratio(peer, ours)
        assert r is not None
        css = "tie" if not r.resolved else ("win" if r.value > 1 else "loss")
        verdict = "resolved" if r.resolved else "unresolved: the 95% intervals overlap"
        return Num(
            r.value,
            "x",
            (a.source("median"), b.source("median")),
            note=f"{peer} {b.summary.median:.4g} µs / {ours} {a.summary.median:.4g} µs; "  # type: ignore[union-attr]
            f"interval {r.lo:.3f}-{r.hi:.3f}×, {verdict}",
            css=css,
        )

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
        self.cases: dict[str, CaseResult] = {}
        for run in self.runs:  # oldest first: newer runs replace older entries
            for entry in run.doc["cases"]:
                variants = {
                    name: Measurement(run, entry["id"], name, raw, int(entry["bytes"]))
                    for name, raw in entry["variants"].items()
                }
                self.cases[entry["id"]] = CaseResult(run, entry["id"], entry["case"], int(entry["bytes"]), variants)

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
