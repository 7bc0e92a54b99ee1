"""Scoring row plans on the row-plan grid: best plan per cell, a policy's regret, fitting.

A grid run (``data/runs/rowgrid/``) times every plan of softmax's forward in each cell of
row counts x widths (bf16, cold L2), beside ``torch.softmax``, ``torch.compile`` and the
planner's own choice (variant ``planner``).  From it:

* the **best plan** of a cell is the plan variant with the lowest median among those a
  policy can choose: ``block``, ``looped-<chunk>``, ``split-<chunk>`` (the two-launch
  split) and, for softmax in runs that timed it, ``staged-<chunk>`` (the row held in shared
  memory).  The one-launch split (``split-4096-1launch``) is timed but the planner, which
  chooses for device time, never picks it (only the eager path does, for the host's sake:
  ``RowPolicy.one_launch_bytes``), so it is kept out of the best plan and reported on
  its own;
* a **policy** (:class:`kernels.plans.RowPolicy`) is evaluated with the same pure-Python
  planner the kernels use, ``plan_rows(rows, width, 2, sm_count, policy, None, pad)``
  (``pad`` = 7 when rows > 1 and the width is not a multiple of 8: the alignment window of
  misaligned bf16 rows), and mapped to the variant the grid timed: block -> ``block``,
  looped with block b -> ``looped-b``, split with block b -> ``split-b``, staged ->
  ``staged-b``.  Its **regret**
  in a cell is that variant's median over the best plan's, minus one.  A choice the grid
  did not time (or that failed there) is counted as *unmeasured*, never guessed;
* **fitting** grid-searches the policy fields in :data:`GRID` (the others keep their
  defaults) for the lowest mean regret on one run, and the result is scored on another.

Everything here returns plain values; :mod:`publish.pages.rowgrid` turns them into
numbers with provenance.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from publish.results import CaseResult, StudyResults
from publish.runs import Run
from publish.stats import quantile

ELEM_BYTES = 2  # every grid cell is bf16
PLAN_VARIANT = re.compile(r"^(block|looped-\d+|split-\d+|staged-\d+)$")
ONE_LAUNCH = re.compile(r"^split-\d+-1launch$")
OVER = 0.10  # a cell "over 10%": regret above this
GRID: dict[str, tuple[Any, ...]] = {
    "max_block_bytes": (16384, 32768, 65536),
    "chunk": (4096, 8192, 16384, 32768),
    "wide_chunk": (0, 32768),
    "chunk_waste": (-1.0, 0.15, 0.3),
    "split_chunk": (2048, 4096),
    "narrow_split_chunk": (2048, 4096),
    "split_rows_per_sm": (0.25, 0.5, 1.0, 2.0),
    # never, or rows up to 110 KB (two programs an SM) from just past a 32 KB block or from
    # 64 KB; RMSNorm has no staged kernel, so its grid never times the plan and a policy
    # that stages ranks last there
    "staged_row_bytes": ((0, 0), (32 * 1024, 110 * 1024), (64 * 1024, 110 * 1024)),
}


def _plans():  # type: ignore[no-untyped-def]
    # Imported when first needed: kernels/__init__ imports torch where it is installed.
    from kernels import plans

    return plans


def pad_for(rows: int, cols: int, elem_bytes: int = ELEM_BYTES) -> int:
    """The alignment window the planner sizes a row for (bench/studies/rowgrid.py ``_pad``)."""
    vec = _plans().VECTOR_BYTES // elem_bytes
    return vec - 1 if rows > 1 and cols % vec else 0


def variant_for(plan: Any) -> str:
    """The grid variant that timed ``plan`` (a :class:`kernels.plans.RowPlan`)."""
    if plan.kind == "block":
        return "block"
    if plan.one_launch:
        return f"split-{plan.block}-1launch"
    return f"{plan.kind}-{plan.block}"


@dataclass(frozen=True)
class Cell:
    """One grid cell of one run: its case and the medians of the plans that ran there."""

    case: CaseResult
    rows: int
    cols: int
    plans: dict[str, float]  # selectable plan variant -> median µs (only those with samples)
    best: str | None  # None: no plan has samples here

    @property
    def best_time(self) -> float | None:
        return self.plans[self.best] if self.best is not None else None

    @property
    def key(self) -> tuple[int, int]:
        return (self.rows, self.cols)


def make_cell(case: CaseResult) -> Cell:
    plans = {
        name: m.summary.median  # type: ignore[union-attr]
        for name in case.variants
        if PLAN_VARIANT.match(name) and (m := case.get(name)) is not None
    }
    # Ties (equal medians) go to the first in name order, so the result never depends on
    # the order the run file lists its variants in.
    best = min(sorted(plans), key=lambda n: plans[n]) if plans else None
    return Cell(case, int(case.params["rows"]), int(case.params["cols"]), plans, best)


OPS = ("softmax", "rmsnorm")  # the operators a grid run may time (bench/studies/rowgrid.py)


def op_of(case: CaseResult) -> str:
    return str(case.params.get("op", "softmax"))


def grid_cells(results: StudyResults, run: Run, op: str = "softmax") -> list[Cell]:
    """The cells of operator ``op`` that ``run`` measured, by width then rows."""
    cells = [
        make_cell(c)
        for c in results.run_cases(run.run_id)
        if "rows" in c.params and "cols" in c.params and op_of(c) == op
    ]
    return sorted(cells, key=lambda c: (c.cols, c.rows))


def shipped_policy(op: str) -> Any:
    """The policy the operator's kernels launch with (kernels/plans.py)."""
    plans = _plans()
    return plans.RMSNORM_POLICY if op == "rmsnorm" else plans.SOFTMAX_POLICY


def shipped_fitted_on(op: str) -> str | None:
    """The grid run the operator's shipped thresholds were fitted on (kernels/plans.py
    ``POLICY_FITTED_ON``), or None where they were set by hand."""
    return _plans().POLICY_FITTED_ON.get(op)


@dataclass(frozen=True)
class Choice:
    cell: Cell
    variant: str  # the plan variant the policy picks
    regret: float | None  # None: the grid has no time for that plan in this cell

    @property
    def measured(self) -> bool:
        return self.regret is not None


@functools.cache
def _pick(policy: Any, rows: int, cols: int, sm_count: int) -> str:
    # The variant a policy picks for a cell's shape.  Cached: every fit scores the whole
    # search grid of policies on the same shapes, and the build fits once per set of runs
    # (the review record re-evaluates every earlier set).
    plan = _plans().plan_rows(rows, cols, ELEM_BYTES, sm_count, policy, None, pad_for(rows, cols))
    return variant_for(plan)


def choose(policy: Any, cell: Cell, sm_count: int) -> Choice:
    name = _pick(policy, cell.rows, cell.cols, sm_count)
    if name not in cell.plans or cell.best_time is None:
        return Choice(cell, name, None)
    return Choice(cell, name, cell.plans[name] / cell.best_time - 1.0)


@dataclass(frozen=True)
class Score:
    """One rule on one run: its regret in every cell with a best plan."""

    rule: str
    policy: Any
    run: Run
    choices: tuple[Choice, ...]

    @property
    def regrets(self) -> list[float]:
        return [c.regret for c in self.choices if c.regret is not None]

    @property
    def scored(self) -> int:
        return len(self.regrets)

    @property
    def unmeasured(self) -> list[Choice]:
        return [c for c in self.choices if c.regret is None]

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.regrets) if self.regrets else None

    @property
    def p90(self) -> float | None:
        return quantile(sorted(self.regrets), 0.9) if self.regrets else None

    @property
    def over(self) -> int:
        return sum(r > OVER for r in self.regrets)

    @cached_property
    def _by_key(self) -> dict[tuple[int, int], Choice]:
        return {c.cell.key: c for c in self.choices}

    def choice_at(self, key: tuple[int, int]) -> Choice | None:
        return self._by_key.get(key)


def sm_count(run: Run) -> int:
    return int(run.env["gpu"]["sm_count"])


def score(rule: str, policy: Any, run: Run, cells: Iterable[Cell]) -> Score:
    sms = sm_count(run)
    return Score(rule, policy, run, tuple(choose(policy, c, sms) for c in cells if c.best is not None))


@functools.cache
def candidates() -> tuple[Any, ...]:
    """Every policy of the search grid, the other fields at their RowPolicy defaults."""
    RowPolicy = _plans().RowPolicy
    keys = list(GRID)
    return tuple(RowPolicy(**dict(zip(keys, values, strict=True))) for values in itertools.product(*GRID.values()))


def _rank(s: Score) -> tuple[float, ...]:
    # Policies that choose a plan the grid did not time in some cell could look better than
    # they are; they rank after every policy scored on all cells.
    return (len(s.unmeasured), s.mean if s.mean is not None else float("inf"), s.over, s.p90 or 0.0)


# (index in candidates(), rows, cols, SMs) -> the variant that policy picks: a fit asks for
# 1152 policies x every cell's shape, and the review record fits every earlier set of runs
# again (an int key hashes far faster than the policy itself).
_GRID_PICKS: dict[tuple[int, int, int, int], str] = {}


def _distinct_policies(shapes: list[tuple[int, int]], sms: int) -> dict[tuple[str, ...], Any]:
    """The search grid's policies that pick differently on ``shapes``: each distinct tuple of
    picks (one per shape) with the first policy in grid order that makes it."""
    plan_rows = _plans().plan_rows
    pads = [pad_for(rows, cols) for rows, cols in shapes]
    out: dict[tuple[str, ...], Any] = {}
    for i, policy in enumerate(candidates()):
        picks = []
        for (rows, cols), pad in zip(shapes, pads, strict=True):
            key = (i, rows, cols, sms)
            name = _GRID_PICKS.get(key)
            if name is None:  # as _pick, without hashing the policy
                name = _GRID_PICKS[key] = variant_for(plan_rows(rows, cols, ELEM_BYTES, sms, policy, None, pad))
            picks.append(name)
        out.setdefault(tuple(picks), policy)
    return out


def fit(run: Run, cells: list[Cell], rule: str = "fitted") -> Score | None:
    """The search grid's policy with the lowest mean regret on ``cells`` (ties: fewer cells
    over 10%, then lower 90th percentile, then the first in grid order)."""
    scored = [c for c in cells if c.best is not None]
    if not scored:
        return None
    sms = sm_count(run)
    shapes = sorted({c.key for c in scored})
    at = {key: k for k, key in enumerate(shapes)}
    # The ranking of :func:`_rank`, computed from the picks alone, once for each distinct set
    # of picks (policies that pick alike on every shape score alike; the first in grid order
    # stands for them): no Choice or Score is built but the winner's.
    best_policy, best_rank = None, None
    for picks, policy in _distinct_policies(shapes, sms).items():
        regrets, unmeasured = [], 0
        for c in scored:
            t = c.plans.get(picks[at[c.key]])
            if t is None:
                unmeasured += 1
            else:
                regrets.append(t / c.best_time - 1.0)  # type: ignore[operator]
        ordered = sorted(regrets)
        rank = (
            unmeasured,
            statistics.fmean(regrets) if regrets else float("inf"),
            sum(r > OVER for r in regrets),
            (quantile(ordered, 0.9) if regrets else None) or 0.0,
        )
        if best_rank is None or rank < best_rank:
            best_policy, best_rank = policy, rank
    return score(rule, best_policy, run, scored)


def policy_fields(policy: Any) -> dict[str, Any]:
    """The searched fields of a policy, in grid order."""
    return {k: getattr(policy, k) for k in GRID}


def field_text(value: Any) -> str:
    """A searched field's value as a reader sees it: floats short, the staged bounds in KB."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):  # staged_row_bytes: (low, high]
        low, high = value
        return "never" if high <= low else f"above {low // 1024} KB up to {high // 1024} KB"
    return str(value)


def policy_texts(policy: Any) -> dict[str, str]:
    """:func:`policy_fields` as text (:func:`field_text`)."""
    return {k: field_text(v) for k, v in policy_fields(policy).items()}


# ----------------------------------------------------------------------------- the analysis


@dataclass(frozen=True)
class Fit:
    """A policy fitted on one run and scored on another (``held_out`` is None with one run)."""

    fitted_on: Score
    held_out: Score | None


@dataclass
class Analysis:
    runs: list[Run]  # the valid grid runs, oldest first
    cells: dict[str, list[Cell]]  # run id -> cells
    rules: dict[str, dict[str, Score]]  # rule name -> run id -> score
    policies: dict[str, Any]  # rule name -> policy
    fits: list[Fit]  # forward (fit on the older, score on the newer) first, then the reverse

    @property
    def newest(self) -> Run | None:
        return self.runs[-1] if self.runs else None

    @property
    def pair(self) -> tuple[Run, Run] | None:
        """(fit run, held-out run): the older and the newer of the two newest valid runs."""
        return (self.runs[-2], self.runs[-1]) if len(self.runs) >= 2 else None

    @property
    def forward_fit(self) -> Fit | None:
        return self.fits[0] if self.fits else None


SHIPPED = "shipped"
NEVER_SPLIT = "never split"
DEFAULTS = "RowPolicy defaults"
_CACHE: dict[tuple[Any, ...], Analysis] = {}
# Each run's fit, kept with the run (so that its id stays its own): the review record's earlier
# sets of runs pair the same run with another neighbour, and a fit scores 1152 policies.
_FITS: dict[tuple[str, int], tuple[Run, Score | None]] = {}


def fitted_name(run: Run) -> str:
    return f"fitted on {run.run_id}"


def analyse(results: StudyResults, op: str = "softmax") -> Analysis:
    """Every rule scored on every valid run holding cells of ``op``, and the fits (cached per
    set of runs and operator: the review record evaluates the pages again for every earlier
    set of runs)."""
    # Keyed by the Run objects themselves (the analysis keeps them alive, so their ids stay
    # theirs): the same run ids in another build may hold other data.
    key = (op, *(id(r) for r in results.runs))
    if key in _CACHE:
        return _CACHE[key]
    if len(_CACHE) > 64:
        _CACHE.clear()
        _FITS.clear()
    plans = _plans()
    cells = {r.run_id: grid_cells(results, r, op) for r in results.runs}
    runs = [r for r in results.runs if cells[r.run_id]]
    cells = {r.run_id: cells[r.run_id] for r in runs}
    shipped = shipped_policy(op)
    policies: dict[str, Any] = {
        SHIPPED: shipped,
        NEVER_SPLIT: dataclasses.replace(shipped, split_rows_per_sm=0.0),
        DEFAULTS: plans.RowPolicy(),
    }
    fits: list[Fit] = []
    if runs:
        pair = (runs[-2], runs[-1]) if len(runs) >= 2 else (runs[-1], None)
        order = [pair] if pair[1] is None else [pair, (pair[1], pair[0])]
        for fit_run, other in order:
            name = fitted_name(fit_run)
            fit_key = (op, id(fit_run))  # a run's fit depends on its own cells alone
            if fit_key not in _FITS:
                _FITS[fit_key] = (fit_run, fit(fit_run, cells[fit_run.run_id], name))
            fitted = _FITS[fit_key][1]
            if fitted is None:
                continue
            policies[name] = fitted.policy
            held = score(name, fitted.policy, other, cells[other.run_id]) if other is not None else None
            fits.append(Fit(fitted, held))
    rules = {
        name: {r.run_id: score(name, policy, r, cells[r.run_id]) for r in runs} for name, policy in policies.items()
    }
    out = Analysis(runs, cells, rules, policies, fits)
    _CACHE[key] = out
    return out


def report_lines(results: StudyResults) -> list[str]:
    """For the build's report: the fitted policy and its held-out regret (two runs or more)."""
    a = analyse(results)
    if a.pair is None or a.forward_fit is None or a.forward_fit.held_out is None:
        n = len(a.runs)
        return [f"row-plan grid: {n} valid run{'s' if n != 1 else ''}; a held-out fit needs two"]
    f = a.forward_fit
    fields = ", ".join(f"{k}={v}" for k, v in policy_texts(f.fitted_on.policy).items())
    held = f.held_out
    assert held is not None
    mean = f"{100 * held.mean:.1f}%" if held.mean is not None else "n/a"
    p90 = f"{100 * held.p90:.1f}%" if held.p90 is not None else "n/a"
    fit_mean = f"{100 * f.fitted_on.mean:.1f}%" if f.fitted_on.mean is not None else "n/a"
    return [
        f"row-plan grid: fitted on {f.fitted_on.run.run_id}: {fields}",
        f"  mean regret {fit_mean} there; held out on {held.run.run_id}: mean {mean}, 90th percentile {p90}, "
        f"{held.over} of {held.scored} cells over {100 * OVER:.0f}%, {len(held.unmeasured)} unmeasured choices",
    ]
