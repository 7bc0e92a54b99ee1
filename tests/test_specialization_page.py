"""The specialization page from a synthetic run: its compile and code tables read each
variant's meta, its claims are decided by the data (a planted spill contradicts one), and a
reader sees no markup or reprs; with no run, it says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import synthstudies
from test_study_pages import _clean, _site, _status, _words

SPEC = "specialization-20261201T000000Z-aaaaaaa"


@pytest.fixture(scope="module")
def spec_site(tmp_path_factory) -> Path:
    return _site(tmp_path_factory.mktemp("spec"), synthstudies.specialization_doc(SPEC, "2026-12-01T00:00:00Z"))


def test_specialization_page_counts_compilations_and_reads_the_code(spec_site) -> None:
    html = (spec_site / "specialization.html").read_text()
    _clean(html)
    words = _words(html)
    # 10 shapes (2 widths x 5 batch sizes): every-size constexpr compiled 10, model-fixed 2
    assert "every size constexpr compiled 10 kernels and model-fixed sizes 2" in words
    assert _status(html, "compiles-per-batch") == "holds"
    assert _status(html, "no-spills") == "holds"
    assert _status(html, "constexpr-width-pays") == "holds"  # every-size runtime is 30% slower
    assert 'id="specialization-code"' in html and 'id="specialization-compiles"' in html
    assert "every call compiled" not in words or "none compiled" in words  # both cells come from the meta
    assert "Registers / thread" in words and "Compilations" in words


def test_a_spill_in_the_run_contradicts_the_no_spill_claim(tmp_path) -> None:
    out = _site(tmp_path, synthstudies.specialization_doc(SPEC, "2026-12-01T00:00:00Z", spills=12))
    html = (out / "specialization.html").read_text()
    assert _status(html, "no-spills") == "contradicted"


def test_specialization_page_without_a_run_says_so(tmp_path) -> None:
    out = _site(tmp_path)
    words = _words((out / "specialization.html").read_text())
    assert "No run yet." in words and "No specialization run is in force" in words


def test_rmsnorm_page_shows_the_fused_backward(tmp_path) -> None:
    out = _site(tmp_path, synthstudies.rmsnorm_doc("rmsnorm-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"))
    html = (out / "rmsnorm.html").read_text()
    _clean(html)
    assert 'id="rmsnorm-fused"' in html
    assert _status(html, "fused-backward") == "holds"  # the synthetic fused step is 20% faster
