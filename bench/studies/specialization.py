"""Specialization: the same RMSNorm source with its sizes compile-time or runtime.

One persistent RMSNorm kernel (``kernels/specialization.py``) is compiled four ways: every
size a ``tl.constexpr``; only the model-fixed sizes (width and row stride: the hidden size)
constexpr, the row count runtime; every size runtime; and plain ints, which Triton
specializes by its own rules (a value of 1, divisibility by 16).  The cases are a sweep of
batch sizes (rows) at model hidden sizes, in the order a serving process meets them, so
each variant's meta records what that order cost it: how many kernels its source has been
compiled into so far, and how long its first call at this shape took (compilation
included, where the shape needed one).  Beside them, to place the four: our production
RMSNorm (``kernels.rms_norm``, model-fixed sizes on the row base) and ``F.rms_norm``.

Every Triton variant's meta also holds what its compiled kernel is made of (registers per
thread, spills, shared memory: :mod:`bench.evidence`).  Traffic: one read of ``x``, one
write of ``y`` and one read of the weight.

Registered (contract/studies.py); its page is ``publish/pages/specialization.py`` with
``templates/specialization.md.j2``.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F

import kernels
from bench import evidence
from bench.studies import Params, Tensors, Variant
from bench.studies._rows import DTYPES, TOLERANCE, element_size
from kernels import specialization as spec

EPS = 1e-6
WIDTHS = [4096, 5120, 7168, 14336]  # hidden sizes of real models; 4096 the only power of two
# A serving process's batch sizes (tokens in flight), in the order they arrive: 1 and odd
# counts included, so that Triton's own integer specialization (== 1, % 16) shows.
ROWS = [1, 3, 64, 100, 1000, 4096, 8191, 16384]
QUICK_WIDTHS = [5120]
QUICK_ROWS = [1, 100, 8191]
LABELS = {
    "all_constexpr": "every size constexpr",
    "model_fixed": "model-fixed sizes constexpr",
    "all_runtime": "every size runtime",
    "triton_default": "Triton's default specialization",
}


def _mode(mode: str):  # type: ignore[no-untyped-def]
    return lambda case: lambda t: (spec.rms_norm_specialized(t["x"], t["weight"], EPS, mode=mode),)


def _first_call(mode: str, case: Params) -> dict[str, Any]:
    """Call ``mode``'s kernel once at this case's shape, as the sweep's first call there:
    its wall time (compilation included where the shape needs one), the compilations the
    source has had so far in this process, and what the kernel it ran is made of."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = DTYPES[case["dtype"]]
    x = torch.randn(case["rows"], case["cols"], device=device, dtype=dtype)
    w = torch.randn(case["cols"], device=device, dtype=dtype)
    y = torch.empty_like(x)
    before = spec.compilations(mode)
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    compiled = spec.launch(mode, x, w, y, EPS)
    if device.type == "cuda":
        torch.cuda.synchronize()
    ms = (time.perf_counter() - start) * 1e3
    after = spec.compilations(mode)
    out = {
        "mode": mode,
        "first_call_ms": round(ms, 3),
        "compiled_now": after - before,
        "compilations": after,
    }
    return out | evidence.kernel_evidence([] if compiled is None else [compiled])


def _meta(mode: str):  # type: ignore[no-untyped-def]
    def meta(case: Params) -> dict[str, Any]:
        return _first_call(mode, case)

    return meta


class SpecializationStudy:
    name = "specialization"
    directions = ("fwd",)

    def cases(self, quick: bool) -> list[Params]:
        out: list[Params] = []
        for cols in QUICK_WIDTHS if quick else WIDTHS:
            for rows in QUICK_ROWS if quick else ROWS:
                out.append({"op": "rms_norm", "direction": "fwd", "dtype": "bf16", "rows": rows, "cols": cols})
        return out

    def case_id(self, case: Params) -> str:
        return f"{case['dtype']}/{case['rows']}x{case['cols']}"

    def options(self, quick: bool) -> dict[str, Any]:
        return {"rounds": 10 if quick else 12}

    def variants(self, case: Params) -> list[Variant]:
        out = [Variant(f"spec-{m}", f"Triton, {LABELS[m]}", _mode(m), _meta(m)) for m in spec.MODES]
        out.append(
            Variant(
                "triton",
                "Triton (ours): kernels.rms_norm",
                lambda c: lambda t: (kernels.rms_norm(t["x"], (c["cols"],), t["weight"], EPS),),
            )
        )
        out.append(
            Variant("torch", "F.rms_norm", lambda c: lambda t: (F.rms_norm(t["x"], (c["cols"],), t["weight"], EPS),))
        )
        return out

    def inputs(self, case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
        dtype = DTYPES[case["dtype"]]
        x = torch.randn((case["rows"], case["cols"]), generator=gen, device=device, dtype=torch.float32)
        w = 1.0 + 0.1 * torch.randn(case["cols"], generator=gen, device=device, dtype=torch.float32)
        return {"x": x.to(dtype), "weight": w.to(dtype)}

    def reference(self, case: Params, inputs: Tensors) -> tuple[torch.Tensor, ...]:
        x, w = inputs["x"].double(), inputs["weight"].double()
        return (F.rms_norm(x, (case["cols"],), w, EPS),)

    def traffic(self, case: Params) -> tuple[int, int]:
        size = element_size(case)
        elems = case["rows"] * case["cols"]
        return (2 * elems + case["cols"]) * size, 3 * elems

    def tolerance(self, case: Params) -> float:
        return TOLERANCE[case["dtype"]]


STUDY = SpecializationStudy()
