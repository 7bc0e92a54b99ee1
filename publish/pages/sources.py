"""Sources: every stored run with its provenance and a link to the raw file."""

from __future__ import annotations

from typing import Any

from publish.numbers import Num, Source
from publish.pages import SiteData
from publish.runs import Run


def describe(run: Run, used: set[str], withdrawn: Any = None, reference: Any = None) -> dict[str, Any]:
    doc, env = run.doc, run.env
    src = Source(run.run_id, statistic="recorded in the run")
    before = env["before"]
    variants = [v for c in doc["cases"] for v in c["variants"].values()]
    return {
        "run": run,
        "raw": f"runs/{run.study}/{run.run_id}.json",
        "used": run.run_id in used,
        "withdrawn": withdrawn,
        "other_gpu": reference,  # the study's reference GPU, when this run measured another
        "gpu": run.gpu,
        "cases": Num(len(doc["cases"]), "count", (src,)),
        "samples": Num(sum(len(v["samples_us"]) for v in variants), "count", (src,)),
        "errors": Num(sum(1 for v in variants if v["error"]), "count", (src,)),
        "sm_clock": Num(before["sm_clock_mhz"], "MHz", (src,)) if before.get("sm_clock_mhz") is not None else None,
        "util": Num(before["utilization_pct"], "pct", (src,)) if before.get("utilization_pct") is not None else None,
        "copy": Num(env["peaks"]["copy_GBps"], "GBps", (src,)),
        "mm": Num(env["peaks"]["mm_bf16_TFLOPs"], "TFLOPs", (src,)),
        "sms": Num(env["gpu"]["sm_count"], "int", (src,)),
    }


def context(data: SiteData) -> dict[str, Any]:
    from publish.pages.home import studies

    used = {r.run_id for s in data.studies.values() for r in s.used_runs}
    return {
        "entries": [
            describe(r, used, data.withdrawn.get(r.run_id), data.other_gpu.get(r.run_id))
            for r in reversed(data.all_runs)
        ],
        "studies": studies(data),
    }
