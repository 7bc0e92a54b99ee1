"""Run-to-run stability: how much the same comparison moves between repeat runs.

For every case measured in two or more runs in force, each comparison (ours against one
peer) gives one ratio per run.  A comparison *agrees within 5%* when its largest ratio is
at most 5% above its smallest.  A suite is one study and direction."""

from __future__ import annotations

from dataclasses import dataclass, field

from publish.results import CaseResult, StudyResults, spread

LEVELS = (0.05, 0.10)


@dataclass
class Suite:
    name: str
    comparisons: int = 0
    within: dict[float, int] = field(default_factory=lambda: dict.fromkeys(LEVELS, 0))
    widest: tuple[float, CaseResult, str] | None = None  # (relative spread, case, peer)
    runs: set[str] = field(default_factory=set)


def suites(results: StudyResults, ours: str, peers: list[str]) -> list[Suite]:
    out: dict[str, Suite] = {}
    for case in sorted(results.cases.values(), key=lambda c: c.case_id):
        if len(case.repeats) < 2:
            continue
        suite = out.setdefault(case.params["direction"], Suite(f"{results.study} {case.params['direction']}"))
        for peer in peers:
            values = [r.value for c in case.repeats if (r := c.ratio(peer, ours)) is not None]
            if len(values) < 2:
                continue
            suite.comparisons += 1
            suite.runs |= {c.run.run_id for c in case.repeats}
            moved = spread(values)  # the run-to-run spread the one verdict weighs
            for level in LEVELS:
                suite.within[level] += moved <= level
            if suite.widest is None or moved > suite.widest[0]:
                suite.widest = (moved, case, peer)
    return [s for s in out.values() if s.comparisons]
