"""The pages as a reader meets them, checked on the built HTML (the browser tests check the
layout): charts that cannot mislead, the softmax page's answer first, its terms defined."""

from __future__ import annotations

import html as htmllib
import json
import re
from pathlib import Path

import pytest
import synthruns

from publish.charts import CHAR_PX, LABELLED_MARKS, NO_TIME_KEY, PLOT_PX, SMALL, bars, dots
from publish.numbers import Num, Source
from publish.pages import pages
from publish.site import build
from publish.tables import Text

PAGES = [p.output.replace(".md", ".html") for p in pages()]


@pytest.fixture(scope="module")
def sites(tmp_path_factory, stored_site) -> list[Path]:
    """The site from the stored runs, and one from synthetic runs of every study."""
    real = stored_site.path
    tmp = tmp_path_factory.mktemp("synthetic")
    root = synthruns.project(tmp)
    synthruns.write(root, synthruns.modelled_grid("rowgrid-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"))
    synthruns.write(root, synthruns.softmax_doc("softmax-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z"))
    synthetic = tmp / "site"
    build(root, synthetic)
    return [real, synthetic]


def _charts(site: Path) -> list[tuple[str, dict]]:
    out = []
    for name in PAGES:
        for spec in re.findall(r'class="lab-chart" id="([^"]+)" data-figure="([^"]*)"', (site / name).read_text()):
            out.append((f"{name}#{spec[0]}", json.loads(htmllib.unescape(spec[1]))))
    return out


def test_no_bars_on_a_log_axis_and_no_blank_where_a_value_is_missing(sites) -> None:
    """A bar's length means something only from zero: never on a log axis.  Every series of a
    marker chart shows, in every category, either a value or a labelled mark saying why it has
    none ("refused", "failed check", "not run")."""
    seen = 0
    for site in sites:
        for where, fig in _charts(site):
            seen += 1
            log = fig["layout"].get("yaxis", {}).get("type") == "log"
            if log:
                assert all(t["type"] != "bar" for t in fig["data"]), where
            if fig["data"] and fig["data"][0]["type"] != "scatter":
                continue
            categories = fig["data"][0]["x"]
            marks: dict[str, set[str]] = {}
            # Past LABELLED_MARKS cases a mark carries no label; a key over the plot says
            # what the marks are, and each mark's hover says why it has no time.
            keyed = any(a.get("text") == NO_TIME_KEY for a in fig["layout"].get("annotations", []))
            unlabelled = len(categories) > LABELLED_MARKS
            assert keyed == (unlabelled and any(t.get("showlegend") is False for t in fig["data"])), where
            said: set[tuple[str, str, str]] = set()  # (category, colour, label) written so far
            for t in fig["data"]:
                if t.get("showlegend") is False:  # the marks of missing values
                    assert all(why.startswith("no time: ") and len(why) > 9 for why in t["customdata"]), where
                    if not keyed:
                        # A mark unlabelled only where its label is already written: by the
                        # previous category of its series, or in its category by a series of
                        # its colour (a variant's device and eager series).
                        colour = t["marker"]["color"]
                        whys = [why.removeprefix("no time: ").split(" (")[0] for why in t["customdata"]]
                        for j, (x, label) in enumerate(zip(t["x"], t["text"], strict=True)):
                            if label.strip():
                                assert label == whys[j], where
                                said.add((x, colour, label))
                                continue
                            wide = len(whys[j]) * CHAR_PX > PLOT_PX / len(categories)
                            run_on = wide and j > 0 and whys[j - 1] == whys[j] and categories.index(t["x"][j - 1]) == (
                                categories.index(x) - 1)  # fmt: skip
                            assert run_on or (x, colour, whys[j]) in said, f"{where}: {t['name']} at {x}"
                    marks.setdefault(t["legendgroup"], set()).update(t["x"])
            for t in fig["data"]:
                if t.get("showlegend") is False:
                    continue
                for x, y in zip(t["x"], t["y"], strict=True):
                    assert y is not None or x in marks.get(t["legendgroup"], set()), f"{where}: {t['name']} at {x}"
                assert t["x"] == categories, where
    assert seen >= 8


def test_small_values_are_readable(sites) -> None:
    """Latency-bound cases (a few GB/s next to thousands, 2 µs next to 1 ms) are readable:
    charts spanning more than a decade use a log axis (with markers), and a value under 6% of
    the largest on a linear axis is labelled with its number."""
    for site in sites:
        for where, fig in _charts(site):
            if fig["data"][0]["type"] != "scatter":
                continue
            values = [v for t in fig["data"] if t.get("showlegend") is not False for v in t["y"] if v]
            if values and max(values) / min(values) > 30:
                assert fig["layout"]["yaxis"]["type"] == "log", where
    for site in sites:
        for where, fig in _charts(site):
            if fig["layout"].get("yaxis", {}).get("type") == "log" or fig["data"][0]["type"] != "scatter":
                continue
            values = [v for t in fig["data"] if t.get("showlegend") is not False for v in t["y"] if v is not None]
            top = max(values, default=0)
            for t in fig["data"]:
                if t.get("showlegend") is False:
                    continue
                for y, text in zip(t["y"], t["text"], strict=True):
                    if y is not None and y < SMALL * top:
                        assert text, f"{where}: {t['name']} {y} is unlabelled"


def test_chart_helpers_mark_missing_and_refuse_log_bars() -> None:
    src = (Source("run-a", "case", "v", "median"),)
    fig = dots(
        "c",
        "t",
        ["a", "b"],
        [("ours", [Num(2.0, "us", src), Text("refused", "too wide")]), ("peer", [Num(300.0, "us", src), None])],
        "µs",
        log_y=True,
    ).figure
    (mark,) = [t for t in fig["data"] if t.get("showlegend") is False]
    assert mark["x"] == ["b"] and mark["text"] == ["refused"] and mark["legendgroup"] == "ours"
    assert mark["y"][0] < 2.0  # under the data, on the log axis
    with pytest.raises(TypeError):
        bars("c", "t", ["a"], [("s", [Num(1.0, "us", src)])], "µs", log_y=True)  # type: ignore[call-arg]
    linear = bars("c", "t", ["a", "b"], [("s", [Num(1.0, "GBps", src), Num(4000.0, "GBps", src)])], "GB/s").figure
    assert linear["data"][0]["text"] == ["1 GB/s", ""]  # the sliver says what it is
    small = dots("c", "t", ["a", "b"], [("s", [Num(1.0, "GBps", src), Num(4000.0, "GBps", src)])], "GB/s").figure
    assert small["data"][0]["text"] == ["1 GB/s", ""]


def _section(html: str, heading_id: str) -> int:
    m = re.search(rf'<h2 id="{heading_id}"', html)
    assert m, heading_id
    return m.start()


TERMS = ("unresolved", "eager-composition", "one-launch-split", "l2", "device-time", "eager-call")


def test_softmax_page_answers_first_and_defines_its_terms(sites) -> None:
    html = (sites[0] / "softmax.html").read_text()
    answer, targets, losses = _section(html, "the-answer"), _section(html, "targets"), _section(html, "losses")
    results = _section(html, "results-by-direction-and-dtype")
    assert answer < html.index('id="softmax-summary"') < html.index('id="softmax-fwd-speedup"') < targets
    assert targets < losses < results < html.index('id="softmax-fwd-bf16"')
    # The per-dtype tables sit in sections a reader opens on purpose.
    for t in re.findall(r'id="(softmax-fwd(?:bwd)?-(?:bf16|fp16|fp32)(?:-eager)?(?:-times|-eager-times)?)"', html):
        before = html[: html.index(f'id="{t}"')]
        assert before.count("<details") - before.count("</details>") >= 1, f"{t} is not in a collapsed section"
    # The terms are defined in the answer, before the sections that use them, which link back.
    for term in TERMS:
        at = html.index(f'<dfn id="term-{term}">')
        assert answer < at < targets, term
    for term, section in (("unresolved", losses), ("one-launch-split", results), ("eager-composition", results)):
        assert html.find(f'href="#term-{term}"', section) > 0, term
    words = " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", html)).split())
    assert "Unresolved A comparison too close to call" in words
    assert "Eager composition The unfused softmax a careful user writes" in words


def test_a_ceiling_line_says_which_runs_it_stands_for() -> None:
    """A throughput chart's ceiling (the copy, cuBLAS's matrix rate: re-measured in every run)
    is its run's where the points share one; over several runs it is their median, labelled
    with how many and their range, not the first point's run called "same run"."""
    from types import SimpleNamespace

    from publish.studypage.charts import ceiling

    def case(run_id: str, peak: float) -> SimpleNamespace:
        return SimpleNamespace(run=SimpleNamespace(run_id=run_id, mm_peak=peak))

    one = [case("a", 732.0), case("a", 732.0)]
    assert ceiling(one, "rate", "TFLOP/s", lambda r: r.mm_peak) == ("rate, same run: 732 TFLOP/s", 732.0)
    many = [case("a", 732.0), case("b", 787.0), case("c", 760.0), case("b", 787.0)]
    label, value = ceiling(many, "rate", "TFLOP/s", lambda r: r.mm_peak)
    assert value == 760.0 and label == "rate: median 760 TFLOP/s over the 3 runs of these points (732-787)"


def test_a_missing_label_is_written_once_where_it_would_repeat() -> None:
    """Two series of one colour (a variant's device and eager call) missing in one category
    write the reason once; where a label is wider than a category, a run of categories where
    one series says the same writes it at the first; a different reason, a gap in the run,
    or a label that fits its category, is written again."""
    src = (Source("run-a", "case", "v", "median"),)
    n = Num(5.0, "us", src)
    absent = Text("not installed", "QuACK is not installed")
    many = [f"c{i}" for i in range(14)]  # 14 categories: "not installed" is wider than one
    quack = [absent, absent, n, absent, Text("refused", "odd width"), Text("refused", "odd width")] + [n] * 8
    fig = dots(
        "c",
        "t",
        many,
        [
            ("QuACK, device", quack),
            ("QuACK, eager call", [absent, n, n, absent] + [n] * 10),
            ("Liger, device", [absent] + [n] * 13),
        ],
        "µs",
        log_y=True,
        styles=[{"color": "#111111"}, {"color": "#111111", "symbol": "circle-open"}, {"color": "#222222"}],
    ).figure
    marks = {t["name"]: t for t in fig["data"] if t.get("showlegend") is False}
    # "refused" fits a category, so both of its run are labelled; "not installed" does not.
    assert marks["QuACK, device: no time"]["text"] == ["not installed", "", "not installed", "refused", "refused"]
    assert marks["QuACK, eager call: no time"]["text"] == ["", ""]  # said by the device series, same colour
    assert marks["Liger, device: no time"]["text"] == ["not installed"]  # another colour says it again
    assert all(why.startswith("no time: ") for t in marks.values() for why in t["customdata"])
    few = dots("c", "t", ["a", "b"], [("QuACK", [absent, absent])], "µs", log_y=True).figure
    assert next(t for t in few["data"] if t.get("showlegend") is False)["text"] == ["not installed"] * 2


def test_a_variant_keeps_its_colour_on_every_chart_of_a_page(sites) -> None:
    """The shared charts of a comparison page (speedups, TFLOP/s, bandwidth, device against
    eager) mark a variant the same wherever it appears, whichever others a chart shows, and
    no two variants alike (past the palette's colours, a variant takes another shape)."""
    shared = re.compile(r"-(speedup|eager-chart|tflops-\w+|bw-\w+)$")
    checked = 0
    for site in sites:
        for name in PAGES:
            colours: dict[str, set[str]] = {}
            for where, fig in _charts(site):
                if not where.startswith(name + "#") or not shared.search(where):
                    continue
                for t in fig["data"]:
                    if t.get("showlegend") is False:
                        continue
                    variant = re.sub(r", (device|eager call)$", "", t["name"])
                    marker = (t["marker"]["color"], t["marker"]["symbol"].removesuffix("-open"))
                    colours.setdefault(variant, set()).add(marker)
            checked += sum(len(c) > 0 for c in colours.values())
            assert {v: c for v, c in colours.items() if len(c) > 1} == {}, name
            # ... and no two variants of the page share a marker (colour and shape).
            markers = [next(iter(c)) for c in colours.values()]
            assert len(markers) == len(set(markers)), (name, colours)
    assert checked >= 10
