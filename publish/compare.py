"""Comparing two runs case by case: a change is flagged only when it is larger than runs
usually differ.

For every case and variant both runs measured, the change of the median is tested with a
two-sided Mann-Whitney U test over the raw samples (no assumption about their
distribution).  Samples inside one run cannot show how much *runs* differ, so significance
alone flags nothing: the change must also exceed the noise floor, the spread that repeat
runs at one commit measured for that case and variant (:mod:`publish.stability`), and never
less than ``threshold``.  The decision is the site's one verdict
(:func:`publish.results.verdict`); a slower median is a regression.

With few samples the test cannot reach ``alpha`` at all (4 against 4: the smallest
two-sided p is 2/70 = 0.029): such pairs are reported as *untestable*, never as unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from scipy.stats import mannwhitneyu

from publish.frame import Stats
from publish.results import DEVICE, RunSpread, Verdict, verdict
from publish.runs import Run
from publish.stability import NoiseFloor, noise_floor
from publish.stats import Summary, ratio

LABELS = ("regression", "improvement", "unresolved", "untestable")


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest p a two-sided Mann-Whitney U test can give with these sample counts
    (every sample of one run below every sample of the other, no ties)."""
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


@dataclass(frozen=True)
class Change:
    case_id: str
    variant: str
    a: Summary
    b: Summary
    p: float
    smallest_p: float
    decision: Verdict  # the one verdict on A's median / B's: above 1.00x B is faster
    alpha: float = 0.01

    @property
    def change(self) -> float:
        return self.b.median / self.a.median - 1

    @property
    def floor(self) -> RunSpread | None:
        return self.decision.run_spread

    @property
    def testable(self) -> bool:
        return self.smallest_p < self.alpha

    @property
    def verdict(self) -> str:
        """ "regression", "improvement", "unresolved" (within the noise, or not significant),
        or "untestable" (too few samples for the test to reach alpha)."""
        if self.decision.outcome == "loss":
            return "regression"
        if self.decision.outcome == "win":
            return "improvement"
        return "unresolved" if self.testable else "untestable"

    @property
    def within_noise(self) -> bool:
        """Significant over the two runs' samples, yet not flagged: no larger than the noise
        floor (or no floor measured).  What a test over the samples alone would flag."""
        return self.p < self.alpha and self.decision.ratio.resolved and not self.decision.resolved


def compare_runs(
    run_a: Run,
    run_b: Run,
    *,
    floor: NoiseFloor | None = None,
    threshold: float = 0.05,
    alpha: float = 0.01,
    stats: Stats | None = None,
) -> list[Change]:
    """Every case and variant both runs timed.  ``floor`` gives the run-to-run spread of each
    (without one, nothing can be flagged); ``threshold`` is the smallest change flagged.
    The medians and their intervals are the tidy frame's (``stats``: the frame of these runs,
    or of more, pivoted; made here without it); the test runs over the raw samples."""
    if stats is None:
        stats = Stats.of({r.run_id: r for r in (run_a, run_b)}.values())
    cases_a = {c["id"]: c for c in run_a.doc["cases"]}
    out = []
    for case_b in run_b.doc["cases"]:
        case_a = cases_a.get(case_b["id"])
        if case_a is None:
            continue
        for name, vb in case_b["variants"].items():
            va = case_a["variants"].get(name)
            if va is None or not va["samples_us"] or not vb["samples_us"]:
                continue
            xa, xb = va["samples_us"], vb["samples_us"]
            a = stats.summary(run_a.run_id, case_b["id"], name, DEVICE)
            b = stats.summary(run_b.run_id, case_b["id"], name, DEVICE)
            assert a is not None and b is not None, (case_b["id"], name)
            p = float(mannwhitneyu(xa, xb, alternative="two-sided").pvalue)
            measured = floor.at(case_b["id"], name) if floor is not None else None
            margin = None
            if measured is not None:
                margin = measured
                if threshold > measured.value:
                    raised = f"{measured.measured} {100 * measured.value:.1f}%, raised to the threshold"
                    margin = RunSpread(threshold, raised)
            decision = verdict(ratio(a, b), margin, p=p, alpha=alpha, across_runs=True)
            out.append(Change(case_b["id"], name, a, b, p, smallest_p(len(xa), len(xb)), decision, alpha))
    return out


@dataclass(frozen=True)
class Tally:
    """What a comparison found, in counts, and what it could not test."""

    pairs: int
    regressions: int
    improvements: int
    unresolved: int
    untestable: int
    within_noise: int
    sample_counts: tuple[tuple[int, int], ...]  # (n in A, n in B) of the untestable pairs


def tally(changes: list[Change]) -> Tally:
    counts = {label: sum(c.verdict == label for c in changes) for label in LABELS}
    untestable = sorted({(c.a.n, c.b.n) for c in changes if c.verdict == "untestable"})
    return Tally(
        len(changes),
        counts["regression"],
        counts["improvement"],
        counts["unresolved"],
        counts["untestable"],
        sum(c.within_noise for c in changes),
        tuple(untestable),
    )


def untestable_note(s: Tally, alpha: float = 0.01) -> str:
    """Why some pairs could not be tested, in words ("" when all could)."""
    if not s.untestable:
        return ""
    counts = ", ".join(f"{na} against {nb}" for na, nb in s.sample_counts)
    worst = min(smallest_p(na, nb) for na, nb in s.sample_counts)
    return (
        f"{s.untestable} of {s.pairs} pairs could not be tested: with {counts} samples per variant the Mann-Whitney "
        f"test can never reach p < {alpha:g} (the smallest p possible is {worst:.2g}); take more samples per "
        "variant (5 against 5 is the least that can)"
    )


def report(run_a: Run, run_b: Run, changes: list[Change], floor: NoiseFloor | None = None, alpha: float = 0.01) -> str:
    """A plain-text report: the noise floor, the flagged changes, then what was and was not tested."""
    lines = [f"A: {run_a.run_id} ({run_a.short_commit})", f"B: {run_b.run_id} ({run_b.short_commit})"]
    gpus = [f"{r.env['gpu']['name']} ({r.env['gpu']['sm_count']} SMs)" for r in (run_a, run_b)]
    if gpus[0] != gpus[1]:
        lines.append(f"cross-GPU comparison: A ran on {gpus[0]}, B on {gpus[1]}")
    elif run_a.doc["code"]["commit"] == run_b.doc["code"]["commit"]:
        lines.append("A and B ran the same commit: their differences are run-to-run noise, not regressions")
    lines.append(floor.describe() if floor is not None else "no noise floor given: no change can be flagged")
    lines.append("")
    flagged = sorted((c for c in changes if c.decision.resolved), key=lambda c: -abs(c.change))
    header = f"{'case':<34} {'variant':<22} {'A µs':>10} {'B µs':>10} {'change':>8} {'floor':>7} {'p':>9}  verdict"
    lines.append(header)
    for c in flagged:
        f = f"{100 * c.floor.value:.1f}%" if c.floor is not None else "-"
        lines.append(
            f"{c.case_id:<34} {c.variant:<22} {c.a.median:>10.4g} {c.b.median:>10.4g} "
            f"{100 * c.change:>+7.1f}% {f:>7} {c.p:>9.2g}  {c.verdict.upper()}"
        )
    s = tally(changes)
    lines.append("")
    tested = s.pairs - s.untestable
    if not tested:
        lines.append(f"no pair could be tested ({s.pairs} case/variant pairs in both runs): regressions unknown")
    else:
        lines.append(
            f"{s.pairs} case/variant pairs in both runs; of the {tested} that could be tested: {s.regressions} "
            f"regressions, {s.improvements} improvements, {s.unresolved} unresolved (not significant at p < "
            f"{alpha:g}, or within the noise floor)"
        )
        if s.within_noise:
            lines.append(
                f"{s.within_noise} of the unresolved differ significantly inside the runs but by no more than the "
                "noise floor: runs of one commit differ that much"
            )
    if s.untestable:
        lines.append(untestable_note(s, alpha))
    return "\n".join(lines)


def floor_for(run_a: Run, run_b: Run, data: Path, *, manual: float | None = None) -> NoiseFloor | None:
    """The noise floor for comparing two runs from the command line: measured on the repeat
    runs of their study stored beside them (the data directory their files sit in, else
    ``data``), withdrawn runs left out, A and B included; ``manual`` overrides it.  Across
    GPUs there is none unless given by hand: no repeat run measures that difference."""
    from publish.review import load_withdrawals
    from publish.runs import load_runs

    if manual is not None:
        return noise_floor([], run_a.study, manual=manual)
    if _gpu(run_a) != _gpu(run_b):
        return None
    home = run_a.path.resolve().parent.parent
    if home.name == "runs":
        data = home.parent
    runs = load_runs(data) if (data / "runs").is_dir() else []
    withdrawn = {w.run_id for w in load_withdrawals(data, runs)}
    in_force = [r for r in runs if r.run_id not in withdrawn and r.study == run_a.study]
    known = {r.run_id for r in in_force}
    return noise_floor(in_force + [r for r in (run_a, run_b) if r.run_id not in known], run_a.study)


def exit_code(changes: list[Change], fail_on_regression: bool) -> int:
    """For scripts: 1 when a regression was flagged, 2 when no pair could be tested (whether
    anything regressed is unknown), else 0; always 0 without ``fail_on_regression``."""
    if not fail_on_regression:
        return 0
    t = tally(changes)
    if t.regressions:
        return 1
    return 2 if t.untestable == t.pairs else 0


def _gpu(run: Run) -> tuple[str, int]:
    g = run.env["gpu"]
    return str(g["name"]), int(g["sm_count"])
