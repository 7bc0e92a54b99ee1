"""Helpers for the build tests: a scratch project root holding a copy of the stored runs,
so a test can break one file without touching the repository."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def scratch_root(tmp: Path) -> Path:
    root = tmp / "project"
    root.mkdir()
    shutil.copytree(ROOT / "data", root / "data")
    shutil.copytree(ROOT / "templates", root / "templates")
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    return root


def run_files(root: Path, study: str = "*") -> list[Path]:
    return sorted((root / "data" / "runs").glob(f"{study}/*.json"))


def newest(root: Path, study: str = "softmax", *, holding: str | None = None) -> Path:
    """The newest stored run of ``study`` (the softmax study unless told); with ``holding``,
    the newest that measured that case id (a later run may cover a few shapes only)."""
    docs = {p: json.loads(p.read_text()) for p in run_files(root, study)}
    if holding is not None:
        docs = {p: d for p, d in docs.items() if any(c["id"] == holding for c in d["cases"])}
    return max(docs, key=lambda p: docs[p]["started_at"])


def edit(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    """Change a run file as if bench had written it so: the ledger records the new bytes
    (``tamper`` changes it behind the ledger's back)."""
    tamper(path, change)
    record(path)


def tamper(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def record(path: Path) -> None:
    """Record a run file written by a test in its project's ledger, as bench would."""
    from contract import ledger

    data = path.parent.parent.parent
    entries = ledger.load(data) if (data / ledger.NAME).exists() else {}
    key = ledger.key(data, path)
    entries[key] = ledger.Entry(key, ledger.sha256(path), "complete")
    ledger.write(data, entries)
