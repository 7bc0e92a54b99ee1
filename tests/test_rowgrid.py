"""Scoring the row planner on grid runs (publish/rowgrid.py), on hand-made numbers.

Every expected value below was worked out by hand from the medians the test writes; the
last tests plant a wrong best-plan rule and a wrong regret formula and check that these
same assertions catch them."""

from __future__ import annotations

import copy
import dataclasses
import html
import re
from pathlib import Path

import pytest
from synthruns import grid_case, grid_doc, modelled_grid

import kernels.plans
from contract.schema import validate_run
from kernels.plans import RowPlan, RowPolicy
from publish import rowgrid
from publish.pages import rowgrid as page
from publish.results import StudyResults
from publish.runs import Run

SMS = 132


# The scoring is checked against a fixed policy, not whatever kernels/plans.py ships today:
# the policy these hand-made numbers were written for (loops of 4096, splits of 4096 below
# one row per SM, blocks up to 32 KB).
SOFTMAX_POLICY = RowPolicy(max_block_bytes=32 * 1024, chunk=4096)


@pytest.fixture(autouse=True)
def _pinned_shipped_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels.plans, "SOFTMAX_POLICY", SOFTMAX_POLICY)


def _run(run_id: str, started: str, cases: list[dict], **kw) -> Run:  # type: ignore[no-untyped-def]
    doc = grid_doc(run_id, started, cases, **kw)
    validate_run(doc, run_id)
    return Run(run_id, "rowgrid", Path(f"{run_id}.json"), doc)


def _cells(*runs: Run) -> tuple[StudyResults, dict[str, list[rowgrid.Cell]]]:
    results = StudyResults("rowgrid", list(runs))
    return results, {r.run_id: rowgrid.grid_cells(results, r) for r in runs}


# 4096 x 50257 bf16, misaligned rows: the shipped policy loops in 4096-element chunks
# (whole row 65536 > 32 KB; 4096 rows >= 132 SMs), i.e. variant "looped-4096".
VOCAB = {
    "looped-2048": 10.0,
    "looped-4096": 12.0,
    "looped-8192": 15.0,
    "looped-16384": 20.0,
    "split-2048": 30.0,
    "split-4096": 25.0,
    "split-4096-1launch": 5.0,  # fastest, but no policy may choose it: never the best plan
    "planner": 12.0,
    "torch": 11.0,
    "compile": 14.0,
}


def _check_vocab_cell(cells: list[rowgrid.Cell]) -> None:
    """The by-hand expectations for the VOCAB cell, shared with the planted-bug tests."""
    (cell,) = cells
    assert cell.best == "looped-2048"
    assert cell.best_time == 10.0
    choice = rowgrid.choose(SOFTMAX_POLICY, cell, SMS)
    assert choice.variant == "looped-4096"
    assert choice.regret == pytest.approx(0.2)  # 12 / 10 - 1


def test_best_plan_and_regret_by_hand() -> None:
    run = _run("rowgrid-a", "2026-12-01T00:00:00Z", [grid_case(4096, 50257, VOCAB)])
    _, cells = _cells(run)
    _check_vocab_cell(cells["rowgrid-a"])


def test_refused_plan_is_never_best_and_unmeasured_pick_is_not_guessed() -> None:
    medians = {**VOCAB, "looped-2048": None}  # refused: no samples
    medians.pop("looped-4096")  # the shipped policy's pick was not timed at all
    run = _run("rowgrid-a", "2026-12-01T00:00:00Z", [grid_case(4096, 50257, medians), grid_case(1, 1024, {
        "block": 2.0, "planner": 2.0, "torch": 4.0, "compile": 2.5})])  # fmt: skip
    _, cells = _cells(run)
    vocab = next(c for c in cells["rowgrid-a"] if c.cols == 50257)
    assert vocab.best == "looped-8192" and "looped-2048" not in vocab.plans
    s = rowgrid.score("shipped", SOFTMAX_POLICY, run, cells["rowgrid-a"])
    (missing,) = s.unmeasured
    assert missing.variant == "looped-4096" and missing.regret is None and not missing.measured
    assert s.scored == 1 and s.mean == 0.0  # the 1 x 1024 cell: block chosen, block best


def test_mean_percentile_and_cells_over_ten_percent_by_hand() -> None:
    run = _run("rowgrid-a", "2026-12-01T00:00:00Z", [grid_case(1, 1024, {"block": 1.0})])
    _, cells = _cells(run)
    cell = cells["rowgrid-a"][0]
    choices = (*(rowgrid.Choice(cell, "block", r) for r in (0.0, 0.05, 0.2, 0.5)), rowgrid.Choice(cell, "x", None))
    s = rowgrid.Score("r", SOFTMAX_POLICY, run, choices)
    assert s.mean == pytest.approx(0.1875)  # (0 + 0.05 + 0.2 + 0.5) / 4: the unmeasured pick is not averaged
    assert s.p90 == pytest.approx(0.41)  # rank 0.9 * 3 = 2.7: 0.2 + 0.7 * (0.5 - 0.2)
    assert s.over == 2  # 0.2 and 0.5 exceed 10%
    assert s.scored == 4 and len(s.unmeasured) == 1


def test_pad_and_variant_names_follow_the_grid() -> None:
    assert rowgrid.pad_for(1, 50257) == 0  # one row: aligned at its start
    assert rowgrid.pad_for(2, 50257) == 7  # misaligned rows: the 8-element window
    assert rowgrid.pad_for(2, 4096) == 0
    assert rowgrid.variant_for(RowPlan("block", 4096, 8)) == "block"
    assert rowgrid.variant_for(RowPlan("looped", 4096, 8)) == "looped-4096"
    assert rowgrid.variant_for(RowPlan("split", 2048, 4, chunks=25)) == "split-2048"
    assert rowgrid.variant_for(RowPlan("split", 4096, 8, chunks=3, one_launch=True)) == "split-4096-1launch"


def _threshold_cells(split_best_below: int) -> list[dict]:
    """Rows 64, 200, 300 and 1000 of width 131073 (misaligned: 262144-element window, never
    a block): splitting in 4096-element chunks is best below ``split_best_below`` rows,
    looping in 4096-element chunks above."""
    out = []
    for rows in (64, 200, 300, 1000):
        split = rows < split_best_below
        out.append(
            grid_case(
                rows,
                131073,
                {
                    "looped-2048": 20.0,
                    "looped-4096": 20.0 if split else 10.0,
                    "looped-8192": 20.0 if split else 11.0,
                    "looped-16384": 20.0,
                    "split-2048": 15.0 if split else 30.0,
                    "split-4096": 10.0 if split else 30.0,
                    "planner": 10.0,
                    "torch": 20.0,
                    "compile": 15.0,
                },
            )
        )
    return out


def test_fit_finds_the_planted_threshold_and_is_scored_on_the_other_run() -> None:
    older = _run("rowgrid-a", "2026-12-01T00:00:00Z", _threshold_cells(264))  # split while rows < 2 x 132
    newer = _run("rowgrid-b", "2026-12-02T00:00:00Z", _threshold_cells(66))  # split while rows < 0.5 x 132
    results, _ = _cells(older, newer)
    a = rowgrid.analyse(results)
    assert a.pair == (older, newer)
    forward, reverse = a.fits
    fitted = forward.fitted_on
    assert fitted.run is older and fitted.mean == 0.0 and not fitted.unmeasured
    assert (fitted.policy.split_rows_per_sm, fitted.policy.chunk, fitted.policy.split_chunk) == (2.0, 4096, 4096)
    held = forward.held_out
    assert held is not None and held.run is newer
    # On the newer run 200 rows loop best (10) but the fitted rule splits (30): regret 2 in
    # one cell of four.
    assert [round(c.regret, 6) for c in held.choices] == [0.0, 2.0, 0.0, 0.0]  # type: ignore[arg-type]
    assert held.mean == pytest.approx(0.5) and held.over == 1
    assert reverse.fitted_on.run is newer and reverse.fitted_on.policy.split_rows_per_sm == 0.5
    # Fitted on the newer run (split below 66 rows), scored on the older (split best below
    # 264): at 200 rows it loops (20) where splitting was best (10): regret 1 in one cell of four.
    assert reverse.held_out is not None and reverse.held_out.mean == pytest.approx(0.25)
    assert [round(c.regret, 6) for c in reverse.held_out.choices] == [0.0, 1.0, 0.0, 0.0]  # type: ignore[arg-type]


def test_shipped_and_alternative_rules_are_scored_on_every_run() -> None:
    older = _run("rowgrid-a", "2026-12-01T00:00:00Z", _threshold_cells(264))
    newer = _run("rowgrid-b", "2026-12-02T00:00:00Z", _threshold_cells(66))
    a = rowgrid.analyse(StudyResults("rowgrid", [older, newer]))
    assert {rowgrid.SHIPPED, rowgrid.NEVER_SPLIT, rowgrid.DEFAULTS} <= set(a.rules)
    never = a.rules[rowgrid.NEVER_SPLIT]
    # Never splitting loops in 4096 chunks: on the older run rows 64 and 200 lose (20 vs 10).
    assert [c.variant for c in never["rowgrid-a"].choices] == ["looped-4096"] * 4
    assert never["rowgrid-a"].mean == pytest.approx(0.5)
    # The shipped rule splits below 132 rows: on the older run it loops at 200 (regret 1).
    assert never["rowgrid-b"].mean == pytest.approx(0.25)  # newer: only 64 rows split best
    shipped = a.rules[rowgrid.SHIPPED]
    assert shipped["rowgrid-a"].mean == pytest.approx(0.25) and shipped["rowgrid-b"].mean == pytest.approx(0.0)


def test_one_run_is_fitted_in_sample_only() -> None:
    run = _run("rowgrid-a", "2026-12-01T00:00:00Z", _threshold_cells(264))
    a = rowgrid.analyse(StudyResults("rowgrid", [run]))
    assert a.pair is None and len(a.fits) == 1 and a.fits[0].held_out is None
    assert rowgrid.report_lines(StudyResults("rowgrid", [run])) == [
        "row-plan grid: 1 valid run; a held-out fit needs two"
    ]


def test_report_lines_name_the_fitted_fields_and_the_held_out_regret() -> None:
    older = _run("rowgrid-a", "2026-12-01T00:00:00Z", _threshold_cells(264))
    newer = _run("rowgrid-b", "2026-12-02T00:00:00Z", _threshold_cells(66))
    lines = rowgrid.report_lines(StudyResults("rowgrid", [older, newer]))
    assert lines[0].startswith("row-plan grid: fitted on rowgrid-a: max_block_bytes=16384, chunk=4096,")
    assert "split_rows_per_sm=2" in lines[0]
    assert "held out on rowgrid-b: mean 50.0%" in lines[1] and "1 of 4 cells over 10%" in lines[1]


def test_ours_against_torch_uses_the_one_verdict_rule() -> None:
    cases = [
        grid_case(64, 4097, {"split-2048": 10.0, "planner": 10.0, "torch": 20.0, "compile": 10.0}),  # win, tie
        grid_case(64, 8191, {"split-2048": 10.0, "planner": 10.0, "torch": 10.0, "compile": 30.0}),  # tie, win
        grid_case(64, 11008, {"split-2048": 10.0, "planner": 20.0, "torch": 10.0, "compile": 10.0}),  # loss, loss
    ]
    run = _run("rowgrid-a", "2026-12-01T00:00:00Z", cases)
    _, cells = _cells(run)
    assert page._no_slower(cells["rowgrid-a"], "torch") == (2, 3)
    assert page._no_slower(cells["rowgrid-a"], "compile") == (2, 3)
    verdicts = [c.case.speedup("planner", "torch").css for c in cells["rowgrid-a"]]  # type: ignore[union-attr]
    assert verdicts == ["win", "tie", "loss"]


def test_modelled_grid_fits_without_unmeasured_picks() -> None:
    a = rowgrid.analyse(
        StudyResults(
            "rowgrid",
            [
                Run("g1", "rowgrid", Path("g1.json"), modelled_grid("g1", "2026-12-01T00:00:00Z")),
                Run("g2", "rowgrid", Path("g2.json"), modelled_grid("g2", "2026-12-02T00:00:00Z", split_cost=1.5)),
            ],
        )
    )
    fit = a.forward_fit
    assert fit is not None and fit.held_out is not None
    assert not fit.fitted_on.unmeasured
    # The fit is the best of the search grid on its own run: no rule scored there does better.
    comparable = [s["g1"] for s in a.rules.values() if s["g1"].mean is not None and not s["g1"].unmeasured]
    assert all(fit.fitted_on.mean <= s.mean + 1e-12 for s in comparable)
    assert len(a.cells["g1"]) == 30 and all(c.best is not None for c in a.cells["g1"])


# ----------------------------------------------------------------------------- planted bugs


def test_a_planted_wrong_best_plan_rule_is_caught(monkeypatch) -> None:
    run = _run("rowgrid-a", "2026-12-01T00:00:00Z", [grid_case(4096, 50257, VOCAB)])
    # Counting the one-launch split (which no policy may choose) as a plan makes it "best".
    monkeypatch.setattr(rowgrid, "PLAN_VARIANT", re.compile(r"^(block|looped-\d+|split-\d+.*)$"))
    _, cells = _cells(run)
    with pytest.raises(AssertionError):
        _check_vocab_cell(cells["rowgrid-a"])


def test_a_planted_wrong_regret_is_caught(monkeypatch) -> None:
    run = _run("rowgrid-a", "2026-12-01T00:00:00Z", [grid_case(4096, 50257, VOCAB)])
    _, cells = _cells(run)
    real = rowgrid.choose

    def inverted(policy, cell, sms):  # type: ignore[no-untyped-def]
        c = real(policy, cell, sms)
        return dataclasses.replace(c, regret=cell.best_time / cell.plans[c.variant] - 1)  # best / chosen - 1

    monkeypatch.setattr(rowgrid, "choose", inverted)
    with pytest.raises(AssertionError):
        _check_vocab_cell(cells["rowgrid-a"])


def test_search_grid_is_the_issue_grid() -> None:
    policies = rowgrid.candidates()
    assert len(policies) == 3 * 4 * 2 * 3 * 2 * 2 * 4 * 3
    assert {p.staged_row_bytes for p in policies} == {(0, 0), (32 * 1024, 110 * 1024), (64 * 1024, 110 * 1024)}
    assert {p.wide_chunk for p in policies} == {0, 32768}
    assert {p.chunk_waste for p in policies} == {-1.0, 0.15, 0.3}
    assert {p.max_block_bytes for p in policies} == {16384, 32768, 65536}
    assert {p.split_rows_per_sm for p in policies} == {0.25, 0.5, 1.0, 2.0}
    default = RowPolicy()
    assert all(p.pack_elems == default.pack_elems and p.narrow_split_width == default.narrow_split_width
               for p in policies)  # fmt: skip


def _as_rmsnorm(cases: list[dict]) -> list[dict]:
    """The same cells as RMSNorm's (bench/studies/rowgrid.py's ids and op)."""
    out = []
    for c in cases:
        c = copy.deepcopy(c)
        c["id"] = "rmsnorm/" + c["id"]
        c["case"]["op"] = "rmsnorm"
        out.append(c)
    return out


def test_rmsnorm_cells_are_scored_apart_from_softmax(monkeypatch: pytest.MonkeyPatch) -> None:
    rms_policy = dataclasses.replace(SOFTMAX_POLICY, split_rows_per_sm=2.0)  # not softmax's: told apart below
    monkeypatch.setattr(kernels.plans, "RMSNORM_POLICY", rms_policy)
    soft_a, soft_b = _threshold_cells(264), _threshold_cells(66)
    # RMSNorm's cells of the same shapes, with the threshold the other way round: mixed into
    # softmax's cells (same rows and widths) they would change every number below.
    rms_a, rms_b = _as_rmsnorm(_threshold_cells(66)), _as_rmsnorm(_threshold_cells(264))
    mixed = [_run("rowgrid-a", "2026-12-01T00:00:00Z", soft_a + rms_a),
             _run("rowgrid-b", "2026-12-02T00:00:00Z", soft_b + rms_b)]  # fmt: skip
    alone = [_run("rowgrid-a", "2026-12-01T00:00:00Z", soft_a), _run("rowgrid-b", "2026-12-02T00:00:00Z", soft_b)]
    a_mixed, a_alone = rowgrid.analyse(StudyResults("rowgrid", mixed)), rowgrid.analyse(StudyResults("rowgrid", alone))
    assert [len(v) for v in a_mixed.cells.values()] == [4, 4]
    for rule in a_alone.rules:
        for run_id, s in a_alone.rules[rule].items():
            assert a_mixed.rules[rule][run_id].regrets == s.regrets, (rule, run_id)
    assert a_mixed.forward_fit.fitted_on.policy == a_alone.forward_fit.fitted_on.policy  # type: ignore[union-attr]
    # RMSNorm's own analysis sees only its cells: its fit on the older run splits below 66.
    rms = rowgrid.analyse(StudyResults("rowgrid", mixed), "rmsnorm")
    assert all(c.case.case_id.startswith("rmsnorm/") for c in rms.cells["rowgrid-a"])
    assert rms.forward_fit is not None and rms.forward_fit.fitted_on.policy.split_rows_per_sm == 0.5
    assert rms.policies[rowgrid.SHIPPED] is rms_policy and a_mixed.policies[rowgrid.SHIPPED] is SOFTMAX_POLICY
    # One rule or one per operator: softmax's fit (split below 2 x 132 rows) on RMSNorm's
    # held-out cells (split best below 264) has regret 0; RMSNorm's own fit (below 66) loops
    # at 200 rows where splitting wins (10 -> 20): mean 0.25.  So one rule serves both.
    claim = page.one_rule(StudyResults("rowgrid", mixed))
    assert claim is not None and claim.holds
    text = html.unescape(re.sub(r"<[^>]+>", "", str(claim.text)))
    assert "softmax's fitted policy has mean regret 0.0%" in text and "own fitted policy 25.0%" in text, text
    assert "one rule serves both" in text
    section = page.rmsnorm_context(StudyResults("rowgrid", mixed))
    assert section is not None and section["rules"].id == "rowgrid-rmsnorm-rules"
    assert section["ours"].id == "rowgrid-rmsnorm-ours" and section["policies"].id == "rowgrid-rmsnorm-policies"
    assert page.rmsnorm_context(StudyResults("rowgrid", alone)) is None


def test_the_grid_times_the_staged_plan_for_softmax_where_a_row_fits_shared_memory() -> None:
    from bench.studies.rowgrid import cell_plans

    wide = cell_plans(4096, 50257)
    assert wide["staged-4096"] == RowPlan("staged", 4096, kernels.plans.STAGED_WARPS, chunks=13)
    assert "staged-4096" in cell_plans(1000, 100003)  # 25 chunks: 200 KB
    assert "staged-4096" not in cell_plans(1000, 131073)  # 33 chunks: past what a program holds
    assert "staged-4096" not in cell_plans(4096, 8191)  # a block's width
    assert "staged-4096" not in cell_plans(4096, 50257, op="rmsnorm")  # no staged kernel
    # the variant name is the one the scoring maps the planner's staged plan to
    staged = dataclasses.replace(SOFTMAX_POLICY, staged_row_bytes=(64 * 1024, 110 * 1024))
    plan = kernels.plans.plan_rows(4096, 50257, 2, 132, staged, None, 7)
    assert rowgrid.variant_for(plan) == "staged-4096" and rowgrid.PLAN_VARIANT.match("staged-4096")


def test_only_with_a_caret_selects_softmax_grid_cells_alone() -> None:
    from bench.harness import Options, select_cases
    from bench.studies.rowgrid import RowGridStudy

    study = RowGridStudy()
    every = select_cases(study, Options(quick=True, only="fwd/"))
    softmax = select_cases(study, Options(quick=True, only="^fwd/"))
    assert {c["op"] for c in every} == {"softmax", "rmsnorm"}
    assert softmax and {c["op"] for c in softmax} == {"softmax"}
    assert len(softmax) == sum(c["op"] == "softmax" for c in every)


def test_the_shipped_rule_is_in_sample_only_on_the_run_it_was_fitted_on(monkeypatch) -> None:
    older = _run("rowgrid-a", "2026-12-01T00:00:00Z", _threshold_cells(264))
    newer = _run("rowgrid-b", "2026-12-02T00:00:00Z", _threshold_cells(66))
    a = rowgrid.analyse(StudyResults("rowgrid", [older, newer]))

    def roles(fitted: dict[str, str]) -> dict[str, str]:
        monkeypatch.setattr(kernels.plans, "POLICY_FITTED_ON", fitted)
        rows = page.rules_table(a).rows
        return {r["run"].text: r["role"].text for r in rows if r["rule"].text == rowgrid.SHIPPED}

    assert roles({"softmax": "rowgrid-a"}) == {"rowgrid-a": "fitted here (in-sample)", "rowgrid-b": "held out"}
    assert roles({}) == {"rowgrid-a": "set by hand", "rowgrid-b": "set by hand"}
    assert set(roles({"softmax": "rowgrid-elsewhere"}).values()) == {"held out"}


def test_the_grid_stages_the_row_with_its_alignment_window() -> None:
    from bench.studies.rowgrid import cell_plans

    # 49149 + 7 window elements cross a chunk boundary: 13 chunks, as the planner counts them
    staged = dataclasses.replace(SOFTMAX_POLICY, staged_row_bytes=(32 * 1024, 110 * 1024))
    planned = kernels.plans.plan_rows(4096, 49149, 2, 132, staged, None, 7)
    assert cell_plans(4096, 49149)["staged-4096"].chunks == planned.chunks == 13
    assert "staged-4096" not in cell_plans(4096, 114687)  # 114694 elements: 29 chunks, 232 KB


def test_field_text_names_the_staged_bounds() -> None:
    assert rowgrid.field_text((0, 0)) == "never"
    assert rowgrid.field_text((32 * 1024, 110 * 1024)) == "above 32 KB up to 110 KB"
    staged = dataclasses.replace(SOFTMAX_POLICY, staged_row_bytes=(64 * 1024, 110 * 1024))
    assert rowgrid.policy_texts(staged)["staged_row_bytes"] == "above 64 KB up to 110 KB"


def test_rmsnorm_shipped_rule_is_set_by_hand_whatever_softmax_was_fitted_on(monkeypatch) -> None:
    monkeypatch.setattr(kernels.plans, "POLICY_FITTED_ON", {"softmax": "rowgrid-a"})
    runs = [_run("rowgrid-a", "2026-12-01T00:00:00Z", _as_rmsnorm(_threshold_cells(264))),
            _run("rowgrid-b", "2026-12-02T00:00:00Z", _as_rmsnorm(_threshold_cells(66)))]  # fmt: skip
    a = rowgrid.analyse(StudyResults("rowgrid", runs), "rmsnorm")
    rows = page.rules_table(a, "rmsnorm").rows
    roles = {r["run"].text: r["role"].text for r in rows if r["rule"].text == rowgrid.SHIPPED}
    assert roles == {"rowgrid-a": "set by hand", "rowgrid-b": "set by hand"}
