"""The tidy results frame (publish/frame.py): its statistics against the raw samples, the
tables and downloads built from it (a number changed in the frame is the number the page and
its download show), every table on the site against it, and the README's two-line load run
as written."""

from __future__ import annotations

import functools
import json
import math
import re
import statistics as pystats
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sitekit import ROOT, newest, scratch_root, tamper

from contract.schema import RunFileError
from publish import frame as fr
from publish.numbers import Num
from publish.pages import SiteData, study_pages
from publish.runs import load_runs
from publish.site import load_site_data, render

LATEST = "data/runs/softmax/softmax-20261129T231718Z-96cdb83.json"
WITHDRAWN = "data/runs/softmax/softmax-20261129T085707Z-2545267-quick.json"  # listed in data/withdrawn.yaml


def readme_block(marker: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(rf"<!-- {marker} -->\n```python\n(.*?)\n```", text, re.S)
    assert found, f"README.md has no python block after <!-- {marker} -->"
    return found.group(1)


@pytest.fixture(scope="module")
def runs():  # type: ignore[no-untyped-def]
    return load_runs(ROOT / "data")


@pytest.fixture(scope="module")
def df(runs) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    return fr.frame(runs)


def test_readme_loads_a_stored_run_in_two_lines(monkeypatch) -> None:
    code = readme_block("load a run")
    assert len([line for line in code.splitlines() if line.strip()]) == 2, code
    path = re.search(r'load_run\("([^"]+)"\)', code)
    assert path and (ROOT / path.group(1)).is_file(), "the README must load a real stored run"
    monkeypatch.chdir(ROOT)
    scope: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), scope)
    df = scope["df"]
    assert isinstance(df, pd.DataFrame)
    doc = json.loads((ROOT / path.group(1)).read_text())
    assert set(df["run_id"]) == {doc["run_id"]}
    assert set(df["case_id"]) == {c["id"] for c in doc["cases"]}
    # The README's next block runs on it and gives what it says: medians by case and variant.
    exec(compile(readme_block("use the frame"), "README.md", "exec"), scope)
    times, ours = scope["times"], scope["ours"]
    case = doc["cases"][0]
    assert times.loc[case["id"], "triton"] == pystats.median(case["variants"]["triton"]["samples_us"])
    assert list(ours["unit"].unique()) == ["GB/s"] and len(ours) == len(doc["cases"])


def test_the_frame_is_tidy(df) -> None:
    assert list(df.columns[: len(fr.RUN_COLUMNS)]) == list(fr.RUN_COLUMNS)
    assert list(df.columns[-len(fr.MEASURE_COLUMNS) :]) == list(fr.MEASURE_COLUMNS)
    for column in ("case_id", "op", "direction", "dtype", "rows", "cols", "l2", "bytes", "flops"):
        assert column in df.columns
    assert not df.duplicated(list(fr.KEY)).any(), "one row per run × case × variant × timer × statistic"
    # Every statistic carries its unit, every value is a finite number.
    units = df["statistic"].map(lambda s: fr.STATISTICS[s][0])
    assert (df["unit"] == units).all()
    assert np.isfinite(df["value"]).all()
    assert df["value"].dtype == "float64" and df["rows"].dtype == "Int64"
    assert str(df["started_at"].dt.tz) == "UTC"
    assert set(df["timer"].dropna()) <= {"cuda-graph", "cuda-events", "eager-events", "host-loop"}


def median_interval(xs: list[float]) -> tuple[float, float]:
    """The distribution-free 95% interval of the median: the order statistics x(r) and
    x(n+1-r) for the largest r with P(Binomial(n, 1/2) <= r-1) <= 2.5% (the whole range when
    no r qualifies), from the binomial sum itself."""
    n, xs = len(xs), sorted(xs)
    r = _interval_rank(n)
    return (xs[r - 1], xs[n - r]) if r >= 1 else (xs[0], xs[-1])


@functools.cache
def _interval_rank(n: int) -> int:
    below = [sum(math.comb(n, k) for k in range(r)) / 2**n for r in range(1, n // 2 + 2)]
    return max((r for r, p in enumerate(below, start=1) if p <= 0.025), default=0)


def test_every_statistic_matches_the_raw_samples(runs, df) -> None:
    """Recomputed here from the run files with numpy, the statistics module and a binomial
    sum, not with the functions the frame and the pages share."""
    measured: dict[tuple[str, ...], dict[str, float]] = {}  # (run, case, variant, timer) -> statistic -> value
    for *key, stat, value in df[[*fr.KEY, "value"]].itertuples(index=False):
        measured.setdefault(tuple(key), {})[stat] = value
    checked = 0
    for run in runs:
        peak = float(run.doc["env"]["peaks"]["copy_GBps"])
        for case in run.doc["cases"]:
            for name, v in case["variants"].items():
                for key, timer in (("samples_us", v.get("timer")), ("eager_us", "eager-events")):
                    xs = v.get(key) or []
                    if not xs:
                        continue
                    got = measured[(run.run_id, case["id"], name, timer)]
                    median = pystats.median(xs)
                    p10, p25, p75, p90 = np.percentile(xs, [10, 25, 75, 90])
                    want = {
                        "n": len(xs),
                        "median": median,
                        "mean": pystats.fmean(xs),
                        "min": min(xs),
                        "max": max(xs),
                        "p10": p10,
                        "p25": p25,
                        "p75": p75,
                        "p90": p90,
                    }
                    device = key == "samples_us" and timer in ("cuda-graph", "cuda-events")
                    if device:
                        gbps = case["bytes"] / (median * 1e3)
                        want |= {"gbps": gbps, "pct_copy_peak": 100 * gbps / peak}
                        if case.get("flops"):
                            want["tflops"] = case["flops"] / (median * 1e6)
                            want["pct_mm_peak"] = (
                                100 * want["tflops"] / float(run.doc["env"]["peaks"]["mm_bf16_TFLOPs"])
                            )
                    want["ci95_low"], want["ci95_high"] = median_interval(xs)
                    assert set(got) == set(want), (run.run_id, case["id"], name)
                    for stat, value in want.items():
                        assert math.isclose(got[stat], value, rel_tol=1e-12), (run.run_id, case["id"], name, stat)
                    checked += 1
    assert checked > 10000


def test_a_refused_variant_keeps_one_row_with_its_reason(runs, df) -> None:
    refused = [
        (run.run_id, case["id"], name, v["error"])
        for run in runs
        for case in run.doc["cases"]
        for name, v in case["variants"].items()
        if v["error"]
    ]
    assert refused, "the stored runs hold refusals (QuACK at odd widths)"
    key = ["run_id", "case_id", "variant"]
    want = pd.DataFrame(refused, columns=[*key, "error"])
    rows = df.merge(want, on=key, how="inner", suffixes=("", "_in_file"))
    assert len(rows) == len(want), "one row for each refusal, no more"
    assert (rows["statistic"] == "n").all() and (rows["value"] == 0.0).all()
    assert (rows["error"] == rows["error_in_file"]).all()
    assert df.loc[df["statistic"] != "n", "error"].isna().all()


def test_case_parameters_are_columns(runs, df) -> None:
    for run in runs:
        case = run.doc["cases"][-1]
        row = df[(df["run_id"] == run.run_id) & (df["case_id"] == case["id"])].iloc[0]
        for key, value in case["case"].items():
            assert row[key] == value, (run.run_id, key)
        assert row["bytes"] == case["bytes"]
        assert row["gpu"] == run.doc["env"]["gpu"]["name"]
        assert row["commit"] == run.doc["code"]["commit"]


def test_stats_is_the_frame_pivoted(df) -> None:
    """The pivot the results layer reads (one row per measurement, one column per statistic)
    holds exactly the frame's values, no more, and each measurement's timer."""
    stats = fr.Stats(df)
    assert not stats.table.index.duplicated().any()
    key = list(fr.MEASUREMENT)
    back = (
        stats.table.drop(columns="timer")
        .reset_index()
        .melt(id_vars=key, var_name="statistic", value_name="value")
        .dropna(subset=["value"])
    )
    both = df.merge(back, on=[*key, "statistic"], how="outer", indicator=True, suffixes=("", "_pivot"))
    assert (both["_merge"] == "both").all() and len(both) == len(df)
    assert (both["value"] == both["value_pivot"]).all()
    timers = df[[*key, "timer"]].drop_duplicates().merge(stats.table["timer"].reset_index(), on=key)
    assert len(timers) == len(stats.table)
    assert (timers["timer_x"].fillna("-") == timers["timer_y"].fillna("-")).all()
    # A variant that refused the shape has no summary; a measured one has the frame's.
    refused = df[df["error"].notna()].iloc[0]
    assert stats.summary(*(refused[c] for c in key)) is None
    row = df[(df["statistic"] == "median") & (df["samples"] == "eager_us")].iloc[0]
    s = stats.summary(*(row[c] for c in key))
    assert s is not None and s.median == row["value"]


def test_the_tables_and_downloads_take_their_numbers_from_the_frame(tmp_path) -> None:
    """Change one measurement's statistics in the frame, not in its run file: the study
    page's table, its download and the page text show the frame's numbers, and the verdict
    follows them (the tables are built from the frame, not from the samples)."""
    root = scratch_root(tmp_path, studies=("softmax",))
    data = load_site_data(root)
    spec = next(s for s in study_pages() if s.study == "softmax")
    results = data.studies["softmax"]
    # A case with ours and at least two peers measured (a peer may be missing from the newest
    # run, e.g. a package its machine lacked: the page shows the rest).
    case = next(c for c in results.cases.values() if c.get(spec.ours) and sum(bool(c.get(p)) for p in spec.peers) >= 2)
    peers = [p for p in spec.peers if case.get(p)]
    key = (case.run.run_id, case.case_id, spec.ours, "samples_us")
    ours = case.get(spec.ours).summary  # type: ignore[union-attr]
    assert ours is not None
    doctored = data.stats.frame.copy()
    at = np.logical_and.reduce([doctored[c] == v for c, v in zip(fr.MEASUREMENT, key, strict=True)])
    for stat in ("median", "ci95_low", "ci95_high", "p25", "p75"):
        doctored.loc[at & (doctored["statistic"] == stat), "value"] *= 1000  # ours now loses everywhere
    doctored.loc[at & (doctored["statistic"] == "gbps"), "value"] = 98765.0
    doctored.loc[at & (doctored["statistic"] == "pct_copy_peak"), "value"] = 43.21
    rendered = render(root, SiteData(data.all_runs, data.withdrawals, shared_stats=fr.Stats(doctored)), "https://x/")

    table_id = f"softmax-{case.params['direction'].replace('+', '')}-{case.params['dtype']}"
    table = next(t for _, t in rendered.tables if t.id == table_id)
    row = next(r for r in table.rows if isinstance(r["ours"], Num) and r["ours"].sources[0].case == case.case_id)
    assert row["ours"].value == 1000 * ours.median
    assert row["gbps"].value == 98765.0 and row["pct"].value == 43.21
    for peer in peers:
        theirs = case.get(peer).summary.median  # type: ignore[union-attr]
        # The value follows the frame; the verdict's interval is that of the per-round ratios of
        # the run's own samples (publish.stats.paired_ratio): a loss where those samples show
        # one too, else unresolved (a ratio of medians on the other side of its interval).
        samples = case.ratio(peer, spec.ours)
        assert samples is not None and samples.paired
        want = "loss" if samples.hi < 1 else "tie"
        assert row[peer].value == theirs / (1000 * ours.median) and row[peer].css == want, peer
    doc = json.loads(rendered.exports[f"tables/{table_id}.json"], parse_constant=strict_json_only)
    cells = next(r["cells"] for r in doc["rows"] if r["cells"]["ours"]["sources"][0]["case"] == case.case_id)
    assert cells["ours"]["value"] == 1000 * ours.median
    assert cells["ours"]["sources"][0]["measured"]["median"] == 1000 * ours.median
    assert cells["gbps"]["value"] == 98765.0 and cells["gbps"]["text"] == "98,765"
    assert "98,765" in rendered.pages["softmax.md"]


@pytest.fixture(scope="module")
def site(stored_site):  # type: ignore[no-untyped-def]
    return stored_site.report.data, stored_site.report.rendered


def _median_cells(table) -> list[Num]:  # type: ignore[no-untyped-def]
    return [c for row in table.rows for c in row.values() if isinstance(c, Num) and c.sources]


def test_every_measured_number_in_every_table_is_in_the_frame(site, df) -> None:
    """A table cell made of one measurement (a median, its bandwidth, its share of the copy
    peak) equals the frame's statistic; a cell made of two (a ratio, a difference) is that
    arithmetic on the frame's medians."""
    _, rendered = site
    measured = fr.Measured(fr.Stats(df))

    def median(s) -> float:  # type: ignore[no-untyped-def]
        found = measured(s)
        assert found is not None, s
        n = re.match(r"(?:bytes / )?median of (\d+) samples", s.statistic)
        if n:
            assert int(n.group(1)) == found["n"], s
        return found["median"]

    rows = df.set_index(list(fr.KEY))["value"].sort_index()
    checked = {"one": 0, "two": 0}
    for _, table in rendered.tables:
        for cell in _median_cells(table):
            srcs = [s for s in cell.sources if s.case and s.variant]
            if len(srcs) != len(cell.sources) or not srcs[0].statistic.startswith(("median", "bytes / median")):
                continue
            if len(srcs) == 1:
                s = srcs[0]
                timer = s.timer or measured(s)["timer"]
                stat = {"GBps": "gbps", "GBps_bare": "gbps", "pct": "pct_copy_peak"}.get(cell.kind, "median")
                assert cell.value == rows.loc[(s.run_id, s.case, s.variant, timer, stat)], (table.id, s)
                checked["one"] += 1
            elif len(srcs) == 2 and "median of" in srcs[0].statistic:
                a, b = median(srcs[0]), median(srcs[1])
                options = {
                    "x": (a / b, b / a),
                    "us": (a - b, b - a),
                    "us_bare": (a - b, b - a),
                    "pct": (100 * (a / b - 1), 100 * (b / a - 1)),
                    "pct_signed": (100 * (a / b - 1), 100 * (b / a - 1)),
                }.get(cell.kind)
                if options is None:
                    continue  # a p-value: computed from the samples, not the medians
                assert any(math.isclose(cell.value, o, rel_tol=1e-9, abs_tol=1e-12) for o in options), (
                    table.id,
                    cell,
                )
                checked["two"] += 1
    assert checked["one"] > 3000 and checked["two"] > 1500, checked


def strict_json_only(constant: str) -> None:
    pytest.fail(f"{constant} is not strict JSON")


def test_downloads_carry_the_frames_statistics(site, df) -> None:
    """Each measured source in a table's JSON download names its statistics as the frame
    holds them, and the number shown is its median where the cell is one median."""
    _, rendered = site
    rows = df.set_index(list(fr.KEY))["value"].sort_index()
    seen = 0
    for path, text in rendered.exports.items():
        if not path.endswith(".json"):
            continue
        doc = json.loads(text, parse_constant=strict_json_only)
        for row in doc["rows"]:
            for cell in row["cells"].values():
                for s in cell.get("sources", []):
                    if not (s["case"] and s["variant"]):
                        assert "measured" not in s
                        continue
                    if "measured" not in s:  # no such measurement (see the next test)
                        continue
                    m = s["measured"]
                    key = (s["run_id"], s["case"], s["variant"], m["timer"])
                    for stat in fr.MEASURED:
                        assert m[stat] == rows.loc[(*key, stat)], (path, key, stat)
                    assert m["unit"] == "us"
                    if len(cell["sources"]) == 1 and cell["unit"] in ("us", "us_bare"):
                        assert cell["value"] == m["median"]
                    seen += 1
    assert seen > 5000


def test_every_source_that_names_a_measurement_names_one_its_run_took(site, df) -> None:
    _, rendered = site
    taken = set(zip(df["run_id"], df["case_id"], df["variant"], strict=True))
    named = {
        (table.id, s.run_id, s.case, s.variant)
        for _, table in rendered.tables
        for cell in _median_cells(table)
        for s in cell.sources
        if s.case and s.variant
    }
    assert sorted(n for n in named if n[1:] not in taken) == []


def test_load_run_marks_a_withdrawn_run_and_checks_the_file(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert fr.load_run(WITHDRAWN)["withdrawn"].all()
    assert not fr.load_run(Path(LATEST).resolve())["withdrawn"].any()
    every = fr.load_runs("data")
    assert set(every.loc[every["withdrawn"], "run_id"]) == {w.run_id for w in load_site_data(ROOT).withdrawals}
    # A broken file is refused with its name and field, as the build refuses it.
    root = scratch_root(tmp_path)
    path = newest(root)
    tamper(path, lambda d: d["cases"][0]["variants"]["triton"]["samples_us"].__setitem__(0, -1.0))
    with pytest.raises(RunFileError, match=r"cases\[0\]\.variants\.triton\.samples_us\[0\]"):
        fr.load_run(path)
