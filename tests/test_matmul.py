"""GEMM against float64 references in every variant and epilogue, through the Triton
interpreter on CPU tensors (the GPU file repeats the checks at real sizes).

Inputs come from generators seeded by the test's own parameters; references are float64
products of the same rounded inputs; tolerances per dtype come from ``tests/tolerances.py``.
The interpreter runs ``INTERPRETER_CONFIG`` (32x32x32 tiles) unless a test forces a tile, so
the small odd shapes here still span several tiles, several K steps and a ragged K tail."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import os
import subprocess
import sys
import zlib

import pytest
import torch
import torch.nn.functional as F
from tolerances import TOL, assert_close

import kernels
from kernels._launch import FastKernel
from kernels.matmul import (
    EPILOGUES,
    INTERPRETER_CONFIG,
    VARIANTS,
    TileConfig,
    _matmul_op,
    compiled_kernels,
    default_variant,
    dispatch,
    matmul,
    split_count,
)

DTYPES = [torch.float16, torch.bfloat16, torch.float32]
SHAPES = [(1, 1, 1), (17, 33, 40), (127, 255, 65)]  # (M, N, K)
# fp32 under TF32: products of 10-bit mantissas, accumulated in fp32 (the interpreter computes
# them exactly; the GPU file measures the real error).
mm_module = importlib.import_module("kernels.matmul")  # the package's attribute of that name is the function
TF32_TOL = {"rel": 2e-3, "atol": 2e-3}


def gen(*key: object) -> torch.Generator:
    """A generator seeded from the test's parameters: stable across processes (unlike hash())."""
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


def randn(shape, dtype, key, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(shape, generator=gen(key, shape, str(dtype)), dtype=torch.float64) * scale).to(dtype)


def prec(dtype: torch.dtype) -> str | None:
    return "ieee" if dtype == torch.float32 else None


def reference(a, b, epilogue=None, bias=None, residual=None) -> torch.Tensor:
    z = a.double() @ b.double()
    if epilogue in ("bias", "bias_gelu"):
        z = z + bias.double()
    if epilogue == "bias_gelu":
        z = F.gelu(z, approximate="tanh")
    if epilogue == "residual":
        z = z + residual.double()
    return z


def extras(epilogue, m, n, dtype, key) -> dict:
    if epilogue in ("bias", "bias_gelu"):
        return {"bias": randn((n,), dtype, (key, "bias"))}
    if epilogue == "residual":
        return {"residual": randn((m, n), dtype, (key, "res"))}
    return {}


def persistent_const(consts: tuple, name: str):
    """The persistent kernel's constexpr ``name`` among a launch's ``consts``."""
    return consts[mm_module._PERSISTENT.const_names.index(name)]


class LaunchSpy:
    """Records the tensors each kernel launch received (FastKernel launches and the autotuned
    kernel), to check that operands are read in place and which kernels ran."""

    def __init__(self, monkeypatch) -> None:
        self.launches: list[tuple[str, list[torch.Tensor], tuple]] = []
        original = FastKernel.launch_uncached
        spy = self

        def launch_uncached(kernel, grid, args, consts, *rest, **kw):
            spy.launches.append((kernel.fn.__name__, [t for t in args if isinstance(t, torch.Tensor)], consts))
            return original(kernel, grid, args, consts, *rest, **kw)

        monkeypatch.setattr(FastKernel, "launch_uncached", launch_uncached)
        tuned = mm_module._mm_tuned_kernel
        tuned_run = tuned.run

        def run(*args, **kw):
            spy.launches.append(("_mm_tuned_body", [t for t in args if isinstance(t, torch.Tensor)], ()))
            return tuned_run(*args, **kw)

        monkeypatch.setattr(tuned, "run", run)

    def pointers(self) -> set[int]:
        """What the GEMM kernels read and wrote (tma_copy's copy kernel left out)."""
        return {t.data_ptr() for name, ts, _ in self.launches if name != "_pad_copy_kernel" for t in ts}

    def names(self) -> list[str]:
        return [n for n, _, _ in self.launches]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_variant_matches_float64(dtype, shape, variant) -> None:
    m, n, k = shape
    a = randn((m, k), dtype, "a")
    b = randn((k, n), dtype, "b")
    c = matmul(a, b, variant=variant, precision=prec(dtype))
    assert c.shape == (m, n) and c.dtype == dtype and c.is_contiguous()
    assert_close(c, reference(a, b), dtype, f"{variant} {shape}")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("epilogue", [e for e in EPILOGUES if e])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_every_epilogue_in_every_variant(dtype, epilogue, variant) -> None:
    m, n, k = 37, 70, 45
    a = randn((m, k), dtype, "ea", scale=2.0)  # pre-activations of a few units: gelu's curved part and tails
    b = randn((k, n), dtype, "eb", scale=0.5)
    kw = extras(epilogue, m, n, dtype, "epi")
    c = matmul(a, b, variant=variant, epilogue=epilogue, precision=prec(dtype), **kw)
    assert_close(c, reference(a, b, epilogue, **kw), dtype, f"{epilogue} {variant}")


def tma_readable(t: torch.Tensor) -> bool:
    """What TMA can read, written out here apart from kernels.matmul: one unit stride (or a
    dimension of size 1), the other stride a multiple of 16 bytes, a 16-byte aligned base."""
    (n0, n1), (s0, s1) = t.shape, t.stride()
    if s1 == 1 or n1 == 1:
        other = s0
    elif s0 == 1 or n0 == 1:
        other = s1
    else:
        return False
    return (other * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("which", ["a.T", "b.T", "both", "general", "expanded"])
@pytest.mark.parametrize("shape", [(45, 70, 50), (48, 72, 56)], ids=["odd", "aligned"])
def test_transposed_and_strided_operands_are_read_in_place(shape, which, variant, monkeypatch) -> None:
    """a.T / b.T are the same memory with swapped strides: the kernel must get the very same
    pointers (no copy) and still compute the product.  'general': neither stride is 1;
    'expanded': a stride-0 operand (what autograd hands over for out.sum()).  The one copy:
    the TMA kernels (persistent, warp_specialized) read an operand TMA cannot read from a new
    buffer whose rows it can (the odd shape's every operand; the aligned shape's general one)."""
    m, n, k = shape
    dtype = torch.bfloat16
    if which in ("a.T", "both"):
        a = randn((k, m), dtype, "ta").T
    elif which == "general":
        a = randn((2 * m, 3 * k), dtype, "ga")[::2, ::3]
    elif which == "expanded":
        a = randn((1, k), dtype, "xa").expand(m, k)
    else:
        a = randn((m, k), dtype, "ta2")
    b = randn((n, k), dtype, "tb").T if which in ("b.T", "both") else randn((k, n), dtype, "tb2")
    spy = LaunchSpy(monkeypatch)
    c = matmul(a, b, variant=variant)
    for name, t in (("a", a), ("b", b)):
        if variant in ("persistent", "warp_specialized") and not tma_readable(t):
            assert t.data_ptr() not in spy.pointers(), f"{name}: TMA was handed memory it cannot read"
            launched = spy.launches[-1][1][0 if name == "a" else 1]
            assert tma_readable(launched) and launched.shape == t.shape
        else:
            assert t.data_ptr() in spy.pointers(), f"{name} was copied before the launch"
    assert_close(c, reference(a, b), dtype, f"{which} {variant}")


def poisoned(rows: int, cols: int, dtype: torch.dtype, key) -> torch.Tensor:
    """A [rows, cols] view inside a NaN-filled buffer: a guard row above and below, 8 guard
    columns on each side (row stride cols + 16: 16-byte aligned rows, so TMA still applies).
    A kernel that reads one element outside the view reads NaN and its result shows it."""
    buf = torch.full((rows + 2, cols + 16), float("nan"), dtype=dtype)
    view = buf[1 : rows + 1, 8 : 8 + cols]
    view.copy_(randn((rows, cols), dtype, key))
    return view


@pytest.mark.parametrize("epilogue", [None, "bias_gelu", "residual"])
def test_autotuned_choice_is_launched_directly_after_the_first_call(epilogue, monkeypatch) -> None:
    """The autotuner runs once per key (it chooses, and its own launch costs tens of µs of host
    time); every later call of that key launches its choice through FastKernel, with the
    chosen tile as constexprs, and computes the same product."""
    monkeypatch.setattr(mm_module, "_TUNED_CHOICE", {})
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    m, n, k, dtype = 37, 48, 80, torch.bfloat16
    a, b = randn((m, k), dtype, "ac1"), randn((k, n), dtype, "ac2")
    bias, residual = randn((n,), dtype, "ac3"), randn((m, n), dtype, "ac4")
    kw = {"bias": bias} if epilogue == "bias_gelu" else {"residual": residual} if epilogue == "residual" else {}
    spy = LaunchSpy(monkeypatch)
    outs = [matmul(a, b, variant="autotuned", epilogue=epilogue, **kw) for _ in range(3)]
    assert spy.names() == ["_mm_tuned_body"] * 3
    assert spy.launches[0][2] == (), "the first call goes through the autotuner"
    c = INTERPRETER_CONFIG
    for _, _, consts in spy.launches[1:]:
        assert consts[-4:] == (c.block_m, c.block_n, c.block_k, c.group_m), "the autotuner's choice, as constexprs"
    ref = reference(a, b, epilogue, bias=bias, residual=residual)
    for out in outs:
        assert_close(out, ref, dtype, f"autotuned {epilogue}")
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[1], outs[2])
    assert len(mm_module._TUNED_CHOICE) == 1
    if epilogue == "residual":
        kw = {"residual": randn((300, n), dtype, "ac6")}
    matmul(randn((300, k), dtype, "ac5"), b, variant="autotuned", epilogue=epilogue, **kw)  # another M bucket
    assert len(mm_module._TUNED_CHOICE) == 2 and spy.launches[-1][2] == (), "a new key is tuned anew"


@pytest.mark.parametrize("variant", ["fixed", "persistent", "split_k"])
def test_prepared_launch_of_an_epilogue_takes_this_calls_tensors(variant, monkeypatch) -> None:
    """Epilogue calls are prepared too, keyed on each epilogue tensor's shape, strides, dtype and
    alignment but not its address: a second call with another bias (or residual) of the same
    layout reuses the entry and must read the new tensor; a residual of another layout, or a
    training call that stores the pre-activation, gets an entry of its own."""
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    m, n, k, dtype = 29, 40, 48, torch.bfloat16
    a, b = randn((m, k), dtype, "pe1"), randn((k, n), dtype, "pe2")
    for i in range(2):
        bias = randn((n,), dtype, f"pe-bias{i}")
        assert_close(matmul(a, b, variant=variant, epilogue="bias", bias=bias), reference(a, b, "bias", bias=bias),
                     dtype, f"bias call {i}")  # fmt: skip
    assert len(mm_module._PREPARED) == 1
    for i, res in enumerate([randn((m, n), dtype, "pe-r0"), randn((m, n), dtype, "pe-r1"),
                             randn((n, m), dtype, "pe-r2").T]):  # fmt: skip
        out = matmul(a, b, variant=variant, epilogue="residual", residual=res)
        assert_close(out, reference(a, b, "residual", residual=res), dtype, f"residual call {i}")
    assert len(mm_module._PREPARED) == 3  # the transposed residual: its own entry
    bias = randn((n,), dtype, "pe-bias2")
    out, pre = mm_module._forward(a, b, bias, None, variant, "bias_gelu", None, None, True)
    z = reference(a, b, "bias", bias=bias)
    assert_close(pre, z, dtype, "pre-activation") and assert_close(out, F.gelu(z, approximate="tanh"), dtype, "gelu")
    out2, _ = mm_module._forward(a, b, bias, None, variant, "bias_gelu", None, None, False)
    assert torch.equal(out, out2) and len(mm_module._PREPARED) == 5
    held = [x for entry in mm_module._PREPARED.values() for x in entry if isinstance(x, (torch.Tensor, tuple))]
    assert not any(isinstance(y, torch.Tensor) for x in held for y in (x if isinstance(x, tuple) else (x,)))


@pytest.mark.parametrize("variant", ["fixed", "persistent", "autotuned", "split_k"])
def test_prepared_launch_is_per_layout_alignment_and_shape(variant, monkeypatch) -> None:
    """The common call's prepared launch (kernels.matmul._PREPARED) is keyed on everything the
    launch depends on: the same shapes with a transposed operand, a 16-byte-misaligned view or
    another M each get their own entry, and a repeated call reuses its entry with the same bits."""
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    m, n, k, dtype = 29, 40, 48, torch.bfloat16
    a = randn((m, k), dtype, "pl1")
    b = randn((k, n), dtype, "pl2")
    buf = randn((m * k + 1,), dtype, "pl3")
    operands = [
        (a, b),
        (randn((k, m), dtype, "pl4").T, b),  # a transposed: same shape, swapped strides
        (buf[1:].view(m, k), b),  # 2 bytes past a 16-byte boundary: no TMA, no vector loads
        (randn((m + 3, k), dtype, "pl5"), b),  # another M
        (a, b),  # the first again: its entry
    ]
    outs = [matmul(x, y, variant=variant) for x, y in operands]
    for (x, y), out in zip(operands, outs, strict=True):
        assert_close(out, reference(x, y), dtype, f"prepared {variant}")
    assert torch.equal(outs[0], outs[-1])
    # the autotuner's choosing call (the first of each layout and alignment) prepares nothing
    assert len(mm_module._PREPARED) == (2 if variant == "autotuned" else 4)
    held = [x for entry in mm_module._PREPARED.values() for x in entry if isinstance(x, (torch.Tensor, tuple))]
    flat = [y for x in held for y in (x if isinstance(x, tuple) else (x,))]
    assert not any(isinstance(y, torch.Tensor) for y in flat), "a prepared launch keeps a call's tensor alive"


@pytest.mark.parametrize("variant", VARIANTS)
def test_no_read_outside_the_operands(variant) -> None:
    m, n, k = 37, 45, 40  # ragged tiles in M and N, a K tail of 8 behind one whole block
    a = poisoned(m, k, torch.bfloat16, "pa")
    b = poisoned(n, k, torch.bfloat16, "pb").T
    for x, y in ((a, b), (b.T, a.T)):
        assert_close(matmul(x, y, variant=variant), reference(x, y), torch.bfloat16, variant)


def test_persistent_reads_through_tma_and_falls_back_to_pointers(monkeypatch) -> None:
    """TMA descriptors for 16-byte aligned layouts (both transposes included) and for an
    aligned copy of a misaligned operand; pointer loads where TMA is not available (a GPU
    before Hopper); the same result every way."""
    spy = LaunchSpy(monkeypatch)
    a = randn((40, 64), torch.float16, "pa")
    b = randn((48, 64), torch.float16, "pb").T
    assert_close(matmul(a, b, variant="persistent"), reference(a, b), torch.float16, "tma")
    a_t = randn((64, 40), torch.float16, "pat").T
    assert_close(matmul(a_t, b.T.T, variant="persistent"), reference(a_t, b), torch.float16, "tma a.T")
    skew = randn((40, 65), torch.float16, "skew")[:, 1:]  # base 2 bytes off the 16-byte grid
    assert_close(matmul(skew, b, variant="persistent"), reference(skew, b), torch.float16, "tma copy")
    monkeypatch.setattr(mm_module, "_tma_available", lambda index: False)
    monkeypatch.setattr(mm_module, "_PREPARED", {})  # (a device's capability is fixed: not in the key)
    assert_close(matmul(skew, b, variant="persistent"), reference(skew, b), torch.float16, "pointers")
    use_tma = [
        persistent_const(consts, "USE_TMA") for name, _, consts in spy.launches if name == "_mm_persistent_kernel"
    ]
    assert use_tma == [True, True, True, False]


@pytest.mark.parametrize("layout", ["tma", "pointers"])
def test_persistent_programs_walk_many_tiles(layout, monkeypatch) -> None:
    """With 3 "SMs" each program of the persistent kernel walks 5 of the 15 tiles in grouped
    order (the interpreter's stand-in H200 has 132 SMs, more than the tests' tiles)."""
    monkeypatch.setattr(mm_module, "sm_count", lambda device: 3)
    a = randn((70, 64), torch.float16, "wa")
    if layout == "pointers":
        monkeypatch.setattr(mm_module, "_tma_available", lambda index: False)  # a GPU before Hopper
        monkeypatch.setattr(mm_module, "_PREPARED", {})
        a = randn((70, 65), torch.float16, "wa2")[:, 1:]  # misaligned base
    b = randn((64, 130), torch.float16, "wb")  # 3 x 5 tiles of 32 x 32
    bias = randn((130,), torch.float16, "wbias")
    c = matmul(a, b, variant="persistent", epilogue="bias", bias=bias)
    assert_close(c, reference(a, b, "bias", bias=bias), torch.float16, layout)


@pytest.mark.parametrize(("dtype", "cols", "pitch"), [(torch.bfloat16, 517, 128), (torch.bfloat16, 511, 16),
                                                      (torch.float32, 257, 128), (torch.float32, 255, 16)])  # fmt: skip
def test_tma_copy_pitch_of_long_rows(dtype, cols, pitch) -> None:
    """Rows of 1 KB or more are padded to a multiple of 128 bytes (a TMA box row that straddles
    128-byte lines cost the warp-specialized kernel 10-20%, notes/2026-12-04c-probe-tma-pitch-f98bdef.log),
    shorter ones to 16 (TMA's minimum)."""
    src = randn((9, cols + 1), dtype, ("pitch", cols))[:, 1:]  # a misaligned base: copied
    got = mm_module.tma_copy(src)
    ld = got.stride(0)
    assert torch.equal(got, src) and ld * got.element_size() % pitch == 0
    assert (ld - cols) * got.element_size() < pitch
    assert not torch.as_strided(got, (9, ld), (ld, 1))[:, cols:].any(), "the padding is not zero"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("which", ["odd rows", "w.T", "general", "expanded", "misaligned base", "aligned", "one row"])
def test_tma_copy_keeps_values_layout_and_pads_with_zeros(which, dtype) -> None:
    """tma_copy: the same values and shape, the operand's layout kept (a transposed operand
    stays transposed; no unit stride becomes row-major), rows TMA can read, the padding zero;
    the source read only inside its view (NaN around it would show)."""
    rows, cols = 37, 53
    buf = torch.full((3 * rows + 2, 3 * cols + 9), float("nan"), dtype=dtype)
    buf[1 : 3 * rows + 1, 1 : 3 * cols + 1] = randn((3 * rows, 3 * cols), dtype, ("tc", which))
    src = {
        "odd rows": buf[1 : rows + 1, 1 : cols + 1],
        "w.T": buf[1 : cols + 1, 1 : rows + 1].T,
        "general": buf[1 : 3 * rows + 1 : 3, 1 : 2 * cols + 1 : 2],
        "expanded": buf[1, 1 : cols + 1].expand(rows, cols),
        "misaligned base": buf[1 : rows + 1, 2 : cols + 2],
        "aligned": randn((rows, 64), dtype, "tca")[:, :48],
        "one row": buf[1:2, 1 : cols + 1],
    }[which]
    got = mm_module.tma_copy(src)
    assert got.shape == src.shape and got.dtype == dtype and torch.equal(got, src)
    assert tma_readable(got) and got.data_ptr() != src.data_ptr()
    transposed = which == "w.T"
    assert (got.stride(0) == 1) == transposed and (got.stride(1) == 1) != transposed
    rows_view = got.T if transposed else got  # the buffer's rows
    ld = rows_view.stride(0)
    whole = torch.as_strided(rows_view, (rows_view.shape[0], ld), (ld, 1))
    assert ld % (16 // got.element_size()) == 0 and ld - rows_view.shape[1] < 16 // got.element_size()
    assert not whole[:, rows_view.shape[1] :].any(), "the padding is not zero"


@pytest.mark.parametrize("variant", ["persistent", "warp_specialized"])
def test_tma_copies_are_made_on_every_call(variant, monkeypatch) -> None:
    """An operand TMA cannot read is copied afresh on every call, the prepared launch's calls
    too: each call with new values of the same layout reads its own values, from a buffer TMA
    can read, and the prepared entry keeps no tensor."""
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    spy = LaunchSpy(monkeypatch)
    m, n, k = 37, 53, 41  # every row stride odd: a, b (= w.T) and the output
    for i in range(3):
        a = randn((m, k), torch.bfloat16, ("ca", i))
        b = randn((n, k), torch.bfloat16, ("cb", i)).T
        c = matmul(a, b, variant=variant)
        assert_close(c, reference(a, b), torch.bfloat16, f"call {i}")
        launched = spy.launches[-1][1]
        for t, got in ((a, launched[0]), (b, launched[1])):
            assert got.data_ptr() != t.data_ptr() and tma_readable(got)
            assert torch.equal(got, t), f"call {i}: the launch read other values than the operand's"
    assert len(mm_module._PREPARED) == 1
    assert not any(isinstance(x, torch.Tensor) for entry in mm_module._PREPARED.values() for x in entry)


@pytest.mark.parametrize("variant", ["persistent", "warp_specialized", None])
@pytest.mark.parametrize("epilogue", [None, "bias_gelu", "residual"])
def test_training_step_with_operands_tma_cannot_read(epilogue, variant, monkeypatch) -> None:
    """The forward and both gradients at a shape where no row stride is a multiple of 16
    bytes (a vocabulary projection's odd N, an odd K): dZ, b.T and a.T reach the TMA kernels
    through copies; every result against float64, in place of the inputs nothing written."""
    m, n, k, dtype = 45, 67, 39, torch.bfloat16
    copies = []
    monkeypatch.setattr(mm_module, "tma_copy", lambda t, f=mm_module.tma_copy: copies.append(t.shape) or f(t))
    a = randn((m, k), dtype, "sa").requires_grad_()
    w = randn((n, k), dtype, "sw", scale=0.5).requires_grad_()  # a linear layer's weight: b = w.T
    kw = extras(epilogue, m, n, dtype, "sx")
    before = (a.detach().clone(), w.detach().clone())
    c = matmul(a, w.T, variant=variant, epilogue=epilogue, **kw)
    dc = randn((m, n), dtype, "sdc")
    da, dw = torch.autograd.grad(c, (a, w), dc)
    a64, w64 = a.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    ref = reference(a64, w64.T, epilogue, **kw)
    ref_da, ref_dw = torch.autograd.grad(ref, (a64, w64), dc.double())
    assert_close(c, ref, dtype, "forward")
    assert_close(da, ref_da, dtype, "dA")
    assert_close(dw, ref_dw, dtype, "dW")
    assert torch.equal(a.detach(), before[0]) and torch.equal(w.detach(), before[1])
    if variant is not None:  # a, w.T; dZ once for both backward products, w and a.T
        assert sorted(copies) == sorted([(m, k), (k, n), (m, n), (n, k), (k, m)]), copies


@pytest.mark.parametrize("first", ["aligned", "odd stride", "odd base"])
def test_the_backward_asks_for_one_copy_of_dz_per_layout(first, monkeypatch) -> None:
    """The backward's choice to copy dZ once for both products is remembered per signature
    (kernels.matmul._ONE_COPY): dZ's layout and base alignment are part of it, so a step
    whose dZ TMA can read, before or after one whose dZ it cannot, copies only the latter."""
    m, n, k, dtype = 24, 64, 40, torch.bfloat16  # 128-byte rows: a contiguous dZ is TMA-readable
    monkeypatch.setattr(mm_module, "_ONE_COPY", {})
    a = randn((m, k), dtype, "oa").requires_grad_()
    b = randn((k, n), dtype, "ob").requires_grad_()
    wide = randn((m * (n + 1) + 8,), dtype, "odc")
    dzs = {
        "aligned": wide[: m * n].view(m, n),
        "odd stride": wide[: m * (n + 1)].view(m, n + 1)[:, :n],  # 130-byte rows
        "odd base": wide[1 : 1 + m * n].view(m, n),  # rows of 128 bytes from a base 2 bytes off
    }
    order = [first, *[name for name in dzs if name != first]]
    a64, b64 = a.detach().double().requires_grad_(), b.detach().double().requires_grad_()
    for name in [*order, first]:
        copies: list[tuple[int, ...]] = []
        monkeypatch.setattr(mm_module, "tma_copy", lambda t, f=mm_module.tma_copy, c=copies: c.append(t.shape) or f(t))
        dz = dzs[name]
        da, db = torch.autograd.grad(matmul(a, b, variant="persistent"), (a, b), dz)
        ref_da, ref_db = torch.autograd.grad(a64 @ b64, (a64, b64), dz.double())
        assert_close(da, ref_da, dtype, f"dA, dZ {name}")
        assert_close(db, ref_db, dtype, f"dB, dZ {name}")
        want = 0 if name == "aligned" else 1  # one copy of dZ for both products, none where TMA reads it
        assert copies.count((m, n)) == want, (name, copies)
    assert len(mm_module._ONE_COPY) == 3


# Each pair of backward steps differs in one part of _ONE_COPY's key, and only the first runs
# both products in a TMA kernel (by the variant asked for, by a patched dispatch, or for want
# of rows), so only the first copies dZ, once; a cache that confused the two would copy the
# second's dZ (1 copy instead of 0) or the first's twice (2 instead of 1).
@pytest.mark.parametrize("part", ["m", "k", "variant", "precision", "dtype"])
@pytest.mark.parametrize("tma_first", [True, False])
def test_one_copy_of_dz_is_remembered_per_shape_k_variant_precision_and_dtype(part, tma_first, monkeypatch) -> None:
    n = 63  # 126-byte rows of bf16 (252 of fp32): no dZ here is TMA-readable as it lies
    monkeypatch.setattr(mm_module, "_ONE_COPY", {})
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    rules = {
        "k": lambda m, n, k, *r: "persistent" if 40 in (m, n, k) else "fixed",
        "precision": lambda m, n, k, device, dtype, epilogue, precision, tma, captured=False: (
            "persistent" if precision == "tf32" else "fixed"
        ),
        "dtype": lambda m, n, k, device, dtype, *r: "persistent" if dtype == torch.bfloat16 else "fixed",
    }
    if part in rules:
        monkeypatch.setattr(mm_module, "default_variant", rules[part])
    bf16, fp16, fp32 = torch.bfloat16, torch.float16, torch.float32
    calls = {  # (m, k, dtype, variant, precision): TMA first, not second
        "m": [(24, 40, bf16, "persistent", None), (0, 40, bf16, "persistent", None)],
        "k": [(24, 40, bf16, None, None), (24, 48, bf16, None, None)],
        "variant": [(24, 40, bf16, "persistent", None), (24, 40, bf16, "fixed", None)],
        "precision": [(24, 40, fp32, None, "tf32"), (24, 40, fp32, None, "ieee")],
        "dtype": [(24, 40, bf16, None, None), (24, 40, fp16, None, None)],
    }[part]
    for i in [0, 1, 0] if tma_first else [1, 0, 1]:
        m, k, dtype, variant, precision = calls[i]
        a = randn((m, k), dtype, "1a").requires_grad_()
        b = randn((k, n), dtype, "1b").requires_grad_()
        dz = randn((m, n), dtype, "1dz")
        copies = []
        monkeypatch.setattr(mm_module, "tma_copy", lambda t, f=mm_module.tma_copy, c=copies: c.append(t.shape) or f(t))
        torch.autograd.grad(matmul(a, b, variant=variant, precision=precision), (a, b), dz)
        assert copies.count((m, n)) == (1 if i == 0 else 0), (part, calls[i], copies)
    assert len(mm_module._ONE_COPY) == 2


def test_one_copy_cache_starts_again_at_4096_signatures(monkeypatch) -> None:
    monkeypatch.setattr(mm_module, "_ONE_COPY", {("filler", i): False for i in range(4095)})
    a = randn((24, 40), torch.bfloat16, "2a").requires_grad_()
    b = randn((40, 63), torch.bfloat16, "2b").requires_grad_()
    torch.autograd.grad(matmul(a, b, variant="persistent"), (a, b), randn((24, 63), torch.bfloat16, "2dz"))
    assert len(mm_module._ONE_COPY) == 0  # the 4096th signature cleared it


def _dead_wrapper(t: torch.Tensor) -> torch.Tensor:
    """``t`` as seen inside a torch.func.grad that has since returned (a dead functorch wrapper)."""
    leaked = []
    torch.func.grad(lambda x: leaked.append(x) or (x * x).sum())(t)
    assert torch._C._functorch.is_functorch_wrapped_tensor(leaked[0])
    return leaked[0]


@pytest.mark.parametrize("which", ["a", "b", "bias", "residual"])
def test_a_tensor_leaked_from_a_finished_transform_is_read(which) -> None:
    """A tensor leaked from a torch.func transform that has returned is still a functorch
    wrapper: Function.apply unwraps such tensors, and matmul's eager autograd path (which
    bypasses it) must unwrap every tensor it is given, or reading its data pointer fails."""
    a, b = randn((8, 16), torch.float32, "da"), randn((16, 12), torch.float32, "db")
    extra = {"bias": randn((12,), torch.float32, "dbias"), "residual": randn((8, 12), torch.float32, "dres")}
    epilogue = which if which in extra else None
    kw = {which: _dead_wrapper(extra[which].clone())} if epilogue else {}
    a_in = _dead_wrapper(a.clone()) if which == "a" else a.clone().requires_grad_()
    b_in = _dead_wrapper(b.clone()) if which == "b" else b.clone().requires_grad_()
    c = matmul(a_in, b_in, precision="ieee", epilogue=epilogue, **kw)
    assert not torch._C._functorch.is_functorch_wrapped_tensor(c)
    want = a.double() @ b.double() + (extra[which].double() if epilogue else 0)
    assert torch.allclose(c.double(), want, rtol=1e-5, atol=1e-5)
    c.sum().backward()
    live = b_in if which == "a" else a_in
    grad = a.sum(0)[:, None].expand(16, 12) if which == "a" else b.sum(1)[None, :].expand(8, 16)
    assert torch.allclose(live.grad, grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("variant", ["fixed", "persistent"])
def test_grouping_changes_the_order_not_the_result(variant) -> None:
    a = randn((70, 40), torch.float16, "ga")  # 5 x 4 tiles of 16 x 32: groups of 4 and 8 differ
    b = randn((40, 100), torch.float16, "gb")
    outs = [matmul(a, b, variant=variant, config=TileConfig(16, 32, 32, g, 1, 4)) for g in (1, 4, 8)]
    assert_close(outs[0], reference(a, b), torch.float16, f"GROUP_M 1 {variant}")
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_fp32_needs_a_precision_and_ieee_is_fp32_accurate() -> None:
    a = randn((33, 70), torch.float32, "pa")
    b = randn((70, 45), torch.float32, "pb")
    with pytest.raises(ValueError, match="precision='tf32'"):
        matmul(a, b)
    assert_close(matmul(a, b, precision="ieee"), reference(a, b), torch.float32, "ieee")
    tf32 = matmul(a, b, precision="tf32").double()
    ref = reference(a, b)
    assert torch.linalg.vector_norm(tf32 - ref) / torch.linalg.vector_norm(ref) <= TF32_TOL["rel"]


@pytest.mark.parametrize("layout", ["a b", "a bT", "aT bT", "aT b"])
@pytest.mark.parametrize("epilogue", [None, "bias_gelu"])
def test_tf32_persistent_reads_an_mn_major_operand_from_registers(layout, epilogue, monkeypatch) -> None:
    """TF32 through TMA: row-major a and b run the product transposed (REG_OPERAND 1: Cᵀ =
    Bᵀ·Aᵀ, the accumulator transposed back before the epilogue), a MN-major with b K-major reads
    a into registers (2), the other two layouts neither.  Several tiles a program, a K tail
    (zero-filled by TMA) and a non-square tile, so a transposed index shows."""
    monkeypatch.setattr(mm_module, "sm_count", lambda device: 2)
    spy = LaunchSpy(monkeypatch)
    m, n, k = 72, 52, 68  # 16-byte multiples in fp32 (TMA), 3 x 4 tiles of 32 x 16, K = 2 blocks + 4
    a = randn((m, k), torch.float32, "ra") if layout.startswith("a ") else randn((k, m), torch.float32, "rat").T
    b = randn((k, n), torch.float32, "rb") if layout.endswith(" b") else randn((n, k), torch.float32, "rbt").T
    bias = randn((n,), torch.float32, "rbias") if epilogue else None
    config = TileConfig(32, 16, 32, 2, 1, 4)  # BLOCK_M != BLOCK_N: a transposed index shows
    c = matmul(a, b, variant="persistent", precision="tf32", epilogue=epilogue, bias=bias, config=config)
    ref = reference(a, b, epilogue, bias=bias)
    # The interpreter's dot does not round to TF32 (numpy, fp32 products): the error left is
    # fp32 accumulation's, far inside TF32's, so a slip in the transposed path shows.
    assert torch.linalg.vector_norm(c.double() - ref) / torch.linalg.vector_norm(ref) <= 1e-5
    regs = [
        persistent_const(consts, "REG_OPERAND") for name, _, consts in spy.launches if name == "_mm_persistent_kernel"
    ]
    assert regs == [{"a b": 1, "aT bT": 2}.get(layout, 0)]


def test_large_magnitudes_stay_finite_and_accurate() -> None:
    a = randn((31, 80), torch.float32, "big", scale=1e3)
    b = randn((80, 47), torch.float32, "big2", scale=1e3)
    for variant in VARIANTS:
        c = matmul(a, b, variant=variant, precision="ieee")
        assert torch.isfinite(c).all(), variant
        assert_close(c, reference(a, b), torch.float32, variant)


def test_split_k_splits_and_sums_in_a_fixed_order() -> None:
    m, n, k = 5, 40, 200  # 2 x 1 tiles of 32, 7 K blocks: 7 splits of one block
    splits, per = split_count(m, n, k, INTERPRETER_CONFIG, 132)
    assert splits == 7 and per == 32
    a = randn((m, k), torch.float32, "sk", scale=3.0)
    b = randn((k, n), torch.float32, "sk2", scale=3.0)
    first = matmul(a, b, variant="split_k", precision="ieee")
    assert_close(first, reference(a, b), torch.float32, "split_k")
    for _ in range(3):
        assert torch.equal(matmul(a, b, variant="split_k", precision="ieee"), first), "split_k is not deterministic"


@pytest.mark.parametrize("epilogue", [None, "bias", "bias_gelu", "residual"])
def test_split_k_in_one_launch_leaves_its_counters_at_zero(epilogue) -> None:
    """One launch: each tile's last program to arrive sums the partials and resets the tile's
    counter.  A counter left set would make the next call's sum run early (a wrong product),
    so after every call every counter is zero, and the kept workspace, poisoned with NaN
    between calls, never leaks into a result (every partial is written before it is read)."""
    m, n, k = 37, 70, 333  # 2 x 3 tiles of 32, 11 K blocks: 11 splits
    a = randn((m, k), torch.bfloat16, "ol")
    b = randn((k, n), torch.bfloat16, "ol2", scale=0.1)
    bias = randn((n,), torch.bfloat16, "olb")
    residual = randn((m, n), torch.bfloat16, "olr")
    kw = {"bias": bias} if epilogue in ("bias", "bias_gelu") else {}
    kw |= {"residual": residual} if epilogue == "residual" else {}
    want = reference(a, b, epilogue, **kw)
    first = matmul(a, b, variant="split_k", epilogue=epilogue, **kw)
    assert_close(first, want, torch.bfloat16, f"split_k {epilogue}")
    for _ in range(2):
        assert not mm_module._COUNTERS[(-1, 0)].any(), "a tile counter was left set"
        mm_module._WORKSPACES[(-1, 0)].fill_(float("nan"))
        assert torch.equal(matmul(a, b, variant="split_k", epilogue=epilogue, **kw), first)
    assert not mm_module._COUNTERS[(-1, 0)].any()


def test_split_k_keeps_one_workspace_per_stream(monkeypatch) -> None:
    """The workspace is kept and grown per device and stream; one past
    ``SPLIT_K_KEPT_WORKSPACE`` elements is the call's own, and the kept one is left as it was.
    Products of different shapes through the kept buffer stay right."""
    mm_module._WORKSPACES.clear()
    small = (randn((5, 200), torch.float32, "ws1"), randn((200, 40), torch.float32, "ws2"))
    large = (randn((37, 333), torch.float32, "ws3"), randn((333, 70), torch.float32, "ws4"))
    c = matmul(*small, variant="split_k", precision="ieee")
    kept = mm_module._WORKSPACES[(-1, 0)]
    assert kept.numel() >= 7 * 5 * 40
    matmul(*small, variant="split_k", precision="ieee")
    assert mm_module._WORKSPACES[(-1, 0)] is kept  # not taken again
    d = matmul(*large, variant="split_k", precision="ieee")
    assert_close(d, reference(*large), torch.float32, "large through the kept workspace")
    assert torch.equal(matmul(*small, variant="split_k", precision="ieee"), c)
    grown = mm_module._WORKSPACES[(-1, 0)]
    monkeypatch.setattr(mm_module, "SPLIT_K_KEPT_WORKSPACE", 7 * 5 * 40)
    taken = []
    empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *s, **kw: taken.append(s) or empty(*s, **kw))
    e = matmul(*large, variant="split_k", precision="ieee")  # 11 x 37 x 70 elements: over the limit
    assert mm_module._WORKSPACES[(-1, 0)] is grown and taken, "over the limit: a workspace of its own"
    assert_close(e, reference(*large), torch.float32, "large, own workspace")


def test_split_k_keeps_workspaces_for_a_bounded_number_of_streams(monkeypatch) -> None:
    # a program that makes a new stream for every call must not keep a workspace for each
    mm_module._WORKSPACES.clear()
    streams = iter(range(100, 200))
    monkeypatch.setattr(mm_module, "current_stream", lambda index: next(streams))
    for _ in range(3 * mm_module.SPLIT_K_KEPT_STREAMS):
        mm_module._split_buffers(torch.device("cpu"), 0, (2, 3, 5), 1)
        assert 1 <= len(mm_module._WORKSPACES) <= mm_module.SPLIT_K_KEPT_STREAMS
    mm_module._WORKSPACES.clear()
    mm_module._COUNTERS.clear()


def test_split_k_buffers_under_a_capture_are_the_graphs(monkeypatch) -> None:
    """Under a CUDA-graph capture the workspace and counters are new tensors (the graph's
    pool; the counters zeroed by a node of the graph), and the kept ones are not touched."""
    monkeypatch.setattr(mm_module, "capturing", lambda: True)
    monkeypatch.setattr(mm_module, "current_stream", lambda index: 7)
    mm_module._WORKSPACES.clear()
    counters_before = dict(mm_module._COUNTERS)
    ws, counters = mm_module._split_buffers(torch.device("cpu"), 0, (3, 5, 7), 4)
    assert ws.shape == (3, 5, 7) and ws.dtype == torch.float32
    assert counters.shape == (4,) and counters.dtype == torch.int32 and not counters.any()
    assert not mm_module._WORKSPACES
    assert dict(mm_module._COUNTERS) == counters_before
    monkeypatch.setattr(mm_module, "capturing", lambda: False)
    ws2, counters2 = mm_module._split_buffers(torch.device("cpu"), 0, (3, 5, 7), 4)
    assert mm_module._WORKSPACES[(0, 7)].data_ptr() == ws2.data_ptr() and mm_module._COUNTERS[(0, 7)] is counters2
    mm_module._WORKSPACES.pop((0, 7))
    mm_module._COUNTERS.pop((0, 7))


def test_split_count_keeps_every_split_non_empty() -> None:
    cfg = TileConfig(16, 128, 128, 1, 4, 4)
    for m, n, k in [(1, 4096, 14336), (128, 4096, 14336), (16, 14336, 4096), (1, 128, 200), (64, 256, 128)]:
        splits, per = split_count(m, n, k, cfg, 132)
        assert 1 <= splits <= mm_module.MAX_SPLITS and per % cfg.block_k == 0
        assert (splits - 1) * per < k <= splits * per, (m, n, k, splits, per)
    assert split_count(1, 4096, 14336, cfg, 132)[0] > 1  # decode: 32 tiles alone would leave SMs idle


def test_split_k_fills_one_wave_with_its_tile(monkeypatch) -> None:
    # tiles x splits ≤ SMs: a second round of programs would start after the first had read its
    # share of the weight (three rounds at M = 32 under the earlier count, 1.4x slower)
    monkeypatch.setattr(mm_module, "INTERPRETER", False)
    tile = lambda m, dtype=torch.bfloat16: mm_module.default_config("split_k", dtype, m)
    assert tile(1) == TileConfig(16, 128, 64, 1, 6, 4) == mm_module.SPLIT_K_CONFIG
    assert [tile(m).block_m for m in (1, 16, 17, 32, 48, 64, 96, 128)] == [16, 16, 32, 32, 64, 64, 128, 128]
    assert tile(128, torch.float32) == TileConfig(64, 128, 64, 1, 4, 4)  # 4-byte operands: half the rows
    for (m, n, k), splits in {(1, 4096, 14336): 4, (32, 4096, 14336): 4, (128, 4096, 14336): 4,
                              (1, 2048, 8192): 8, (128, 6144, 16384): 2, (8, 8192, 28672): 2,
                              (48, 5120, 13824): 3, (1, 512, 8192): 16}.items():  # fmt: skip
        got, per = split_count(m, n, k, tile(m), 132)
        tiles = mm_module.cdiv(m, tile(m).block_m) * mm_module.cdiv(n, 128)
        assert got == splits and tiles * got <= 132 and (got - 1) * per < k <= got * per, (m, n, k, got)


@pytest.mark.parametrize("epilogue", EPILOGUES)
@pytest.mark.parametrize(("m", "n", "k"), [(0, 7, 5), (6, 0, 5), (6, 7, 0), (0, 0, 0)])
def test_empty_dimensions_give_torchs_result(m, n, k, epilogue) -> None:
    a = randn((m, k), torch.bfloat16, "ea")
    b = randn((k, n), torch.bfloat16, "eb")
    kw = extras(epilogue, m, n, torch.bfloat16, "empty")
    c = matmul(a, b, epilogue=epilogue, **kw)
    assert c.shape == (m, n) and c.dtype == torch.bfloat16
    if c.numel():
        assert_close(c, reference(a, b, epilogue, **kw), torch.bfloat16)


def test_zero_k_gradients_are_zeros() -> None:
    a = torch.zeros((4, 0), dtype=torch.float32, requires_grad=True)
    b = torch.zeros((0, 6), dtype=torch.float32, requires_grad=True)
    bias = randn((6,), torch.float32, "zk").requires_grad_()
    c = matmul(a, b, epilogue="bias", bias=bias, precision="ieee")
    assert torch.equal(c, bias.detach().expand(4, 6))
    c.sum().backward()
    assert a.grad.shape == (4, 0) and b.grad.shape == (0, 6)
    assert torch.equal(bias.grad, torch.full((6,), 4.0))


def _grad_reference(a, b, epilogue, kw, g):
    leaves = [a.detach().double().requires_grad_(), b.detach().double().requires_grad_()]
    extra = {name: t.detach().double().requires_grad_() for name, t in kw.items()}
    out = reference(*leaves, epilogue, **extra)
    return torch.autograd.grad(out, [*leaves, *extra.values()], g.double())


# Every epilogue in both dtypes through the default and the fixed variant; the other variants
# once each (the epilogue backward does not depend on the variant, the GEMMs do).
GRAD_CASES = [(d, e, v) for d in (torch.float32, torch.bfloat16) for e in EPILOGUES for v in (None, "fixed")] + [
    (torch.float32, "bias", v) for v in ("persistent", "split_k", "autotuned")
]


@pytest.mark.parametrize(("dtype", "epilogue", "variant"), GRAD_CASES, ids=str)
def test_gradients_match_float64(dtype, epilogue, variant) -> None:
    m, n, k = 23, 37, 41
    a = randn((m, k), dtype, "ga", scale=1.5).requires_grad_()
    b = randn((k, n), dtype, "gb").requires_grad_()
    kw = {name: t.requires_grad_() for name, t in extras(epilogue, m, n, dtype, "grad").items()}
    c = matmul(a, b, variant=variant, epilogue=epilogue, precision=prec(dtype), **kw)
    g = randn((m, n), dtype, "gg")
    have = torch.autograd.grad(c, [a, b, *kw.values()], g)
    want = _grad_reference(a, b, epilogue, kw, g)
    names = ["da", "db", *[f"d{k}" for k in kw]]
    for name, h, w in zip(names, have, want, strict=True):
        assert h.dtype == dtype and h.shape == w.shape
        if dtype == torch.bfloat16 and epilogue == "bias_gelu":
            # dz = dy * gelu'(z) is rounded to bf16 (as torch's bf16 autograd rounds it) before
            # the GEMMs: two roundings more than the forward.
            tol = TOL[dtype]
            err = torch.linalg.vector_norm(h.double() - w) / torch.linalg.vector_norm(w)
            assert err <= 2 * tol["rel"], f"{name}: {err:.3g}"
        else:
            assert_close(h, w, dtype, name)


def test_only_the_needed_gradients_are_computed(monkeypatch) -> None:
    a = randn((20, 30), torch.float16, "na").requires_grad_()
    b = randn((30, 40), torch.float16, "nb")
    bias = randn((40,), torch.float16, "nbias")
    c = matmul(a, b, epilogue="bias_gelu", bias=bias, variant="fixed")
    spy = LaunchSpy(monkeypatch)
    (da,) = torch.autograd.grad(c, [a], torch.ones_like(c))
    # gelu backward, then dA only: no dB GEMM, no bias column sum
    assert spy.names() == ["_gelu_backward_kernel", "_mm_fixed_kernel"]
    gemm = spy.launches[1][1]
    assert b.data_ptr() in {t.data_ptr() for t in gemm}, "dA must read b in place (b.T view)"
    want = _grad_reference(a, b, "bias_gelu", {"bias": bias}, torch.ones_like(c))[0]
    assert_close(da, want, torch.float16, "da")


def test_registered_op_passes_opcheck() -> None:
    a = randn((9, 20), torch.float32, "oa").requires_grad_()
    b = randn((20, 11), torch.float32, "ob").requires_grad_()
    bias = randn((11,), torch.float32, "obias").requires_grad_()
    torch.library.opcheck(_matmul_op, (a, b, bias, None, None, "bias_gelu", "ieee", None, True))
    torch.library.opcheck(_matmul_op, (a, b.T.contiguous().T, None, None, "split_k", None, "ieee", None, False))


def test_torch_compile_fullgraph_matches_eager() -> None:
    a = randn((19, 40), torch.bfloat16, "ca").requires_grad_()
    b = randn((33, 40), torch.bfloat16, "cb").T.requires_grad_()
    bias = randn((33,), torch.bfloat16, "cbias").requires_grad_()

    def f(a, b, bias):
        return matmul(a, b, epilogue="bias_gelu", bias=bias)

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    g = randn((19, 33), torch.bfloat16, "cg")
    out_c = compiled(a, b, bias)
    grads_c = torch.autograd.grad(out_c, [a, b, bias], g)
    out_e = f(a, b, bias)
    grads_e = torch.autograd.grad(out_e, [a, b, bias], g)
    assert torch.equal(out_c, out_e)
    for gc, ge in zip(grads_c, grads_e, strict=True):
        assert torch.equal(gc, ge)


def test_parameters_take_the_eager_path(monkeypatch) -> None:
    def refuse(*args):
        raise AssertionError("the registered op was called")

    monkeypatch.setattr(mm_module, "_matmul_op", refuse)
    w = torch.nn.Parameter(randn((24, 40), torch.float32, "pw"))
    bias = torch.nn.Parameter(randn((24,), torch.float32, "pbias"))
    x = randn((5, 40), torch.float32, "px")
    c = matmul(x, w.T, epilogue="bias", bias=bias, precision="ieee")
    c.sum().backward()
    assert_close(c, reference(x, w.detach().T, "bias", bias=bias.detach()), torch.float32)
    assert_close(bias.grad, torch.full((24,), 5.0, dtype=torch.float64), torch.float32, "dbias")


def test_meta_tensors_take_the_registered_op() -> None:
    c = matmul(torch.empty(5, 7, device="meta"), torch.empty(7, 3, device="meta"), precision="tf32")
    assert c.device.type == "meta" and c.shape == (5, 3)


def _opinfo_cases():
    from torch.testing._internal.common_methods_invocations import op_db

    cases = []
    for op in op_db:
        if op.name not in ("mm", "matmul"):
            continue
        for dtype in DTYPES:
            samples = [
                s
                for s in op.sample_inputs("cpu", dtype, requires_grad=True)
                if s.input.dim() == 2 and len(s.args) == 1 and s.args[0].dim() == 2 and not s.kwargs
            ]
            cases.append(pytest.param(op.name, samples, dtype, id=f"{op.name}-{str(dtype)[6:]}"))
    return cases


@pytest.mark.parametrize(("name", "samples", "dtype"), _opinfo_cases())
def test_pytorch_opinfo_samples(name, samples, dtype) -> None:
    """Every 2-D sample PyTorch's OpInfo database has for mm / matmul, through kernels.matmul
    (fp32 with precision='ieee'): forward and gradients against float64; no refusals."""
    assert samples, "OpInfo has 2-D samples"
    refused = []
    for s in samples:
        a, b = s.input, s.args[0]
        try:
            c = kernels.matmul(a, b, precision=prec(dtype))
        except (TypeError, ValueError) as e:
            refused.append(f"{tuple(a.shape)} @ {tuple(b.shape)}: {e}")
            continue
        expect = torch.matmul(a, b)
        assert c.shape == expect.shape and c.dtype == expect.dtype
        assert_close(c, reference(a.detach(), b.detach()), dtype, "out")
        if c.numel():
            g = randn(tuple(c.shape), dtype, ("opinfo", name))
            have = torch.autograd.grad(c, [a, b], g)
            want = _grad_reference(a, b, None, {}, g)
            for h, w in zip(have, want, strict=True):
                assert_close(h, w, dtype, "grad")
    assert refused == [], f"{len(refused)} refusals: {refused}"


BAD = [
    (lambda: ([1.0], torch.ones(2, 2)), {}, TypeError, ["a", "torch.Tensor"]),
    (lambda: (torch.ones(3, 4), torch.ones(5, 2)), {"precision": "ieee"}, ValueError, ["inner dimensions", "[3, 4]"]),
    (lambda: (torch.ones(2, 3, 4), torch.ones(4, 2)), {"precision": "ieee"}, ValueError, ["a must be 2-D"]),
    (lambda: (torch.ones(3, 4), torch.ones(4)), {"precision": "ieee"}, ValueError, ["b must be 2-D"]),
    (lambda: (torch.ones(3, 4, dtype=torch.int32),) * 1 + (torch.ones(4, 2),), {}, TypeError, ["a", "int32"]),
    (lambda: (torch.ones(3, 4, dtype=torch.float64), torch.ones(4, 2, dtype=torch.float64)), {}, TypeError,
     ["a", "float64"]),
    (lambda: (torch.ones(3, 4, dtype=torch.float16), torch.ones(4, 2)), {}, TypeError, ["b", "float32", "float16"]),
    (lambda: (torch.ones(3, 4), torch.ones(4, 2, device="meta")), {"precision": "ieee"}, ValueError,
     ["b is on meta"]),
    (lambda: (torch.ones(3, 4), torch.ones(4, 2)), {"precision": "fp8"}, ValueError, ["precision"]),
    (lambda: (torch.ones(3, 4), torch.ones(4, 2)), {"precision": "ieee", "variant": "fast"}, ValueError,
     ["variant"]),
    (lambda: (torch.ones(3, 4, dtype=torch.bfloat16), torch.ones(4, 2, dtype=torch.bfloat16)),
     {"variant": ["fixed"]}, ValueError, ["variant"]),  # unhashable: still refused by name
    (lambda: (torch.ones(3, 4, dtype=torch.bfloat16), torch.ones(4, 2, dtype=torch.bfloat16)),
     {"precision": ["tf32"]}, ValueError, ["precision"]),
    (lambda: (torch.ones(3, 4), torch.ones(4, 2)), {"precision": "ieee", "epilogue": "relu"}, ValueError,
     ["epilogue"]),
    (lambda: (torch.ones(3, 4), torch.ones(4, 2)), {"precision": "ieee", "epilogue": "bias"}, ValueError,
     ["needs bias"]),
    (lambda: (torch.ones(3, 4), torch.ones(4, 2)), {"precision": "ieee", "epilogue": "bias", "bias": torch.ones(3)},
     ValueError, ["bias must have shape [2]"]),
    (lambda: (torch.ones(3, 4), torch.ones(4, 2)), {"precision": "ieee", "bias": torch.ones(2)}, ValueError,
     ["bias was given"]),
    (lambda: (torch.ones(3, 4), torch.ones(4, 2)),
     {"precision": "ieee", "epilogue": "bias", "bias": torch.ones(2, dtype=torch.float16)}, TypeError,
     ["bias has dtype"]),
    (lambda: (torch.ones(3, 4), torch.ones(4, 2)),
     {"precision": "ieee", "epilogue": "residual", "residual": torch.ones(2, 3)}, ValueError,
     ["residual must have shape [3, 2]"]),
    (lambda: (torch.ones(3, 4), torch.ones(4, 2)),
     {"precision": "ieee", "epilogue": "residual", "residual": torch.ones(3, 2, device="meta")}, ValueError,
     ["residual is on meta"]),
    (lambda: (torch.ones(3, 4), torch.ones(4, 2)),
     {"precision": "ieee", "variant": "autotuned", "config": TileConfig(32, 32, 32, 1, 1, 4)}, ValueError,
     ["autotuned"]),
    (lambda: (torch.ones(3, 4), torch.ones(4, 2)), {"precision": "ieee", "config": TileConfig(24, 32, 32, 1, 1, 4)},
     ValueError, ["powers of two"]),
]  # fmt: skip


@pytest.mark.parametrize(("make", "kwargs", "error", "words"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_input_names_the_argument(make, kwargs, error, words) -> None:
    a, b = make()
    with pytest.raises(error) as info:
        matmul(a, b, **kwargs)
    for w in words:
        assert w in str(info.value), f"{w!r} not in {info.value}"


def test_cpu_tensor_refused_outside_the_interpreter(monkeypatch) -> None:
    from kernels import _checks  # where every functional's device check lives

    monkeypatch.setattr(_checks, "INTERPRETER", False)
    with pytest.raises(ValueError, match=r"a is on device 'cpu'; expected a CUDA tensor"):
        matmul(torch.ones(2, 3), torch.ones(3, 2), precision="ieee")


def _argument_cases():
    """Operands and options around the common call: every accepted dtype and some refused ones,
    1-, 2- and 3-D, agreeing and disagreeing inner dimensions, CPU and meta, non-tensors."""
    operands = [[1.0, 2.0], None]
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32):
        for shape in ((3, 4), (4, 5), (4,), (2, 3, 4)):
            for device in ("cpu", "meta"):
                operands.append(torch.ones(shape, dtype=dtype, device=device))
    for a in operands:
        for b in operands:
            for variant in (None, "fixed", "autotuned", "bogus", ["fixed"]):
                for precision in (None, "tf32", "ieee", "fp64", ["tf32"]):
                    yield a, b, variant, precision


@pytest.mark.parametrize("interpreter", [True, False])
def test_common_call_shortcut_accepts_only_what_the_full_check_accepts(monkeypatch, interpreter) -> None:
    # _check's shortcut for the common call skips the full checks: every call it accepts must
    # pass them, and it must accept the plain calls the eager path is for.
    from kernels import _checks

    monkeypatch.setattr(_checks, "INTERPRETER", interpreter)
    accepted = 0
    for a, b, variant, precision in _argument_cases():
        if not mm_module._common_call(a, b, variant, precision):
            continue
        accepted += 1
        with monkeypatch.context() as patch:
            patch.setattr(mm_module, "_common_call", lambda *args: False)
            mm_module._check(a, b, None, None, variant, None, precision, None)  # must not raise
    a, b = torch.ones(3, 4, dtype=torch.bfloat16), torch.ones(4, 5, dtype=torch.bfloat16)
    assert mm_module._common_call(a, b, None, None) is interpreter
    assert accepted == (24 if interpreter else 0)  # 3 variants x (2 half dtypes x 3 precisions + fp32 x 2)


def test_decode_choice_follows_graph_capture(monkeypatch) -> None:
    # A decode shape runs one variant eagerly and another when captured in a CUDA graph
    # (default_variant's ``captured``).  The first eager call also runs the captured choice, so
    # its kernels are loaded before any capture (no module may load during one), and the eager
    # choice's result is what it returns; a captured call is a key of its own.
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    ran = []
    real_prepare = mm_module._prepare
    monkeypatch.setattr(mm_module, "_prepare", lambda *args: ran.append(args[6]) or real_prepare(*args))
    monkeypatch.setattr(
        mm_module, "default_variant", lambda *args: "split_k" if args[8] else "fixed"
    )  # fmt: skip
    a, b = randn((13, 200), torch.bfloat16, "graph"), randn((200, 9), torch.bfloat16, "graph2")
    want = reference(a, b)
    assert_close(matmul(a, b), want, torch.bfloat16, "first eager call")
    assert ran == ["split_k", "fixed"]  # the graph's choice first, then the eager one's over it
    assert_close(matmul(a, b), want, torch.bfloat16, "second eager call")
    assert ran == ["split_k", "fixed"]  # both prepared: nothing chosen or prepared again
    monkeypatch.setattr(mm_module, "capturing", lambda: True)
    assert_close(matmul(a, b), want, torch.bfloat16, "captured call")
    assert ran == ["split_k", "fixed", "split_k"]  # a key of its own, no second warm-up
    matmul(a, b)
    assert ran == ["split_k", "fixed", "split_k"]
    assert {key[-1] for key in mm_module._PREPARED if key[1] is None} == {False, True}

    def asked() -> bool:
        raise AssertionError("asked whether capturing where the answer cannot matter")

    monkeypatch.setattr(mm_module, "capturing", asked)
    matmul(a, b, variant="fixed")  # an explicit variant
    matmul(randn((129, 200), torch.bfloat16, "graph3"), b)  # more rows than decode


def test_default_variant_is_chosen_once_per_call_signature(monkeypatch) -> None:
    # The choice sits in the prepared launch's key as None: later calls of one signature skip
    # it (host time), a new signature or an explicit variant chooses anew.
    monkeypatch.setattr(mm_module, "_PREPARED", {})  # its own cache: the patched choice must not outlive the test
    chosen = []
    real = mm_module.default_variant
    monkeypatch.setattr(mm_module, "default_variant", lambda *args: chosen.append((*args[:3], args[8])) or real(*args))
    a, b = randn((13, 24), torch.bfloat16, "once"), randn((24, 9), torch.bfloat16, "once2")
    for _ in range(3):
        assert_close(matmul(a, b), reference(a, b), torch.bfloat16, "default")
    # a decode shape's first call also asks what a captured call would run (test below)
    assert chosen == [(13, 9, 24, False), (13, 9, 24, True)]
    matmul(a[:7], b)
    assert chosen == [(13, 9, 24, False), (13, 9, 24, True), (7, 9, 24, False), (7, 9, 24, True)]
    chosen.clear()
    a = randn((129, 24), torch.bfloat16, "once3")
    for _ in range(2):
        matmul(a, b)
    assert chosen == [(129, 9, 24, False)]  # not decode: one choice
    monkeypatch.setattr(mm_module, "default_variant", lambda *args: "split_k")
    out = matmul(a[:5], b)  # a new signature runs what the (patched) choice says, split-K here
    assert_close(out, reference(a[:5], b), torch.bfloat16, "patched choice")
    assert any(key[1] is None and key[5] == (5, 24) for key in mm_module._PREPARED)


def test_decode_warm_up_only_where_the_choices_differ(monkeypatch) -> None:
    # where the captured and the eager choice agree, the first eager call prepares one launch
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    ran = []
    real_prepare = mm_module._prepare
    monkeypatch.setattr(mm_module, "_prepare", lambda *args: ran.append(args[6]) or real_prepare(*args))
    monkeypatch.setattr(mm_module, "default_variant", lambda *args: "fixed")
    a, b = randn((13, 200), torch.bfloat16, "agree"), randn((200, 9), torch.bfloat16, "agree2")
    assert_close(matmul(a, b), reference(a, b), torch.bfloat16)
    assert ran == ["fixed"]


def test_dispatch_rule_fingerprints_the_rule(monkeypatch) -> None:
    # The sweep records it beside each default call: a threshold moved or a line of code
    # changed is another rule; the docstring's words, comments and blank lines are not.
    import inspect

    first = mm_module.dispatch_rule()
    assert len(first) == 10 and int(first, 16) >= 0
    source = inspect.getsource(mm_module.default_variant)
    doc = '"""The variant ``matmul(variant=None)`` runs'
    assert doc in source and 'return "persistent"\n' in source

    getsource = inspect.getsource

    def rule_of(text: str, fn=mm_module.default_variant) -> str:
        mm_module.dispatch_rule.cache_clear()
        with monkeypatch.context() as patch:
            patch.setattr(mm_module.inspect, "getsource", lambda f: text if f is fn else getsource(f))
            return mm_module.dispatch_rule()

    try:
        reworded = source.replace(doc, '"""Which variant ``matmul(variant=None)`` runs')
        assert rule_of(reworded.replace("    sms = sm_count(device)\n", "\n    sms = sm_count(device)  # n\n")) == first
        assert rule_of(source.replace('return "persistent"\n', 'return "warp_specialized"\n')) != first
        # what the choice reads besides: which products the warp-specialized kernel may run
        eligible = getsource(mm_module.ws_eligible)
        assert "max(m, n, k) >= 2**31" in eligible
        narrower = eligible.replace("max(m, n, k) >= 2**31", "max(m, n, k) >= 2**31 or n % 8")
        assert rule_of(narrower, mm_module.ws_eligible) != first
        assert rule_of(eligible.replace("    index =", "    # a comment\n    index ="), mm_module.ws_eligible) == first
        mm_module.dispatch_rule.cache_clear()
        with monkeypatch.context() as patch:  # split-K's tile decides how many tiles a decode product has
            patch.setattr(mm_module, "SPLIT_K_CONFIG", mm_module.TileConfig(16, 64, 64, 1, 6, 4))
            assert mm_module.dispatch_rule() != first
        mm_module.dispatch_rule.cache_clear()
        with monkeypatch.context() as patch:  # a warp-specialized tile's fitted time is part of the rule
            first_tile, *rest = mm_module.WS_TILES
            slower = dataclasses.replace(first_tile, tile_time=first_tile.tile_time * 0.99)
            patch.setattr(mm_module, "WS_TILES", (slower, *rest))
            assert mm_module.dispatch_rule() != first
        mm_module.dispatch_rule.cache_clear()
        with monkeypatch.context() as patch:  # and so is its exposed epilogue
            first_tile, *rest = mm_module.WS_TILES
            exposed = dataclasses.replace(first_tile, epilogue_steps=first_tile.epilogue_steps + 1)
            patch.setattr(mm_module, "WS_TILES", (exposed, *rest))
            assert mm_module.dispatch_rule() != first
        mm_module.dispatch_rule.cache_clear()
        with monkeypatch.context() as patch:  # and another GPU's table, entry and name
            (name, table), *others = mm_module.WS_TILES_BY_GPU
            patch.setattr(mm_module, "WS_TILES_BY_GPU", ((name, table[:1]), *others))
            assert mm_module.dispatch_rule() != first
        mm_module.dispatch_rule.cache_clear()
        with monkeypatch.context() as patch:
            patch.setattr(mm_module, "WS_TILES_BY_GPU", (("H100 PCIe", table), *others))
            assert mm_module.dispatch_rule() != first
        mm_module.dispatch_rule.cache_clear()
        monkeypatch.setattr(mm_module, "SPLIT_K_MIN_K", 4096)
        assert mm_module.dispatch_rule() != first
    finally:
        mm_module.dispatch_rule.cache_clear()


def test_interpreter_dispatch_and_no_compiled_kernels() -> None:
    a = randn((8, 16), torch.float16, "ck")
    b = randn((16, 8), torch.float16, "ck2")
    assert default_variant(8, 8, 16, a.device) == "fixed"
    assert compiled_kernels(a, b, variant="split_k") == []
    assert "matmul" in kernels.__all__ and kernels.matmul is matmul


# Compiles GEMM kernels for sm_90 in a process without the interpreter (Triton compiles
# without a GPU) and prints what the PTX does, one JSON line per configuration.
_CODEGEN_PROBE = r"""
import importlib, json, re, sys
from collections import Counter
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
mm = importlib.import_module("kernels.matmul")
INTS = ["M", "N", "K", "s_am", "s_ak", "s_bk", "s_bn", "s_cm", "s_bias", "s_rm", "s_rn"]
P6 = {n: "*bf16" for n in ("a_ptr", "b_ptr", "c_ptr", "pre_ptr", "bias_ptr", "res_ptr")}
P8 = {**P6, "part_ptr": "*fp32", "count_ptr": "*i32"}  # the persistent kernel's: its split tail's buffers
INTS_P = INTS + ["tail_tiles", "tail_splits"]

def probe(name, fn, ptrs, ints, consts, warps, stages):
    sig = {**ptrs, **{k: "i64" for k in ints}, **{k: "constexpr" for k in consts}}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(ptrs))}
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    ptx, ttgir = k.asm["ptx"], k.asm["ttgir"]
    ops = Counter(re.findall(r"\b((?:ld|st)\.global[\w.:]*)", ptx))
    print(json.dumps({"name": name, "wgmma": ptx.count("wgmma.mma_async"), "tma": ptx.count("cp.async.bulk.tensor"),
                      # a register tensor stored into shared memory (an operand copied to K-major)
                      "register_copies": ttgir.count("ttg.local_alloc %"),
                      "wgmma_pendings": sorted({int(x) for x in re.findall(r"pendings = (\d+)", ttgir)}),
                      "cp_async_16": ptx.count("cp.async.cg.shared.global"),  # .cg: 16-byte copies only
                      "scalar16_loads": sum(n for o, n in ops.items() if o.startswith("ld.") and o.endswith("b16")),
                      "vector_stores": sum(n for o, n in ops.items() if o.startswith("st.") and ".v4." in o),
                      "shared": k.metadata.shared}), flush=True)

def consts(a_lay, b_lay, cfg, even=True, vec=8, **kw):
    return dict(A_LAYOUT=a_lay, B_LAYOUT=b_lay, R_LAYOUT=1, A_VEC=vec, B_VEC=vec, M_VEC=vec, C_VEC=vec, R_VEC=vec,
                K_VEC=vec,
                EVEN_K=even, EPILOGUE=kw.get("epi", 0), STORE_PRE=kw.get("epi", 0) == 2, PRECISION="tf32",
                BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m)

f, p = mm.FIXED_CONFIG, mm.PERSISTENT_CONFIG
probe("fixed", mm._mm_fixed_kernel, P6, INTS, consts(1, 1, f), 4, 3)
probe("fixed a.T, K tail, bias_gelu", mm._mm_fixed_kernel, P6, INTS, consts(2, 2, f, even=False, epi=2), 4, 3)
for a_lay, b_lay in ((1, 1), (1, 2), (2, 1)):
    probe(f"persistent {a_lay}{b_lay}", mm._mm_persistent_kernel, P8, INTS_P,
          {**consts(a_lay, b_lay, p), "NUM_SMS": 132, "USE_TMA": True, "REG_OPERAND": 0}, 8, 3)
F8 = {**{n: "*fp32" for n in P6}, "part_ptr": "*fp32", "count_ptr": "*i32"}
f32 = mm.PERSISTENT_CONFIG_FP32
for a_lay, b_lay in ((1, 1), (2, 2), (1, 2), (2, 1)):
    for reg in sorted({0, mm.reg_operand(a_lay, b_lay)}):
        probe(f"tf32 persistent {a_lay}{b_lay} reg {reg}", mm._mm_persistent_kernel, F8, INTS_P,
              {**consts(a_lay, b_lay, f32, vec=4), "NUM_SMS": 132, "USE_TMA": True, "REG_OPERAND": reg},
              f32.num_warps, f32.num_stages)
# the tiles TF32's default runs, at many and at few tiles, in every layout
for size in (4096, 1024):
    for a_lay, b_lay in ((1, 1), (2, 2), (1, 2), (2, 1)):
        reg = mm.reg_operand(a_lay, b_lay)
        c = mm.default_config("persistent", mm.torch.float32, size, size, "tf32", 132, reg)
        probe(f"tf32 persistent default {size} {a_lay}{b_lay}", mm._mm_persistent_kernel, F8, INTS_P,
              {**consts(a_lay, b_lay, c, vec=4), "NUM_SMS": 132, "USE_TMA": True, "REG_OPERAND": reg},
              c.num_warps, c.num_stages)
"""


def test_kernels_compile_for_hopper_with_tma_wgmma_and_vector_loads() -> None:
    """The interpreter compiles nothing: this compiles the fixed and the persistent kernel for
    sm_90 (no GPU needed) and reads the PTX: Hopper matrix instructions (wgmma), TMA loads in
    the persistent kernel, 16-byte asynchronous copies (no element-wise 16-bit loads) in the
    fixed kernel even for a transposed a and a K that is not a multiple of BLOCK_K."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", _CODEGEN_PROBE], capture_output=True, text=True, env=env,
                          timeout=600, cwd=root)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    reports = {r["name"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert len(reports) == 19
    for name, r in reports.items():
        assert r["wgmma"] > 0, r
        assert r["vector_stores"] > 0, r
        if "persistent" in name:
            assert r["tma"] > 0 and r["shared"] <= 227 * 1024, r
        else:
            assert r["cp_async_16"] > 0 and r["scalar16_loads"] <= 1, r  # the one: bias[n], a strided vector
    # TF32: an MN-major operand read from shared memory is copied through registers into a
    # K-major buffer, and every wgmma is waited for (pendings 0 only); read into registers
    # instead (REG_OPERAND), nothing is copied and wgmma runs ahead of the loads.
    for lay in ("11", "22"):
        copied, direct = reports[f"tf32 persistent {lay} reg 0"], reports[f"tf32 persistent {lay} reg {int(lay[0])}"]
        assert copied["register_copies"] > 0 and copied["wgmma_pendings"] == [0], copied
        assert direct["register_copies"] == 0 and max(direct["wgmma_pendings"]) > 0, direct
    for lay in ("12", "21"):  # both K-major (12) or both MN-major (21): REG_OPERAND 0 only
        assert mm_module.reg_operand(int(lay[0]), int(lay[1])) == 0
    assert reports["tf32 persistent 12 reg 0"]["register_copies"] == 0


# The warp-specialized kernel is Gluon, which the interpreter does not run: under it,
# variant="warp_specialized" runs the persistent kernel (the tests above check that result).
# Here the host's plan for it is checked with eligibility forced, and the kernel itself is
# compiled for sm_90 with the constexprs that plan passes.
def _ws_plan(a, b, monkeypatch, **kw):
    monkeypatch.setattr(mm_module, "ws_eligible", lambda a, b: True)
    monkeypatch.setattr(mm_module, "sm_count", lambda device: 132)
    m, n = a.shape[0], b.shape[1]
    out = torch.empty((m, n), dtype=a.dtype)
    args = dict(pre=None, bias=None, residual=None, epilogue=None, precision=None, config=None) | kw
    return mm_module._prepare(a, b, out, variant="warp_specialized", index=-1, **args)


@pytest.mark.parametrize("which", ["plain", "a.T", "b.T", "both"])
def test_ws_plan_reads_transposed_operands_through_their_memory(which, monkeypatch) -> None:
    m, n, k = 300, 520, 1000
    a_t, b_t = which in ("a.T", "both"), which in ("b.T", "both")
    a = randn((k, m), torch.bfloat16, "wa").T if a_t else randn((m, k), torch.bfloat16, "wa")
    b = randn((n, k), torch.bfloat16, "wb").T if b_t else randn((k, n), torch.bfloat16, "wb")
    kernel, _, grid, args, consts, warps, _, tma, _ = _ws_plan(a, b, monkeypatch)
    assert kernel is mm_module._WS and tma and warps == 4
    named = dict(zip(kernel.const_names, consts, strict=True))
    assert (named["A_T"], named["B_T"]) == (a_t, b_t)
    # the row stride of each operand's memory as it lies: [K, M] for a.T, [N, K] for b.T
    assert args[6:11] == (m, n, k, m if a_t else k, k if b_t else n)
    assert args[0] is a and args[1] is b
    tiles = -(-m // 128) * -(-n // 128)
    assert grid == (min(132, tiles), 1, 1)


def test_ws_plan_epilogues_and_cooperative_config(monkeypatch) -> None:
    a, b = randn((64, 96), torch.float16, "we"), randn((96, 80), torch.float16, "wf")
    residual = randn((80, 64), torch.float16, "wr").T  # column-major residual: strides (1, 64)
    _, _, _, args, consts, *_ = _ws_plan(a, b, monkeypatch, epilogue="residual", residual=residual)
    named = dict(zip(mm_module._WS.const_names, consts, strict=True))
    assert named["EPILOGUE"] == 3 and args[5] is residual and args[12:14] == (1, 64)
    bias = randn((80,), torch.float16, "wbias")
    pre = torch.empty(64, 80, dtype=torch.float16)
    cfg = TileConfig(256, 128, 64, 4, 3, 8)
    _, _, grid, args, consts, *_ = _ws_plan(a, b, monkeypatch, epilogue="bias_gelu", bias=bias, pre=pre, config=cfg)
    named = dict(zip(mm_module._WS.const_names, consts, strict=True))
    assert (named["EPILOGUE"], named["STORE_PRE"], named["COOP"]) == (2, True, True)
    assert (named["BLOCK_M"], named["BLOCK_N"], named["BLOCK_K"], named["GROUP_M"], named["S"]) == (256, 128, 64, 4, 3)
    assert args[3] is pre and args[4] is bias and grid == (1, 1, 1)
    assert not named["SPLIT"]  # 3 stages beside whole output tiles fit
    _, _, _, _, consts, *_ = _ws_plan(a, b, monkeypatch, config=dataclasses.replace(cfg, num_stages=4))
    assert dict(zip(mm_module._WS.const_names, consts, strict=True))["SPLIT"]  # 4 fit beside half-width tiles


def test_ws_runs_where_it_can_store_the_output(monkeypatch) -> None:
    """The warp-specialized kernel needs Hopper, 16-bit operands and output rows TMA can
    write through TMA or through pointers (an odd N); operands TMA cannot read as they lie are
    copied for it (tma_copy), not refused."""
    monkeypatch.setattr(mm_module, "INTERPRETER", False)
    monkeypatch.setattr(mm_module, "_capability", lambda index: (9, 0))
    a = torch.empty(64, 64, dtype=torch.bfloat16)
    assert not mm_module.ws_eligible(a, a)  # a CPU tensor
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))  # the rules on shapes and strides
    assert mm_module.ws_eligible(a, a)
    assert not mm_module.ws_eligible(a.float(), a.float())  # fp32: the persistent kernel
    assert mm_module.ws_eligible(torch.empty(64, 65, dtype=torch.bfloat16)[:, :64], a)  # a's rows 130 bytes: copied
    assert mm_module.ws_eligible(a, torch.empty(64, 60, dtype=torch.bfloat16))  # N = 120 bytes: pointer stores
    w = torch.empty(61, 64, dtype=torch.bfloat16)  # w.T is TMA-readable, the output's rows are 122 bytes
    assert mm_module.ws_eligible(a, torch.empty(64, 64, dtype=torch.bfloat16).T)
    assert mm_module.ws_eligible(a, w.T)
    assert not mm_module.ws_eligible(torch.empty(64, 0, dtype=torch.bfloat16), torch.empty(0, 64, dtype=torch.bfloat16))
    assert mm_module.ws_eligible(a[:, ::2], torch.empty(32, 64, dtype=torch.bfloat16))  # no unit stride: copied
    assert mm_module.ws_eligible(a.T, a.T)  # transposed operands: descriptors of their memory
    monkeypatch.setattr(mm_module, "_capability", lambda index: (10, 0))
    assert not mm_module.ws_eligible(a, a)  # wgmma is sm_90's


WS_BAD = [
    (TileConfig(128, 128, 64, 8, 5, 2), "num_warps 4"),
    (TileConfig(256, 128, 64, 8, 3, 4), "64 or 128 rows"),
    (TileConfig(128, 256, 64, 8, 3, 4), "128 x 128 outputs"),
    (TileConfig(128, 128, 128, 8, 3, 4), "128 bytes"),
    (TileConfig(128, 128, 64, 8, 7, 4), "shared memory"),  # 7 x 32 KB: no room even for half-width output tiles
    (TileConfig(256, 128, 64, 8, 5, 8), "shared memory"),
]


@pytest.mark.parametrize(("config", "words"), WS_BAD, ids=[w for _, w in WS_BAD])
def test_ws_config_beyond_the_kernel_is_refused(config, words) -> None:
    a, b = torch.ones(4, 8, dtype=torch.bfloat16), torch.ones(8, 4, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="warp_specialized") as info:
        matmul(a, b, variant="warp_specialized", config=config)
    assert words in str(info.value)
    matmul(a.float(), b.float(), variant="warp_specialized", config=config, precision="ieee")  # fp32: persistent's


def test_tail_split_plan() -> None:
    """The persistent kernel's partial last wave is split along K (tail tiles, splits): as many
    ranges as the SMs allow, at most TAIL_MAX_SPLITS, every range but the last of
    TAIL_MIN_STEPS K steps or more and none empty; whole tiles at whole waves, under one wave, from TAIL_MAX_WAVES
    waves, or where fewer than two ranges fit."""
    split = mm_module.tail_split
    assert split(144, 256, 132) == (12, 11)
    assert split(160, 128, 132) == (28, 4)
    assert split(133, 1000, 132) == (1, mm_module.TAIL_MAX_SPLITS)
    assert split(136, 8, 132) == (0, 1)  # one K step a range: not split
    assert split(136, 16, 132) == (4, 2)
    assert split(264, 256, 132) == (0, 1)  # whole waves
    assert split(131, 256, 132) == (0, 1)  # under one wave
    assert split(4 * 132 + 5, 256, 132) == (5, 16)  # four waves
    assert split(mm_module.TAIL_MAX_WAVES * 132 + 5, 256, 132) == (0, 1)
    assert split(4 * 132 - 5, 256, 132) == (0, 1)  # 127 tail tiles: one range each
    assert split(200, 256, 132) == (0, 1)  # 68 tail tiles: one range each
    for tiles in range(133, mm_module.TAIL_MAX_WAVES * 132):
        for k_tiles in (8, 17, 100, 130, 250, 786):  # 130 at 16 ranges of 9 steps: the last would be empty
            tail, splits = split(tiles, k_tiles, 132)
            if tail:
                per = -(-k_tiles // splits)
                assert 2 <= splits <= mm_module.TAIL_MAX_SPLITS and tail * splits <= 132
                assert (splits - 1) * per < k_tiles and per >= mm_module.TAIL_MIN_STEPS, (tiles, k_tiles)


@pytest.mark.parametrize(("m", "n", "k", "epilogue", "layout", "sms"), [
    (200, 100, 300, None, "ab", 9), (100, 160, 300, "bias_gelu", "a.T", 9), (97, 160, 265, "residual", "b.T", 9),
    (40, 320, 500, "bias", "ab", 9), (300, 64, 260, None, "both", 9), (150, 64, 300, "bias_gelu", "ab", 9),
    (97, 130, 265, "residual", "b.T", 9), (96, 160, 300, "bias", "ab", 13), (96, 150, 600, None, "a.T", 13),
])  # fmt: skip
def test_split_tail_matches_float64_and_repeats_bit_for_bit(m, n, k, epilogue, layout, sms, monkeypatch) -> None:
    """With 9 or 13 "SMs" (and the interpreter's 32x32x32 tiles), the persistent kernel's
    partial last wave is split along K (tail_split's plan, asserted), summed from fp32
    partials: the result matches float64 for every epilogue and operand layout, a second call
    gives the same bits (the GPU tests check that where programs run at once and share the
    sum), the tile counters are back at zero, and the whole-tile kernel agrees within the
    tolerance (at 13 SMs each tail tile is summed from more than four slots: the sum's second
    round of loads).  An odd N (rows not 16-byte vectors) splits the plain product only (with
    an epilogue its tiles run whole: kernels.matmul._prepare)."""
    monkeypatch.setattr(mm_module, "sm_count", lambda device: sms)
    monkeypatch.setattr(mm_module, "TAIL_MIN_STEPS", 1)  # the tests' K spans a few 32-deep steps
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    key = ("tail", m, n, k, epilogue, layout)
    a_t, b_t = layout in ("a.T", "both"), layout in ("b.T", "both")
    a = randn((k, m), torch.float16, (key, "a")).T if a_t else randn((m, k), torch.float16, (key, "a"))
    b = randn((n, k), torch.float16, (key, "b")).T if b_t else randn((k, n), torch.float16, (key, "b"))
    kw = extras(epilogue, m, n, torch.float16, key)
    tiles = -(-m // 32) * -(-n // 32)
    tail, splits = mm_module.tail_split(tiles, -(-k // 32), sms)
    assert tail and splits >= 2, (tiles, tail, splits)  # at 13: two tail tiles in 5 ranges
    spy = LaunchSpy(monkeypatch)
    c = matmul(a, b, variant="persistent", epilogue=epilogue, **kw)
    assert [persistent_const(consts, "SPLIT_TAIL") for name, _, consts in spy.launches
            if name == "_mm_persistent_kernel"] == [n % 8 == 0 or epilogue is None]  # fmt: skip
    assert_close(c, reference(a, b, epilogue, **kw), torch.float16, key)
    assert torch.equal(matmul(a, b, variant="persistent", epilogue=epilogue, **kw), c)
    assert not mm_module._COUNTERS[(-1, 0)].any(), "a tile counter was left set"
    monkeypatch.setattr(mm_module, "tail_split", lambda *args: (0, 1))
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    assert_close(matmul(a, b, variant="persistent", epilogue=epilogue, **kw), reference(a, b, epilogue, **kw),
                 torch.float16, (key, "whole"))  # fmt: skip


def test_tf32_default_tiles_follow_the_probe(monkeypatch) -> None:
    """TF32 runs 256x128x32 where there are at least half as many of its tiles as SMs, and
    128x128x64 below that; IEEE fp32 keeps the FMA tile; 16-bit operands their own."""
    monkeypatch.setattr(mm_module, "INTERPRETER", False)
    tf32 = lambda m, n: mm_module.default_config("persistent", torch.float32, m, n, "tf32", 132)
    assert tf32(4096, 4096) == mm_module.PERSISTENT_CONFIG_TF32 == TileConfig(256, 128, 32, 8, 3, 8)
    assert tf32(2048, 2048) == mm_module.PERSISTENT_CONFIG_TF32  # 8 x 16 = 128 tiles: at least 66
    assert tf32(1024, 1024) == mm_module.PERSISTENT_CONFIG_TF32_FEW  # 32 tiles
    # both operands K-major (no REG_OPERAND): the 64-deep tile's ring does not fit beside the
    # accumulator's staging (262,168 B compiled for sm_90); the 32-deep one does
    few_k_major = mm_module.default_config("persistent", torch.float32, 1024, 1024, "tf32", 132, reg=0)
    assert few_k_major == mm_module.PERSISTENT_CONFIG_FP32 and few_k_major.block_k == 32
    assert mm_module.default_config("persistent", torch.float32, 4096, 4096, "ieee") == mm_module.PERSISTENT_CONFIG_FP32
    assert mm_module.default_config("persistent", torch.bfloat16, 4096, 4096) == mm_module.PERSISTENT_CONFIG
    assert mm_module.default_config("warp_specialized", torch.bfloat16, 4096, 4096) == mm_module.WS_CONFIG
    assert mm_module.default_config("warp_specialized", torch.float32, 4096, 4096, "tf32") == tf32(4096, 4096)


def test_ws_default_dispatch(monkeypatch) -> None:
    monkeypatch.setattr(mm_module, "INTERPRETER", False)
    monkeypatch.setattr(mm_module, "sm_count", lambda device: 132)
    monkeypatch.setattr(mm_module, "_capability", lambda index: (9, 0))
    dev = torch.device("cuda", 0)
    assert default_variant(4096, 4096, 4096, dev, torch.bfloat16, "bias_gelu") == "warp_specialized"
    assert default_variant(4096, 4096, 4096, dev, torch.bfloat16) == "warp_specialized"  # 1024 tiles: 7.8 a SM
    assert default_variant(4096, 4096, 4096, dev, torch.bfloat16, "residual") == "warp_specialized"
    assert default_variant(3072, 3072, 3072, dev, torch.bfloat16) == "warp_specialized"  # 576 tiles: 4.4 a SM
    # where the warp-specialized kernel cannot run (tma=False), the persistent one
    assert default_variant(8192, 50257, 768, dev, torch.bfloat16) == "warp_specialized"  # odd N: pointer stores
    assert default_variant(8192, 50257, 768, dev, torch.bfloat16, tma=False) == "persistent"
    assert default_variant(4096, 4096, 4096, dev, torch.bfloat16, "bias_gelu", tma=False) == "persistent"
    assert default_variant(1024, 1024, 1024, dev, torch.bfloat16, tma=False) == "autotuned"  # under a wave
    assert default_variant(2560, 2560, 2560, dev, torch.bfloat16) == "persistent"  # 400 tiles: 3.0 a SM
    assert default_variant(4096, 4096, 4096, dev, torch.float32, "bias_gelu", "tf32") == "persistent"
    assert default_variant(4096, 4096, 4096, dev, torch.float32, None, "ieee") == "autotuned"  # FMA
    assert default_variant(1024, 1024, 1024, dev, torch.float32, None, "tf32") == "persistent"
    assert default_variant(1024, 1024, 1024, dev, torch.float32, None, "ieee") == "autotuned"
    assert default_variant(4096, 4096, 4096, dev, torch.float32) == "autotuned"  # no precision: never TF32
    assert default_variant(2048, 4096, 1024, dev, torch.float16, "bias_gelu") == "persistent"  # 512 tiles: < 4 a SM
    # under one wave of the persistent kernel's 128x256 tiles: the autotuner's smaller tiles
    assert default_variant(2048, 2048, 2048, dev, torch.float16, "bias_gelu") == "autotuned"  # 128 tiles
    assert default_variant(1024, 1024, 1024, dev, torch.bfloat16) == "autotuned"
    assert default_variant(16384, 1024, 1024, dev, torch.bfloat16) == "warp_specialized"  # 1024 of its tiles
    # By whole waves, the kernel whose last wave is the fuller (ties: persistent below four of
    # the warp-specialized kernel's waves)
    assert default_variant(2176, 2048, 512, dev, torch.bfloat16) == "warp_specialized"  # 136 tiles / 272 of 128x128
    assert default_variant(2176, 2048, 512, dev, torch.bfloat16, tma=False) == "persistent"
    assert default_variant(8192, 768, 50257, dev, torch.bfloat16) == "warp_specialized"  # the LM head's dA: 192 / 384
    # ... unless the persistent kernel's split tail costs less (kernels.matmul.TAIL_COST_STEPS)
    assert default_variant(6144, 768, 16384, dev, torch.bfloat16) == "persistent"  # 12 tail tiles, 11 ways
    assert default_variant(2560, 2048, 8192, dev, torch.bfloat16) == "persistent"  # 28 tail tiles, 4 ways
    assert default_variant(5376, 1024, 11264, dev, torch.bfloat16) == "persistent"  # 36, 3 ways at a deep K ...
    assert default_variant(2816, 2048, 4096, dev, torch.bfloat16) == "warp_specialized"  # ... not at 64 steps
    assert default_variant(1536, 4096, 8192, dev, torch.bfloat16) == "warp_specialized"  # 60, 2 ways: 192 / 384
    assert default_variant(6144, 767, 16384, dev, torch.bfloat16) == "persistent"  # an odd N, plain: split
    assert default_variant(6144, 767, 16384, dev, torch.bfloat16, "bias") == "warp_specialized"  # with an epilogue: not
    assert default_variant(2560, 2560, 2560, dev, torch.float16) == "persistent"  # 200 / 400: both 76% full
    # beyond four waves (the probe of notes/2026-12-04e-probe-tail-waves-a99058f.log): costs
    # 8 + 1/8 + 15/128 against 17/2 tile-times; 9 + 1/4 + 15/64 against 19/2 (level: the margin)
    assert default_variant(6528, 5376, 8192, dev, torch.bfloat16) == "persistent"
    assert default_variant(5760, 6912, 4096, dev, torch.bfloat16) == "warp_specialized"
    assert default_variant(3072, 3072, 3072, dev, torch.bfloat16, "residual") == "warp_specialized"  # 2.51 / 2.5
    # a K that is not a multiple of 64 costs the warp-specialized kernel 4 steps a tile
    assert default_variant(3000, 7168, 3000, dev, torch.bfloat16) == "persistent"  # 5.52 against 5.97
    assert default_variant(4096, 4096, 4100, dev, torch.bfloat16) == "persistent"  # whole: 4 against 4.25
    assert default_variant(4096, 4096, 4032, dev, torch.bfloat16) == "warp_specialized"  # K = 63 x 64
    # ... not against an odd N with an epilogue (the persistent kernel runs fewer stages there)
    assert default_variant(4096, 4095, 4100, dev, torch.bfloat16, "bias") == "warp_specialized"
    assert default_variant(8192, 768, 50257, dev, torch.bfloat16) == "warp_specialized"  # 1.5 x 1.005 against 1.52
    # the constants at their edges: 160 tiles split 4 ways at 64 K steps, (1 + 1/4 + 15/64) x 1.01
    # = 1.4992 against 3/2; 144 tiles at 33 K steps, 1.5 x (1 + 4/33) = 1.682 against (1 + 1/4 +
    # 15/33) x 1.01 = 1.722; whole waves level at exactly WS_MIN_WAVES of the 128x128 tiles
    assert default_variant(1024, 5120, 4096, dev, torch.bfloat16) == "persistent"
    assert default_variant(3072, 1536, 2080, dev, torch.bfloat16) == "warp_specialized"
    assert default_variant(1536, 5632, 4096, dev, torch.bfloat16) == "warp_specialized"  # 264 / 528 tiles
    assert default_variant(2048, 4096, 2048, dev, torch.bfloat16) == "persistent"  # 256 / 512: both 97% full
    assert default_variant(4096, 1024, 32768, dev, torch.bfloat16) == "autotuned"  # 128 tiles: under a wave
    assert default_variant(1, 4096, 14336, dev) == "split_k"  # a deep K, 32 output tiles
    assert default_variant(128, 4096, 14336, dev) == "split_k"  # one row of 128: 32 tiles
    assert default_variant(8, 8192, 28672, dev) == "split_k"  # 64 tiles: half a wave
    # 86 tiles: more than half a wave, one split a tile is all a wave holds
    assert default_variant(1, 11008, 8192, dev) == "autotuned"
    assert default_variant(128, 8576, 8192, dev) == "autotuned"  # 67 tiles of 128 rows and columns ...
    assert default_variant(128, 8448, 8192, dev) == "split_k"  # ... and 66, half of 132
    # float32's split-K tile is 64 rows: 128 rows are two rows of tiles, 132 tiles at N = 8448
    assert default_variant(128, 8448, 8192, dev, torch.float32, None, "tf32") == "autotuned"
    assert default_variant(64, 8448, 8192, dev, torch.float32, None, "tf32") == "split_k"
    assert default_variant(16, 4096, 4096, dev) == "autotuned"  # K = 4096 eagerly: one launch's host cost
    assert default_variant(128, 14336, 4096, dev) == "autotuned"
    # captured in a CUDA graph (no host cost a call): 16-bit, at every decode row count, from K = 4096
    graph = functools.partial(default_variant, tma=True, captured=True)
    assert graph(16, 4096, 4096, dev) == "split_k"
    assert graph(64, 4096, 4096, dev, torch.float16) == "split_k"
    assert graph(1, 8448, 4096, dev) == "split_k"  # 66 tiles: half a wave
    assert graph(1, 8576, 4096, dev) == "autotuned"  # 67
    assert graph(80, 4096, 5120, dev) == "split_k"  # past 64 rows too (the eleventh held-out set)
    assert graph(16, 4096, 4096, dev, tma=False) == "split_k"  # no warp-specialized kernel: the same rule
    assert graph(128, 4096, 4096, dev) == "split_k"  # up to SPLIT_K_MAX_M
    assert graph(129, 4096, 4096, dev) == default_variant(129, 4096, 4096, dev)  # not decode: as eagerly
    assert default_variant(80, 4096, 5120, dev) == "autotuned"  # eagerly: K from 8192
    assert graph(16, 4096, 4095, dev) == "autotuned"  # a K under 4096
    assert graph(16, 4096, 4096, dev, torch.float32, None, "tf32") == "autotuned"  # 16-bit only
    assert graph(1, 14336, 4096, dev) == "autotuned"  # 112 tiles
    assert graph(128, 4096, 14336, dev) == "split_k"  # as eagerly
    assert graph(4096, 4096, 4096, dev) == "warp_specialized"  # not decode: capture changes nothing
    monkeypatch.setattr(mm_module, "_capability", lambda index: (8, 0))
    assert default_variant(4096, 4096, 4096, dev, torch.bfloat16, "bias_gelu") == "autotuned"


@pytest.mark.parametrize("tile", [(128, 256, 32, 8, 6, 8), (256, 128, 64, 8, 4, 8)])
def test_ws_cost_follows_a_cooperative_ws_config(monkeypatch, tile) -> None:
    # A cooperative tile (both consumers on one tile of the persistent tile's area) is charged
    # a whole tile-time a wave, not the ping-pong tile's half: no half-filled last wave.
    monkeypatch.setattr(mm_module, "INTERPRETER", False)
    monkeypatch.setattr(mm_module, "sm_count", lambda device: 132)
    monkeypatch.setattr(mm_module, "_capability", lambda index: (9, 0))
    monkeypatch.setattr(mm_module, "WS_TILES", (mm_module.WsTile(mm_module.TileConfig(*tile), 1.0),))
    dev = torch.device("cuda", 0)
    # 136 persistent tiles (2 waves) against 136 or 144 cooperative ones (2 waves): level, and
    # 272 or 288 128x128 tiles' worth is under WS_MIN_WAVES a SM (ping-pong: 3 waves of half)
    assert default_variant(2176, 2048, 512, dev, torch.bfloat16) == "persistent"
    # level at whole waves, from exactly WS_MIN_WAVES x 132 128x128 tiles' worth (264 of either)
    assert default_variant(1536, 5632, 4096, dev, torch.bfloat16) == "warp_specialized"
    assert default_variant(4096, 4096, 4096, dev, torch.bfloat16) == "warp_specialized"  # 4 waves each


def test_ws_config_picks_the_cheaper_tile(monkeypatch) -> None:
    # Two tiles: ping-pong 128x128 (the unit) and a cooperative 128x256 at 0.98 of it, plain
    # products only.  At whole waves of both the cooperative tile is cheaper; where ping-pong's
    # half-filled last wave saves a wave it wins; an epilogue keeps ping-pong.
    pp, coop = mm_module.TileConfig(128, 128, 64, 8, 5, 4), mm_module.TileConfig(128, 256, 32, 8, 6, 8)
    monkeypatch.setattr(mm_module, "INTERPRETER", False)
    monkeypatch.setattr(mm_module, "sm_count", lambda device: 132)
    monkeypatch.setattr(mm_module, "_capability", lambda index: (9, 0))
    WsTile = mm_module.WsTile
    monkeypatch.setattr(mm_module, "WS_TILES", (WsTile(pp, 1.0), WsTile(coop, 0.98, epilogues=False)))
    ws_config, ws_cost = mm_module.ws_config, mm_module.ws_cost
    assert ws_cost(pp, 4096, 4096, 4096, 132) == 4.0  # 1024 tiles: 8 waves of half a tile-time
    assert ws_cost(coop, 4096, 4096, 4096, 132) == pytest.approx(4 * 0.98)  # 512: 4 waves
    assert ws_config(4096, 4096, 4096, 132) == coop
    assert ws_config(8192, 8192, 8192, 132) == coop  # 16 waves against 32 half waves
    assert ws_config(4096, 4096, 4096, 132, "bias_gelu") == pp  # not fitted with an epilogue
    assert ws_config(4096, 4096, 4096, 132, "residual") == pp
    # 384 ping-pong tiles: 3 half waves (1.5); 192 cooperative ones: 2 whole waves (1.96)
    assert ws_config(1536, 4096, 8192, 132) == pp
    assert ws_cost(pp, 1536, 4096, 8192, 132) == 1.5
    # a K tail: 4 steps more a tile of 65 (64-deep steps) for either tile where K is not a multiple of its step
    assert ws_cost(coop, 4096, 4096, 4100, 132) == pytest.approx(4 * 0.98 * (1 + 4 / 65))
    assert ws_cost(coop, 4096, 4096, 4128, 132) == pytest.approx(4 * 0.98)  # 4128 = 129 x 32
    dev = torch.device("cuda", 0)
    assert default_variant(4096, 4096, 4096, dev, torch.bfloat16) == "warp_specialized"  # 3.92 < 4 whole waves
    assert mm_module.default_config("warp_specialized", torch.bfloat16, 4096, 4096, k=4096) == coop
    assert mm_module.default_config("warp_specialized", torch.bfloat16, 4096, 4096, k=4096, epilogue="bias") == pp
    # level tile-times: the first listed
    monkeypatch.setattr(mm_module, "WS_TILES", (WsTile(pp, 1.0), WsTile(coop, 1.0, epilogues=False)))
    assert ws_config(4096, 4096, 4096, 132) == pp
    # the prepared launch runs the chosen tile (eligibility forced; the plan only, on the CPU)
    monkeypatch.setattr(mm_module, "WS_TILES", (WsTile(pp, 1.0), WsTile(coop, 0.98, epilogues=False)))
    a, b = torch.empty(4096, 4096, dtype=torch.bfloat16), torch.empty(4096, 4096, dtype=torch.bfloat16)
    for epilogue, bias, want in ((None, None, coop), ("bias", torch.empty(4096, dtype=torch.bfloat16), pp)):
        _, _, grid, _, consts, *_ = _ws_plan(a, b, monkeypatch, epilogue=epilogue, bias=bias)
        named = dict(zip(mm_module._WS.const_names, consts, strict=True))
        got = (named["BLOCK_M"], named["BLOCK_N"], named["BLOCK_K"], named["S"], named["COOP"])
        assert got == (want.block_m, want.block_n, want.block_k, want.num_stages, want.num_warps == 8)
        assert grid == (132, 1, 1)


def test_ws_tiles_follow_the_gpu_name(monkeypatch) -> None:
    # The H100 SXM has a table of its own (ping-pong at 1.06 of the persistent kernel's
    # tile-time, and a cooperative 128x256x32 tile at 1.0 for plain products only); any other
    # name, and CPU tensors, the H200's.
    monkeypatch.setattr(mm_module, "INTERPRETER", False)
    monkeypatch.setattr(mm_module, "sm_count", lambda device: 132)
    monkeypatch.setattr(mm_module, "_capability", lambda index: (9, 0))
    names = ["NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H20"]
    monkeypatch.setattr(mm_module, "_gpu_name", names.__getitem__)
    h100, h200, *others = (torch.device("cuda", i) for i in range(len(names)))
    pp, coop, WsTile = mm_module.WS_CONFIG, mm_module.COOP_CONFIG, mm_module.WsTile
    assert coop == TileConfig(128, 256, 32, 8, 6, 8)
    table = mm_module.ws_tiles(h100)
    assert table == (WsTile(pp, 1.06), WsTile(coop, 1.0, 0.0, epilogues=False))
    for device in (h200, *others, torch.device("cpu")):
        assert mm_module.ws_tiles(device) is mm_module.WS_TILES
    assert (WsTile(pp, 1.0),) == mm_module.WS_TILES  # the H200's: ping-pong alone
    # the H100 probes' shapes: 4096³ is 4 waves of 512 cooperative tiles at 1.0 against 8 half
    # waves of ping-pong's 1024 at 1.06 (4 against 4.24); 1536x4096x8192 is 2 whole waves of
    # 192 (2) against 3 half waves of 384 (1.59)
    ws_config, ws_cost = mm_module.ws_config, mm_module.ws_cost
    assert ws_cost(coop, 4096, 4096, 4096, 132, tiles=table) == 4.0
    assert ws_cost(pp, 4096, 4096, 4096, 132, tiles=table) == pytest.approx(4 * 1.06)
    assert ws_cost(coop, 4096, 4096, 4096, 132) == 4.0  # the H200's table does not list it: 1
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 1024, 1024), (4096, 14336, 4096),
                    (16384, 4096, 1024)):  # fmt: skip
        assert ws_config(m, n, k, 132, None, table) == coop, (m, n, k)
        assert ws_config(m, n, k, 132) == pp
    assert ws_config(1536, 4096, 8192, 132, None, table) == pp
    for epilogue in ("bias", "bias_gelu", "residual"):
        assert ws_config(4096, 4096, 4096, 132, epilogue, table) == pp
    # the dispatch asks the device's table: with a bias, 4096³ is 512 persistent tiles (4
    # waves) against ping-pong's 8 half waves, level on the H200 (and from WS_MIN_WAVES of
    # them: warp-specialized) and 4.24 on the H100; plain, the cooperative tile's 4 waves tie
    # the persistent kernel's there.  2432x6912x7000 (513 persistent tiles: 3.9 waves, the
    # last split along K) ran the persistent kernel 1.24x faster than whole cooperative waves
    # on the H100 (notes/2026-12-07c-probe-ws-configs-h100-heldout-43a8ecb-h100.log).
    for device, want in ((h200, "warp_specialized"), (h100, "persistent"), (others[0], "warp_specialized")):
        assert default_variant(4096, 4096, 4096, device, torch.bfloat16, "bias") == want
        assert default_variant(4096, 4096, 4096, device, torch.bfloat16) == "warp_specialized"
    assert default_variant(2432, 6912, 7000, h100, torch.bfloat16) == "persistent"
    assert default_variant(2560, 2560, 2560, h100, torch.bfloat16) == "persistent"
    km = mm_module
    assert km.default_config("warp_specialized", torch.bfloat16, 4096, 4096, k=4096, tiles=table) == coop
    assert km.default_config("warp_specialized", torch.bfloat16, 4096, 4096, k=4096) == pp
    # the prepared launch runs the device's choice (the plan only, on the CPU: the table patched in)
    monkeypatch.setattr(mm_module, "ws_tiles", lambda device: table)
    a, b = torch.empty(4096, 4096, dtype=torch.bfloat16), torch.empty(4096, 4096, dtype=torch.bfloat16)
    _, _, _, _, consts, *_ = _ws_plan(a, b, monkeypatch)
    named = dict(zip(mm_module._WS.const_names, consts, strict=True))
    assert (named["BLOCK_M"], named["BLOCK_N"], named["BLOCK_K"], named["S"], named["COOP"]) == (128, 256, 32, 6, True)


def test_ws_cost_charges_an_exposed_epilogue_once_a_tile(monkeypatch) -> None:
    # A cooperative tile with a faster main loop (0.965 of ping-pong's tile-time) and an
    # exposed epilogue of 3.4 K steps a tile: ahead only where K is deep enough to hide it.
    pp, coop = mm_module.TileConfig(128, 128, 64, 8, 5, 4), mm_module.TileConfig(128, 256, 64, 8, 3, 8)
    WsTile = mm_module.WsTile
    monkeypatch.setattr(mm_module, "WS_TILES", (WsTile(pp, 1.0), WsTile(coop, 0.965, 3.4, epilogues=False)))
    ws_config, ws_cost = mm_module.ws_config, mm_module.ws_cost
    # 4096³: 64 steps, 4 waves of it against 8 half waves of ping-pong's
    assert ws_cost(coop, 4096, 4096, 4096, 132) == pytest.approx(4 * 0.965 * (1 + 3.4 / 64))
    assert ws_config(4096, 4096, 4096, 132) == pp  # 4.065 against 4
    # 8192³: 128 steps, 16 waves of it against 32 half waves
    assert ws_cost(coop, 8192, 8192, 8192, 132) == pytest.approx(16 * 0.965 * (1 + 3.4 / 128))
    assert ws_config(8192, 8192, 8192, 132) == coop  # 15.85 against 16
    # a short K: 16 steps, where the exposed epilogue is a fifth of the tile
    assert ws_cost(coop, 16384, 1024, 1024, 132) == pytest.approx(4 * 0.965 * (1 + 3.4 / 16))
    assert ws_config(16384, 1024, 1024, 132) == pp
    # the term over K's steps and the K tail multiply (65 steps at 4100; 4100 is no multiple of 64)
    assert ws_cost(coop, 8192, 8192, 4100, 132) == pytest.approx(16 * 0.965 * (1 + 3.4 / 65) * (1 + 4 / 65))
    # ping-pong's epilogue is hidden: no term of its own unless its entry says so
    assert ws_cost(pp, 16384, 1024, 1024, 132) == 4.0
    monkeypatch.setattr(mm_module, "WS_TILES", (WsTile(pp, 1.0, 1.0), WsTile(coop, 0.965, 3.4, epilogues=False)))
    assert ws_cost(pp, 16384, 1024, 1024, 132) == pytest.approx(4.0 * (1 + 1 / 16))


_WS_CODEGEN_PROBE = r"""
import importlib, json, re, subprocess, sys, tempfile
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.experimental.gluon._runtime import GluonASTSource
mm = importlib.import_module("kernels.matmul")
evidence = importlib.import_module("bench.evidence")
mm.ws_eligible = lambda a, b: True
mm.sm_count = lambda device: 132
INTS = ["M", "N", "K", "s_a", "s_b", "s_bias", "s_rm", "s_rn"]
INIT = r"mbarrier\.init\.shared::cta\.b64 \[[^]]+\], (\d+);"  # an mbarrier's arrival count
PTRS = ["a_ptr", "b_ptr", "c_ptr", "pre_ptr", "bias_ptr", "res_ptr"]

def probe(name, a, b, spills=False, **kw):
    (m, k), n = a.shape, b.shape[1]
    args = dict(pre=None, bias=None, residual=None, epilogue=None, precision=None, config=None) | kw
    out = torch.empty(m, n, dtype=a.dtype)
    kernel, _, _, _, consts, warps, _, _, _ = mm._prepare(a, b, out, variant="warp_specialized", index=-1, **args)
    ty = "*bf16" if a.dtype == torch.bfloat16 else "*fp16"
    named = dict(zip(kernel.const_names, consts))
    ints = {i: "i32" if i in "MNK" else "i64" for i in INTS}  # the kernel's annotations
    sig = {**{p: ty for p in PTRS}, **ints, **{c: "constexpr" for c in named}}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(PTRS))}
    k = triton.compile(GluonASTSource(fn=kernel.fn, signature=sig, constexprs=named, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    ptx = k.asm["ptx"]
    report = {"name": name, "wgmma": ptx.count("wgmma.mma_async"), "setmaxnreg": ptx.count("setmaxnreg"),
              "tma_loads": ptx.count("cp.async.bulk.tensor.2d.shared"),
              "tma_stores": ptx.count("cp.async.bulk.tensor.2d.global"), "shared": k.metadata.shared,
              "pointer_stores": ptx.count("st.global.b16"),
              "barrier_counts": sorted({int(c) for c in re.findall(INIT, ptx)}),
              "model": mm.ws_shared_bytes(args["config"] or mm.WS_CONFIG, a.element_size()),
              "tile": evidence._tile(k)}
    if spills:
        with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
            f.write(ptx)
            f.flush()
            done = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"],
                                  capture_output=True, text=True)
        report["ptxas"] = done.stderr
    print(json.dumps(report), flush=True)

bf, fp = torch.bfloat16, torch.float16
a, b = torch.empty(512, 256, dtype=bf), torch.empty(256, 384, dtype=bf)
probe("a b", a, b, spills=True)
probe("a.T b", torch.empty(256, 512, dtype=bf).T, b)
probe("a w.T", a, torch.empty(384, 256, dtype=bf).T)
probe("a.T w.T fp16", torch.empty(256, 512, dtype=fp).T, torch.empty(384, 256, dtype=fp).T)
probe("bias", a, b, epilogue="bias", bias=torch.empty(384, dtype=bf))
probe("bias_gelu + pre", a, b, epilogue="bias_gelu", bias=torch.empty(384, dtype=bf),
      pre=torch.empty(512, 384, dtype=bf))
probe("residual", a, b, epilogue="residual", residual=torch.empty(512, 384, dtype=bf))
probe("coop 256x128", a, b, spills=True, config=mm.TileConfig(256, 128, 64, 8, 3, 8))
probe("coop 128x256 a.T w.T", torch.empty(256, 512, dtype=bf).T, torch.empty(384, 256, dtype=bf).T,
      config=mm.TileConfig(128, 256, 64, 8, 3, 8))
# an odd N: the output's rows (766 bytes) are out of TMA's reach, stored through pointers
odd = torch.empty(256, 383, dtype=bf)
probe("odd N", a, odd, spills=True)
probe("odd N w.T", a, torch.empty(383, 256, dtype=bf).T, spills=True)
probe("odd N bias_gelu + pre", a, odd, epilogue="bias_gelu", bias=torch.empty(383, dtype=bf),
      pre=torch.empty(512, 383, dtype=bf))
probe("odd N coop 256x128", a, odd, spills=True, config=mm.TileConfig(256, 128, 64, 8, 3, 8))
# half-width output tiles (SPLIT): the ring's stages beside them would not fit whole tiles
probe("split ping-pong 6 stages", a, b, spills=True, config=mm.TileConfig(128, 128, 64, 8, 6, 4))
probe("split coop 256x128 4 stages bias_gelu + pre", a, b, spills=True, config=mm.TileConfig(256, 128, 64, 8, 4, 8),
      epilogue="bias_gelu", bias=torch.empty(384, dtype=bf), pre=torch.empty(512, 384, dtype=bf))
probe("odd N split coop 128x256 4 stages", a, odd, spills=True, config=mm.TileConfig(128, 256, 64, 8, 4, 8))
"""


def codegen_reports(probe: str) -> dict[str, dict]:
    """Run a compile probe (Python source printing one JSON report a line, each with a
    "name") in a fresh process without the interpreter: it compiles for sm_90, no GPU needed."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                          timeout=600, cwd=root)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return {r["name"]: r for r in map(json.loads, done.stdout.splitlines())}


_PERSISTENT_CODEGEN_PROBE = r"""
import importlib, json, subprocess, sys, tempfile
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.compiler import ASTSource
mm = importlib.import_module("kernels.matmul")
mm.sm_count = lambda device: 132
mm._tma_available = lambda index: True
PTRS = ["a_ptr", "b_ptr", "c_ptr", "pre_ptr", "bias_ptr", "res_ptr"]

def probe(name, a, b, **kw):
    (m, k), n = a.shape, b.shape[1]
    args = dict(pre=None, bias=None, residual=None, epilogue=None, precision=None, config=None) | kw
    out = torch.empty(m, n, dtype=a.dtype)
    kernel, _, _, _, consts, warps, stages, _, _ = mm._prepare(a, b, out, variant="persistent", index=-1, **args)
    named = dict(zip(kernel.const_names, consts))
    ptrs = {**{p: "*bf16" for p in PTRS}, "part_ptr": "*fp32", "count_ptr": "*i32"}
    sig = {p.name: "constexpr" if p.name in named else ptrs.get(p.name, "i64") for p in kernel.fn.params}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(ptrs))}
    k = triton.compile(ASTSource(fn=kernel.fn, signature=sig, constexprs=named, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
    ptx = k.asm["ptx"]
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        done = subprocess.run([get_ptxas(90).path, "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"],
                              capture_output=True, text=True)
    print(json.dumps({"name": name, "wgmma": ptx.count("wgmma.mma_async"), "c_i32": named["C_I32"],
                      "tma": named["USE_TMA"], "split_tail": named["SPLIT_TAIL"], "shared": k.metadata.shared,
                      "ptxas": done.stderr}), flush=True)

bf = torch.bfloat16  # the weight as tma_copy lays it out: rows padded to 50264
probe("odd N", torch.empty(8192, 768, dtype=bf), torch.empty(768, 50264, dtype=bf)[:, :50257])
probe("odd N bias_gelu", torch.empty(8192, 768, dtype=bf), torch.empty(768, 50264, dtype=bf)[:, :50257],
      epilogue="bias_gelu", bias=torch.empty(50257, dtype=bf), pre=torch.empty(8192, 50257, dtype=bf))
probe("odd N bias", torch.empty(8192, 768, dtype=bf), torch.empty(768, 50264, dtype=bf)[:, :50257],
      epilogue="bias", bias=torch.empty(50257, dtype=bf))
probe("odd N residual", torch.empty(8192, 768, dtype=bf), torch.empty(768, 50264, dtype=bf)[:, :50257],
      epilogue="residual", residual=torch.empty(8192, 50257, dtype=bf))
probe("aligned", torch.empty(4096, 4096, dtype=bf), torch.empty(4096, 4096, dtype=bf))
probe("split tail", torch.empty(6144, 16384, dtype=bf), torch.empty(16384, 768, dtype=bf))  # 144 tiles: 12 split
"""


def test_persistent_kernel_at_an_odd_n_compiles_without_spills() -> None:
    """The persistent kernel for an odd N (8192x50257x768: the weight read from its aligned
    copy, the output stored element by element) compiled for sm_90 with the host's constexprs,
    every epilogue: wgmma, 32-bit output offsets and no register spill (with 64-bit offsets
    the plain product spilled 74 registers on the H200, and bias + GELU 1160 bytes in ptxas
    until its tile was stored in row parts).  Also the plain product with its partial last
    wave split along K (the split tail's second main loop and its sum of slots: no spill
    either; 16 rows of four slots at a time, where 32 rows spilled 112 bytes)."""
    reports = codegen_reports(_PERSISTENT_CODEGEN_PROBE)
    assert len(reports) == 6
    for r in reports.values():
        assert r["wgmma"] > 0 and r["tma"], r
        assert "0 bytes spill stores" in r["ptxas"] and "0 bytes spill loads" in r["ptxas"], r["ptxas"]
    assert reports["odd N"]["c_i32"] and not reports["aligned"]["c_i32"]
    assert reports["split tail"]["split_tail"] and not reports["aligned"]["split_tail"]
    # with an epilogue at an odd N, 3 stages asked for 278,552 bytes of shared memory (every such
    # launch failed on the H200); the host's plan (2 stages there) fits what a program may use
    for name, r in reports.items():
        assert r["shared"] <= 232448, (name, r["shared"])


_PAD_COPY_CODEGEN_PROBE = r"""
import importlib, json, re
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
mm = importlib.import_module("kernels.matmul")
fn = mm._pad_copy_kernel
for name, ty, vec in (("bf16", "*bf16", 8), ("fp32", "*fp32", 4)):
    named = {"VEC": vec, "BLOCK_R": mm._PAD_BLOCK[0], "BLOCK_C": mm._PAD_BLOCK[1]}
    sig = {p.name: "constexpr" if p.name in named else ty if p.name.endswith("_ptr") else "i64" for p in fn.params}
    attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=named, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    stores = sorted(set(re.findall(r"st\.global[.\w]*", k.asm["ptx"])))
    print(json.dumps({"name": name, "stores": stores}), flush=True)
"""


def test_pad_copy_stores_16_byte_vectors() -> None:
    """tma_copy's kernel compiled for sm_90 with its tile: every store a 16-byte vector (the
    destination's rows are whole vectors and the store mask is constant over each)."""
    reports = codegen_reports(_PAD_COPY_CODEGEN_PROBE)
    assert reports["bf16"]["stores"] == ["st.global.v4.b32"] and reports["fp32"]["stores"] == ["st.global.v4.b32"]


def test_ws_kernel_compiles_for_hopper_with_partitions_wgmma_and_tma() -> None:
    """Compiles the warp-specialized kernel for sm_90 with the constexprs the host's plan passes
    (layouts, every epilogue, both schedules; no GPU needed) and reads the PTX: wgmma, the
    ``setmaxnreg`` of the partitions, TMA loads and stores (2-byte pointer stores, no TMA
    store, for an odd N), shared memory within the host's model of it (which admits configs)
    and the Hopper limit, and no register spills."""
    reports = codegen_reports(_WS_CODEGEN_PROBE)
    assert len(reports) == 16
    for name, r in reports.items():
        assert r["wgmma"] > 0 and r["setmaxnreg"] > 0, r
        assert r["tma_loads"] >= 2, r
        if name.startswith("odd N"):  # 2-byte stores, no TMA store
            assert r["tma_stores"] == 0 and r["pointer_stores"] > 0, r
        else:
            assert r["tma_stores"] >= 1 and r["pointer_stores"] == 0, r
        assert r["shared"] <= r["model"] <= mm_module.WS_SHARED_LIMIT, r
        if "ptxas" in r:
            assert "0 bytes spill stores" in r["ptxas"] and "0 bytes spill loads" in r["ptxas"], r["ptxas"]
    assert reports["bias_gelu + pre"]["tma_stores"] > reports["bias"]["tma_stores"]  # z, then gelu(z)
    assert reports["odd N bias_gelu + pre"]["pointer_stores"] == 2 * reports["odd N"]["pointer_stores"]
    # Half-width output tiles: two TMA stores a tile where one stored it whole, in a shared
    # footprint that whole tiles beside that ring would have taken past the limit.
    assert reports["split ping-pong 6 stages"]["tma_stores"] == 2 * reports["a b"]["tma_stores"]
    split_gelu = reports["split coop 256x128 4 stages bias_gelu + pre"]
    assert split_gelu["tma_stores"] == 2 * reports["bias_gelu + pre"]["tma_stores"]
    assert reports["odd N split coop 128x256 4 stages"]["pointer_stores"] > 0
    # The tile the sweep records (bench.evidence): the ring's depth, not Triton's num_stages
    # (1 for a Gluon kernel), and the warps of every partition (4 + 4 consumers + 4 loading).
    assert reports["a b"]["tile"] == "128x128x64, 5 stages, 12 warps"  # WS_CONFIG
    assert reports["split ping-pong 6 stages"]["tile"] == "128x128x64, 6 stages, 12 warps"
    assert reports["coop 256x128"]["tile"] == "256x128x64, 3 stages, 12 warps"
    # A stage of the ring is released by every consumer that read it: two in the cooperative
    # schedule (both read each stage), one in ping-pong (each stage belongs to one tile).
    for name, r in reports.items():
        assert r["barrier_counts"] == ([1, 2] if "coop" in name else [1]), (name, r["barrier_counts"])


def test_dispatch_is_eager_unless_told_captured(monkeypatch) -> None:
    # kills X2: dispatch()'s own default must be the eager choice (a caller that does not say is eager)
    monkeypatch.setattr(mm_module, "default_variant", lambda *args: "split_k" if args[8] else "autotuned")
    a, b = torch.empty(16, 4096, dtype=torch.bfloat16), torch.empty(4096, 4096, dtype=torch.bfloat16)
    assert dispatch(a, b) == "autotuned"
    assert dispatch(a, b, captured=True) == "split_k"


@pytest.mark.parametrize("m", [13, 128])  # 128: the last decode row count (kills R1, R8)
def test_decode_warm_up_and_capture_at_every_decode_row_count(monkeypatch, m) -> None:
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    ran = []
    real_prepare = mm_module._prepare
    monkeypatch.setattr(mm_module, "_prepare", lambda *args: ran.append(args[6]) or real_prepare(*args))
    monkeypatch.setattr(mm_module, "default_variant", lambda *args: "split_k" if args[8] else "fixed")
    a, b = randn((m, 40), torch.bfloat16, "edge"), randn((40, 9), torch.bfloat16, "edge2")
    matmul(a, b)
    assert ran == ["split_k", "fixed"]  # the warm-up runs wherever the two choices differ
    monkeypatch.setattr(mm_module, "capturing", lambda: True)
    assert_close(matmul(a, b), reference(a, b), torch.bfloat16, "captured")
    assert ran == ["split_k", "fixed", "split_k"]  # the captured call is a key of its own


def test_decode_warm_up_prepares_what_the_captured_call_launches(monkeypatch) -> None:
    # kills R13, R14 (and a warm-up that drops bias/residual): the warm-up must load the very
    # kernel the capture will launch -- same epilogue, precision and epilogue operands.
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    ran = []
    real_prepare = mm_module._prepare

    def spy(a, b, out, pre, bias, residual, variant, epilogue, precision, config, index):
        ran.append((variant, epilogue, precision, bias is not None))
        return real_prepare(a, b, out, pre, bias, residual, variant, epilogue, precision, config, index)

    monkeypatch.setattr(mm_module, "_prepare", spy)
    monkeypatch.setattr(mm_module, "default_variant", lambda *args: "split_k" if args[8] else "fixed")
    a, b = randn((13, 40), torch.float32, "wu"), randn((40, 9), torch.float32, "wu2")
    bias = randn((9,), torch.float32, "wu3")
    matmul(a, b, epilogue="bias", bias=bias, precision="tf32")
    assert ran == [("split_k", "bias", "tf32", True), ("fixed", "bias", "tf32", True)]


def test_compiled_kernels_runs_only_the_eager_choice(monkeypatch) -> None:
    # kills R6: compiled_kernels() (the sweep's evidence) must record the call's own kernels,
    # not the capture warm-up's as well
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    ran = []
    real_prepare = mm_module._prepare
    monkeypatch.setattr(mm_module, "_prepare", lambda *args: ran.append(args[6]) or real_prepare(*args))
    monkeypatch.setattr(mm_module, "default_variant", lambda *args: "split_k" if args[8] else "fixed")
    compiled_kernels(randn((13, 40), torch.bfloat16, "ck"), randn((40, 9), torch.bfloat16, "ck2"), variant=None)
    assert ran == ["fixed"]


def test_a_captured_call_chooses_once(monkeypatch) -> None:
    # kills R7: a captured call asks only the captured choice (no eager warm-up check during capture)
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    chosen = []
    monkeypatch.setattr(mm_module, "default_variant", lambda *args: chosen.append(args[8]) or "fixed")
    monkeypatch.setattr(mm_module, "capturing", lambda: True)
    matmul(randn((13, 40), torch.bfloat16, "c1"), randn((40, 9), torch.bfloat16, "c2"))
    assert chosen == [True]
