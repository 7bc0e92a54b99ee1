"""Fused linear + cross-entropy: the lm head's projection and the loss of N tokens, as one
training step, against what a trainer would pick.

Every case is a training step (``fwd+bwd``) of ``cross_entropy(hidden @ W.T, target)`` for N
tokens with hidden size H and a vocabulary of V classes (bf16; class-index targets, 5% of
them ``ignore_index``, ``reduction="mean"``): the loss, then the gradients of the hidden
states and of the weight through autograd.  Case parameters: ``rows`` N, ``cols`` V,
``hidden`` H (the registry writes the shape N×V×H).

Variants: ours (``kernels.linear_cross_entropy``: chunks of tokens, no ``[N, V]`` logits),
the unfused step a user writes (``F.linear`` then ``F.cross_entropy``, eager), ``torch.compile``
of it (fullgraph, static shapes, compiled afresh per case) and Liger-Kernel's
``LigerFusedLinearCrossEntropyFunction`` (its arguments matched to the installed version).

**Memory is the point, time the price.**  Each variant's meta stores the step's peak memory
above its inputs (``peak_bytes``, as the cross-entropy study measures it: a second call on
inputs of its own, ``torch.cuda.max_memory_allocated``) and ``logits_bytes``, the size the
full logits would have.  The issue's target reads them: ours at most a quarter of the unfused
step's peak at V = 128256.

Traffic (from the problem, the minimum any schedule moves): read the hidden states and the
weight, write both gradients; FLOPs: the three products, 6·N·H·V (the loss's own arithmetic is
a rounding error beside them).  The float64 reference is computed a chunk of rows at a time.

Registered (contract/studies.py); its page is ``publish/pages/linear_cross_entropy.py`` with
``templates/linear_cross_entropy.md.j2``.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.nn.functional as F

import kernels
from bench.studies import Params, Refused, Step, Tensors, Variant
from bench.studies._rows import DTYPES, TOLERANCE, element_size
from bench.studies.cross_entropy import IGNORE, IGNORED_SHARE, liger_args, memory_meta

OP = "linear_cross_entropy"
HIDDEN = 4096
# (tokens, vocabulary): Llama 3's 128256 at three token counts, Llama 2's 32000, Qwen2's 151936.
SHAPES = ((4096, 128256), (8192, 128256), (16384, 128256), (8192, 32000), (8192, 151936))
QUICK = ((8192, 128256),)
REF_CHUNK = 1 << 26  # float64 logits per chunk of the reference


def _draw(case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
    """Hidden states ~ N(0, 1) and a weight scaled so that the logits spread like a trained
    lm head's (standard deviation 2); both require grad."""
    n, v, h = case["rows"], case["cols"], case["hidden"]
    dtype = DTYPES[case["dtype"]]
    x = torch.randn((n, h), generator=gen, device=device, dtype=torch.float32).to(dtype).requires_grad_()
    w = torch.randn((v, h), generator=gen, device=device, dtype=torch.float32).mul_(2.0 / h**0.5)
    w = w.to(dtype).requires_grad_()
    target = torch.randint(0, v, (n,), generator=gen, device=device)
    ignored = torch.rand((n,), generator=gen, device=device) < IGNORED_SHARE
    return {"x": x, "w": w, "target": torch.where(ignored, torch.full_like(target, IGNORE), target)}


def _step(loss_fn) -> Step:  # type: ignore[no-untyped-def]
    def step(t: Tensors) -> tuple[torch.Tensor, ...]:
        loss = loss_fn(t["x"], t["w"], t["target"])
        dx, dw = torch.autograd.grad(loss, (t["x"], t["w"]))
        return loss, dx, dw

    return step


def _ours(case: Params) -> Step:
    return _step(lambda x, w, t: kernels.linear_cross_entropy(x, w, t, ignore_index=IGNORE))


def _unfused(x: torch.Tensor, w: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(F.linear(x, w), t, ignore_index=IGNORE)


def _torch(case: Params) -> Step:
    return _step(_unfused)


def _compiled(case: Params) -> Step:
    torch._dynamo.reset()  # every case compiles afresh
    return _step(torch.compile(_unfused, dynamic=False, fullgraph=True))


def _liger(case: Params) -> Step:
    try:
        from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction as fn
    except ImportError as exc:
        raise Refused(f"liger-kernel is not installed ({exc})") from exc
    params = list(inspect.signature(fn.forward).parameters.values())[1:]  # without ctx
    known = {"bias": None, "ce_weight": None, "ignore_index": IGNORE, "lse_square_scale": 0.0, "label_smoothing": 0.0,
             "reduction": "mean", "softcap": None, "return_z_loss": False}  # fmt: skip
    liger_args(params, [None, None, None], known)  # refuse now, not in the check

    def loss(x: torch.Tensor, w: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        out = fn.apply(*liger_args(params, [x, w, t], known))
        return out[0] if isinstance(out, tuple) else out

    return _step(loss)


def _liger_meta(case: Params) -> dict[str, Any]:
    from importlib import metadata

    try:
        version = metadata.version("liger-kernel")
    except metadata.PackageNotFoundError:
        return {}
    return {
        "version": version,
        "entry": "liger_kernel.ops.fused_linear_cross_entropy.LigerFusedLinearCrossEntropyFunction",
    }


def case_id(case: Params) -> str:
    return f"{case['direction']}/{case['dtype']}/{case['rows']}x{case['cols']}x{case['hidden']}"


class LinearCrossEntropyStudy:
    name = "linear_cross_entropy"
    directions = ("fwd+bwd",)

    def cases(self, quick: bool) -> list[Params]:
        shapes = QUICK if quick else SHAPES
        return [{"op": OP, "direction": "fwd+bwd", "dtype": "bf16", "rows": n, "cols": v, "hidden": HIDDEN}
                for n, v in shapes]  # fmt: skip

    def case_id(self, case: Params) -> str:
        return case_id(case)

    def options(self, quick: bool) -> dict[str, Any]:
        return {"rounds": 8 if quick else 10, "l2_modes": ("cold",)}  # gigabytes a step: past the L2 either way

    def variants(self, case: Params) -> list[Variant]:
        compile_meta = lambda c: {"mode": "default", "dynamic": False, "fullgraph": True}
        ours_meta = lambda c: {"chunk_rows": _chunk(c)}
        return [
            Variant(
                "triton", "Triton (ours): kernels.linear_cross_entropy", _ours, memory_meta(_ours, ours_meta, _draw)
            ),
            Variant("torch", "F.linear, then F.cross_entropy (eager)", _torch, memory_meta(_torch, None, _draw)),
            Variant(
                "compile",
                "torch.compile(F.linear, then F.cross_entropy)",
                _compiled,
                memory_meta(_compiled, compile_meta, _draw),
            ),
            Variant(
                "liger", "Liger-Kernel (fused linear cross-entropy)", _liger, memory_meta(_liger, _liger_meta, _draw)
            ),
        ]

    def inputs(self, case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
        return _draw(case, device, gen)

    def reference(self, case: Params, inputs: Tensors) -> tuple[torch.Tensor, ...]:
        """float64 loss and gradients, a chunk of rows at a time (the summed loss of each chunk
        over the rows not ignored is torch's mean)."""
        x, w, target = inputs["x"].detach(), inputs["w"].detach().double(), inputs["target"]
        valid = int((target != IGNORE).sum())
        n, v = x.shape[0], w.shape[0]
        chunk = max(1, REF_CHUNK // v)
        total = torch.zeros((), dtype=torch.float64, device=x.device)
        dx = torch.empty(x.shape, dtype=torch.float64, device=x.device)
        dw = torch.zeros(w.shape, dtype=torch.float64, device=x.device)
        for start in range(0, n, chunk):
            xc = x[start : start + chunk].double().requires_grad_()
            wl = w.requires_grad_()
            part = F.cross_entropy(
                F.linear(xc, wl), target[start : start + chunk], ignore_index=IGNORE, reduction="sum"
            )
            gx, gw = torch.autograd.grad(part, (xc, wl))
            dx[start : start + chunk] = gx
            dw += gw
            total += part.detach()
            del xc, gx, gw, part
        w.requires_grad_(False)
        scale = 1.0 / max(valid, 1)
        loss = total / valid if valid else torch.tensor(float("nan"), dtype=torch.float64, device=x.device)
        return loss, dx * scale, dw * scale

    def traffic(self, case: Params) -> tuple[int, int]:
        n, v, h = case["rows"], case["cols"], case["hidden"]
        return 2 * (n * h + v * h) * element_size(case) + 8 * n, 6 * n * h * v

    def tolerance(self, case: Params) -> float:
        return TOLERANCE[case["dtype"]]


def _chunk(case: Params) -> int:
    from kernels.linear_cross_entropy import chunk_rows

    return chunk_rows(case["rows"], case["hidden"], case["cols"])


STUDY = LinearCrossEntropyStudy()
