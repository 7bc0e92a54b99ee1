"""The run-file contract, checked field by field.

A run file is written once by ``bench`` and never edited.  Everything the site shows is
derived from these fields, so the build refuses a file that breaks the contract and says
which file and which field, e.g. ``cases[3].variants.triton.samples_us[2]: must be a
positive finite number, got -1.0``.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

from contract import studies
from contract.labels import LABELS_SINCE

SCHEMA_VERSION = 4
# Version 2 adds eager samples, cold rotation and host-loop timing; version 3 is strict JSON
# throughout: a non-finite number in a correctness check is stored as a string (NONFINITE).
# Files of versions 1 and 2 may hold the literals Infinity and NaN in a check's rel_l2 and
# max_abs (as Python's json module wrote them); nowhere else.  Version 4 stores each
# variant's label (what the pages call it); older files are read through the table in
# contract/labels.py.
READABLE_VERSIONS = (1, 2, 3, 4)
STRICT_SINCE = 3
LABEL_LENGTH = 80  # a label is a column header and a legend entry: short, one line
STATUSES = ("complete", "partial", "interrupted")
DEVICE_TIMERS = ("cuda-graph", "cuda-events")
# Version 2 only: what a user's loop pays per call (events around ordinary calls, host
# included), and host time per call (perf_counter around a loop that keeps ahead of the GPU).
USER_TIMERS = ("eager-events", "host-loop")
HOST_TIMER = "host-clock"
# Letters and digits, with single '.', '_' or '-' between them: an id is a file name, an
# anchor and a URL fragment, and reads the same as Markdown text (an underscore between two
# letters cannot open emphasis).
RUN_ID = re.compile(r"^(?=.{1,128}$)[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$")
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
# Identifiers a page prints and links by (case ids, variant names, case parameters, the
# study): letters and digits with single '.', '_', '/', '+' or '-' between them, so one is
# never Markdown or HTML syntax wherever it is shown ("fwd+bwd/bf16/4096x50257/cold").
IDENT = re.compile(r"^(?=.{1,200}$)[A-Za-z0-9]+(?:[._/+-][A-Za-z0-9]+)*$")
# How strict JSON stores the numbers it cannot write (a check of an output that was NaN).
NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
LARGEST_INT = 2**63 - 1  # run files hold counts and sizes; anything larger is a broken file
MAX_DEPTH = 32
# Variant metadata the pages read, by type (other keys may hold any JSON scalar).
META_TYPES: dict[str, tuple[type, ...]] = {
    "plan": (str,),
    "block": (int,),
    "chunks": (int,),
    "num_warps": (int,),
    "rows_per_program": (int,),
    "span": (int,),
    "stages": (int,),
    "label": (str,),
    "entry": (str,),
    "mode": (str,),
    "version": (str,),
    "dynamic": (bool, str),
    "evict": (bool,),
    "fullgraph": (bool,),
    "one_launch": (bool,),
    "backward": (dict,),
}
_BAD_TEXT = re.compile(r"[\x00\ud800-\udfff]")


class JsonLiteral:
    """``NaN``, ``Infinity`` or ``-Infinity`` where a run file holds one: not JSON, kept
    apart so that the validator can name the field instead of reading it as a float."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    @property
    def value(self) -> float:
        return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[self.text]


def json_number(value: float) -> float | str:
    """A number as strict JSON stores it: finite ones as they are, the rest as a NONFINITE
    string (``"inf"``, ``"-inf"``, ``"nan"``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def number_value(value: Any) -> float:
    """The inverse of :func:`json_number` (also reading a legacy literal)."""
    if isinstance(value, JsonLiteral):
        return value.value
    if isinstance(value, str):
        return NONFINITE[value]
    return float(value)


class RunFileError(ValueError):
    """A run file breaks the contract; ``field`` is a path like ``cases[2].bytes``."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        self.source, self.field, self.problem = source, field, problem
        super().__init__(f"{source}: {field}: {problem}")


class _Checker:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, problem: str) -> None:
        raise RunFileError(self.source, path or "(top level)", problem)

    def get(self, obj: dict[str, Any], key: str, path: str) -> Any:
        if not isinstance(obj, dict):
            self.fail(path, f"must be an object, got {_kind(obj)}")
        if key not in obj:
            self.fail(f"{path}.{key}" if path else key, "missing required field")
        return obj[key]

    def typed(self, obj: dict[str, Any], key: str, path: str, kinds: tuple[type, ...], nullable: bool = False) -> Any:
        value = self.get(obj, key, path)
        where = f"{path}.{key}" if path else key
        return self.value(value, where, kinds, nullable)

    def value(self, value: Any, where: str, kinds: tuple[type, ...], nullable: bool = False) -> Any:
        if value is None and nullable:
            return None
        if isinstance(value, JsonLiteral):
            self.fail(where, f"{value.text} is not JSON (run files are strict JSON: no NaN or Infinity)")
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > LARGEST_INT:
            self.fail(where, f"is a {value.bit_length()}-bit integer, larger than any count or size a run holds")
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            names = " or ".join(_KIND_NAMES.get(k, k.__name__) for k in kinds) + (" or null" if nullable else "")
            self.fail(where, f"must be {names}, got {_kind(value)}")
        return value

    def optional(self, obj: dict[str, Any], key: str, path: str, kinds: tuple[type, ...], nullable: bool = True) -> Any:
        """A field the contract does not require but the pages read when it is there."""
        if key not in obj:
            return None
        return self.typed(obj, key, path, kinds, nullable=nullable)

    def count(self, obj: dict[str, Any], key: str, path: str, *, required: bool = True, nullable: bool = False) -> None:
        """A positive whole number (rows, columns, calls per sample)."""
        if not required and key not in obj:
            return
        value = self.typed(obj, key, path, (int,), nullable=nullable)
        if value is not None and value <= 0:
            self.fail(f"{path}.{key}" if path else key, f"must be a positive whole number, got {value!r}")

    def number(
        self, obj: dict[str, Any], key: str, path: str, *, positive: bool = False, nullable: bool = False
    ) -> float | None:
        value = self.typed(obj, key, path, (int, float), nullable=nullable)
        where = f"{path}.{key}" if path else key
        if value is None:
            return None
        if not math.isfinite(value):
            self.fail(where, f"must be a finite number, got {value!r}")
        if positive and value <= 0:
            self.fail(where, f"must be positive, got {value!r}")
        if value < 0:
            self.fail(where, f"must not be negative, got {value!r}")
        return float(value)

    def ident(self, value: str, where: str) -> None:
        if not IDENT.match(value):
            self.fail(where, f"must be letters and digits joined by single . _ / + or -, got {value[:60]!r}")

    def optional_number(self, obj: dict[str, Any], key: str, path: str) -> None:
        if key in obj:
            self.number(obj, key, path, nullable=True)

    def timestamp(self, obj: dict[str, Any], key: str, path: str = "") -> datetime:
        value = self.typed(obj, key, path, (str,))
        where = f"{path}.{key}" if path else key
        try:
            stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            self.fail(where, f"must be an ISO-8601 time, got {value!r}")
        if stamp.utcoffset() is None or stamp.utcoffset().total_seconds() != 0:
            self.fail(where, f"must be in UTC (end with Z or +00:00), got {value!r}")
        return stamp


_KIND_NAMES = {int: "a whole number", float: "a number", str: "text", bool: "true or false", dict: "an object",
               list: "a list"}  # fmt: skip


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    return _KIND_NAMES.get(type(value), type(value).__name__)


_LEGACY_LITERAL = re.compile(r"^cases\[\d+\]\.variants\..+\.check\.(rel_l2|max_abs)\[\d+\]$")


def scan(c: _Checker, value: Any, path: str, version: int, depth: int = 0) -> None:
    """Every value of the document, wherever it is: strict JSON (no NaN or Infinity, no
    float that overflowed to infinity), integers a count can be, text without NUL or lone
    surrogates (which no page could write), and a sane depth."""
    if depth > MAX_DEPTH:
        c.fail(path, f"is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, dict):
        for k, v in value.items():
            _text(c, k, f"{path} (a key)" if path else "(a key)")
            scan(c, v, f"{path}.{k}" if path else k, version, depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            scan(c, v, f"{path}[{i}]", version, depth + 1)
    elif isinstance(value, JsonLiteral):
        if version >= STRICT_SINCE or not _LEGACY_LITERAL.match(path):
            c.fail(path, f"{value.text} is not JSON (run files are strict JSON: no NaN or Infinity)")
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if abs(value) > LARGEST_INT:
            c.fail(path, f"is a {value.bit_length()}-bit integer, larger than any count or size a run holds")
    elif isinstance(value, float):
        if not math.isfinite(value):
            c.fail(path, f"must be a finite number, got {value!r} (strict JSON stores no NaN or Infinity)")
    elif isinstance(value, str):
        _text(c, value, path)
    else:
        c.fail(path, f"is not a JSON value ({type(value).__name__})")


def _text(c: _Checker, value: str, path: str) -> None:
    if _BAD_TEXT.search(value):
        c.fail(path, "holds a NUL character or a lone UTF-16 surrogate, which no page can show")


def validate_run(doc: Any, source: str, *, allow_host_timer: bool = False) -> None:
    """Raise :class:`RunFileError` at the first field that breaks the contract."""
    c = _Checker(source)
    if not isinstance(doc, dict):
        c.fail("", f"a run file must hold a JSON object, got {_kind(doc)}")
    version = c.typed(doc, "schema_version", "", (int,))
    if version not in READABLE_VERSIONS:
        readable = ", ".join(map(str, READABLE_VERSIONS))
        c.fail("schema_version", f"unknown schema version {version} (this build reads versions {readable})")
    run_id = c.typed(doc, "run_id", "", (str,))
    if not RUN_ID.match(run_id):
        c.fail("run_id", f"must be letters, digits, '.', '_' or '-', got {run_id!r}")
    study = c.typed(doc, "study", "", (str,))
    c.ident(study, "study")
    status = c.typed(doc, "status", "", (str,))
    if status not in STATUSES:
        c.fail("status", f"must be one of {', '.join(STATUSES)}, got {status!r}")
    started = c.timestamp(doc, "started_at")
    finished = c.timestamp(doc, "finished_at")
    if finished < started:
        c.fail("finished_at", "is earlier than started_at")
    c.typed(doc, "command", "", (str,))

    code = c.typed(doc, "code", "", (dict,))
    commit = c.typed(code, "commit", "code", (str,))
    if not COMMIT.match(commit):
        c.fail("code.commit", f"must be a git commit hash (7-40 hex digits), got {commit!r}")
    c.typed(code, "dirty", "code", (bool,))

    env = c.typed(doc, "env", "", (dict,))
    gpu = c.typed(env, "gpu", "env", (dict,))
    c.typed(gpu, "name", "env.gpu", (str,))
    c.number(gpu, "sm_count", "env.gpu", positive=True)
    c.number(gpu, "l2_bytes", "env.gpu")
    c.typed(gpu, "compute_capability", "env.gpu", (str,))
    for key in ("driver", "cuda", "triton"):
        c.typed(env, key, "env", (str,), nullable=True)
    for key in ("torch", "python"):
        c.typed(env, key, "env", (str,))
    packages = c.optional(env, "packages", "env", (dict,))
    for name, installed in (packages or {}).items():
        c.value(installed, f"env.packages.{name}", (str,), nullable=True)
    before = c.typed(env, "before", "env", (dict,))
    c.number(before, "sm_clock_mhz", "env.before", nullable=True)
    c.number(before, "utilization_pct", "env.before", nullable=True)
    peaks = c.typed(env, "peaks", "env", (dict,))
    c.number(peaks, "copy_GBps", "env.peaks", positive=True)
    c.number(peaks, "mm_bf16_TFLOPs", "env.peaks", positive=True)
    c.optional(peaks, "statistic", "env.peaks", (str,))

    method = c.typed(doc, "method", "", (dict,))
    timer = c.typed(method, "timer", "method", (str,))
    timers = DEVICE_TIMERS + (USER_TIMERS if version >= 2 else ()) + ((HOST_TIMER,) if allow_host_timer else ())
    if timer not in timers:
        c.fail("method.timer", f"must be one of {', '.join(timers)}, got {timer!r}")
    c.typed(method, "l2", "method", (dict,))
    warmup = c.typed(method, "warmup", "method", (dict,))
    for key in ("burst_ms", "idle_s"):
        c.optional_number(warmup, key, "method.warmup")
    c.number(method, "rounds", "method", positive=True)
    c.optional_number(method, "target_sample_ms", "method")
    for key in ("eager_samples", "quick"):
        c.optional(method, key, "method", (bool,), nullable=False)
    c.optional(method, "check", "method", (str,), nullable=False)
    for i, mode in enumerate(c.optional(method, "l2_modes", "method", (list,)) or []):
        c.value(mode, f"method.l2_modes[{i}]", (str,))

    cases = c.typed(doc, "cases", "", (list,))
    seen: set[str] = set()
    eager = version >= 2 and bool(method.get("eager_samples"))
    # What the registry says of the study (contract/studies.py): the case parameters its pages
    # read, and whether a timed variant must carry its float64 check.
    declared = studies.entry(study)
    params = declared.params if declared is not None else ()
    checked = declared is not None and declared.checked
    for i, entry in enumerate(cases):
        _validate_case(c, entry, f"cases[{i}]", seen, timers, eager, params, version, checked)
    if "note" in doc:
        c.typed(doc, "note", "", (str,), nullable=True)
    scan(c, doc, "", version)


def _finite(s: Any) -> bool:
    if isinstance(s, bool) or not isinstance(s, (int, float)):
        return False
    if isinstance(s, int):
        return abs(s) <= LARGEST_INT
    return math.isfinite(s)


def _samples(c: _Checker, values: list[Any], path: str) -> None:
    for j, s in enumerate(values):
        if not _finite(s) or s <= 0:
            shown = s if _finite(s) or isinstance(s, (JsonLiteral, float)) else _kind(s)
            c.fail(f"{path}[{j}]", f"must be a positive finite number, got {shown!r}")


def _check_numbers(c: _Checker, values: list[Any], path: str, version: int) -> None:
    for j, v in enumerate(values):
        if _finite(v) or (isinstance(v, str) and v in NONFINITE):
            continue
        if isinstance(v, JsonLiteral) and version < STRICT_SINCE:
            continue  # written by an older bench; read as the number it stands for
        c.fail(f"{path}[{j}]", f"must be a finite number or one of {', '.join(map(repr, NONFINITE))}, got {v!r}")


def _validate_check(c: _Checker, check: dict[str, Any], path: str, version: int) -> None:
    for key in ("rel_l2", "max_abs"):
        _check_numbers(c, c.typed(check, key, path, (list,)), f"{path}.{key}", version)
    c.number(check, "tolerance", path)
    for key in ("finite", "passed"):
        c.typed(check, key, path, (bool,))


def validate_meta(meta: Any, source: str) -> None:
    """Check one variant's metadata as a run file would hold it (``RunFileError`` naming the
    field otherwise): the studies' declared metadata is checked before a GPU run writes it."""
    c = _Checker(source)
    if not isinstance(meta, dict):
        c.fail("meta", f"must be an object, got {_kind(meta)}")
    scan(c, meta, "meta", SCHEMA_VERSION)
    _validate_meta(c, meta, "meta")


def _validate_meta(c: _Checker, meta: dict[str, Any], path: str, depth: int = 0) -> None:
    for key, value in meta.items():
        where = f"{path}.{key}"
        kinds = META_TYPES.get(key)
        if kinds is not None:
            c.value(value, where, kinds, nullable=key not in ("plan", "block"))
            if key == "block" and value <= 0:
                c.fail(where, f"must be a positive whole number, got {value!r}")
        if isinstance(value, dict):
            if depth > 0:
                c.fail(where, "is nested too deep for variant metadata")
            _validate_meta(c, value, where, depth + 1)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                c.value(item, f"{where}[{i}]", (str, int, float, bool), nullable=True)


def _validate_case(
    c: _Checker,
    entry: Any,
    path: str,
    seen: set[str],
    timers: tuple[str, ...],
    eager: bool,
    required: tuple[str, ...],
    version: int,
    checked: bool = False,
) -> None:
    if not isinstance(entry, dict):
        c.fail(path, f"must be an object, got {_kind(entry)}")
    case_id = c.typed(entry, "id", path, (str,))
    c.ident(case_id, f"{path}.id")
    if case_id in seen:
        c.fail(f"{path}.id", f"duplicate case id {case_id!r}")
    seen.add(case_id)
    params = c.typed(entry, "case", path, (dict,))
    for key in ("op", "direction", "dtype", "l2"):
        c.ident(c.typed(params, key, f"{path}.case", (str,)), f"{path}.case.{key}")
    for key in dict.fromkeys(("rows", "cols", "chain", *required)):  # a study's shape: positive counts
        c.count(params, key, f"{path}.case", required=key in required)
    if c.optional(params, "measure", f"{path}.case", (str,), nullable=False) is not None:
        c.ident(params["measure"], f"{path}.case.measure")
    c.number(entry, "bytes", path)
    c.number(entry, "flops", path)
    if "rotation" in entry:
        rotation = c.typed(entry, "rotation", path, (dict,))
        c.number(rotation, "sets", f"{path}.rotation", positive=True)
        c.number(rotation, "bytes", f"{path}.rotation")
    variants = c.typed(entry, "variants", path, (dict,))
    if not variants:
        c.fail(f"{path}.variants", "must name at least one variant")
    for name, v in variants.items():
        vpath = f"{path}.variants.{name}"
        c.ident(name, f"{path}.variants (a name)")
        if not isinstance(v, dict):
            c.fail(vpath, f"must be an object, got {_kind(v)}")
        error = c.typed(v, "error", vpath, (str,), nullable=True)
        samples = c.typed(v, "samples_us", vpath, (list,))
        _samples(c, samples, f"{vpath}.samples_us")
        if eager:
            eager_us = c.typed(v, "eager_us", vpath, (list,))
            _samples(c, eager_us, f"{vpath}.eager_us")
            if error is None and not eager_us:
                c.fail(f"{vpath}.eager_us", "is empty but no error says why (the run promised eager samples)")
            if error is not None and eager_us:
                c.fail(f"{vpath}.eager_us", "has samples although the variant records an error")
        if error is None and not samples:
            c.fail(f"{vpath}.samples_us", "is empty but no error says why")
        if error is not None and samples:
            c.fail(f"{vpath}.samples_us", "has samples although the variant records an error")
        timer = c.typed(v, "timer", vpath, (str,), nullable=True)
        if samples and timer not in timers:
            c.fail(f"{vpath}.timer", f"must be one of {', '.join(timers)}, got {timer!r}")
        for key in ("calls_per_sample", "eager_calls_per_sample"):
            c.count(v, key, vpath, required=False, nullable=True)
        check = c.typed(v, "check", vpath, (dict,), nullable=True)
        if check is not None:
            _validate_check(c, check, f"{vpath}.check", version)
            if not check["passed"] and error is None:
                c.fail(f"{vpath}.check.passed", "is false but no error says the variant failed its check")
        elif checked and samples:
            c.fail(f"{vpath}.check", "is null but the variant was timed (every timed variant was checked first)")
        _validate_meta(c, c.typed(v, "meta", vpath, (dict,)), f"{vpath}.meta")
        if version >= LABELS_SINCE:
            label = c.typed(v, "label", vpath, (str,))
            if not label.strip() or len(label) > LABEL_LENGTH or any(ch in label for ch in "\r\n\t"):
                c.fail(f"{vpath}.label", f"must be one line of 1 to {LABEL_LENGTH} characters, got {label[:90]!r}")
