"""Synthetic runs of the RMSNorm and the row sum / vector add studies (tests/synthruns.py's
documents and variants), with the labels and case parameters their bench modules write:
times from a simple model against the 4000 GB/s copy of every synthetic run."""

from __future__ import annotations

import math
from typing import Any

from synthruns import L2, document, variant

COPY = 4000.0  # GB/s: the copy peak of synthruns.document
RMSNORM_LABELS = {
    "triton": "Triton (ours, planner's choice)",
    "triton-looped": "Triton, looped plan forced",
    "triton-split": "Triton, split plan forced",
    "torch": "F.rms_norm after the add",
    "eager": "unfused eager composition",
    "compile": "torch.compile(eager composition)",
    "liger": "Liger-Kernel",
    "quack": "QuACK",
}
RMSNORM_SHAPES = ((32, 127), (4096, 4096), (16384, 4096), (8192, 7168), (64, 131072))
ADD_LABELS = {
    "triton": "Triton (ours), block 4096 (default)",
    "triton-1024": "Triton (ours), block 1024",
    "triton-8192": "Triton (ours), block 8192",
    "torch-add": "torch.add",
    "compile-add": "torch.compile(torch.add)",
}
ROW_SUM_LABELS = {
    "triton": "Triton (ours, planner's choice)",
    "triton-looped": "Triton, looped plan forced",
    "triton-split": "Triton, split plan forced",
    "torch-sum": "torch.sum(x, -1)",
    "compile-sum": "torch.compile(torch.sum)",
}
# 4194305 and 1024 x 4096 stay in the L2 when warm; 1 x 257 is both an add and a row sum.
ADD_SIZES = (257, 4194305, 16777216, 67108864)
ROW_SHAPES = ((1, 257), (1024, 4096), (4096, 4096), (16384, 1024), (16, 1048576))


def _case(
    case_id: str, params: dict[str, Any], nbytes: int, times: dict[str, tuple[float, float] | str], labels: dict
) -> dict[str, Any]:
    """A case as bench writes it: every variant with its label, device and eager medians (or
    an error string), a rotation for cold L2."""
    variants = {}
    for name, t in times.items():
        if isinstance(t, str):
            v = variant(None, error=t, eager_run=True)
        else:
            meta = {"plan": "split" if params.get("cols", 0) > 16384 else "block"} if name == "triton" else {}
            if name == "liger":
                meta = {"version": "0.8.5", "entry": "liger_kernel.ops.fused_add_rms_norm"}
            v = variant(t[0], eager=t[1], eager_run=True, meta=meta)
        variants[name] = {"label": labels[name], **v}
    sets = 1 if params["l2"] == "warm" else max(2, min(512, math.ceil(4 * L2 / nbytes) + 1))
    return {
        "id": case_id,
        "case": params,
        "bytes": nbytes,
        "flops": nbytes,
        "rotation": {"sets": sets, "bytes": sets * nbytes},
        "variants": variants,
    }


# ----------------------------------------------------------------------------- RMSNorm


def rmsnorm_times(name: str, direction: str, rows: int, cols: int, nbytes: int) -> tuple[float, float] | str | None:
    """Ours at 92% of the copy on large shapes, Liger a little slower, QuACK faster on the
    wide rows and refusing rows that are not a multiple of 16 bytes, compile slower."""
    t = nbytes / (COPY * 1e3 * 0.92)  # µs
    if name == "quack":
        if cols * 2 % 16:
            return "refused: QuACK needs rows of a multiple of 16 bytes; width 127 is 254 bytes"
        if direction != "fwd":
            return "refused: this quack.rmsnorm.rmsnorm has no backward here"
        return (round(t * (0.85 if cols > 65536 else 1.02) + 2, 4), round(t + 9, 4))
    base = {"triton": 1.0, "triton-looped": 1.3, "triton-split": 1.0, "torch": 2.2, "eager": 6.0, "compile": 1.25,
            "liger": 1.08}[name]  # fmt: skip
    host = {"triton": 12.0, "triton-looped": 12.0, "triton-split": 14.0, "torch": 15.0, "eager": 60.0,
            "compile": 40.0, "liger": 35.0}[name]  # fmt: skip
    device = round(t * base + 2, 4)
    return device, round(max(device, host) + 1, 4)


def rmsnorm_doc(run_id: str, started: str, shapes=RMSNORM_SHAPES) -> dict[str, Any]:
    """A RMSNorm run: forward at every shape, the training step at two, cold and warm."""
    cases = []
    for direction in ("fwd", "fwd+bwd"):
        for rows, cols in shapes:
            if direction == "fwd+bwd" and (rows, cols) not in ((32, 127), (16384, 4096)):
                continue
            nbytes = (4 if direction == "fwd" else 8) * rows * cols * 2 + cols * 2
            names = ["triton", *(["triton-looped", "triton-split"] if cols > 16384 else []), "torch", "eager",
                     "compile", "liger", "quack"]  # fmt: skip
            times = {n: t for n in names if (t := rmsnorm_times(n, direction, rows, cols, nbytes)) is not None}
            for l2 in ("cold", "warm"):
                params = {"op": "rms_norm", "direction": direction, "dtype": "bf16", "rows": rows, "cols": cols,
                          "residual": True, "l2": l2}  # fmt: skip
                cases.append(_case(f"{direction}/bf16/{rows}x{cols}/{l2}", params, nbytes, times, RMSNORM_LABELS))
    return document("rmsnorm", run_id, started, cases, eager=True, version=4)


# ----------------------------------------------------------------------------- row sum, vector add


def _stream(nbytes: int, l2: str, share: float, reuse: float) -> float:
    """A streaming kernel's µs: ``share`` of the copy from DRAM; warm and small enough for
    the L2, ``reuse`` times that (L2 residency); half a µs to launch."""
    rate = COPY * share * (reuse if l2 == "warm" and nbytes < L2 / 2 else 1.0)
    return round(nbytes / (rate * 1e3) + 0.5, 4)


def rowsum_add_doc(run_id: str, started: str, *, add_sizes=ADD_SIZES, row_shapes=ROW_SHAPES) -> dict[str, Any]:
    """A row sum / vector add run: ours at 98% of the copy from DRAM and torch the same (a
    tie), but ours gains more from a warm L2 (a warm win that is only L2 residency); the
    wide row sum at 80%, the other block sizes and plans a little slower."""
    cases = []
    for n in add_sizes:
        nbytes = 3 * n * 2
        for l2 in ("cold", "warm"):
            shares = {"triton": (0.98, 2.5), "triton-1024": (0.9, 2.5), "triton-8192": (0.95, 2.5),
                      "torch-add": (0.98, 2.0), "compile-add": (0.93, 2.0)}  # fmt: skip
            times: dict[str, tuple[float, float] | str] = {}
            for name, (share, reuse) in shares.items():
                device = _stream(nbytes, l2, share, reuse)
                times[name] = (device, round(device + 6, 4))
            params = {"op": "add", "direction": "fwd", "dtype": "bf16", "rows": 1, "cols": n, "l2": l2}
            cases.append(_case(f"add/bf16/1x{n}/{l2}", params, nbytes, times, ADD_LABELS))
    for rows, cols in row_shapes:
        nbytes = (rows * cols + rows) * 2
        wide = cols * 2 > 32768
        names = ["triton", *(["triton-looped", "triton-split"] if wide else []), "torch-sum", "compile-sum"]
        for l2 in ("cold", "warm"):
            shares = {"triton": 0.8 if wide else 0.98, "triton-looped": 0.7, "triton-split": 0.8, "torch-sum": 0.98,
                      "compile-sum": 0.9}  # fmt: skip
            times = {}
            for name in names:
                device = _stream(nbytes, l2, shares[name], 2.5 if name.startswith("triton") else 2.0)
                times[name] = (device, round(device + 6, 4))
            params = {"op": "row_sum", "direction": "fwd", "dtype": "bf16", "rows": rows, "cols": cols, "l2": l2}
            cases.append(_case(f"row_sum/bf16/{rows}x{cols}/{l2}", params, nbytes, times, ROW_SUM_LABELS))
    return document("rowsum_add", run_id, started, cases, eager=True, version=4)
