"""The row-plan grid page: best plan per cell, the planner's regret, rules fitted on one run
and scored on another, ours against torch.softmax and torch.compile in every cell.  The
scoring lives in :mod:`publish.rowgrid`; this module turns it into tables, heat maps and
claims whose every number carries its sources."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from publish.charts import Chart, heatmap
from publish.claims import Claim, sentence
from publish.numbers import Num, Source, definition
from publish.pages import SiteData
from publish.results import StudyResults
from publish.rowgrid import (
    DEFAULTS,
    GRID,
    NEVER_SPLIT,
    ONE_LAUNCH,
    OVER,
    SHIPPED,
    Analysis,
    Cell,
    Choice,
    Score,
    analyse,
    field_text,
    policy_texts,
    report_lines,
    score,
    shipped_fitted_on,
)
from publish.runs import Run
from publish.studypage.spec import StudyPage
from publish.tables import Column, Table, Text

OURS = "planner"  # kernels.softmax as a user calls it: the planner's own choice, measured
PEERS = ("torch", "compile")  # their labels come from the run files
REGRET_TARGET = definition(5, "pct", "target from issue 6: mean regret on the run the thresholds were not fitted on")
TORCH_TARGET = definition(95, "pct", "target from issue 6: share of cells where ours is no slower than torch.softmax")
OVER_LINE = definition(100 * OVER, "pct", "a cell counts as 'over' when its regret exceeds this")
RULES = {
    SHIPPED: "the policy kernels.softmax ships (kernels.plans.SOFTMAX_POLICY)",
    NEVER_SPLIT: "the shipped policy with split_rows_per_sm = 0: always loop, never split",
    DEFAULTS: "RowPolicy() with its defaults (16 KB blocks, 8192-element loops)",
}


# ----------------------------------------------------------------------------- numbers


def _regret(c: Choice) -> Num | None:
    if c.regret is None or c.cell.best is None:
        return None
    chosen, best = c.cell.case.get(c.variant), c.cell.case.get(c.cell.best)
    assert chosen is not None and best is not None
    return Num(
        100 * c.regret,
        "pct",
        (chosen.source("median"), best.source("median")),
        note=f"{c.variant} median / best plan {c.cell.best} median - 1",
    )


def _aggregate(s: Score, value: float | None, kind: str, statistic: str) -> Num | None:
    if value is None:
        return None
    src = Source(s.run.run_id, statistic=statistic, detail=f"rule: {s.rule}; device time, graph replay, cold L2")
    return Num(value, kind, (src,))


def _mean(s: Score) -> Num | None:
    return _aggregate(s, 100 * s.mean if s.mean is not None else None, "pct", f"mean regret over {s.scored} cells")


def _p90(s: Score) -> Num | None:
    return _aggregate(s, 100 * s.p90 if s.p90 is not None else None, "pct", f"90th percentile of {s.scored} cells")


def _over(s: Score) -> Num:
    return _aggregate(s, s.over, "count", f"cells with regret over {100 * OVER:.0f}%")  # type: ignore[return-value]


def _count(run: Run, n: int, statistic: str) -> Num:
    return Num(n, "count", (Source(run.run_id, statistic=statistic),))


# ----------------------------------------------------------------------------- tables


def _table_id(name: str, op: str) -> str:
    # softmax's tables keep the ids they always had; another operator's carry its name
    return f"rowgrid-{name}" if op == "softmax" else f"rowgrid-{op}-{name}"


def _role(a: Analysis, run: Run, rule: str, op: str = "softmax") -> str:
    fitted_on = next((f.fitted_on.run.run_id for f in a.fits if f.fitted_on.rule == rule), None)
    if fitted_on is None and rule == SHIPPED:
        # the run the shipped thresholds were fitted on, as kernels/plans.py records it
        fitted_on = shipped_fitted_on(op)
        if fitted_on is None:
            return "set by hand"
    if fitted_on is None:
        return "fixed rule"
    return "fitted here (in-sample)" if fitted_on == run.run_id else "held out"


def rules_table(a: Analysis, op: str = "softmax") -> Table:
    cols = [
        Column("rule", "Rule", numeric=False),
        Column("run", "Run", numeric=False),
        Column("role", "On this run", "fitted here, held out, or a fixed rule", numeric=False),
        Column("mean", "Mean regret", "chosen plan's median / best plan's median - 1, averaged over cells"),
        Column("p90", "90th percentile"),
        Column("over", "Cells over 10%"),
        Column("scored", "Cells scored"),
        Column("unmeasured", "Unmeasured choices", "cells where the rule picks a plan the grid did not time"),
    ]
    table = Table(_table_id("rules", op), f"Regret of each rule on each grid run, {op} (device time, cold L2)", cols)
    for rule, by_run in a.rules.items():
        for run in a.runs:
            s = by_run[run.run_id]
            table.rows.append(
                {
                    "rule": Text(rule, RULES.get(rule, "grid search over " + ", ".join(GRID))),
                    "run": Text(run.run_id),
                    "role": Text(_role(a, run, rule, op)),
                    "mean": _mean(s),
                    "p90": _p90(s),
                    "over": _over(s),
                    "scored": _count(run, s.scored, "cells with a best plan"),
                    "unmeasured": _count(run, len(s.unmeasured), "cells where the rule's plan was not timed"),
                }
            )
    return table


def policies_table(a: Analysis, op: str = "softmax") -> Table:
    # Headers are the field names with spaces, so that they wrap (seven fields fit the page).
    cols = [Column("rule", "Rule", numeric=False)] + [Column(k, k.replace("_", " "), numeric=False) for k in GRID]
    table = Table(
        _table_id("policies", op), f"The thresholds of each rule, {op} (fields of kernels.plans.RowPolicy)", cols
    )
    for rule, policy in a.policies.items():
        row: dict[str, Any] = {"rule": Text(rule, RULES.get(rule, "grid search"))}
        for k, v in policy_texts(policy).items():
            row[k] = Text(v)
        table.rows.append(row)
    return table


def _no_slower(cells: list[Cell], peer: str) -> tuple[int, int]:
    """(cells where ours is no slower than ``peer`` by the site's one verdict, cells compared)."""
    n = k = 0
    for cell in cells:
        v = cell.case.verdict(OURS, peer)
        if v is None:
            continue
        n += 1
        k += v.outcome != "loss"
    return k, n


def _share(run: Run, k: int, n: int, peer: str) -> Num | None:
    if not n:
        return None
    src = Source(run.run_id, statistic=f"{k} of {n} cells no slower than {peer}", detail="verdict: win or tie")
    return Num(100 * k / n, "pct", (src,), note=f"{k} of {n} cells")


def _labels(a: Analysis) -> dict[str, str]:
    """The peers' labels, as the newest grid run holding each stores them."""
    found = {p: p for p in PEERS}
    for run in a.runs:
        for cell in a.cells[run.run_id]:
            found |= {p: m.label for p in PEERS if (m := cell.case.variants.get(p)) is not None}
    return found


def ours_table(a: Analysis, op: str = "softmax") -> Table:
    cols = [Column("run", "Run", numeric=False)]
    labels = _labels(a)
    for peer, label in labels.items():
        cols += [
            Column(f"{peer}_k", f"No slower than {label}", "cells where the verdict is a win or a tie"),
            Column(f"{peer}_pct", "share"),
        ]
    entry = "kernels.rms_norm" if op == "rmsnorm" else "kernels.softmax"
    table = Table(_table_id("ours", op), f"Ours ({entry}, the planner's choice) against torch in every cell", cols)
    for run in a.runs:
        row: dict[str, Any] = {"run": Text(run.run_id)}
        for peer, label in labels.items():
            k, n = _no_slower(a.cells[run.run_id], peer)
            row[f"{peer}_k"] = _count(run, k, f"cells no slower than {label}") if n else Text("—", "no cell has both")
            row[f"{peer}_pct"] = _share(run, k, n, label)
        table.rows.append(row)
    return table


def cells_table(a: Analysis, run: Run) -> Table:
    cols = [
        Column("rows", "Rows"),
        Column("width", "Width"),
        Column("best", "Best plan", "lowest median among block, looped-* and split-*", numeric=False),
        Column("best_us", "Best (µs)"),
        Column("pick", "Shipped policy picks", numeric=False),
        Column("pick_us", "Its time (µs)"),
        Column("regret", "Regret"),
        Column("ours", "Ours (µs)", "the planner variant: kernels.softmax as called, timed in the same cell"),
    ] + [
        Column(p, f"vs {label}", f"{label} time / our time: above 1.00× we are faster")
        for p, label in _labels(a).items()
    ]
    table = Table("rowgrid-cells", f"Every cell of {run.run_id}: device time, graph replay, cold L2", cols)
    shipped = a.rules[SHIPPED][run.run_id]
    src = Source(run.run_id, statistic="grid cell")
    for cell in a.cells[run.run_id]:
        row: dict[str, Any] = {"rows": Num(cell.rows, "size", (src,)), "width": Num(cell.cols, "size", (src,))}
        if cell.best is not None:
            best = cell.case.get(cell.best)
            assert best is not None
            row["best"] = Text(cell.best)
            row["best_us"] = Num(best.time().value, "us_bare", best.time().sources)
        else:
            row["best"] = Text("no plan timed", "every plan variant refused or failed here")
        choice = shipped.choice_at(cell.key)
        if choice is not None:
            picked = cell.case.get(choice.variant)
            row["pick"] = Text(choice.variant) if choice.measured else Text(f"{choice.variant} (not timed)")
            row["pick_us"] = Num(picked.time().value, "us_bare", picked.time().sources) if picked else None
            row["regret"] = _regret(choice)
        ours = cell.case.get(OURS)
        row["ours"] = Num(ours.time().value, "us_bare", ours.time().sources) if ours else Text("—", "not timed")
        for peer in PEERS:
            row[peer] = cell.case.speedup(OURS, peer)
        table.rows.append(row)
    return table


# ----------------------------------------------------------------------------- heat maps


def _axes(cells: list[Cell]) -> tuple[list[int], list[int]]:
    return sorted({c.cols for c in cells}), sorted({c.rows for c in cells})


def _grid(cells: list[Cell], value) -> list[list[Any]]:  # type: ignore[no-untyped-def]
    widths, rows = _axes(cells)
    at = {c.key: c for c in cells}
    return [[value(at[(r, w)]) if (r, w) in at else None for w in widths] for r in rows]


def charts(a: Analysis, run: Run) -> list[Chart]:
    cells = a.cells[run.run_id]
    if not cells:
        return []
    widths, rows = _axes(cells)
    x, y = [str(w) for w in widths], [str(r) for r in rows]
    names = sorted({c.best for c in cells if c.best is not None}, key=_plan_order)

    def best(c: Cell) -> Num | None:
        if c.best is None:
            return None
        m = c.case.get(c.best)
        return Num(names.index(c.best), "int", m.time().sources) if m else None  # type: ignore[union-attr]

    labels = _grid(cells, lambda c: f"{c.best} {c.case.get(c.best).time().text()}" if c.best else "")  # type: ignore[union-attr]
    shipped = a.rules[SHIPPED][run.run_id]
    out = [
        heatmap(
            "rowgrid-best-plan",
            f"Best plan per cell, {run.run_id}",
            x,
            y,
            _grid(cells, best),
            x_title="width",
            y_title="rows",
            value="best plan",
            categories=names,
            labels=[[v or "" for v in line] for line in labels],
        ),
        heatmap(
            "rowgrid-regret",
            "Shipped policy's regret per cell (its plan's time / best plan's - 1)",
            x,
            y,
            _grid(cells, lambda c: (ch := shipped.choice_at(c.key)) and _regret(ch)),
            x_title="width",
            y_title="rows",
            value="regret (%)",
            colorscale=[[0, "#f7fbff"], [0.1, "#c6dbef"], [0.3, "#fdae6b"], [1, "#a50f15"]],
        ),
        heatmap(
            "rowgrid-vs-torch",
            "Ours against torch.softmax per cell (torch time / our time)",
            x,
            y,
            _grid(cells, lambda c: c.case.speedup(OURS, "torch")),
            x_title="width",
            y_title="rows",
            value="speedup",
            colorscale=[[0, "#b2182b"], [0.5, "#f7f7f7"], [1, "#2166ac"]],  # red: ours slower; blue: faster
            zmid=1.0,
            log=True,
        ),
    ]
    return out


def _plan_order(name: str) -> tuple[int, int]:
    kind, _, size = name.partition("-")
    return ({"block": 0, "looped": 1, "split": 2}.get(kind, 3), int(size) if size.isdigit() else 0)


# ----------------------------------------------------------------------------- claims


def targets(a: Analysis) -> list[Claim]:
    out: list[Claim] = []
    fit = a.forward_fit
    if a.pair is None or fit is None or fit.held_out is None or fit.held_out.mean is None:
        out.append(
            Claim(
                "target-heldout-regret",
                sentence(
                    "Device time (graph replay), cold L2: the planner's thresholds, fitted on one grid run, reach a "
                    "mean regret of at most {target} on a second run they were not fitted on. Not met: this needs two "
                    "valid grid runs and {n} {are} in force.",
                    target=REGRET_TARGET,
                    n=str(len(a.runs)),
                    are="is" if len(a.runs) == 1 else "are",
                ),
                False,
                "target",
            )
        )
    else:
        held = fit.held_out
        out.append(
            Claim(
                "target-heldout-regret",
                sentence(
                    "Device time (graph replay), cold L2: the planner's thresholds, fitted on {a}, reach a mean "
                    "regret of at most {target} on {b}, which they were not fitted on. Measured {mean} (90th "
                    "percentile {p90}; {over} of {n} cells over {line}; {u} cells where the rule picked a plan the "
                    "grid did not time).",
                    a=fit.fitted_on.run.run_id,
                    b=held.run.run_id,
                    target=REGRET_TARGET,
                    mean=_mean(held),  # type: ignore[arg-type]
                    p90=_p90(held),  # type: ignore[arg-type]
                    over=_over(held),
                    n=_count(held.run, held.scored, "cells scored"),
                    line=OVER_LINE,
                    u=_count(held.run, len(held.unmeasured), "unmeasured choices"),
                ),
                held.mean is not None and 100 * held.mean <= REGRET_TARGET.value,
                "target",
            )
        )
    run = a.newest
    if run is None:
        out.append(
            Claim(
                "target-grid-vs-torch",
                sentence(
                    "Device time (graph replay), cold L2: ours no slower than torch.softmax in at least {target} of "
                    "the grid's cells. Not met: no valid grid run is in force.",
                    target=TORCH_TARGET,
                ),
                False,
                "target",
            )
        )
        return out
    k, n = _no_slower(a.cells[run.run_id], "torch")
    share = _share(run, k, n, "torch.softmax")
    out.append(
        Claim(
            "target-grid-vs-torch",
            sentence(
                "Device time (graph replay), cold L2: ours (kernels.softmax, the planner's choice) no slower than "
                "torch.softmax in at least {target} of the grid's cells. In {run}: {k} of {n} cells, {share}.",
                target=TORCH_TARGET,
                run=run.run_id,
                k=_count(run, k, "cells no slower than torch.softmax"),
                n=_count(run, n, "cells with both timed"),
                share=share if share is not None else "no cell has both",
            ),
            share is not None and share.value >= TORCH_TARGET.value,
            "target",
        )
    )
    return out


def _matches(cell: Cell, choice: Choice) -> bool | None:
    """Whether the planner variant ran the plan the shipped policy picks (None: unknown)."""
    m = cell.case.variants.get(OURS)
    if m is None or not m.meta.get("plan"):
        return None
    meta = m.meta
    if meta.get("plan") == "block":
        return choice.variant == "block"
    return choice.variant == f"{meta['plan']}-{meta.get('block')}"


def observations(a: Analysis) -> list[Claim]:
    out: list[Claim] = []
    run = a.newest
    if run is None:
        return out
    cells = a.cells[run.run_id]
    shipped = a.rules[SHIPPED][run.run_id]
    compared = [(c, ch) for c in cells if (ch := shipped.choice_at(c.key)) is not None]
    known = [(c, ch, ok) for c, ch in compared if (ok := _matches(c, ch)) is not None]
    if known:
        differ = [c for c, _, ok in known if not ok]
        out.append(
            Claim(
                "planner-reproduced",
                sentence(
                    "The site scores the shipped policy with the same pure-Python planner the kernels call, and it "
                    "reproduces the plan kernels.softmax ran in {k} of {n} cells of {run}.",
                    k=_count(run, len(known) - len(differ), "cells whose planner variant ran the scored plan"),
                    n=_count(run, len(known), "cells whose planner variant records its plan"),
                    run=run.run_id,
                ),
                not differ,
                hypothesis="the site's planner reproduces, in every cell, the plan the kernel ran",
                evidence=sentence("differs at {cells}", cells=", ".join(c.case.case_id for c in differ[:8]))
                if differ
                else Markup(""),
            )
        )
    one = []
    for c in cells:
        for name in c.case.variants:
            if ONE_LAUNCH.match(name) and c.case.get(name) and c.best is not None:
                one.append((c, name, (v := c.case.verdict(name, c.best)) is not None and v.outcome == "win"))
    if one:
        faster = [c for c, _, f in one if f]
        out.append(
            Claim(
                "one-launch-split-record",
                sentence(
                    "Device time (graph replay): the one-launch split, which no policy may choose, was faster than the "
                    "best selectable plan in {k} of the {n} cells of {run} where it ran.",
                    k=_count(run, len(faster), "cells where the one-launch split beat the best plan"),
                    n=_count(run, len(one), "cells where the one-launch split ran"),
                    run=run.run_id,
                ),
                True,
            )
        )
    small = [c for c in cells if c.case.within_l2]
    if small:
        out.append(
            Claim(
                "grid-small-cells-l2",
                sentence(
                    "In {k} of the {n} cells of {run} the rotating input sets together held less than the L2, so those "
                    "cells are not fully cold; they are the smallest problems, where launch latency dominates anyway.",
                    k=_count(run, len(small), "cells whose rotation bytes are at most the L2"),
                    n=_count(run, len(cells), "cells"),
                    run=run.run_id,
                ),
                True,
            )
        )
    return out


# ----------------------------------------------------------------------------- page


def context(data: SiteData) -> dict[str, Any]:
    results: StudyResults = data.studies["rowgrid"]
    a = analyse(results)
    withdrawn = [r for r in data.all_runs if r.study == "rowgrid" and r.run_id in data.withdrawn]
    run = a.newest
    fit = a.forward_fit
    runs = []
    for r in a.runs:
        role = "the only valid run"
        if a.pair is not None:
            role = "fit run" if r is a.pair[0] else "held-out run" if r is a.pair[1] else "older: not used for the fit"
        runs.append({"run": r, "cells": _count(r, len(a.cells[r.run_id]), "grid cells in the file"), "role": role})
    return {
        "runs": runs,
        "withdrawn": withdrawn,
        "newest": run,
        "pair": a.pair,
        "fit": fit,
        "fitted_fields": policy_texts(fit.fitted_on.policy) if fit else {},
        "grid": {k: "; ".join(field_text(v) for v in vs) for k, vs in GRID.items()},
        **_claim_parts(results, a),
        "rules": rules_table(a) if a.runs else None,
        "policies": policies_table(a) if a.runs else None,
        "ours": ours_table(a) if a.runs else None,
        "cells": cells_table(a, run) if run is not None else None,
        "charts": {c.id: c for c in charts(a, run)} if run is not None else {},
        "over_line": OVER_LINE,
        "rmsnorm": rmsnorm_context(results),
    }


def claims(data: SiteData) -> list[Claim]:
    """The page's claims as :func:`context` holds them: its targets, then its observations."""
    results: StudyResults = data.studies["rowgrid"]
    parts = _claim_parts(results, analyse(results))
    return parts["targets"] + parts["observations"]


def _claim_parts(results: StudyResults, a: Analysis) -> dict[str, list[Claim]]:
    return {"targets": targets(a), "observations": observations(a) + [c for c in (one_rule(results),) if c]}


def one_rule(results: StudyResults) -> Claim | None:
    """Issue 8: one rule for softmax and RMSNorm, or one per operator, whichever the held-out
    run supports.  Softmax's fitted policy and RMSNorm's own, each fitted on an older run, are
    scored on RMSNorm's cells of its newest run."""
    soft, rms = analyse(results), analyse(results, "rmsnorm")
    if soft.forward_fit is None or rms.pair is None or rms.forward_fit is None:
        return None
    held_run = rms.pair[1]
    cells = rms.cells[held_run.run_id]
    shared = score("softmax's fitted policy", soft.forward_fit.fitted_on.policy, held_run, cells)
    own = rms.forward_fit.held_out
    if own is None or shared.mean is None or own.mean is None:
        return None
    one = shared.mean <= own.mean * 1.05 + 0.002  # within 5% (relative) or 0.2 points: one rule will do
    return Claim(
        "grid-one-rule",
        sentence(
            "One rule or one per operator: on RMSNorm's held-out run {run}, softmax's fitted policy has mean regret "
            "{shared} and RMSNorm's own fitted policy {own}, so {verdict}.",
            run=held_run.run_id,
            shared=_mean(shared),  # type: ignore[arg-type]
            own=_mean(own),  # type: ignore[arg-type]
            verdict="one rule serves both" if one else "each operator keeps its own",
        ),
        True,
    )


def rmsnorm_context(results: StudyResults) -> dict[str, Any] | None:
    """RMSNorm's section: its rules, thresholds and ours against torch, where a run holds its cells."""
    a = analyse(results, "rmsnorm")
    if not a.runs:
        return None
    fit = a.forward_fit
    return {
        "runs": [r.run_id for r in a.runs],
        "fit": fit,
        "fitted_fields": policy_texts(fit.fitted_on.policy) if fit else {},
        "rules": rules_table(a, "rmsnorm"),
        "policies": policies_table(a, "rmsnorm"),
        "ours": ours_table(a, "rmsnorm"),
    }


def report(data: SiteData) -> list[str]:
    return report_lines(data.studies["rowgrid"])


PAGE = StudyPage(
    study="rowgrid",
    title="Row-plan grid",
    summary="every plan over a grid of row counts and widths; the planner scored by regret, its thresholds fitted "
    "on one run and tested on another",
    ours=OURS,
    peers=PEERS,
    context=context,
    claims=claims,
    report=report,
)
