"""Home: what this is, the GPU and software of the latest run, the latest runs, and the
headline table."""

from __future__ import annotations

from typing import Any

from publish.numbers import Num, Source
from publish.pages import SiteData
from publish.pages.softmax import OURS, PEERS
from publish.runs import Run
from publish.tables import Column, Table, Text

HEADLINE_SHAPES = [(32, 127), (1024, 1024), (16384, 4096), (8192, 32768), (4, 32769), (64, 131072), (8, 1048576)]


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
        Column("ours", "Ours"),
        Column("pct", "% copy"),
        Column("best", "Fastest peer", numeric=False),
        Column("vs_best", "vs fastest peer"),
        Column("vs_compile", "vs torch.compile"),
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
                "ours": c.get(OURS).time(),
                "pct": c.get(OURS).pct_copy(),  # type: ignore[union-attr]
                "best": Text(PEERS[best]) if best else Text("—"),
                "vs_best": c.speedup(OURS, best) if best else None,
                "vs_compile": c.speedup(OURS, "compile"),
            }
        )
    return table


def context(data: SiteData) -> dict[str, Any]:
    latest = data.latest
    recent = list(reversed(data.runs))[:10]
    return {
        "latest": latest,
        "peaks": peaks(latest) if latest else None,
        "recent": [
            (r, Num(len(r.doc["cases"]), "count", (Source(r.run_id, statistic="cases in the file"),))) for r in recent
        ],
        "headline": headline(data),
    }
