"""The review record: withdrawn runs, and how each claim fared as runs accumulated.

Withdrawals live in ``data/withdrawn.yaml`` (the only hand-written file under ``data/``).
Claim history is recomputed every build: the claims are evaluated on the runs as they
stood after each run landed, and every change of status is reported with the run (and its
date) that changed it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from publish.claims import Claim
from publish.runs import Run
from publish.schema import RunFileError


@dataclass(frozen=True)
class Withdrawal:
    run_id: str
    date: dt.date
    reason: str


def load_withdrawals(data_dir: Path, runs: list[Run]) -> list[Withdrawal]:
    path = data_dir / "withdrawn.yaml"
    source = "data/withdrawn.yaml"
    if not path.exists():
        return []
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except yaml.YAMLError as exc:
        raise RunFileError(source, "(file)", f"is not valid YAML: {exc}") from exc
    if not isinstance(entries, list):
        raise RunFileError(source, "(top level)", "must be a list of {run_id, date, reason}")
    known = {r.run_id for r in runs}
    out = []
    for i, e in enumerate(entries):
        where = f"[{i}]"
        if not isinstance(e, dict):
            raise RunFileError(source, where, "must be a mapping with run_id, date and reason")
        for key in ("run_id", "date", "reason"):
            if key not in e:
                raise RunFileError(source, f"{where}.{key}", "missing required field")
        if e["run_id"] not in known:
            raise RunFileError(source, f"{where}.run_id", f"names no stored run: {e['run_id']!r}")
        if not isinstance(e["date"], dt.date):
            raise RunFileError(source, f"{where}.date", f"must be a date (YYYY-MM-DD), got {e['date']!r}")
        if not isinstance(e["reason"], str) or not e["reason"].strip():
            raise RunFileError(source, f"{where}.reason", "must say why the run is withdrawn")
        out.append(Withdrawal(e["run_id"], e["date"], " ".join(e["reason"].split())))
    return out


@dataclass(frozen=True)
class ClaimChange:
    claim_id: str
    page: str
    run: Run  # the run whose arrival changed the status
    before: str | None  # None: the claim appeared
    after: str
    text: Claim


def claim_history(runs: list[Run], evaluate: Callable[[list[Run]], list[tuple[str, Claim]]]) -> list[ClaimChange]:
    """Evaluate the claims on the first k runs for every k; report each change of status."""
    status: dict[str, str] = {}
    changes: list[ClaimChange] = []
    for k in range(1, len(runs) + 1):
        for page, claim in evaluate(runs[:k]):
            key = f"{page}:{claim.id}"
            if status.get(key) != claim.status:
                changes.append(ClaimChange(claim.id, page, runs[k - 1], status.get(key), claim.status, claim))
                status[key] = claim.status
    return changes
