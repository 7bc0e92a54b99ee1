"""The results as a tidy pandas DataFrame: one row per run × case × variant × timer × statistic.

A reader loads a stored run in two lines::

    from publish.frame import load_run
    df = load_run("data/runs/softmax/softmax-20261129T231718Z-96cdb83.json")

and, say, the median device time of every case and variant is
``df.query("statistic == 'median' and timer == 'cuda-graph'").pivot(index="case_id",
columns="variant", values="value")``.

Columns, in order:

- the run: ``run_id``, ``study``, ``started_at`` (UTC), ``gpu``, ``sm_count``, ``commit``,
  ``dirty``, ``quick``, ``withdrawn`` (listed in ``data/withdrawn.yaml``: its numbers are on
  no page);
- the case: ``case_id``, then every case parameter the runs hold, one column each
  (``op``, ``direction``, ``dtype``, ``rows``, ``cols``, ``l2`` ...; a parameter named like one
  of these columns is prefixed ``case_``), then ``bytes`` and ``flops``, the minimum traffic
  and work the rates are computed from;
- the measurement: ``variant``; ``timer``, the timer that produced the samples
  (``cuda-graph``: CUDA-graph replay; ``cuda-events``: events around the calls; ``eager-events``:
  ordinary Python calls between CUDA events, host included; ``host-loop``: host time per call);
  ``samples``, the run-file field they came from (``samples_us`` or ``eager_us``);
- ``statistic``, ``value``, ``unit`` (see :data:`STATISTICS`);
- ``error``: why a variant has no samples (it refused the shape or failed its correctness
  check); such a variant keeps one row, statistic ``n`` with value 0.

Statistics are computed here, and only here, from the raw samples (with :mod:`publish.stats`).
The site reads them from this frame: :class:`Stats` pivots it to one row per measurement,
the results layer (:mod:`publish.results`) takes every median, interval, bandwidth and share
of the copy peak from there, and the tables, charts, claims and downloads take theirs from
the results, so there is one path from a run file to every number on a page.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from publish.numbers import Source
from publish.review import load_withdrawals
from publish.runs import Run
from publish.runs import load_run as _load_run
from publish.runs import load_runs as _load_runs
from publish.stats import Summary, quantile, summarize
from publish.tables import Table

# statistic -> (unit, what it is)
STATISTICS: dict[str, tuple[str, str]] = {
    "n": ("samples", "samples taken (0: the variant refused the shape or failed its check; see error)"),
    "median": ("us", "median of the samples"),
    "mean": ("us", "mean of the samples"),
    "min": ("us", "fastest sample"),
    "p10": ("us", "10th percentile (linear interpolation between closest ranks)"),
    "p25": ("us", "25th percentile (first quartile)"),
    "p75": ("us", "75th percentile (third quartile)"),
    "p90": ("us", "90th percentile"),
    "max": ("us", "slowest sample"),
    "ci95_low": ("us", "lower end of the 95% confidence interval of the median (order statistics)"),
    "ci95_high": ("us", "upper end of the 95% confidence interval of the median"),
    "gbps": ("GB/s", "bytes / median: the bandwidth the problem's minimum traffic implies (device timers)"),
    "pct_copy_peak": ("%", "gbps as a percentage of the device copy bandwidth measured in the same run"),
    "tflops": ("TFLOP/s", "flops / median (device timers; cases that count flops)"),
    "pct_mm_peak": ("%", "tflops as a percentage of the cuBLAS bf16 matrix rate measured in the same run"),
}
# Timers that measure device time, the only ones a bandwidth or a rate is derived from.
DEVICE_TIMERS = ("cuda-graph", "cuda-events")
EAGER_TIMER = "eager-events"  # the timer of every eager_us sample
RUN_COLUMNS = ("run_id", "study", "started_at", "gpu", "sm_count", "commit", "dirty", "quick", "withdrawn")
MEASURE_COLUMNS = ("variant", "timer", "samples", "statistic", "value", "unit", "error")
KEY = ("run_id", "case_id", "variant", "timer", "statistic")  # unique in every frame


def statistics(
    samples: list[float], case_bytes: int, flops: int, copy_peak: float, *, device: bool, mm_peak: float = 0.0
) -> dict[str, float]:
    """The statistics of one variant's samples, by name (see :data:`STATISTICS`)."""
    xs = sorted(samples)
    s = summarize(xs)
    out = {
        "n": float(s.n),
        "median": s.median,
        "mean": math.fsum(xs) / len(xs),
        "min": s.minimum,
        "p10": quantile(xs, 0.10),
        "p25": s.q1,
        "p75": s.q3,
        "p90": quantile(xs, 0.90),
        "max": s.maximum,
        "ci95_low": s.lo,
        "ci95_high": s.hi,
    }
    if device and case_bytes > 0:
        out["gbps"] = case_bytes / (s.median * 1e3)
        out["pct_copy_peak"] = 100 * out["gbps"] / copy_peak
    if device and flops > 0:
        out["tflops"] = flops / (s.median * 1e6)
        if mm_peak > 0:
            out["pct_mm_peak"] = 100 * out["tflops"] / mm_peak
    return out


def _param_columns(runs: list[Run]) -> dict[str, str]:
    """Every case parameter of these runs (first seen first) -> its column name."""
    taken = {*RUN_COLUMNS, "case_id", "bytes", "flops", *MEASURE_COLUMNS}
    names: dict[str, str] = {}
    for run in runs:
        for entry in run.doc["cases"]:
            for key in entry["case"]:
                names.setdefault(key, f"case_{key}" if key in taken else key)
    return names


def _column(values: list[Any]) -> Any:
    """A case-parameter column: whole numbers stay whole (missing ones as <NA>), flags stay
    flags; anything else is kept as it is."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pd.array(values, dtype="boolean")
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pd.array(values, dtype="Int64")
    return values


def frame(runs: Iterable[Run], withdrawn: Collection[str] = ()) -> pd.DataFrame:
    """The tidy frame of these runs (their order kept, then cases and variants in file order);
    ``withdrawn`` names the runs to mark as withdrawn."""
    runs = list(runs)
    params = _param_columns(runs)
    cols: dict[str, list[Any]] = {c: [] for c in (*RUN_COLUMNS, "case_id", *params.values(), "bytes", "flops")}
    cols |= {c: [] for c in MEASURE_COLUMNS}

    for run in runs:
        doc, gpu = run.doc, run.gpu
        head = {
            "run_id": run.run_id,
            "study": run.study,
            "started_at": doc["started_at"],
            "gpu": gpu.name,
            "sm_count": gpu.sm_count,
            "commit": str(doc["code"]["commit"]),
            "dirty": bool(doc["code"]["dirty"]),
            "quick": run.quick,
            "withdrawn": run.run_id in withdrawn,
        }
        copy_peak, mm_peak = run.copy_peak, run.mm_peak
        for entry in doc["cases"]:
            case = {"case_id": entry["id"], "bytes": int(entry["bytes"]), "flops": int(entry.get("flops") or 0)}
            case |= {name: entry["case"].get(key) for key, name in params.items()}
            for variant, raw in entry["variants"].items():
                measured = []
                if raw.get("samples_us"):
                    measured.append(("samples_us", raw.get("timer")))
                if raw.get("eager_us"):
                    measured.append(("eager_us", EAGER_TIMER))
                rows: list[tuple[Any, str, str, float, str | None]] = []
                for key, timer in measured:
                    device = key == "samples_us" and timer in DEVICE_TIMERS
                    stats = statistics(
                        raw[key], case["bytes"], case["flops"], copy_peak, device=device, mm_peak=mm_peak
                    )
                    rows += [(timer, key, name, value, None) for name, value in stats.items()]
                if not raw.get("samples_us"):  # refused or failed: the variant stays, with why
                    rows.insert(0, (raw.get("timer"), "samples_us", "n", 0.0, raw.get("error")))
                for timer, key, name, value, error in rows:
                    for c, v in head.items():
                        cols[c].append(v)
                    for c, v in case.items():
                        cols[c].append(v)
                    cols["variant"].append(variant)
                    cols["timer"].append(timer)
                    cols["samples"].append(key)
                    cols["statistic"].append(name)
                    cols["value"].append(float(value))
                    cols["unit"].append(STATISTICS[name][0])
                    cols["error"].append(error)

    df = pd.DataFrame({c: _column(v) if c in params.values() else v for c, v in cols.items()})
    df["started_at"] = pd.to_datetime(df["started_at"], utc=True, format="ISO8601")
    df["value"] = df["value"].astype("float64")
    for c in ("sm_count", "bytes", "flops"):
        df[c] = df[c].astype("int64")
    for c in ("dirty", "quick", "withdrawn"):
        df[c] = df[c].astype("bool")
    return df


def _withdrawn_ids(data_dir: Path, run_ids: list[str]) -> set[str]:
    return {w.run_id for w in load_withdrawals(data_dir, run_ids)}


def load_run(path: str | Path) -> pd.DataFrame:
    """One stored run as a tidy frame, checked against the run-file contract first (a bad
    file raises an error naming the file and the field).  A run that ``withdrawn.yaml``
    lists (when the file sits in ``<data>/runs/<study>/``) is marked ``withdrawn``."""
    path = Path(path)
    run = _load_run(path, Path.cwd())
    data_dir = path.resolve().parent.parent.parent
    withdrawn: set[str] = set()
    if path.resolve().parent.parent.name == "runs":
        stored = [p.stem for p in (data_dir / "runs").glob("*/*.json")]
        withdrawn = _withdrawn_ids(data_dir, stored)
    return frame([run], withdrawn)


def load_runs(data_dir: str | Path = "data") -> pd.DataFrame:
    """Every stored run under ``data_dir/runs`` (oldest first), withdrawn ones marked."""
    data_dir = Path(data_dir)
    runs = _load_runs(data_dir)
    return frame(runs, _withdrawn_ids(data_dir, [r.run_id for r in runs]))


def cited(table: Table) -> list[tuple[str, str, str]]:
    """The (run, case, variant) measurements a table's numbers were computed from, in the
    order the table first cites them."""
    found: dict[tuple[str, str, str], None] = {}
    for row in table.rows:
        for cell in row.values():
            for s in getattr(cell, "sources", ()):
                if s.case and s.variant:
                    found.setdefault((s.run_id, s.case, s.variant), None)
    return list(found)


def behind(df: pd.DataFrame, table: Table) -> pd.DataFrame:
    """The rows of ``df`` a table's numbers were computed from: every statistic of every
    (run, case, variant) its cells cite, in the frame's order."""
    keys = cited(table)
    if not keys:
        return df.iloc[0:0]
    index = pd.MultiIndex.from_frame(df[["run_id", "case_id", "variant"]])
    return df[index.isin(keys)].reset_index(drop=True)


# One measurement: a variant's samples of one kind (``samples_us`` or ``eager_us``) in one
# case of one run.  Its statistics are the frame's rows with this key.
MEASUREMENT = ("run_id", "case_id", "variant", "samples")


class Stats:
    """The frame pivoted wide: one row per measurement (:data:`MEASUREMENT`), one column per
    statistic.  The results layer (:mod:`publish.results`) reads every number it hands the
    pages from here, so the tables, charts, claims and downloads all come from the frame.

    ``frame`` is the tidy frame itself; ``table`` the pivot (a statistic the measurement does
    not have, such as a bandwidth of a host timer, is NaN there)."""

    def __init__(self, df: pd.DataFrame) -> None:
        self.frame = df
        key = list(MEASUREMENT)
        self.table = df.pivot(index=key, columns="statistic", values="value")
        timers = df.drop_duplicates(key).set_index(key)["timer"]
        self.table.insert(0, "timer", timers.reindex(self.table.index))
        # A plain dict of the same rows for the many single look-ups a page makes.
        self._rows: dict[tuple[str, str, str, str], dict[str, Any]] = {
            k: {s: v for s, v in row.items() if isinstance(v, str) or (v is not None and not math.isnan(v))}
            for k, row in self.table.to_dict("index").items()
        }

    @classmethod
    def of(cls, runs: Iterable[Run], withdrawn: Collection[str] = ()) -> Stats:
        return cls(frame(runs, withdrawn))

    def rows(self) -> Iterable[tuple[tuple[str, str, str, str], dict[str, Any]]]:
        """Every measurement's key (:data:`MEASUREMENT`) and statistics, in the frame's order."""
        return self._rows.items()

    def row(self, run_id: str, case_id: str, variant: str, samples: str) -> dict[str, Any]:
        """Every statistic of one measurement (and its ``timer``); empty when the frame has none."""
        return self._rows.get((run_id, case_id, variant, samples), {})

    def summary(self, run_id: str, case_id: str, variant: str, samples: str) -> Summary | None:
        """One measurement's median, quartiles and 95% interval of the median, as the frame
        holds them; None when it has no samples (refused, failed its check, not measured)."""
        row = self.row(run_id, case_id, variant, samples)
        if not row.get("n"):
            return None
        return Summary(
            int(row["n"]),
            row["median"],
            row["p25"],
            row["p75"],
            row["ci95_low"],
            row["ci95_high"],
            row["min"],
            row["max"],
        )

    def value(self, run_id: str, case_id: str, variant: str, samples: str, statistic: str) -> float:
        """One statistic of one measurement (KeyError, naming it, when the frame has none)."""
        row = self.row(run_id, case_id, variant, samples)
        if statistic not in row:
            raise KeyError(f"the frame holds no {statistic} of {run_id} {case_id} {variant} {samples}")
        return float(row[statistic])


# What a download says about each measurement a number was computed from (in this order).
MEASURED = ("n", "median", "p10", "p90", "ci95_low", "ci95_high")


class Measured:
    """The statistics of the measurement behind a :class:`~publish.numbers.Source`, found in
    the pivoted frame (:class:`Stats`, the one the tables' numbers were read from) by run,
    case, variant and timer (a source that names no timer means the variant's
    ``samples_us``): what a table's JSON download says about each measurement it cites."""

    def __init__(self, stats: Stats) -> None:
        self._stats: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        self._primary: dict[tuple[str, str, str], str] = {}
        for (run_id, case_id, variant, samples), row in stats.rows():
            timer = row.get("timer")
            if not isinstance(timer, str):
                continue  # a variant with no samples
            if samples == "samples_us":
                self._primary[(run_id, case_id, variant)] = timer
            entry: dict[str, Any] = {"timer": timer}
            for statistic in MEASURED:
                if statistic in row:
                    entry[statistic] = int(row[statistic]) if statistic == "n" else row[statistic]
                    if statistic == "median":
                        entry["unit"] = STATISTICS[statistic][0]
            self._stats[(run_id, case_id, variant, timer)] = entry

    def __call__(self, source: Source) -> dict[str, Any] | None:
        if not (source.case and source.variant):
            return None
        timer = source.timer or self._primary.get((source.run_id, source.case, source.variant), "")
        return self._stats.get((source.run_id, source.case, source.variant, timer))
