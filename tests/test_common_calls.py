"""The common-call shortcuts of ``rms_norm`` and ``row_sum`` (recognized before argument
checking and served by ``RowCall.lane_ext``) take exactly the calls the full path would
accept and give the same bits; every other call goes down the full path, which raises the
errors.  On the CPU the shortcut is reached through the ``on_gpu`` seam, under the Triton
interpreter."""

from __future__ import annotations

import pytest
import torch

from kernels import _checks, rmsnorm, rowsum

SEED = 20261203


def randn(*shape: int, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(SEED + seed)
    return (torch.randn(*shape, generator=g) * 3).to(dtype)


def _run(monkeypatch, module, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    """(result or the exception's type, whether the shortcut served the call) with the
    shortcut reachable, and the same call's result down the full path (the shortcut
    unreachable).  The shortcut served a call when the call never reached check_args."""
    checked: list[int] = []
    original = module.check_args

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        checked.append(1)
        return original(*a, **k)

    def outcome():  # type: ignore[no-untyped-def]
        try:
            return fn(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            return type(exc)

    with monkeypatch.context() as m:
        m.setattr(_checks, "on_gpu", lambda t: True)
        m.setattr(module, "check_args", spy)
        fast = outcome()
        shortcut = not checked
    return fast, shortcut, outcome()


def _same(a, b) -> None:  # type: ignore[no-untyped-def]
    if isinstance(a, type) or isinstance(b, type):
        assert a is b
        return
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for p, q in zip(a, b, strict=True):
            _same(p, q)
        return
    assert a.shape == b.shape and a.dtype == b.dtype and a.is_contiguous()
    assert torch.equal(a.view(torch.int16 if a.element_size() == 2 else torch.int32),
                       b.view(torch.int16 if b.element_size() == 2 else torch.int32))  # fmt: skip


W = 33
X2, X3 = randn(7, W), randn(2, 3, W, seed=1)
WEIGHT, RES2, RES3 = randn(W, seed=2), randn(7, W, seed=3), randn(2, 3, W, seed=4)
RMS_TAKEN = {
    "2d-weight": ((X2, (W,), WEIGHT, 1e-5), {}),
    "2d-no-weight-eps-none": ((X2, [W]), {}),
    "tiny-rows-eps-none": ((X2 * 1e-4, (W,), WEIGHT), {}),  # mean squares near float32's epsilon
    "2d-residual": ((X2, W, WEIGHT), {"residual": RES2}),
    "3d-residual-size": ((X3, X3.shape[-1:], WEIGHT, 1e-6), {"residual": RES3}),
    "fp32-weight-bf16": ((X2, (W,), WEIGHT.float(), 1e-5), {}),
}
RMS_DECLINED = {
    "two-dims-normalized": ((X3, (3, W)), {}),
    "square-two-dims-normalized": ((randn(2, 5, 5), (5, 5)), {}),
    "weight-wrong-width": ((X2, (W,), randn(W + 1)), {}),
    "normalized-shape-mismatch": ((X2, (W + 1,)), {}),
    "residual-dtype": ((X2, (W,), WEIGHT), {"residual": RES2.float()}),
    "residual-shape": ((X2, (W,), WEIGHT), {"residual": RES2[:6]}),
    "eps-int": ((X2, (W,), WEIGHT, 0), {}),
    "eps-string": ((X2, (W,), WEIGHT, "1e-5"), {}),
    "x-transposed": ((randn(W, 7).t(), (W,)), {}),
    "residual-strided": ((X2, (W,), WEIGHT), {"residual": randn(7, 2 * W)[:, ::2]}),
    "plan-forced": ((X2, (W,), WEIGHT, 1e-5), {"plan": "looped"}),
    "weight-is-a-list": ((X2, (W,), [1.0] * W), {}),
    "x-1d": ((randn(W), (W,)), {}),
    "x-int": ((torch.ones(7, W, dtype=torch.int32), (W,)), {}),
    "width-0": ((randn(7, 0), (0,)), {}),
}


@pytest.mark.parametrize("case", list(RMS_TAKEN))
def test_rms_norm_shortcut_gives_the_full_paths_bits(monkeypatch, case) -> None:
    args, kwargs = RMS_TAKEN[case]
    fast, shortcut, full = _run(monkeypatch, rmsnorm, rmsnorm.rms_norm, *args, **kwargs)
    assert shortcut, "the common call did not take the shortcut"
    _same(fast, full)


VALID_DECLINED = ("two-dims-normalized", "square-two-dims-normalized", "eps-int", "x-transposed", "residual-strided",
                  "plan-forced", "x-1d", "width-0")  # fmt: skip


@pytest.mark.parametrize("case", list(RMS_DECLINED))
def test_rms_norm_shortcut_declines_what_it_does_not_cover(monkeypatch, case) -> None:
    args, kwargs = RMS_DECLINED[case]
    fast, shortcut, full = _run(monkeypatch, rmsnorm, rmsnorm.rms_norm, *args, **kwargs)
    if case in VALID_DECLINED:
        # valid calls the shortcut leaves to the full path: the full path's own result
        assert not isinstance(full, type), full
    else:
        assert isinstance(full, type), f"the full path accepted {case}"
    assert not shortcut
    _same(fast, full)


def test_rms_norm_shortcut_leaves_autograd_to_the_full_path(monkeypatch) -> None:
    w = WEIGHT.float().requires_grad_()
    out, _shortcut, _full = _run(monkeypatch, rmsnorm, rmsnorm.rms_norm, X2, (W,), w, 1e-5)
    assert out.requires_grad and out.grad_fn is not None  # type: ignore[union-attr]
    with torch.no_grad():
        _out, shortcut_no_grad, _ = _run(monkeypatch, rmsnorm, rmsnorm.rms_norm, X2, (W,), w, 1e-5)
    assert shortcut_no_grad


SUM_TAKEN = {"2d": ((X2,), {}), "2d-keepdim": ((X2, -1, True), {}), "fp32": ((X2.float(),), {})}
SUM_DECLINED = {
    "dim-1": ((X2, 1), {}), "3d": ((X3,), {}), "dim-0": ((X2, 0), {}), "plan": ((X2,), {"plan": "split"}),
    "transposed": ((randn(W, 7).t(),), {}), "int": ((torch.ones(3, 4, dtype=torch.int32),), {}),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SUM_TAKEN))
def test_row_sum_shortcut_gives_the_full_paths_bits(monkeypatch, case) -> None:
    args, kwargs = SUM_TAKEN[case]
    fast, shortcut, full = _run(monkeypatch, rowsum, rowsum.row_sum, *args, **kwargs)
    assert shortcut
    _same(fast, full)


@pytest.mark.parametrize("case", list(SUM_DECLINED))
def test_row_sum_shortcut_declines_what_it_does_not_cover(monkeypatch, case) -> None:
    args, kwargs = SUM_DECLINED[case]
    fast, shortcut, full = _run(monkeypatch, rowsum, rowsum.row_sum, *args, **kwargs)
    assert not shortcut
    _same(fast, full)
    assert isinstance(full, type) == (case in ("dim-0", "int"))


ADD_TAKEN = {
    "bf16": ((X2, RES2), {}),
    "alpha-int": ((X2, RES2), {"alpha": 3}),
    "alpha-float": ((X2.float(), RES2.float()), {"alpha": -0.5}),
    "3d": ((X3, RES3), {}),
    "block": ((X2, RES2), {"block": 1024}),
}
ADD_DECLINED = {
    "broadcast": ((X2, WEIGHT), {}),
    "promote": ((X2, RES2.float()), {}),
    "strided": ((randn(W, 7).t(), RES2), {}),
    "block-unknown": ((X2, RES2), {"block": 1000}),
    "block-a-list": ((X2, RES2), {"block": [1024]}),
    "alpha-bool": ((X2, RES2), {"alpha": True}),
    "alpha-string": ((X2, RES2), {"alpha": "2"}),
    "int": ((torch.ones(3, dtype=torch.int32), torch.ones(3, dtype=torch.int32)), {}),
    "shape-mismatch": ((X2, RES2[:, :5]), {}),
}


@pytest.mark.parametrize("case", list(ADD_TAKEN))
def test_add_shortcut_gives_the_full_paths_bits(monkeypatch, case) -> None:
    from kernels import vector_add

    args, kwargs = ADD_TAKEN[case]
    fast, shortcut, full = _run(monkeypatch, vector_add, vector_add.add, *args, **kwargs)
    assert shortcut
    _same(fast, full)


@pytest.mark.parametrize("case", list(ADD_DECLINED))
def test_add_shortcut_declines_what_it_does_not_cover(monkeypatch, case) -> None:
    from kernels import vector_add

    args, kwargs = ADD_DECLINED[case]
    fast, shortcut, full = _run(monkeypatch, vector_add, vector_add.add, *args, **kwargs)
    assert not shortcut
    _same(fast, full)
    assert isinstance(full, type) == (
        case in ("alpha-bool", "alpha-string", "int", "shape-mismatch", "block-unknown", "block-a-list")
    )
