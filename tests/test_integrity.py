"""Data integrity (issue 7): the build cannot be fooled by its data.

Copied runs, deleted or edited run files, runs of a study with no page, runs of another
GPU, text that would become markup, non-strict JSON, malformed files and withdrawals YAML
would silently change: each gives a clear error naming the file and the field (or a visible
note), and the previous site stays in place.  Every project here is built in a temporary
directory from synthetic runs (tests/synthruns.py); data/ is never touched.
"""

from __future__ import annotations

import copy
import csv
import datetime as dt
import io
import json
import random
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import synthruns
from sitekit import ROOT, record, tamper

from contract import ledger
from contract.schema import RunFileError
from publish.export import csv_cell, strict_json, to_csv, to_json
from publish.ledger import check as ledger_check
from publish.numbers import Num, Source
from publish.review import entry_text, parse_withdrawals
from publish.runs import load_run, load_runs, reference_gpu, same_gpu
from publish.site import build, load_site_data, render, site_root
from publish.tables import Column, Table, Text

A = "softmax-20261201T000000Z-aaaaaaa"
B = "softmax-20261202T000000Z-bbbbbbb"
C = "softmax-20261203T000000Z-ccccccc"
SMALL = ((32, 127), (1024, 1024), (16384, 4096))
DAY = dt.date(2026, 12, 2)


def _doc(run_id: str, started: str, **kw: Any) -> dict[str, Any]:
    return synthruns.softmax_doc(run_id, started, shapes=kw.pop("shapes", SMALL), **kw)


@pytest.fixture
def project(tmp_path) -> Path:
    """A project with one softmax run, built once; its site carries a marker."""
    root = synthruns.project(tmp_path)
    synthruns.write(root, _doc(A, "2026-12-01T00:00:00Z"))
    out = tmp_path / "site"
    build(root, out)
    (out / "marker").write_text("previous build")
    return root


def _out(root: Path) -> Path:
    return root.parent / "site"


def _fails(root: Path, source: str, field: str) -> RunFileError:
    """The build stops with a RunFileError naming ``source`` and ``field``, and the
    previous site is untouched."""
    with pytest.raises(RunFileError) as info:
        build(root, _out(root))
    err = info.value
    assert source in err.source, f"{err.source!r} does not name {source!r}: {err}"
    assert field in err.field, f"{err.field!r} does not name {field!r}: {err}"
    assert (_out(root) / "marker").read_text() == "previous build"
    return err


def _raw_write(root: Path, doc: dict[str, Any], *, ledger_entry: bool = True) -> Path:
    """A run file exactly as given (no nudging of samples), recorded unless told."""
    path = root / "data" / "runs" / doc["study"] / f"{doc['run_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    if ledger_entry:
        record(path)
    return path


# ----------------------------------------------------------------------------- 1. copied runs


def test_a_run_copied_to_a_new_id_is_refused_naming_both_files(project) -> None:
    original = json.loads((project / "data" / "runs" / "softmax" / f"{A}.json").read_text())
    copy_doc = {**original, "run_id": B, "started_at": "2026-12-02T00:00:00Z", "finished_at": "2026-12-02T00:00:00Z"}
    path = _raw_write(project, copy_doc)
    err = _fails(project, path.name, "cases")
    assert f"{A}.json" in err.problem and "copied" in err.problem


def test_a_variant_whose_samples_were_copied_from_another_run_is_refused(project) -> None:
    original = json.loads((project / "data" / "runs" / "softmax" / f"{A}.json").read_text())
    other = _doc(B, "2026-12-02T00:00:00Z", times=lambda n, r, c: synthruns.softmax_times(n, r, c * 2 - 1))
    other["cases"][3]["variants"]["torch"]["samples_us"] = original["cases"][3]["variants"]["torch"]["samples_us"]
    path = _raw_write(project, other)
    err = _fails(project, path.name, "cases[3].variants.torch.samples_us")
    assert f"{A}.json" in err.problem


# ----------------------------------------------------------------------------- 2. the ledger


def test_a_deleted_run_file_stops_the_build(project) -> None:
    synthruns.write(project, _doc(B, "2026-12-02T00:00:00Z"))
    (project / "data" / "runs" / "softmax" / f"{A}.json").unlink()
    err = _fails(project, "data/ledger.json", f"runs/softmax/{A}.json")
    assert "missing" in err.problem and "never deleted" in err.problem and f"bench withdraw {A}" in err.problem


def test_a_run_file_the_ledger_does_not_know_names_the_command_to_run(project) -> None:
    path = synthruns.write(project, _doc(B, "2026-12-02T00:00:00Z"), ledger=False)
    err = _fails(project, path.name, "(ledger)")
    assert f"python -m bench ledger --add data/runs/softmax/{B}.json" in err.problem


def test_an_edited_run_file_stops_the_build(project) -> None:
    path = project / "data" / "runs" / "softmax" / f"{A}.json"
    tamper(path, lambda d: d["cases"][0]["variants"]["torch"]["samples_us"].__setitem__(0, 1.0))
    err = _fails(project, path.name, "sha256")
    assert "never edited" in err.problem and "git checkout" in err.problem


def test_a_missing_or_broken_ledger_stops_the_build(project) -> None:
    (project / "data" / "ledger.json").write_text('{"runs": [{"path": 1}]}')
    _fails(project, "data/ledger.json", "runs[0]")
    (project / "data" / "ledger.json").unlink()
    _fails(project, "data/ledger.json", "(file)")


def test_bench_ledger_add_records_a_copied_run_and_refuses_an_edit(project, capsys) -> None:
    from bench.cli import main

    path = synthruns.write(project, _doc(B, "2026-12-02T00:00:00Z"), ledger=False)
    data = project / "data"
    assert main(["ledger", "--add", str(path), "--data", str(data)]) == 0
    assert "recorded runs/softmax/" in capsys.readouterr().out
    build(project, _out(project))
    tamper(path, lambda d: d.update(note="edited"))
    assert main(["ledger", "--add", str(path), "--data", str(data)]) == 1
    assert "never edited" in capsys.readouterr().err


def test_bench_records_each_run_it_writes_in_the_ledger(tmp_path) -> None:
    from bench.runfile import RunWriter

    root = synthruns.project(tmp_path)
    doc = _doc(A, "2026-11-01T00:00:00Z")  # started in the past: bench stamps finished_at now
    header = {k: v for k, v in doc.items() if k not in ("schema_version", "status", "cases", "finished_at")}
    writer = RunWriter(root / "data" / "runs" / "softmax", header, ledger_dir=root / "data")
    (entry,) = ledger.load(root / "data").values()
    assert entry.status == "partial" and entry.sha256 == ledger.sha256(writer.path)
    for case in doc["cases"]:
        writer.add_case(case)
    writer.finish("complete")
    (entry,) = ledger.load(root / "data").values()
    assert entry.status == "complete" and entry.sha256 == ledger.sha256(writer.path)
    build(root, tmp_path / "site")


def test_the_stored_runs_are_all_in_the_ledger() -> None:
    ledger_check(ROOT / "data", load_runs(ROOT / "data"))


# ----------------------------------------------------------------------------- 3. a study with no page


def test_a_run_of_a_study_with_no_page_stops_the_build(project) -> None:
    doc = synthruns.document("unregistered", "unregistered-20261202T000000Z-bbbbbbb", "2026-12-02T00:00:00Z", [])
    path = synthruns.write(project, doc)
    err = _fails(project, path.name, "study")
    assert "'unregistered' has no page" in err.problem


# ----------------------------------------------------------------------------- 4. one GPU per study


def _b200(doc: dict[str, Any]) -> dict[str, Any]:
    doc["env"]["gpu"] = {**doc["env"]["gpu"], "name": "NVIDIA B200", "sm_count": 148}
    return doc


def _slow(name: str, rows: int, cols: int) -> Any:
    t = synthruns.softmax_times(name, rows, cols)
    return (t[0] * 3, t[1] * 3) if isinstance(t, tuple) and name == "triton" else t


def test_runs_of_another_gpu_are_listed_and_never_mixed_in(tmp_path) -> None:
    root = synthruns.project(tmp_path)
    synthruns.write(root, _doc(A, "2026-12-01T00:00:00Z"))
    synthruns.write(root, _b200(_doc(B, "2026-12-02T00:00:00Z", times=_slow)))  # newer, another GPU
    out = tmp_path / "site"
    report = build(root, out)
    assert any("other GPU, not mixed in" in line and B in line for line in report.lines())
    for page in out.glob("*.html"):
        if page.name != "sources.html":  # no number of B anywhere (Home counts it, linking to Sources)
            text = page.read_text().replace(f'data-run="{B}" title="run {B} · run of another GPU"', "")
            assert f'data-run="{B}"' not in text, page.name
    for table in (out / "tables").glob("*.json"):
        assert B not in table.read_text(), table.name
    home = _visible(out / "index.html")
    assert "NVIDIA H200" in home and "NVIDIA B200" not in home  # the headline GPU did not flip
    assert "1 stored run (not withdrawn) measured another GPU: it is listed on Sources" in home
    sources = _visible(out / "sources.html")
    assert (
        "Other GPU, not mixed in This run measured NVIDIA B200 (148 SMs); the softmax results come from "
        "NVIDIA H200 (132 SMs), so its numbers appear on no page." in sources
    )
    assert B not in _visible(out / "compare.html")


def test_the_reference_gpu_does_not_follow_the_newest_run(tmp_path) -> None:
    root = synthruns.project(tmp_path)
    synthruns.write(root, _doc(A, "2026-12-01T00:00:00Z"))
    synthruns.write(root, _b200(_doc(B, "2026-12-02T00:00:00Z")))
    runs = load_runs(root / "data")
    assert reference_gpu(runs).name == "NVIDIA H200"  # a tie goes to the GPU that measured first
    assert not same_gpu(runs[0], runs[1])
    synthruns.write(root, _b200(_doc(C, "2026-12-03T00:00:00Z")))
    assert reference_gpu(load_runs(root / "data")).name == "NVIDIA B200"  # most runs: the lab moved


# ----------------------------------------------------------------------------- 5. text is data

EVIL = (
    "NVIDIA H200 [notes](javascript:alert(1)) ![img](x.png) *em* _u_ `code` <b>bold</b> "
    "{{ x }} {: #evil } | cell | <https://evil.example> &amp; \\* # hash\n- item\n\n# heading"
)


class _Markup(HTMLParser):
    """What a page turned into markup: links, images, emphasis, code, bold."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self.stack: list[str] = []
        self.tagged: list[tuple[str, str]] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:  # type: ignore[no-untyped-def]
        a = dict(attrs)
        self.hrefs.append(a.get("href") or "")
        self.srcs.append(a.get("src") or "")
        self.ids.append(a.get("id") or "")
        self.stack.append(tag)

    def handle_endtag(self, tag) -> None:  # type: ignore[no-untyped-def]
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()

    def handle_data(self, data) -> None:  # type: ignore[no-untyped-def]
        if self.stack:
            self.tagged.append((self.stack[-1], data))


def _visible(page: Path) -> str:
    import html

    text = re.sub(r"<(script|style)\b.*?</\1>", " ", page.read_text(), flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def test_text_from_run_files_and_withdrawals_never_becomes_markup(tmp_path) -> None:
    root = synthruns.project(tmp_path)
    doc = _doc(A, "2026-12-01T00:00:00Z")
    doc["env"]["gpu"]["name"] = EVIL
    doc["command"] = "python -m bench run softmax " + EVIL
    doc["note"] = EVIL
    doc["env"]["packages"] = {"liger-kernel": EVIL}
    doc["cases"][0]["variants"]["liger"] |= {"error": "refused: " + EVIL, "samples_us": [], "eager_us": []}
    synthruns.write(root, doc)
    synthruns.write(root, _doc(B, "2026-12-02T00:00:00Z"))
    (root / "data" / "withdrawn.yaml").write_text(entry_text(B, DAY, "wrong: " + EVIL))
    out = tmp_path / "site"
    build(root, out)
    seen = 0
    for page in sorted(out.glob("*.html")):
        parsed = _Markup()
        parsed.feed(page.read_text())
        assert not any(h.startswith("javascript:") or "x.png" in h or "evil.example" in h for h in parsed.hrefs), page
        assert not any("x.png" in s for s in parsed.srcs), page.name
        assert "evil" not in parsed.ids, page.name
        for tag, text in parsed.tagged:
            assert not (tag == "em" and text in ("em", "u")), (page.name, tag, text)
            assert not (tag == "code" and text == "code"), page.name
            assert not (tag == "b" and text == "bold"), page.name
            assert not (tag in ("h1", "h2", "h3") and text.strip() == "heading"), page.name
            assert not (tag == "li" and text.strip() == "item"), page.name
        visible = _visible(page)
        # an escape shown as text: run-file text escaped for Markdown inside a code span, where
        # Markdown escapes the entity's "&" again
        assert not re.search(r"&#\d+;|&#x[0-9a-fA-F]+;", visible), (page.name, re.findall(r".{30}&#.{30}", visible))
        if "[notes](javascript:alert(1))" in visible:
            seen += 1
            assert "{{ x }}" in visible and "<b>bold</b>" in visible and "`code`" in visible, page.name
    assert seen >= 3  # Home, Sources, the review record (and the softmax page's run list)
    sources = _visible(out / "sources.html")
    assert sources.count("[notes](javascript:alert(1))") >= 4  # GPU, command, note, package
    assert "wrong: NVIDIA H200 [notes](javascript:alert(1))" in _visible(out / "review.html")
    import html

    for page in out.glob("*.html"):  # chart text: escaped for Plotly, which renders some HTML
        for spec in re.findall(r'data-figure="([^"]*)"', page.read_text()):
            for text in _chart_strings(json.loads(html.unescape(spec))):
                assert "<" not in text and ">" not in text, (page.name, text)
    # The downloads hold the text as data: strict JSON, and CSV that opens as text.
    for path in (out / "tables").glob("*.json"):
        json.loads(path.read_text(), parse_constant=_refuse)


def test_chart_text_is_shown_as_written() -> None:
    """Plotly renders a little HTML in trace names, categories, hover and tick text: every
    string of a figure but the site's own hover templates reaches it escaped."""
    from publish.safe import plotly_safe

    fig = {"data": [{"name": '<a href="javascript:x">n</a>', "x": ["<b>b</b>", "%{y}"], "hovertemplate": "%{x}<br>"}]}
    safe = plotly_safe(fig)["data"][0]
    assert "<" not in safe["name"] + "".join(safe["x"]) and "%{" not in safe["x"][1]
    assert safe["hovertemplate"] == "%{x}<br>"


def _chart_strings(obj: Any, key: str = "") -> list[str]:
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in _chart_strings(v, k)]
    if isinstance(obj, list):
        return [s for v in obj for s in _chart_strings(v, key)]
    return [obj] if isinstance(obj, str) and key != "hovertemplate" else []


def test_data_text_escapes_every_markdown_and_html_character() -> None:
    from publish.safe import data_text

    out = str(data_text("a_b _c_ [l](u) `x` *y* <i> {z} | # \n- li"))
    assert "[" not in out and "`" not in out and "*" not in out and "<i>" not in out and "{" not in out
    assert "|" not in out and "\n" not in out and "a_b" in out and "_c_" not in out


def test_terminal_colour_codes_in_run_text_never_reach_a_reader() -> None:
    # QuACK's CUTLASS DSL colours its errors; the run file keeps them as raised.
    from publish.safe import data_text, plain_label

    raised = "CUDADialectError: \x1b[91m\x1b[1merror[CUDA_LAUNCH_INVALID_CONFIG]:\x1b[0m CUDA launch failed\x07"
    for out in (str(data_text(raised)), plain_label(raised)):
        assert "\x1b" not in out and "[91m" not in out and "[0m" not in out and "\x07" not in out
        assert "CUDA&#95;LAUNCH" in out or "CUDA_LAUNCH" in out
        assert "error" in out and "launch failed" in out


# ----------------------------------------------------------------------------- 6. strict JSON, safe CSV


def _refuse(token: str) -> None:
    raise ValueError(f"{token} is not strict JSON")


def test_a_nan_output_is_stored_as_strict_json(tmp_path) -> None:
    import torch

    from bench import harness

    check = harness.compare(
        (torch.tensor([float("nan"), 1.0]),), (torch.tensor([1.0, 1.0], dtype=torch.float64),), 0.01
    )
    assert check["rel_l2"] == ["inf"] and check["max_abs"] == ["inf"] and check["passed"] is False
    root = synthruns.project(tmp_path)
    doc = _doc(A, "2026-12-01T00:00:00Z")
    doc["schema_version"] = 3
    doc["cases"][0]["variants"]["liger"] |= {"error": "check failed", "samples_us": [], "eager_us": [], "check": check}
    path = synthruns.write(root, doc)
    json.loads(path.read_text(), parse_constant=_refuse)
    run = load_run(path, root)
    assert run.doc["cases"][0]["variants"]["liger"]["check"]["rel_l2"] == [float("inf")]  # read as the number
    out = tmp_path / "site"
    build(root, out)
    for download in [*(out / "tables").glob("*.json"), *(out / "runs").rglob("*.json")]:
        json.loads(download.read_text(), parse_constant=_refuse)


def test_a_strict_file_with_a_nan_literal_is_refused_naming_the_field(project) -> None:
    path = project / "data" / "runs" / "softmax" / f"{A}.json"
    doc = json.loads(path.read_text())
    doc["schema_version"] = 3
    doc["cases"][1]["variants"]["torch"]["check"] = {
        "rel_l2": [float("inf")], "max_abs": [0.0], "tolerance": 0.01, "finite": False, "passed": False}  # fmt: skip
    path.write_text(json.dumps(doc))  # json.dumps writes Infinity
    record(path)
    err = _fails(project, path.name, "cases[1].variants.torch.check.rel_l2[0]")
    assert "Infinity" in err.problem


def test_every_download_of_the_stored_runs_is_strict_json(stored_site) -> None:
    out = stored_site.path
    downloads = [*(out / "tables").glob("*.json"), *(out / "runs").rglob("*.json")]
    assert len(downloads) > 20
    for path in downloads:
        json.loads(path.read_text(), parse_constant=_refuse)
    for path in (out / "tables").glob("*.csv"):
        for row in csv.reader(io.StringIO(path.read_text())):
            for cell in row:
                assert csv_cell(cell) == cell, (path.name, cell)


def test_csv_cells_cannot_start_a_formula_and_json_has_no_nan() -> None:
    src = (Source("r"),)
    table = Table("t", "T", [Column("a", "=label"), Column("b", "B"), Column("c", "C")])
    for text in ('=HYPERLINK("http://x","y")', "+1+2", "@SUM(A1)", "-2+3", "\tx"):
        table.rows.append({"a": Text(text), "b": Num(-3.5, "pct_signed", src), "c": Num(float("nan"), "us", src)})
    rows = list(csv.reader(io.StringIO(to_csv(table))))
    assert rows[0][0] == "'=label"
    for row in rows[1:]:
        assert row[0].startswith("'") and row[1] == "-3.5%" and row[2] == "—"
    cite = type("C", (), {"url": "u", "footnote": "f", "bibtex": "b"})()
    doc = json.loads(strict_json(to_json(table, cite, [])), parse_constant=_refuse)
    assert doc["rows"][0]["cells"]["c"]["value"] is None


# ----------------------------------------------------------------------------- 7. malformed files


def _file(project: Path) -> Path:
    return project / "data" / "runs" / "softmax" / f"{A}.json"


def _set(path: str, value: Any):  # type: ignore[no-untyped-def]
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        obj: Any = doc
        for p in parents:
            obj = obj[int(p)] if isinstance(obj, list) else obj[p]
        if isinstance(obj, list):
            obj[int(last)] = value
        else:
            obj[last] = value

    return change


@pytest.mark.parametrize(
    ("raw", "field", "problem"),
    [
        (lambda t: t.replace('"sm_count": 132', '"sm_count": ' + "9" * 400), "env.gpu.sm_count", "integer"),
        (lambda t: t.replace('"sm_count": 132', '"sm_count": ' + "9" * 5000), "(file)", "cannot be read as JSON"),
        (lambda t: re.sub(r'"bytes": \d+', '"bytes": ' + "1" * 400, t, count=1), "cases[0].bytes", "integer"),
        (lambda t: t.replace('"rounds": 7', '"rounds": NaN'), "method.rounds", "NaN is not JSON"),
        (lambda t: t.replace('"copy_GBps": 4000.0', '"copy_GBps": 1e400'), "env.peaks.copy_GBps", "finite"),
        (lambda t: t.replace('"name": "NVIDIA H200"', '"name": Infinity'), "env.gpu.name", "Infinity is not JSON"),
        (lambda t: t.replace('"name": "NVIDIA H200"', '"name": "\\ud800"'), "env.gpu.name", "surrogate"),
        (lambda t: t.replace('"rows": 32,', '"rows": "32",', 1), "cases[0].case.rows", "whole number"),
        (lambda t: t.replace('"rows": 32,', '"rows": 32, "rows": 33,', 1), "rows (a repeated key)", "twice"),
        (lambda t: t.replace('"fwd/bf16/32x127/cold"', '"fwd/[x](javascript:y)"', 1), "cases[0].id", "letters"),
        (lambda t: t.replace('"liger": {', '"<b>liger</b>": {', 1), "cases[0].variants (a name)", "letters"),
        (lambda t: t[: len(t) // 2], "(file)", "not valid JSON"),
        (lambda t: "[" * 5000 + "]" * 5000, "(file)", ""),
    ],
)
def test_malformed_run_files_get_a_clear_error(project, raw, field, problem) -> None:
    path = _file(project)
    path.write_text(raw(path.read_text()))
    record(path)
    err = _fails(project, path.name, field)
    assert problem in err.problem, err


def test_bad_utf8_and_wrong_types_name_the_file(project) -> None:
    path = _file(project)
    text = path.read_text()
    path.write_bytes(text.encode("utf-8").replace(b"NVIDIA H200", b"NVIDIA H\xff200", 1))
    record(path)
    assert "not UTF-8" in _fails(project, path.name, "(file)").problem
    path.write_text(text)
    for change, field in [
        (_set("env.packages", ["liger"]), "env.packages"),
        (_set("env.gpu.compute_capability", 9.0), "env.gpu.compute_capability"),
        (_set("method.warmup.burst_ms", "long"), "method.warmup.burst_ms"),
        (_set("cases.0.variants.triton.meta.plan", ["block"]), "cases[0].variants.triton.meta.plan"),
        (_set("cases.0.variants.triton.calls_per_sample", 0), "cases[0].variants.triton.calls_per_sample"),
        (_set("cases.0.variants.triton", []), "cases[0].variants.triton"),
        (_set("cases.0.case.cols", True), "cases[0].case.cols"),
    ]:
        path.write_text(text)
        tamper(path, change)
        record(path)
        _fails(project, path.name, field)


BAD_VALUES: list[Any] = [None, True, "x", "", -1, 0, 2**70, 1.5, [], {}, [1, "a"], {"k": None}, "<b>x</b>"]


def _leaves(obj: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(obj, dict):
        return [path] + [p for k, v in obj.items() for p in _leaves(v, (*path, k))]
    if isinstance(obj, list):
        return [path] + [p for i, v in enumerate(obj) for p in _leaves(v, (*path, i))]
    return [path]


@pytest.mark.parametrize("study", ["softmax", "dispatch", "rowgrid"])
def test_fuzzed_run_files_build_or_fail_naming_the_file(tmp_path, study) -> None:
    """Random fields of a valid run replaced by wrong values: the pages either build or the
    build stops with a RunFileError naming that file: never another exception."""
    base = {
        "softmax": lambda: _doc(A, "2026-12-01T00:00:00Z", shapes=((32, 127), (1000, 50257))),
        "dispatch": lambda: synthruns.dispatch_doc("dispatch-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"),
        "rowgrid": lambda: synthruns.grid_doc(
            "rowgrid-20261201T000000Z-aaaaaaa",
            "2026-12-01T00:00:00Z",
            [synthruns.modelled_cell(r, w) for r in (4, 1000) for w in (1531, 50257)],
        ),
    }[study]()
    root = synthruns.project(tmp_path)
    leaves = [p for p in _leaves(base) if p and p[0] not in ("run_id", "study")]
    rng = random.Random(f"fuzz-{study}")
    for trial in range(40):
        doc = copy.deepcopy(base)
        mutated = []
        for _ in range(rng.choice((1, 1, 2))):
            path = rng.choice(leaves)
            parent: Any = doc
            try:
                for k in path[:-1]:
                    parent = parent[k]
                value = copy.deepcopy(rng.choice(BAD_VALUES))
                if rng.random() < 0.15 and isinstance(parent, dict):
                    del parent[path[-1]]
                    value = "(deleted)"
                else:
                    parent[path[-1]] = value
            except (KeyError, IndexError, TypeError):
                continue
            mutated.append(f"{'.'.join(map(str, path))} = {value!r}")
        for old in (root / "data" / "runs").rglob("*.json"):
            old.unlink()
        ledger.write(root / "data", {})
        file = _raw_write(root, doc)
        try:
            data = load_site_data(root)
            render(root, data, "https://example.org/")
        except RunFileError as exc:
            assert file.name in exc.source, (trial, mutated, str(exc))
        except Exception as exc:  # pragma: no cover - the failure this test exists for
            pytest.fail(f"trial {trial}: {mutated}: {type(exc).__name__}: {exc}")


# ----------------------------------------------------------------------------- 8. withdrawn.yaml


def _withdraw_raw(root: Path, text: str) -> None:
    (root / "data" / "withdrawn.yaml").write_text(text)


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        (f"- run_id: {A}\n  date: 2026-12-01\n  reason: L2 flush skipped, see issue #12 and notes/flush.log\n",
         "[0].reason", "'L2 flush skipped, see issue'"),
        (f"- run_id: {A}\n  date: 2026-12-01\n  reason: one\n- run_id: {A}\n  date: 2026-12-02\n  reason: two\n",
         "[1].run_id", "already withdrawn by entry [0]"),
        (f"- run_id: {A}\n  date: 2026-12-01\n  reason: x\n  by: me\n", "[0].by", "unknown field"),
        (f"- run_id: {A}\n  date: 2026-12-01\n  reason: x\n  reason: y\n", "[0].reason", "given twice"),
        (f"- run_id: {A}\n  date: 2026-13-45\n  reason: x\n", "[0].date", "not a real date"),
        (f"- run_id: {A}\n  date: 2026-12-01 10:00:00\n  reason: x\n", "[0].date", "YYYY-MM-DD"),
        (f"- run_id: {A}\n  date: 2026-12-01\n  reason: yes\n", "[0].reason", "quote it"),
        (f"- run_id: {A}\n  date: 2026-12-01\n  reason: first line\n    # see issue 12\n",
         "[0].reason", "cut where a comment starts"),
        ("- run_id: no-such-run\n  date: 2026-12-01\n  reason: x\n", "[0].run_id", "names no stored run"),
    ],
)  # fmt: skip
def test_withdrawals_yaml_would_silently_change_are_refused(project, text, field, problem) -> None:
    _withdraw_raw(project, text)
    err = _fails(project, "data/withdrawn.yaml", field)
    assert problem in err.problem, err


def test_a_quoted_reason_with_a_hash_is_read_whole(project) -> None:
    reason = 'L2 flush skipped, see issue #12 and notes/flush.log: "cold" was warm'
    _withdraw_raw(project, entry_text(A, DAY, reason))
    (w,) = parse_withdrawals((project / "data" / "withdrawn.yaml").read_text(), [A])
    assert w.reason == reason
    build(project, _out(project))
    assert reason in _visible(_out(project) / "review.html")


def test_bench_withdraw_appends_a_valid_entry_and_refuses_what_it_should(project, capsys) -> None:
    from bench.cli import main

    data = ["--data", str(project / "data")]
    synthruns.write(project, _doc(B, "2026-12-02T00:00:00Z"))
    (project / "data" / "withdrawn.yaml").write_text("# Withdrawn runs.\n[]\n")
    reason = "L2 flush skipped, see issue #12: the 'cold' case was warm"
    assert main(["withdraw", A, "--reason", reason, "--date", "2026-12-02", *data]) == 0
    text = (project / "data" / "withdrawn.yaml").read_text()
    assert text.startswith("# Withdrawn runs.\n- run_id:")
    (w,) = parse_withdrawals(text, [A, B])
    assert w.reason == reason and w.run_id == A
    report = build(project, _out(project))
    assert report.withdrawn == 1
    with pytest.raises(SystemExit, match="already withdrawn"):
        main(["withdraw", A, "--reason", "again", *data])
    with pytest.raises(SystemExit, match="no stored run 'nosuch'"):
        main(["withdraw", "nosuch", "--reason", "x", *data])
    with pytest.raises(SystemExit, match="measured numbers"):
        main(["withdraw", B, "--reason", "it was 12.5 µs slower", *data])
    assert (project / "data" / "withdrawn.yaml").read_text() == text  # nothing written by a refusal
    assert main(["withdraw", B, "--reason", "second", *data]) == 0
    assert len(parse_withdrawals((project / "data" / "withdrawn.yaml").read_text(), [A, B])) == 2


# ----------------------------------------------------------------------------- 9. site URL


def test_a_site_url_without_a_trailing_slash_still_makes_page_urls(project) -> None:
    assert site_root("https://host/notes") == site_root("https://host/notes/") == "https://host/notes/"
    build(project, _out(project), site_url="https://host/notes")
    doc = json.loads((_out(project) / "tables" / "softmax-fwd-bf16.json").read_text())
    assert doc["url"] == "https://host/notes/softmax.html#softmax-fwd-bf16"
    assert "notessoftmax" not in doc["cite"]["footnote"] + doc["cite"]["bibtex"]


def test_a_page_that_cannot_be_computed_names_itself_and_its_runs(project, monkeypatch) -> None:
    """The last line of defence: data the checks did not foresee ends as a clear error."""
    from publish.pages import home
    from publish.site import BuildError

    def broken(data):  # type: ignore[no-untyped-def]
        raise KeyError("rows")

    monkeypatch.setattr(home, "context", broken)
    with pytest.raises(BuildError, match=rf"index\.md: the page could not be computed .*{A}\.json.*KeyError"):
        build(project, _out(project))
    assert (_out(project) / "marker").read_text() == "previous build"
