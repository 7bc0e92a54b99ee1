"""RoPE on q and k (Hugging Face's rotate-half convention) as attention calls it: our one
launch for both against the formula in eager PyTorch, ``torch.compile`` of it and Liger-Kernel.

Every case is one sequence (batch 1) of ``rows`` tokens with ``heads`` query heads and
``kv_heads`` key/value heads (GQA: 32 and 8, Llama 3 8B's) of ``cols`` = head dim 128; bf16.
q and k arrive as attention makes them: the projection's ``[B, T, H, D]`` output viewed as
``[B, H, T, D]`` (a transpose, not a copy); cos and sin are ``[1, T, D]`` in q's dtype, from
the usual inverse frequencies (base 10000).  Variants: ours
(``kernels.rope.apply_rotary_pos_emb``), ``q * cos + rotate_half(q) * sin`` in eager PyTorch
(the model code), ``torch.compile`` of it and Liger-Kernel's ``LigerRopeFunction`` (it
rotates q and k in place, in their ``[B, T, H, D]`` storage; it is checked last, so the
inputs it overwrites are no other variant's).  A training step also takes the gradients of q
and k (given upstream gradients); cos and sin are constants.

Traffic (from the problem): the forward reads q and k and writes them rotated (2 passes over
``(heads + kv_heads) * T * D`` elements) and reads cos and sin once per position; the
training step adds the same again for the gradients.  FLOPs: 3 per element and direction.

Registered (contract/studies.py) with the shape rows × cols × heads × kv_heads (T × D × Hq ×
Hk); its page is ``publish/pages/rope.py`` with ``templates/rope.md.j2``.
"""

from __future__ import annotations

import torch

from bench.studies import Params, Tensors, Variant
from bench.studies._pointwise import COMPILE_META, PointwiseCases, compiled, liger, liger_meta, step, training_memory
from bench.studies._rows import DTYPES, element_size

OP = "rope"
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
BASE = 10000.0
TOKENS = [1024, 4096, 4097, 16384]  # T = 1k ... 16k, and one length nobody rounds
QUICK = [4096]


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def hf_rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):  # type: ignore[no-untyped-def]
    """The model code's RoPE (cos and sin broadcast over heads)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def _args(t: Tensors) -> tuple[torch.Tensor, ...]:
    return t["q"].transpose(1, 2), t["k"].transpose(1, 2), t["cos"], t["sin"]


def _build(fn):  # type: ignore[no-untyped-def]
    return lambda case: step(fn, case, _args, ("q", "k"), ("dq", "dk"))


def _ours(q, k, cos, sin):  # type: ignore[no-untyped-def]
    from kernels.rope import apply_rotary_pos_emb

    return apply_rotary_pos_emb(q, k, cos, sin)


def _compiled(case: Params):  # type: ignore[no-untyped-def]
    return _build(compiled(hf_rope))(case)


def _liger(case: Params):  # type: ignore[no-untyped-def]
    fn = liger("rope", "LigerRopeFunction")
    return _build(lambda q, k, cos, sin: fn.apply(q, k, cos, sin))(case)


def case_id(case: Params) -> str:
    return f"{case['direction']}/{case['dtype']}/{case['rows']}x{case['cols']}x{case['heads']}x{case['kv_heads']}"


class RopeStudy(PointwiseCases):
    name = OP
    op = OP

    def cases(self, quick: bool) -> list[Params]:
        return [
            {"op": OP, "direction": d, "dtype": "bf16", "rows": t, "heads": HEADS, "kv_heads": KV_HEADS,
             "cols": HEAD_DIM}
            for d in self.directions
            for t in (QUICK if quick else TOKENS)
        ]  # fmt: skip

    def case_id(self, case: Params) -> str:
        return case_id(case)

    def variants(self, case: Params) -> list[Variant]:
        draw = self.inputs
        return [
            Variant("triton", "Triton (ours): kernels.rope.apply_rotary_pos_emb", _build(_ours),
                    training_memory(_build(_ours), draw)),
            Variant("torch", "q·cos + rotate_half(q)·sin (eager)", _build(hf_rope),
                    training_memory(_build(hf_rope), draw)),
            Variant("compile", "torch.compile(the eager formula)", _compiled,
                    training_memory(_compiled, draw, lambda c: COMPILE_META)),
            Variant("liger", "Liger-Kernel (LigerRopeFunction, in place)", _liger,
                    training_memory(_liger, draw, liger_meta("liger_kernel.ops.rope.LigerRopeFunction")),
                    own_inputs=True),
        ]  # fmt: skip

    def inputs(self, case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
        dtype = DTYPES[case["dtype"]]
        t, d = case["rows"], case["cols"]

        def draw(*shape: int) -> torch.Tensor:
            return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)

        inv_freq = 1.0 / (BASE ** (torch.arange(0, d, 2, device=device, dtype=torch.float32) / d))
        angles = torch.outer(torch.arange(t, device=device, dtype=torch.float32), inv_freq)
        emb = torch.cat((angles, angles), dim=-1)[None]  # [1, T, D]
        out = {"q": draw(1, t, case["heads"], d), "k": draw(1, t, case["kv_heads"], d),
               "cos": emb.cos().to(dtype), "sin": emb.sin().to(dtype)}  # fmt: skip
        if case["direction"] == "fwd+bwd":
            out["q"].requires_grad_()
            out["k"].requires_grad_()
            out["dq"] = draw(1, case["heads"], t, d)
            out["dk"] = draw(1, case["kv_heads"], t, d)
        return out

    def reference(self, case: Params, inputs: Tensors) -> tuple[torch.Tensor, ...]:
        q, k = (inputs[n].detach().double().requires_grad_() for n in ("q", "k"))
        qo, ko = hf_rope(q.transpose(1, 2), k.transpose(1, 2), inputs["cos"].double(), inputs["sin"].double())
        if case["direction"] == "fwd":
            return qo.detach(), ko.detach()
        grads = torch.autograd.grad((qo, ko), (q, k), (inputs["dq"].double(), inputs["dk"].double()))
        return (qo.detach(), ko.detach(), *grads)

    def traffic(self, case: Params) -> tuple[int, int]:
        elems = (case["heads"] + case["kv_heads"]) * case["rows"] * case["cols"]
        tables = 2 * case["rows"] * case["cols"]  # cos and sin, read once per position
        passes = 2 if case["direction"] == "fwd" else 4
        size = element_size(case)
        return passes * elems * size + passes // 2 * tables * size, 3 * elems * passes // 2


STUDY = RopeStudy()
