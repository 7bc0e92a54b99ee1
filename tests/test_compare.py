"""Comparing runs: Mann-Whitney U over raw samples, and the stability counts."""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from pathlib import Path

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
