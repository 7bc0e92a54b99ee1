"""Row sum and vector add against float64 references and torch, through the Triton
interpreter on CPU tensors: every row plan and every block size, poisoned guard regions,
non-finite inputs, PyTorch's OpInfo samples, errors and the registered ops."""

from __future__ import annotations

import pytest
import torch
from test_softmax import LAYOUTS, OUT_POISON, SMALL_PLANS, gen, guarded, randn
from tolerances import TOL, assert_close

import kernels
from kernels import rowsum, vector_add
from kernels._rowwise import row_layout
from kernels.rowsum import sum_rows
from kernels.vector_add import BLOCKS, add_flat

# ----------------------------------------------------------------------- row sum


@pytest.mark.parametrize("plan", SMALL_PLANS, ids=lambda p: p.label)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_row_sum_every_plan_reads_only_its_rows(plan, dtype, layout) -> None:
    """Rows inside NaN-filled guard rows and columns: a plan that reads past its row (or
    into the neighbouring 16-byte group's elements without masking them) sums a NaN."""
    _, x, _ = guarded(6, 300, dtype, layout)
    x.copy_(randn((6, 300), dtype, ("rs", layout)))
    assert row_layout((x,))[1] == LAYOUTS[layout]
    out = torch.full((8,), OUT_POISON, dtype=dtype)
    sum_rows(x, out[1:-1], plan)
    assert (out[[0, -1]] == OUT_POISON).all(), "wrote outside its output"
    assert not (out[1:-1] == OUT_POISON).any(), "a row's sum was never written"
    assert_close(out[1:-1], x.double().sum(-1), dtype, "sums")


RS_CASES = [((3, 1), None), ((5, 127), None), ((4, 300), "looped"), ((4, 300), "split"), ((3, 2049), "looped"),
            ((1, 40000), "split"), ((2, 3, 65), None), ((0, 17), None), ((6, 0), None), ((9,), None)]  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize(("shape", "plan"), RS_CASES, ids=str)
def test_row_sum_matches_float64_and_broadcasts_its_gradient(shape, plan, dtype) -> None:
    x = randn(shape, dtype, "rsum").requires_grad_()
    y = kernels.row_sum(x, plan=plan)
    assert y.shape == x.shape[:-1] and y.dtype == dtype
    assert_close(y, x.detach().double().sum(-1), dtype, "sum")
    assert kernels.row_sum(x.detach(), keepdim=True, plan=plan).shape == (*x.shape[:-1], 1)
    dy = randn(tuple(y.shape), dtype, "rsumdy", scale=1.0)
    (dx,) = torch.autograd.grad(y, x, dy)
    assert dx.shape == x.shape and torch.equal(dx, dy.unsqueeze(-1).expand(x.shape))


@pytest.mark.parametrize("plan", ["block", "looped", "split"])
def test_row_sum_non_finite_like_torch_and_large_rows(plan) -> None:
    x = randn((5, 3000), torch.float32, ("rsnf", plan))
    x[0, 7] = float("nan")
    x[1, 9] = float("inf")
    x[2, 3], x[2, 4] = float("inf"), float("-inf")
    x[3, :] = float("-inf")
    got, want = kernels.row_sum(x, plan=plan), torch.sum(x, -1)
    assert torch.equal(torch.isnan(got), torch.isnan(want)) and torch.equal(torch.isinf(got), torch.isinf(want))
    assert got[1] == want[1] and got[3] == want[3]
    assert_close(got[4:], x[4:].double().sum(-1), torch.float32)
    big = randn((2, 70001), torch.bfloat16, ("rsbig", plan), shift=1.0)  # a bias: fp32 accumulation matters
    assert_close(kernels.row_sum(big, plan=plan), big.double().sum(-1), torch.bfloat16)


def test_row_sum_is_bitwise_reproducible() -> None:
    x = randn((7, 5000), torch.float32, "rsdet")
    for plan in ("block", "looped", "split"):
        assert torch.equal(kernels.row_sum(x, plan=plan), kernels.row_sum(x, plan=plan))


def _sum_samples():
    from torch.testing._internal.common_methods_invocations import op_db

    out = []
    for op in op_db:
        if op.name != "sum" or op.variant_test_name:
            continue
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            for i, s in enumerate(op.sample_inputs("cpu", dtype, requires_grad=True)):
                dim = s.kwargs.get("dim", s.args[0] if s.args else None)
                dims = list(dim) if isinstance(dim, (tuple, list)) else [dim]
                n = max(s.input.dim(), 1)
                if len(dims) == 1 and isinstance(dims[0], int) and dims[0] % n == n - 1:  # the last dimension only
                    out.append(pytest.param(s, dtype, id=f"{str(dtype)[6:]}-{i}"))
    return out


@pytest.mark.parametrize(("sample", "dtype"), _sum_samples())
def test_sum_opinfo_samples_over_the_last_dim(sample, dtype) -> None:
    expect = torch.sum(sample.input, *sample.args, **sample.kwargs)
    got = kernels.row_sum(sample.input, *sample.args, **sample.kwargs)
    assert got.shape == expect.shape and got.dtype == expect.dtype
    tol = TOL[dtype]
    torch.testing.assert_close(got, expect, rtol=tol["rel"] * 4, atol=tol["atol"] * 4)
    g = torch.randn(expect.shape, generator=gen("sum", tuple(expect.shape)), dtype=torch.float64).to(dtype)
    (have,) = torch.autograd.grad(got, sample.input, g)
    (want,) = torch.autograd.grad(expect, sample.input, g)
    assert torch.equal(have, want)


# ----------------------------------------------------------------------- vector add


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str)
@pytest.mark.parametrize("n", [1, 1023, 1024, 4097, 3 * 8192 + 5])
def test_add_every_block_size_writes_exactly_its_elements(n, dtype, block) -> None:
    a = randn((n,), dtype, ("a", n))
    b = randn((n,), dtype, ("b", n))
    buf = torch.full((n + 2 * 64,), OUT_POISON, dtype=dtype)
    out = buf[64 : 64 + n]
    add_flat(a, b, out, 0.5, block)
    assert (buf[:64] == OUT_POISON).all() and (buf[64 + n :] == OUT_POISON).all(), "wrote outside its output"
    assert_close(out, a.double() + 0.5 * b.double(), dtype, "a + 0.5 b")


def test_add_launch_cache_key_and_arguments(monkeypatch) -> None:
    """On a GPU, add launches through FastKernel's cache (Triton's own path cost 38-42 µs of
    host time a call): a call whose key is cached passes the compiled launcher the grid,
    the stream and exactly the arguments Triton's path gets; a pointer of another 16-byte
    alignment, another dtype or alpha = 1 is another key."""
    from kernels import _launch

    monkeypatch.setattr(_launch, "current_stream", lambda index: 777)
    n = 3 * 4096 + 5
    a, b = randn((n,), torch.bfloat16, "ka"), randn((n,), torch.bfloat16, "kb")
    out = torch.empty(n, dtype=torch.bfloat16)
    calls: list[tuple] = []
    key = (a.get_device(), torch.bfloat16, torch.bfloat16, torch.bfloat16, True, True, True)
    cached = (key, (4096, True), 8, 3, False, False)
    monkeypatch.setitem(vector_add._ADD._cache, cached, (lambda *args: calls.append(args), "fn", "meta", 0, 0, 0))
    add_flat(a, b, out, 0.5)
    assert len(calls) == 1
    got = calls.pop()  # Triton's C launcher: grid, stream, function, flags, scratches, metadata, hooks
    assert got[:13] == (4, 1, 1, 777, "fn", 0, 0, None, None, "meta", None, None, None)
    assert got[13:] == (a, b, out, n, 0.5, 4096, True)
    for other in (torch.empty(n + 1, dtype=torch.bfloat16)[1:],):  # another alignment: Triton's path
        add_flat(a, b, other, 0.5)
        assert not calls
        assert_close(other, a.double() + 0.5 * b.double(), torch.bfloat16, "misaligned output")
    add_flat(a, b, out, 1.0)  # alpha = 1 compiles without the multiply: another key
    assert not calls
    add_flat(a.float(), b.float(), out.float(), 0.5)
    assert not calls


def test_add_like_torch_gradients_broadcast_promotion_and_non_finite() -> None:
    a = randn((6, 33), torch.float32, "ga").requires_grad_()
    b = randn((33,), torch.float32, "gb").requires_grad_()  # broadcast along rows
    y = kernels.add(a, b, alpha=-2.5)
    torch.testing.assert_close(y, torch.add(a, b, alpha=-2.5))
    g = randn((6, 33), torch.float32, "gg")
    for got, want in zip(torch.autograd.grad(y, (a, b), g), torch.autograd.grad(torch.add(a, b, alpha=-2.5), (a, b), g),
                         strict=True):  # fmt: skip
        torch.testing.assert_close(got, want)
    for da, db, sa, sb in [(torch.bfloat16, torch.float32, (5,), (5,)), (torch.bfloat16, torch.float32, (5,), ()),
                           (torch.float32, torch.float16, (), (5,)), (torch.float16, torch.bfloat16, (), ()),
                           (torch.int64, torch.float16, (5,), ())]:  # fmt: skip
        a, b = randn(sa, torch.float32, "ma").to(da), randn(sb, torch.float32, "mb").to(db)
        assert kernels.add(a, b).dtype == torch.result_type(a, b), (da, db, sa, sb)
    x = torch.tensor([float("nan"), float("inf"), float("inf"), 1.0])
    z = torch.tensor([1.0, 1.0, float("-inf"), float("-inf")])
    torch.testing.assert_close(kernels.add(x, z), x + z, equal_nan=True)


def _add_samples():
    from torch.testing._internal.common_methods_invocations import op_db

    out = []
    for op in op_db:
        if op.name != "add" or op.variant_test_name:
            continue
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            for i, s in enumerate(op.sample_inputs("cpu", dtype, requires_grad=True)):
                if s.args and isinstance(s.args[0], torch.Tensor):
                    out.append(pytest.param(s, dtype, id=f"{str(dtype)[6:]}-{i}"))
    return out


@pytest.mark.parametrize(("sample", "dtype"), _add_samples())
def test_add_opinfo_samples(sample, dtype) -> None:
    expect = torch.add(sample.input, *sample.args, **sample.kwargs)
    got = kernels.add(sample.input, *sample.args, **sample.kwargs)
    assert got.shape == expect.shape and got.dtype == expect.dtype
    tol = TOL[dtype]
    torch.testing.assert_close(got, expect, rtol=tol["rel"], atol=tol["atol"])
    if not expect.numel():
        return
    inputs = [t for t in (sample.input, sample.args[0]) if t.requires_grad]
    g = torch.randn(expect.shape, generator=gen("add", tuple(expect.shape)), dtype=torch.float64).to(dtype)
    for have, want in zip(torch.autograd.grad(got, inputs, g), torch.autograd.grad(expect, inputs, g), strict=True):
        assert have.shape == want.shape and have.dtype == want.dtype
        torch.testing.assert_close(have, want, rtol=tol["rel"], atol=tol["atol"])


# ----------------------------------------------------------------------- errors and ops


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda x: kernels.row_sum(x.int()), TypeError, ["x", "int32"]),
        (lambda x: kernels.row_sum(x, 0), ValueError, ["last dimension", "dim=0"]),
        (lambda x: kernels.row_sum(x, (0, 1)), ValueError, ["dim=(0, 1)"]),
        (lambda x: kernels.row_sum(x, plan="tiled"), ValueError, ["plan"]),
        (lambda x: kernels.add(x, x.int().int() * 0 + 1, alpha=True), TypeError, ["alpha"]),
        (lambda x: kernels.add(x.int(), x.int()), TypeError, ["promote", "int32"]),
        (lambda x: kernels.add(x, torch.ones(3, 5)), ValueError, ["broadcast", "[4, 8]", "[3, 5]"]),
        (lambda x: kernels.add(x, x, block=100), ValueError, ["block", "100"]),
        (lambda x: kernels.add(x, 1.0), TypeError, ["b", "torch.Tensor"]),
    ],
    ids=["rs-int", "rs-dim", "rs-dims", "rs-plan", "add-alpha", "add-int", "add-shape", "add-block", "add-scalar"],
)
def test_bad_input_names_the_argument(call, error, words) -> None:
    with pytest.raises(error) as info:
        call(torch.ones(4, 8))
    for w in words:
        assert w in str(info.value), f"{w!r} not in {info.value}"


def test_registered_ops_pass_opcheck_and_trace() -> None:
    x = randn((3, 17), torch.float32, "opc").requires_grad_()
    y = randn((3, 17), torch.float32, "opcy").requires_grad_()
    torch.library.opcheck(rowsum._row_sum_op, (x, False, None))
    torch.library.opcheck(rowsum._row_sum_op, (x, True, "looped"))
    torch.library.opcheck(vector_add._add_op, (x, y, 1.0, None))
    torch.library.opcheck(vector_add._add_op, (x, y, 0.5, 1024))

    def f(x, y):
        return kernels.row_sum(kernels.add(x, y, alpha=2.0)).sum()

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    got = torch.autograd.grad(compiled(x, y), (x, y))
    want = torch.autograd.grad(f(x, y), (x, y))
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)
    assert kernels.row_sum(torch.empty(4, 10, device="meta")).shape == (4,)
    assert kernels.add(torch.empty(4, 10, device="meta"), torch.empty(10, device="meta")).shape == (4, 10)
