"""Residual RMSNorm over the last dimension: our Triton plans against what a user would pick.

Every case is the residual form a transformer block runs: ``h = x + residual``,
``y = rms_norm(h) * weight``, returning ``y`` and ``h``.  Peers: the eager composition a
careful user writes (add, upcast, mean of squares, rsqrt, scale, weight: several kernels
and intermediates), ``F.rms_norm`` after the add, the composition under ``torch.compile``
(fused against fused), Liger-Kernel (its fused add + RMSNorm where the installed version
has one, else its RMSNorm after the add) and QuACK, when installed; their refusals and
failed checks are recorded like any result.

Traffic model (from the problem, not from any implementation): the forward reads ``x`` and
the residual and writes ``y`` and ``h`` (4 passes) plus one read of the weight;
forward+backward adds a read of ``h``, ``dy`` and ``dh`` and a write of ``dx`` (8 passes in
all) plus the weight and its gradient.  The weight gradient's second read of ``dy`` and
``h`` is our implementation's cost, not the problem's: it is not counted.

Registered (contract/studies.py); its page is ``publish/pages/rmsnorm.py`` with
``templates/rmsnorm.md.j2``.  The row-wise scaffolding it shares with softmax (dtypes,
plans, our variants, the case loop, peers' versions) is :mod:`bench.studies._rows`.
"""

from __future__ import annotations

import inspect
from importlib import metadata
from typing import Any

import torch
import torch.nn.functional as F

import kernels
from bench.studies import Params, Refused, Step, Tensors, Variant
from bench.studies._rows import (
    DTYPES,
    TOLERANCE,
    element_size,
    ours,
    package_meta,
    plan,
    require_16_byte_rows,
    row_case_id,
    row_cases,
)
from kernels.rmsnorm import BACKWARD_POLICY, FUSED_MAX_WIDTH, FUSED_MIN_WIDTH, POLICY

EPS = 1e-6
# Launch-bound (32 x 127) through DRAM-bound (16384 x 4096), model hidden sizes nobody
# tuned for (5120, 7168, 14336 and an odd 4097), and few wide rows (looped and split plans).
SHAPES = [
    (32, 127),
    (1024, 1024),
    (4096, 4096),
    (16384, 4096),
    (512, 4097),
    (8192, 5120),
    (8192, 7168),
    (4096, 14336),
    (4, 32769),
    (64, 131072),
    (8, 1048576),
]
OTHER_DTYPE_SHAPES = [(1024, 1024), (16384, 4096), (64, 131072)]
QUICK_SHAPES = [(32, 127), (16384, 4096), (8192, 7168), (64, 131072)]


def _apply(fn, case: Params) -> Step:  # type: ignore[no-untyped-def]
    """Wrap ``fn(x, residual, weight) -> (y, h)`` into the step a case times: the forward,
    or the forward then the backward through autograd with given ``dy`` and ``dh``
    (returning y, h, dx, d_residual, dw)."""
    if case["direction"] == "fwd":
        return lambda t: tuple(fn(t["x"], t["residual"], t["weight"]))

    def step(t: Tensors) -> tuple[torch.Tensor, ...]:
        y, h = fn(t["x"], t["residual"], t["weight"])
        grads = torch.autograd.grad((y, h), (t["x"], t["residual"], t["weight"]), (t["dy"], t["dh"]))
        return (y, h, *grads)

    return step


def _build(plan: str | None):  # type: ignore[no-untyped-def]
    """Our variant's build, with ``plan`` forced (None: the planner's choice)."""

    def build(case: Params) -> Step:
        cols = case["cols"]
        return _apply(lambda x, r, w: kernels.rms_norm(x, (cols,), w, EPS, residual=r, plan=plan), case)

    return build


def _eager_composition(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h = x + r
    hf = h.float()
    y = (hf * torch.rsqrt(hf.pow(2).mean(dim=-1, keepdim=True) + EPS)).to(x.dtype) * w
    return y, h


def _f_rms_norm(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h = x + r
    return F.rms_norm(h, (h.shape[-1],), w, EPS), h


def _compiled(case: Params) -> Step:
    # Every case compiles afresh (Dynamo falls back to eager past its recompile limit).
    torch._dynamo.reset()
    return _apply(torch.compile(_eager_composition, dynamic=False, fullgraph=True), case)


def _liger_fn():  # type: ignore[no-untyped-def]
    """(callable (x, r, w) -> (y, h), entry name), or Refused."""
    try:
        from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction
    except ImportError:
        LigerFusedAddRMSNormFunction = None
    if LigerFusedAddRMSNormFunction is not None:
        n = len(inspect.signature(LigerFusedAddRMSNormFunction.forward).parameters) - 1  # without ctx
        extra = (0.0, "llama", False)[: max(0, n - 4)]  # offset, casting_mode, in_place (versions differ)
        fused = LigerFusedAddRMSNormFunction
        return (lambda x, r, w: fused.apply(x, r, w, EPS, *extra)), "liger_kernel.ops.fused_add_rms_norm"
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    except ImportError as exc:
        raise Refused(f"liger-kernel is not installed ({exc})") from exc
    n = len(inspect.signature(LigerRMSNormFunction.forward).parameters) - 1
    extra = (0.0, "llama", False)[: max(0, n - 3)]

    def unfused(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x + r
        return LigerRMSNormFunction.apply(h, w, EPS, *extra), h

    return unfused, "liger_kernel.ops.rms_norm (after a separate add)"


def _liger(case: Params) -> Step:
    fn, _entry = _liger_fn()
    return _apply(fn, case)


def _liger_meta(case: Params) -> dict[str, Any]:
    try:
        version = metadata.version("liger-kernel")
    except metadata.PackageNotFoundError:
        return {}
    try:
        return {"version": version, "entry": _liger_fn()[1]}
    except Refused:
        return {"version": version}


def _quack(case: Params) -> Step:
    try:
        from quack.rmsnorm import rmsnorm as quack_rmsnorm
    except ImportError as exc:
        raise Refused(f"quack-kernels is not installed ({exc})") from exc
    require_16_byte_rows(case)
    params = inspect.signature(quack_rmsnorm).parameters
    if "residual" not in params or "prenorm" not in params:
        raise Refused(f"this quack.rmsnorm.rmsnorm takes no residual (parameters: {', '.join(params)})")

    def fn(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, h = quack_rmsnorm(x, w, residual=r, eps=EPS, prenorm=True)
        return y, h

    return _apply(fn, case)


class RMSNormStudy:
    name = "rmsnorm"
    directions = ("fwd", "fwd+bwd")

    def cases(self, quick: bool) -> list[Params]:
        return row_cases("rms_norm", self.directions, quick, SHAPES, OTHER_DTYPE_SHAPES, QUICK_SHAPES, residual=True)

    def case_id(self, case: Params) -> str:
        return row_case_id(case)

    def options(self, quick: bool) -> dict[str, Any]:
        return {"rounds": 12 if quick else 14}

    def variants(self, case: Params) -> list[Variant]:
        fused = []
        if case["direction"] == "fwd+bwd" and 0 < case["cols"] <= FUSED_MAX_WIDTH:
            # The weight gradient two ways: the fused pass forced, and the planner's row plan
            # (with its column sum) forced; the default (plan=None) takes the fused pass from
            # FUSED_MIN_WIDTH up, so these two say whether that rule holds at each width.
            rows_kind = plan(case, BACKWARD_POLICY).kind
            fused.append(
                Variant(
                    "triton-fused",
                    "Triton, fused backward (dx and the weight gradient's partials in one pass)",
                    _build("fused"),
                    lambda c: {
                        "plan": "fused",
                        "forward": "planner's choice",
                        "max_width": FUSED_MAX_WIDTH,
                        "default_from_width": FUSED_MIN_WIDTH,
                    },
                )
            )
            fused.append(
                Variant(
                    "triton-rows",
                    "Triton, row plan + column sum (the backward before the fused default)",
                    _build(rows_kind),
                    lambda c, kind=rows_kind: {
                        "plan": kind,
                        "weight_gradient": "row plan, then a column sum of dy*h*rstd",
                    },
                )
            )
        return [
            *ours(case, _build, POLICY, BACKWARD_POLICY),
            *fused,
            Variant("torch", "F.rms_norm after the add", lambda c: _apply(_f_rms_norm, c)),
            Variant("eager", "unfused eager composition", lambda c: _apply(_eager_composition, c)),
            Variant(
                "compile",
                "torch.compile(eager composition)",
                _compiled,
                lambda c: {"mode": "default", "dynamic": False, "fullgraph": True},
            ),
            Variant("liger", "Liger-Kernel", _liger, _liger_meta),
            Variant("quack", "QuACK", _quack, package_meta("quack-kernels", "quack.rmsnorm.rmsnorm(prenorm=True)")),
        ]

    def inputs(self, case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
        shape = (case["rows"], case["cols"])
        dtype = DTYPES[case["dtype"]]

        def draw(*s: int, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
            return (torch.randn(s, generator=gen, device=device, dtype=torch.float32) * scale + shift).to(dtype)

        # Activations and a residual stream of different scales; a weight near 1, as trained ones are.
        t = {"x": draw(*shape), "residual": draw(*shape, scale=4.0), "weight": draw(case["cols"], scale=0.1, shift=1.0)}
        if case["direction"] == "fwd+bwd":
            for k in ("x", "residual", "weight"):
                t[k].requires_grad_()
            t["dy"] = draw(*shape)
            t["dh"] = draw(*shape)
        return t

    def reference(self, case: Params, inputs: Tensors) -> tuple[torch.Tensor, ...]:
        x, r, w = (inputs[k].detach().double().requires_grad_() for k in ("x", "residual", "weight"))
        h = x + r
        y = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS) * w
        if case["direction"] == "fwd":
            return y.detach(), h.detach()
        grads = torch.autograd.grad((y, h), (x, r, w), (inputs["dy"].double(), inputs["dh"].double()))
        return (y.detach(), h.detach(), *grads)

    def traffic(self, case: Params) -> tuple[int, int]:
        elems = case["rows"] * case["cols"]
        size = element_size(case)
        weight = case["cols"] * size
        if case["direction"] == "fwd":
            return 4 * elems * size + weight, 6 * elems  # add, square, sum, scale, weight (+ the write of h)
        # + backward: recompute the square sum, dy * w, dot, two scales, subtract, add dh, dw's product and sum
        return 8 * elems * size + 3 * weight, 16 * elems

    def tolerance(self, case: Params) -> float:
        return TOLERANCE[case["dtype"]]


STUDY = RMSNormStudy()
