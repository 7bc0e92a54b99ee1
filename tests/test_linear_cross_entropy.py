"""Fused linear + cross-entropy against float64 ``F.cross_entropy(F.linear(...))`` and its
autograd, through the Triton interpreter: every reduction (``none`` with a per-token upstream
gradient), label smoothing with ignored rows, the soft cap, with and without a bias, several
chunks with a ragged last one; that no chunk of logits larger than asked exists; that only
the needed gradients are computed; torch.compile and opcheck; clear errors.  Seeded by the
test's parameters."""

from __future__ import annotations

import importlib
import math

import pytest
import torch
import torch.nn.functional as F
from test_cross_entropy import check
from test_softmax import gen

from kernels.linear_cross_entropy import _lce_backward_op, _lce_op, chunk_rows, linear_cross_entropy

lce_module = importlib.import_module("kernels.linear_cross_entropy")  # the package's attribute is the function
N, H, V = 37, 24, 131  # odd tokens, hidden and vocabulary; chunks of 8 leave a last one of 5


def inputs(dtype: torch.dtype, key, bias: bool, scale: float = 1.0):
    x = (torch.randn((N, H), generator=gen("x", key), dtype=torch.float64) * scale).to(dtype)
    w = (torch.randn((V, H), generator=gen("w", key), dtype=torch.float64) * 0.4).to(dtype)
    b = (torch.randn((V,), generator=gen("b", key), dtype=torch.float64)).to(dtype) if bias else None
    t = torch.randint(0, V, (N,), generator=gen("t", key))
    t[1::4] = -100
    return x, w, b, t


def reference(x, w, b, t, reduction, eps, cap, upstream):
    """float64 loss and (input, weight, bias) gradients for an upstream gradient."""
    leaves = [v.detach().double().requires_grad_() for v in (x, w) + ((b,) if b is not None else ())]
    z = F.linear(leaves[0], leaves[1], leaves[2] if b is not None else None)
    if cap is not None:
        z = cap * torch.tanh(z / cap)
    loss = F.cross_entropy(z, t, reduction=reduction, label_smoothing=eps)
    grads = torch.autograd.grad(loss, leaves, upstream.double())
    return loss, grads


CASES = [  # dtype, reduction, bias, label smoothing, soft cap, input scale
    (torch.float32, "mean", True, 0.1, None, 1.0),
    (torch.float32, "none", False, 0.1, None, 1.0),  # per-token upstream, smoothing with ignored rows
    (torch.float32, "sum", True, 0.0, 20.0, 8.0),  # the soft cap, large logits (|z| up to ~50)
    (torch.bfloat16, "mean", True, 0.0, None, 1.0),
    (torch.bfloat16, "none", True, 0.05, 30.0, 1.0),
    (torch.float64, "mean", False, 0.2, None, 1.0),
]


@pytest.mark.parametrize("dtype, reduction, bias, eps, cap, scale", CASES)
def test_loss_and_every_gradient_match_float64(dtype, reduction, bias, eps, cap, scale) -> None:
    key = (str(dtype), reduction, bias, eps, cap)
    x, w, b, t = inputs(dtype, key, bias, scale)
    leaves = [v.clone().requires_grad_() for v in (x, w) + ((b,) if bias else ())]
    loss = linear_cross_entropy(leaves[0], leaves[1], t, leaves[2] if bias else None, reduction=reduction,
                                label_smoothing=eps, softcap=cap, chunk_size=8)  # fmt: skip
    shape = (N,) if reduction == "none" else ()
    upstream = (torch.randn(shape, generator=gen("up", key), dtype=torch.float64) * 2).to(dtype)
    grads = torch.autograd.grad(loss, leaves, upstream)
    ref_loss, ref_grads = reference(x, w, b, t, reduction, eps, cap, upstream)
    check(loss, ref_loss, dtype, f"loss {key}")
    for name, g, r in zip(("input", "weight", "bias"), grads, ref_grads, strict=False):
        assert g.dtype == dtype
        check(g, r, dtype, f"{name} gradient {key}")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_a_transposed_weight_and_padded_rows(reduction) -> None:
    """The weight as the transpose of an [H, V] tensor (an lm head tied to an embedding stored
    the other way round), the input's rows 7 elements apart beyond H and a bias every other
    element of a buffer: the gradients come back right, each in torch's layout or row-major."""
    key = ("layouts", reduction)
    x, w, b, t = inputs(torch.float32, key, True)
    w = w.t().contiguous().t()  # [V, H] with strides (1, V)
    x = torch.cat([x, torch.full((N, 7), float("nan"))], 1)[:, :H]
    b = torch.stack([b, torch.full_like(b, float("nan"))], 1)[:, 0]
    leaves = [v.clone().requires_grad_() for v in (x, w, b)]
    assert leaves[1].stride() == (1, V)
    loss = linear_cross_entropy(leaves[0], leaves[1], t, leaves[2], reduction=reduction, chunk_size=8)
    shape = (N,) if reduction == "none" else ()
    upstream = (torch.randn(shape, generator=gen("up", key), dtype=torch.float64) + 2).to(torch.float32)
    grads = torch.autograd.grad(loss, leaves, upstream)
    ref_loss, ref_grads = reference(x, w, b, t, reduction, 0.0, None, upstream)
    check(loss, ref_loss, torch.float32, "loss")
    for name, g, r in zip(("input", "weight", "bias"), grads, ref_grads, strict=True):
        check(g, r, torch.float32, f"{name} gradient")


def test_all_targets_ignored_gives_torchs_nan_mean_and_zero_gradients() -> None:
    x, w, b, t = inputs(torch.float32, "all-ignored", True)
    t[:] = -100
    leaves = [v.clone().requires_grad_() for v in (x, w, b)]
    loss = linear_cross_entropy(*leaves[:2], t, leaves[2], chunk_size=16)
    assert math.isnan(float(loss.detach())) and math.isnan(float(F.cross_entropy(F.linear(x, w, b), t)))
    s = linear_cross_entropy(*leaves[:2], t, leaves[2], reduction="sum", chunk_size=16)
    for g in torch.autograd.grad(s, leaves):
        assert torch.equal(g, torch.zeros_like(g))


def test_out_of_range_target_makes_its_row_nan() -> None:
    x, w, _, t = inputs(torch.float32, "range", False)
    t[3] = V + 5
    rows = linear_cross_entropy(x, w, t, reduction="none", chunk_size=8)
    assert math.isnan(float(rows[3])) and torch.isfinite(rows[torch.arange(N) != 3]).all()


def test_no_chunk_of_logits_larger_than_asked(monkeypatch) -> None:
    # The full [N, V] logits must never exist: every row-kernel call sees one chunk, in order.
    seen: list[tuple[int, int]] = []
    original = lce_module.forward_rows

    def spy(x2d, *args, **kwargs):
        seen.append(tuple(x2d.shape))
        return original(x2d, *args, **kwargs)

    monkeypatch.setattr(lce_module, "forward_rows", spy)
    x, w, b, t = inputs(torch.float32, "chunks", True)
    x.requires_grad_()
    loss = linear_cross_entropy(x, w, t, b, chunk_size=8)
    assert seen == [(8, V)] * 4 + [(5, V)]
    loss.backward()
    assert len(seen) == 5, "mean: the forward computed the gradients; the backward only scales them"
    seen.clear()
    linear_cross_entropy(x, w, t, b, reduction="none", chunk_size=16).sum().backward()
    assert seen == [(16, V), (16, V), (5, V)] * 2, "none: losses in the forward, the chunks again in the backward"


def test_chunk_rows_holds_a_quarter_of_the_weight_or_the_inputs_size() -> None:
    # A chunk of logits [C, V] at most a quarter of the weight [V, H]: C = H / 4 (a power of two).
    assert chunk_rows(8192, 4096, 128256) == 1024
    assert chunk_rows(4096, 5120, 151936) == 1024  # 5120 / 4 = 1280 -> 1024
    assert chunk_rows(8192, 4096, 32000) == 2048  # a small vocabulary: the chunk the input's size is larger
    assert chunk_rows(3, 4096, 128256) == 3  # never more rows than there are
    assert chunk_rows(10, 2, 100) == 1  # H / 4 < 1: one row at a time


def test_only_the_needed_gradients_are_computed(monkeypatch) -> None:
    asked: list[tuple[bool, bool, bool]] = []
    original = lce_module._chunks

    def spy(*args, **kwargs):
        asked.append(kwargs.get("needs", args[9] if len(args) > 9 else (False, False, False)))
        return original(*args, **kwargs)

    monkeypatch.setattr(lce_module, "_chunks", spy)
    x, w, b, t = inputs(torch.float32, "needs", True)
    x.requires_grad_()
    (gx,) = torch.autograd.grad(linear_cross_entropy(x, w, t, b, chunk_size=16), (x,))
    assert asked == [(True, False, False)]
    _, ref = reference(x, w, b, t, "mean", 0.0, None, torch.tensor(1.0))
    check(gx, ref[0], torch.float32, "input gradient, frozen weight")


def test_leading_dimensions_and_no_grad() -> None:
    x, w, _, t = inputs(torch.float32, "3d", False)
    x3, t3 = x[:36].reshape(4, 9, H), t[:36].reshape(4, 9)
    with torch.no_grad():
        rows = linear_cross_entropy(x3, w, t3, reduction="none", chunk_size=8)
    assert rows.shape == (4, 9)
    check(rows, F.cross_entropy(F.linear(x3.double(), w.double()).reshape(-1, V), t3.reshape(-1), reduction="none")
          .reshape(4, 9), torch.float32, "per-token losses")  # fmt: skip


def test_no_tokens_gives_torchs_result() -> None:
    x, w, b, t = inputs(torch.float32, "empty", True)
    assert linear_cross_entropy(x[:0], w, t[:0], b, reduction="none").shape == (0,)
    assert math.isnan(float(linear_cross_entropy(x[:0], w, t[:0], b)))


def test_registered_ops_pass_opcheck() -> None:
    x, w, b, t = inputs(torch.float32, "opcheck", True)
    x, w, b = x[:9], w[:40], b[:40]
    t = t[:9].clamp(max=39)
    torch.library.opcheck(_lce_op, (x, w, b, t, -100, "mean", 0.1, None, 4))
    torch.library.opcheck(_lce_backward_op, (torch.randn(9, generator=gen("d")), x, w, None, t, -100, "none", 0.0,
                                             5.0, 4))  # fmt: skip


def test_torch_compile_fullgraph_matches_eager() -> None:
    x, w, b, t = inputs(torch.float32, "compile", True)
    x.requires_grad_()
    w.requires_grad_()

    def f(x, w, b, t):
        return linear_cross_entropy(x, w, t, b, reduction="sum", label_smoothing=0.1, chunk_size=16)

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    got = torch.autograd.grad(compiled(x, w, b, t), (x, w))
    want = torch.autograd.grad(f(x, w, b, t), (x, w))
    for g, r in zip(got, want, strict=True):
        check(g, r, torch.float32, "compiled gradient")


@pytest.mark.parametrize(
    "change, error, words",
    [
        ({"w": "wrong_h"}, ValueError, "weight must be [V, H]"),
        ({"w": "bf16"}, TypeError, "input's dtype"),
        ({"t": "int32"}, TypeError, "int64"),
        ({"t": "short"}, ValueError, "target has shape"),
        ({"b": "wrong"}, ValueError, "bias must be [V]"),
        ({"reduction": "avg"}, ValueError, "reduction"),
        ({"label_smoothing": 1.5}, ValueError, "label_smoothing"),
        ({"softcap": -1.0}, ValueError, "softcap"),
        ({"chunk_size": 0}, ValueError, "chunk_size"),
    ],
)
def test_bad_input_names_the_argument(change, error, words) -> None:
    x, w, b, t = inputs(torch.float32, "bad", True)
    kw = {k: v for k, v in change.items() if k not in ("w", "t", "b")}
    if change.get("w") == "wrong_h":
        w = w[:, :-1]
    if change.get("w") == "bf16":
        w = w.to(torch.bfloat16)
    if change.get("t") == "int32":
        t = t.int()
    if change.get("t") == "short":
        t = t[:-1]
    if change.get("b") == "wrong":
        b = b[:-1]
    with pytest.raises(error, match=words.replace("[", r"\[").replace("]", r"\]")):
        linear_cross_entropy(x, w, t, b, **kw)
