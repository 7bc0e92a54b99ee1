"""The RMSNorm and the row sum / vector add pages (issue 8), built from synthetic runs in
scratch projects (tests/synthstudies.py) and from none: targets evaluate, a missing case has
no data, a warm win that is only L2 residency is marked from the numbers, the visible text
holds no markup or reprs, and the bench modules' cases hold what the registry says."""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path

import pytest
import synthruns
import synthstudies

from contract import studies
from publish.site import build

RMS = "rmsnorm-20261201T000000Z-aaaaaaa"
ROWS = "rowsum_add-20261201T000000Z-aaaaaaa"
# What must never reach a reader (as tests/test_browser.py's LEFTOVERS, on the page's words).
LEFTOVERS = re.compile(r"\{\{|\}\}|\{%|%\}|object at 0x|Markup\(|Num\(|Text\(|Source\(|\bNone\b|\bnan\b|Undefined|[<>]")


def _status(html: str, claim_id: str) -> str:
    m = re.search(rf'id="claim-{re.escape(claim_id)}"[^>]*><span class="lab-status">([\w ]+)<', html)
    assert m, f"no claim {claim_id}"
    return m.group(1)


def _words(html: str) -> str:
    """The article's visible words (the citation blocks hold Markdown and BibTeX on purpose)."""
    article = html[html.index("<article") : html.index("</article>")]
    article = re.sub(r'<details class="lab-cite.*?</details>', " ", article, flags=re.S)
    article = re.sub(r"<script.*?</script>|<div class=\"lab-chart.*?</div>", " ", article, flags=re.S)
    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", article)).split())


def _clean(html: str) -> None:
    words = _words(html)
    assert [words[max(0, m.start() - 40) : m.end() + 40] for m in LEFTOVERS.finditer(words)] == []


def _site(tmp: Path, rms: dict | None, rows: dict | None) -> Path:
    root = synthruns.project(tmp)
    for doc in (rms, rows):
        if doc is not None:
            synthruns.write(root, doc)
    out = tmp / "site"
    build(root, out)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("studies")
    rms = synthstudies.rmsnorm_doc(RMS, "2026-12-01T00:00:00Z")
    rows = synthstudies.rowsum_add_doc(ROWS, "2026-12-01T00:00:00Z")
    return _site(tmp, rms, rows)


def test_both_studies_are_registered_with_the_params_their_cases_hold() -> None:
    """Every case the bench modules write holds the parameters the registry says their pages
    read, ids are unique, and a peer's name has one label across each study (ours, "triton",
    is labelled per operator: the pages read its label from the cases they show)."""
    import bench.studies

    for name in ("rmsnorm", "rowsum_add"):
        entry = studies.entry(name)
        assert entry is not None and entry.checked
        study = bench.studies.load(name)
        for quick in (False, True):
            cases = study.cases(quick)
            assert len({study.case_id(c) for c in cases}) == len(cases)
            labels: dict[str, str] = {}
            for case in cases:
                assert {"op", "direction", "dtype", *entry.params} <= set(case), (name, case)
                assert all(isinstance(case[p], int) and case[p] > 0 for p in entry.params)
                for v in study.variants(case):
                    assert v.name == "triton" or labels.setdefault(v.name, v.label) == v.label, (name, v.name)


def test_pages_with_no_run_say_so_plainly(tmp_path) -> None:
    out = _site(tmp_path, None, None)
    for page, words in (("rmsnorm", "No RMSNorm run is in force"), ("rowsum_add", "No row sum or vector add run")):
        html = (out / f"{page}.html").read_text()
        assert words in _words(html) and "No run yet." in _words(html)
        assert 'class="lab-table' not in html and 'class="lab-chart' not in html  # no empty tables or charts
        assert "Decision card" not in html
        targets = re.findall(r'id="claim-(target-[^"]+)"', html)
        assert targets and all(_status(html, t) == "no data" for t in targets)
        _clean(html)
    home = _words((out / "index.html").read_text())
    assert "Residual RMSNorm" in home and "Row sum and vector add" in home and "No run in force yet" in home


def test_rmsnorm_page_evaluates_its_targets_from_the_run(site) -> None:
    html = (site / "rmsnorm.html").read_text()
    _clean(html)
    assert _status(html, "target-copy-16384x4096") == "met"  # 92% of the copy, both L2 modes
    assert _status(html, "target-liger-16384x4096") == "met"
    assert _status(html, "target-quack-16384x4096") == "met"
    assert _status(html, "target-copy-64x131072-cold") == "met"
    assert _status(html, "target-quack-64x131072-cold") == "missed"  # QuACK reads a wide row once
    assert _status(html, "target-step-16384x4096") == "met"
    assert _status(html, "target-eager-liger") == "met"
    assert "one read per row" in html  # the QuACK loss, explained
    # Labels come from the run file, not from the page spec.
    summary = (site / "tables" / "rmsnorm-summary.csv").read_text()
    assert "F.rms_norm after the add" in summary and "torch.compile(eager composition)" in summary
    plans = json.loads((site / "tables" / "rmsnorm-plans.json").read_text())
    assert [c["label"] for c in plans["columns"]][2:5] == [
        synthstudies.RMSNORM_LABELS[v] for v in ("triton", "triton-looped", "triton-split")
    ]
    assert _status(html, "split-wins-few-rows") == "holds"  # 64 rows, fewer than the run's 132 SMs


def test_rmsnorm_target_whose_case_is_missing_has_no_data(tmp_path) -> None:
    shapes = tuple(s for s in synthstudies.RMSNORM_SHAPES if s != (64, 131072))
    out = _site(tmp_path, synthstudies.rmsnorm_doc(RMS, "2026-12-01T00:00:00Z", shapes=shapes), None)
    html = (out / "rmsnorm.html").read_text()
    assert _status(html, "target-copy-64x131072-cold") == "no data"
    assert _status(html, "target-quack-64x131072-cold") == "no data"
    assert "No data: no run in force measured 64×131072 (cold L2)." in html
    assert _status(html, "target-copy-16384x4096") == "met"
    assert re.search(r"\d+ met, \d+ missed, 2 with no data", html)


def test_rowsum_add_page_marks_warm_wins_that_are_l2_residency(site) -> None:
    """Each row of the warm-against-cold tables says, from its own numbers, whether the warm
    result is above the DRAM copy of its run, and whether a warm win survives cold L2."""
    html = (site / "rowsum_add.html").read_text()
    _clean(html)
    copy = synthstudies.COPY
    marked = 0
    for table in ("rowsum_add-add-bf16", "rowsum_add-rowsum-bf16"):
        doc = json.loads((site / "tables" / f"{table}.json").read_text())
        for row in doc["rows"]:
            cells = row["cells"]
            reads = cells["reads"]["text"]
            warm = cells["warm"]["value"]
            if warm > copy:
                assert reads.startswith(("L2 residency", "warm win is L2 residency")), (table, reads)
                marked += 1
            else:
                assert reads.startswith("not above the DRAM copy"), (table, reads)
    assert marked == 2  # 4194305 elements and 1024×4096: inside the L2 when warm
    rows = {r["cells"]["size"]["text"]: r["cells"] for r in json.loads((site / "tables" / "rowsum_add-add-bf16.json")
                                                                        .read_text())["rows"]}  # fmt: skip
    assert rows["4194305"]["reads"]["text"].startswith("warm win is L2 residency")  # a tie when cold
    assert rows["257"]["cold_from"]["text"] == "fit in L2"
    assert _status(html, "warm-above-dram") == "holds" and _status(html, "warm-win-is-residency") == "holds"
    # The add and the row sum of 1×257 are different cases, each in its own table, each labelled as run.
    sums = json.loads((site / "tables" / "rowsum_add-rowsum-bf16.json").read_text())
    assert "1×257" in [r["cells"]["size"]["text"] for r in sums["rows"]]
    assert "vs torch.sum(x, -1), warm" in [c["label"] for c in sums["columns"]]
    assert "vs torch.add, warm" in [c["label"] for c in json.loads(
        (site / "tables" / "rowsum_add-add-bf16.json").read_text())["columns"]]  # fmt: skip
    for chart in ("rowsum_add-add-residency", "rowsum_add-rowsum-residency"):
        assert f'id="{chart}"' in html


def test_rowsum_add_targets_name_their_operator_and_evaluate(site, tmp_path) -> None:
    html = (site / "rowsum_add.html").read_text()
    assert _status(html, "target-copy-add-1x16777216-cold") == "met"  # 98% of the copy less the launch
    assert _status(html, "target-copy-rowsum-16x1048576-cold") == "missed"  # the wide row sum at 80%
    assert "add 1×16777216 bf16 forward, cold L2, at least 95.0% of the copy bandwidth" in _words(html)
    # Without the 16M add, its target has no data; the row sum's of the same run still evaluate.
    doc = synthstudies.rowsum_add_doc(ROWS, "2026-12-01T00:00:00Z", add_sizes=(257, 4194305))
    out = _site(tmp_path, None, doc)
    other = (out / "rowsum_add.html").read_text()
    assert _status(other, "target-copy-add-1x16777216-cold") == "no data"
    assert _status(other, "target-copy-rowsum-4096x4096-cold") in ("met", "missed")
