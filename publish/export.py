"""Downloads and citations for tables: exactly the rows shown, with the runs behind each row.

Every table is written as ``tables/<id>.csv`` (the cells as displayed, plus the run ids of
each row) and ``tables/<id>.json`` (the same cells with their unrounded values, units and
sources, each measured source with its statistics, and the provenance of every run), and
gets a "cite this table" block.  The numbers are the table's own, and the table took them
from the tidy frame of the runs (:mod:`publish.frame`, through :mod:`publish.results`); the
statistics each source carries are read from the same frame (:class:`publish.frame.Measured`),
so a download and the page never disagree.

Both are safe to open: the JSON is strict (a value that is not a finite number is written
as null, its text says "—"), and no CSV cell can start a spreadsheet formula (a text cell
beginning with = + - @ or a control character gets a leading apostrophe, as spreadsheets
expect; a number is left as it is)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from publish.numbers import Num, Source
from publish.runs import Run
from publish.tables import Cell, Table, Text


def cell_text(cell: Cell) -> str:
    if cell is None:
        return "—"
    if isinstance(cell, Num):
        return cell.text()
    if isinstance(cell, Text):
        return cell.text
    return str(cell)


def row_runs(row: dict[str, Cell]) -> list[str]:
    ids: list[str] = []
    for cell in row.values():
        if isinstance(cell, Num):
            ids += [s.run_id for s in cell.sources if s.run_id not in ids]
    return ids


FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\x00")
# What the number formats write: a sign, digits with thousands commas, a decimal part, an
# exponent, then a unit.  Such a cell is a number to a spreadsheet, not a formula.
NUMBER = re.compile(r"^[+-]?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?(?:\s?(?:%|×|µs|ms|s|MHz|GB/s|TFLOP/s|MiB))?$")


def csv_cell(text: str) -> str:
    """A cell a spreadsheet shows as text: one that would start a formula gets a leading
    apostrophe (a number such as "-3.1%" is left alone)."""
    if text.startswith(FORMULA_START) and not NUMBER.match(text):
        return "'" + text
    return text


def to_csv(table: Table) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([csv_cell(c.label) for c in table.columns] + ["run_ids"])
    for row in table.rows:
        w.writerow([csv_cell(cell_text(row.get(c.key))) for c in table.columns] + [csv_cell(" ".join(row_runs(row)))])
    return buf.getvalue()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def strict_json(doc: Any) -> str:
    """JSON that every parser reads: no NaN or Infinity (raises ValueError if one is left)."""
    return json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False)


# A source's statistics as the tidy frame holds them (publish.frame.Measured), or None.
Lookup = Callable[[Source], "dict[str, Any] | None"]


def _source_json(source: Source, measured: Lookup | None) -> dict[str, Any]:
    out: dict[str, Any] = dict(vars(source))
    found = measured(source) if measured is not None else None
    if found is not None:
        out["measured"] = {k: _finite(v) for k, v in found.items()}
    return out


def _cell_json(cell: Cell, measured: Lookup | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"text": cell_text(cell)}
    if isinstance(cell, Num):
        out |= {
            "value": _finite(cell.value),
            "unit": cell.kind,
            "note": cell.note,
            "sources": [_source_json(s, measured) for s in cell.sources],
        }
    elif isinstance(cell, Text) and cell.title:
        out["note"] = cell.title
    return out


@dataclass(frozen=True)
class Citation:
    key: str
    url: str
    footnote: str
    bibtex: str


def citation(table: Table, url: str, runs: list[Run]) -> Citation:
    """How to cite a table: the GPU, runs, commits and date behind it; a table no run is
    behind (thresholds set in the code) says so instead of naming empty runs."""
    title = table.title.replace("{", "").replace("}", "")
    if not runs:
        key = f"klabnotes:{table.id}"
        footnote = (
            f"[^{table.id}]: Kernel Lab Notes, \u201c{table.title}\u201d, table `{table.id}` "
            f"(set, not measured: no run is behind it). <{url}>"
        )
        bibtex = "\n".join(
            [
                f"@misc{{{key},",
                f"  title        = {{Kernel Lab Notes: {title}}},",
                f"  howpublished = {{\\url{{{url}}}}},",
                f"  note         = {{Table {table.id}; set, not measured}}",
                "}",
            ]
        )
        return Citation(key, url, footnote, bibtex)
    gpus = sorted({r.env["gpu"]["name"] for r in runs})
    commits = sorted({r.short_commit for r in runs})
    dates = sorted({r.doc["started_at"][:10] for r in runs})
    when = dates[-1]
    run_list = ", ".join(r.run_id for r in runs)
    key = f"klabnotes:{table.id}:{when}"
    footnote = (
        f"[^{table.id}]: Kernel Lab Notes, \u201c{table.title}\u201d, table `{table.id}`, "
        f"{' / '.join(gpus)}, runs {run_list} (commit {', '.join(commits)}), {when}. <{url}>"
    )
    bibtex = "\n".join(
        [
            f"@misc{{{key},",
            f"  title        = {{Kernel Lab Notes: {title}}},",
            f"  howpublished = {{\\url{{{url}}}}},",
            f"  note         = {{Table {table.id}; {' / '.join(gpus)}; runs {run_list}; commit {', '.join(commits)}}},",
            f"  year         = {{{when[:4]}}},",
            f"  date         = {{{when}}}",
            "}",
        ]
    )
    return Citation(key, url, footnote, bibtex)


def to_json(table: Table, cite: Citation, runs: list[Run], measured: Lookup | None = None) -> dict[str, Any]:
    """The table's rows with their unrounded values and sources; with ``measured``, each
    source that names a measurement also carries its statistics from the tidy frame (its
    sample count, median, 95% interval of the median, 10th and 90th percentiles)."""
    return {
        "id": table.id,
        "title": table.title,
        "url": cite.url,
        "columns": [{"key": c.key, "label": c.label, "help": c.help} for c in table.columns],
        "rows": [
            {
                "cells": {c.key: _cell_json(row.get(c.key), measured) for c in table.columns},
                "run_ids": row_runs(row),
            }
            for row in table.rows
        ],
        "runs": [
            {
                "run_id": r.run_id,
                "gpu": r.env["gpu"]["name"],
                "started_at": r.doc["started_at"],
                "commit": r.doc["code"]["commit"],
                "dirty": r.doc["code"]["dirty"],
                "command": r.doc["command"],
                "raw": f"runs/{r.study}/{r.run_id}.json",
            }
            for r in runs
        ],
        "cite": {"footnote": cite.footnote, "bibtex": cite.bibtex},
    }
