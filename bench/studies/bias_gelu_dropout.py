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
over ``1 - P``, and the dropped share of the elements whose mask the outputs decide must be a
plausible draw of Binomial(n, P), overall and row by row (within 6 standard deviations; the
page shows each variant's share with its exact interval from the counts stored in its meta,
over the elements whose float64 GELU is clearly nonzero).

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
DECIDABLE = 1e-3  # |gelu| (or |gelu'|) above which a kept element cannot be an exact 0 in bf16


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


def _plausible(decided: torch.Tensor, dropped: torch.Tensor) -> None:
    """Raise ``ValueError`` unless the dropped share of the decided elements is within
    DRAW_SIGMAS standard deviations of P, overall and in every row with 100 or more of them."""
    n_row = decided.sum(dim=-1).double()
    k_row = (dropped & decided).sum(dim=-1).double()
    n, k = float(n_row.sum()), float(k_row.sum())
    sigma = math.sqrt(n * P * (1 - P))
    if abs(k - n * P) > DRAW_SIGMAS * sigma:
        raise ValueError(f"dropped {k:.0f} of {n:.0f} decided outputs: not a draw of Binomial(n, {P}) "
                         f"(expected {n * P:.0f} ± {DRAW_SIGMAS:.0f}σ = {DRAW_SIGMAS * sigma:.0f})")  # fmt: skip
    rows = n_row >= 100
    z = (k_row - n_row * P).abs() / (n_row * P * (1 - P)).clamp_min(1e-30).sqrt()
    if bool((z[rows] > DRAW_SIGMAS).any()):
        worst = int(torch.argmax(torch.where(rows, z, 0.0)))
        raise ValueError(f"row {worst}: dropped {k_row[worst]:.0f} of {n_row[worst]:.0f}: not a draw of "
                         f"Binomial(n, {P}) (a row or a tail zeroed?)")  # fmt: skip


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
        device = torch.device("cuda", torch.cuda.current_device())
        t = self.inputs(case | {"direction": "fwd"}, device, torch.Generator(device=device).manual_seed(7))
        with torch.no_grad():
            y = build(case | {"direction": "fwd"})(t)[0]
        decided = _gelu_tanh(t["x"].double() + t["bias"].double()).abs() > DECIDABLE  # see reference_for
        return {"p": P, "dropped": int(((y == 0) & decided).sum()), "elements": int(decided.sum())}

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
        """The float64 reference with the variant's own mask; raises ``ValueError`` where the
        outputs are no valid draw.

        The mask is read from the outputs where it can be: an element whose float64 GELU is
        clearly nonzero (``|gelu| > DECIDABLE``) was dropped exactly when its output is 0 (a
        kept element can be 0 otherwise: ``x + bias`` cancelling exactly, or torch's
        ``0.5 z (1 + tanh u)`` saturating below z ~ -5 in fp32).  In a training step the input
        gradient decides the rest (``gelu'(0) = 1/2``) where the upstream gradient is not an
        exact 0, and where both decide they must
        agree (a dropped element's gradient is 0).  The dropped share of the decided
        elements must be a plausible draw of Binomial(n, P) overall and in every row (a tail
        or a row zeroed by mistake is not)."""
        y = outs[0].detach()
        x, b = (inputs[k].detach().double().requires_grad_() for k in ("x", "bias"))
        z = x + b
        gelu = _gelu_tanh(z)
        decided = gelu.detach().abs() > DECIDABLE
        keep = y != 0
        if case["direction"] == "fwd+bwd":
            (slope,) = torch.autograd.grad(gelu.sum(), z, retain_graph=True)
            # an upstream gradient of exactly 0 gives a kept element a 0 gradient: CUDA's randn
            # draws exact zeros (Box-Muller at u = 1; ~2^-24 a draw: 4 to 9 of them in the
            # 33M and 134M-element cases of run bias_gelu_dropout-20261201T223945Z-20f44fb)
            by_grad = (slope.abs() > DECIDABLE) & (inputs["dy"].detach() != 0)
            dx_keep = outs[1].detach() != 0
            both = decided & by_grad
            if bool((keep != dx_keep)[both].any()):
                bad = int((keep != dx_keep)[both].sum())
                raise ValueError(f"the mask read from the output and from the input gradient differ at {bad} elements")
            keep = torch.where(decided | ~by_grad, keep, dx_keep)
            decided = decided | by_grad
        # (elements neither decides keep y != 0: a kept one that is 0 has a GELU of at most
        # DECIDABLE, so its reference 0 is off by no more than that; the share counts decided
        # elements only)
        _plausible(decided, ~keep)
        ref = gelu * (keep.double() / (1 - P))
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
