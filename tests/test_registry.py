"""One registry drives the site, the bench and the tests (contract/studies.py).

A study registered with one line and given its three files (``bench/studies/<op>.py``, a page
spec ``publish/pages/<op>.py`` and ``templates/<op>.md.j2``) gets a page, a nav entry, a line
on Home, its comparisons followed on Stability and Compare, and ``bench`` knows it, with no
other file touched.  Labels come from the run files; a target whose case is missing has no
data."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import synthruns
from sitekit import ROOT

import bench.studies
import publish.pages
from contract import studies
from contract.labels import LABELS_SINCE, LEGACY_LABELS, variant_label
from contract.schema import RunFileError
from publish.pages import nav, pages, study_pages
from publish.site import _configured_site_url, build, load_site_data, render

STUDY = "toynorm"
LABELS = {"triton": "Toy Triton kernel (ours)", "torch": "torch.nn.functional.rms_norm", "liger": "Liger RMSNorm"}

# The three files a new study adds (written into a scratch import path and project here).
BENCH_STUDY = '''
"""A toy row-normalisation study: only its declarations matter to the registry test."""

import torch

from bench.studies import Variant


class ToyNorm:
    name = "toynorm"
    directions = ("fwd",)

    def cases(self, quick):
        return [{"op": "toynorm", "direction": "fwd", "dtype": "bf16", "rows": r, "cols": c}
                for r, c in ((32, 127), (4096, 4096))]

    def variants(self, case):
        norm = lambda t: (t["x"] * torch.rsqrt((t["x"].float() ** 2).mean(-1, keepdim=True)).to(t["x"].dtype),)
        return [Variant("triton", "Toy Triton kernel (ours)", lambda c: norm),
                Variant("torch", "torch.nn.functional.rms_norm", lambda c: norm)]

    def inputs(self, case, device, gen):
        return {"x": torch.randn((case["rows"], case["cols"]), generator=gen, device=device).to(torch.bfloat16)}

    def reference(self, case, inputs):
        x = inputs["x"].double()
        return (x * torch.rsqrt((x**2).mean(-1, keepdim=True)),)

    def traffic(self, case):
        return 4 * case["rows"] * case["cols"], 4 * case["rows"] * case["cols"]

    def tolerance(self, case):
        return 1e-2

    def case_id(self, case):
        return f"fwd/bf16/{case['rows']}x{case['cols']}"


STUDY = ToyNorm()
'''

PAGE_SPEC = '''
"""The toy study's page, declared."""

from publish.numbers import definition
from publish.studypage.claims import eager_flips
from publish.studypage.spec import Bandwidth, Case, CopyShare, NoSlower, Speedups, StudyPage, Target

PAGE = StudyPage(
    study="toynorm",
    title="Toy norm",
    summary="a toy row normalisation against two peers",
    ours="triton",
    peers=("torch", "liger"),
    charts=(Speedups("fwd"), Bandwidth("fwd", ("triton", "torch", "liger"))),
    targets=(
        Target("target-torch-4096x4096", NoSlower("torch"), Case("fwd", "bf16", 4096, 4096)),
        Target("target-copy-8x1048576", CopyShare(definition(80, "pct", "target")), Case("fwd", "bf16", 8, 1048576)),
    ),
    observations=(eager_flips,),
)
'''

TEMPLATE = """{% import "partials/study.html.j2" as study with context %}
{% import "partials/chart.html.j2" as chart %}
{% import "partials/claim.html.j2" as claim %}
# Toy norm

## The answer

{% call study.decision_card() %}Nothing: it is a toy.{% endcall %}

{{ study.answer("toynorm-fwd-speedup") }}
<dl class="lab-terms" markdown="0">
{{ study.term("device-time") }}
{{ study.term("eager-call") }}
{{ study.term("unresolved") }}
{{ study.term("l2") }}
</dl>

## Targets

{{ study.targets_list() }}

## Losses

{{ study.losses_list() }}

## Results by direction and dtype

{{ study.sections_list() }}

{% if "toynorm-fwd-bw-cold" in charts %}
{{ chart.render(charts["toynorm-fwd-bw-cold"]) }}
{% endif %}

## Observations

{% for o in observations %}
{{ claim.render(o) }}
{% endfor %}

## Method

{{ study.runs_list() }}
"""


def medians(l2: str, rows: int, cols: int) -> dict[str, float | str]:
    """Ours 10 µs (20 at the large shape), torch slower, Liger faster where it runs."""
    ours = 10.0 if cols < 1000 else 20.0
    return {"triton": ours, "torch": ours * 1.5, "liger": "refused: toy limit" if cols < 1000 else ours * 0.8}


@pytest.fixture
def registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A project with the toy study's three files and its one registry line; two repeat runs
    of it stored (one clean commit on one GPU: the Stability page follows them)."""
    code = tmp_path / "code"
    for package in ("pages", "studies"):
        (code / package).mkdir(parents=True)
    (code / "pages" / f"{STUDY}.py").write_text(PAGE_SPEC)
    (code / "studies" / f"{STUDY}.py").write_text(BENCH_STUDY)
    root = synthruns.project(tmp_path)
    (root / "templates" / f"{STUDY}.md.j2").write_text(TEMPLATE)
    # The registry line; the files are found where publish/pages and bench/studies are.
    monkeypatch.setattr(studies, "REGISTRY", (*studies.REGISTRY, studies.StudyEntry(STUDY)))
    monkeypatch.setattr(publish.pages, "__path__", [*publish.pages.__path__, str(code / "pages")])
    monkeypatch.setattr(bench.studies, "__path__", [*bench.studies.__path__, str(code / "studies")])
    for i, day in enumerate(("01", "02")):
        run_id = f"{STUDY}-202612{day}T000000Z-{'ab'[i] * 7}"
        synthruns.write(root, synthruns.comparison_doc(STUDY, run_id, f"2026-12-{day}T00:00:00Z", medians, LABELS))
    yield root
    for module in (f"publish.pages.{STUDY}", f"bench.studies.{STUDY}"):
        sys.modules.pop(module, None)


def _nav(html: str) -> list[str]:
    """The pages the primary nav links to, in order."""
    found = re.findall(r'<a href="([\w-]+\.html)" class="md-nav__link', html)
    return list(dict.fromkeys(found))


def _status(html: str, claim_id: str) -> str:
    m = re.search(rf'id="claim-{re.escape(claim_id)}"[^>]*><span class="lab-status">([\w ]+)<', html)
    assert m, f"no claim {claim_id}"
    return m.group(1)


def test_a_registered_study_gets_its_page_nav_home_stability_and_compare(registered: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    report = build(registered, out)
    # The page list the tests walk is the registry's, the new study in its place.
    outputs = [p.output for p in pages()]
    assert outputs.index("dispatch.md") < outputs.index(f"{STUDY}.md") < outputs.index("stability.md")
    assert sorted(report.pages) == sorted([*outputs, "review.md"])
    html = (out / f"{STUDY}.html").read_text()
    tables = ("summary", "fwd-bf16", "fwd-bf16-eager", "fwd-bf16-times", "losses", "fwd-speedup", "fwd-bw-cold")
    for anchor in [f"{STUDY}-{t}" for t in tables] + ["claim-eager-agrees"]:
        assert f'id="{anchor}"' in html, anchor
    # The nav: generated from the registry at build time (mkdocs.yml names no page).
    assert _nav((out / "index.html").read_text()) == [next(iter(e.values())).replace(".md", ".html") for e in nav()]
    assert f"{STUDY}.html" in _nav(html)
    assert not re.search(r"^nav:", (ROOT / "mkdocs.yml").read_text(), re.M)
    # Home lists it; Stability follows its comparisons and its noise floor; Compare its two runs.
    home = (out / "index.html").read_text()
    assert f'href="{STUDY}.html"' in home and "a toy row normalisation against two peers" in home
    stability = json.loads((out / "tables" / "stability-suites.json").read_text())
    suites = [row["cells"]["suite"]["text"] for row in stability["rows"]]
    assert f"{STUDY} fwd" in suites
    floors = json.loads((out / "tables" / "stability-noise-floor.json").read_text())
    assert STUDY in [row["cells"]["study"]["text"] for row in floors["rows"]]
    assert f'id="compare-{STUDY}"' in (out / "compare.html").read_text()


def test_a_study_page_takes_its_labels_from_the_run_files(registered: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    build(registered, out)
    summary = (out / "tables" / f"{STUDY}-summary.csv").read_text()
    assert "torch.nn.functional.rms_norm" in summary and "Liger RMSNorm" in summary
    times = (out / "tables" / f"{STUDY}-fwd-bf16-times.csv").read_text().splitlines()[0]
    assert all(label in times for label in LABELS.values())
    losses = (out / "tables" / f"{STUDY}-losses.csv").read_text()
    assert "Liger RMSNorm" in losses  # the peer that won, by its label


def test_a_target_whose_case_is_missing_has_no_data(registered: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    report = build(registered, out)
    html = (out / f"{STUDY}.html").read_text()
    assert _status(html, "target-torch-4096x4096") == "met"  # measured: 1.50× faster
    assert _status(html, "target-copy-8x1048576") == "no data"  # neither met nor missed
    assert "No data: no run in force measured 8×1048576 (cold, warm L2)." in html
    assert "1 met, 0 missed, 1 with no data" in html  # the decision card counts it apart
    lines = report.lines()
    assert any(line.startswith(f"target with no data on {STUDY}.md: target-copy-8x1048576") for line in lines)
    assert not any("target missed on" in line and STUDY in line for line in lines)


def test_a_softmax_target_whose_case_is_missing_has_no_data(tmp_path: Path) -> None:
    """The softmax page, from a run without the 1000×50257 case: that target has no data, its
    neighbour on a measured shape is decided, each shape written as the data hold it."""
    root = synthruns.project(tmp_path)
    shapes = tuple(s for s in synthruns.SOFTMAX_SHAPES if s != (1000, 50257))
    synthruns.write(root, synthruns.softmax_doc("softmax-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z",
                                                shapes=shapes))  # fmt: skip
    page = render(root, load_site_data(root), _configured_site_url(root)).pages["softmax.md"]
    assert _status(page, "target-torch-1000x50257") == "no data"
    assert "No data: no run in force measured 1000×50257 (cold, warm L2)." in page
    assert _status(page, "target-torch-4096x50257") in ("met", "missed")


def test_bench_knows_a_registered_study(registered: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.cli import main

    study = bench.studies.load(STUDY)
    assert [v.label for v in study.variants({})] == [LABELS["triton"], LABELS["torch"]]
    assert main(["list"]) == 0
    assert f"{STUDY}: 4 cases (2 shapes × 2 L2 modes" in capsys.readouterr().out


def test_the_registry_is_the_one_list() -> None:
    """Bench, the site's pages and their specs name the same studies in the same order."""
    names = studies.names()
    assert [s.study for s in study_pages()] == list(names)
    assert [p.output for p in pages() if p.output.removesuffix(".md") in names] == [f"{n}.md" for n in names]
    for name in names:
        assert bench.studies.load(name).name == name
        assert (ROOT / "templates" / f"{name}.md.j2").is_file()


def test_bench_never_imports_the_site() -> None:
    """The measuring side imports the contract, never the site's pages or build."""
    code = (
        "import sys, bench.cli, bench.harness, bench.runfile, bench.studies, bench.studies.dispatch; "
        "site = sorted(m for m in sys.modules if m == 'publish.site' or m.startswith(('publish.pages', "
        "'publish.studypage', 'jinja2', 'mkdocs'))); print(site); sys.exit(bool(site))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_older_run_files_read_their_labels_from_the_contract(registered: Path) -> None:
    """A file of schema < 4 has no labels: the contract's table names its variants; from
    schema 4 a variant without its label is refused, naming the field."""
    assert variant_label("softmax", LABELS_SINCE - 1, "compile", {}) == LEGACY_LABELS["softmax"]["compile"]
    assert variant_label("softmax", LABELS_SINCE, "compile", {"label": "torch.compile, max-autotune"}) == (
        "torch.compile, max-autotune"
    )
    assert variant_label("rowgrid", 2, "looped-4096", {}) == "plan looped-4096"
    assert variant_label("dispatch", 2, "ours/call", {"meta": {"label": "kernels.softmax(x)"}}) == "kernels.softmax(x)"
    path = next((registered / "data" / "runs" / STUDY).glob("*.json"))
    doc = json.loads(path.read_text())
    del doc["cases"][0]["variants"]["torch"]["label"]
    path.write_text(json.dumps(doc))
    with pytest.raises(RunFileError, match=r"cases\[0\]\.variants\.torch\.label: missing required field"):
        load_site_data(registered)
