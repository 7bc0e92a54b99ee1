"""Helpers for the build tests: the site of the stored runs, built once per test session
and served on localhost, and a scratch project root holding a copy of the stored runs, so a
test can break one file without touching the repository."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from publish.site import BuildReport

ROOT = Path(__file__).resolve().parent.parent


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def served(site: Path) -> Iterator[str]:
    """``site`` (which may still be empty) served on a free localhost port: yields its address."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class StoredSite:
    """The site of the stored runs as ``build()`` made it, served at ``url`` (it was built for
    that address, as ``python build.py --serve`` builds), with the build's report, which holds
    the data and the rendered pages, tables and downloads."""

    path: Path
    url: str
    report: BuildReport


def scratch_root(tmp: Path, studies: Iterable[str] | None = None) -> Path:
    """A project root with a copy of the stored runs, the templates and mkdocs.yml.  With
    ``studies``, only those studies' runs (and their ledger entries and withdrawals): a build
    of the copy then renders the other pages with no runs, in a few seconds instead of the
    whole site's time."""
    root = tmp / "project"
    root.mkdir()
    if studies is None:
        shutil.copytree(ROOT / "data", root / "data")
    else:
        _copy_studies(root / "data", set(studies))
    shutil.copytree(ROOT / "templates", root / "templates")
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    return root


def _copy_studies(data: Path, studies: set[str]) -> None:
    import yaml

    from contract import ledger
    from publish.review import entry_text, load_withdrawals

    source = ROOT / "data"
    for study in sorted(studies):
        shutil.copytree(source / "runs" / study, data / "runs" / study)
    kept = {p.stem for p in data.glob("runs/*/*.json")}
    entries = {k: e for k, e in ledger.load(source).items() if Path(k).parts[1] in studies}
    ledger.write(data, entries)
    withdrawn = yaml.safe_load((source / "withdrawn.yaml").read_text(encoding="utf-8")) or []
    every = [w for w in load_withdrawals(source, [e["run_id"] for e in withdrawn]) if w.run_id in kept]
    (data / "withdrawn.yaml").write_text("".join(entry_text(w.run_id, w.date, w.reason) for w in every))


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
