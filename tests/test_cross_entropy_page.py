"""The cross-entropy page from a synthetic run: its time-and-memory tables read each variant's
meta, its targets (time against Liger, the in-place peak) and its observations are decided by
the data (a planted case flips each), and a reader sees no markup or reprs; with no run, it
says so.  And the study itself on the CPU: every variant we can run passes the harness's
float64 check on a tiny case, and its meta says memory was not measured there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import synthstudies
import torch
from test_study_pages import _clean, _site, _status, _words

RUN = "cross_entropy-20261201T000000Z-aaaaaaa"
STARTED = "2026-12-01T00:00:00Z"


@pytest.fixture(scope="module")
def ce_site(tmp_path_factory) -> Path:
    return _site(tmp_path_factory.mktemp("ce"), synthstudies.cross_entropy_doc(RUN, STARTED))


def test_cross_entropy_page_shows_time_and_memory_and_decides_its_claims(ce_site) -> None:
    html = (ce_site / "cross_entropy.html").read_text()
    _clean(html)
    words = _words(html)
    # The page's own operator goes unsaid in its targets: "8192×128256 bf16 …", not "cross_entropy 8192×…".
    assert "8192×128256 bf16 training step" in words and not re.search(r"(?<![.\w])cross_entropy \d", words)
    for table in ("cross_entropy-memory-fwdbwd", "cross_entropy-memory-fwd", "cross_entropy-variations"):
        assert f'id="{table}"' in html, table
    assert 'id="cross_entropy-summary"' in html or "Decision card." in words
    assert "Time and peak memory side by side" in words and "Peak MiB" in words
    # 8192 x 128256 bf16: the logits are 2004 MiB; in place adds 40 bytes per token, a new buffer one more logits
    assert "2,004 MiB" in words or "2,004" in words
    assert _status(html, "target-liger-step-8192x128256") == "met"  # ours at 0.65 of Liger's time
    assert _status(html, "target-memory-step-8192x128256") == "met"
    assert _status(html, "inplace-memory-everywhere") == "holds"
    assert _status(html, "inplace-costs-no-time") == "holds"
    # torch.compile wins the 4096 x 32000 step on time, holding a second copy of the logits there
    assert _status(html, "time-for-memory") == "holds"
    assert "refused" in words  # QuACK on 50257 and the variations
    assert _status(html, "liger-gradient") == "observed" and "release 0.8.5, written over the logits" in words
    assert "No run yet." not in words


def test_planted_cases_flip_the_targets_and_the_trade(tmp_path) -> None:
    doc = synthstudies.cross_entropy_doc(RUN, STARTED, liger_share=0.8, inplace_per_token=4096, compile_lean=True)
    html = (_site(tmp_path, doc) / "cross_entropy.html").read_text()
    _clean(html)
    assert _status(html, "target-liger-step-8192x128256") == "missed"
    assert _status(html, "target-memory-step-8192x128256") == "missed"
    assert _status(html, "inplace-memory-everywhere") == "contradicted"
    # compile now wins on time with less memory than ours' new buffer: the trade does not hold
    assert _status(html, "time-for-memory") == "contradicted"


def test_cross_entropy_page_without_a_run_says_so(tmp_path) -> None:
    words = _words((_site(tmp_path) / "cross_entropy.html").read_text())
    assert "No run yet." in words and "No cross-entropy run is in force" in words
    assert "No data" in words  # each target, its case unmeasured


def test_the_study_checks_its_variants_on_the_cpu(device) -> None:
    """bench/studies/cross_entropy.py on tiny cases: ours (both modes) and the torch peers
    pass the harness's float64 check, in-place variants read their own logits (the check
    inputs stay intact for the others), and the meta records the logits' size and, on the
    CPU, that memory was not measured."""
    from bench.harness import compare
    from bench.studies import Refused
    from bench.studies.cross_entropy import IGNORE, OPS, STUDY

    for op, direction in (("cross_entropy", "fwd"), ("cross_entropy", "fwd+bwd"), ("cross_entropy_softcap", "fwd+bwd")):
        case = {"op": op, "direction": direction, "dtype": "bf16", "rows": 40, "cols": 203, **OPS[op]}
        inputs = STUDY.inputs(case, device, torch.Generator(device=device).manual_seed(0))
        assert (inputs["target"] == IGNORE).any()
        before = inputs["x"].detach().clone()
        refs = STUDY.reference(case, inputs)
        ran = []
        for v in STUDY.variants(case):
            if v.name == "compile":  # Inductor on the CPU takes tens of seconds a case; the GPU run checks it
                continue
            try:
                step = v.build(case)
            except Refused:
                assert v.name in ("liger", "quack")  # not installed here
                continue
            check = compare(step(inputs), refs, STUDY.tolerance(case))
            assert check["passed"], (case, v.name, check)
            ran.append(v.name)
            if v.name in ("triton", "triton-inplace"):
                meta = v.meta(case)
                assert meta["logits_bytes"] == 40 * 203 * 2
                if device.type == "cpu":
                    assert meta["memory"].startswith("not measured")
        assert torch.equal(inputs["x"].detach(), before)  # nobody wrote over the shared logits
        expected = {"triton", "triton-inplace", "torch"} if direction == "fwd+bwd" else {"triton", "torch"}
        assert expected <= set(ran), ran
    ids = [STUDY.case_id(c) for c in STUDY.cases(quick=False)]
    assert len(ids) == len(set(ids))
    assert "fwd+bwd/bf16/8192x128256" in ids and "softcap/fwd+bwd/bf16/8192x128256" in ids
