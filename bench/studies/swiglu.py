"""SwiGLU's pointwise part, ``silu(gate) * up``, as an MLP block calls it: ours against the
eager expression, ``torch.compile`` of it and Liger-Kernel's.

Every case is ``rows`` tokens of an MLP whose intermediate size is ``cols`` (14336: Llama 3
8B's 4096 → 14336; 11008: Llama 2 7B's), bf16: ``gate`` and ``up`` are the two projections'
outputs.  Variants: ours (``kernels.swiglu``: the forward saves only its inputs, the backward
recomputes the sigmoid), ``F.silu(gate) * up`` in eager PyTorch, ``torch.compile`` of it and
Liger-Kernel's ``LigerSiLUMulFunction`` (its backward writes the gradients over the saved
inputs; checked last, so no other variant sees inputs it changed).  A training step also
takes both gradients for a given upstream gradient.

Traffic (from the problem): the forward reads gate and up and writes the product (3 passes);
the backward reads the upstream gradient, gate and up and writes both gradients (5 more).
FLOPs: about 6 per element forward (exp, add, divide, two products), 10 more backward.

Registered (contract/studies.py); its page is ``publish/pages/swiglu.py`` with
``templates/swiglu.md.j2``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bench.studies import Params, Tensors, Variant
from bench.studies._pointwise import COMPILE_META, PointwiseCases, compiled, liger, liger_meta, step, training_memory
from bench.studies._rows import DTYPES, element_size

OP = "swiglu"
SHAPES = [(1024, 14336), (4096, 14336), (8192, 14336), (4096, 11008), (4097, 14336)]
QUICK = [(8192, 14336)]


def eager_swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


def _args(t: Tensors) -> tuple[torch.Tensor, ...]:
    return t["gate"], t["up"]


def _build(fn):  # type: ignore[no-untyped-def]
    return lambda case: step(fn, case, _args, ("gate", "up"), ("dy",))


def _ours(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    from kernels.swiglu import swiglu

    return swiglu(gate, up)


def _compiled(case: Params):  # type: ignore[no-untyped-def]
    return _build(compiled(eager_swiglu))(case)


def _liger(case: Params):  # type: ignore[no-untyped-def]
    fn = liger("swiglu", "LigerSiLUMulFunction")
    return _build(lambda g, u: fn.apply(g, u))(case)


class SwiGLUStudy(PointwiseCases):
    name = OP
    op = OP
    shapes = SHAPES
    quick_shapes = QUICK

    def variants(self, case: Params) -> list[Variant]:
        draw = self.inputs
        return [
            Variant("triton", "Triton (ours): kernels.swiglu", _build(_ours), training_memory(_build(_ours), draw)),
            Variant("torch", "F.silu(gate) * up (eager)", _build(eager_swiglu),
                    training_memory(_build(eager_swiglu), draw)),
            Variant("compile", "torch.compile(F.silu(gate) * up)", _compiled,
                    training_memory(_compiled, draw, lambda c: COMPILE_META)),
            Variant("liger", "Liger-Kernel (LigerSiLUMulFunction)", _liger,
                    training_memory(_liger, draw, liger_meta("liger_kernel.ops.swiglu.LigerSiLUMulFunction")),
                    own_inputs=True),
        ]  # fmt: skip

    def inputs(self, case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
        dtype = DTYPES[case["dtype"]]
        shape = (case["rows"], case["cols"])

        def draw() -> torch.Tensor:
            return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).mul_(2.0).to(dtype)

        out = {"gate": draw(), "up": draw()}
        if case["direction"] == "fwd+bwd":
            out["gate"].requires_grad_()
            out["up"].requires_grad_()
            out["dy"] = draw()
        return out

    def reference(self, case: Params, inputs: Tensors) -> tuple[torch.Tensor, ...]:
        g, u = (inputs[n].detach().double().requires_grad_() for n in ("gate", "up"))
        y = eager_swiglu(g, u)
        if case["direction"] == "fwd":
            return (y.detach(),)
        return (y.detach(), *torch.autograd.grad(y, (g, u), inputs["dy"].double()))

    def traffic(self, case: Params) -> tuple[int, int]:
        elems = case["rows"] * case["cols"]
        if case["direction"] == "fwd":
            return 3 * elems * element_size(case), 6 * elems
        return 8 * elems * element_size(case), 16 * elems


STUDY = SwiGLUStudy()
