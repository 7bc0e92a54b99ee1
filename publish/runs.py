"""Loading the stored runs: every file under ``data/runs/<study>/`` is parsed and checked
against the contract before anything is rendered, so a bad file stops the build with its
name and the offending field instead of half a site."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from contract.labels import variant_label
from contract.schema import JsonLiteral, RunFileError, number_value, validate_run


@dataclass(frozen=True, order=True)
class Gpu:
    """Which GPU a run measured: its name and SM count (a MIG slice or a cut-down part of
    the same name has fewer SMs).  Runs of different GPUs are never mixed in one result."""

    name: str
    sm_count: int

    def __str__(self) -> str:
        return f"{self.name} ({self.sm_count} SMs)"


@dataclass(frozen=True)
class Run:
    run_id: str
    study: str
    path: Path
    doc: dict[str, Any]
    sha256: str = ""  # of the file's bytes, as the ledger records it
    source: str = ""  # the file, relative to the project root (data/runs/<study>/<id>.json)
    legacy_literals: bool = field(default=False, compare=False)  # a v1/v2 file holding Infinity/NaN in a check

    @property
    def gpu(self) -> Gpu:
        g = self.doc["env"]["gpu"]
        return Gpu(str(g["name"]), int(g["sm_count"]))

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
    def mm_peak(self) -> float:
        """The cuBLAS bf16 matrix rate measured in the same run (TFLOP/s)."""
        return float(self.env["peaks"]["mm_bf16_TFLOPs"])

    @property
    def short_commit(self) -> str:
        return self.doc["code"]["commit"][:7] + ("+dirty" if self.doc["code"]["dirty"] else "")

    @property
    def quick(self) -> bool:
        return bool(self.doc["method"].get("quick", False))

    def label(self, name: str, variant: dict[str, Any]) -> str:
        """What the pages call variant ``name`` of this run: the label the file stores
        (schema 4 on), or the contract's legacy label for an older file."""
        return variant_label(self.study, int(self.doc["schema_version"]), name, variant)


class _RepeatedKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def parse_json(raw: bytes, source: str) -> tuple[Any, bool]:
    """Parse a run file's bytes, or raise :class:`RunFileError` naming the file and what is
    wrong (bad UTF-8, not JSON, a repeated key, an integer too long to read, nesting too
    deep).  NaN and Infinity come back as :class:`JsonLiteral` for the validator to place;
    the flag says whether there were any."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunFileError(
            source, "(file)", f"is not UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start} ({exc.reason})"
        ) from exc
    literals: list[JsonLiteral] = []

    def literal(text: str) -> JsonLiteral:
        literals.append(JsonLiteral(text))
        return literals[-1]

    try:
        doc = json.loads(text, parse_constant=literal, object_pairs_hook=_no_repeats)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise RunFileError(source, "(file)", f"is not valid JSON: {exc.msg} at {where}") from exc
    except _RepeatedKey as exc:
        raise RunFileError(
            source, f"{exc.key} (a repeated key)", "appears twice in one object; JSON readers would keep one silently"
        ) from exc
    except RecursionError as exc:
        raise RunFileError(source, "(file)", "is nested too deep to be a run file") from exc
    except ValueError as exc:  # e.g. Python's limit on the digits of an integer
        raise RunFileError(source, "(file)", f"cannot be read as JSON: {exc}") from exc
    return doc, bool(literals)


def _decode_checks(doc: dict[str, Any]) -> None:
    """A check's non-finite numbers (stored as "inf"/"nan", or as a legacy literal) become
    the floats they stand for, so the pages compare and format them like any number."""
    for case in doc["cases"]:
        for v in case["variants"].values():
            check = v.get("check")
            if check:
                for key in ("rel_l2", "max_abs"):
                    check[key] = [number_value(x) for x in check[key]]


def load_run(path: Path, root: Path) -> Run:
    source = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise RunFileError(source, "(file)", f"cannot be read: {exc}") from exc
    doc, literals = parse_json(raw, source)
    validate_run(doc, source)
    if doc["run_id"] != path.stem:
        raise RunFileError(source, "run_id", f"is {doc['run_id']!r} but the file is named {path.name!r}")
    if doc["study"] != path.parent.name:
        raise RunFileError(source, "study", f"is {doc['study']!r} but the file sits in runs/{path.parent.name}/")
    _decode_checks(doc)
    return Run(doc["run_id"], doc["study"], path, doc, hashlib.sha256(raw).hexdigest(), source, literals)


def strict_copy(run: Run) -> bytes:
    """The run file as strict JSON: its own bytes, or, for an older file that holds NaN or
    Infinity in a check, the same document with those written as "nan"/"inf" strings (the
    way bench writes them since schema 3)."""
    raw = run.path.read_bytes()
    if not run.legacy_literals:
        return raw
    doc = json.loads(raw.decode("utf-8"), parse_constant=lambda t: {"NaN": "nan", "Infinity": "inf"}.get(t, "-inf"))
    return (json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def measurement_hash(doc: dict[str, Any]) -> str:
    """What a run measured, independent of its id, times and file layout: its cases."""
    canonical = json.dumps(doc["cases"], sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


MIN_SAMPLES_COMPARED = 5  # two sample lists this long that agree to the last digit were copied


def refuse_copies(runs: list[Run]) -> None:
    """Two files holding the same measurements are one run stored twice (a run copied to a
    new id): the copy would count as a second, agreeing run.  Refused, naming both files;
    so is a single variant's samples repeated exactly in another run."""
    by_hash: dict[str, Run] = {}
    for run in runs:
        if not run.doc["cases"]:
            continue  # a run interrupted before its first case measured nothing
        first = by_hash.setdefault(measurement_hash(run.doc), run)
        if first is not run:
            raise RunFileError(
                run.source,
                "cases",
                f"holds exactly the measurements of {first.source} (a run copied to a new id?); "
                "a run is stored once: remove the copy",
            )
    samples: dict[tuple[float, ...], tuple[Run, str]] = {}
    for run in runs:
        for i, case in enumerate(run.doc["cases"]):
            for name, v in case["variants"].items():
                for key in ("samples_us",):  # device time: what every result is made of
                    values = tuple(v.get(key) or ())
                    if len(values) < MIN_SAMPLES_COMPARED or len(set(values)) < 3:
                        continue  # too few, or too coarse, to be a fingerprint
                    where = f"cases[{i}].variants.{name}.{key}"
                    first_run, first_where = samples.setdefault(values, (run, where))
                    if first_run is not run:
                        raise RunFileError(
                            run.source,
                            where,
                            f"repeats, sample for sample, {first_where} of {first_run.source}; "
                            "samples are measured, never copied",
                        )


def reference_gpu(runs: list[Run]) -> Gpu | None:
    """The GPU a study's results come from: the one most of its runs measured (ties go to
    the GPU that measured first).  A newer run on another GPU does not move it."""
    if not runs:
        return None
    counts = Counter(r.gpu for r in runs)
    first = {}
    for i, r in enumerate(runs):
        first.setdefault(r.gpu, i)
    return max(counts, key=lambda g: (counts[g], -first[g]))


def same_gpu(a: Run, b: Run) -> bool:
    """Whether two runs measured the same GPU (and so may be compared case by case)."""
    return a.gpu == b.gpu


def load_runs(data_dir: Path) -> list[Run]:
    """Every run under ``data_dir/runs``, validated, oldest first; duplicate ids and copied
    measurements refused."""
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
    runs = sorted(runs, key=lambda r: (r.started, r.run_id))
    refuse_copies(runs)
    return runs
