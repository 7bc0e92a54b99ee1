"""The row-plan grid: every plan of softmax's forward, and of residual RMSNorm's, over a grid of
row counts and widths, beside torch (``torch.softmax``; ``x + residual`` then
``F.rms_norm``) and ``torch.compile`` of the same in every cell.

The planner (``kernels.plans.plan_rows``) is scored on these runs by *regret*: its plan's
time over the best plan's in the cell, minus one.  Its thresholds are fitted on one run and
scored on another (``publish/rowgrid.py``).  Widths are mostly not powers of two: real
vocabularies (32000, 50257, 128256, 151936), primes, 2^k + 1, odd hidden sizes.  Rows run
from 1 (one wide row) to 16384; a cell holds at most 2^28 elements (512 MB in bf16), so the
widest rows come in few.

Every cell is forward, bf16, cold L2 (the graph rotates through input sets that together
exceed the L2): plan choices are about DRAM traffic and occupancy, and warm numbers of a
large cell would measure the L2.  RMSNorm's cells (case ids ``rmsnorm/fwd/...``; softmax's
keep their ids ``fwd/...``) add a residual and a weight: it reads two rows and writes two,
where softmax reads one and writes one, so the same thresholds may not suit both (issue 8:
one rule or one per operator, whichever the held-out run supports).  ``--only rmsnorm``
runs RMSNorm's cells alone.
"""

from __future__ import annotations

import importlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from bench.studies import Params, Refused, Step, Tensors, Variant
from kernels.plans import (
    RMSNORM_POLICY,
    SOFTMAX_POLICY,
    STAGED_CHUNK,
    STAGED_MAX_BYTES,
    STAGED_WARPS,
    VECTOR_BYTES,
    RowPlan,
    RowPolicy,
    next_power_of_2,
    split_geometry,
    warps_for,
)
from kernels.softmax import forward_rows, plan_for

rmsnorm = importlib.import_module("kernels.rmsnorm")  # the package attribute is the function

ROWS = [1, 4, 12, 32, 64, 100, 132, 264, 500, 1000, 2048, 4096, 8192, 16384]
WIDTHS = [
    1024, 1531, 2048, 3000, 4097, 5120, 8191, 11008, 12289, 14336, 16384, 22001, 32000, 32769, 50257,
    65536, 77777, 100003, 128256, 131073, 151936, 200064, 262144, 393241, 524289, 1048576,
]  # fmt: skip
QUICK_ROWS = [1, 64, 1000, 4096]
QUICK_WIDTHS = [1531, 4097, 50257, 131073]
MAX_ELEMS = 2**28
LOOPED_CHUNKS = (4096, 8192, 16384, 32768)
SPLIT_CHUNKS = (2048, 4096)
MAX_BLOCK = 32768  # widest row tried as one block (64 KB of bf16 held in registers)
ELEM = 2  # bf16
OPS = ("softmax", "rmsnorm")
POLICIES: dict[str, RowPolicy] = {"softmax": SOFTMAX_POLICY, "rmsnorm": RMSNORM_POLICY}
EPS = 1e-6


def _pad(rows: int, cols: int) -> int:
    vec = VECTOR_BYTES // ELEM
    return vec - 1 if rows > 1 and cols % vec else 0


def cell_plans(rows: int, cols: int, sms: int = 132, op: str = "softmax") -> dict[str, RowPlan]:
    """Every plan timed in a cell, by variant name: the block plan where the row fits in
    MAX_BLOCK, looped with four chunk sizes, split with two (two launches), for softmax the
    staged plan where a row wider than 16384 elements fits a program's shared memory, and
    for softmax the one-launch split at the cells where its first design could not deadlock (its
    cooperative design runs anywhere; the same cells keep runs comparable)."""
    policy = POLICIES[op]
    pad = _pad(rows, cols)
    whole = next_power_of_2(cols + pad)
    out: dict[str, RowPlan] = {}
    if whole <= MAX_BLOCK:
        pack = rows >= policy.pack_min_rows_per_sm * sms
        rpp = max(1, min(policy.max_rows_per_program, policy.pack_elems // whole)) if pack else 1
        out["block"] = RowPlan("block", whole, warps_for(whole * rpp), rpp)
    for chunk in LOOPED_CHUNKS:
        if chunk < whole:
            out[f"looped-{chunk}"] = RowPlan("looped", chunk, warps_for(chunk))
    for chunk in SPLIT_CHUNKS:
        if chunk < whole:
            chunks, span = split_geometry(cols + pad, chunk, chunk)
            out[f"split-{chunk}"] = RowPlan("split", chunk, warps_for(chunk), chunks=chunks, span=span)
    staged_chunks = -(-(cols + pad) // STAGED_CHUNK)
    if op == "softmax" and cols + pad > 16384 and staged_chunks * STAGED_CHUNK * ELEM <= STAGED_MAX_BYTES:
        out[f"staged-{STAGED_CHUNK}"] = RowPlan("staged", STAGED_CHUNK, STAGED_WARPS, chunks=staged_chunks)
    if op == "softmax" and "split-4096" in out and out["split-4096"].span == 1 and out["split-4096"].chunks <= 2 * sms:
        p = out["split-4096"]
        out["split-4096-1launch"] = RowPlan("split", p.block, p.num_warps, chunks=p.chunks, one_launch=True)
    return out


def _plan_step(plan: RowPlan, op: str = "softmax") -> Step:
    if op == "rmsnorm":

        def rms_step(t: Tensors) -> tuple[torch.Tensor, ...]:
            y, h = torch.empty_like(t["x"]), torch.empty_like(t["x"])
            rmsnorm.forward_rows(t["x"], y, t["w"], EPS, t["r"], h, plan)
            return y, h

        return rms_step

    def step(t: Tensors) -> tuple[torch.Tensor, ...]:
        y = torch.empty_like(t["x"])
        forward_rows(t["x"], y, plan)
        return (y,)

    return step


def _torch_rms_norm(t: Tensors) -> tuple[torch.Tensor, ...]:
    h = t["x"] + t["r"]
    return torch.nn.functional.rms_norm(h, (h.shape[-1],), t["w"], EPS), h


_COMPILED: dict[str, Any] = {}


def _compiled(case: Params) -> Step:
    # One compiled function for the whole grid, rows dynamic and width static: what a model
    # with a fixed vocabulary and changing batch sizes gets.  The limits are raised so that
    # Dynamo never falls back to eager after its default 8 recompilations.
    op = case["op"]
    if op not in _COMPILED:
        torch._dynamo.config.cache_size_limit = 1024
        torch._dynamo.config.accumulated_cache_size_limit = 4096
        if op == "rmsnorm":
            _COMPILED[op] = torch.compile(lambda t: _torch_rms_norm(t), fullgraph=True)
        else:
            _COMPILED[op] = torch.compile(lambda t: (torch.softmax(t["x"], dim=-1),), fullgraph=True)
    fn = _COMPILED[op]

    def step(t: Tensors) -> tuple[torch.Tensor, ...]:
        for v in t.values():
            if v.dim() == 2:
                torch._dynamo.maybe_mark_dynamic(v, 0)
        return tuple(fn(t))

    return step


class RowGridStudy:
    name = "rowgrid"
    directions = ("fwd",)

    def cases(self, quick: bool) -> list[Params]:
        rows, widths = (QUICK_ROWS, QUICK_WIDTHS) if quick else (ROWS, WIDTHS)
        return [
            {"op": op, "direction": "fwd", "dtype": "bf16", "rows": r, "cols": w}
            for op in OPS
            for w in widths
            for r in rows
            if r * w <= MAX_ELEMS
        ]

    def case_id(self, case: Params) -> str:
        head = "" if case["op"] == "softmax" else f"{case['op']}/"
        return f"{head}fwd/bf16/{case['rows']}x{case['cols']}"

    def options(self, quick: bool) -> dict[str, Any]:
        return {"l2_modes": ("cold",), "eager": False, "rounds": 3 if quick else 5, "target_ms": 0.3}

    def prepare(self, cases: list[Params], device: torch.device, stream: Any) -> None:
        """Compile every (plan, width, alignment) of the grid up front, in threads: Triton's
        compiler spends most of its time outside the GIL, and one at a time it would take
        minutes of the GPU's time."""
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        jobs: dict[tuple, tuple[str, int, int, RowPlan]] = {}
        for c in cases:
            rows = 1 if c["rows"] == 1 else 2
            for plan in cell_plans(c["rows"], c["cols"], sms, c["op"]).values():
                jobs.setdefault((c["op"], rows, c["cols"], plan), (c["op"], rows, c["cols"], plan))

        def compile_one(job: tuple[str, int, int, RowPlan]) -> str | None:
            op, rows, cols, plan = job
            try:
                x = torch.randn((rows, cols), device=device).to(torch.bfloat16)
                t = {"x": x, "r": x.clone(), "w": torch.ones(cols, device=device, dtype=torch.bfloat16)}
                _plan_step(plan, op)(t)
                return None
            except Exception as exc:  # the cell itself will record the error
                return f"{op} {cols} {plan.label}: {type(exc).__name__}"

        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 4)) as pool:
            failed = [f for f in pool.map(compile_one, jobs.values()) if f]
        torch.cuda.synchronize()
        print(
            f"compiled {len(jobs)} plans in {time.monotonic() - t0:.0f} s; failed: {failed[:5]}",
            file=stream,
            flush=True,
        )

    def variants(self, case: Params) -> list[Variant]:
        sms = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 132
        op = case["op"]
        out = [
            Variant(
                name, f"plan {plan.label}", lambda c, plan=plan, op=op: _plan_step(plan, op),
                lambda c, plan=plan: plan.describe(),
            )
            for name, plan in cell_plans(case["rows"], case["cols"], sms, op).items()
        ]  # fmt: skip
        if op == "rmsnorm":
            out.append(Variant("planner", "planner's choice (kernels.rms_norm)", self._planner, self._planner_meta))
            out.append(Variant("torch", "x + residual, then F.rms_norm", lambda c: _torch_rms_norm))
            out.append(Variant("compile", "torch.compile(x + residual, then F.rms_norm), rows dynamic", _compiled,
                               lambda c: {"dynamic": "rows"}))  # fmt: skip
            return out
        out.append(Variant("planner", "planner's choice (kernels.softmax)", self._planner, self._planner_meta))
        out.append(Variant("torch", "torch.softmax", lambda c: lambda t: (torch.softmax(t["x"], dim=-1),)))
        out.append(
            Variant("compile", "torch.compile(torch.softmax), rows dynamic", _compiled, lambda c: {"dynamic": "rows"})
        )
        return out

    @staticmethod
    def _planner(case: Params) -> Step:
        import kernels

        if case["op"] == "rmsnorm":
            return lambda t: kernels.rms_norm(t["x"], (t["x"].shape[-1],), t["w"], EPS, residual=t["r"])
        return lambda t: (kernels.softmax(t["x"]),)

    @staticmethod
    def _planner_meta(case: Params) -> dict[str, Any]:
        if not torch.cuda.is_available():
            raise Refused("needs a GPU")
        x = torch.empty((case["rows"], case["cols"]), device="cuda", dtype=torch.bfloat16)
        plan = (rmsnorm.plan_for(x, x) if case["op"] == "rmsnorm" else plan_for(x, x))[0]
        return {**plan.describe(), "label": plan.label}

    def inputs(self, case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
        shape = (case["rows"], case["cols"])
        x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * 4
        if case["op"] != "rmsnorm":
            return {"x": x.to(torch.bfloat16)}
        r = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
        w = torch.rand(case["cols"], generator=gen, device=device, dtype=torch.float32) + 0.5
        return {"x": x.to(torch.bfloat16), "r": r.to(torch.bfloat16), "w": w.to(torch.bfloat16)}

    def reference(self, case: Params, inputs: Tensors) -> tuple[torch.Tensor, ...]:
        if case["op"] != "rmsnorm":
            return (torch.softmax(inputs["x"].double(), dim=-1),)
        h = inputs["x"].double() + inputs["r"].double()
        y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * inputs["w"].double()
        return y, h

    def traffic(self, case: Params) -> tuple[int, int]:
        elems = case["rows"] * case["cols"]
        if case["op"] == "rmsnorm":  # x and the residual read, y and h written; the weight from L2
            return 4 * elems * ELEM, 5 * elems
        return 2 * elems * ELEM, 5 * elems

    def tolerance(self, case: Params) -> float:
        return 1e-2


STUDY = RowGridStudy()
