"""Residual RMSNorm against float64 references and F.rms_norm, in every plan, through the
Triton interpreter on CPU tensors.

Inputs come from generators seeded by the test's parameters; outputs land in NaN-poisoned
buffers with guard rows and columns in each of the three 16-byte row layouts; non-finite
rows are compared with ``F.rms_norm`` row by row; the weight gradient is checked for the
same bits across repeated calls, batch shapes and row counts that split the same way."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_softmax import LAYOUTS, OUT_POISON, SMALL_PLANS, gen, guarded, guards_intact, randn
from tolerances import TOL, assert_close

import kernels
from kernels import rmsnorm
from kernels._rowwise import column_sum, row_layout
from kernels.plans import plan_columns
from kernels.rmsnorm import backward_rows, forward_rows

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def reference(x, weight, eps, residual=None):
    """(y, h) in float64 from the (rounded) inputs: h = x + residual summed exactly."""
    h = x.double() + (0.0 if residual is None else residual.double())
    y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (y if weight is None else y * weight.double()), h


def y_reference(x, weight, eps, residual, h, plan_kind):
    """y in float64 as the plan defines it: with a residual the split plans scale h as they
    return it (rounded to the dtype; ``RowOp.early_out2``) by the inverse RMS of the exact
    sum, the other plans the exact sum itself.  The two differ by h's rounding, as much
    again as y's own, which one tolerance for both would have to allow."""
    y, exact = reference(x, weight, eps, residual)
    if residual is not None and plan_kind == "split":  # the statistic from the exact sum, applied to h as returned
        return y * (h.detach().double() / exact).nan_to_num(1.0)
    return y


def plan_kind(x, plan):
    """The kind of the forward plan ``rms_norm(x, plan=plan)`` takes."""
    if plan is not None:
        return plan if isinstance(plan, str) else plan.kind
    x2d = x.detach().reshape(-1, x.shape[-1])
    return rmsnorm.plan_for(x2d, torch.empty_like(x2d))[0].kind


def reference_grads(h, weight, eps, dy, dh=None):
    """(dx, dw) in float64 from h as the backward receives it (rounded to the input dtype:
    that isolates the backward's error; y and h are checked separately)."""
    h64 = h.detach().double().requires_grad_()
    w64 = None if weight is None else weight.detach().double().requires_grad_()
    y = F.rms_norm(h64, (h.shape[-1],), w64, eps)
    loss = (y * dy.double()).sum()
    if dh is not None:
        loss = loss + (h64 * dh.double()).sum()
    grads = torch.autograd.grad(loss, [t for t in (h64, w64) if t is not None])
    return grads[0], (grads[1] if w64 is not None else None)


def assert_dx_close(dx, dx_ref, h, weight, eps, dy, dtype, dh=None) -> None:
    """dx = r dy w - h r^3 mean(dy w h) (+ dh) is a difference of two terms of similar size
    (for a width of 1 they cancel almost exactly), so its error is bounded relative to the
    first term, r dy w (plus dh, which the rounding of dx also scales with), rather than to
    dx itself."""
    what = "dx"
    h64 = h.detach().double()
    r = torch.rsqrt(h64.pow(2).mean(-1, keepdim=True) + eps)
    term = (r * dy.double() * (1.0 if weight is None else weight.detach().double())).abs()
    if dh is not None:
        term = term + dh.double().abs()
    assert torch.isfinite(dx).all(), f"{what}: non-finite values"
    tol = TOL[dtype]
    err = dx.double() - dx_ref
    if dx.numel():
        bound = tol["atol"] * max(1.0, float(term.abs().max()))
        assert err.abs().max() <= bound, f"{what}: max abs error {err.abs().max():.3g} > {bound:.3g} ({dtype})"
        rel = torch.linalg.vector_norm(err) / torch.linalg.vector_norm(term).clamp_min(1e-30)
        assert rel <= tol["rel"], f"{what}: relative L2 error {rel:.3g} > {tol['rel']} ({dtype})"


# ----------------------------------------------------------------------- guards, every plan


@pytest.mark.parametrize("plan", SMALL_PLANS, ids=lambda p: p.label)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_element_written_and_no_guard_touched(plan, dtype, layout) -> None:
    """x, residual, y, h, dy, dh, dx in poisoned buffers (guard rows and columns; NaN around
    inputs, a finite OUT_POISON around outputs, so a stray store of NaN shows) in each row
    layout; every plan writes every element of y, h, dx and rstd, nothing outside them,
    and matches float64.  First in the file: a kernel writing past its rows fails here."""
    rows, width, eps = 6, 300, 1e-5
    _, x, _ = guarded(rows, width, dtype, layout)
    x.copy_(randn((rows, width), dtype, "gx"))
    _, r, _ = guarded(rows, width, dtype, layout)
    r.copy_(randn((rows, width), dtype, "gr", scale=2.0))
    w = randn((width,), dtype, "gw", scale=1.0, shift=1.0)
    ybuf, y, lead = guarded(rows, width, dtype, layout, OUT_POISON)
    hbuf, h, _ = guarded(rows, width, dtype, layout, OUT_POISON)
    assert row_layout((x, r, y, h))[1] == LAYOUTS[layout]
    forward_rows(x, y, w, eps, r, h, plan)
    assert guards_intact(ybuf, y, lead) and guards_intact(hbuf, h, lead), "the forward wrote outside its rows"
    assert not (y == OUT_POISON).any() and not (h == OUT_POISON).any(), "an output element was never written"
    h_ref = reference(x, w, eps, r)[1]
    assert_close(y, y_reference(x, w, eps, r, h, plan.kind), dtype, "y")
    assert_close(h, h_ref, dtype, "h")
    _, dy, _ = guarded(rows, width, dtype, layout)
    dy.copy_(randn((rows, width), dtype, "gdy", scale=1.0))
    _, dh, _ = guarded(rows, width, dtype, layout)
    dh.copy_(randn((rows, width), dtype, "gdh", scale=1.0))
    dxbuf, dx, _ = guarded(rows, width, dtype, layout, OUT_POISON)
    rstd_buf = torch.full((rows + 2,), OUT_POISON)
    backward_rows(h, dy, dx, w, eps, dh, rstd_buf[1:-1], plan)
    assert guards_intact(dxbuf, dx, lead), "the backward wrote outside its rows"
    assert not (dx == OUT_POISON).any(), "an element of dx was never written"
    assert (rstd_buf[[0, -1]] == OUT_POISON).all(), "rstd written outside its rows"
    torch.testing.assert_close(rstd_buf[1:-1].double(), h.double().pow(2).mean(-1).add(eps).rsqrt(), rtol=1e-5, atol=0)
    dx_ref, _ = reference_grads(h, w, eps, dy, dh)
    assert_dx_close(dx, dx_ref, h, w, eps, dy, dtype, dh)


@pytest.mark.parametrize("plan", [p for p in SMALL_PLANS if p.kind == "split"], ids=lambda p: p.label)
def test_split_reads_h_back_through_its_own_stride(plan) -> None:
    """The split's second pass reads h back (RowOp.early_out2) through h's row stride, which
    need not be x's: here x, the residual, y and h all have rows of other lengths."""
    rows, width, eps, dtype = 5, 300, 1e-5, torch.bfloat16

    def rows_of(stride: int, what: str) -> torch.Tensor:
        return randn((rows, stride), dtype, ("hs", what, plan.label))[:, 8 : 8 + width]

    x, r = rows_of(320, "x"), rows_of(336, "r")  # each row 8 elements (16 bytes) in
    y, h = rows_of(352, "y"), rows_of(312, "h")
    w = randn((width,), dtype, "hsw", scale=1.0, shift=1.0)
    assert len({t.stride(0) for t in (x, r, y, h)}) == 4
    forward_rows(x, y, w, eps, r, h, plan)
    h_ref = reference(x, w, eps, r)[1]
    assert_close(h, h_ref, dtype, "h")
    assert_close(y, y_reference(x, w, eps, r, h, "split"), dtype, "y")


# ----------------------------------------------------------------------- the functional against float64

CASES = [
    ((3, 1), None),
    ((1, 1), None),
    ((5, 127), None),
    ((7, 33), "block"),
    ((33, 100), None),
    ((4, 300), "looped"),
    ((4, 300), "split"),
    ((3, 2049), "looped"),
    ((1, 40000), "split"),
    ((2, 3, 65), None),
    ((0, 17), None),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize(("shape", "plan"), CASES, ids=str)
def test_forward_and_gradients_match_float64(shape, plan, residual, dtype) -> None:
    width, eps = shape[-1], 1e-6
    x = randn(shape, dtype, "x").requires_grad_()
    r = randn(shape, dtype, "r", scale=2.0).requires_grad_() if residual else None
    w = randn((width,), dtype, "w", scale=0.5, shift=1.0).requires_grad_()
    out = kernels.rms_norm(x, (width,), w, eps, residual=r, plan=plan)
    y, h = out if residual else (out, x)
    assert y.shape == x.shape and y.dtype == dtype and y.is_contiguous()
    y_ref, h_ref = reference(x.detach(), w.detach(), eps, None if r is None else r.detach())
    if residual and x.numel():
        y_ref = y_reference(x.detach(), w.detach(), eps, r.detach(), h, plan_kind(x, plan))
    assert_close(y, y_ref, dtype, "y")
    if residual:
        assert h.shape == x.shape and h.dtype == dtype
        assert_close(h, h_ref, dtype, "h")
    dy = randn(shape, dtype, "dy", scale=1.0)
    dh = randn(shape, dtype, "dh", scale=1.0) if residual else None
    outs, grads_in = ((y, h), (dy, dh)) if residual else ((y,), (dy,))
    inputs = (x, r, w) if residual else (x, w)
    got = torch.autograd.grad(outs, inputs, grads_in)
    dx_ref, dw_ref = reference_grads(h, w, eps, dy, dh)
    assert_dx_close(got[0], dx_ref, h, w, eps, dy, dtype, dh)
    if residual:
        assert torch.equal(got[1], got[0]), "x and the residual share one gradient"
    assert got[-1].dtype == w.dtype and got[-1].shape == w.shape
    assert_close(got[-1], dw_ref, dtype, "dw")


@pytest.mark.parametrize("plan", ["block", "looped", "split"])
def test_without_weight_and_mixed_weight_dtype(plan) -> None:
    x = randn((5, 300), torch.bfloat16, ("now", plan)).requires_grad_()
    eps = torch.finfo(torch.float32).eps  # eps None: what F.rms_norm uses for bfloat16
    y = kernels.rms_norm(x, [300], plan=plan)
    assert_close(y, reference(x.detach(), None, eps)[0], torch.bfloat16, "y")
    dy = randn((5, 300), torch.bfloat16, "nowdy", scale=1.0)
    (dx,) = torch.autograd.grad(y, x, dy)
    assert_dx_close(dx, reference_grads(x, None, eps, dy)[0], x, None, eps, dy, torch.bfloat16)
    w = randn((300,), torch.float32, "w32", shift=1.0).requires_grad_()  # fp32 weight, bf16 x: y is bf16, dw fp32
    y = kernels.rms_norm(x, [300], w, 1e-5, plan=plan)
    assert y.dtype == torch.bfloat16
    assert_close(y, reference(x.detach(), w.detach(), 1e-5)[0], torch.bfloat16, "y")
    dx, dw = torch.autograd.grad(y, (x, w), dy)
    assert dw.dtype == torch.float32
    assert_close(dw, reference_grads(x, w, 1e-5, dy)[1], torch.bfloat16, "dw")


@pytest.mark.parametrize("plan", [None, "fused"])
def test_float64_input_with_a_bfloat16_weight(plan) -> None:
    """y in float64 (torch's promotion), the weight gradient in the weight's bfloat16, summed in
    float64 and rounded once more to bfloat16 (not bit-reinterpreted)."""
    x = randn((6, 40), torch.float64, "x64w16").requires_grad_()
    w = randn((40,), torch.bfloat16, "w16x64", shift=1.0).requires_grad_()
    y = kernels.rms_norm(x, (40,), w, 1e-6, plan=plan)
    assert y.dtype == torch.float64 == torch.nn.functional.rms_norm(x, (40,), w, 1e-6).dtype
    dy = randn((6, 40), torch.float64, "dy64", scale=1.0)
    dx, dw = torch.autograd.grad(y, (x, w), dy)
    dx_ref, dw_ref = reference_grads(x, w, 1e-6, dy)
    assert dw.dtype == torch.bfloat16
    assert_close(dw, dw_ref, torch.bfloat16, "dw")
    torch.testing.assert_close(dx, dx_ref.to(dx.dtype), rtol=1e-6, atol=1e-6)  # h was float64: w's rounding only


def test_eps_none_is_what_f_rms_norm_uses() -> None:
    # Mean squares near float16's epsilon (9.8e-4), far above float32's (1.2e-7): F.rms_norm
    # with eps=None uses float32's (the type it computes in), not float16's as its docstring
    # reads; ours must do the same.
    x = randn((4, 129), torch.float16, "eps", scale=0.02)
    y = kernels.rms_norm(x, (129,))
    expect = reference(x, None, torch.finfo(torch.float32).eps)[0]
    assert_close(y, expect, torch.float16, "y")
    other = reference(x, None, torch.finfo(torch.float16).eps)[0]
    assert float((other - expect).abs().max()) > 0.1, "the inputs must make eps visible"
    torch.testing.assert_close(y, F.rms_norm(x, (129,)), rtol=4e-3, atol=4e-3)
    xb = x.to(torch.bfloat16)
    torch.testing.assert_close(kernels.rms_norm(xb, (129,)), F.rms_norm(xb, (129,)), rtol=2e-2, atol=2e-2)
    x64 = x.double() * 1e-8  # float64's own epsilon (2.2e-16) is visible at these magnitudes
    torch.testing.assert_close(kernels.rms_norm(x64, (129,)), F.rms_norm(x64, (129,)))


def test_normalized_shape_over_several_trailing_dims_and_the_design_form() -> None:
    x = randn((3, 4, 5, 6), torch.float32, "multi").requires_grad_()
    w = randn((5, 6), torch.float32, "mw", shift=1.0).requires_grad_()
    y = kernels.rms_norm(x, (5, 6), w, 1e-5)
    expect = F.rms_norm(x, (5, 6), w, 1e-5)
    torch.testing.assert_close(y, expect)
    g = randn((3, 4, 5, 6), torch.float32, "mg")
    for got, want in zip(torch.autograd.grad(y, (x, w), g), torch.autograd.grad(expect, (x, w), g), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    w1 = randn((6,), torch.float32, "w1", shift=1.0)
    torch.testing.assert_close(kernels.rms_norm(x, w1, 1e-6), F.rms_norm(x, (6,), w1, 1e-6))  # rms_norm(x, w, eps)
    torch.testing.assert_close(kernels.rms_norm(x, 6), F.rms_norm(x, (6,)))  # an int normalized_shape
    shape = (np.int64(5), np.int32(6))  # NumPy integers, as torch takes them
    torch.testing.assert_close(kernels.rms_norm(x, shape), F.rms_norm(x, shape))
    torch.testing.assert_close(kernels.rms_norm(x, np.int64(6)), F.rms_norm(x, (6,)))  # one, as an int


def test_strided_rows_and_permuted_batches() -> None:
    base = randn((5, 3000), torch.bfloat16, "strided")
    x = base[:, 1:2001]  # row stride 3000, 2 bytes off the 16-byte grid: read in place
    w = randn((2000,), torch.bfloat16, "sw", shift=1.0)
    assert_close(kernels.rms_norm(x, (2000,), w, 1e-6), reference(x, w, 1e-6)[0], torch.bfloat16)
    xp = randn((4, 3, 50), torch.float16, "perm").transpose(0, 1)
    assert_close(kernels.rms_norm(xp, (50,), None, 1e-6), reference(xp, None, 1e-6)[0], torch.float16)
    xt = randn((37, 9), torch.float32, "t").t()  # last-dimension stride 9: one copy
    assert_close(kernels.rms_norm(xt, (37,), None, 1e-6), reference(xt, None, 1e-6)[0], torch.float32)


@pytest.mark.parametrize("plan", ["block", "looped", "split"])
def test_large_values_need_fp32_accumulation(plan) -> None:
    # float16 values near 3e4: their squares (1e9) overflow float16 but not float32; the
    # residual sum (6e4) still fits.
    x = randn((3, 300), torch.float16, ("big", plan), scale=1.0, shift=3e4)
    r = randn((3, 300), torch.float16, ("bigr", plan), scale=1.0, shift=3e4)
    y, h = kernels.rms_norm(x, (300,), None, 1e-6, residual=r, plan=plan)
    assert torch.isfinite(y).all() and torch.isfinite(h).all()
    h_ref = reference(x, None, 1e-6, r)[1]
    assert_close(y, y_reference(x, None, 1e-6, r, h, plan), torch.float16, "y")
    assert_close(h, h_ref, torch.float16, "h")


NON_FINITE = {
    "nan": lambda x: x.__setitem__((0, 3), float("nan")),
    "pos-inf": lambda x: x.__setitem__((0, -1), float("inf")),
    "neg-inf": lambda x: x.__setitem__((0, 0), float("-inf")),
    "pos-and-neg-inf": lambda x: (x.__setitem__((0, 0), float("inf")), x.__setitem__((0, 1), float("-inf"))),
    "all-nan": lambda x: x.__setitem__((0, slice(None)), float("nan")),
}


@pytest.mark.parametrize("plan", ["block", "looped", "split"])
@pytest.mark.parametrize("kind", list(NON_FINITE))
def test_non_finite_rows_match_f_rms_norm_row_for_row(plan, kind) -> None:
    """A row holding NaN is NaN; a row holding an infinity is NaN there and 0 elsewhere, as
    F.rms_norm gives; the other rows, and their gradients, are untouched by it."""
    width = 300 if plan != "block" else 77
    x = randn((4, width), torch.float32, ("nonfinite", kind))
    NON_FINITE[kind](x)
    w = randn((width,), torch.float32, "nfw", shift=1.0)
    x.requires_grad_()
    y = kernels.rms_norm(x, (width,), w, 1e-6, plan=plan)
    expect = F.rms_norm(x.detach(), (width,), w, 1e-6)
    assert torch.equal(torch.isnan(y[0]), torch.isnan(expect[0]))
    finite = ~torch.isnan(expect[0])
    torch.testing.assert_close(y[0][finite], expect[0][finite])
    assert_close(y[1:], reference(x.detach()[1:], w, 1e-6)[0], torch.float32, "finite rows")
    dy = randn((4, width), torch.float32, ("nfdy", kind), scale=1.0)
    (dx,) = torch.autograd.grad(y, x, dy)
    assert_dx_close(dx[1:], reference_grads(x[1:], w, 1e-6, dy[1:])[0], x[1:], w, 1e-6, dy[1:], torch.float32)


# ----------------------------------------------------------------------- the weight gradient


def _dw(x, w, dy, plan=None):
    x = x.detach().requires_grad_()
    w = w.detach().requires_grad_()
    (dw,) = torch.autograd.grad(kernels.rms_norm(x, (x.shape[-1],), w, 1e-6, plan=plan), w, dy)
    return dw


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_weight_gradient_is_bitwise_reproducible(dtype) -> None:
    """The same bits on repeated calls, whatever the batch shape, and for row counts that
    the column plan splits the same way (zero gradient rows appended add exact zeros)."""
    rows, width = 130, 130  # three row splits of 44 rows; 132 rows split the same way
    x = randn((rows, width), dtype, "det")
    w = randn((width,), dtype, "detw", shift=1.0)
    dy = randn((rows, width), dtype, "detdy", scale=1.0)
    first = _dw(x, w, dy)
    assert torch.equal(first, _dw(x, w, dy)), "repeated calls must give the same bits"
    assert torch.equal(first, _dw(x.view(10, 13, width), w, dy.view(10, 13, width))), "batch shape changed the bits"
    more = rows + 2
    same = plan_columns(rows, width, 132)
    assert plan_columns(more, width, 132) == same and same.splits > 1, "the test needs two row counts split alike"
    x2 = torch.cat([x, randn((2, width), dtype, "detx2")])
    dy2 = torch.cat([dy, torch.zeros((2, width), dtype=dtype)])
    assert torch.equal(first, _dw(x2, w, dy2)), "a row count split the same way must give the same bits"
    _, dw_ref = reference_grads(x, w, 1e-6, dy)
    assert_close(first, dw_ref, dtype, "dw")
    for plan in ("looped", "split"):  # the row plan computes rstd; the column plan sums
        assert torch.equal(first, _dw(x, w, dy, plan)), f"the {plan} plan's rstd changed the bits"


# ----------------------------------------------------------------------- the fused backward


FUSED_CASES = [((1, 1), 1), ((7, 33), None), ((9, 300), 4), ((3, 4, 129), 5), ((2, 4097), None), ((6, 1000), 6)]


@pytest.mark.parametrize("prefetch", [False, True], ids=["load", "prefetch"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
@pytest.mark.parametrize(("shape", "programs"), FUSED_CASES, ids=str)
def test_fused_backward_matches_float64(shape, programs, residual, dtype, prefetch) -> None:
    """dx and dw from the persistent pass, with fewer programs than rows (each walks
    several rows: the stride of the row loop) and one per row, in poisoned outputs; with the
    next row's loads issued early (``prefetch``: the last program's prefetch runs past the rows).
    The upstream gradients' rows lie 20 and 9 elements further apart than h's: each tensor is
    read with its own row stride."""
    width, eps = shape[-1], 1e-6
    h = randn(shape, dtype, ("fh", shape)).reshape(-1, width)
    dy = _rows_apart(randn(shape, dtype, ("fdy", shape), scale=1.0).reshape(-1, width), 20)
    dh = _rows_apart(randn(shape, dtype, ("fdh", shape), scale=1.0).reshape(-1, width), 9) if residual else None
    w = randn((width,), dtype, ("fw", shape), scale=0.5, shift=1.0)
    dx = torch.full_like(h, OUT_POISON)
    dw = rmsnorm.backward_fused(h, dy, dx, w, eps, dh, programs, prefetch=prefetch)
    assert not (dx == OUT_POISON).any(), "an element of dx was never written"
    dx_ref, dw_ref = reference_grads(h, w, eps, dy, dh)
    assert_dx_close(dx, dx_ref, h, w, eps, dy, dtype, dh)
    assert dw.dtype == w.dtype and dw.shape == w.shape
    assert_close(dw, dw_ref, dtype, "dw")


def _rows_apart(t: torch.Tensor, extra: int) -> torch.Tensor:
    """``t``'s values in a view whose rows lie ``extra`` elements further apart (NaN between)."""
    buf = torch.full((t.shape[0], t.shape[1] + extra), float("nan"), dtype=t.dtype)
    buf[:, : t.shape[1]] = t
    return buf[:, : t.shape[1]]


@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
def test_fused_plan_through_autograd_and_its_fallbacks(residual) -> None:
    """plan="fused" trains like the row plans; without a weight gradient, or rows wider than
    FUSED_MAX_WIDTH, the backward falls back to the planner's row plan."""
    for width in (300, rmsnorm.FUSED_MAX_WIDTH + 1):
        x = randn((3, width), torch.float32, ("fa", width)).requires_grad_()
        r = randn((3, width), torch.float32, ("far", width)).requires_grad_() if residual else None
        w = randn((width,), torch.float32, ("faw", width), shift=1.0).requires_grad_()
        dy = randn((3, width), torch.float32, ("fady", width), scale=1.0)
        outs = [kernels.rms_norm(x, (width,), w, 1e-6, residual=r, plan=p) for p in ("fused", None)]
        ys = [o[0] if residual else o for o in outs]
        torch.testing.assert_close(ys[0], ys[1], rtol=0, atol=0)  # the forward is the planner's in both
        inputs = (x, r, w) if residual else (x, w)
        got, want = (torch.autograd.grad(y, inputs, dy) for y in ys)
        for g, e in zip(got, want, strict=True):
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)
    # no weight gradient wanted: dx alone, through the row plans
    x = randn((4, 64), torch.float32, "fnw").requires_grad_()
    w = randn((64,), torch.float32, "fnww", shift=1.0)
    (dx,) = torch.autograd.grad(kernels.rms_norm(x, (64,), w, 1e-6, plan="fused"), x, torch.ones(4, 64))
    (want,) = torch.autograd.grad(F.rms_norm(x, (64,), w, 1e-6), x, torch.ones(4, 64))
    torch.testing.assert_close(dx, want, rtol=1e-5, atol=1e-5)


def test_fused_weight_gradient_is_bitwise_reproducible() -> None:
    """Row i always lands in program i % programs: repeated calls give the same bits, and
    appended rows with a zero gradient add exact zeros."""
    rows, width, programs = 50, 70, 8
    h = randn((rows, width), torch.float32, "fdet")
    dy = randn((rows, width), torch.float32, "fdetdy", scale=1.0)
    w = randn((width,), torch.float32, "fdetw", shift=1.0)
    first = rmsnorm.backward_fused(h, dy, torch.empty_like(h), w, 1e-6, None, programs)
    assert torch.equal(first, rmsnorm.backward_fused(h, dy, torch.empty_like(h), w, 1e-6, None, programs))
    h2 = torch.cat([h, randn((3, width), torch.float32, "fdet2")])
    dy2 = torch.cat([dy, torch.zeros(3, width)])
    assert torch.equal(first, rmsnorm.backward_fused(h2, dy2, torch.empty_like(h2), w, 1e-6, None, programs))


def test_column_sum_with_a_product_and_row_scale() -> None:
    a = randn((200, 70), torch.float32, "cs")
    b = randn((200, 70), torch.float32, "csb")
    s = randn((200,), torch.float32, "css")
    got = column_sum(a, y=b, row_scale=s)
    want = (a.double() * b.double() * s.double()[:, None]).sum(0)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))
    with pytest.raises(ValueError, match="row_scale"):
        column_sum(a, row_scale=s[:10])
    with pytest.raises(ValueError, match="y must"):
        column_sum(a, y=b[:10])


# ----------------------------------------------------------------------- PyTorch's OpInfo samples


def _opinfo_samples():
    from torch.testing._internal.common_methods_invocations import op_db

    out = []
    for op in op_db:
        if op.name != "nn.functional.rms_norm":
            continue
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            for i, s in enumerate(op.sample_inputs("cpu", dtype, requires_grad=True)):
                out.append(pytest.param(s, dtype, id=f"{str(dtype)[6:]}-{i}"))
    return out


@pytest.mark.parametrize(("sample", "dtype"), _opinfo_samples())
def test_pytorch_opinfo_samples_forward_and_backward(sample, dtype) -> None:
    """Every OpInfo sample of nn.functional.rms_norm, through kernels.rms_norm with the same
    arguments: the forward against F.rms_norm, the gradients against float64."""
    expect = F.rms_norm(sample.input, *sample.args, **sample.kwargs)
    got = kernels.rms_norm(sample.input, *sample.args, **sample.kwargs)
    assert got.shape == expect.shape and got.dtype == expect.dtype
    tol = TOL[dtype]
    torch.testing.assert_close(got, expect, rtol=tol["rel"] * 4, atol=tol["atol"] * 4, equal_nan=True)
    if not expect.numel():
        return
    inputs = [sample.input] + [a for a in sample.args if isinstance(a, torch.Tensor) and a.requires_grad]
    g = torch.randn(expect.shape, generator=gen("opinfo", tuple(expect.shape)), dtype=torch.float64).to(dtype)
    have = torch.autograd.grad(got, inputs, g)
    args64 = [a.detach().double().requires_grad_() if isinstance(a, torch.Tensor) else a for a in sample.args]
    x64 = sample.input.detach().double().requires_grad_()
    want = torch.autograd.grad(
        F.rms_norm(x64, *args64, **sample.kwargs),
        [x64] + [a for a in args64 if isinstance(a, torch.Tensor)],
        g.double(),
    )
    for h, w in zip(have, want, strict=True):
        assert h.dtype == dtype
        torch.testing.assert_close(h.double(), w, rtol=tol["rel"] * 8, atol=tol["atol"] * 8, equal_nan=True)


# ----------------------------------------------------------------------- errors, ops, tracing


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda x: kernels.rms_norm(x.int(), (8,)), TypeError, ["x", "int32"]),
        (lambda x: kernels.rms_norm([1.0], (8,)), TypeError, ["x", "torch.Tensor"]),
        (lambda x: kernels.rms_norm(x, (7,)), ValueError, ["normalized_shape", "[7]", "[4, 8]"]),
        (lambda x: kernels.rms_norm(x, (8,), torch.ones(7)), ValueError, ["weight", "[7]"]),
        (lambda x: kernels.rms_norm(x, (8,), torch.ones(8, dtype=torch.int64)), TypeError, ["weight", "int64"]),
        (lambda x: kernels.rms_norm(x, (8,), residual=torch.ones(4, 7)), ValueError, ["residual", "[4, 7]"]),
        (lambda x: kernels.rms_norm(x, (8,), residual=x.double()), TypeError, ["residual", "float64"]),
        (lambda x: kernels.rms_norm(x, (8,), eps="1e-6"), TypeError, ["eps"]),
        (lambda x: kernels.rms_norm(x, (8,), plan="tiled"), ValueError, ["plan", "tiled"]),
        (lambda x: kernels.rms_norm(x, ("8",)), TypeError, ["normalized_shape"]),
        (lambda x: kernels.rms_norm(x, torch.ones(8), 1e-6, 1e-6), TypeError, ["eps"]),
        (lambda x: kernels.rms_norm(x, ()), ValueError, ["normalized_shape", "at least one"]),
        (lambda x: kernels.rms_norm(x, (8.0,)), TypeError, ["normalized_shape"]),
    ],
    ids=["int", "list", "shape", "weight-shape", "weight-dtype", "residual-shape", "residual-dtype", "eps", "plan",
         "shape-type", "design-form-extra", "shape-empty", "shape-float"],
)  # fmt: skip
def test_bad_input_names_the_argument(call, error, words) -> None:
    with pytest.raises(error) as info:
        call(torch.ones(4, 8))
    for w in words:
        assert w in str(info.value), f"{w!r} not in {info.value}"


def test_registered_ops_pass_opcheck() -> None:
    x = randn((3, 17), torch.float32, "opcheck").requires_grad_()
    r = randn((3, 17), torch.float32, "opcheckr").requires_grad_()
    w = randn((17,), torch.float32, "opcheckw", shift=1.0).requires_grad_()
    for op, args in (
        (rmsnorm._rms_norm_op, (x, w, 1e-6, 17, None)),
        (rmsnorm._rms_norm_op, (x, None, 1e-6, 17, "looped")),
        (rmsnorm._rms_norm_residual_op, (x, r, w, 1e-6, 17, None)),
        (rmsnorm._rms_norm_backward_op, (x.detach(), r.detach(), r.detach(), w.detach(), 1e-6, 17, None, True)),
    ):
        torch.library.opcheck(op, args)


def test_traced_graph_matches_eager_and_meta_tensors() -> None:
    x = randn((4, 40), torch.float32, "compile").requires_grad_()
    r = randn((4, 40), torch.float32, "compiler")
    w = randn((40,), torch.float32, "compilew", shift=1.0).requires_grad_()

    def f(x, r, w):
        y, h = kernels.rms_norm(x, (40,), w, 1e-6, residual=r)
        return (y * h).sum()

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    got = torch.autograd.grad(compiled(x, r, w), (x, w))
    want = torch.autograd.grad(f(x, r, w), (x, w))
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)
    meta = kernels.rms_norm(torch.empty(4, 10, device="meta"), (10,), torch.empty(10, device="meta"))
    assert meta.device.type == "meta" and meta.shape == (4, 10)


# ----------------------------------------------------------------------- the bench study


def test_bench_study_checks_ours_and_the_torch_peers_against_its_reference() -> None:
    """The RMSNorm study's cases, variants, reference and traffic model, on a small case on
    the CPU: our kernels and the torch peers pass the study's own check (so the GPU session
    times variants that a bug in the study's reference would otherwise all fail)."""
    from bench.harness import compare
    from bench.studies.rmsnorm import STUDY

    cases = STUDY.cases(quick=False)
    assert len({STUDY.case_id(c) for c in cases}) == len(cases)
    assert all(STUDY.traffic(c)[0] > 0 for c in cases)
    for direction in STUDY.directions:
        case = {"op": "rms_norm", "direction": direction, "dtype": "bf16", "rows": 5, "cols": 300, "residual": True}
        inputs = STUDY.inputs(case, torch.device("cpu"), torch.Generator().manual_seed(5))
        refs = STUDY.reference(case, inputs)
        for variant in STUDY.variants(case):
            if variant.name not in ("triton", "torch", "eager"):
                continue
            check = compare(variant.build(case)(inputs), refs, STUDY.tolerance(case))
            assert check["passed"], (direction, variant.name, check)
