"""Cross-entropy against float64 ``F.cross_entropy`` (and its autograd), through the Triton
interpreter on CPU tensors: every combination of reduction, label smoothing, ignored rows and
soft cap; every plan at odd widths in the three 16-byte row layouts, with guards; large and
non-finite logits; the in-place gradient; row offsets past 2^31 elements; torch.compile,
opcheck and PyTorch's OpInfo samples.  Inputs come from generators seeded by the test's
parameters (the same numbers in every process)."""

from __future__ import annotations

import importlib
import math

import pytest
import torch
import torch.nn.functional as F
from test_softmax import LAYOUTS, OUT_POISON, gen, guarded, guards_intact
from tolerances import TOL

import kernels
from kernels import _checks
from kernels._rowwise import RowPlan, row_layout
from kernels.cross_entropy import _cross_entropy_op, forward_rows

ce = importlib.import_module("kernels.cross_entropy")  # the module (kernels.cross_entropy is the function)

# The loss and gradient tolerances are the shared per-dtype table's, except float32's absolute
# bound: the row's log-sum-exp is carried as one number and rounded at its own magnitude at
# every merge of a tile or chunk, so a probability is off by up to a few ulp of |lse| (~1e-6).
CE_TOL = {**TOL, torch.float32: {"rel": 1e-5, "atol": 4e-6}}


def check(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    """Relative L2 and max-abs bounds (as tests/tolerances.py), NaN and infinities where the
    reference has them, in the same places."""
    out, ref = out.detach().double(), ref.detach().double()
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    special = ~torch.isfinite(ref)
    assert torch.equal(special, ~torch.isfinite(out)), f"{what}: non-finite values in other places than torch's"
    assert torch.equal(ref[special].nan_to_num(), out[special].nan_to_num()), f"{what}: other infinities than torch's"
    o, r = out[~special], ref[~special]
    if not o.numel():
        return
    tol = CE_TOL[dtype]
    bound = tol["atol"] * max(1.0, float(r.abs().max()))
    err = (o - r).abs().max()
    assert err <= bound, f"{what}: max abs error {err:.3g} > {bound:.3g} ({dtype})"
    rel = torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r).clamp_min(1e-30)
    assert rel <= tol["rel"], f"{what}: relative L2 error {rel:.3g} > {tol['rel']} ({dtype})"


def logits(shape, dtype, key, scale: float = 4.0) -> torch.Tensor:
    return (torch.randn(shape, generator=gen("x", key, shape, str(dtype)), dtype=torch.float64) * scale).to(dtype)


def targets(rows: int, width: int, key, ignore: str = "some", ignore_index: int = -100) -> torch.Tensor:
    t = torch.randint(0, width, (rows,), generator=gen("t", key, rows, width))
    if ignore == "some":
        t[1::3] = ignore_index
    elif ignore == "all":
        t[:] = ignore_index
    return t


def reference(x, t, *, reduction="mean", label_smoothing=0.0, softcap=None, ignore_index=-100):
    """(loss, x64): torch's float64 loss of the (rounded) logits, soft cap in float64."""
    x64 = x.detach().double().requires_grad_()
    z = x64 if softcap is None else softcap * torch.tanh(x64 / softcap)
    loss = F.cross_entropy(z, t, reduction=reduction, label_smoothing=label_smoothing, ignore_index=ignore_index)
    return loss, x64


def upstream(loss: torch.Tensor, dtype: torch.dtype, key, one: bool = False) -> torch.Tensor:
    if one:
        return torch.ones(loss.shape, dtype=dtype)
    return (torch.randn(loss.shape, generator=gen("g", key, tuple(loss.shape)), dtype=torch.float64) + 0.5).to(dtype)


def run_and_check(x, t, dtype, key, *, reduction, label_smoothing=0.0, softcap=None, plan=None, one=False,
                  inplace=False, ignore_index=-100):  # fmt: skip
    ref, x64 = reference(x, t, reduction=reduction, label_smoothing=label_smoothing, softcap=softcap,
                         ignore_index=ignore_index)  # fmt: skip
    xx = x.clone().requires_grad_() if not inplace else x.clone()
    src = xx if not inplace else xx.requires_grad_()
    logits_in = src * 1 if inplace else src  # a non-leaf, as an lm-head's output
    loss = kernels.cross_entropy(logits_in, t, reduction=reduction, label_smoothing=label_smoothing, softcap=softcap,
                                 plan=plan, inplace_backward=inplace, ignore_index=ignore_index)  # fmt: skip
    assert loss.dtype == dtype and loss.shape == ref.shape
    check(loss, ref, dtype, "loss")
    g = upstream(loss, dtype, key, one)
    (want,) = torch.autograd.grad(ref, x64, g.double())
    (have,) = torch.autograd.grad(loss, logits_in, g)
    assert have.dtype == dtype
    if inplace:
        assert have.data_ptr() == logits_in.data_ptr(), "the in-place gradient is not the logits' buffer"
    check(have, want, dtype, "grad")
    return have


PLANS = ["block", "looped", "split"]


@pytest.mark.parametrize("softcap", [None, 2.5], ids=["nocap", "cap"])
@pytest.mark.parametrize("ignore", ["none", "some", "all"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.25], ids=["eps0", "eps.25"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_every_combination(reduction, label_smoothing, ignore, softcap) -> None:
    """Reduction x smoothing x ignored rows (none, some, all) x soft cap, loss and gradient
    against float64 autograd, a random per-token upstream gradient for "none" (and for the
    others a random scalar, or exactly 1 where no row is ignored: the multiply is skipped)."""
    key = (reduction, label_smoothing, ignore, softcap)
    plan = PLANS[sum(map(ord, repr(key))) % 3]
    x = logits((7, 300), torch.float32, key)
    t = targets(7, 300, key, ignore)
    run_and_check(x, t, torch.float32, key, reduction=reduction, label_smoothing=label_smoothing, softcap=softcap,
                  plan=plan, one=ignore == "none")  # fmt: skip


def test_all_ignored_mean_is_nan_with_zero_gradient() -> None:
    x = logits((4, 50), torch.float32, "allign").requires_grad_()
    loss = kernels.cross_entropy(x, torch.full((4,), -100), label_smoothing=0.1)
    assert torch.isnan(loss)
    loss.backward()
    assert torch.equal(x.grad, torch.zeros_like(x))
    assert kernels.cross_entropy(x.detach(), torch.full((4,), -100), reduction="sum") == 0


# Small steps drive the looped and split kernels through many blocks, ragged last ones, chunks
# of several blocks and packed block rows at width 1000 (and 1000 + the window's lead).
SMALL_PLANS = [
    RowPlan("looped", block=64, num_warps=2),
    RowPlan("split", block=128, num_warps=2, chunks=8),
    RowPlan("split", block=64, num_warps=1, chunks=6, span=3),
    RowPlan("block", block=1024, num_warps=4, rows_per_program=2),
]


@pytest.mark.parametrize("plan", SMALL_PLANS, ids=lambda p: p.label)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_forced_plans_odd_width_in_every_layout(plan, dtype) -> None:
    """Logits in NaN-guarded buffers in one of the three row layouts, the gradient over them in
    place (or into a guarded output): per-row losses and gradients against float64, every
    element written, no guard touched."""
    width, rows = 1000, 4
    layout = list(LAYOUTS)[(SMALL_PLANS.index(plan) + [torch.float32, torch.bfloat16, torch.float16].index(dtype)) % 3]
    inplace = dtype != torch.float16
    key = (plan.label, str(dtype), layout)
    xbuf, x, xlead = guarded(rows, width, dtype, layout)
    x.copy_(logits((rows, width), dtype, key))
    t = targets(rows, width, key)
    t[0] = width - 1  # the last column: inside a partial 16-byte group at the row's end
    t[2] = 0
    eps, cap = (0.1, 3.0) if dtype != torch.bfloat16 else (0.0, None)
    ref, x64 = reference(x, t, reduction="sum", label_smoothing=eps, softcap=cap)
    ref_rows, _ = reference(x, t, reduction="none", label_smoothing=eps, softcap=cap)
    (want,) = torch.autograd.grad(ref, x64)
    acc = torch.float32
    loss_rows = torch.empty(rows, dtype=acc)
    scale = (t != -100).to(acc)
    if inplace:
        gbuf, g, glead = xbuf, x, xlead
    else:
        gbuf, g, glead = guarded(rows, width, dtype, layout, OUT_POISON)
        assert row_layout((x, g))[1] == LAYOUTS[layout]
    forward_rows(x, t, loss_rows, grad2d=g, row_scale=scale, label_smoothing=eps, softcap=cap, plan=plan)
    assert guards_intact(gbuf, g, glead), "the kernel wrote outside its rows"
    assert torch.isfinite(g).all() and not (g == OUT_POISON).any(), "an element of the gradient was never written"
    valid = t != -100
    check(loss_rows[valid], ref_rows[valid], torch.float32, "per-row loss")  # fp32 statistics
    check(g, want, dtype, "grad")
    only = torch.empty(rows, dtype=acc)
    forward_rows(logits((rows, width), dtype, key), t, only, label_smoothing=eps, softcap=cap, plan=plan)
    check(only[valid], ref_rows[valid], torch.float32, "loss-only per-row loss")


def test_float64_split_and_looped() -> None:
    for plan in ("looped", "split"):
        x = logits((3, 700), torch.float64, ("f64", plan))
        t = targets(3, 700, ("f64", plan))
        run_and_check(x, t, torch.float64, ("f64", plan), reduction="mean", label_smoothing=0.2, softcap=4.0, plan=plan)


@pytest.mark.parametrize("plan", ["looped", "split"])
def test_wide_vocabulary_odd_width(plan) -> None:
    """A GPT-2-sized vocabulary (50257: no power of two, misaligned rows) through the policy's
    own looped and split geometry, bf16 logits, smoothing and a soft cap, in place."""
    x = logits((3, 50257), torch.bfloat16, ("wide", plan))
    t = torch.tensor([50256, -100, 7])
    run_and_check(x, t, torch.bfloat16, ("wide", plan), reduction="mean", label_smoothing=0.1, softcap=30.0,
                  plan=plan, inplace=True)  # fmt: skip


def test_large_logits() -> None:
    """Logits of +-1e4 in fp32 (exp overflows without the shift), including near-ties at the top."""
    x = logits((6, 500), torch.float32, "large", scale=1e4)
    x[1, 10] = x[1].max() + 0.5  # two top logits half a unit apart at 1e4
    x[3, 3] = 1e4
    x[3, 4] = 1e4
    t = torch.tensor([0, 10, 5, 3, -100, 499])
    for eps in (0.0, 0.3):
        xx = x.clone().requires_grad_()
        loss = kernels.cross_entropy(xx, t, reduction="none", label_smoothing=eps)
        ref, x64 = reference(x, t, reduction="none", label_smoothing=eps)
        check(loss, ref, torch.float32, "loss")
        g = upstream(loss, torch.float32, ("large", eps))
        loss.backward(g)
        (want,) = torch.autograd.grad(ref, x64, g.double())
        # The log-sum-exp is one fp32 number of magnitude 1e4 (ulp 2^-10): a probability is off
        # by up to p * a few half-ulps of it (torch's softmax shifts by the max first and is
        # exact there).  Documented in kernels/cross_entropy.py.
        lse = torch.logsumexp(x.double(), -1).abs().max()
        bound = 4 * float(lse) * 2**-24 * float(g.abs().max())
        assert (xx.grad.double() - want).abs().max() <= bound


@pytest.mark.parametrize("plan", SMALL_PLANS, ids=lambda p: p.label)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_large_logits_across_tiles_and_chunks(plan, dtype) -> None:
    """A logit of 1000 in the first column (every later tile and chunk is merged against it),
    in the last (it arrives after the others), and a row of +-1e4: the merge of running
    log-sum-exps must shift by the larger of the two, or exp overflows."""
    x = logits((3, 1000), dtype, ("big", plan.label))
    x[0, 0] = 1000.0
    x[1, -1] = 1000.0
    x[2] = logits((1, 1000), dtype, ("big2", plan.label), scale=1e4)[0]
    t = torch.tensor([0, 5, 999])
    loss_rows = torch.empty(3, dtype=torch.float32)
    forward_rows(x, t, loss_rows, plan=plan)
    ref, _ = reference(x, t, reduction="none")
    assert torch.isfinite(loss_rows).all()
    torch.testing.assert_close(loss_rows.double(), ref.detach(), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_huge_logits_are_off_by_half_ulps_of_the_log_sum_exp(dtype) -> None:
    """The documented bound: a row's log-sum-exp is one number of the accumulation dtype, so
    at logits near 1e8 the loss is off by a few half-ulps of |lse| (float32: the whole loss of
    log 8; float64, the documented way out: 1e-8)."""
    x = logits((4, 8), dtype, ("huge", str(dtype))) + 1e8
    t = torch.tensor([0, 1, 2, -100])
    ref, _ = reference(x, t, reduction="none", label_smoothing=0.1)
    loss = kernels.cross_entropy(x, t, reduction="none", label_smoothing=0.1)
    lse = float(torch.logsumexp(x.double(), -1).abs().max())
    bound = 4 * lse * torch.finfo(dtype).eps / 2
    assert (loss.double() - ref).abs().max() <= bound


def test_an_ignore_index_above_some_targets_ignores_only_its_own() -> None:
    """ignore_index = 3: targets 0, 1, 2 are classes like any other (a comparison by order, not
    equality, would drop them too)."""
    x = logits((8, 37), torch.float32, "ignore3")
    t = torch.tensor([0, 3, 7, 1, 3, 2, 36, 0])
    for reduction in ("mean", "sum", "none"):
        run_and_check(x, t, torch.float32, ("ignore3", reduction), reduction=reduction, ignore_index=3)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
@pytest.mark.parametrize("softcap", [None, 5.0])
def test_non_finite_logits_match_torch(label_smoothing, softcap) -> None:
    """NaN rows, +inf, -inf at the target and elsewhere, NaN in an ignored row: loss and
    gradient equal float64 torch's, NaN and infinities in the same places."""
    x = logits((7, 40), torch.float32, "nonfinite")
    x[0, 5] = float("nan")
    x[1, 6] = float("inf")
    x[2, 7] = float("-inf")  # at the target
    x[3, 8] = float("-inf")  # elsewhere
    x[4, :] = float("-inf")
    x[4, 9] = 0.0
    x[5, 3] = float("nan")  # an ignored row
    t = torch.tensor([1, 2, 7, 1, 9, -100, 4])
    run_and_check(x, t, torch.float32, ("nf", label_smoothing, softcap), reduction="none",
                  label_smoothing=label_smoothing, softcap=softcap)  # fmt: skip


def test_inplace_gradient_is_the_logits_buffer_and_default_leaves_logits_alone() -> None:
    x0 = logits((5, 300), torch.bfloat16, "inplace")
    t = targets(5, 300, "inplace")
    ref, x64 = reference(x0, t, label_smoothing=0.1, softcap=10.0)
    (want,) = torch.autograd.grad(ref, x64)
    for inplace in (False, True):
        w = x0.clone().requires_grad_()
        lg = w * 1  # the lm-head's output: not a leaf
        before = lg.detach().clone()
        loss = kernels.cross_entropy(lg, t, label_smoothing=0.1, softcap=10.0, inplace_backward=inplace)
        if inplace:  # the forward already wrote the gradient there
            assert not torch.equal(lg.detach(), before)
        else:
            assert torch.equal(lg.detach(), before)
        loss.backward()
        check(w.grad, want, torch.bfloat16, "grad")
    lg = x0.clone().requires_grad_()
    loss = kernels.cross_entropy(lg, t, inplace_backward=True)
    (g,) = torch.autograd.grad(loss, lg)
    assert g.data_ptr() == lg.data_ptr()  # no second [N, V] tensor
    lg = x0.clone().requires_grad_()
    (g,) = torch.autograd.grad(kernels.cross_entropy(lg, t), lg)
    assert g.data_ptr() != lg.data_ptr() and torch.equal(lg, x0)


def test_true_class_gradient_is_computed_in_fp32() -> None:
    """Confident rows (p_target ~ 1 - 1e-3): the target's gradient p - 1 must be the small
    negative number rounded once to bf16, not bf16(p) - 1 (0 or -2^-8)."""
    x = torch.zeros(4, 256)
    t = torch.tensor([3, 100, 200, 255])
    x[torch.arange(4), t] = torch.tensor([12.0, 11.0, 13.0, 12.5])
    x = x.to(torch.bfloat16).requires_grad_()
    loss = kernels.cross_entropy(x, t, reduction="sum")
    loss.backward()
    ref, x64 = reference(x, t, reduction="sum")
    (want,) = torch.autograd.grad(ref, x64)
    have = x.grad[torch.arange(4), t].double()
    want_t = want[torch.arange(4), t]
    assert (want_t.abs() < 5e-3).all()  # bf16(p) - 1 would be 0 or a multiple of 2^-8
    assert ((have - want_t).abs() <= 2**-6 * want_t.abs()).all(), (have, want_t)  # an ulp or two of bf16


def test_row_offsets_past_2_31_elements() -> None:
    """Rows whose first element is past 2^31 elements from the base (64-bit row offsets): a
    strided view over a 4 GB storage that is never touched but for its three rows."""
    width, stride = 1000, 2**30 + 8
    big = torch.empty(2 * stride + width, dtype=torch.float16)
    x = big.as_strided((3, width), (stride, 1))
    assert x.storage_offset() + 2 * stride >= 2**31
    x.copy_(logits((3, width), torch.float16, "big"))
    t = torch.tensor([999, 3, 512])
    ref, x64 = reference(x, t, reduction="none", label_smoothing=0.1)
    (want,) = torch.autograd.grad(ref.sum(), x64)
    loss = kernels.cross_entropy(x, t, reduction="none", label_smoothing=0.1)
    check(loss, ref, torch.float16, "loss")
    loss_rows = torch.empty(3)
    forward_rows(x, t, loss_rows, grad2d=x, row_scale=torch.ones(3), label_smoothing=0.1, plan="looped")
    check(loss_rows, ref, torch.float32, "per-row loss")
    check(x, want, torch.float16, "grad in place")


def test_one_and_many_dimensional_inputs() -> None:
    x = logits((37,), torch.float32, "1d")
    for t in (torch.tensor(5), torch.tensor(-100)):
        for red in ("mean", "none"):
            got = kernels.cross_entropy(x, t, reduction=red, label_smoothing=0.1)
            want = F.cross_entropy(x.double(), t, reduction=red, label_smoothing=0.1)
            assert got.shape == want.shape
            check(got, want, torch.float32, "1-d")
    x = logits((3, 11, 2, 4), torch.float32, "kd")
    t = torch.randint(0, 11, (3, 2, 4), generator=gen("kd"))
    t[0, 1] = -100
    run_and_check(x, t, torch.float32, "kd", reduction="none", label_smoothing=0.2)
    run_and_check(x, t, torch.float32, "kd", reduction="mean", softcap=3.0)


def test_strided_target_and_rows() -> None:
    x = logits((6, 2 * 130), torch.float32, "strided")[:, ::2]  # a strided last dimension: copied
    t = targets(12, 130, "strided")[::2]
    run_and_check(x, t, torch.float32, "strided", reduction="none", label_smoothing=0.1)
    rows = logits((6, 160), torch.float32, "padded")[:, :130]  # padded rows: used in place of a copy
    run_and_check(rows, t, torch.float32, "padded", reduction="mean", inplace=True)


def test_target_out_of_range_gives_nan_rows() -> None:
    x = logits((3, 20), torch.float32, "oor").requires_grad_()
    t = torch.tensor([2, 20, -5])
    loss = kernels.cross_entropy(x, t, reduction="none")
    assert torch.isfinite(loss[0]) and torch.isnan(loss[1:]).all()
    loss.sum().backward()
    assert torch.isfinite(x.grad[0]).all() and torch.isnan(x.grad[1:]).all()
    assert torch.isnan(kernels.cross_entropy(x.detach(), t))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_row_bookkeeping_past_one_block_of_rows(reduction, monkeypatch) -> None:
    """40 rows with the bookkeeping kernels taking 16 at a time (two full blocks and a ragged
    one; 1024 in use): ignored rows with NaN logits add exactly 0, out-of-range targets give
    NaN rows (and a NaN sum or mean), the rest match float64; the loss's bits repeat call
    after call (one program adds the rows in a fixed order)."""
    monkeypatch.setattr(ce, "_SMALL_BLOCK", 16)
    n, v = 40, 33
    x = logits((n, v), torch.float32, ("book", reduction))
    t = targets(n, v, ("book", reduction), "some")
    ignored = (t == -100).nonzero().flatten()
    run_and_check(x, t, torch.float32, ("book", reduction), reduction=reduction)
    first = kernels.cross_entropy(x, t, reduction=reduction)
    assert torch.equal(first, kernels.cross_entropy(x, t, reduction=reduction))
    x[ignored[::3]] = float("nan")  # an ignored row's logits never reach the loss
    assert torch.equal(kernels.cross_entropy(x, t, reduction=reduction), first)
    rows = [3, 20, n - 1]  # out of range, in the first, second and last block
    bad = t.clone()
    bad[rows] = torch.tensor([v, -7, v + 100])
    loss = kernels.cross_entropy(x, bad, reduction=reduction)
    if reduction == "none":
        nan = torch.isnan(loss)
        assert nan[rows].all() and int(nan.sum()) == 3, "NaN exactly at the out-of-range rows"
        keep = torch.ones(n, dtype=torch.bool)
        keep[rows] = False
        assert torch.equal(loss[keep], first[keep])
    else:
        assert torch.isnan(loss)


def test_empty_batch() -> None:
    x = torch.empty(0, 10)
    t = torch.empty(0, dtype=torch.int64)
    assert torch.isnan(kernels.cross_entropy(x, t))
    assert kernels.cross_entropy(x, t, reduction="sum") == 0
    assert kernels.cross_entropy(x, t, reduction="none").shape == (0,)


def test_second_backward_is_refused() -> None:
    x = logits((3, 20), torch.float32, "twice").requires_grad_()
    loss = kernels.cross_entropy(x, torch.tensor([1, 2, 3]))
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backward ran a second time"):
        loss.backward()


def test_no_grad_writes_nothing() -> None:
    x = logits((4, 30), torch.float32, "nograd").requires_grad_()
    before = x.detach().clone()
    with torch.no_grad():
        loss = kernels.cross_entropy(x, torch.tensor([1, 2, 3, -100]), inplace_backward=True)
    assert torch.equal(x.detach(), before)
    check(loss, reference(x, torch.tensor([1, 2, 3, -100]))[0], torch.float32, "loss")


def test_legacy_size_average_and_reduce() -> None:
    x = logits((4, 30), torch.float32, "legacy")
    t = torch.tensor([1, 2, 3, 4])
    check(kernels.cross_entropy(x, t, None, False), F.cross_entropy(x.double(), t, reduction="sum"), torch.float32,
          "size_average=False")  # fmt: skip
    check(kernels.cross_entropy(x, t, reduce=False), F.cross_entropy(x.double(), t, reduction="none"),
          torch.float32, "reduce=False")  # fmt: skip


@pytest.mark.parametrize("reduction", ["mean", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_torch_compile_fullgraph_matches_eager(reduction, dtype) -> None:
    """One graph through the registered op; loss and gradient equal the eager path's, in the
    logits' dtype (no float constant promoted to float64 on the way)."""
    x = logits((5, 70), dtype, ("compile", reduction))
    t = torch.tensor([1, -100, 69, 0, 33])

    def f(lg, tt):
        return kernels.cross_entropy(lg, tt, reduction=reduction, label_smoothing=0.1, softcap=4.0)

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    results = []
    for fn in (f, compiled):
        xx = x.clone().requires_grad_()
        loss = fn(xx, t)
        loss.backward(torch.ones_like(loss) * 0.5)
        assert loss.dtype == dtype and xx.grad.dtype == dtype
        results.append((loss.detach(), xx.grad))
    torch.testing.assert_close(results[1][0], results[0][0], rtol=0, atol=0)
    torch.testing.assert_close(results[1][1], results[0][1], rtol=TOL[dtype]["rel"], atol=TOL[dtype]["atol"])


def test_registered_op_passes_opcheck() -> None:
    x = logits((3, 70), torch.float32, "opcheck").requires_grad_()
    t = torch.tensor([1, -100, 69])
    torch.library.opcheck(_cross_entropy_op, (x, t, -100, "mean", 0.1, 2.0, None, True))
    torch.library.opcheck(_cross_entropy_op, (x, t, -100, "none", 0.0, None, "split", True))
    torch.library.opcheck(_cross_entropy_op, (x.detach(), t, -100, "sum", 0.0, None, None, False))


def test_meta_tensors_take_the_registered_op() -> None:
    loss = kernels.cross_entropy(torch.empty(4, 10, device="meta"), torch.empty(4, dtype=torch.int64, device="meta"),
                                 reduction="none")  # fmt: skip
    assert loss.device.type == "meta" and loss.shape == (4,)


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"weight": torch.ones(5)}, NotImplementedError, ["weight"]),
        ({"target": torch.rand(3, 5)}, NotImplementedError, ["class-probability", "target"]),
        ({"target": torch.tensor([1, 2, 3], dtype=torch.int32)}, TypeError, ["target", "int32", "int64"]),
        ({"target": torch.tensor([1, 2])}, ValueError, ["target", "shape", "[2]", "[3]"]),
        ({"input": torch.ones(3, 5, dtype=torch.int64)}, TypeError, ["input", "int64"]),
        ({"reduction": "avg"}, ValueError, ["reduction", "'avg'"]),
        ({"label_smoothing": 1.5}, ValueError, ["label_smoothing", "[0, 1]"]),
        ({"softcap": 0.0}, ValueError, ["softcap"]),
        ({"softcap": float("inf")}, ValueError, ["softcap"]),
        ({"ignore_index": 1.0}, TypeError, ["ignore_index"]),
        ({"plan": "fast"}, ValueError, ["plan"]),
        ({"input": torch.tensor(1.0), "target": torch.tensor(0)}, ValueError, ["class dimension"]),
    ],
    ids=[
        "weight",
        "probabilities",
        "int32-target",
        "shape",
        "int-input",
        "reduction",
        "smoothing",
        "softcap-0",
        "softcap-inf",
        "ignore-index",
        "plan",
        "0-d",
    ],
)
def test_bad_arguments_name_the_argument(kwargs, error, words) -> None:
    args = {"input": torch.randn(3, 5), "target": torch.tensor([1, 2, 3])}
    args.update(kwargs)
    with pytest.raises(error) as info:
        kernels.cross_entropy(**args)
    for w in words:
        assert w in str(info.value), f"{w!r} not in {info.value}"


def test_cpu_tensor_refused_outside_the_interpreter(monkeypatch) -> None:
    monkeypatch.setattr(_checks, "INTERPRETER", False)
    with pytest.raises(ValueError, match=r"input is on device 'cpu'; expected a CUDA tensor"):
        kernels.cross_entropy(torch.randn(2, 3), torch.tensor([0, 1]))


def test_target_on_another_device_is_refused() -> None:
    with pytest.raises(ValueError, match="target is on meta but input is on cpu"):
        kernels.cross_entropy(torch.randn(3, 5), torch.empty(3, dtype=torch.int64, device="meta"))


# ------------------------------------------------------------------ PyTorch's OpInfo samples


def _opinfo_samples():
    from torch.testing._internal.common_methods_invocations import op_db

    out = []
    for op in op_db:
        if op.name != "nn.functional.cross_entropy":
            continue
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            if dtype not in op.supported_dtypes("cpu"):
                continue
            for i, s in enumerate(op.sample_inputs("cpu", dtype, requires_grad=True)):
                out.append(pytest.param(s, dtype, id=f"{op.variant_test_name or 'plain'}-{str(dtype)[6:]}-{i}"))
    return out


def refusal(sample) -> str | None:
    """Why kernels.cross_entropy refuses a sample (documented: per-class weights and
    class-probability targets), or None."""
    if sample.kwargs.get("weight") is not None:
        return "weight"
    if sample.args[0].is_floating_point():
        return "probability targets"
    return None


OPINFO = _opinfo_samples()


@pytest.mark.parametrize(("sample", "dtype"), OPINFO)
def test_pytorch_opinfo_samples(sample, dtype) -> None:
    """Every class-index sample PyTorch's OpInfo database has for nn.functional.cross_entropy:
    the loss against F.cross_entropy in the sample's dtype, the gradient against float64
    autograd.  Samples with per-class weights or probability targets must be refused with
    NotImplementedError naming them (counted below)."""
    target = sample.args[0]
    why = refusal(sample)
    if why is not None:
        with pytest.raises(NotImplementedError, match="weight" if why == "weight" else "class-probability"):
            kernels.cross_entropy(sample.input, *sample.args, **sample.kwargs)
        return
    got = kernels.cross_entropy(sample.input, *sample.args, **sample.kwargs)
    expect = F.cross_entropy(sample.input, *sample.args, **sample.kwargs)
    assert got.shape == expect.shape and got.dtype == expect.dtype
    kw = dict(sample.kwargs)
    x64 = sample.input.detach().double().requires_grad_()
    ref = F.cross_entropy(x64, target, **kw)
    check(got, ref, dtype, "loss")
    g = torch.randn(got.shape, generator=gen("opinfo", tuple(got.shape)), dtype=torch.float64).to(dtype)
    (have,) = torch.autograd.grad(got, sample.input, g)
    (want,) = torch.autograd.grad(ref, x64, g.double())
    check(have, want, dtype, "grad")


def test_opinfo_refusals_are_the_documented_ones() -> None:
    reasons: dict[str, int] = {}
    for p in OPINFO:
        why = refusal(p.values[0])
        if why is not None:
            reasons[why] = reasons.get(why, 0) + 1
    assert set(reasons) <= {"weight", "probability targets"}
    accepted = len(OPINFO) - sum(reasons.values())
    print(f"OpInfo cross_entropy: {len(OPINFO)} samples, {accepted} run, refused {reasons}")
    assert accepted >= len(OPINFO) // 3 and math.isfinite(accepted)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_scale_rows_walks_every_tile_on_a_small_grid(dtype, monkeypatch) -> None:
    """The backward's grad *= dloss on a persistent grid (8 programs on a 1-SM device) over 20
    rows of 3000 in a strided, guarded buffer: a scalar factor scales every row, a factor of
    exactly 1 leaves the bits alone, per-row factors scale their own rows (one rounding of the
    fp32 product, as torch's fp32 multiply then cast)."""
    ce_module = importlib.import_module("kernels.cross_entropy")  # (kernels.cross_entropy is the function)
    scale_rows_ = ce_module.scale_rows_
    monkeypatch.setattr(ce_module, "sm_count", lambda device: 1)
    rows, width = 20, 3000
    g = torch.Generator().manual_seed(11)
    base = (torch.randn((rows, width + 24), generator=g) * 3).to(dtype)
    per_row = torch.rand(rows, generator=g).masked_fill(torch.arange(rows) % 3 == 0, 1.0)
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    for dloss in (torch.tensor(0.5), torch.tensor(1.0), per_row):
        buf = base.clone()
        view = buf[:, 8 : 8 + width]  # guard columns on both sides
        factor = dloss.to(acc).reshape(-1, 1) if dloss.dim() else dloss.to(acc)
        want = (view.to(acc) * factor).to(dtype)
        scale_rows_(view, dloss)
        assert torch.equal(buf[:, :8], base[:, :8]) and torch.equal(buf[:, 8 + width :], base[:, 8 + width :])
        if dtype == torch.bfloat16 and not (dloss.dim() == 0 and float(dloss) == 1.0):
            # the interpreter's fp32 -> bf16 cast need not round as torch's does: an ulp apart
            torch.testing.assert_close(view, want, rtol=2**-7, atol=0)
        else:
            assert torch.equal(view, want)
