"""A study's current results: for every case id, the newest run that measured it.

Comparisons are always made inside one case of one run (all variants of a case were timed
interleaved, on the same GPU state), never across runs.  Each value leaves here as a
:class:`~publish.numbers.Num` carrying its provenance.

Every statistic here (a median, its interval, the quartiles, a bandwidth, a share of the copy
peak) is read from the tidy frame of the runs (:class:`publish.frame.Stats`, the frame pivoted
to one row per measurement): run files -> frame -> these results -> the tables, charts,
claims and downloads, one path for every number.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from contract import studies
from contract.labels import legacy_label
from publish.frame import Stats
from publish.numbers import Num, Source
from publish.runs import Run
from publish.stats import PAIRED_MIN, Ratio, Summary, paired_ratio, quantile, ratio

# The two measurements a variant may carry: device time (CUDA-graph replay, or CUDA events
# where a graph could not be captured) and, in schema 2, the eager call a user makes.
DEVICE = "samples_us"
EAGER = "eager_us"
MEASURES = {
    DEVICE: "device time, graph replay",
    EAGER: "eager call, host included",
}


@dataclass(frozen=True)
class Measurement:
    run: Run
    case_id: str
    variant: str
    raw: dict[str, Any]
    bytes: int
    l2: str = ""
    samples_key: str = DEVICE  # DEVICE or EAGER: which of the variant's samples this is
    flops: int = 0  # the work counted from the problem (0: the case counts none)
    # The frame of the runs, pivoted: where every statistic of this measurement is read.
    stats: Stats | None = field(default=None, compare=False, repr=False)

    @cached_property
    def _frame(self) -> Stats:
        # (a measurement made outside a study reads the frame of its own run)
        return self.stats if self.stats is not None else Stats.of([self.run])

    def statistic(self, name: str) -> float:
        """One statistic of these samples, from the frame (:data:`publish.frame.STATISTICS`)."""
        return self._frame.value(self.run.run_id, self.case_id, self.variant, self.samples_key, name)

    @cached_property
    def summary(self) -> Summary | None:
        """The median, quartiles and 95% interval of the median, from the frame."""
        return self._frame.summary(self.run.run_id, self.case_id, self.variant, self.samples_key)

    @property
    def samples(self) -> list[float]:
        """These samples in the order they were taken (round by round), as the run file has them."""
        return [float(x) for x in self.raw.get(self.samples_key) or []]

    def eager(self) -> Measurement:
        """The same variant's eager-call samples (none in schema-1 runs)."""
        return self._eager_view

    @cached_property
    def _eager_view(self) -> Measurement:
        # One view per measurement: its summary is then read from the frame once per build.
        return dataclasses.replace(self, samples_key=EAGER)

    @property
    def measure(self) -> str:
        """What the samples measure, in words."""
        timer = self.raw.get("timer")
        if self.samples_key == EAGER:
            return MEASURES[EAGER]
        if timer == "host-loop":
            return "host time per call, host-loop"
        if timer == "eager-events":
            return "a Python loop of calls between CUDA events, host and device together"
        if timer == "cuda-events":
            return "device time, CUDA events (no graph)"
        return MEASURES[DEVICE]

    @property
    def label(self) -> str:
        """What the pages call this variant, as its run file says (:meth:`Run.label`)."""
        return self.run.label(self.variant, self.raw)

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
        l2 = self.l2 or self.case_id.rsplit("/", 1)[-1]  # softmax case ids end with the L2 mode
        if self.samples_key == EAGER:
            timer = f"timer eager-events, {self.raw.get('eager_calls_per_sample')} calls per sample"
        else:
            timer = f"timer {self.raw.get('timer')}, {self.raw.get('calls_per_sample')} calls per sample"
        parts = [self.measure, f"L2 {l2}", timer]
        if s is not None:
            parts.insert(
                1,
                f"IQR {s.q1:.4g}-{s.q3:.4g} µs (spread {100 * s.spread:.1f}%), "
                f"95% CI of the median {s.lo:.4g}-{s.hi:.4g} µs",
            )
        return Source(
            self.run.run_id, self.case_id, self.variant, f"{statistic} of {n} samples", " · ".join(parts), self.timer
        )

    @property
    def timer(self) -> str:
        """The timer that produced these samples (every eager sample's is eager-events)."""
        return "eager-events" if self.samples_key == EAGER else str(self.raw.get("timer") or "")

    def time(self) -> Num:
        assert self.summary is not None, f"{self.case_id}/{self.variant} has no samples"
        return Num(self.summary.median, "us", (self.source("median"),))

    def gbps(self) -> Num:
        assert self.summary is not None
        return Num(
            self.statistic("gbps"),
            "GBps",
            (self.source("bytes / median"),),
            note=f"{self.bytes:,} bytes counted from the problem",
        )

    def tflops(self) -> Num:
        """The flops counted from the problem over the median device time."""
        assert self.summary is not None
        return Num(
            self.statistic("tflops"),
            "TFLOPs",
            (self.source("flops / median"),),
            note=f"{self.flops:,} flops counted from the problem",
        )

    def pct_mm(self) -> Num:
        """:meth:`tflops` as a share of the cuBLAS bf16 matrix rate measured in the same run."""
        assert self.summary is not None
        return Num(
            self.statistic("pct_mm_peak"),
            "pct",
            (self.source("flops / median"),),
            note=f"of the {self.run.mm_peak:,.0f} TFLOP/s bf16 matrix rate (cuBLAS) measured in the same run",
        )

    def pct_copy(self) -> Num:
        assert self.summary is not None
        peak = self.run.copy_peak
        return Num(
            self.statistic("pct_copy_peak"),
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
    rotation: dict[str, Any] | None = None  # schema 2, cold L2: {sets, bytes} the graph rotated through
    samples_key: str = DEVICE  # DEVICE, or EAGER for the view :meth:`eager` gives
    flops: int = 0  # the work counted from the problem (0: the case counts none)
    # The study's typical run-to-run spread of a comparison, for a case no repeat run measured
    # (:meth:`StudyResults.typical_spread`); None outside a study.
    typical: Callable[[str, str, str], RunSpread | None] | None = field(default=None, compare=False, repr=False)

    def get(self, variant: str) -> Measurement | None:
        m = self.variants.get(variant)
        return m if m is not None and m.ok else None

    def _eager_alone(self) -> CaseResult:
        variants = {n: m.eager() for n, m in self.variants.items()}
        return dataclasses.replace(self, variants=variants, repeats=(), samples_key=EAGER)

    def eager(self) -> CaseResult:
        """The same case seen through its eager-call samples, so that every comparison of
        eager calls goes through the same :meth:`speedup` as device times do."""
        return self._eager_view

    @cached_property
    def _eager_view(self) -> CaseResult:
        # Built once per case: pages ask for it hundreds of thousands of times per build.
        view = self._eager_alone()
        return dataclasses.replace(view, repeats=tuple(c._eager_alone() for c in self.repeats))

    @property
    def eager_measured(self) -> bool:
        """Whether the run that measured this case took eager samples at all."""
        return bool(self.run.doc["method"].get("eager_samples"))

    @property
    def within_l2(self) -> bool:
        """A cold case whose rotating input sets together could not exceed the L2 (a problem
        so small that even the most sets the timer allows stay under it)."""
        if self.params.get("l2") != "cold" or not self.rotation:
            return False
        return float(self.rotation["bytes"]) <= float(self.run.env["gpu"]["l2_bytes"])

    def time_ratio(self, num: str, den: str) -> Num | None:
        """``num``'s median over ``den``'s: a ratio of two times from this case, with both
        sources.  A threshold (e.g. "at most 1.10x") is checked on it; it is not a verdict."""
        a, b = self.get(num), self.get(den)
        if a is None or b is None:
            return None
        r = ratio(a.summary, b.summary)  # type: ignore[arg-type]
        note = (
            f"{num} {a.summary.median:.4g} µs / {den} {b.summary.median:.4g} µs; "  # type: ignore[union-attr]
            f"95% interval {r.lo:.3f}-{r.hi:.3f}×"
        )
        return Num(r.value, "x", (a.source("median"), b.source("median")), note=note)

    def difference(self, minuend: str, subtrahend: str) -> Num | None:
        """``minuend``'s median minus ``subtrahend``'s, in µs, with both sources (e.g. the
        cost autograd adds: a call with grad minus the same call without)."""
        a, b = self.get(minuend), self.get(subtrahend)
        if a is None or b is None:
            return None
        sa, sb = a.summary, b.summary
        note = f"median of {minuend} {sa.median:.4g} µs minus median of {subtrahend} {sb.median:.4g} µs"  # type: ignore[union-attr]
        return Num(sa.median - sb.median, "us", (a.source("median"), b.source("median")), note=note)  # type: ignore[union-attr]

    def verdict(self, ours: str, other: str) -> Verdict | None:
        """Whether ``ours`` beat ``other`` in this case, by the one rule (:func:`verdict`):
        the ratio of their medians in this run, and its spread across every run that measured
        the case."""
        r = self.ratio(other, ours)
        if r is None:
            return None
        return verdict(r, self.run_spread(other, ours))

    def speedup(self, ours: str, peer: str) -> Num | None:
        """How many times faster ``ours`` ran than ``peer``: peer median / our median, coloured
        by :meth:`verdict` (win, loss, or unresolved, shown as a tie)."""
        a, b = self.get(ours), self.get(peer)
        v = self.verdict(ours, peer)
        if a is None or b is None or v is None:
            return None
        head = f"{peer} {b.summary.median:.4g} µs / {ours} {a.summary.median:.4g} µs"  # type: ignore[union-attr]
        return Num(v.ratio.value, "x", (a.source("median"), b.source("median")), note=f"{head}; {v.note()}", css=v.css)

    def repeat_spread(self, num: str, den: str) -> RunSpread | None:
        """This ratio's spread across repeat runs of this case: runs of one clean commit on one
        GPU, where nothing changed (the largest over such groups); None where no two runs of
        one commit measured it."""
        groups: dict[tuple[str, str, int], list[tuple[float, str]]] = {}
        for c in self.repeats:
            key = repeat_key(c.run)
            if key is not None and (r := c.ratio(num, den)) is not None:
                groups.setdefault(key, []).append((r.value, c.run.run_id))
        found = [(spread([v for v, _ in vs]), k, vs) for k, vs in groups.items() if len(vs) >= 2]
        if not found:
            return None
        value, key, measured = max(found)
        values = [v for v, _ in measured]
        where = f"across {len(values)} runs at commit {key[0][:7]} {min(values):.3f}-{max(values):.3f}×"
        return RunSpread(value, where, tuple(run_id for _, run_id in measured))

    def run_spread(self, num: str, den: str) -> RunSpread | None:
        """How much this ratio moves between runs when nothing changed: its spread across the
        repeat runs of this case (:meth:`repeat_spread`), or, for a case no two runs of one
        commit measured, the study's typical spread of the same comparison; None when the
        study has no repeat runs at all.  (Runs of different commits are not repeats: the
        code they measured differs.)"""
        key = (num, den)
        memo = self._spreads
        if key not in memo:
            memo[key] = self._run_spread(num, den)
        return memo[key]

    @cached_property
    def _spreads(self) -> dict[tuple[str, str], RunSpread | None]:
        return {}

    def _run_spread(self, num: str, den: str) -> RunSpread | None:
        # (run_spread, computed once per pair)
        found = self.repeat_spread(num, den)
        if found is None and self.typical is not None:
            found = self.typical(num, den, self.samples_key)
        return found

    def ratio(self, num: str, den: str) -> Ratio | None:
        """``num``'s median over ``den``'s with its 95% interval: the per-round ratios' where
        both were sampled in this run's interleaved rounds (:func:`publish.stats.paired_ratio`),
        else the two medians' intervals' (:func:`publish.stats.ratio`)."""
        a, b = self.get(num), self.get(den)
        if a is None or b is None:
            return None
        xs, ys = a.samples, b.samples
        if len(xs) == len(ys) == self.run.doc["method"].get("rounds") and len(xs) >= PAIRED_MIN:
            return paired_ratio(a.summary, b.summary, xs, ys)  # type: ignore[arg-type]
        return ratio(a.summary, b.summary)  # type: ignore[arg-type]

    @property
    def dims(self) -> tuple[int, ...]:
        """The case's shape parameters, in the order the registry writes them (rows, cols;
        a matrix product's rows, cols, k)."""
        return tuple(self.params[p] for p in studies.shape(self.run.study) if p in self.params)

    @property
    def shape(self) -> str:
        return "×".join(str(d) for d in self.dims)


# ----------------------------------------------------------------------------- the one verdict
#
# Every win, loss and "unresolved" on the site (tables, claims, targets, the decision card,
# charts, the Compare page and `python -m bench compare`) is decided by :func:`verdict`.
# Nothing else compares two medians to call a winner.


TYPICAL_QUANTILE = 0.95  # a comparison no repeat run measured is judged against this percentile


def repeat_key(run: Run) -> tuple[str, str, int] | None:
    """Runs with the same key are repeats: one clean commit on one GPU, so whatever differs
    between them is noise.  A dirty tree's runs are nobody's repeats."""
    if run.doc["code"]["dirty"]:
        return None
    gpu = run.env["gpu"]
    return (str(run.doc["code"]["commit"]), str(gpu["name"]), int(gpu["sm_count"]))


def distance(value: float) -> float:
    """How far a ratio is from 1.00×, symmetrically: 0.80× and 1.25× are both 25% away."""
    return max(value, 1 / value) - 1


def spread(values: list[float]) -> float:
    """The run-to-run spread of a ratio (or a time) measured in several runs: largest /
    smallest - 1.  The Stability page's "agree within 5%" is this number at most 0.05."""
    return max(values) / min(values) - 1


@dataclass(frozen=True)
class RunSpread:
    """How much a ratio moved between runs: ``value`` as :func:`spread` gives it, and where it
    was measured, in words (e.g. "across 3 runs 0.96-1.02×")."""

    value: float
    measured: str
    runs: tuple[str, ...] = ()  # the run ids it was measured across


@dataclass(frozen=True)
class Verdict:
    """The outcome of one comparison.  ``ratio`` is the other side's time over ours: above
    1.00× ours was faster."""

    outcome: Literal["win", "loss", "unresolved"]
    ratio: Ratio
    run_spread: RunSpread | None
    reasons: tuple[str, ...]  # why it is unresolved (empty when resolved)

    @property
    def resolved(self) -> bool:
        return self.outcome != "unresolved"

    @property
    def css(self) -> str:
        """The class a number showing this comparison carries: unresolved is shown as a tie."""
        return "tie" if self.outcome == "unresolved" else self.outcome

    def note(self) -> str:
        parts = [f"95% interval {self.ratio.lo:.3f}-{self.ratio.hi:.3f}×"]
        if self.run_spread is not None:
            parts.append(f"{self.run_spread.measured} (run-to-run spread {100 * self.run_spread.value:.1f}%)")
        parts += list(self.reasons)
        parts.append(f"verdict: {self.outcome}" + (" (shown as a tie)" if not self.resolved else ""))
        return "; ".join(parts)


def verdict(
    r: Ratio,
    run_spread: RunSpread | None = None,
    *,
    p: float | None = None,
    alpha: float = 0.01,
    across_runs: bool = False,
) -> Verdict:
    """The one rule that decides win / loss / unresolved, for every comparison on the site.

    ``r`` is the other side's median over ours, with the 95% interval of that ratio from the
    two medians' intervals.  It is a win (above 1.00×) or a loss (below) only when

    - the interval excludes 1.00× (the samples inside the run separate), and
    - where a significance test was run over the samples (``p``), it is below ``alpha``, and
    - where the comparison was measured in several runs (or a noise floor is known), its
      distance from 1.00× exceeds that run-to-run spread: samples inside one run cannot
      show how much runs differ.

    A comparison ``across_runs`` (one run's median against another's) is never resolved
    without a measured run-to-run spread: its interval only says that the runs differ, not
    that the difference is more than runs usually differ.

    Otherwise it is *unresolved*, and the page shows it as a tie."""
    reasons = []
    if across_runs and run_spread is None:
        reasons.append("no run-to-run spread has been measured, so a difference between runs cannot be told from noise")
    if not r.resolved:
        reasons.append("the 95% interval includes 1.00×")
    if p is not None and not p < alpha:
        reasons.append(f"p = {p:.2g} is not below {alpha:g}")
    # (a relative tolerance: a change measured against its own spread, as when the two runs
    # compared are the repeat runs, must not escape it by a rounding error)
    if run_spread is not None and distance(r.value) <= run_spread.value * (1 + 1e-9) + 1e-12:
        reasons.append("the difference is within the run-to-run spread")
    outcome: Literal["win", "loss", "unresolved"] = "unresolved"
    if not reasons:
        outcome = "win" if r.value > 1 else "loss"
    return Verdict(outcome, r, run_spread, tuple(reasons))


class StudyResults:
    """The newest measurement of every case of one study, across its runs."""

    def __init__(self, study: str, runs: list[Run], stats: Stats | None = None) -> None:
        """``stats``: the frame of these runs pivoted (:class:`publish.frame.Stats`; the
        frame of more runs will do); without it, the frame of the study's runs is made here."""
        self.study = study
        self.runs = [r for r in runs if r.study == study]
        self.stats = stats if stats is not None else Stats.of(self.runs)
        self._typical: dict[tuple[str, str, str], RunSpread | None] = {}
        # What each variant is called: the label its newest run stores (contract/labels.py).
        self.labels: dict[str, str] = {}
        history: dict[str, list[CaseResult]] = {}
        for run in self.runs:  # oldest first: the newest measurement of a case is the one shown
            for entry in run.doc["cases"]:
                l2 = str(entry["case"].get("l2", ""))
                flops = int(entry.get("flops") or 0)
                variants = {
                    name: Measurement(
                        run, entry["id"], name, raw, int(entry["bytes"]), l2, flops=flops, stats=self.stats
                    )
                    for name, raw in entry["variants"].items()
                }
                self.labels |= {name: m.label for name, m in variants.items()}
                case = CaseResult(
                    run,
                    entry["id"],
                    entry["case"],
                    int(entry["bytes"]),
                    variants,
                    rotation=entry.get("rotation"),
                    flops=flops,
                )
                history.setdefault(entry["id"], []).append(case)
        # Every measurement of a case, each carrying the whole history as its repeats (so a
        # comparison inside any one run still weighs the run-to-run spread).
        self.history: dict[str, tuple[CaseResult, ...]] = {}
        for case_id, found in history.items():
            full = tuple(dataclasses.replace(c, typical=self.typical_spread) for c in found)
            self.history[case_id] = tuple(dataclasses.replace(c, repeats=full) for c in full)
        self.cases: dict[str, CaseResult] = {case_id: found[-1] for case_id, found in self.history.items()}

    def typical_spread(self, num: str, den: str, samples_key: str = DEVICE) -> RunSpread | None:
        """The run-to-run spread of comparing ``num`` with ``den`` across this study's repeat
        runs: the 95th percentile over every case two runs of one commit measured (what a case
        that was not repeated is judged against)."""
        key = (num, den, samples_key)
        if key not in self._typical:
            values = []
            for found in self.history.values():
                case = found[-1] if samples_key == DEVICE else found[-1].eager()
                if (s := case.repeat_spread(num, den)) is not None:
                    values.append(s.value)
            self._typical[key] = (
                RunSpread(
                    quantile(sorted(values), TYPICAL_QUANTILE),
                    f"no repeat run measured this case: the study's {100 * TYPICAL_QUANTILE:.0f}th percentile of "
                    f"this comparison's spread over {len(values)} repeated cases",
                )
                if values
                else None
            )
        return self._typical[key]

    def label(self, variant: str) -> str:
        """What the pages call ``variant``: the label the newest run holding it stores; where
        no run in force holds it, the contract's label for the study's older files (or, for a
        variant that table does not know, its name)."""
        found = self.labels.get(variant)
        return found if found is not None else legacy_label(self.study, variant, {})

    def run_cases(self, run_id: str) -> list[CaseResult]:
        """The cases one run measured, in the run's order, each with its full history."""
        return [c for found in self.history.values() for c in found if c.run.run_id == run_id]

    def find(self, **params: Any) -> CaseResult | None:
        found = self.where(**params)
        return found[0] if found else None

    def where(self, **params: Any) -> list[CaseResult]:
        out = [c for c in self.cases.values() if all(c.params.get(k) == v for k, v in params.items())]
        return sorted(out, key=lambda c: (c.params.get("cols", 0), c.params.get("rows", 0), c.dims))

    @property
    def used_runs(self) -> list[Run]:
        ids = {c.run.run_id for c in self.cases.values()}
        return [r for r in self.runs if r.run_id in ids]
