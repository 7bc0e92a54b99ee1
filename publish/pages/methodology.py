"""Methodology: how the samples were taken, with the settings read from the runs."""

from __future__ import annotations

from typing import Any

from publish.numbers import Num, Source
from publish.pages import SiteData
from publish.runs import Run


def _settings_run(data: SiteData) -> Run | None:
    """The newest run of a study timed by the shared harness (the softmax study), else the
    newest run of any study."""
    timed = [r for r in data.runs if r.study == "softmax"]
    return timed[-1] if timed else data.latest


def _rotation(data: SiteData) -> dict[str, Any] | None:
    """How the cold cases of the schema-2 runs in force rotated their inputs."""
    cold = [
        (r, c)
        for r in data.runs
        if r.doc["schema_version"] >= 2
        for c in r.doc["cases"]
        if c["case"].get("l2") == "cold" and c.get("rotation")
    ]
    if not cold:
        return None
    small = [(r, c) for r, c in cold if c["rotation"]["bytes"] <= r.env["gpu"]["l2_bytes"]]
    runs = sorted({r.run_id for r, _ in cold})
    src = tuple(Source(r, statistic="cold cases and their rotation") for r in runs)
    most = max(c["rotation"]["sets"] for _, c in cold)
    return {
        "cases": Num(len(cold), "count", src),
        "small": Num(len(small), "count", src),
        "most_sets": Num(most, "count", src, note="the most input sets any cold case rotated through"),
        "examples": sorted({c["id"] for _, c in small})[:6],
    }


def context(data: SiteData) -> dict[str, Any]:
    run = _settings_run(data)
    if run is None:
        return {"run": None}
    m = run.doc["method"]
    src = Source(run.run_id, statistic="method settings recorded in the run")
    return {
        "run": run,
        "rounds": Num(m["rounds"], "count", (src,)),
        "target_ms": Num(m.get("target_sample_ms", 0), "ms", (src,), note="target length of one warm sample"),
        "burst_ms": Num(m["warmup"].get("burst_ms", 0), "ms", (src,), note="warm-up burst"),
        "idle_s": Num(m["warmup"].get("idle_s", 0), "s", (src,), note="idle gap after which a burst runs"),
        "check": m.get("check", ""),
        "l2": Num(run.env["gpu"]["l2_bytes"] / 2**20, "MiB", (src,), note="L2 size reported by the driver"),
        "eager": bool(m.get("eager_samples")),
        "rotation": _rotation(data),
        "studies": [
            ("Softmax", "softmax.md", "every plan and peer over shapes from 32×127 to 8×1048576"),
            ("Row-plan grid", "rowgrid.md", "every plan over a grid of row counts and widths, scored by regret"),
            ("Dispatch", "dispatch.md", "host time of one eager call, piece by piece, and chains of calls"),
        ],
    }
