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

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 2 adds eager samples, cold rotation and host-loop timing
STATUSES = ("complete", "partial", "interrupted")
DEVICE_TIMERS = ("cuda-graph", "cuda-events")
# Version 2 only: what a user's loop pays per call (events around ordinary calls, host
# included), and host time per call (perf_counter around a loop that keeps ahead of the GPU).
USER_TIMERS = ("eager-events", "host-loop")
HOST_TIMER = "host-clock"
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


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
            self.fail(path, f"must be an object, got {type(obj).__name__}")
        if key not in obj:
            self.fail(f"{path}.{key}" if path else key, "missing required field")
        return obj[key]

    def typed(self, obj: dict[str, Any], key: str, path: str, kinds: tuple[type, ...], nullable: bool = False) -> Any:
        value = self.get(obj, key, path)
        where = f"{path}.{key}" if path else key
        if value is None and nullable:
            return None
        if isinstance(value, bool) and bool not in kinds:
            self.fail(where, f"must be {' or '.join(k.__name__ for k in kinds)}, got a boolean")
        if not isinstance(value, kinds):
            names = " or ".join(k.__name__ for k in kinds) + (" or null" if nullable else "")
            self.fail(where, f"must be {names}, got {type(value).__name__}")
        return value

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


def validate_run(doc: Any, source: str, *, allow_host_timer: bool = False) -> None:
    """Raise :class:`RunFileError` at the first field that breaks the contract."""
    c = _Checker(source)
    if not isinstance(doc, dict):
        c.fail("", f"a run file must hold a JSON object, got {type(doc).__name__}")
    version = c.typed(doc, "schema_version", "", (int,))
    if version not in READABLE_VERSIONS:
        readable = ", ".join(map(str, READABLE_VERSIONS))
        c.fail("schema_version", f"unknown schema version {version} (this build reads versions {readable})")
    run_id = c.typed(doc, "run_id", "", (str,))
    if not RUN_ID.match(run_id):
        c.fail("run_id", f"must be letters, digits, '.', '_' or '-', got {run_id!r}")
    c.typed(doc, "study", "", (str,))
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
    for key in ("driver", "cuda", "triton"):
        c.typed(env, key, "env", (str,), nullable=True)
    for key in ("torch", "python"):
        c.typed(env, key, "env", (str,))
    before = c.typed(env, "before", "env", (dict,))
    c.number(before, "sm_clock_mhz", "env.before", nullable=True)
    c.number(before, "utilization_pct", "env.before", nullable=True)
    peaks = c.typed(env, "peaks", "env", (dict,))
    c.number(peaks, "copy_GBps", "env.peaks", positive=True)
    c.number(peaks, "mm_bf16_TFLOPs", "env.peaks", positive=True)

    method = c.typed(doc, "method", "", (dict,))
    timer = c.typed(method, "timer", "method", (str,))
    timers = DEVICE_TIMERS + (USER_TIMERS if version >= 2 else ()) + ((HOST_TIMER,) if allow_host_timer else ())
    if timer not in timers:
        c.fail("method.timer", f"must be one of {', '.join(timers)}, got {timer!r}")
    c.typed(method, "l2", "method", (dict,))
    c.typed(method, "warmup", "method", (dict,))
    c.number(method, "rounds", "method", positive=True)

    cases = c.typed(doc, "cases", "", (list,))
    seen: set[str] = set()
    eager = version >= 2 and bool(method.get("eager_samples"))
    for i, entry in enumerate(cases):
        _validate_case(c, entry, f"cases[{i}]", seen, timers, eager)
    if "note" in doc:
        c.typed(doc, "note", "", (str,), nullable=True)


def _samples(c: _Checker, values: list[Any], path: str) -> None:
    for j, s in enumerate(values):
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not math.isfinite(s) or s <= 0:
            c.fail(f"{path}[{j}]", f"must be a positive finite number, got {s!r}")


def _validate_case(c: _Checker, entry: Any, path: str, seen: set[str], timers: tuple[str, ...], eager: bool) -> None:
    if not isinstance(entry, dict):
        c.fail(path, f"must be an object, got {type(entry).__name__}")
    case_id = c.typed(entry, "id", path, (str,))
    if case_id in seen:
        c.fail(f"{path}.id", f"duplicate case id {case_id!r}")
    seen.add(case_id)
    params = c.typed(entry, "case", path, (dict,))
    for key in ("op", "direction", "dtype", "l2"):
        c.typed(params, key, f"{path}.case", (str,))
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
        c.typed(v, "check", vpath, (dict,), nullable=True)
        c.typed(v, "meta", vpath, (dict,))
