"""The site build, end to end from the stored runs, and with deliberately broken data."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
import synthruns
import yaml
from sitekit import ROOT, edit, newest, scratch_root

from contract.schema import RunFileError
from publish.export import csv_cell
from publish.pages import nav, pages, study_pages
from publish.results import StudyResults
from publish.runs import load_runs, strict_copy
from publish.site import BuildError, build

PAGES = [p.output for p in pages()] + ["review.md"]  # the registry, and the review page built from it


@pytest.fixture(scope="module")
def built(stored_site) -> Path:
    assert sorted(stored_site.report.pages) == sorted(PAGES)
    return stored_site.path


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.nums: list[dict[str, str]] = []
        self.ids: set[str] = set()
        self.scripts: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:  # type: ignore[no-untyped-def]
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "a" and "num" in (a.get("class") or "").split():
            self.nums.append(a)
        loads = tag in ("script", "img", "iframe") or (tag == "link" and a.get("rel") != "canonical")
        url = a.get("src") or a.get("href") or ""
        if loads and url.startswith(("http:", "https:", "//")):
            self.scripts.append(url)


def parse(path: Path) -> Links:
    p = Links()
    p.feed(path.read_text())
    return p


def test_every_page_and_raw_run_is_built(built) -> None:
    for page in [p.replace(".md", ".html") for p in PAGES] + ["assets/plotly.min.js"]:
        assert (built / page).is_file(), page
    for run in load_runs(ROOT / "data"):  # the file as bench wrote it (older files made strict JSON)
        copied = built / "runs" / run.study / run.path.name
        assert copied.read_bytes() == strict_copy(run)
        assert copied.read_bytes() == run.path.read_bytes() or run.legacy_literals


def test_every_number_links_to_a_run_entry_on_the_sources_page(built) -> None:
    sources = parse(built / "sources.html").ids
    runs = load_runs(ROOT / "data")
    run_ids = {r.run_id for r in runs}
    # A registered study with no stored run yet (its GPU runs come later) has a page of prose
    # and targets with no data: no number to link (tests/test_study_pages.py checks it).
    unmeasured = {f"{s.study}.md" for s in study_pages()} - {f"{r.study}.md" for r in runs}
    for page in [p.output.replace(".md", ".html") for p in pages() if p.output not in ("sources.md", *unmeasured)]:
        nums = parse(built / page).nums
        assert nums, f"{page} shows no linked numbers"
        for a in nums:
            assert a["data-run"] in run_ids
            assert a["href"] == f"sources.html#run-{a['data-run']}"
            assert f"run-{a['data-run']}" in sources
            assert f"run {a['data-run']}" in a["title"]


def test_nothing_is_loaded_from_outside_the_site(built) -> None:
    for page in built.glob("*.html"):
        assert parse(page).scripts == [], page.name
        assert "fonts.googleapis" not in page.read_text()


def test_softmax_page_states_targets_losses_and_decision(built) -> None:
    text = (built / "softmax.html").read_text()
    for anchor in (
        "softmax-fwd-bf16",
        "softmax-fwdbwd-bf16",
        "softmax-plans",
        "softmax-losses",
        "claim-target-liger-16384x4096",
        "claim-target-eager-liger",
        "softmax-fwd-bw-cold",
    ):
        assert f'id="{anchor}"' in text, anchor
    assert "Decision card" in text and re.search(r"lab-status\">(met|missed)<", text)


@pytest.fixture
def scratch(tmp_path, stored_site) -> tuple[Path, Path]:
    """A project holding the stored softmax runs (the pages of the other studies have none),
    and a previous site in ``out`` (the stored runs' site, marked) that a failed build must
    leave as it was."""
    root = scratch_root(tmp_path, studies=("softmax",))
    out = tmp_path / "site"
    shutil.copytree(stored_site.path, out)
    (out / "marker").write_text("previous build")
    return root, out


def _fails(root: Path, out: Path, file: Path, field: str) -> RunFileError:
    with pytest.raises(RunFileError) as info:
        build(root, out)
    err = info.value
    assert file.name in err.source, err
    assert field in err.field, err
    assert (out / "marker").read_text() == "previous build", "the previous site must stay intact"
    assert not list((root / ".build").glob("staging-*")), "no staging left behind"
    return err


def test_truncated_json(scratch) -> None:
    root, out = scratch
    f = newest(root)
    f.write_text(f.read_text()[:5000])
    err = _fails(root, out, f, "(file)")
    assert "not valid JSON" in err.problem


def test_unknown_schema_version(scratch) -> None:
    root, out = scratch
    f = newest(root)
    edit(f, lambda d: d.update(schema_version=99))
    assert "unknown schema version 99" in _fails(root, out, f, "schema_version").problem


def test_missing_field(scratch) -> None:
    root, out = scratch
    f = newest(root)
    edit(f, lambda d: d["env"]["peaks"].pop("copy_GBps"))
    assert "missing" in _fails(root, out, f, "env.peaks.copy_GBps").problem


@pytest.mark.parametrize("bad", [float("nan"), -3.0, 0.0, "fast"])
def test_bad_samples(scratch, bad) -> None:
    root, out = scratch
    f = newest(root)
    edit(f, lambda d: d["cases"][2]["variants"]["triton"]["samples_us"].__setitem__(4, bad))
    err = _fails(root, out, f, "cases[2].variants.triton.samples_us[4]")
    assert "positive finite number" in err.problem


def test_duplicate_run_id(scratch) -> None:
    root, out = scratch
    f = newest(root)
    twin = f.with_name("copy.json")
    shutil.copy(f, twin)
    edit(twin, lambda d: None)
    _fails(root, out, twin, "run_id")


def test_duplicate_case_and_inconsistent_error(scratch) -> None:
    root, out = scratch
    f = newest(root)
    edit(f, lambda d: d["cases"].append(d["cases"][0]))
    assert "duplicate case id" in _fails(root, out, f, "cases[").problem
    edit(f, lambda d: d["cases"].pop())
    edit(f, lambda d: d["cases"][0]["variants"]["triton"].update(error="boom"))
    # (a schema-2 file names its eager samples first: both lists must be empty beside an error)
    assert "although the variant records an error" in _fails(root, out, f, "variants.triton.").problem


def test_stray_file_in_runs(scratch) -> None:
    root, out = scratch
    stray = root / "data" / "runs" / "softmax" / "notes.txt"
    stray.write_text("hello")
    _fails(root, out, stray, "(file)")


def test_run_file_strings_are_escaped(scratch) -> None:
    root, out = scratch
    f = newest(root)
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    edit(
        f,
        lambda d: (
            d["env"]["gpu"].update(name=evil),
            d.update(note=evil),
            d["cases"][0]["variants"]["liger"].update(error=evil, samples_us=[], eager_us=[]),
        ),
    )
    build(root, out)
    for page in out.glob("*.html"):
        text = page.read_text()
        assert "<script>alert" not in text and "<img src=x" not in text, page.name
    assert "&lt;script&gt;alert" in (out / "sources.html").read_text()


def test_build_is_fast_and_reports_what_it_built(stored_site) -> None:
    report = stored_site.report
    # A guard against a pathological build, not a benchmark: about 35 s on this 2-core machine
    # on 2026-12-02 (the review record evaluates every earlier set of runs again, and the
    # row-plan grid fits 1152 policies per grid run).
    assert report.seconds < 240
    lines = "\n".join(report.lines())
    assert f"built {len(PAGES)} pages" in lines and "softmax.md" in lines
    doc = json.loads(newest(ROOT).read_text())
    assert doc["run_id"] in (stored_site.path / "sources.html").read_text()


# ----------------------------------------------------------------------------- claims and numbers


DRAM_BOUND = "fwd/bf16/16384x4096/cold"  # the case of the dram-bound-tie claim


def _make_liger_faster(doc: dict) -> None:
    for case in doc["cases"]:
        if case["id"] == DRAM_BOUND:
            case["variants"]["liger"]["samples_us"] = [s / 2 for s in case["variants"]["triton"]["samples_us"]]


def test_contradicted_claim_is_reported_shown_and_fails_strict(scratch) -> None:
    root, out = scratch
    edit(newest(root, holding=DRAM_BOUND), _make_liger_faster)
    report = build(root, out)
    contradicted = {c.id for _, c in report.contradicted}
    assert "dram-bound-tie" in contradicted
    assert any("CLAIM CONTRADICTED on softmax.md: dram-bound-tie" in line for line in report.lines())
    page = (out / "softmax.html").read_text()
    assert re.search(r'id="claim-dram-bound-tie"[^>]*><span class="lab-status">contradicted', page)
    assert "dram-bound-tie" in (out / "review.html").read_text()
    (out / "marker").write_text("previous build")
    with pytest.raises(BuildError, match=r"--strict: the data contradict .*softmax\.md:dram-bound-tie"):
        build(root, out, strict=True)
    assert (out / "marker").read_text() == "previous build"


def test_claim_history_dates_each_change(scratch) -> None:
    root, out = scratch
    edit(newest(root, holding=DRAM_BOUND), _make_liger_faster)
    build(root, out)
    review = (out / "review.html").read_text()
    newest_id = json.loads(newest(root, holding=DRAM_BOUND).read_text())["run_id"]
    row = re.search(
        r"<tr>\s*<td>[^<]+</td>\s*<td>softmax</td>\s*<td><code>dram-bound-tie</code></td>\s*"
        r"<td>holds → <strong>contradicted</strong></td>.*?</tr>",
        review,
        re.S,
    )
    assert row and newest_id in row.group(0)


def test_number_typed_into_a_template_stops_the_build(scratch) -> None:
    root, out = scratch
    tpl = root / "templates" / "softmax.md.j2"
    tpl.write_text(tpl.read_text().replace("## Observations", "Liger took 68.5 µs here.\n\n## Observations"))
    with pytest.raises(BuildError) as info:
        build(root, out)
    assert "softmax.md" in str(info.value) and "68.5 µs" in str(info.value)
    assert (out / "marker").read_text() == "previous build"


# ----------------------------------------------------------------------------- withdrawals


def test_withdrawn_run_leaves_the_pages_and_enters_the_record(scratch) -> None:
    root, out = scratch
    victim = json.loads(newest(root).read_text())["run_id"]
    with open(root / "data" / "withdrawn.yaml", "a") as f:
        f.write(f"- run_id: {victim}\n  date: 2026-11-30\n  reason: A test withdrawal.\n")
    build(root, out)
    for page in ("softmax.html", "index.html", "stability.html"):
        assert f'data-run="{victim}"' not in (out / page).read_text(), page
    review = (out / "review.html").read_text()
    assert f'id="withdrawn-{victim}"' in review and "A test withdrawal." in review
    assert victim in (out / "sources.html").read_text()  # the raw file stays reachable
    assert (out / "runs" / "softmax" / f"{victim}.json").is_file()


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ("- run_id: no-such-run\n  date: 2026-11-30\n  reason: x\n", "[{n}].run_id"),
        ("- run_id: {victim}\n  date: soon\n  reason: x\n", "[{n}].date"),
        ("- run_id: {victim}\n  date: 2026-11-30\n", "[{n}].reason"),
    ],
)
def test_malformed_withdrawal_names_the_entry(scratch, entry, field) -> None:
    root, out = scratch
    victim = json.loads(newest(root).read_text())["run_id"]
    n = len(yaml.safe_load((root / "data" / "withdrawn.yaml").read_text()) or [])  # the new entry's index
    with open(root / "data" / "withdrawn.yaml", "a") as f:
        f.write(entry.format(victim=victim))
    with pytest.raises(RunFileError) as info:
        build(root, out)
    assert info.value.source == "data/withdrawn.yaml" and info.value.field == field.format(n=n)
    assert (out / "marker").read_text() == "previous build"


# ----------------------------------------------------------------------------- downloads


def test_every_table_has_matching_csv_and_json(built) -> None:
    tables = sorted((built / "tables").glob("*.json"))
    assert len(tables) >= 10
    for path in tables:
        doc = json.loads(path.read_text())
        rows = list(csv.reader(io.StringIO((built / "tables" / f"{doc['id']}.csv").read_text())))
        assert rows[0] == [c["label"] for c in doc["columns"]] + ["run_ids"]
        assert len(rows) - 1 == len(doc["rows"])
        for csv_row, json_row in zip(rows[1:], doc["rows"], strict=True):
            assert csv_row[:-1] == [csv_cell(json_row["cells"][c["key"]]["text"]) for c in doc["columns"]]
            assert csv_row[-1].split() == json_row["run_ids"]
            assert set(json_row["run_ids"]) <= {r["run_id"] for r in doc["runs"]}
        assert all(r["run_id"] in doc["cite"]["footnote"] and r["run_id"] in doc["cite"]["bibtex"] for r in doc["runs"])
        # A table no run is behind says so; it never cites empty runs, commits or dates.
        cite = doc["cite"]["footnote"] + doc["cite"]["bibtex"]
        assert "(commit )" not in cite and "{}" not in cite and "runs ;" not in cite, cite
        assert bool(doc["runs"]) != ("set, not measured" in doc["cite"]["footnote"]), cite


# ----------------------------------------------------------------------------- synthetic runs: new pages


def _links(page: Path) -> list[dict[str, str]]:
    return parse(page).nums


def _text(html: str) -> str:
    """The page's words: tags removed, entities decoded, white space collapsed."""
    import html as htmllib

    return " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", html)).split()).replace(" ,", ",").replace(" .", ".")


def _claim_status(html: str, claim_id: str) -> str:
    m = re.search(rf'id="claim-{re.escape(claim_id)}"[^>]*><span class="lab-status">([\w ]+)<', html)
    assert m, f"no claim {claim_id}"
    return m.group(1)


def _claim_said(html: str, claim_id: str) -> str:
    """The visible text of one claim (its status word first); ``claim_id`` may end a prefix."""
    m = re.search(rf'id="claim-{re.escape(claim_id)}[^"]*"[^>]*>(.*?)</div>', html, re.S)
    assert m, f"no claim {claim_id}"
    return _text(m.group(1))


def _softmax_page(tmp_path: Path, doc: dict) -> str:
    root = synthruns.project(tmp_path)
    synthruns.write(root, doc)
    build(root, tmp_path / "site")
    return (tmp_path / "site" / "softmax.html").read_text()


def test_pages_build_with_no_runs_at_all(tmp_path) -> None:
    root = synthruns.project(tmp_path)
    report = build(root, tmp_path / "site")
    assert sorted(report.pages) == sorted(PAGES)
    rowgrid = (tmp_path / "site" / "rowgrid.html").read_text()
    assert "No valid grid run is in force" in rowgrid
    assert _claim_status(rowgrid, "target-heldout-regret") == "missed"
    assert "No dispatch run is in force" in (tmp_path / "site" / "dispatch.html").read_text()
    softmax = (tmp_path / "site" / "softmax.html").read_text()
    assert "No softmax case is in force yet" in softmax
    assert "No data: no run in force measured 4096×50257" in softmax  # a target with no case says so
    assert _claim_status(softmax, "target-torch-4096x50257") == "no data"  # neither met nor missed
    assert "row-plan grid: 0 valid runs; a held-out fit needs two" in report.lines()
    for page in ("rmsnorm", "rowsum_add"):  # registered, no run yet: said plainly, targets with no data
        html = (tmp_path / "site" / f"{page}.html").read_text()
        assert "No run yet." in html and 'class="lab-table' not in html
        assert _claim_status(html, re.findall(r'id="claim-(target-[^"]+)"', html)[0]) == "no data"


def test_rowgrid_page_with_one_run_says_the_fit_is_in_sample(tmp_path) -> None:
    root = synthruns.project(tmp_path)
    synthruns.write(root, synthruns.modelled_grid("rowgrid-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"))
    report = build(root, tmp_path / "site")
    html = (tmp_path / "site" / "rowgrid.html").read_text()
    assert "Only one valid grid run is in force" in html
    assert "needs two valid grid runs" in html and _claim_status(html, "target-heldout-regret") == "missed"
    for anchor in ("rowgrid-rules", "rowgrid-policies", "rowgrid-ours", "rowgrid-cells", "rowgrid-best-plan"):
        assert f'id="{anchor}"' in html, anchor
    assert any("a held-out fit needs two" in line for line in report.lines())


def test_rowgrid_page_fits_on_one_run_and_scores_on_the_other(tmp_path) -> None:
    root = synthruns.project(tmp_path)
    old, new = "rowgrid-20261201T000000Z-aaaaaaa", "rowgrid-20261202T000000Z-bbbbbbb"
    synthruns.write(root, synthruns.modelled_grid(old, "2026-12-01T00:00:00Z"))
    synthruns.write(root, synthruns.modelled_grid(new, "2026-12-02T00:00:00Z", split_cost=1.6))
    out = tmp_path / "site"
    report = build(root, out)
    lines = report.lines()
    fitted = next(line for line in lines if line.startswith("row-plan grid: fitted on"))
    assert old in fitted and "max_block_bytes=" in fitted and "split_rows_per_sm=" in fitted
    assert any(f"held out on {new}: mean" in line for line in lines)
    html = (out / "rowgrid.html").read_text()
    assert f"fitted on {old}" in html and f"fitted on {new}" in html
    assert _claim_status(html, "target-heldout-regret") in ("met", "missed")
    for chart in ("rowgrid-best-plan", "rowgrid-regret", "rowgrid-vs-torch"):
        assert f'id="{chart}"' in html and '"type":"heatmap"' in html.replace("&#34;", '"'), chart
    # The cells table is the newest run's, every cell of it, each number linked to that run.
    doc = json.loads((out / "tables" / "rowgrid-cells.json").read_text())
    assert len(doc["rows"]) == 30 and doc["runs"][0]["run_id"] == new
    for a in _links(out / "rowgrid.html"):
        assert a["data-run"] in (old, new)
    # The regret shown in a cell is the shipped pick's median over the best plan's, minus one.
    from publish.rowgrid import SHIPPED, analyse
    from publish.runs import load_runs

    results = StudyResults("rowgrid", load_runs(root / "data"))
    a = analyse(results)
    measured = 0
    for row, choice in zip(doc["rows"], a.rules[SHIPPED][new].choices, strict=True):
        cell = choice.cell
        assert row["cells"]["best"]["text"] == cell.best
        if not choice.measured:  # a plan the grid never timed (the staged plan postdates the runs)
            assert row["cells"]["pick"]["text"] == f"{choice.variant} (not timed)"
            continue
        measured += 1
        assert row["cells"]["pick"]["text"] == choice.variant
        expected = 100 * (cell.plans[choice.variant] / cell.best_time - 1)
        assert row["cells"]["regret"]["value"] == pytest.approx(expected)
        assert len(row["cells"]["regret"]["sources"]) == 2  # the pick's median and the best plan's
    assert measured >= 20, measured


def test_withdrawn_grid_run_is_not_fitted(tmp_path) -> None:
    root = synthruns.project(tmp_path)
    old, new = "rowgrid-20261201T000000Z-aaaaaaa", "rowgrid-20261202T000000Z-bbbbbbb"
    synthruns.write(root, synthruns.modelled_grid(old, "2026-12-01T00:00:00Z"))
    synthruns.write(root, synthruns.modelled_grid(new, "2026-12-02T00:00:00Z"))
    synthruns.withdraw(root, new)
    build(root, tmp_path / "site")
    html = (tmp_path / "site" / "rowgrid.html").read_text()
    assert "Only one valid grid run is in force" in html and f'href="review.html#withdrawn-{new}"' in html
    assert f'data-run="{new}"' not in html


def test_dispatch_page_shows_pieces_before_after_and_chains(tmp_path) -> None:
    root = synthruns.project(tmp_path)
    before, after = "dispatch-20261201T000000Z-aaaaaaa", "dispatch-20261202T000000Z-bbbbbbb"
    synthruns.write(root, synthruns.dispatch_doc(before, "2026-12-01T00:00:00Z"))
    synthruns.write(root, synthruns.dispatch_doc(after, "2026-12-02T00:00:00Z", ours=0.2, quack=True))
    out = tmp_path / "site"
    build(root, out)
    html = (out / "dispatch.html").read_text()
    for anchor in ("dispatch-host-32x127", "dispatch-host-1024x1024", "dispatch-verdicts", "dispatch-before-after",
                   "dispatch-chains-user", "dispatch-chains-host"):  # fmt: skip
        assert f'id="{anchor}"' in html, anchor
    assert "host time depends on the host cpu" in html.lower()
    host = json.loads((out / "tables" / "dispatch-host-32x127.json").read_text())
    rows = {r["cells"]["piece"]["text"]: r["cells"] for r in host["rows"]}
    assert [c["label"] for c in host["columns"]][1:] == [
        "Ours (kernels.softmax)", "torch.softmax", "Liger-Kernel", "QuACK"]  # fmt: skip
    # Derived pieces: differences of two medians of the newest run, with both sources.
    op = rows["Op dispatch"]["ours"]
    assert op["value"] == pytest.approx(0.2 * (82.0 - 46.0)) and len(op["sources"]) == 2
    assert {s["variant"] for s in op["sources"]} == {"ours/op", "ours/forward"}
    assert rows["Autograd"]["torch"]["value"] == pytest.approx(12.5 - 10.0)
    assert rows["Backward and autograd.grad"]["liger"]["value"] == pytest.approx(256.0 - 59.0)
    assert rows["Validation"]["torch"]["text"] == "—" and rows["Eager forward call"]["quack"]["value"] == 4.0
    # Before -> after: ours in both runs, and each divided by torch.softmax's call in its own run.
    ba = json.loads((out / "tables" / "dispatch-before-after.json").read_text())
    call = next(r["cells"] for r in ba["rows"] if r["cells"]["case"]["text"] == "32×127: Eager forward call")
    assert call["before"]["value"] == 52.0 and call["after"]["value"] == pytest.approx(10.4)
    assert call["before"]["sources"][0]["run_id"] == before and call["after"]["sources"][0]["run_id"] == after
    assert call["before_x"]["value"] == pytest.approx(5.2) and call["after_x"]["value"] == pytest.approx(1.04)
    assert _claim_status(html, "target-host-forward") == "met"  # 10.4 µs of host time, under 20
    assert _claim_status(html, "target-host-backward") == "missed"  # 0.2 x (310 - 80) = 46 µs
    # The number the backward target reads is a row of the host table, not one a reader cannot find.
    backward = rows["Our backward function alone"]["ours"]
    assert f"32×127 {backward['text']}" in _claim_said(html, "target-host-backward")
    # Chains: per call of the whole chain, with the verdict of each mode against eager.
    chains = json.loads((out / "tables" / "dispatch-chains-user.json").read_text())
    assert len(chains["rows"]) == 2 * 2 * 2  # chain lengths x shapes x (torch, ours)


def test_dispatch_page_with_one_run_has_no_before(tmp_path) -> None:
    root = synthruns.project(tmp_path)
    synthruns.write(root, synthruns.dispatch_doc("dispatch-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"))
    build(root, tmp_path / "site")
    html = (tmp_path / "site" / "dispatch.html").read_text()
    assert 'Only one dispatch run is in force, so there is no "before" to compare with yet.' in _text(html)
    assert 'id="dispatch-before-after"' not in html


def test_softmax_page_with_eager_samples_and_quack(tmp_path) -> None:
    root = synthruns.project(tmp_path)
    run_id = "softmax-20261201T000000Z-aaaaaaa"
    synthruns.write(root, synthruns.softmax_doc(run_id, "2026-12-01T00:00:00Z"))
    out = tmp_path / "site"
    build(root, out)
    html = (out / "softmax.html").read_text()
    for anchor in ("softmax-fwd-bf16", "softmax-fwd-bf16-eager", "softmax-fwd-bf16-eager-times",
                   "softmax-losses-eager", "softmax-fwd-eager-chart"):  # fmt: skip
        assert f'id="{anchor}"' in html, anchor
    # Both measurements, labelled, in the main table; the eager table never says "not measured".
    speed = json.loads((out / "tables" / "softmax-fwd-bf16.json").read_text())
    labels = [c["label"] for c in speed["columns"]]
    assert "Ours (µs)" in labels and "Ours, eager call (µs)" in labels and "vs QuACK" in labels
    eager = json.loads((out / "tables" / "softmax-fwd-bf16-eager.json").read_text())
    assert all(r["cells"]["ours"]["text"] != "not measured" for r in eager["rows"])
    quack = {r["cells"]["shape"]["text"]: r["cells"]["quack"]["text"] for r in speed["rows"]}
    assert quack["32×127"] == "refused" and quack["4096×151936"] == "failed check"
    # Targets name their timer; QuACK's failed check in every L2 mode leaves its target with no
    # data (once "met", as if a comparison had been made); where QuACK stays ahead the page
    # says why.
    assert _claim_status(html, "target-quack-4096x151936") == "no data"
    assert "QuACK failed its float64 check in every L2 mode measured, so no comparison was made" in _text(html)
    assert "cluster of thread blocks" in html
    assert _claim_status(html, "target-eager-liger") == "met"  # every case Liger accepts, measured both ways
    text = _text(html)
    assert "A row that is entirely -inf gives zeros, and a zero gradient: here we differ from torch.softmax" in text
    assert "A row holding NaN or +inf gives NaN, as torch.softmax does." in text
    for claim in re.findall(r'<div class="lab-claim[^"]*" id="claim-target[^"]*"[^>]*>(.*?)</div>', html, re.S):
        assert claim.split("</span>", 1)[1].strip().startswith(("Device time", "Eager call")), claim


def test_why_quack_stays_ahead_names_the_plan_our_cases_ran(tmp_path) -> None:
    """Where QuACK is ahead of a plan that reads each row once as well (here the staged plan,
    the row in shared memory), the page does not give the two-read reason, and it names the
    plan the run recorded, not another."""
    doc = synthruns.softmax_doc("softmax-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z")
    for case in doc["cases"]:
        if case["case"]["cols"] == 32768:
            case["variants"]["triton"]["meta"]["plan"] = "staged"
    said = _claim_said(_softmax_page(tmp_path, doc), "target-quack-8192x32768")
    assert "our staged plan reads each row from memory once too" in said, said
    assert "cluster of thread blocks" not in said and "block plan" not in said


def test_a_peer_absent_from_the_machine_is_not_a_peer_refusing(tmp_path) -> None:
    """A run made where Liger-Kernel was not installed records its absence as a refusal; the
    claim about the widths Liger refuses must not count those cases as Liger declining."""
    root = synthruns.project(tmp_path)

    def absent_at_50257(name: str, rows: int, cols: int):  # type: ignore[no-untyped-def]
        if name == "liger" and cols == 50257:
            return "refused: liger-kernel is not installed (No module named 'liger_kernel')"
        return synthruns.softmax_times(name, rows, cols)

    synthruns.write(root, synthruns.softmax_doc("softmax-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z",
                                                times=absent_at_50257))  # fmt: skip
    build(root, tmp_path / "site")
    html = (tmp_path / "site" / "softmax.html").read_text()
    assert _claim_status(html, "liger-refuses-wide") == "holds"
    assert "refused though narrow" not in _text(html)


def test_nav_follows_the_page_registry(built) -> None:
    """The nav is generated from the registry at build time; mkdocs.yml lists no page."""
    with open(ROOT / "mkdocs.yml", encoding="utf-8") as f:
        assert "nav" not in yaml.load(f, Loader=_NavLoader)
    listed = [next(iter(entry.values())) for entry in nav()]
    assert [p for p in listed if p != "review.md"] == [p.output for p in pages()]
    assert "review.md" in listed
    linked = re.findall(r'<a href="([\w-]+\.html)" class="md-nav__link', (built / "index.html").read_text())
    assert list(dict.fromkeys(linked)) == [p.replace(".md", ".html") for p in listed]


class _NavLoader(yaml.SafeLoader):
    pass


_NavLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def test_eager_target_reads_the_newest_full_run_only(tmp_path) -> None:
    """The targets are judged on one run: a shape only an older run measured, with no eager
    samples, no longer holds "no slower than Liger, eagerly" open; the newest run's own cases
    still must all have eager samples."""
    root = synthruns.project(tmp_path)
    old = synthruns.softmax_doc("softmax-20261130T000000Z-aaaaaaa", "2026-11-30T00:00:00Z",
                                shapes=((512, 4097), *synthruns.SOFTMAX_SHAPES))  # fmt: skip
    for case in old["cases"]:
        for v in case["variants"].values():
            v.pop("eager_us", None)
    old["method"]["eager_samples"] = False  # a run from before eager samples were taken
    synthruns.write(root, old)
    new_id = "softmax-20261201T000000Z-bbbbbbb"
    synthruns.write(root, synthruns.softmax_doc(new_id, "2026-12-01T00:00:00Z"))
    build(root, tmp_path / "site")
    html = (tmp_path / "site" / "softmax.html").read_text()
    assert _claim_status(html, "target-eager-liger") == "met"
    assert f"In {new_id}, the newest full run that timed" in _text(html)

    # A newest full run without eager samples of its own keeps the target open.
    root2 = synthruns.project(tmp_path / "two")
    newer = synthruns.softmax_doc(new_id, "2026-12-01T00:00:00Z")
    for case in newer["cases"]:
        for v in case["variants"].values():
            v.pop("eager_us", None)
    newer["method"]["eager_samples"] = False
    synthruns.write(root2, newer)
    build(root2, tmp_path / "site2")
    html = (tmp_path / "site2" / "softmax.html").read_text()
    assert _claim_status(html, "target-eager-liger") == "missed"
    assert re.search(r"Not measured in \d+ cases", _text(html))


def test_each_pages_claims_are_those_its_context_holds(stored_site) -> None:
    """The review record evaluates a page's claims alone (Page.claims) on every earlier set of
    runs; on the stored runs they are the claims the rendered page holds, in its order."""
    report = stored_site.report
    shown: dict[str, list[tuple[str, str, str]]] = {}
    for page, c in report.rendered.claims:
        shown.setdefault(page, []).append((c.id, c.status, str(c.text)))
    pages_with_claims = [p for p in pages() if p.claims is not None]
    assert len(pages_with_claims) == len(study_pages())
    for p in pages_with_claims:
        alone = list(dict.fromkeys((c.id, c.status, str(c.text)) for c in p.claims(report.data)))
        assert alone == shown.get(p.output, []), p.output


def test_softmax_page_states_the_staged_plans_widest_row(built) -> None:
    text = _text((built / "softmax.html").read_text())
    assert "staged (forward, Hopper): a row of up to 110 KB is copied once" in text, text[:300]


_BLOCK_END = re.compile(r"\{%-?\s*(endfor|endif|endcall|endmacro|endset|else|elif\b[^%]*)\s*-?%\}$")


def test_no_template_line_loses_its_line_break() -> None:
    # publish.site renders with trim_blocks: the newline after a block tag is dropped.  A line
    # of text ending in one (an inline loop, say) is then glued to the next line: a list item
    # to the next item ("numpy 2.5.2- Before the run" on the Sources page), a sentence to the
    # next ("b2a50f2.Whether" on the row-grid page).  Such a tag ends in "+%}", which keeps it.
    glued = []
    for tpl in sorted((ROOT / "templates").rglob("*.j2")):
        lines = tpl.read_text().splitlines()
        for i, line in enumerate(lines[:-1]):
            text = re.sub(r"\{%.*?%\}|\{\{.*?\}\}", "", line).strip()
            nxt = lines[i + 1].strip()
            if text and _BLOCK_END.search(line) and nxt and not nxt.startswith("{%"):
                glued.append(f"{tpl.relative_to(ROOT)}:{i + 1}: {line.strip()[-60:]}")
    assert not glued, "\n".join(glued)


def test_sources_page_lists_each_run_fact_as_its_own_item(built) -> None:
    html = (built / "sources.html").read_text()
    items = [_text(li) for li in re.findall(r"<li>(.*?)</li>", html, flags=re.S)]
    software = [t for t in items if t.startswith("Software")]
    assert software and not [t for t in software if "Before the run" in t], software[:2]
    assert sum(t.startswith("Before the run") for t in items) == len(software)
    words = _text((built / "rowgrid.html").read_text())
    assert "Whether one rule" in words and ".Whether one rule" not in words


# A number printed without its unit ("208") leaves the unit to the column's header or the
# table's title: one of the two must name it.
_BARE_UNITS = {"us_bare": "µs", "GBps_bare": "GB/s", "TFLOPs_bare": "TFLOP/s"}


def test_every_bare_number_has_its_unit_in_the_header_or_the_title(stored_site) -> None:
    from publish.numbers import Num

    rendered = stored_site.report.rendered
    missing, seen = [], 0
    for page, table in rendered.tables:
        for col in table.columns:
            kinds = {r[col.key].kind for r in table.rows if isinstance(r.get(col.key), Num)}
            for kind in kinds & _BARE_UNITS.keys():
                seen += 1
                if _BARE_UNITS[kind] not in col.label and _BARE_UNITS[kind] not in table.title:
                    missing.append(f"{page} {table.id} column {col.label!r}: {_BARE_UNITS[kind]}")
    assert seen > 20  # the check looked at the site's time, bandwidth and TFLOP/s columns
    assert missing == [], "\n".join(missing)


def test_the_odd_row_lead_in_the_gemm_prose_is_the_tables_range(stored_site) -> None:
    """The GEMM page's sentence on rows TMA cannot read ("cuBLAS's time over ours runs from
    A to B") states the lowest and highest cuBLAS ratio of the forward 16-bit results tables'
    rows with an N or K that is not a multiple of 8 elements, decode (M ≤ 128 against a
    weight of at least 1024·4096) and launch-bound (≤ 2·1024³ flops) products aside.  It once
    said "two and a half to five and a half times" in words, which no run had measured."""
    import html as htmllib

    from publish.numbers import FORMATS

    text = htmllib.unescape(re.sub(r"<[^>]+>", "", (stored_site.path / "matmul.html").read_text()))
    found = re.search(r"cuBLAS's time over ours runs from\s+([\d.]+)×\s+to\s+([\d.]+)×", text)
    assert found, "the sentence is missing"
    ratios = []
    for dtype in ("bf16", "fp16"):
        table = json.loads((stored_site.path / "tables" / f"matmul-fwd-{dtype}.json").read_text())
        for row in table["rows"]:
            m, n, k = (int(d) for d in row["cells"]["shape"]["text"].split("×"))
            if (n % 8 == 0 and k % 8 == 0) or 2 * m * n * k <= 2 * 1024**3 or (m <= 128 and n * k >= 1024 * 4096):
                continue
            if "value" in row["cells"]["cublas"]:
                ratios.append(row["cells"]["cublas"]["value"])
    assert len(ratios) >= 4
    assert (f"{found[1]}×", f"{found[2]}×") == (FORMATS["x"](min(ratios)), FORMATS["x"](max(ratios)))


def test_every_observation_the_data_can_contradict_states_its_hypothesis() -> None:
    """ "Contradicted" must say of what: every observation whose status the data decide (its
    ``holds`` is not the constant True) is built with a hypothesis, and every
    :func:`publish.studypage.claims.pairwise` call passes one.  Read from the source, so a
    claim that no synthetic run contradicts is checked as well."""
    import ast

    missing = []
    for path in sorted((ROOT / "publish").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or getattr(node.func, "id", None) not in ("Claim", "pairwise"):
                continue
            kw = {k.arg: k.value for k in node.keywords}
            if node.func.id == "Claim":  # type: ignore[attr-defined]
                holds = node.args[2] if len(node.args) > 2 else kw.get("holds")
                kind = node.args[3] if len(node.args) > 3 else kw.get("kind")
                if isinstance(kind, ast.Constant) and kind.value == "target":
                    continue
                if isinstance(holds, ast.Constant) and holds.value is True:
                    continue
            if "hypothesis" not in kw:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert missing == []


def test_a_contradicted_observation_reads_as_its_hypothesis_then_the_measurement(tmp_path) -> None:
    """On the page, the hypothesis comes first and the measurement after it, both visible."""
    html = _softmax_page(tmp_path, synthruns.softmax_doc("softmax-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"))
    said = _claim_said(html, "quack-refuses-unaligned")
    assert re.match(
        r"holds Expected: QuACK refuses rows whose width is not a multiple of 16 bytes, and only those\. "
        r"Measured: QuACK declined \d+ of the \d+ cases",
        said,
    ), said
    # A measurement stated as such, with nothing it could contradict, is "observed", not "holds".
    fact = _claim_said(html, "quack-failed-check")
    assert fact.startswith("observed QuACK") and "Expected:" not in fact
