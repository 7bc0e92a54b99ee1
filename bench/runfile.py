"""Writes one run file, rewritten atomically after every case.

The file on disk is always a complete, valid document: a sweep killed halfway leaves a
``partial`` run holding every case it finished, never a truncated file.  Each write is
checked against the contract the site enforces, so ``bench`` cannot produce a file that
``build.py`` would refuse, and written as strict JSON (no NaN or Infinity).  With a ledger
(``data/ledger.json``, see :mod:`contract.ledger`) every write is recorded there too.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from contract import ledger
from contract.schema import SCHEMA_VERSION, validate_run


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def make_run_id(study: str, started: str, commit: str, quick: bool) -> str:
    stamp = started[:19].replace("-", "").replace(":", "")
    return f"{study}-{stamp}Z-{commit[:7]}" + ("-quick" if quick else "")


class RunWriter:
    def __init__(
        self,
        out_dir: Path,
        header: dict[str, Any],
        *,
        allow_host_timer: bool = False,
        ledger_dir: Path | None = None,
    ) -> None:
        """``ledger_dir``: the ``data/`` directory whose ledger records this run (None: the
        file is written outside a project's data/, and recorded when it is copied in)."""
        self.doc: dict[str, Any] = {"schema_version": SCHEMA_VERSION, **header, "status": "partial", "cases": []}
        self.doc.setdefault("finished_at", self.doc["started_at"])
        self.allow_host_timer = allow_host_timer
        self.ledger_dir = ledger_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path = out_dir / f"{self.doc['run_id']}.json"
        if self.path.exists():
            raise FileExistsError(f"{self.path} exists; run files are written once")
        self._write()

    def add_case(self, entry: dict[str, Any]) -> None:
        self.doc["cases"].append(entry)
        self.doc["finished_at"] = utc_now()
        self._write()

    def finish(self, status: str, note: str | None = None) -> None:
        self.doc["status"] = status
        self.doc["finished_at"] = utc_now()
        if note:
            self.doc["note"] = note
        self._write()

    def _write(self) -> None:
        validate_run(self.doc, str(self.path), allow_host_timer=self.allow_host_timer)
        tmp = self.path.with_suffix(".json.tmp")
        text = json.dumps(self.doc, indent=1, sort_keys=False, allow_nan=False, ensure_ascii=False) + "\n"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        if self.ledger_dir is not None:
            ledger.record(self.ledger_dir, self.path, self.doc["status"], replace=True)
