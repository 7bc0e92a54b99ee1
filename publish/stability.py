"""Run-to-run stability: how much the same comparison moves between repeat runs.

Repeat runs are runs of one clean commit on one GPU (:func:`publish.results.repeat_key`):
nothing in the code changed between them, so whatever differs is noise.  For every case two
or more of them measured, each comparison (ours against one peer) gives one ratio per run.
A comparison *agrees within 5%* when its largest ratio is at most 5% above its smallest.
A suite is one study and direction.

The *noise floor* is the same measure for one variant's time: how far its median moved
between runs of one commit on one GPU (nothing in the code changed, so all of it is
noise).  Comparing two runs (the Compare page, ``python -m bench compare``) flags a change
only when it exceeds this floor."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from publish.frame import Stats
from publish.results import DEVICE, CaseResult, RunSpread, StudyResults, repeat_key, spread
from publish.runs import Run
from publish.stats import quantile

LEVELS = (0.05, 0.10)


@dataclass
class Suite:
    name: str
    comparisons: int = 0
    within: dict[float, int] = field(default_factory=lambda: dict.fromkeys(LEVELS, 0))
    widest: tuple[float, CaseResult, str] | None = None  # (relative spread, case, peer)
    runs: set[str] = field(default_factory=set)


def suites(results: StudyResults, ours: str, peers: list[str]) -> list[Suite]:
    """Per direction, how far each comparison (a case, ours against a peer) moved between
    repeat runs of one commit: the spread the one verdict weighs (``repeat_spread``)."""
    out: dict[str, Suite] = {}
    for case in sorted(results.cases.values(), key=lambda c: c.case_id):
        if len(case.repeats) < 2:
            continue
        suite = out.setdefault(case.params["direction"], Suite(f"{results.study} {case.params['direction']}"))
        for peer in peers:
            found = case.repeat_spread(peer, ours)
            if found is None:
                continue
            suite.comparisons += 1
            suite.runs |= set(found.runs)
            for level in LEVELS:
                suite.within[level] += found.value <= level
            if suite.widest is None or found.value > suite.widest[0]:
                suite.widest = (found.value, case, peer)
    return [s for s in out.values() if s.comparisons]


# ----------------------------------------------------------------------------- noise floor

FLOOR_QUANTILE = 0.95  # a case no repeat run measured gets the study's 95th percentile


@dataclass(frozen=True)
class RepeatGroup:
    """Runs of one study at one clean commit on one GPU: their differences are noise."""

    commit: str
    gpu: str
    runs: tuple[Run, ...]


@dataclass(frozen=True)
class NoiseFloor:
    """How far each variant's median moved between repeat runs of one commit, per case and
    variant (the largest spread over the repeat groups), and the study's typical floor
    (the 95th percentile of those) for a case no repeat run measured."""

    study: str
    groups: tuple[RepeatGroup, ...]
    per_case: dict[tuple[str, str], float]  # (case id, variant) -> largest / smallest median - 1
    manual: float | None = None  # a floor given by hand (``bench compare --noise-floor``)

    @property
    def typical(self) -> float | None:
        values = sorted(self.per_case.values())
        return quantile(values, FLOOR_QUANTILE) if values else None

    @property
    def runs(self) -> list[Run]:
        return [r for g in self.groups for r in g.runs]

    def at(self, case_id: str, variant: str) -> RunSpread | None:
        if self.manual is not None:
            return RunSpread(self.manual, "noise floor given by hand")
        found = self.per_case.get((case_id, variant))
        if found is not None:
            return RunSpread(found, "this case and variant across repeat runs at one commit")
        typical = self.typical
        if typical is not None:
            return RunSpread(typical, f"not repeated: the study's {100 * FLOOR_QUANTILE:.0f}th percentile")
        return None

    def describe(self) -> str:
        """The floor in words, for a report."""
        if self.manual is not None:
            return f"noise floor {100 * self.manual:.1f}%, given by hand"
        if not self.groups:
            return (
                f"no noise floor: no two runs of {self.study} at one commit on one GPU are in force, so no change "
                "between runs can be told from run-to-run noise (run the suite twice at one commit, or pass "
                "--noise-floor)"
            )
        groups = "; ".join(f"{g.commit[:7]} on {g.gpu}: {', '.join(r.run_id for r in g.runs)}" for g in self.groups)
        if self.typical is None:
            return (
                f"no noise floor: the repeat runs at one commit ({groups}) measured no case and variant in common, so "
                "no change between runs can be told from run-to-run noise"
            )
        return (
            f"noise floor per case and variant: the largest spread of its median across repeat runs at one commit "
            f"({groups}); {len(self.per_case)} case/variant pairs measured, {100 * self.typical:.1f}% at the "  # type: ignore[operator]
            f"{100 * FLOOR_QUANTILE:.0f}th percentile, used where a case was not repeated"
        )


def repeat_groups(runs: Iterable[Run], study: str) -> list[RepeatGroup]:
    """The study's runs grouped by :func:`publish.results.repeat_key`; groups of two or more."""
    groups: dict[tuple[str, str, int], list[Run]] = {}
    for r in runs:
        if r.study == study and (key := repeat_key(r)) is not None:
            groups.setdefault(key, []).append(r)
    return [RepeatGroup(c, f"{g} ({n} SMs)", tuple(rs)) for (c, g, n), rs in groups.items() if len(rs) >= 2]


def noise_floor(
    runs: Iterable[Run], study: str, *, manual: float | None = None, stats: Stats | None = None
) -> NoiseFloor:
    """The study's noise floor from its repeat runs; the medians are the tidy frame's
    (``stats``: the frame of these runs, or of more, pivoted; made here without it)."""
    groups = repeat_groups(runs, study)
    if stats is None:
        stats = Stats.of(r for g in groups for r in g.runs)
    per_case: dict[tuple[str, str], float] = {}
    for g in groups:
        medians: dict[tuple[str, str], list[float]] = {}
        for r in g.runs:
            for case in r.doc["cases"]:
                for name, v in case["variants"].items():
                    if v.get("samples_us"):
                        median = stats.value(r.run_id, case["id"], name, DEVICE, "median")
                        medians.setdefault((case["id"], name), []).append(median)
        for key, values in medians.items():
            if len(values) >= 2:
                per_case[key] = max(per_case.get(key, 0.0), spread(values))
    return NoiseFloor(study, tuple(groups), per_case, manual)
