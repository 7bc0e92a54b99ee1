"""The review record: withdrawn runs, and how each claim fared as runs accumulated.

Withdrawals live in ``data/withdrawn.yaml``, appended by ``python -m bench withdraw RUN_ID
--reason "..."`` (a hand-written entry is read as strictly).
Claim history is recomputed every build: the claims are evaluated on the runs as they
stood after each run landed, and every change of status is reported with the run (and its
date) that changed it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from contract.schema import RunFileError
from publish.claims import Claim
from publish.runs import Run

_BAD_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")


@dataclass(frozen=True)
class Withdrawal:
    run_id: str
    date: dt.date
    reason: str


SOURCE = "data/withdrawn.yaml"
FIELDS = ("run_id", "date", "reason")
_STR = "tag:yaml.org,2002:str"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def load_withdrawals(data_dir: Path, runs: list[Run] | list[str]) -> list[Withdrawal]:
    path = data_dir / "withdrawn.yaml"
    if not path.exists():
        return []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunFileError(SOURCE, "(file)", f"cannot be read as UTF-8 text: {exc}") from exc
    return parse_withdrawals(text, runs)


def parse_withdrawals(text: str, runs: list[Run] | list[str]) -> list[Withdrawal]:
    """The withdrawals, read so that nothing YAML would quietly change gets through.

    Read node by node rather than with ``yaml.safe_load``: an unquoted reason is cut at
    ``" #"`` (the rest becomes a comment), ``yes`` turns into true and ``2026-13-45`` into an
    error deep inside the loader, a repeated key keeps only its last value.  Each of these,
    an unknown field, a run withdrawn twice, a run that is not stored and a date that is not
    a real one stops the build naming the entry."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise RunFileError(SOURCE, "(file)", f"is not valid YAML: {exc}") from exc
    if root is None:
        return []
    if not isinstance(root, yaml.SequenceNode):
        raise RunFileError(SOURCE, "(top level)", "must be a list of {run_id, date, reason}")
    by_id = {r if isinstance(r, str) else r.run_id for r in runs}
    lines = text.splitlines()
    out: list[Withdrawal] = []
    first: dict[str, int] = {}
    for i, item in enumerate(root.value):
        where = f"[{i}]"
        if not isinstance(item, yaml.MappingNode):
            raise RunFileError(SOURCE, where, "must be a mapping with run_id, date and reason")
        values: dict[str, yaml.ScalarNode] = {}
        for key_node, value_node in item.value:
            name = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if name not in FIELDS:
                shown = name if name is not None else "(a non-text key)"
                raise RunFileError(SOURCE, f"{where}.{shown}", f"unknown field (an entry has {', '.join(FIELDS)})")
            if name in values:
                raise RunFileError(SOURCE, f"{where}.{name}", "is given twice (YAML would keep only the last)")
            if not isinstance(value_node, yaml.ScalarNode):
                raise RunFileError(SOURCE, f"{where}.{name}", "must be a single value, not a list or mapping")
            _no_comment(value_node, key_node, lines, f"{where}.{name}")
            values[name] = value_node
        for name in FIELDS:
            if name not in values:
                raise RunFileError(SOURCE, f"{where}.{name}", "missing required field")
        run_id = _text(values["run_id"], f"{where}.run_id")
        if run_id not in by_id:
            raise RunFileError(SOURCE, f"{where}.run_id", f"names no stored run: {run_id!r}")
        if run_id in first:
            raise RunFileError(SOURCE, f"{where}.run_id", f"{run_id} is already withdrawn by entry [{first[run_id]}]")
        first[run_id] = i
        date = _date(values["date"], f"{where}.date")
        reason = " ".join(_text(values["reason"], f"{where}.reason").split())
        if not reason:
            raise RunFileError(SOURCE, f"{where}.reason", "must say why the run is withdrawn")
        out.append(Withdrawal(run_id, date, reason))
    return out


def _text(node: yaml.ScalarNode, where: str) -> str:
    """A value YAML reads as text; an unquoted one it would turn into something else is refused."""
    if node.style is None and node.tag != _STR:
        kind = node.tag.rsplit(":", 1)[-1]
        raise RunFileError(SOURCE, where, f"YAML reads {node.value!r} as a {kind}, not text: quote it")
    if _BAD_TEXT.search(node.value):
        raise RunFileError(SOURCE, where, "holds a control character")
    return node.value


def _date(node: yaml.ScalarNode, where: str) -> dt.date:
    if not _DATE.match(node.value):
        raise RunFileError(SOURCE, where, f"must be a date (YYYY-MM-DD), got {node.value!r}")
    try:
        return dt.date.fromisoformat(node.value)
    except ValueError as exc:
        raise RunFileError(SOURCE, where, f"{node.value!r} is not a real date: {exc}") from exc


def _no_comment(value: yaml.ScalarNode, key: yaml.Node, lines: list[str], where: str) -> None:
    """A plain (unquoted) value ends where a comment starts: ``reason: see issue #12`` reads
    as "see issue".  A comment on the value's line, or on a line of the entry after it, is
    refused with what YAML kept."""
    if value.style is not None:  # quoted or a block scalar (| or >): '#' is text there
        return
    end = value.end_mark
    rest = [lines[end.line][end.column :]] if end.line < len(lines) else []
    for line in lines[end.line + 1 :]:
        stripped = line.lstrip()
        if stripped and (len(line) - len(stripped)) <= key.start_mark.column:
            break  # the next field or entry
        rest.append(line)
    if any(part.lstrip().startswith("#") for part in rest):
        raise RunFileError(
            SOURCE,
            where,
            f"an unquoted value is cut where a comment starts (YAML reads only {value.value!r}); "
            "quote the whole text, or write the entry with python -m bench withdraw",
        )


def entry_text(run_id: str, date: dt.date, reason: str) -> str:
    """One entry as ``python -m bench withdraw`` appends it: the reason double-quoted (a JSON
    string is a valid YAML double-quoted scalar), so no character in it is syntax."""
    import json

    reason = " ".join(reason.split())
    return f"- run_id: {run_id}\n  date: {date.isoformat()}\n  reason: {json.dumps(reason, ensure_ascii=False)}\n"


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
