"""Comparing runs: Mann-Whitney U over raw samples, and the stability counts."""

from __future__ import annotations

import copy
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import synthruns
from sitekit import ROOT, newest

from publish.compare import compare_runs, report
from publish.results import StudyResults
from publish.runs import load_run
from publish.stability import suites


def _variant_runs(tmp_path: Path, scale: dict[str, float]) -> tuple[Path, Path]:
    """Two copies of the newest stored run with fresh, controlled samples: B's variants
    named in ``scale`` are that much slower."""
    doc = json.loads(newest(ROOT).read_text())
    rng = random.Random(3)
    a, b = copy.deepcopy(doc), copy.deepcopy(doc)
    for da, db in zip(a["cases"], b["cases"], strict=True):
        for name, va in da["variants"].items():
            if va["samples_us"]:
                base = [10.0 * (1 + 0.01 * rng.random()) for _ in range(30)]
                va["samples_us"] = base
                db["variants"][name]["samples_us"] = [x * scale.get(name, 1.0) for x in reversed(base)]
    paths = []
    for tag, d in (("a", a), ("b", b)):
        d["run_id"] = f"{d['run_id']}-{tag}"
        path = tmp_path / "data" / "runs" / "softmax" / f"{d['run_id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(d))
        paths.append(path)
    return paths[0], paths[1]


def test_identical_distributions_are_unchanged_and_a_slowdown_is_a_regression(tmp_path) -> None:
    pa, pb = _variant_runs(tmp_path, {"liger": 1.10, "torch": 0.9})
    a, b = load_run(pa, tmp_path), load_run(pb, tmp_path)
    changes = compare_runs(a, b)
    by_variant = {}
    for c in changes:
        by_variant.setdefault(c.variant, set()).add(c.verdict)
    assert by_variant["triton"] == {"unchanged"}
    assert by_variant["liger"] == {"regression"}
    assert by_variant["torch"] == {"improvement"}
    assert all(c.p < 1e-6 for c in changes if c.variant == "liger")
    text = report(a, b, changes)
    assert "REGRESSION" in text and "IMPROVEMENT" in text and "regressions" in text


def test_cli_compare_flags_regressions(tmp_path) -> None:
    pa, pb = _variant_runs(tmp_path, {"triton": 1.2})
    cmd = [sys.executable, "-m", "bench", "compare", str(pa), str(pb), "--fail-on-regression"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 1, result.stderr
    assert "REGRESSION" in result.stdout and "triton" in result.stdout
    ok = subprocess.run(cmd[:-1], capture_output=True, text=True, cwd=ROOT)
    assert ok.returncode == 0


def test_stability_counts_agreement_across_repeats(tmp_path) -> None:
    pa, pb = _variant_runs(tmp_path, {"liger": 1.08})
    runs = [load_run(pa, tmp_path), load_run(pb, tmp_path)]
    results = StudyResults("softmax", runs)
    (fwd,) = [s for s in suites(results, "triton", ["torch", "liger"]) if s.name == "softmax fwd"]
    # torch: the same ratio in both runs; liger: 8% apart, so within 10% but not 5%.
    with_liger = sum(1 for c in results.where(direction="fwd") if c.get("liger") is not None)
    assert fwd.within[0.05] == fwd.comparisons - with_liger
    assert fwd.within[0.10] == fwd.comparisons
    assert fwd.widest is not None and fwd.widest[2] == "liger"


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
    m = re.search(r"the split plan beat the looped plan in (\d+) of (\d+) such cases", words)
    split = [c for c in results.cases.values() if c.get("triton-split") and c.params["rows"] < 132]
    wins = [c for c in split if c.verdict("triton-split", "triton-looped").outcome == "win"]  # type: ignore[union-attr]
    assert m and (int(m.group(1)), int(m.group(2))) == (len(wins), len(split)), m
    # Every speedup coloured on the page carries the verdict in its hover text.
    for css, outcome in (("win", "win"), ("loss", "loss"), ("tie", "unresolved")):
        for title in re.findall(rf'<a class="num {css}"[^>]*title="([^"]*)"', html):
            assert f"verdict: {outcome}" in title, title
