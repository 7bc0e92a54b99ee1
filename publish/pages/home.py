"""Home: what this is, the GPU and software of the latest run, the latest runs, and the
headline table."""

from __future__ import annotations

from typing import Any

from publish.numbers import Num, Source
from publish.pages import SiteData, study_pages
from publish.runs import Run
from publish.studypage.spec import DIRECTION_WORDS, StudyPage
from publish.tables import Column, Table, Text


def peaks(run: Run) -> dict[str, Num]:
    p = run.env["peaks"]
    src = Source(run.run_id, statistic=p.get("statistic", ""), detail="measured in this run before its cases")
    return {
        "copy_bw": Num(p["copy_GBps"], "GBps", (src,), note="device-to-device copy, bytes read + written"),
        "mm_rate": Num(p["mm_bf16_TFLOPs"], "TFLOPs", (src,), note="cuBLAS bf16 matrix product on random data"),
    }


def headline_study() -> StudyPage | None:
    """The study whose results head Home: the first in the registry that declares a headline."""
    return next((s for s in study_pages() if s.headline is not None), None)


def headline(data: SiteData) -> Table | None:
    spec = headline_study()
    if spec is None or spec.headline is None:
        return None
    h, results, ours = spec.headline, data.studies[spec.study], spec.ours
    where = f"{h.dtype} {DIRECTION_WORDS.get(h.direction, h.direction)}, {h.l2} L2"
    cols = [
        Column("shape", f"{spec.title}, {where}", numeric=False),
        Column("ours", "Ours", "median device time, graph replay"),
        Column("eager", "Ours, eager call", "median eager call, host included (not measured in runs of schema 1)"),
        Column("pct", "% copy"),
        Column("best", "Fastest peer", numeric=False),
        Column("vs_best", "vs fastest peer", "device time"),
        Column(f"vs_{h.versus}", f"vs {results.label(h.versus)}", "device time"),
    ]
    table = Table(
        "home-headline", f"Headline: our {spec.title.lower()} against the fastest alternative, per shape", cols
    )
    for rows, width in h.shapes:
        c = results.find(direction=h.direction, dtype=h.dtype, rows=rows, cols=width, l2=h.l2)
        if c is None or c.get(ours) is None:
            continue
        timed = [p for p in spec.peers if c.get(p) is not None]
        best = min(timed, key=lambda p: c.get(p).summary.median) if timed else None  # type: ignore[union-attr]
        table.rows.append(
            {
                "shape": c.shape,
                "ours": c.get(ours).time(),  # type: ignore[union-attr]
                "eager": e.time()
                if (e := c.eager().get(ours))
                else Text("not measured", "this run took no eager samples"),
                "pct": c.get(ours).pct_copy(),  # type: ignore[union-attr]
                "best": Text(results.label(best)) if best else Text("—"),
                "vs_best": c.speedup(ours, best) if best else None,
                f"vs_{h.versus}": c.speedup(ours, h.versus),
            }
        )
    return table


def studies(data: SiteData) -> list[dict[str, Any]]:
    out = []
    for spec in study_pages():
        study = spec.study
        runs = [r for r in data.runs if r.study == study]
        withdrawn = [r for r in data.all_runs if r.study == study and r.run_id in data.withdrawn]
        other = [r for r in data.in_force if r.study == study and r.run_id in data.other_gpu]
        src = tuple(Source(r.run_id, statistic="run in force") for r in runs)
        out.append(
            {
                "name": spec.title,
                "page": spec.output,
                "what": spec.summary,
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
    headline results come from, so that a newer run on another GPU, kept out of the
    results, does not change the machine the page names."""
    spec = headline_study()
    ref = data.reference_gpus.get(spec.study) if spec is not None else None
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
        "headline_study": headline_study(),
        "studies": studies(data),
    }
