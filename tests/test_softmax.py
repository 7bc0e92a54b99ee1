"""Softmax against float64 references and torch.softmax, in every plan, through the Triton
interpreter on CPU tensors (the GPU file repeats the checks at real sizes).

Every input is drawn from a generator seeded by the test's own parameters (the same numbers
in every process), rows are peaked like logits, outputs land in NaN-poisoned buffers with
guard rows and guard columns around them, and non-finite rows are compared with
torch.softmax row by row."""

from __future__ import annotations

import zlib

import pytest
import torch
from tolerances import TOL, assert_close

import kernels
from kernels import _launch
from kernels._rowwise import ALIGN_NONE, ALIGN_ROWS, ALIGN_WINDOW, RowPlan, row_layout
from kernels.softmax import _softmax_op, backward_rows, forward_rows

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def gen(*key: object) -> torch.Generator:
    """A generator seeded from the test's parameters: stable across processes (unlike hash())."""
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


def randn(shape, dtype, key, scale: float = 4.0, shift: float = 0.0) -> torch.Tensor:
    return (torch.randn(shape, generator=gen(key, shape, str(dtype)), dtype=torch.float64) * scale + shift).to(dtype)


def reference(x: torch.Tensor) -> torch.Tensor:
    """float64 softmax where an all -inf row gives zeros (torch gives NaN there)."""
    xd = x.double()
    y = torch.softmax(xd, dim=-1)
    dead = torch.isneginf(xd).all(dim=-1, keepdim=True)
    return torch.where(dead, torch.zeros_like(y), y)


def reference_grad(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """float64 gradient from the forward output the backward receives (the kernel's own,
    rounded y: that isolates the backward's error; y itself is checked separately)."""
    y, dy = y.detach().double(), dy.double()
    return y * (dy - (y * dy).sum(dim=-1, keepdim=True))


# Small chunks drive the looped and split kernels through many iterations, a ragged last
# chunk and (span 3) programs that walk several blocks, at widths the interpreter can afford.
SMALL_PLANS = [
    RowPlan("looped", block=64, num_warps=2),
    RowPlan("split", block=64, num_warps=2, chunks=5),
    RowPlan("split", block=32, num_warps=1, chunks=11),
    RowPlan("split", block=32, num_warps=1, chunks=4, span=3),
    # The row's last whole block (300 // 32 = 9) is the second of its chunk's four: the
    # per-block full/masked choice inside a chunk, not only at its start.
    RowPlan("split", block=32, num_warps=1, chunks=3, span=4),
    # The one-launch split: under the interpreter five programs (kernels._launch.FastKernel.
    # resident) run one after another, so the first takes every ticket (each chunk's reduce,
    # then each chunk's apply, whose wait finds its row done) and the rest find none left.
    RowPlan("split", block=32, num_warps=1, chunks=11, one_launch=True),
    RowPlan("split", block=32, num_warps=1, chunks=3, span=4, one_launch=True),
    RowPlan("block", block=512, num_warps=4, rows_per_program=4),
]


LAYOUTS = {"rows": ALIGN_ROWS, "window": ALIGN_WINDOW, "none": ALIGN_NONE}


# Outputs' guards hold a finite value no kernel computes here: a NaN guard would not show a
# stray write of NaN (what reading an input's NaN guard produces).
OUT_POISON = 1234.0


def guarded(
    rows: int, width: int, dtype: torch.dtype, layout: str, fill: float = float("nan")
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(buffer, view, lead): a buffer filled with ``fill`` (NaN for inputs, OUT_POISON for
    outputs) holding a ``[rows, width]`` view with a guard row above and below and guard
    columns on both sides, laid out so that the view's rows are 16-byte aligned ("rows"),
    misaligned by the same amount in every tensor of that geometry ("window"), or start on
    a misaligned pointer ("none")."""
    vec = 16 // torch.empty((), dtype=dtype).element_size()
    stride = -(-width // vec) * vec + 2 * vec + (0 if layout == "rows" else 5)  # 5: rows shifted by 5 elements
    lead = vec if layout != "none" else vec + 1
    if layout == "window":
        lead = (-stride) % vec + vec  # the view's first element on a 16-byte boundary, the next rows not
    buf = torch.full((rows + 2, stride), fill, dtype=dtype)
    return buf, buf[1 : rows + 1, lead : lead + width], lead


def guards_intact(buf: torch.Tensor, view: torch.Tensor, lead: int) -> bool:
    """Every element outside the view still holds the buffer's fill (its corner is a guard)."""
    mask = torch.ones_like(buf, dtype=torch.bool)
    mask[1 : view.shape[0] + 1, lead : lead + view.shape[1]] = False
    fill = buf[0, 0]
    if torch.isnan(fill):
        return bool(torch.isnan(buf[mask]).all())
    return bool((buf[mask] == fill).all())


@pytest.mark.parametrize("plan", SMALL_PLANS, ids=lambda p: p.label)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_element_written_and_no_guard_touched(plan, dtype, layout) -> None:
    """Inputs and outputs in poisoned buffers with guard rows and columns, in each of the three
    row layouts, written with every plan, forward and backward.  First in the file: a kernel
    that writes past its rows fails here, inside the guards, before a test with an exactly
    sized output lets it write past the allocation (an interpreter crash)."""
    check_guarded(plan, dtype, layout, 300)


# Row ends that width 300 never puts where they matter: (width, dtype, plan).
EDGE_GEOMETRIES = [
    # The looped plan's last full block: 127 % 64 = 63 is more than a block less one 16-byte
    # group (64 - 4), so a loop bound that counted the window's lead in would read past the row.
    (127, torch.float32, RowPlan("looped", block=64, num_warps=2)),
    (127, torch.float32, RowPlan("split", block=64, num_warps=2, chunks=3)),
    # The row's last partial group starts exactly on a chunk boundary (256 = 8 x 32): written by
    # the chunk it starts, not skipped by both neighbours.
    (260, torch.bfloat16, RowPlan("split", block=32, num_warps=1, chunks=9)),
    (260, torch.bfloat16, RowPlan("looped", block=32, num_warps=1)),
]


@pytest.mark.parametrize(("width", "dtype", "plan"), EDGE_GEOMETRIES, ids=lambda v: str(getattr(v, "label", v)))
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_row_ends_at_block_and_chunk_edges(width, dtype, plan, layout) -> None:
    check_guarded(plan, dtype, layout, width)


def check_guarded(plan: RowPlan, dtype: torch.dtype, layout: str, width: int) -> None:
    _, x, _ = guarded(6, width, dtype, layout)
    x.copy_(masked_rows(width, dtype))
    buf, y, lead = guarded(6, width, dtype, layout, OUT_POISON)
    assert row_layout((x, y))[1] == LAYOUTS[layout]
    forward_rows(x, y, plan)
    assert guards_intact(buf, y, lead), "the forward wrote outside its rows"
    assert torch.isfinite(y).all() and not (y == buf[0, 0]).any(), "an element of the output was never written"
    assert_close(y, reference(x), dtype, "y")
    _, dy, _ = guarded(6, width, dtype, layout)
    dy.copy_(randn((6, width), dtype, "gdy", scale=1.0))
    dbuf, dx, lead = guarded(6, width, dtype, layout, OUT_POISON)
    backward_rows(y, dy, dx, plan)
    assert guards_intact(dbuf, dx, lead), "the backward wrote outside its rows"
    assert torch.isfinite(dx).all() and not (dx == dbuf[0, 0]).any()
    assert_close(dx, reference_grad(y, dy), dtype, "dx")


# (shape, plan): every plan, widths 1 to 40000, misaligned widths (the 16-byte window), 0 and 1 rows.
CASES = [
    ((3, 1), None),
    ((1, 1), None),
    ((5, 127), None),
    ((7, 33), "block"),
    ((33, 100), None),
    ((4, 300), "looped"),
    ((4, 300), "split"),
    ((3, 2049), "looped"),
    ((2, 8193), "looped"),
    ((1, 40000), "split"),
    ((3, 12289), "split"),
    ((2, 3, 65), None),
    ((0, 17), None),
    ((6, 0), None),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("shape", "plan"), CASES, ids=str)
def test_forward_and_gradient_match_float64(shape, plan, dtype) -> None:
    x = randn(shape, dtype, "fwd").requires_grad_()
    y = kernels.softmax(x, plan=plan)
    assert y.shape == x.shape and y.dtype == dtype and y.device == x.device
    assert_close(y, reference(x.detach()), dtype, "y")
    dy = randn(shape, dtype, "dy", scale=1.0)
    (dx,) = torch.autograd.grad(y, x, dy)
    assert dx.dtype == dtype
    assert_close(dx, reference_grad(y, dy), dtype, "dx")


@pytest.mark.parametrize("plan", ["block", "looped", "split"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_large_logits_need_the_max_subtraction(plan, dtype) -> None:
    # exp(1000) overflows float32: only subtracting the row max keeps this finite.
    x = randn((5, 300), dtype, "large", shift=1000.0)
    y = kernels.softmax(x, plan=plan)
    assert torch.isfinite(y).all()
    assert_close(y, reference(x), dtype, "y")


@pytest.mark.parametrize("plan", SMALL_PLANS, ids=lambda p: p.label)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_large_negative_logits_in_every_plan(plan, dtype) -> None:
    """Every logit near -1000: a split plan's merge of per-chunk maxima must pad its unused
    lanes with -inf, not 0 (exp(-1000 - 0) is 0 in every lane: 0 / 0)."""
    x = randn((4, 300), dtype, "negative", shift=-1000.0)
    y = torch.full_like(x, OUT_POISON)
    forward_rows(x, y, plan)
    assert torch.isfinite(y).all()
    assert_close(y, reference(x), dtype, "y")


def masked_rows(width: int, dtype: torch.dtype) -> torch.Tensor:
    x = randn((6, width), dtype, ("masked", width))
    x[0, : width // 2] = float("-inf")  # masked prefix (causal attention)
    x[1, width // 3 :] = float("-inf")  # masked suffix
    x[2] = float("-inf")  # fully masked row
    x[3, torch.randperm(width, generator=gen("perm", width))[: width - 1]] = float("-inf")  # one live element
    x[4, ::2] = float("-inf")  # alternating
    return x


@pytest.mark.parametrize("plan", ["block", "looped", "split"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_masked_rows_give_probabilities_and_dead_rows_zeros(plan, dtype) -> None:
    width = 4099 if plan != "block" else 129
    x = masked_rows(width, dtype).requires_grad_()
    y = kernels.softmax(x, plan=plan)
    assert torch.isfinite(y).all()
    assert (y[2] == 0).all(), "an all -inf row must give zeros"
    assert_close(y, reference(x.detach()), dtype, "y")
    live = y.detach().double().sum(dim=-1)
    assert torch.allclose(live[[0, 1, 3, 4, 5]], torch.ones(5, dtype=torch.float64), atol=TOL[dtype]["rel"] * 2)
    dy = randn(tuple(x.shape), dtype, "mdy", scale=1.0)
    (dx,) = torch.autograd.grad(y, x, dy)
    assert torch.isfinite(dx).all() and (dx[2] == 0).all()
    assert_close(dx, reference_grad(y, dy), dtype, "dx")


NON_FINITE = {
    "nan": lambda x: x.__setitem__((0, 3), float("nan")),
    "pos-inf": lambda x: x.__setitem__((0, -1), float("inf")),
    "pos-and-neg-inf": lambda x: (x.__setitem__((0, 0), float("inf")), x.__setitem__((0, 1), float("-inf"))),
    "nan-and-inf": lambda x: (x.__setitem__((0, 2), float("nan")), x.__setitem__((0, 5), float("inf"))),
    "nan-in-masked-row": lambda x: (
        x.__setitem__((0, slice(None)), float("-inf")),
        x.__setitem__((0, 7), float("nan")),
    ),
    "all-pos-inf": lambda x: x.__setitem__((0, slice(None)), float("inf")),
}


@pytest.mark.parametrize("plan", ["block", "looped", "split"])
@pytest.mark.parametrize("kind", list(NON_FINITE))
def test_non_finite_rows_match_torch_softmax_row_for_row(plan, kind) -> None:
    """A row holding NaN or +inf is NaN everywhere, as in torch.softmax; the other rows are
    untouched by it (forward and backward)."""
    width = 300 if plan != "block" else 77
    x = randn((4, width), torch.float32, ("nonfinite", kind))
    NON_FINITE[kind](x)
    x.requires_grad_()
    y = kernels.softmax(x, plan=plan)
    expect = torch.softmax(x.detach(), dim=-1)
    assert torch.isnan(y[0]).all() and torch.isnan(expect[0]).all()
    assert_close(y[1:], reference(x.detach()[1:]), torch.float32, "finite rows")
    dy = randn((4, width), torch.float32, ("nfdy", kind), scale=1.0)
    (dx,) = torch.autograd.grad(y, x, dy)
    (dx_torch,) = torch.autograd.grad(torch.softmax(x, -1), x, dy)
    assert torch.equal(torch.isnan(dx[0]), torch.isnan(dx_torch[0]))
    assert_close(dx[1:], reference_grad(y[1:], dy[1:]), torch.float32, "dx finite rows")


@pytest.mark.parametrize("plan", ["block", "looped", "split"])
@pytest.mark.parametrize("offset", [0, 1, 8], ids=lambda v: f"col{v}")
def test_strided_and_misaligned_rows_are_read_in_place(plan, offset) -> None:
    base = randn((5, 3000), torch.bfloat16, ("strided", offset))
    x = base[:, offset : offset + 2000]  # row stride 3000, maybe 2 bytes off the 16-byte grid
    y = kernels.softmax(x, plan=plan)
    assert y.is_contiguous()
    assert_close(y, reference(x), torch.bfloat16)


@pytest.mark.parametrize("plan", ["block", "looped", "split"])
def test_rows_of_different_strides_in_one_launch(plan) -> None:
    """x's rows 130 floats apart (the 16-byte grid shifts by 2 floats a row) beside the
    contiguous output, and an upstream gradient whose rows are 320 apart beside y's 300: each
    tensor's rows are read with its own stride, and tensors whose rows shift against each
    other take the unaligned layout."""
    x = randn((4, 130), torch.float32, "stride130")[:, :128]
    y = kernels.softmax(x, plan=plan)
    assert row_layout((x, y))[1] == ALIGN_NONE
    assert_close(y, reference(x), torch.float32, "y")
    x = randn((4, 300), torch.float32, "stride300").requires_grad_()
    y = kernels.softmax(x, plan=plan)
    dy = randn((4, 320), torch.float32, "dy320", scale=1.0)[:, :300]
    (dx,) = torch.autograd.grad(y, x, dy)
    assert_close(dx, reference_grad(y, dy), torch.float32, "dx")


def test_non_collapsible_leading_dims_and_non_contiguous_last_dim() -> None:
    x = randn((4, 3, 50), torch.float16, "perm").transpose(0, 1)
    assert_close(kernels.softmax(x), reference(x), torch.float16)
    xt = randn((37, 9), torch.float32, "t").t()  # last-dimension stride 9: one copy
    assert_close(kernels.softmax(xt), reference(xt), torch.float32)


@pytest.mark.parametrize("dim", [0, 1, -2, 2])
def test_any_dim_like_torch(dim) -> None:
    x = randn((5, 6, 7), torch.float32, ("dim", dim)).requires_grad_()
    y = kernels.softmax(x, dim)
    expect = torch.softmax(x, dim)
    torch.testing.assert_close(y, expect)
    g = randn((5, 6, 7), torch.float32, ("dimg", dim))
    torch.testing.assert_close(torch.autograd.grad(y, x, g)[0], torch.autograd.grad(expect, x, g)[0])


def test_zero_dim_tensor() -> None:
    assert kernels.softmax(torch.tensor(3.5), 0).item() == 1.0
    assert torch.isnan(kernels.softmax(torch.tensor(float("nan")), -1))
    assert kernels.softmax(torch.tensor(2.0)).shape == ()


@pytest.mark.parametrize(("src", "dst"), [(torch.bfloat16, torch.float32), (torch.float32, torch.bfloat16)], ids=str)
def test_dtype_argument_casts_first_like_torch(src, dst) -> None:
    # Values bf16 holds exactly: the interpreter's float32 -> bfloat16 cast does not round like
    # the GPU's (the GPU test checks the rounding against torch).
    x = randn((6, 4099), torch.bfloat16, "dtype").to(src).requires_grad_()
    y = kernels.softmax(x, dtype=dst, plan="looped")
    expect = torch.nn.functional.softmax(x, -1, dtype=dst)
    assert y.dtype == dst
    assert_close(y, reference(x.detach().to(dst)), dst)
    torch.testing.assert_close(y, expect, rtol=TOL[dst]["rel"] * 4, atol=1e-4)
    (dx,) = torch.autograd.grad(y.double().sum() + (y.double() ** 2).sum(), x)
    assert dx.dtype == src


def test_dtype_argument_rounds_the_input_before_the_softmax() -> None:
    # float32 logits that float16 cannot hold exactly: torch casts x to dtype first, so the
    # result is the softmax of the rounded logits, measurably different from the unrounded one.
    x = randn((4, 300), torch.float32, "cast-first", scale=24.0)
    y = kernels.softmax(x, dtype=torch.float16, plan="looped")
    cast_first = reference(x.to(torch.float16))
    assert_close(y, cast_first, torch.float16, "y")
    gap = float((cast_first - reference(x)).abs().max())
    assert gap > 4 * TOL[torch.float16]["atol"], "the inputs must make the order of the cast visible"


def test_integer_input_with_a_floating_dtype() -> None:
    x = torch.randint(-5, 5, (3, 17), generator=gen("int"))
    torch.testing.assert_close(kernels.softmax(x, dtype=torch.float32), torch.softmax(x, -1, dtype=torch.float32))


def _opinfo_samples():
    from torch.testing._internal.common_methods_invocations import op_db

    out = []
    for op in op_db:
        if op.name != "softmax":
            continue
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            if dtype not in op.supported_dtypes("cpu"):
                continue
            for i, s in enumerate(op.sample_inputs("cpu", dtype, requires_grad=True)):
                out.append(pytest.param(s, dtype, id=f"{op.variant_test_name or 'plain'}-{str(dtype)[6:]}-{i}"))
    return out


@pytest.mark.parametrize(("sample", "dtype"), _opinfo_samples())
def test_pytorch_opinfo_samples_forward_and_backward(sample, dtype) -> None:
    """Every sample input PyTorch's OpInfo database has for softmax, through kernels.softmax:
    the forward against torch.softmax, the gradient against float64 from our own output."""
    expect = torch.softmax(sample.input, *sample.args, **sample.kwargs)
    got = kernels.softmax(sample.input, *sample.args, **sample.kwargs)
    assert got.shape == expect.shape and got.dtype == expect.dtype
    out_tol = TOL[got.dtype]
    torch.testing.assert_close(got, expect, rtol=out_tol["rel"] * 2, atol=out_tol["atol"])
    if expect.numel():
        dim = sample.args[0]
        g = torch.randn(expect.shape, generator=gen("opinfo", tuple(expect.shape)), dtype=torch.float64).to(got.dtype)
        (have,) = torch.autograd.grad(got, sample.input, g)
        y, g64 = got.detach().double(), g.double()
        want = y * (g64 - (y * g64).sum(dim, keepdim=True))
        assert have.dtype == sample.input.dtype
        tol = TOL[sample.input.dtype if sample.input.element_size() < got.element_size() else got.dtype]
        torch.testing.assert_close(have.double(), want, rtol=tol["rel"] * 2, atol=tol["atol"])


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda: torch.ones(4, 8, dtype=torch.int32), TypeError, ["x", "int32", "dtype="]),
        (lambda: [1.0, 2.0], TypeError, ["x", "torch.Tensor"]),
        (lambda: torch.ones(4, 8, dtype=torch.complex64), TypeError, ["x", "complex64"]),
    ],
    ids=["int-without-dtype", "not-a-tensor", "complex"],
)
def test_bad_input_names_the_argument(make, error, words) -> None:
    with pytest.raises(error) as info:
        kernels.softmax(make())
    for w in words:
        assert w in str(info.value), f"{w!r} not in {info.value}"


def test_bad_dim_dtype_and_plan_are_refused() -> None:
    x = randn((3, 5), torch.float32, "bad")
    with pytest.raises(IndexError, match="dim=2 is out of range"):
        kernels.softmax(x, dim=2)
    with pytest.raises(IndexError, match="dim=-3"):
        kernels.softmax(x, dim=-3)
    with pytest.raises(TypeError, match="dtype must be"):
        kernels.softmax(x, dtype=torch.int64)
    with pytest.raises(ValueError, match="plan must be"):
        kernels.softmax(x, plan="fast")


def test_cpu_tensor_refused_outside_the_interpreter(monkeypatch) -> None:
    from kernels import _checks  # every functional's device check

    monkeypatch.setattr(_checks, "INTERPRETER", False)
    x = torch.ones(2, 3)
    with pytest.raises(ValueError, match=r"softmax: x is on device 'cpu'; expected a CUDA tensor"):
        kernels.softmax(x)
    with pytest.raises(ValueError, match=r"rms_norm: x is on device 'cpu'; expected a CUDA tensor"):
        kernels.rms_norm(x, (3,))
    with pytest.raises(ValueError, match=r"row_sum: x is on device 'cpu'; expected a CUDA tensor"):
        kernels.row_sum(x)
    with pytest.raises(ValueError, match=r"add: a is on device 'cpu'; expected a CUDA tensor"):
        kernels.add(x, x)


def test_registered_op_passes_opcheck() -> None:
    x = randn((3, 70), torch.float32, "opcheck").requires_grad_()
    torch.library.opcheck(_softmax_op, (x, None, None))
    torch.library.opcheck(_softmax_op, (x, "split", None))
    torch.library.opcheck(
        _softmax_op, (randn((2, 33), torch.bfloat16, "opcheck2").requires_grad_(), None, torch.float32)
    )


def test_meta_tensors_and_fake_mode_take_the_registered_op() -> None:
    y = kernels.softmax(torch.empty(4, 10, device="meta"), dtype=torch.float64)
    assert y.device.type == "meta" and y.shape == (4, 10) and y.dtype == torch.float64


def test_launch_cache_is_not_used_by_the_interpreter() -> None:
    assert _launch.INTERPRETER


def test_one_launch_split_leaves_its_counters_at_zero(monkeypatch) -> None:
    # The stream's cached counters are never zeroed again: the last program out must put the
    # tickets, the programs-out count and every row's ready count back to 0.
    from kernels import _rowwise

    real, seen = _rowwise._one_launch_scratch, []

    def scratch(n_rows, chunks, device, dtype):  # type: ignore[no-untyped-def]
        stats, sync = real(n_rows, chunks, device, dtype)
        seen.append(sync)
        return stats, sync

    monkeypatch.setattr(_rowwise, "_one_launch_scratch", scratch)
    x = randn((6, 300), torch.float32, "counters")
    for plan in (RowPlan("split", block=32, num_warps=1, chunks=10, one_launch=True),
                 RowPlan("split", block=32, num_warps=1, chunks=3, span=4, one_launch=True)):  # fmt: skip
        y = torch.full_like(x, float("nan"))
        forward_rows(x, y, plan)
        assert_close(y, reference(x), torch.float32)
        assert seen and seen[-1].numel() == 2 + 6 and not seen[-1].any(), seen[-1]


def test_the_staged_plan_is_refused_where_it_cannot_run() -> None:
    # A Gluon kernel: no interpreter (and no CPU); the error says what it needs.
    x = randn((4, 300), torch.float32, "staged")
    with pytest.raises(ValueError, match="plan 'staged' needs an NVIDIA GPU"):
        kernels.softmax(x, plan="staged")
    with pytest.raises(ValueError, match="plan must be"):
        kernels.softmax(x, plan="tiled")
