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
from typing import Any

import torch

import kernels
from bench.studies import Params, Refused, Step, Tensors, Variant
from bench.studies._rows import DTYPES, TOLERANCE, ours, package_meta, require_16_byte_rows, row_case_id, row_cases
from bench.studies._rows import plan as _plan
from kernels.plans import RowPlan
from kernels.softmax import BACKWARD_POLICY, POLICY, backward_rows, forward_rows

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


def _build(plan: str | None):  # type: ignore[no-untyped-def]
    """Our variant's build, with ``plan`` forced (None: the planner's choice)."""

    def build(case: Params) -> Step:
        return _apply(lambda x: kernels.softmax(x, plan=plan), case)

    return build


def _one_launch_plan(case: Params) -> RowPlan:
    return dataclasses.replace(_plan(case, POLICY, "split"), one_launch=True)


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
    require_16_byte_rows(case)
    return _apply(quack_softmax, case)


_quack_meta = package_meta("quack-kernels", "quack.softmax.softmax")
_liger_meta = package_meta("liger-kernel", "liger_kernel.ops.softmax.LigerSoftmaxFunction")


class SoftmaxStudy:
    name = "softmax"
    directions = ("fwd", "fwd+bwd")

    def cases(self, quick: bool) -> list[Params]:
        return row_cases("softmax", self.directions, quick, SHAPES, OTHER_DTYPE_SHAPES, QUICK_SHAPES)

    def case_id(self, case: Params) -> str:
        return row_case_id(case)

    def options(self, quick: bool) -> dict[str, Any]:
        # Eager samples double each case's time; 12 interleaved rounds of each keep a full
        # sweep inside one device call.
        return {"rounds": 12 if quick else 14}

    def variants(self, case: Params) -> list[Variant]:
        # Wide rows: both multi-program plans forced beside the planner's choice (bench.studies._rows),
        # and the one-launch split the planner rejected, so its loss stays on the record.
        out = ours(case, _build, POLICY, BACKWARD_POLICY)
        if _plan(case, POLICY).kind != "block":
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
