"""Synthetic run documents for the site tests: valid run files of every study, written into
a scratch project, with times chosen by hand or by a simple model, so that the pages can be
built with 0, 1 or 2+ runs of each study and their arithmetic checked."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sitekit import ROOT

from contract.labels import legacy_label
from kernels.plans import SOFTMAX_POLICY, next_power_of_2, plan_rows

H200 = {"name": "NVIDIA H200", "sm_count": 132, "l2_bytes": 62914560, "compute_capability": "9.0"}
L2 = H200["l2_bytes"]


def project(tmp: Path) -> Path:
    """An empty project: templates and site configuration, no runs, no withdrawals, an
    empty ledger."""
    from contract import ledger

    root = tmp / "project"
    (root / "data" / "runs").mkdir(parents=True)
    (root / "data" / "withdrawn.yaml").write_text("[]\n")
    ledger.write(root / "data", {})
    shutil.copytree(ROOT / "templates", root / "templates")
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    return root


def write(root: Path, doc: dict[str, Any], *, ledger: bool = True) -> Path:
    """Store ``doc`` as bench would: its file, recorded in the ledger.  Modelled samples
    repeat from run to run, which the build refuses as copied measurements: each run's
    smallest samples are nudged (by under a millionth, medians untouched) to be its own."""
    path = root / "data" / "runs" / doc["study"] / f"{doc['run_id']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_own_samples(doc)))
    if ledger:
        from sitekit import record

        record(path)
    return path


def _own_samples(doc: dict[str, Any]) -> dict[str, Any]:
    import copy
    import hashlib

    doc = copy.deepcopy(doc)
    nudge = 1 - 1e-7 * (1 + int(hashlib.sha256(str(doc.get("run_id")).encode()).hexdigest(), 16) % 997)
    for case in doc.get("cases") or []:
        for v in case.get("variants", {}).values():
            for key in ("samples_us", "eager_us"):
                samples = v.get(key)
                if isinstance(samples, list) and len(samples) >= 3 and all(isinstance(x, float) for x in samples):
                    low = min(range(len(samples)), key=samples.__getitem__)
                    samples[low] = samples[low] * nudge
    return doc


def withdraw(root: Path, run_id: str, reason: str = "A test withdrawal.") -> None:
    with open(root / "data" / "withdrawn.yaml", "w") as f:
        f.write(f"- run_id: {run_id}\n  date: 2026-12-01\n  reason: {reason}\n")


def spread(median: float, n: int = 7, step: float = 0.001) -> list[float]:
    """``n`` samples (odd) whose median is exactly ``median``, spread by ``step`` each side."""
    half = n // 2
    return [round(median * (1 + step * k), 6) for k in range(-half, half + 1)]


def variant(
    median: float | None,
    *,
    eager: float | None = None,
    eager_run: bool = False,
    error: str | None = None,
    timer: str = "cuda-graph",
    meta: dict[str, Any] | None = None,
    check: dict[str, Any] | None = None,
) -> dict[str, Any]:
    if median is None and error is None:
        error = "refused: not in this test"
    if check is None and error is None:  # a timed variant passed its float64 check first
        check = {"rel_l2": [1e-4], "max_abs": [1e-3], "tolerance": 0.01, "finite": True, "passed": True}
    out: dict[str, Any] = {
        "samples_us": spread(median) if error is None and median is not None else [],
        "error": error,
        "check": check,
        "timer": timer if error is None else None,
        "calls_per_sample": 100 if error is None else None,
        "meta": meta or {},
    }
    if eager_run:
        out["eager_us"] = spread(eager) if error is None and eager is not None else []
        out["eager_calls_per_sample"] = 100 if error is None else None
    return out


def document(
    study: str,
    run_id: str,
    started: str,
    cases: list[dict[str, Any]],
    *,
    timer: str = "cuda-graph",
    eager: bool = False,
    quick: bool = False,
    sm_count: int = 132,
    version: int = 2,
) -> dict[str, Any]:
    """A run document; every variant stores its label (as bench writes since schema 4: an
    older version reads the contract's legacy table instead, and ignores it)."""
    for case in cases:
        for name, v in case["variants"].items():
            v.setdefault("label", legacy_label(study, name, v))
    return {
        "schema_version": version,
        "run_id": run_id,
        "study": study,
        "status": "complete",
        "started_at": started,
        "finished_at": started,
        "command": f"python -m bench run {study}",
        "code": {"commit": "0123456789abcdef0123456789abcdef01234567", "dirty": False},
        "env": {
            "gpu": {**H200, "sm_count": sm_count},
            "driver": "580.0",
            "cuda": "13.0",
            "torch": "2.11.0",
            "triton": "3.6.0",
            "python": "3.12.3",
            "packages": {"liger-kernel": "0.8.5", "quack-kernels": "0.6.5"},
            "before": {"sm_clock_mhz": 1980.0, "utilization_pct": 0.0},
            "peaks": {"copy_GBps": 4000.0, "mm_bf16_TFLOPs": 750.0, "statistic": "synthetic"},
        },
        "method": {
            "timer": timer,
            "l2": {"cold": "rotation", "warm": "same buffers"},
            "warmup": {"burst_ms": 200.0, "idle_s": 0.25},
            "rounds": 7,
            "target_sample_ms": 1.0,
            "quick": quick,
            "eager_samples": eager,
            "check": "synthetic",
        },
        "cases": cases,
    }


# ----------------------------------------------------------------------------- row-plan grid


def grid_case(rows: int, cols: int, medians: dict[str, float | None], *, meta: dict[str, Any] | None = None) -> dict:
    """One grid cell; a ``None`` median records the variant as refused."""
    nbytes = 4 * rows * cols
    sets = max(2, min(512, math.ceil(4 * L2 / nbytes) + 1))
    variants = {}
    for name, m in medians.items():
        vmeta = (meta or {}) if name == "planner" else {}
        variants[name] = variant(m, meta=vmeta)
    return {
        "id": f"fwd/bf16/{rows}x{cols}/cold",
        "case": {"op": "softmax", "direction": "fwd", "dtype": "bf16", "rows": rows, "cols": cols, "l2": "cold"},
        "bytes": nbytes,
        "flops": 5 * rows * cols,
        "rotation": {"sets": sets, "bytes": sets * nbytes},
        "variants": variants,
    }


def grid_doc(run_id: str, started: str, cases: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    return document("rowgrid", run_id, started, cases, **kw)


def _pad(rows: int, cols: int) -> int:
    return 7 if rows > 1 and cols % 8 else 0


def modelled_cell(rows: int, cols: int, *, split_cost: float = 1.25, sms: int = 132) -> dict[str, Any]:
    """A grid cell whose plan times follow a small model: one program per row leaves SMs idle
    when rows are few, a split spreads a row over programs at a price, a loop reads twice."""
    pad = _pad(rows, cols)
    whole = next_power_of_2(cols + pad)
    t = 4 * rows * cols / 4.0e6  # µs at 4 TB/s
    occ = max(1.0, sms / rows)
    medians: dict[str, float | None] = {}
    if whole <= 32768:
        medians["block"] = round(2 + t * occ * (1 + whole / 65536), 4)
    for i, chunk in enumerate((2048, 4096, 8192, 16384, 32768)):
        if chunk < whole:
            medians[f"looped-{chunk}"] = round(2.5 + t * occ * (1.08 + 0.02 * i), 4)
    for chunk in (2048, 4096):
        if chunk < whole:
            programs = rows * math.ceil((cols + pad) / chunk)
            medians[f"split-{chunk}"] = round(4 + t * max(1.0, sms / programs) * (split_cost + 0.01 * chunk / 2048), 4)
    staged = math.ceil((cols + pad) / 4096)
    if cols + pad > 16384 and staged * 4096 * 2 <= 224 * 1024:  # one read of the row, two programs an SM
        medians["staged-4096"] = round(2.2 + t * occ * 1.02, 4)
    if "split-4096" in medians:
        medians["split-4096-1launch"] = round(medians["split-4096"] * 0.97, 4)  # type: ignore[operator]
    plan = plan_rows(rows, cols, 2, sms, SOFTMAX_POLICY, None, pad)
    name = "block" if plan.kind == "block" else f"{plan.kind}-{plan.block}"
    medians["planner"] = medians.get(name) or round(3 + t * occ * 1.2, 4)
    medians["torch"] = round(3 + t * 1.3 * max(1.0, 16 / rows), 4)
    medians["compile"] = round(4 + t * 1.2, 4)
    return grid_case(rows, cols, medians, meta={**plan.describe(), "label": plan.label})


GRID_ROWS = (1, 4, 64, 200, 1000, 4096)
GRID_WIDTHS = (1531, 4097, 16384, 50257, 131073)


def modelled_grid(run_id: str, started: str, *, split_cost: float = 1.25) -> dict[str, Any]:
    cases = [modelled_cell(r, w, split_cost=split_cost) for w in GRID_WIDTHS for r in GRID_ROWS]
    return grid_doc(run_id, started, cases)


# ----------------------------------------------------------------------------- dispatch

HOST_PIECES = {
    "ours/validate": 1.5,
    "ours/plan": 8.0,
    "ours/allocate": 8.5,
    "ours/launch": 24.0,
    "ours/launch-triton": 48.0,
    "ours/forward": 46.0,
    "ours/call": 52.0,
    "ours/call-grad": 80.0,
    "ours/op": 82.0,
    "ours/op-grad": 120.0,
    "ours/step": 310.0,
    "ours/op-step": 500.0,
    "torch/allocate": 3.5,
    "torch/call": 10.0,
    "torch/aten": 13.0,
    "torch/call-grad": 12.5,
    "torch/step": 115.0,
    "liger/launch-triton": 22.0,
    "liger/forward": 40.0,
    "liger/call": 55.0,
    "liger/call-grad": 59.0,
    "liger/step": 256.0,
}
CHAIN = {"torch/eager": 12.0, "torch/compile": 80.0, "torch/reduce-overhead": 130.0, "ours/eager": 58.0,
         "ours/compile": 200.0, "ours/reduce-overhead": 134.0}  # fmt: skip


def dispatch_doc(
    run_id: str, started: str, *, ours: float = 1.0, quack: bool = False, shapes=((32, 127), (1024, 1024))
) -> dict[str, Any]:
    """A dispatch run; ``ours`` scales our pieces (0.2: the fast path landed)."""
    cases = []
    for rows, cols in shapes:
        pieces = {k: v * ours if k.startswith("ours/") else v for k, v in HOST_PIECES.items()}
        if quack:
            pieces |= {"quack/call": 4.0, "quack/step": 90.0}
        variants = {k: variant(v, timer="host-loop", meta={"label": k}) for k, v in pieces.items()}
        nbytes = 4 * rows * cols
        cases.append(
            {
                "id": f"host/bf16/{rows}x{cols}",
                "case": {
                    "op": "softmax",
                    "direction": "fwd+bwd",
                    "dtype": "bf16",
                    "rows": rows,
                    "cols": cols,
                    "l2": "warm",
                    "measure": "host",
                },
                "bytes": nbytes,
                "flops": 0,
                "variants": variants,
            }
        )
        for n in (1, 16):
            for measure, timer in (("user", "eager-events"), ("host", "host-loop")):
                chain = {k: v * (n if "eager" in k else 1) * (ours if k.startswith("ours/") else 1)
                         for k, v in CHAIN.items()}  # fmt: skip
                cases.append(
                    {
                        "id": f"chain{n}/{measure}/bf16/{rows}x{cols}",
                        "case": {
                            "op": f"softmax-chain{n}",
                            "direction": "fwd",
                            "dtype": "bf16",
                            "rows": rows,
                            "cols": cols,
                            "l2": "warm",
                            "measure": measure,
                            "chain": n,
                        },
                        "bytes": n * nbytes,
                        "flops": 0,
                        "variants": {k: variant(v, timer=timer, meta={"label": k}) for k, v in chain.items()},
                    }
                )
    return document("dispatch", run_id, started, cases, timer="cuda-graph")


# ----------------------------------------------------------------------------- any comparison study


def comparison_case(
    op: str, direction: str, rows: int, cols: int, l2: str, medians: dict[str, float | str], labels: dict[str, str]
) -> dict[str, Any]:
    """One case of a row-wise study (bf16, 2 bytes an element each way): each variant's
    median device time (its eager call 5 µs slower), or an error string; every variant
    stores its label, as bench writes it since schema 4."""
    nbytes = 2 * 2 * rows * cols
    variants = {}
    for name, m in medians.items():
        v = variant(None, error=m, eager_run=True) if isinstance(m, str) else variant(m, eager=m + 5, eager_run=True)
        variants[name] = {"label": labels[name], **v}
    sets = 1 if l2 == "warm" else max(2, min(512, math.ceil(4 * L2 / nbytes) + 1))
    return {
        "id": f"{direction}/bf16/{rows}x{cols}/{l2}",
        "case": {"op": op, "direction": direction, "dtype": "bf16", "rows": rows, "cols": cols, "l2": l2},
        "bytes": nbytes,
        "flops": 4 * rows * cols,
        "rotation": {"sets": sets, "bytes": sets * nbytes},
        "variants": variants,
    }


def comparison_doc(
    study: str,
    run_id: str,
    started: str,
    medians: Callable[[str, int, int], dict[str, float | str]],
    labels: dict[str, str],
    shapes: tuple[tuple[int, int], ...] = ((32, 127), (4096, 4096)),
) -> dict[str, Any]:
    """A schema-4 run of ``study``: forward, bf16, every shape in cold and warm L2, with
    ``medians(l2, rows, cols)`` giving each variant's median (or error)."""
    cases = [
        comparison_case(study, "fwd", r, c, l2, medians(l2, r, c), labels) for r, c in shapes for l2 in ("cold", "warm")
    ]
    return document(study, run_id, started, cases, eager=True, version=4)


# ----------------------------------------------------------------------------- softmax

SOFTMAX_SHAPES = ((32, 127), (1024, 1024), (16384, 4096), (8192, 32768), (1000, 50257), (4096, 50257),
                  (64, 131072), (4096, 151936))  # fmt: skip


def softmax_case(
    direction: str, rows: int, cols: int, l2: str, times: Callable[[str, int, int], tuple[float, float] | str | None]
) -> dict[str, Any]:
    """One softmax case; ``times(variant, rows, cols)`` gives (device, eager) medians, an
    error string, or None (not run)."""
    size = 2
    nbytes = (2 if direction == "fwd" else 5) * rows * cols * size
    names = ["triton", "torch", "eager", "compile", "liger", "quack"]
    if cols > 16384:
        names[1:1] = ["triton-looped", "triton-split"]
    variants = {}
    for name in names:
        t = times(name, rows, cols)
        if t is None:
            continue
        if isinstance(t, str):
            check = {"rel_l2": [1.0], "max_abs": [1.0], "tolerance": 0.01, "finite": False, "passed": False}
            variants[name] = variant(None, error=t, eager_run=True, check=check if t.startswith("check") else None)
            continue
        meta = {"plan": "looped" if cols > 16384 else "block"} if name == "triton" else {}
        variants[name] = variant(t[0], eager=t[1], eager_run=True, meta=meta)
    sets = 1 if l2 == "warm" else max(2, min(512, math.ceil(4 * L2 / nbytes) + 1))
    return {
        "id": f"{direction}/bf16/{rows}x{cols}/{l2}",
        "case": {"op": "softmax", "direction": direction, "dtype": "bf16", "rows": rows, "cols": cols, "l2": l2},
        "bytes": nbytes,
        "flops": 5 * rows * cols,
        "rotation": {"sets": sets, "bytes": sets * nbytes},
        "variants": variants,
    }


def softmax_times(name: str, rows: int, cols: int) -> tuple[float, float] | str | None:
    """A plausible v2 run: ours at the copy rate on large shapes, QuACK a little faster on
    the wide ones and failing its check at 4096x151936, Liger refusing rows over 65536."""
    t = 4 * rows * cols / 4.0e6 / 0.9  # µs at 90% of a 4 TB/s copy
    if name == "quack":
        if cols * 2 % 16:
            return "refused: QuACK needs rows of a multiple of 16 bytes"
        if cols == 151936:
            return "check failed: relative L2 error nan (tolerance 1e-02, finite=False)"
        return (round(t * 0.85 + 2, 4), round(t * 0.85 + 6, 4)) if cols >= 32768 else (round(t + 2, 4), 6.0)
    if name == "liger" and cols > 65536:
        return "RuntimeError: Cannot launch Triton kernel since n exceeds the recommended Triton blocksize"
    base = {"triton": 1.0, "triton-looped": 1.0, "triton-split": 1.4, "torch": 1.6, "eager": 8.0, "compile": 1.3,
            "liger": 1.05}[name]  # fmt: skip
    host = {"triton": 12.0, "triton-looped": 12.0, "triton-split": 14.0, "torch": 8.0, "eager": 60.0,
            "compile": 40.0, "liger": 35.0}[name]  # fmt: skip
    device = round(t * base + 2, 4)
    return device, round(max(device, host) + 1, 4)


def softmax_doc(run_id: str, started: str, times=softmax_times, shapes=SOFTMAX_SHAPES) -> dict[str, Any]:
    cases = [
        softmax_case(direction, r, c, l2, times)
        for direction in ("fwd", "fwd+bwd")
        for r, c in shapes
        for l2 in ("cold", "warm")
        if direction == "fwd" or (r, c) in ((32, 127), (4096, 50257))
    ]
    return document("softmax", run_id, started, cases, eager=True)
