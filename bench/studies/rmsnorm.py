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

Not yet in the registry (contract/studies.py): a registered study needs its page spec and
template, which land with its first runs.
"""

from __future__ import annotations

import inspect
from importlib import metadata
from typing import Any

import torch
import torch.nn.functional as F

import kernels
from bench.studies import Params, Refused, Step, Tensors, Variant
from kernels._rowwise import ALIGN_ROWS, ALIGN_WINDOW
from kernels.plans import VECTOR_BYTES, RowPlan, plan_rows
from kernels.rmsnorm import BACKWARD_POLICY, POLICY

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
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
TOLERANCE = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2}  # relative L2 error against float64


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


def _sms() -> int:
    return torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 132


def _plan(case: Params, policy, force: str | None) -> RowPlan:  # type: ignore[no-untyped-def]
    size = torch.empty((), dtype=DTYPES[case["dtype"]]).element_size()
    vec = VECTOR_BYTES // size
    align = ALIGN_ROWS if case["cols"] % vec == 0 or case["rows"] == 1 else ALIGN_WINDOW
    pad = vec - 1 if align == ALIGN_WINDOW else 0
    return plan_rows(case["rows"], case["cols"], size, _sms(), policy, force, pad)  # type: ignore[arg-type]


def _ours(plan: str | None):  # type: ignore[no-untyped-def]
    def build(case: Params) -> Step:
        cols = case["cols"]
        return _apply(lambda x, r, w: kernels.rms_norm(x, (cols,), w, EPS, residual=r, plan=plan), case)

    def meta(case: Params) -> dict[str, Any]:
        out: dict[str, Any] = _plan(case, POLICY, plan).describe()
        if case["direction"] == "fwd+bwd":
            out["backward"] = _plan(case, BACKWARD_POLICY, plan).describe()
        return out

    return build, meta


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
    size = torch.empty((), dtype=DTYPES[case["dtype"]]).element_size()
    if (case["cols"] * size) % 16:
        raise Refused(
            f"QuACK needs rows of a multiple of 16 bytes; width {case['cols']} is {case['cols'] * size} bytes"
        )
    params = inspect.signature(quack_rmsnorm).parameters
    if "residual" not in params or "prenorm" not in params:
        raise Refused(f"this quack.rmsnorm.rmsnorm takes no residual (parameters: {', '.join(params)})")

    def fn(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y, h = quack_rmsnorm(x, w, residual=r, eps=EPS, prenorm=True)
        return y, h

    return _apply(fn, case)


def _quack_meta(case: Params) -> dict[str, Any]:
    try:
        return {"version": metadata.version("quack-kernels"), "entry": "quack.rmsnorm.rmsnorm(prenorm=True)"}
    except metadata.PackageNotFoundError:
        return {}


class RMSNormStudy:
    name = "rmsnorm"
    directions = ("fwd", "fwd+bwd")

    def cases(self, quick: bool) -> list[Params]:
        out: list[Params] = []
        for direction in self.directions:
            for dtype in ("bf16",) if quick else ("bf16", "fp16", "fp32"):
                shapes = QUICK_SHAPES if quick else SHAPES if dtype == "bf16" else OTHER_DTYPE_SHAPES
                for rows, cols in shapes:
                    out.append({"op": "rms_norm", "direction": direction, "dtype": dtype, "rows": rows, "cols": cols,
                                "residual": True})  # fmt: skip
        return out

    def case_id(self, case: Params) -> str:
        return f"{case['direction']}/{case['dtype']}/{case['rows']}x{case['cols']}"

    def options(self, quick: bool) -> dict[str, Any]:
        return {"rounds": 12 if quick else 14}

    def variants(self, case: Params) -> list[Variant]:
        build, meta = _ours(None)
        out = [Variant("triton", "Triton (ours, planner's choice)", build, meta)]
        if _plan(case, POLICY, None).kind != "block":
            for plan in ("looped", "split"):
                b, m = _ours(plan)
                out.append(Variant(f"triton-{plan}", f"Triton, {plan} plan forced", b, m))
        out += [
            Variant("torch", "F.rms_norm after the add", lambda c: _apply(_f_rms_norm, c)),
            Variant("eager", "unfused eager composition", lambda c: _apply(_eager_composition, c)),
            Variant(
                "compile",
                "torch.compile(eager composition)",
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
        size = torch.empty((), dtype=DTYPES[case["dtype"]]).element_size()
        weight = case["cols"] * size
        if case["direction"] == "fwd":
            return 4 * elems * size + weight, 6 * elems  # add, square, sum, scale, weight (+ the write of h)
        # + backward: recompute the square sum, dy * w, dot, two scales, subtract, add dh, dw's product and sum
        return 8 * elems * size + 3 * weight, 16 * elems

    def tolerance(self, case: Params) -> float:
        return TOLERANCE[case["dtype"]]


STUDY = RMSNormStudy()
