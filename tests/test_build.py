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
import yaml
from sitekit import ROOT, edit, newest, run_files, scratch_root

from publish.pages import pages
from publish.runs import load_runs
from publish.schema import RunFileError
from publish.site import BuildError, build

PAGES = [p.output for p in pages()] + ["review.md"]  # the registry, and the review page built from it


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    report = build(ROOT, out)
    assert sorted(report.pages) == sorted(PAGES)
    return out


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
    for run in run_files(ROOT):
        copied = built / "runs" / run.parent.name / run.name
        assert copied.read_bytes() == run.read_bytes()


def test_every_number_links_to_a_run_entry_on_the_sources_page(built) -> None:
    sources = parse(built / "sources.html").ids
    run_ids = {r.run_id for r in load_runs(ROOT / "data")}
    for page in ("index.html", "softmax.html", "dispatch.html", "stability.html", "compare.html", "methodology.html"):
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
def scratch(tmp_path) -> tuple[Path, Path]:
    root = scratch_root(tmp_path)
    out = tmp_path / "site"
    build(root, out)
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


def test_build_is_fast_and_reports_what_it_built(tmp_path) -> None:
    report = build(ROOT, tmp_path / "site")
    assert report.seconds < 30
    lines = "\n".join(report.lines())
    assert f"built {len(PAGES)} pages" in lines and "softmax.md" in lines
    doc = json.loads(newest(ROOT).read_text())
    assert doc["run_id"] in (tmp_path / "site" / "sources.html").read_text()


# ----------------------------------------------------------------------------- claims and numbers


def _make_liger_faster(doc: dict) -> None:
    for case in doc["cases"]:
        if case["id"] == "fwd/bf16/16384x4096/cold":
            case["variants"]["liger"]["samples_us"] = [s / 2 for s in case["variants"]["triton"]["samples_us"]]


def test_contradicted_claim_is_reported_shown_and_fails_strict(scratch) -> None:
    root, out = scratch
    edit(newest(root), _make_liger_faster)
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
    edit(newest(root), _make_liger_faster)
    build(root, out)
    review = (out / "review.html").read_text()
    newest_id = json.loads(newest(root).read_text())["run_id"]
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
            assert csv_row[:-1] == [json_row["cells"][c["key"]]["text"] for c in doc["columns"]]
            assert csv_row[-1].split() == json_row["run_ids"]
            assert set(json_row["run_ids"]) <= {r["run_id"] for r in doc["runs"]}
        assert all(r["run_id"] in doc["cite"]["footnote"] and r["run_id"] in doc["cite"]["bibtex"] for r in doc["runs"])
