"""Comparing runs: Mann-Whitney U over raw samples, and the stability counts."""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import synthruns
from sitekit import ROOT, newest

from publish.compare import compare_runs, report, smallest_p
from publish.results import StudyResults
from publish.runs import load_run
from publish.stability import suites

COMMIT_A = "a" * 40
COMMIT_B = "b" * 40


def _write_run(
    tmp_path: Path, tag: str, commit: str, scale: dict[str, float], *, n: int = 30, drift: float = 1.0
) -> Path:
    """A copy of the newest stored run with fresh, controlled samples (``n`` per variant,
    around 10 µs, 1% wide): variants named in ``scale`` are that much slower, and every
    variant is ``drift`` times slower (a run-to-run shift that hits everything)."""
    doc = copy.deepcopy(json.loads(newest(ROOT).read_text()))
    rng = random.Random(tag)  # every run its own samples: samples are measured, never copied
    for case in doc["cases"]:
        for name, v in case["variants"].items():
            if v["samples_us"]:
                base = [10.0 * (1 + 0.01 * rng.random()) for _ in range(n)]
                v["samples_us"] = [x * drift * scale.get(name, 1.0) for x in base]
    doc["run_id"] = f"{doc['run_id']}-{tag}"
    doc["code"] = {"commit": commit, "dirty": False}
    path = tmp_path / "data" / "runs" / "softmax" / f"{doc['run_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def _variant_runs(tmp_path: Path, scale: dict[str, float], *, repeat_drift: float = 1.02) -> tuple[Path, Path]:
    """Run A, a repeat of A at the same commit that came out ``repeat_drift`` slower (the
    noise floor), and B at another commit with the variants in ``scale`` slower."""
    a = _write_run(tmp_path, "a", COMMIT_A, {})
    _write_run(tmp_path, "a2", COMMIT_A, {}, drift=repeat_drift)
    b = _write_run(tmp_path, "b", COMMIT_B, scale)
    return a, b


def _floor(tmp_path: Path):  # type: ignore[no-untyped-def]
    from publish.runs import load_runs
    from publish.stability import noise_floor

    return noise_floor(load_runs(tmp_path / "data"), "softmax")


def test_identical_distributions_are_unresolved_and_a_slowdown_is_a_regression(tmp_path) -> None:
    pa, pb = _variant_runs(tmp_path, {"liger": 1.10, "torch": 0.9})
    a, b = load_run(pa, tmp_path), load_run(pb, tmp_path)
    floor = _floor(tmp_path)
    changes = compare_runs(a, b, floor=floor)
    by_variant: dict[str, set[str]] = {}
    for c in changes:
        by_variant.setdefault(c.variant, set()).add(c.verdict)
    assert by_variant["triton"] == {"unresolved"}
    assert by_variant["liger"] == {"regression"}
    assert by_variant["torch"] == {"improvement"}
    assert all(c.p < 1e-6 for c in changes if c.variant == "liger")
    text = report(a, b, changes, floor)
    assert "REGRESSION" in text and "IMPROVEMENT" in text and "regressions" in text
    assert "noise floor per case and variant" in text and "softmax-" in text


def test_a_change_within_the_run_to_run_spread_is_not_a_regression(tmp_path) -> None:
    """Two runs of one commit, the second 6.7% slower everywhere: p is tiny, but runs of one
    commit differ that much, so nothing regressed.  Against another commit, a change inside
    the spread repeat runs measured is unresolved; one beyond it is a regression."""
    pa = _write_run(tmp_path, "a", COMMIT_A, {})
    pa2 = _write_run(tmp_path, "a2", COMMIT_A, {}, drift=1.067)
    a, a2 = load_run(pa, tmp_path), load_run(pa2, tmp_path)
    changes = compare_runs(a, a2, floor=_floor(tmp_path))
    assert changes and all(c.p < 1e-6 and c.change == pytest.approx(0.067, abs=0.01) for c in changes)
    assert {c.verdict for c in changes} == {"unresolved"}
    text = report(a, a2, changes, _floor(tmp_path))
    assert "0 regressions" in text and "same commit" in text and "within the noise floor" in text
    # Without a floor nothing across runs is resolved, however small p is.
    assert {c.verdict for c in compare_runs(a, a2)} == {"unresolved"}

    pb = _write_run(tmp_path, "b", COMMIT_B, {"liger": 1.20}, drift=1.05)  # 5% drift, Liger 26% slower
    b = load_run(pb, tmp_path)
    found = {(c.variant, c.verdict) for c in compare_runs(a, b, floor=_floor(tmp_path))}
    assert ("triton", "unresolved") in found and ("liger", "regression") in found
    assert ("triton", "regression") not in found


def test_cli_compare_flags_regressions(tmp_path) -> None:
    pa, pb = _variant_runs(tmp_path, {"triton": 1.2})
    cmd = [sys.executable, "-m", "bench", "compare", str(pa), str(pb), "--fail-on-regression"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 1, result.stderr
    assert "REGRESSION" in result.stdout and "triton" in result.stdout and "noise floor" in result.stdout
    ok = subprocess.run(cmd[:-1], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0


def test_cli_compare_of_one_commit_flags_nothing(tmp_path) -> None:
    pa = _write_run(tmp_path, "a", COMMIT_A, {})
    pa2 = _write_run(tmp_path, "a2", COMMIT_A, {}, drift=1.067)
    cmd = [sys.executable, "-m", "bench", "compare", str(pa), str(pa2), "--fail-on-regression"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "REGRESSION" not in result.stdout and "same commit" in result.stdout


def test_too_few_samples_are_untestable_not_unchanged(tmp_path) -> None:
    """4 samples against 4: the Mann-Whitney test cannot reach p < 0.01 (at best 2/70), so
    the report says so instead of "0 regressions", and a script is told it could not tell."""
    pa = _write_run(tmp_path, "a", COMMIT_A, {}, n=4)
    _write_run(tmp_path, "a2", COMMIT_A, {}, n=4, drift=1.01)
    pb = _write_run(tmp_path, "b", COMMIT_B, {"triton": 1.5}, n=4)
    a, b = load_run(pa, tmp_path), load_run(pb, tmp_path)
    changes = compare_runs(a, b, floor=_floor(tmp_path))
    assert {c.verdict for c in changes} == {"untestable"}
    assert all(c.smallest_p == pytest.approx(2 / 70) for c in changes)
    text = report(a, b, changes, _floor(tmp_path))
    assert "0 regressions" not in text and "no pair could be tested" in text
    assert "can never reach p < 0.01" in text and "0.029" in text
    cmd = [sys.executable, "-m", "bench", "compare", str(pa), str(pb), "--fail-on-regression"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2 and "can never reach" in result.stdout, result.stdout + result.stderr
    # 5 against 5 can (2/252 < 0.01).
    assert smallest_p(5, 5) < 0.01 < smallest_p(4, 4)


def test_cli_compare_without_common_cases_is_an_error(tmp_path) -> None:
    pa = _write_run(tmp_path, "a", COMMIT_A, {})
    doc = json.loads(pa.read_text())
    for case in doc["cases"]:
        case["id"] = "other/" + case["id"]
        for v in case["variants"].values():
            v["samples_us"] = [1.1 * x for x in v["samples_us"]]
    doc["run_id"] += "-other"
    other = pa.with_name(doc["run_id"] + ".json")
    other.write_text(json.dumps(doc))
    result = subprocess.run(
        [sys.executable, "-m", "bench", "compare", str(pa), str(other)], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 2 and "nothing to compare" in result.stderr


def test_stability_counts_agreement_across_repeats(tmp_path) -> None:
    pa = _write_run(tmp_path, "a", COMMIT_A, {})
    pb = _write_run(tmp_path, "b", COMMIT_A, {"liger": 1.08})  # a repeat run: same commit
    pc = _write_run(tmp_path, "c", COMMIT_B, {"liger": 1.5})  # another commit: not a repeat
    runs = [load_run(pa, tmp_path), load_run(pb, tmp_path), load_run(pc, tmp_path)]
    results = StudyResults("softmax", runs)
    (fwd,) = [s for s in suites(results, "triton", ["torch", "liger"]) if s.name == "softmax fwd"]
    assert fwd.runs == {runs[0].run_id, runs[1].run_id}
    # torch: the same ratio in both runs; liger: 8% apart, so within 10% but not 5%.
    with_liger = sum(1 for c in results.where(direction="fwd") if c.get("liger") is not None)
    assert fwd.within[0.05] == fwd.comparisons - with_liger
    assert fwd.within[0.10] == fwd.comparisons
    assert fwd.widest is not None and fwd.widest[2] == "liger"


def test_compare_page_names_its_noise_floor_and_what_it_could_not_test(tmp_path) -> None:
    from publish.site import build

    root = synthruns.project(tmp_path)
    # Dispatch: two runs at one commit with 4 samples a variant, then a third at another.
    for i, commit in enumerate(("1" * 40, "1" * 40, "2" * 40)):
        doc = synthruns.dispatch_doc(f"dispatch-2026120{i + 1}T000000Z-{commit[:7]}", f"2026-12-0{i + 1}T00:00:00Z")
        doc["code"]["commit"] = commit
        for case in doc["cases"]:
            for v in case["variants"].values():
                v["samples_us"] = v["samples_us"][:4]
        synthruns.write(root, doc)
    out = tmp_path / "site"
    build(root, out)
    words = _words((out / "compare.html").read_text())
    assert "Noise floor used. Per case and variant, the largest spread" in words
    assert "could not be tested" in words and "can never reach p below 0.01" in words
    assert "0 regressed" not in words and "No pair could be tested: whether anything regressed is unknown." in words


# ----------------------------------------------------------------------------- the one verdict


def test_verdict_needs_the_interval_the_test_and_the_run_to_run_spread() -> None:
    from publish.results import RunSpread, verdict
    from publish.stats import Ratio

    assert verdict(Ratio(1.10, 1.05, 1.15)).outcome == "win"
    assert verdict(Ratio(0.90, 0.85, 0.95)).outcome == "loss"
    assert verdict(Ratio(1.10, 0.98, 1.15)).outcome == "unresolved"  # the interval includes 1.00x
    assert verdict(Ratio(1.10, 1.05, 1.15), RunSpread(0.12, "")).outcome == "unresolved"
    assert verdict(Ratio(1.10, 1.05, 1.15), RunSpread(0.08, "")).outcome == "win"
    # Symmetric: 0.8x is as far from 1.00x as 1.25x.
    assert verdict(Ratio(0.80, 0.75, 0.85), RunSpread(0.24, "")).outcome == "loss"
    assert verdict(Ratio(0.80, 0.75, 0.85), RunSpread(0.25, "")).outcome == "unresolved"
    assert verdict(Ratio(1.10, 1.05, 1.15), p=0.02).outcome == "unresolved"
    assert verdict(Ratio(1.10, 1.05, 1.15), p=0.002).outcome == "win"


def _scaled_times(factors: dict[tuple[str, int, int], tuple[str, float]]):  # type: ignore[no-untyped-def]
    """Synthetic softmax times where ``name`` at (rows, cols) takes ``factor`` x ``base``'s time."""

    def times(name: str, rows: int, cols: int):  # type: ignore[no-untyped-def]
        if (name, rows, cols) in factors:
            base, factor = factors[(name, rows, cols)]
            t = synthruns.softmax_times(base, rows, cols)
            assert isinstance(t, tuple)
            return round(t[0] * factor, 4), round(t[1] * factor, 4)
        return synthruns.softmax_times(name, rows, cols)

    return times


def _two_runs_that_disagree(root: Path) -> None:
    """Two softmax runs.  At 16384x4096 and 1024x1024 Liger is resolved-faster inside the
    newest run, but the other run saw the opposite, so the run-to-run spread leaves them
    unresolved; at 32x127 Liger is faster in both runs (a loss by every rule).  At 64x131072
    the split plan is 0.5% faster than the looped one in the newest run and 1% slower in the
    other: unresolved, not a win."""
    older = {("liger", 16384, 4096): 1.04, ("liger", 1024, 1024): 1.04, ("liger", 32, 127): 0.85,
             ("triton-split", 64, 131072): 1.01}  # fmt: skip
    newer = {("liger", 16384, 4096): 0.965, ("liger", 1024, 1024): 0.97, ("liger", 32, 127): 0.85,
             ("triton-split", 64, 131072): 0.995}  # fmt: skip
    for run_id, started, factors in (
        ("softmax-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z", older),
        ("softmax-20261202T000000Z-bbbbbbb", "2026-12-02T00:00:00Z", newer),
    ):
        base = {k: ("triton-looped" if k[0] == "triton-split" else "triton", f) for k, f in factors.items()}
        synthruns.write(root, synthruns.softmax_doc(run_id, started, _scaled_times(base)))


def _words(html: str) -> str:
    import html as htmllib

    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_card_targets_losses_and_claims_share_one_verdict(tmp_path) -> None:
    from publish.results import StudyResults
    from publish.runs import load_runs
    from publish.site import build

    root = synthruns.project(tmp_path)
    _two_runs_that_disagree(root)
    out = tmp_path / "site"
    build(root, out)
    results = StudyResults("softmax", load_runs(root / "data"))
    device = [c for c in results.cases.values() if c.get("triton") and c.get("liger")]
    by_rule = [c for c in device if c.verdict("triton", "liger").outcome == "loss"]  # type: ignore[union-attr]
    by_interval = [c for c in device if (r := c.ratio("liger", "triton")) is not None and r.resolved and r.value < 1]
    assert len(by_interval) > len(by_rule) > 0, "the crafted data must separate the two rules"

    html = (out / "softmax.html").read_text()
    words = _words(html)
    # The decision card.
    m = re.search(r"Liger-Kernel was faster on the device in (\d+) cases", words)
    assert m and int(m.group(1)) == len(by_rule), m
    # The losses table: every Liger row shown as a loss is a loss by the rule, and only those.
    losses = json.loads((out / "tables" / "softmax-losses.json").read_text())
    liger_rows = [r for r in losses["rows"] if r["cells"]["peer"]["text"] == "Liger-Kernel"]
    shown_as_loss = {
        r["cells"]["case"]["text"].replace("×", "x")
        for r in liger_rows
        if "verdict: loss" in r["cells"]["ratio"]["note"]
    }
    assert shown_as_loss == {c.case_id for c in by_rule}
    # Targets: 16384x4096 is unresolved by the rule, so "no slower than Liger" is met.
    assert re.search(r'id="claim-target-liger-16384x4096"[^>]*><span class="lab-status">met<', html)
    # Claims count by the same rule: 16384x4096 (0.965x inside the run) is a tie, and a split
    # plan 0.5% ahead of the looped one in one run and behind in the other did not beat it.
    assert re.search(r'id="claim-dram-bound-tie"[^>]*><span class="lab-status">holds<', html)
    m = re.search(r"with fewer rows than SMs, the split plan beat the looped plan in (\d+) of (\d+) cases", words)
    split = [c for c in results.cases.values() if c.get("triton-split") and c.params["rows"] < 132]
    wins = [c for c in split if c.verdict("triton-split", "triton-looped").outcome == "win"]  # type: ignore[union-attr]
    assert m and (int(m.group(1)), int(m.group(2))) == (len(wins), len(split)), m
    # Every speedup coloured on the page carries the verdict in its hover text.
    for css, outcome in (("win", "win"), ("loss", "loss"), ("tie", "unresolved")):
        for title in re.findall(rf'<a class="num {css}"[^>]*title="([^"]*)"', html):
            assert f"verdict: {outcome}" in title, title


def test_run_to_run_spread_comes_from_repeat_runs_of_one_commit(tmp_path) -> None:
    """Two runs at one commit agree on Liger at 16384x4096; a newer commit makes ours 25%
    slower there.  Runs of different commits measured different code: the newest run is
    judged against the spread its repeats showed (a loss), not against the older code's
    ratio (which would make any change look like noise).  A case measured only at the new
    commit gets the study's typical spread of the same comparison."""
    from publish.results import StudyResults
    from publish.runs import load_runs

    root = synthruns.project(tmp_path)
    for day, commit, factor in ((1, "1" * 40, 1.00), (2, "1" * 40, 1.01), (3, "2" * 40, 0.80)):
        times = _scaled_times({("liger", 16384, 4096): ("triton", factor)})
        doc = synthruns.softmax_doc(f"softmax-2026120{day}T000000Z-{commit[:7]}", f"2026-12-0{day}T00:00:00Z", times)
        doc["code"]["commit"] = commit
        synthruns.write(root, doc)
    results = StudyResults("softmax", load_runs(root / "data"))
    case = results.find(direction="fwd", rows=16384, cols=4096, l2="cold")
    assert case is not None and case.run.doc["code"]["commit"] == "2" * 40
    v = case.verdict("triton", "liger")
    assert v is not None and v.outcome == "loss" and v.run_spread is not None
    assert v.run_spread.value == pytest.approx(0.01, abs=1e-3) and "at commit 1111111" in v.run_spread.measured
    assert len(v.run_spread.runs) == 2
    # A case the repeat runs did not measure is judged against the study's typical spread.
    only_new = results.find(direction="fwd", rows=32, cols=127, l2="cold")
    assert only_new is not None
    assert only_new.repeat_spread("liger", "triton") is not None  # measured in all three runs
    fresh = dataclasses.replace(only_new, repeats=(only_new,))
    spread = fresh.run_spread("liger", "triton")
    assert spread is not None and "95th percentile" in spread.measured
