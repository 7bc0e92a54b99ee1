"""Softmax against a float64 reference, in every plan, on odd shapes, with masked rows.

Without a GPU these run through the Triton interpreter on CPU tensors, so shapes stay
small; the GPU file repeats them at real sizes."""

from __future__ import annotations

import pytest
import torch
from tolerances import TOL, assert_close

import kernels
from kernels import _rowwise
from kernels._rowwise import RowPlan
from kernels.softmax import _softmax_op, backward_rows, forward_rows

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def randn(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, scale: float = 4.0) -> torch.Tensor:
    # Fresh draws, scaled so rows are peaked like logits; never zeros.
    return (torch.randn(shape, dtype=torch.float64) * scale).to(dtype).to(device)


def reference(x: torch.Tensor) -> torch.Tensor:
    """float64 softmax where an all -inf row gives zeros (torch gives NaN there)."""
    xd = x.double().cpu()
    y = torch.softmax(xd, dim=-1)
    dead = torch.isneginf(xd).all(dim=-1, keepdim=True)
    return torch.where(dead, torch.zeros_like(y), y)


def reference_grad(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    """float64 gradient from the forward output the backward receives.  Using the kernel's
    own (rounded) ``y`` isolates the backward's error; ``y`` itself is checked against
    float64 separately.  (From the exact ``y`` instead, rows with one or two live elements
    turn bf16's rounding of ``y`` into large relative errors in ``dy - sum(y * dy)``.)"""
    y, dy = y.detach().double().cpu(), dy.double().cpu()
    return y * (dy - (y * dy).sum(dim=-1, keepdim=True))


# (shape, plan): every plan at least once, widths 1 to 40000, 0 and 1 rows.
CASES = [
    ((3, 1), None),
    ((1, 1), None),
    ((5, 127), None),
    ((7, 33), "block"),
    ((33, 100), None),  # 33 rows: packed several rows per program, last program partial
    ((4, 300), "looped"),
    ((4, 300), "split"),
    ((2, 8193), "looped"),
    ((1, 40000), "split"),
    ((2, 3, 65), None),  # leading dimensions
    ((0, 17), None),
    ((6, 0), None),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("shape", "plan"), CASES, ids=lambda v: str(v))
def test_forward_and_gradient_match_float64(shape, plan, dtype, device) -> None:
    torch.manual_seed(hash((shape, plan, str(dtype))) % 2**31)
    x = randn(shape, dtype, device).requires_grad_()
    y = kernels.softmax(x, plan=plan)
    assert y.shape == x.shape and y.dtype == dtype and y.device == x.device
    assert_close(y, reference(x.detach()), dtype, "y")
    dy = randn(shape, dtype, device, scale=1.0)
    (dx,) = torch.autograd.grad(y, x, dy)
    assert_close(dx, reference_grad(y, dy), dtype, "dx")


def masked_rows(width: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    x = randn((6, width), dtype, "cpu")
    x[0, : width // 2] = float("-inf")  # masked prefix (causal attention)
    x[1, width // 3 :] = float("-inf")  # masked suffix
    x[2] = float("-inf")  # fully masked row
    x[3, torch.randperm(width)[: width - 1]] = float("-inf")  # a single live element
    x[4, ::2] = float("-inf")  # alternating
    return x.to(device)


@pytest.mark.parametrize("plan", ["block", "looped", "split"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_masked_rows_give_probabilities_never_nan(plan, dtype, device) -> None:
    width = 4099 if plan != "block" else 129
    x = masked_rows(width, dtype, device).requires_grad_()
    y = kernels.softmax(x, plan=plan)
    assert torch.isfinite(y).all()
    assert (y[2] == 0).all(), "an all -inf row must give zeros"
    assert_close(y, reference(x.detach()), dtype, "y")
    live = y.detach().double().sum(dim=-1).cpu()
    assert torch.allclose(live[[0, 1, 3, 4, 5]], torch.ones(5, dtype=torch.float64), atol=TOL[dtype]["rel"] * 2)
    dy = randn(tuple(x.shape), dtype, device, scale=1.0)
    (dx,) = torch.autograd.grad(y, x, dy)
    assert torch.isfinite(dx).all() and (dx[2] == 0).all()
    assert_close(dx, reference_grad(y, dy), dtype, "dx")


# Small chunks drive the looped and split kernels through many iterations and a ragged
# last chunk at widths the interpreter can afford.
SMALL_PLANS = [
    RowPlan("looped", block=64, num_warps=2),
    RowPlan("split", block=64, num_warps=2, chunks=5),
    RowPlan("split", block=32, num_warps=1, chunks=10),
    RowPlan("block", block=512, num_warps=4, rows_per_program=4),
]


@pytest.mark.parametrize("plan", SMALL_PLANS, ids=lambda p: f"{p.kind}-{p.block}x{p.chunks}")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_multi_chunk_plans_write_every_element(plan, dtype, device) -> None:
    x = masked_rows(300, dtype, device)
    y = torch.full_like(x, float("nan"))  # poisoned: any element left unwritten stays NaN
    forward_rows(x, y, plan)
    assert torch.isfinite(y).all()
    assert_close(y, reference(x), dtype, "y")
    dy = randn(tuple(x.shape), dtype, device, scale=1.0)
    dx = torch.full_like(x, float("nan"))
    backward_rows(y, dy, dx, plan)
    assert torch.isfinite(dx).all()
    assert_close(dx, reference_grad(y, dy), dtype, "dx")


@pytest.mark.parametrize("plan", ["block", "looped", "split"])
def test_strided_rows_are_read_in_place(plan, device) -> None:
    base = randn((5, 3000), torch.float32, device)
    x = base[:, 7:2007]  # row stride 3000, width 2000, last dim contiguous
    assert x.stride() == (3000, 1)
    y = kernels.softmax(x, plan=plan)
    assert y.is_contiguous()
    assert_close(y, reference(x), torch.float32)


def test_non_collapsible_leading_dims(device) -> None:
    x = randn((4, 3, 50), torch.float16, device).transpose(0, 1)  # batch dims permuted
    assert_close(kernels.softmax(x), reference(x), torch.float16)


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda d: torch.ones(4, 8, dtype=torch.int32, device=d), TypeError, ["x", "int32"]),
        (lambda d: torch.tensor(1.0, device=d), ValueError, ["x", "0-d"]),
        (lambda d: torch.ones(8, 4, device=d).t(), ValueError, ["x", "contiguous", "last dimension"]),
        (lambda d: [1.0, 2.0], TypeError, ["x", "torch.Tensor"]),
    ],
    ids=["int-dtype", "0-d", "strided-last-dim", "not-a-tensor"],
)
def test_bad_input_names_the_argument(make, error, words, device) -> None:
    with pytest.raises(error) as info:
        kernels.softmax(make(device))
    for w in words:
        assert w in str(info.value), f"{w!r} not in {info.value}"


def test_cpu_tensor_refused_outside_the_interpreter(monkeypatch) -> None:
    monkeypatch.setattr(_rowwise, "INTERPRETER", False)
    with pytest.raises(ValueError, match=r"x is on device 'cpu'; expected a CUDA tensor"):
        kernels.softmax(torch.ones(2, 3))


def test_bad_dim_and_plan_are_refused(device) -> None:
    x = randn((3, 5), torch.float32, device)
    with pytest.raises(ValueError, match="dim=0"):
        kernels.softmax(x, dim=0)
    with pytest.raises(ValueError, match="plan must be"):
        kernels.softmax(x, plan="fast")
    assert torch.equal(kernels.softmax(x, dim=1), kernels.softmax(x))


def test_registered_op_passes_opcheck(device) -> None:
    x = randn((3, 70), torch.float32, device).requires_grad_()
    torch.library.opcheck(_softmax_op, (x, None))
    torch.library.opcheck(_softmax_op, (x, "split"))
