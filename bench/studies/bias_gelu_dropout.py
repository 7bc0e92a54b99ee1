"""Bias + GELU (tanh form) + dropout in one pass, as a GPT-style MLP calls it: ours against
the eager composition and ``torch.compile`` of it (Liger-Kernel has no such fused op).

Every case is ``rows`` tokens × ``cols`` features, bf16, dropout ``P`` = 0.1 in training
mode: ``F.dropout(F.gelu(x + bias, approximate="tanh"), P)``.  Variants: ours
(``kernels.bias_gelu_dropout``: the mask is regenerated from a seed and the element's
offset, never stored), the composition in eager PyTorch (three kernels, a stored mask) and
``torch.compile`` of it.  A training step also takes the gradients of ``x`` and ``bias``.

Dropout has no one right output, so each variant's outputs are checked against a float64
reference built from its own mask (:meth:`BiasGeluDropoutStudy.reference_for`): a dropped
element must be exactly 0 (and so must its input gradient), a kept one the reference's GELU
over ``1 - P``, and the dropped share must be a plausible draw of Binomial(n, P) (within 6
standard deviations; the page shows each variant's share with its exact interval from the
counts stored in its meta).

Traffic (from the problem): the forward reads ``x`` and writes the output (2 passes, the
bias once); the backward reads the upstream gradient and ``x`` and writes ``dx`` (3 more;
the bias gradient is a column sum of ``dx``, counted as our cost, not the problem's).

Registered (contract/studies.py); its page is ``publish/pages/bias_gelu_dropout.py`` with
``templates/bias_gelu_dropout.md.j2``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from bench.studies import Params, Tensors, Variant
from bench.studies._pointwise import COMPILE_META, PointwiseCases, compiled, step, training_memory
from bench.studies._rows import DTYPES, element_size

OP = "bias_gelu_dropout"
P = 0.1
SHAPES = [(4096, 1024), (8192, 4096), (16384, 8192), (4097, 3072)]
QUICK = [(16384, 8192)]
DRAW_SIGMAS = 6.0  # how far the dropped share may sit from P before the check calls the mask broken


def eager(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.dropout(F.gelu(x + bias, approximate="tanh"), P, training=True)


def _args(t: Tensors) -> tuple[torch.Tensor, ...]:
    return t["x"], t["bias"]


def _build(fn):  # type: ignore[no-untyped-def]
    return lambda case: step(fn, case, _args, ("x", "bias"), ("dy",))


def _ours(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    from kernels.bias_gelu_dropout import bias_gelu_dropout

    return bias_gelu_dropout(x, bias, P, training=True)


def _compiled(case: Params):  # type: ignore[no-untyped-def]
    return _build(compiled(eager))(case)


def _gelu_tanh(u: torch.Tensor) -> torch.Tensor:
    return 0.5 * u * (1 + torch.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u**3)))


class BiasGeluDropoutStudy(PointwiseCases):
    name = OP
    op = OP
    shapes = SHAPES
    quick_shapes = QUICK

    def variants(self, case: Params) -> list[Variant]:
        draw = self.inputs

        def meta(build, extra=None):  # type: ignore[no-untyped-def]
            return training_memory(build, draw, lambda c: (extra or {}) | self.dropped(build, c))

        return [
            Variant("triton", "Triton (ours): kernels.bias_gelu_dropout", _build(_ours), meta(_build(_ours))),
            Variant("torch", "F.dropout(F.gelu(x + bias, approximate='tanh')) (eager)", _build(eager),
                    meta(_build(eager))),
            Variant("compile", "torch.compile(the eager composition)", _compiled, meta(_compiled, COMPILE_META)),
        ]  # fmt: skip

    def dropped(self, build, case: Params) -> dict[str, Any]:  # type: ignore[no-untyped-def]
        """How many of one forward's outputs the variant dropped (exact zeros), of how many,
        on inputs of their own: the counts the page's binomial interval is computed from."""
        if not torch.cuda.is_available():
            return {}
        device = torch.device("cuda")
        t = self.inputs(case | {"direction": "fwd"}, device, torch.Generator(device=device).manual_seed(7))
        with torch.no_grad():
            y = build(case | {"direction": "fwd"})(t)[0]
        return {"p": P, "dropped": int((y == 0).sum()), "elements": y.numel()}

    def inputs(self, case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
        dtype = DTYPES[case["dtype"]]
        rows, cols = case["rows"], case["cols"]
        x = torch.randn((rows, cols), generator=gen, device=device, dtype=torch.float32).mul_(2.0).to(dtype)
        bias = torch.randn((cols,), generator=gen, device=device, dtype=torch.float32).mul_(0.5).to(dtype)
        out = {"x": x, "bias": bias}
        if case["direction"] == "fwd+bwd":
            x.requires_grad_()
            bias.requires_grad_()
            out["dy"] = torch.randn((rows, cols), generator=gen, device=device, dtype=torch.float32).to(dtype)
        return out

    def reference(self, case: Params, inputs: Tensors) -> tuple[torch.Tensor, ...]:
        return ()  # every variant's outputs are checked against reference_for's, built from its own mask

    def reference_for(self, case: Params, inputs: Tensors, outs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        """The float64 reference with the variant's own mask (a dropped element is an exact
        0 of its output); raises ``ValueError`` where the dropped share is no plausible draw
        of Binomial(n, P), or (training step) a dropped element's gradient is not 0."""
        y = outs[0].detach()
        keep = y != 0
        n = y.numel()
        dropped = n - int(keep.sum())
        sigma = math.sqrt(n * P * (1 - P))
        if abs(dropped - n * P) > DRAW_SIGMAS * sigma:
            raise ValueError(f"dropped {dropped} of {n} outputs: not a draw of Binomial(n, {P}) "
                             f"(expected {n * P:.0f} ± {DRAW_SIGMAS:.0f}σ = {DRAW_SIGMAS * sigma:.0f})")  # fmt: skip
        x, b = (inputs[k].detach().double().requires_grad_() for k in ("x", "bias"))
        scale = keep.double() / (1 - P)
        ref = _gelu_tanh(x + b) * scale
        if case["direction"] == "fwd":
            return (ref.detach(),)
        grads = torch.autograd.grad(ref, (x, b), inputs["dy"].double())
        return (ref.detach(), *grads)

    def traffic(self, case: Params) -> tuple[int, int]:
        elems = case["rows"] * case["cols"]
        size = element_size(case)
        bias = case["cols"] * size
        if case["direction"] == "fwd":
            return 2 * elems * size + bias, 12 * elems
        return 5 * elems * size + 2 * bias, 30 * elems


STUDY = BiasGeluDropoutStudy()
