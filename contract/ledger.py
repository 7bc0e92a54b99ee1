"""The ledger: every run file that has landed under ``data/runs``, with the sha256 of its bytes.

Runs are never deleted and never edited; a wrong run is withdrawn (``data/withdrawn.yaml``).
The ledger (``data/ledger.json``, committed with the runs) is how the build notices when
that rule was broken (:func:`publish.ledger.check`): it fails naming any ledger entry whose
file is missing, any run file the ledger does not know, and any run file whose bytes no
longer match their hash.

This module is the part both sides share: the file's format, reading it, and recording a
run.  ``bench`` records each run it writes (after every case, so an interrupted sweep stays
recorded).  A run written elsewhere (a GPU machine with its own copy of the tree) is
recorded when its file is copied in: ``python -m bench ledger --add data/runs/<study>/<id>.json``;
the build's error names the exact command.  It needs only the standard library and the
schema, so ``bench`` uses it without importing the site.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract.schema import RunFileError

NAME = "ledger.json"
SOURCE = f"data/{NAME}"
ABOUT = (
    "Every run file that has landed under data/runs, with the sha256 of its bytes. Written by bench "
    "(python -m bench run; python -m bench ledger --add FILE for a run copied in), never by hand. Run files "
    "are never deleted or edited: a wrong run is withdrawn (python -m bench withdraw RUN_ID --reason ...)."
)


@dataclass(frozen=True)
class Entry:
    path: str  # relative to data/, e.g. "runs/softmax/softmax-20261129T231718Z-96cdb83.json"
    sha256: str
    status: str  # the run's status when it was recorded ("partial" while bench is still writing)

    def as_json(self) -> dict[str, str]:
        return {"path": self.path, "sha256": self.sha256, "status": self.status}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def key(data_dir: Path, path: Path) -> str:
    """A run file's ledger key: its path under ``data/``, with forward slashes."""
    return path.resolve().relative_to(data_dir.resolve()).as_posix()


def load(data_dir: Path) -> dict[str, Entry]:
    """The ledger's entries by path; a missing or malformed ledger stops the build."""
    path = data_dir / NAME
    if not path.is_file():
        raise RunFileError(
            SOURCE,
            "(file)",
            "is missing: it lists every run that has landed, so that a deleted or edited run is noticed "
            "(restore it with git checkout -- data/ledger.json)",
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise RunFileError(SOURCE, "(file)", f"is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise RunFileError(SOURCE, "runs", "must be a list of {path, sha256, status}")
    entries: dict[str, Entry] = {}
    for i, e in enumerate(doc["runs"]):
        where = f"runs[{i}]"
        if not isinstance(e, dict) or set(e) != {"path", "sha256", "status"}:
            raise RunFileError(SOURCE, where, "must have exactly the fields path, sha256 and status")
        if not all(isinstance(v, str) for v in e.values()):
            raise RunFileError(SOURCE, where, "path, sha256 and status must be text")
        if len(e["sha256"]) != 64 or any(ch not in "0123456789abcdef" for ch in e["sha256"]):
            raise RunFileError(SOURCE, f"{where}.sha256", f"must be 64 hex digits, got {e['sha256']!r}")
        if e["path"] in entries:
            raise RunFileError(SOURCE, f"{where}.path", f"{e['path']} is listed twice")
        entries[e["path"]] = Entry(e["path"], e["sha256"], e["status"])
    return entries


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def _dump(entries: dict[str, Entry]) -> str:
    """One entry per line, sorted by path: a landed run is a one-line diff."""
    rows = ",\n  ".join(json.dumps(entries[p].as_json()) for p in sorted(entries))
    runs = f"[\n  {rows}\n ]" if rows else "[]"
    return f'{{\n "about": {json.dumps(ABOUT)},\n "runs": {runs}\n}}\n'


def write(data_dir: Path, entries: dict[str, Entry]) -> None:
    path = data_dir / NAME
    tmp = path.with_name(f".{NAME}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(_dump(entries))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    """Two sweeps writing at once (two GPUs of one host) must not lose each other's entries."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / f".{NAME}.lock", "w") as lock:
        try:
            import fcntl

            fcntl.flock(lock, fcntl.LOCK_EX)
        except ImportError:  # not POSIX: one writer at a time is the author's business
            pass
        yield


def record(data_dir: Path, path: Path, status: str, *, replace: bool = False) -> Entry:
    """Record (or, while bench is still writing it, update) one run file's entry.

    An entry that exists with another hash is replaced only with ``replace`` and only if it
    was recorded before the run was complete: a complete run's bytes never change."""
    with _locked(data_dir):
        entries = load(data_dir) if (data_dir / NAME).exists() else {}
        k = key(data_dir, path)
        entry = Entry(k, sha256(path), status)
        old = entries.get(k)
        if old is not None and old.sha256 != entry.sha256:
            if not replace:
                raise RunFileError(
                    f"data/{k}",
                    "sha256",
                    f"is in {SOURCE} with other contents (recorded {old.status}); a run file is never edited",
                )
            if old.status == "complete":
                raise RunFileError(
                    f"data/{k}",
                    "sha256",
                    f"was recorded complete in {SOURCE} with other contents; a complete run is never rewritten",
                )
        entries[k] = entry
        write(data_dir, entries)
        return entry
