"""Bias + GELU (tanh) + dropout against float64 torch, through the Triton interpreter on CPU
tensors: values and gradients without dropout in every dtype and bias mode, the kept and
dropped elements and their gradients with dropout, the mask against an independent NumPy
Philox of the documented definition (64-bit counters included), binomial drop fractions,
seeds, non-finite inputs, errors, ``opcheck``, ``torch.compile`` and the sm_90 code the
kernels compile to (``TRITON_INTERPRET= python tests/test_bias_gelu_dropout.py`` compiles
them on this CPU and prints one JSON line per kernel; the codegen test runs it in a process
of its own, without the interpreter).

Inputs come from generators seeded by the test's parameters (crc32 of their repr, stable
across processes, unlike ``hash()``)."""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import subprocess
import sys
import zlib
from collections import Counter

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from tolerances import TOL, assert_close

from kernels.bias_gelu_dropout import BLOCK, QUARTER, SEED_BOUND, bias_gelu_dropout

# The module: kernels.bias_gelu_dropout may name the function once kernels/__init__.py exports it.
bgd = importlib.import_module("kernels.bias_gelu_dropout")

# ----------------------------------------------------------------------- helpers


def gen(*key: object) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


def randn(shape, dtype, key, scale: float = 2.0, device: str = "cpu") -> torch.Tensor:
    t = torch.randn(shape, generator=gen(key, shape, str(dtype)), dtype=torch.float64) * scale
    return t.to(device=device, dtype=dtype)


def reference(x: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """float64 gelu_tanh(x + b) from the same rounded inputs."""
    z = x.double() if b is None else x.double() + b.double()
    return F.gelu(z, approximate="tanh")


def reference_grads(x, b, dy, factor):  # type: ignore[no-untyped-def]
    """float64 (dx, db) of sum(dy * factor * gelu_tanh(x + b)); factor = keep / (1 - p)."""
    x64 = x.detach().double().requires_grad_()
    b64 = None if b is None else b.detach().double().requires_grad_()
    y = reference(x64, b64) * factor
    inputs = (x64,) if b64 is None else (x64, b64)
    grads = torch.autograd.grad(y, inputs, dy.double())
    return grads[0], (None if b64 is None else grads[1])


def _check_db(db: torch.Tensor, dx: torch.Tensor, db_ref: torch.Tensor, dtype: torch.dtype) -> None:
    """db is the column sum of the dx written (rounded to the dtype): against the float64 sum
    of that dx at the dtype's tolerance, and against the exact one at twice it (a 16-bit dx's
    rounding adds up over the rows)."""
    width = db.shape[0]
    assert_close(db, dx.double().reshape(-1, width).sum(0), dtype, "db (sum of dx)")
    tol = TOL[dtype]
    if db.numel():
        err = float((db.double() - db_ref).abs().max())
        assert err <= 2 * tol["atol"] * max(1.0, float(db_ref.abs().max())), f"db (exact): {err:.3g}"


# --- An independent model of the documented mask: NumPy Philox4x32-10 (uint64 products).
_PHILOX_A, _PHILOX_B = 0xD2511F53, 0xCD9E8D57
_KEY_A, _KEY_B = 0x9E3779B9, 0xBB67AE85
_M32 = np.uint64(0xFFFFFFFF)


def philox4x32(seed: int, counters: np.ndarray) -> list[np.ndarray]:
    """Triton's ``tl.randint4x(seed, counters)`` for int64 counters: four uint32 arrays."""
    counters = counters.astype(np.uint64)
    c0, c1 = counters & _M32, counters >> np.uint64(32)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    a, b = np.uint64(_PHILOX_A), np.uint64(_PHILOX_B)
    for _ in range(10):
        pb, pa = b * c2, a * c0  # exact: both factors < 2^32
        c0, c2, c1, c3 = (
            (pb >> np.uint64(32)) ^ c1 ^ np.uint64(k0),
            (pa >> np.uint64(32)) ^ c3 ^ np.uint64(k1),
            pb & _M32,
            pa & _M32,
        )
        k0, k1 = (k0 + _KEY_A) & 0xFFFFFFFF, (k1 + _KEY_B) & 0xFFFFFFFF
    return [c0, c1, c2, c3]


def threshold(p: float) -> int:
    return min(int(p * 2**32 + 0.5), 2**32 - 1)


def reference_keep(seed: int, offsets: np.ndarray, p: float) -> np.ndarray:
    """The keep bit of each 64-bit linear offset, as the module docstring defines it."""
    offsets = np.asarray(offsets, dtype=np.int64)
    within = offsets % BLOCK
    counters = offsets - within + within % QUARTER
    lanes = within // QUARTER
    words = philox4x32(seed, counters)
    r = np.choose(lanes, words)
    return r >= threshold(p)


def test_numpy_philox_matches_the_published_test_vector() -> None:
    """Philox4x32-10 of counter 0 and key 0 (Random123's kat_vectors)."""
    assert [int(w[0]) for w in philox4x32(0, np.zeros(1, np.int64))] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


# ----------------------------------------------------------------------- no dropout

# The bias modes: width < QUARTER (many rows per quarter block), width % QUARTER == 0 (aligned),
# neither (a quarter wraps once); tails only, whole blocks and tails, and 0 rows.
SHAPES = [(1, 1), (7, 129), (3, 5, 33), (0, 17), (40, 129), (3, 2048), (4, 1500), (2, 1024)]
ALL_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
# Every dtype at three shapes (one per bias mode), float32 and bfloat16 at the rest.
NO_DROPOUT_CASES = [
    (shape, dtype) for shape in SHAPES for dtype in ALL_DTYPES
    if dtype in (torch.float32, torch.bfloat16) or shape in ((7, 129), (4, 1500), (3, 2048))
]  # fmt: skip


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize(("shape", "dtype"), NO_DROPOUT_CASES, ids=str)
def test_no_dropout_matches_float64_with_gradients(shape, dtype, with_bias) -> None:
    x = randn(shape, dtype, "x").requires_grad_()
    b = randn((shape[-1],), dtype, "b").requires_grad_() if with_bias else None
    training = shape[0] % 2 == 1  # p = 0 in training, or p > 0 outside it: both no dropout
    y = bias_gelu_dropout(x, b, 0.0 if training else 0.4, training=training)
    assert y.shape == x.shape and y.dtype == dtype and y.is_contiguous()
    assert_close(y, reference(x.detach(), None if b is None else b.detach()), dtype, "out")
    dy = randn(shape, dtype, "dy", scale=1.0)
    inputs = (x,) if b is None else (x, b)
    grads = torch.autograd.grad(y, inputs, dy)
    dx_ref, db_ref = reference_grads(x, b, dy, 1.0)
    assert grads[0].dtype == dtype
    assert_close(grads[0], dx_ref, dtype, "dx")
    if b is not None:
        assert grads[1].shape == b.shape and grads[1].dtype == dtype
        _check_db(grads[1], grads[0], db_ref, dtype)


def test_bias_none_equals_zero_bias_and_0d_input() -> None:
    x = randn((6, 70), torch.float32, "nb")
    assert torch.equal(bias_gelu_dropout(x, None, 0.2, seed=9), bias_gelu_dropout(x, torch.zeros(70), 0.2, seed=9))
    s = torch.tensor(0.7, dtype=torch.float64)
    assert bias_gelu_dropout(s, p=0.0).shape == ()
    assert_close(bias_gelu_dropout(s, p=0.0), reference(s, None), torch.float64)


def test_strided_input_and_gradient_are_copied_first() -> None:
    x = randn((33, 12), torch.float32, "st").T.requires_grad_()  # [12, 33], not contiguous
    b = randn((33,), torch.float32, "stb").requires_grad_()
    y = bias_gelu_dropout(x, b, 0.25, seed=4)
    want = bias_gelu_dropout(x.detach().contiguous(), b.detach(), 0.25, seed=4)
    assert torch.equal(y, want)
    y.sum().backward()  # an expanded gradient
    keep = torch.from_numpy(reference_keep(4, np.arange(12 * 33), 0.25)).view(12, 33).double()
    dx_ref, db_ref = reference_grads(x, b, torch.ones(12, 33), keep / 0.75)
    assert_close(x.grad, dx_ref, torch.float32, "dx")
    assert_close(b.grad, db_ref, torch.float32, "db")


def test_zero_rows_give_a_zero_bias_gradient() -> None:
    x = torch.empty((0, 9), requires_grad=True)
    b = torch.ones(9, requires_grad=True)
    y = bias_gelu_dropout(x, b, 0.3)
    assert y.shape == (0, 9)
    (db,) = torch.autograd.grad(y.sum(), b)
    assert torch.equal(db, torch.zeros(9))


# ----------------------------------------------------------------------- dropout


DROPOUT_CASES = [
    (shape, dtype) for shape in ((40, 129), (4, 1500), (3, 2048), (3, 5, 33)) for dtype in ALL_DTYPES
    if dtype in (torch.float32, torch.bfloat16) or shape == (4, 1500)
]  # fmt: skip


@pytest.mark.parametrize("p", [0.1, 0.5])
@pytest.mark.parametrize(("shape", "dtype"), DROPOUT_CASES, ids=str)
def test_dropout_keeps_scaled_elements_and_gradients_share_the_mask(shape, dtype, p) -> None:
    x = randn(shape, dtype, ("dx", p)).requires_grad_()
    b = randn((shape[-1],), dtype, ("db", p)).requires_grad_()
    seed = 1000 + int(p * 10)
    y = bias_gelu_dropout(x, b, p, seed=seed)
    ref = reference(x.detach(), b.detach())
    keep = torch.from_numpy(reference_keep(seed, np.arange(y.numel()), p)).view(shape)
    assert (y[~keep] == 0).all(), "dropped elements are exactly zero"
    visible = (ref / (1 - p)).to(dtype) != 0  # where a kept element cannot round to zero
    assert torch.equal((y != 0)[visible], keep[visible]), "the mask inferred from out == 0 is the documented one"
    factor = keep.double() / (1 - p)
    assert_close(y, ref * factor, dtype, "kept elements")
    dy = randn(shape, dtype, ("ddy", p), scale=1.0)
    dx, db = torch.autograd.grad(y, (x, b), dy)
    dx_ref, db_ref = reference_grads(x, b, dy, factor)
    assert_close(dx, dx_ref, dtype, "dx")
    assert (dx[~keep] == 0).all()
    _check_db(db, dx, db_ref, dtype)


def _interval(p: float, n: int, z: float = 3.2905) -> tuple[float, float]:
    """Normal-approximation interval of a Binomial(n, p) fraction: 99.9% two-sided by default."""
    half = z * math.sqrt(p * (1 - p) / n)
    return p - half, p + half


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_fraction_is_binomial_overall_and_per_lane(p) -> None:
    """200k elements: the zeroed fraction in a 99.9% interval around p; so is each of the four
    Philox lanes' (quarter blocks), each within a Bonferroni-corrected interval; and keep
    bits one quarter apart (the same counter, two lanes) agree as independent bits do."""
    rows, width = 100, 2000
    y = bias_gelu_dropout(torch.ones(rows, width), None, p, seed=20261201)
    dropped = (y == 0).flatten()
    n = dropped.numel()
    lo, hi = _interval(p, n)
    assert lo <= float(dropped.double().mean()) <= hi
    within = torch.arange(n) % BLOCK
    for lane in range(4):
        sel = dropped[(within // QUARTER) == lane]
        lo, hi = _interval(p, sel.numel(), z=3.4808)  # 99.9% over four intervals
        assert lo <= float(sel.double().mean()) <= hi, lane
    full = n // BLOCK * BLOCK
    blocks = dropped[:full].view(-1, 4, QUARTER)
    agree = (blocks[:, 0] == blocks[:, 1]).double()
    q = p * p + (1 - p) * (1 - p)
    lo, hi = _interval(q, agree.numel())
    assert lo <= float(agree.mean()) <= hi
    kept = y.flatten()[~dropped]
    assert (kept == kept[0]).all() and abs(float(kept[0]) - float(reference(torch.ones(1), None)) / (1 - p)) < 1e-6


def test_masks_of_distinct_elements_differ() -> None:
    p = 0.5
    y = bias_gelu_dropout(torch.ones(8, 4096), None, p, seed=77) == 0
    assert not torch.equal(y[0], y[1])  # two rows
    flat = y.flatten()
    for a, b in ((0, QUARTER), (0, 2 * QUARTER), (0, BLOCK), (QUARTER, BLOCK + QUARTER)):
        assert not torch.equal(flat[a : a + QUARTER], flat[b : b + QUARTER]), (a, b)


# ----------------------------------------------------------------------- the random bits


@triton.jit
def _randoms_probe(out_ptr, seed, start, QUARTER: tl.constexpr, V: tl.constexpr):
    r0, r1, r2, r3 = bgd._randoms(seed, start, QUARTER, V, True)
    i = tl.arange(0, QUARTER)
    tl.store(out_ptr + i, r0.to(tl.int64, bitcast=False))
    tl.store(out_ptr + QUARTER + i, r1.to(tl.int64))
    tl.store(out_ptr + 2 * QUARTER + i, r2.to(tl.int64))
    tl.store(out_ptr + 3 * QUARTER + i, r3.to(tl.int64))


@pytest.mark.parametrize("v", [8, 4, 2])
@pytest.mark.parametrize("start", [0, 4096 * 7, 2**31 - 4096, 2**32, 2**32 + 2**31 + 4096 * 3, 2**62])
def test_random_bits_are_philox_of_the_64_bit_counter(start, v) -> None:
    """The kernels' random bits for a block at any 64-bit start (past 2^31 and 2^32 included):
    lane k of Philox(seed, start + i), whatever the vector width of the dtype."""
    seed = 2**40 + 12345  # both key words nonzero
    out = torch.empty(4 * QUARTER, dtype=torch.int64)
    _randoms_probe[(1,)](out, seed, start, QUARTER=QUARTER, V=v)
    words = philox4x32(seed, start + np.arange(QUARTER, dtype=np.int64))
    for k in range(4):
        assert np.array_equal(out[k * QUARTER : (k + 1) * QUARTER].numpy().astype(np.uint64), words[k]), k
    if start >= 2**32:  # the counter's high word enters: a 32-bit counter would repeat start - 2^32's bits
        low = philox4x32(seed, (start - 2**32) + np.arange(QUARTER, dtype=np.int64))
        assert not np.array_equal(low[0], words[0])


# ----------------------------------------------------------------------- seeds


def test_same_seed_same_bits_other_seed_other_mask() -> None:
    x = randn((9, 300), torch.bfloat16, "seed").requires_grad_()
    b = randn((300,), torch.bfloat16, "seedb").requires_grad_()
    dy = randn((9, 300), torch.bfloat16, "seeddy")
    runs = []
    for seed in (5, 5, 6):
        y = bias_gelu_dropout(x, b, 0.3, seed=seed)
        runs.append((y, *torch.autograd.grad(y, (x, b), dy)))
    for a, c in zip(runs[0], runs[1], strict=True):
        assert torch.equal(a, c)
    assert not torch.equal(runs[0][0] == 0, runs[2][0] == 0)
    big = bias_gelu_dropout(x.detach(), b.detach(), 0.3, seed=2**63 - 1)  # the largest seed
    assert not torch.equal(big == 0, runs[0][0] == 0)


def test_seed_none_draws_from_torch_default_generator() -> None:
    x = randn((5, 64), torch.float32, "gen")
    torch.manual_seed(123)
    a1, a2 = bias_gelu_dropout(x, None, 0.5), bias_gelu_dropout(x, None, 0.5)
    torch.manual_seed(123)
    b1, b2 = bias_gelu_dropout(x, None, 0.5), bias_gelu_dropout(x, None, 0.5)
    assert torch.equal(a1, b1) and torch.equal(a2, b2)
    assert not torch.equal(a1 == 0, a2 == 0)
    torch.manual_seed(123)
    s = int(torch.randint(0, SEED_BOUND, (), dtype=torch.int64))
    assert torch.equal(a1, bias_gelu_dropout(x, None, 0.5, seed=s))  # the draw is exactly this
    torch.manual_seed(123)
    assert bgd.draw_seed() == s
    state = torch.get_rng_state()
    bias_gelu_dropout(x, None, 0.0)
    bias_gelu_dropout(x, None, 0.5, training=False)
    bias_gelu_dropout(x, None, 1.0)
    bias_gelu_dropout(x, None, 0.5, seed=3)
    bias_gelu_dropout(x[:0], None, 0.5)
    assert torch.equal(torch.get_rng_state(), state), "nothing drawn without dropout or elements (as torch)"


# ----------------------------------------------------------------------- edge values


def test_p_one_gives_zeros_and_training_false_is_plain_gelu() -> None:
    x = randn((4, 50), torch.float32, "p1").requires_grad_()
    b = randn((50,), torch.float32, "p1b").requires_grad_()
    y = bias_gelu_dropout(x, b, 1.0)
    assert torch.equal(y, torch.zeros(4, 50))
    dx, db = torch.autograd.grad(y, (x, b), torch.ones(4, 50))
    assert torch.equal(dx, torch.zeros(4, 50)) and torch.equal(db, torch.zeros(50))
    assert torch.equal(bias_gelu_dropout(x, b, 0.7, training=False), bias_gelu_dropout(x, b, 0.0))


SPECIALS = [float("inf"), float("-inf"), float("nan"), 1e4, -1e4, 30.0, -30.0, 0.0, -0.0, 5.5, -5.5, 1e-30]


def check_specials(dtype: torch.dtype, device: str) -> None:
    """Non-finite and extreme inputs against torch's float64 (the GPU suite runs it compiled)."""
    x = torch.tensor(SPECIALS, dtype=torch.float64).to(device=device, dtype=dtype).requires_grad_()
    y = bias_gelu_dropout(x, None, 0.0)
    want = F.gelu(x.detach().double(), approximate="tanh")
    assert want[1].isnan() and want[0] == float("inf")  # torch: gelu(-inf) = nan, gelu(inf) = inf
    # Element by element against x sigmoid(2u), the same function without torch's cancellation in
    # 1 + tanh(u) for negative x (torch's float64 is 6e-10 off at -5.5); torch's nan and inf.
    x64 = x.detach().double()
    u = 0.7978845608028654 * (x64 + 0.044715 * x64**3)
    exact = torch.where(torch.isfinite(want), x64 / (1 + torch.exp(-2 * u)), want)
    torch.testing.assert_close(want, exact, equal_nan=True, rtol=1e-8, atol=0)
    tiny = torch.finfo(dtype).tiny  # below the smallest normal number only rounding counts (fp16: gelu(-5.5) = 0)
    torch.testing.assert_close(y.double(), exact, equal_nan=True, rtol=TOL[dtype]["rel"], atol=tiny)
    assert torch.signbit(y[[4, 6, 8]]).all()  # -0.0, as torch
    (dx,) = torch.autograd.grad(y, x, torch.ones_like(y))
    x64 = x.detach().double().requires_grad_()
    (dx_want,) = torch.autograd.grad(F.gelu(x64, approximate="tanh"), x64, torch.ones_like(x64))
    torch.testing.assert_close(dx.double(), dx_want, equal_nan=True, rtol=TOL[dtype]["rel"], atol=TOL[dtype]["atol"])
    # with dropout: a dropped nan or inf stays nan (dropout multiplies by 0, as torch does)
    xs = x.detach().repeat(200)
    yd = bias_gelu_dropout(xs, None, 0.5, seed=8)
    keep = torch.from_numpy(reference_keep(8, np.arange(xs.numel()), 0.5)).to(device)
    g = exact.repeat(200)
    torch.testing.assert_close(yd.double(), g * keep.double() * 2.0, equal_nan=True, rtol=TOL[dtype]["rel"], atol=tiny)
    assert yd[~keep & ~torch.isfinite(xs)].isnan().all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_non_finite_and_extreme_inputs_like_torch_float64(dtype) -> None:
    check_specials(dtype, "cpu")


# ----------------------------------------------------------------------- errors and ops


_bgd = bias_gelu_dropout
BAD_CALLS = [
    pytest.param(lambda x: _bgd(x.tolist()), TypeError, ["input", "torch.Tensor"], id="input-list"),
    pytest.param(lambda x: _bgd(x.int()), TypeError, ["input", "int32"], id="input-int"),
    pytest.param(lambda x: _bgd(x, x[0].tolist()), TypeError, ["bias", "torch.Tensor"], id="bias-list"),
    pytest.param(lambda x: _bgd(x, torch.ones(7)), ValueError, ["bias", "[7]", "[8]"], id="bias-width"),
    pytest.param(lambda x: _bgd(x, torch.ones(1, 8)), ValueError, ["bias", "[1, 8]"], id="bias-2d"),
    pytest.param(lambda x: _bgd(x, torch.ones(8).double()), TypeError, ["bias", "float64", "float32"], id="bias-dtype"),
    pytest.param(lambda x: _bgd(x, torch.ones(8).to("meta")), ValueError, ["bias", "meta", "cpu"], id="bias-device"),
    pytest.param(lambda x: _bgd(x, None, 1.5), ValueError, ["p", "[0, 1]", "1.5"], id="p-big"),
    pytest.param(lambda x: _bgd(x, None, -0.1), ValueError, ["p", "-0.1"], id="p-negative"),
    pytest.param(lambda x: _bgd(x, None, float("nan")), ValueError, ["p", "nan"], id="p-nan"),
    pytest.param(lambda x: _bgd(x, None, "0.1"), TypeError, ["p", "real number"], id="p-str"),
    pytest.param(lambda x: _bgd(x, None, True), TypeError, ["p"], id="p-bool"),
    pytest.param(lambda x: _bgd(x, None, 0.1, training=1), TypeError, ["training", "bool"], id="training"),
    pytest.param(lambda x: _bgd(x, None, 0.1, seed=1.0), TypeError, ["seed", "int", "float"], id="seed-float"),
    pytest.param(lambda x: _bgd(x, None, 0.1, seed=True), TypeError, ["seed", "bool"], id="seed-bool"),
    pytest.param(lambda x: _bgd(x, None, 0.1, seed=-1), ValueError, ["seed", "-1"], id="seed-negative"),
    pytest.param(lambda x: _bgd(x, None, 0.1, seed=2**63), ValueError, ["seed", "2**63"], id="seed-big"),
    pytest.param(lambda x: _bgd(x[0, 0], torch.ones(1)), ValueError, ["input", "0-d"], id="bias-0d"),
]


@pytest.mark.parametrize(("call", "error", "words"), BAD_CALLS)
def test_bad_input_names_the_argument(call, error, words) -> None:
    with pytest.raises(error) as info:
        call(torch.ones(4, 8))
    assert str(info.value).startswith("bias_gelu_dropout: ")
    for w in words:
        assert w in str(info.value), f"{w!r} not in {info.value}"


def test_cpu_tensors_need_the_interpreter(monkeypatch) -> None:
    monkeypatch.setattr("kernels._checks.INTERPRETER", False)
    with pytest.raises(ValueError, match="bias_gelu_dropout: input is on device 'cpu'"):
        bias_gelu_dropout(torch.ones(2, 3))


def test_registered_ops_pass_opcheck() -> None:
    x = randn((3, 17), torch.float32, "opc").requires_grad_()
    b = randn((17,), torch.float32, "opcb").requires_grad_()
    dy = randn((3, 17), torch.float32, "opcdy")
    for p in (0.0, 0.3, 1.0):
        torch.library.opcheck(bgd._bias_gelu_dropout_op, (x, b, p, 41))
        torch.library.opcheck(bgd._bias_gelu_dropout_op, (x, None, p, 41))
    torch.library.opcheck(bgd._bias_gelu_dropout_backward_op, (dy, x.detach(), b.detach(), 0.3, 41, True))
    torch.library.opcheck(bgd._bias_gelu_dropout_backward_op, (dy, x.detach(), None, 0.0, 41, False))
    meta = bias_gelu_dropout(torch.empty(4, 10, device="meta"), torch.empty(10, device="meta"), 0.2)
    assert meta.shape == (4, 10) and meta.device.type == "meta"


def test_torch_compile_fullgraph_matches_eager_bitwise() -> None:
    x = randn((6, 40), torch.float32, "cmp").requires_grad_()
    b = randn((40,), torch.float32, "cmpb").requires_grad_()

    def fixed(x, b):  # type: ignore[no-untyped-def]
        return bias_gelu_dropout(x * 1.5, b, 0.25, seed=2024) * 2.0

    def drawn(x, b):  # type: ignore[no-untyped-def]
        return bias_gelu_dropout(x, b, 0.25)

    dy = randn((6, 40), torch.float32, "cmpdy")
    for fn in (fixed, drawn):
        compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
        results = []
        for f in (fn, compiled):
            torch.manual_seed(99)  # seed=None: compiled and eager draw the same seed
            y = f(x, b)
            results.append((y, *torch.autograd.grad(y, (x, b), dy)))
        for a, c in zip(results[0], results[1], strict=True):
            assert torch.equal(a, c), fn.__name__
    compiled = torch.compile(drawn, backend="aot_eager", fullgraph=True)
    assert not torch.equal(compiled(x, b) == 0, compiled(x, b) == 0), "the seed is drawn per call, not traced"


# ----------------------------------------------------------------------- compiled code (sm_90)


def _probe() -> None:
    """Compile the kernels for sm_90 on this machine and print what they do with memory (run
    without ``TRITON_INTERPRET``: the kernels module must be imported compiling)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    m = bgd
    sizes = {"bf16": 2, "fp32": 4}
    for dt, size in sizes.items():
        for name, fn, ptrs in (("fwd", m._bgd_forward_kernel, ("x_ptr", "b_ptr", "y_ptr")),
                               ("bwd", m._bgd_backward_kernel, ("dy_ptr", "x_ptr", "b_ptr", "dx_ptr"))):  # fmt: skip
            consts = {"QUARTER": m.QUARTER, "V": 16 // size, "BIAS": m.BIAS_ALIGNED, "DROPOUT": True}
            ints = {"n": "i64", "width": "i64", "seed": "i64", "threshold": "i64", "scale32": "fp32", "scale64": "fp64"}
            signature = {**{p: f"*{dt}" for p in ptrs}, **ints, **{k: "constexpr" for k in consts}}
            attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(ptrs))}
            kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
                                    target=GPUTarget("cuda", 90, 32), options={"num_warps": m.NUM_WARPS})  # fmt: skip
            ptx = kernel.asm["ptx"]
            ops = Counter(re.findall(r"\b((?:ld|st)\.global[\w.:]*)", ptx))
            print(json.dumps({
                "kernel": name, "dtype": dt, "shared_bytes": kernel.metadata.shared,
                "vector_loads": sum(n for op, n in ops.items() if op.startswith("ld.") and ".v4." in op),
                "vector_stores": sum(n for op, n in ops.items() if op.startswith("st.") and ".v4." in op),
                "bar_sync": ptx.count("bar.sync"), "mul_hi": ptx.count("mul.hi.u32"),
            }))  # fmt: skip


def test_compiled_kernels_use_16_byte_vectors_and_no_shared_memory() -> None:
    """sm_90 PTX (compiled on this CPU): the unmasked blocks load and store 16-byte vectors
    (input, bias and dy), the keep bits reach the data without a shared-memory shuffle, and
    each thread runs one Philox per 4 elements (8 counters x 10 rounds x 2 mul.hi)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, __file__], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(reports) == 4
    for r in reports:
        per_quarter = 8 * {"bf16": 2, "fp32": 4}[r["dtype"]] // 16  # 16-byte vectors per thread and quarter
        loads = (2 if r["kernel"] == "fwd" else 3) * 4 * per_quarter  # unmasked: x and bias (and dy), 4 quarters
        assert r["vector_loads"] >= loads and r["vector_stores"] >= 4 * per_quarter, r
        assert r["shared_bytes"] == 0 and r["bar_sync"] == 0, r
        assert r["mul_hi"] <= 8 * 10 * 2, r


if __name__ == "__main__":
    assert not os.environ.get("TRITON_INTERPRET"), "the probe compiles: run it without TRITON_INTERPRET"
    _probe()
