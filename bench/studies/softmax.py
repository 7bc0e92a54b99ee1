"""Softmax over the last dimension: our Triton plans against what a user would pick instead.

Peers: ``torch.softmax`` (the built-in op), the unfused composition a careful user writes
(upcast, max, subtract, exp, sum, divide: several kernels and intermediates), the same
built-in under ``torch.compile`` (fused against fused), Liger-Kernel and QuACK (CuTe DSL)
when installed; their refusals and failed checks are recorded like any result.
Traffic model: forward reads ``x`` and writes ``y`` (2 passes); forward+backward adds a read
of ``y`` and ``dy`` and a write of ``dx`` (5 passes).  Bytes are counted from the problem,
not from what any implementation moves.
"""

from __future__ import annotations

import dataclasses
from importlib import metadata
from typing import Any

import torch

import kernels
from bench.studies import Params, Refused, Step, Tensors, Variant
from kernels._rowwise import ALIGN_ROWS, ALIGN_WINDOW, one_launch_split_ok
from kernels.plans import VECTOR_BYTES, RowPlan, plan_rows
from kernels.softmax import BACKWARD_POLICY, POLICY, backward_rows, forward_rows

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# Row counts x widths: from launch-bound (32 x 127) through DRAM-bound (16384 x 4096,
# 8192 x 32768) to few wide rows that need the looped and split plans.
SHAPES = [
    (32, 127),
    (1024, 1024),
    (512, 4097),
    (4096, 4096),
    (16384, 1024),
    (16384, 4096),
    (8192, 32768),
    (4, 32769),
    (64, 131072),
    (8, 1048576),
    (1000, 50257),  # GPT-2's vocabulary: rows misaligned by an odd width
    (4096, 50257),
    (4096, 151936),  # Qwen2's vocabulary
]
# fp16 and fp32: the same code with other element sizes, so a few shapes of each kind
# (latency-bound, DRAM-bound, few wide rows, a misaligned vocabulary) rather than all.
OTHER_DTYPE_SHAPES = [(1024, 1024), (16384, 4096), (64, 131072), (1000, 50257)]
QUICK_SHAPES = [(32, 127), (16384, 4096), (64, 131072), (1000, 50257)]
TOLERANCE = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2}  # relative L2 error against float64


def _apply(fn, case: Params) -> Step:  # type: ignore[no-untyped-def]
    """Wrap a forward ``fn(x) -> y`` into the step the case times: forward only, or
    forward then backward through autograd with a given ``dy``."""
    if case["direction"] == "fwd":
        return lambda t: (fn(t["x"]),)

    def step(t: Tensors) -> tuple[torch.Tensor, ...]:
        y = fn(t["x"])
        (dx,) = torch.autograd.grad(y, t["x"], t["dy"])
        return y, dx

    return step


def _pad(case: Params) -> int:
    """The alignment window the planner sizes blocks for (contiguous rows of this width)."""
    size = torch.empty((), dtype=DTYPES[case["dtype"]]).element_size()
    vec = VECTOR_BYTES // size
    align = ALIGN_ROWS if case["cols"] % vec == 0 or case["rows"] == 1 else ALIGN_WINDOW
    return vec - 1 if align == ALIGN_WINDOW else 0


def _plan(case: Params, policy, force: str | None) -> RowPlan:  # type: ignore[no-untyped-def]
    size = torch.empty((), dtype=DTYPES[case["dtype"]]).element_size()
    return plan_rows(case["rows"], case["cols"], size, _sms(), policy, force, _pad(case))  # type: ignore[arg-type]


def _ours(plan: str | None):  # type: ignore[no-untyped-def]
    def build(case: Params) -> Step:
        return _apply(lambda x: kernels.softmax(x, plan=plan), case)

    def meta(case: Params) -> dict[str, Any]:
        out: dict[str, Any] = _plan(case, POLICY, plan).describe()
        if case["direction"] == "fwd+bwd":
            out["backward"] = _plan(case, BACKWARD_POLICY, plan).describe()
        return out

    return build, meta


def _one_launch_plan(case: Params) -> RowPlan:
    plan = dataclasses.replace(_plan(case, POLICY, "split"), one_launch=True)
    if not one_launch_split_ok(plan, _sms()):
        raise Refused(f"{plan.chunks} chunks of {plan.span} blocks per row could deadlock a one-launch split")
    return plan


class _OneLaunchSplit(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, plan: RowPlan) -> torch.Tensor:  # type: ignore[override]
        y = torch.empty_like(x)
        forward_rows(x, y, plan)
        ctx.save_for_backward(y)
        ctx.plan = plan
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor):  # type: ignore[override]
        (y,) = ctx.saved_tensors
        dx = torch.empty_like(y)
        backward_rows(y, dy.contiguous(), dx, ctx.plan)
        return dx, None


def _one_launch_split(case: Params) -> Step:
    if not torch.cuda.is_available():
        raise Refused("the one-launch split needs a GPU (its programs wait for each other)")
    plan = _one_launch_plan(case)
    return _apply(lambda x: _OneLaunchSplit.apply(x, plan), case)


def _sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 132


def _eager_composition(x: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    e = torch.exp(xf - xf.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)


def _compiled(case: Params) -> Step:
    # Dynamo caches compiled code per code object and silently falls back to eager past its
    # recompile limit; every case compiles afresh so none of them runs uncompiled.
    torch._dynamo.reset()
    fn = torch.compile(lambda x: torch.softmax(x, dim=-1), dynamic=False, fullgraph=True)
    return _apply(fn, case)


def _liger(case: Params) -> Step:
    try:
        from liger_kernel.ops.softmax import LigerSoftmaxFunction
    except ImportError as exc:
        raise Refused(f"liger-kernel is not installed ({exc})") from exc
    return _apply(LigerSoftmaxFunction.apply, case)


def _quack(case: Params) -> Step:
    try:
        from quack.softmax import softmax as quack_softmax
    except ImportError as exc:
        raise Refused(f"quack-kernels is not installed ({exc})") from exc
    size = torch.empty((), dtype=DTYPES[case["dtype"]]).element_size()
    if (case["cols"] * size) % 16:
        # quack-kernels 0.6.5 copies rows in 16-byte vectors and asserts the width allows it.
        raise Refused(
            f"QuACK needs rows of a multiple of 16 bytes; width {case['cols']} is {case['cols'] * size} bytes"
        )
    return _apply(quack_softmax, case)


def _quack_meta(case: Params) -> dict[str, Any]:
    try:
        return {"version": metadata.version("quack-kernels"), "entry": "quack.softmax.softmax"}
    except metadata.PackageNotFoundError:
        return {}


def _liger_meta(case: Params) -> dict[str, Any]:
    try:
        return {"version": metadata.version("liger-kernel"), "entry": "liger_kernel.ops.softmax.LigerSoftmaxFunction"}
    except metadata.PackageNotFoundError:
        return {}


class SoftmaxStudy:
    name = "softmax"
    directions = ("fwd", "fwd+bwd")

    def cases(self, quick: bool) -> list[Params]:
        out: list[Params] = []
        for direction in self.directions:
            for dtype in ("bf16",) if quick else ("bf16", "fp16", "fp32"):
                shapes = QUICK_SHAPES if quick else SHAPES if dtype == "bf16" else OTHER_DTYPE_SHAPES
                for rows, cols in shapes:
                    out.append({"op": "softmax", "direction": direction, "dtype": dtype, "rows": rows, "cols": cols})
        return out

    def case_id(self, case: Params) -> str:
        return f"{case['direction']}/{case['dtype']}/{case['rows']}x{case['cols']}"

    def options(self, quick: bool) -> dict[str, Any]:
        # Eager samples double each case's time; 12 interleaved rounds of each keep a full
        # sweep inside one device call.
        return {"rounds": 12 if quick else 14}

    def variants(self, case: Params) -> list[Variant]:
        build, meta = _ours(None)
        out = [Variant("triton", "Triton (ours, planner's choice)", build, meta)]
        if _plan(case, POLICY, None).kind != "block":
            # Wide rows: time both multi-program plans, one of which repeats the planner's
            # choice, so the page can show why it chose and how large the noise is; and the
            # one-launch split the planner rejected, so its loss stays on the record.
            for plan in ("looped", "split"):
                b, m = _ours(plan)
                out.append(Variant(f"triton-{plan}", f"Triton, {plan} plan forced", b, m))
            out.append(
                Variant(
                    "triton-split-1launch",
                    "Triton, split in one launch (rejected)",
                    _one_launch_split,
                    lambda c: _one_launch_plan(c).describe(),
                )
            )
        out += [
            Variant("torch", "torch.softmax", lambda c: _apply(lambda x: torch.softmax(x, dim=-1), c)),
            Variant("eager", "unfused eager composition", lambda c: _apply(_eager_composition, c)),
            Variant(
                "compile",
                "torch.compile(torch.softmax)",
                _compiled,
                lambda c: {"mode": "default", "dynamic": False, "fullgraph": True},
            ),
            Variant("liger", "Liger-Kernel", _liger, _liger_meta),
            Variant("quack", "QuACK", _quack, _quack_meta),
        ]
        return out

    def inputs(self, case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
        shape = (case["rows"], case["cols"])
        dtype = DTYPES[case["dtype"]]
        # Fresh normal draws scaled by 4: peaked rows, as attention scores and logits are.
        x = (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * 4).to(dtype)
        t = {"x": x}
        if case["direction"] == "fwd+bwd":
            t["x"] = x.requires_grad_()
            t["dy"] = torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)
        return t

    def reference(self, case: Params, inputs: Tensors) -> tuple[torch.Tensor, ...]:
        y = torch.softmax(inputs["x"].detach().double(), dim=-1)
        if case["direction"] == "fwd":
            return (y,)
        dy = inputs["dy"].double()
        return y, y * (dy - (y * dy).sum(dim=-1, keepdim=True))

    def traffic(self, case: Params) -> tuple[int, int]:
        elems = case["rows"] * case["cols"]
        size = torch.empty((), dtype=DTYPES[case["dtype"]]).element_size()
        if case["direction"] == "fwd":
            return 2 * elems * size, 5 * elems  # max, subtract, exp, sum, scale
        return 5 * elems * size, 9 * elems  # + multiply, sum, subtract, multiply

    def tolerance(self, case: Params) -> float:
        return TOLERANCE[case["dtype"]]


STUDY = SoftmaxStudy()
