"""The fused linear cross-entropy page from a synthetic run: its time-and-memory table reads
each variant's meta, its memory target is decided by the data (a planted run flips it), and a
reader sees no markup or reprs; with no run, it says so.  And the study on the CPU: our
variant and the unfused one pass the harness's float64 check on a tiny case."""

from __future__ import annotations

import pytest
import synthstudies
import torch
from test_study_pages import _clean, _site, _status, _words

RUN = "linear_cross_entropy-20261201T000000Z-aaaaaaa"
STARTED = "2026-12-01T00:00:00Z"
TARGET = "target-memory-quarter-8192x128256"


def test_page_shows_time_and_memory_and_decides_its_target(tmp_path) -> None:
    site = _site(tmp_path, synthstudies.linear_cross_entropy_doc(RUN, STARTED))
    html = (site / "linear_cross_entropy.html").read_text()
    _clean(html)
    words = _words(html)
    assert 'id="linear_cross_entropy-memory"' in html and "Peak MiB" in words and "× logits" in words
    assert "8192×128256×4096" in words  # the registry's shape, N×V×H
    assert _status(html, TARGET) == "met"  # ours at 0.2 of the unfused peak
    assert "No run yet." not in words


def test_a_planted_peak_misses_the_target(tmp_path) -> None:
    doc = synthstudies.linear_cross_entropy_doc(RUN, STARTED, ours_share=0.3)
    html = (_site(tmp_path, doc) / "linear_cross_entropy.html").read_text()
    _clean(html)
    assert _status(html, TARGET) == "missed"


def test_page_without_a_run_says_so(tmp_path) -> None:
    words = _words((_site(tmp_path) / "linear_cross_entropy.html").read_text())
    assert "No run yet." in words and "No fused linear cross-entropy run is in force" in words
    assert "No data" in words


@pytest.mark.parametrize("name", ["triton", "torch"])
def test_the_study_checks_our_variant_and_the_unfused_one_on_the_cpu(name, monkeypatch) -> None:
    from bench.harness import compare
    from bench.studies import linear_cross_entropy as study_module

    study = study_module.STUDY
    case = {"op": "linear_cross_entropy", "direction": "fwd+bwd", "dtype": "fp32", "rows": 19, "cols": 97,
            "hidden": 16}  # fmt: skip
    inputs = study.inputs(case, torch.device("cpu"), torch.Generator().manual_seed(0))
    refs = study.reference(case, inputs)
    (variant,) = [v for v in study.variants(case) if v.name == name]
    outs = variant.build(case)(inputs)
    result = compare(outs, refs, study.tolerance(case))
    assert result["passed"], result
