"""Home: what this is, the GPU and software of the latest run, the latest runs, and the
headline table."""

from __future__ import annotations

from typing import Any

from publish.numbers import Num, Source
from publish.pages import SiteData
from publish.pages.softmax import OURS, PEERS
from publish.runs import Run
from publish.tables import Column, Table, Text

HEADLINE_SHAPES = [
    (32, 127),
    (1024, 1024),
    (16384, 4096),
    (8192, 32768),
    (4, 32769),
    (1000, 50257),
    (4096, 50257),
    (64, 131072),
    (4096, 151936),
    (8, 1048576),
]


def peaks(run: Run) -> dict[str, Num]:
    p = run.env["peaks"]
    src = Source(run.run_id, statistic=p.get("statistic", ""), detail="measured in this run before its cases")
    return {
        "copy_bw": Num(p["copy_GBps"], "GBps", (src,), note="device-to-device copy, bytes read + written"),
        "mm_rate": Num(p["mm_bf16_TFLOPs"], "TFLOPs", (src,), note="cuBLAS bf16 matrix product on random data"),
    }


def headline(data: SiteData) -> Table:
    results = data.studies["softmax"]
    cols = [
        Column("shape", "Softmax, bf16 forward, cold L2", numeric=False),
        Column("ours", "Ours", "median device time, graph replay"),
        Column("eager", "Ours, eager call", "median eager call, host included (not measured in runs of schema 1)"),
        Column("pct", "% copy"),
        Column("best", "Fastest peer", numeric=False),
        Column("vs_best", "vs fastest peer", "device time"),
        Column("vs_compile", "vs torch.compile", "device time"),
    ]
    table = Table("home-headline", "Headline: our softmax against the fastest alternative, per shape", cols)
    for rows, width in HEADLINE_SHAPES:
        c = results.find(direction="fwd", dtype="bf16", rows=rows, cols=width, l2="cold")
        if c is None or c.get(OURS) is None:
            continue
        timed = [p for p in PEERS if c.get(p) is not None]
        best = min(timed, key=lambda p: c.get(p).summary.median) if timed else None  # type: ignore[union-attr]
        table.rows.append(
            {
                "shape": c.shape,
                "ours": c.get(OURS).time(),  # type: ignore[union-attr]
                "eager": e.time()
                if (e := c.eager().get(OURS))
                else Text("not measured", "this run took no eager samples"),
                "pct": c.get(OURS).pct_copy(),  # type: ignore[union-attr]
                "best": Text(PEERS[best]) if best else Text("—"),
                "vs_best": c.speedup(OURS, best) if best else None,
                "vs_compile": c.speedup(OURS, "compile"),
            }
        )
    return table


STUDY_PAGES = {
    "softmax": (
        "Softmax",
        "softmax.md",
        "one Triton kernel with three row plans against torch, torch.compile, Liger-Kernel and QuACK; device time "
        "and the eager call",
    ),
    "rowgrid": (
        "Row-plan grid",
        "rowgrid.md",
        "every plan over a grid of row counts and widths; the planner scored by regret, its thresholds fitted on one "
        "run and tested on another",
    ),
    "dispatch": (
        "Dispatch",
        "dispatch.md",
        "the host time of one eager call, piece by piece, and chains of calls eager, compiled and graph-replayed",
    ),
}


def studies(data: SiteData) -> list[dict[str, Any]]:
    out = []
    for study, (name, page, what) in STUDY_PAGES.items():
        runs = [r for r in data.runs if r.study == study]
        withdrawn = [r for r in data.all_runs if r.study == study and r.run_id in data.withdrawn]
        other = [r for r in data.in_force if r.study == study and r.run_id in data.other_gpu]
        src = tuple(Source(r.run_id, statistic="run in force") for r in runs)
        out.append(
            {
                "name": name,
                "page": page,
                "what": what,
                "runs": Num(len(runs), "count", src) if runs else None,
                "withdrawn": len(withdrawn),
                "other_gpu": len(other),
                "gpu": data.reference_gpus.get(study),
                "newest": runs[-1] if runs else None,
            }
        )
    return out


def machine_run(data: SiteData) -> Run | None:
    """The run whose GPU and software Home describes: the newest in force on the GPU the
    headline (softmax) results come from, so that a newer run on another GPU, kept out of
    the results, does not change the machine the page names."""
    ref = data.reference_gpus.get("softmax")
    runs = [r for r in data.runs if ref is None or r.gpu == ref]
    return runs[-1] if runs else None


def context(data: SiteData) -> dict[str, Any]:
    latest = machine_run(data)
    recent = list(reversed(data.runs))[:10]
    other = [r for r in data.in_force if r.run_id in data.other_gpu]
    return {
        "other_gpu": Num(len(other), "count", tuple(Source(r.run_id, statistic="run of another GPU") for r in other))
        if other
        else None,
        "latest": latest,
        "peaks": peaks(latest) if latest else None,
        "recent": [
            (r, Num(len(r.doc["cases"]), "count", (Source(r.run_id, statistic="cases in the file"),))) for r in recent
        ],
        "headline": headline(data),
        "studies": studies(data),
    }
