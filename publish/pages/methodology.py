"""Methodology: how the samples were taken, with the settings read from the runs."""

from __future__ import annotations

from typing import Any

from publish.numbers import Num, Source
from publish.pages import SiteData


def context(data: SiteData) -> dict[str, Any]:
    run = data.latest
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
    }
