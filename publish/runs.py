"""Loading the stored runs: every file under ``data/runs/<study>/`` is parsed and checked
against the contract before anything is rendered, so a bad file stops the build with its
name and the offending field instead of half a site."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from publish.schema import RunFileError, validate_run


@dataclass(frozen=True)
class Run:
    run_id: str
    study: str
    path: Path
    doc: dict[str, Any]

    @property
    def started(self) -> datetime:
        return datetime.fromisoformat(self.doc["started_at"].replace("Z", "+00:00"))

    @property
    def env(self) -> dict[str, Any]:
        return self.doc["env"]

    @property
    def copy_peak(self) -> float:
        return float(self.env["peaks"]["copy_GBps"])

    @property
    def short_commit(self) -> str:
        return self.doc["code"]["commit"][:7] + ("+dirty" if self.doc["code"]["dirty"] else "")

    @property
    def quick(self) -> bool:
        return bool(self.doc["method"].get("quick", False))


def load_run(path: Path, root: Path) -> Run:
    source = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(source, "(file)", f"cannot be read: {exc}") from exc
    try:
        doc = json.loads(text)  # NaN/Infinity parse as floats; the validator names their field
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise RunFileError(source, "(file)", f"is not valid JSON: {exc.msg} at {where}") from exc
    validate_run(doc, source)
    if doc["run_id"] != path.stem:
        raise RunFileError(source, "run_id", f"is {doc['run_id']!r} but the file is named {path.name!r}")
    if doc["study"] != path.parent.name:
        raise RunFileError(source, "study", f"is {doc['study']!r} but the file sits in runs/{path.parent.name}/")
    return Run(doc["run_id"], doc["study"], path, doc)


def load_runs(data_dir: Path) -> list[Run]:
    """Every run under ``data_dir/runs``, validated, oldest first; duplicate ids refused."""
    runs_dir = data_dir / "runs"
    if not runs_dir.is_dir():
        raise RunFileError(str(runs_dir), "(directory)", "does not exist")
    runs: list[Run] = []
    seen: dict[str, Path] = {}
    for path in sorted(runs_dir.glob("*/*.json")):
        run = load_run(path, data_dir.parent)
        if run.run_id in seen:
            raise RunFileError(
                str(path.relative_to(data_dir.parent)),
                "run_id",
                f"duplicate run id {run.run_id!r} (also in {seen[run.run_id]})",
            )
        seen[run.run_id] = path
        runs.append(run)
    for stray in sorted(runs_dir.rglob("*")):
        if stray.is_file() and stray.suffix != ".json":
            raise RunFileError(
                str(stray.relative_to(data_dir.parent)),
                "(file)",
                "is not a run file (only <study>/<run_id>.json belong under data/runs)",
            )
    return sorted(runs, key=lambda r: (r.started, r.run_id))
