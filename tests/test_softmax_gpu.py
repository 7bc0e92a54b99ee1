"""The softmax checks at real sizes, on a GPU (``pytest -m gpu``)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tolerances import assert_close

import kernels
from kernels.softmax import (
    _bwd_block,
    _bwd_looped,
    _bwd_split_dots,
    _bwd_split_one_launch,
    _bwd_split_write,
    _fwd_block,
    _fwd_looped,
    _fwd_split_one_launch,
    _fwd_split_stats,
    _fwd_split_write,
    backward_rows,
    forward_rows,
    plan_for,
)

pytestmark = pytest.mark.gpu
DTYPES = [torch.bfloat16, torch.float16, torch.float32]
KERNELS = [
    _fwd_block,
    _fwd_looped,
    _fwd_split_stats,
    _fwd_split_write,
    _bwd_block,
    _bwd_looped,
    _bwd_split_dots,
    _bwd_split_write,
    _fwd_split_one_launch,
    _bwd_split_one_launch,
]


def ref_softmax(x: torch.Tensor) -> torch.Tensor:
    xd = x.double()
    y = torch.softmax(xd, dim=-1)
    return torch.where(torch.isneginf(xd).all(-1, keepdim=True), torch.zeros_like(y), y)


def randn(shape, dtype, scale=4.0):
    return (torch.randn(shape, device="cuda", dtype=torch.float32) * scale).to(dtype)


SHAPES = [
    ((16384, 4096), None),
    ((8192, 32768), None),
    ((4, 32769), None),
    ((4, 32769), "looped"),
    ((64, 131072), None),
    ((64, 131072), "looped"),
    ((8, 1048576), None),
    ((8, 1048576), "looped"),
    ((1, 1048576), "split"),
    ((300, 12289), "split"),
    ((2048, 16384), "block"),
    ((1, 1), None),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("shape", "plan"), SHAPES, ids=str)
def test_real_sizes_every_plan(shape, plan, dtype) -> None:
    x = randn(shape, dtype).requires_grad_()
    y = kernels.softmax(x, plan=plan)
    assert_close(y, ref_softmax(x.detach()), dtype, "y")
    dy = randn(shape, dtype, 1.0)
    (dx,) = torch.autograd.grad(y, x, dy)
    yd, dyd = y.detach().double(), dy.double()
    assert_close(dx, yd * (dyd - (yd * dyd).sum(-1, keepdim=True)), dtype, "dx")


@pytest.mark.parametrize("plan", ["block", "looped", "split"])
@pytest.mark.parametrize("width", [4096, 32769, 131072])
def test_masked_rows_at_real_widths(plan, width) -> None:
    if plan == "block" and width > 32768:
        pytest.skip("a single block does not hold this row")
    x = randn((8, width), torch.bfloat16)
    x[0, : width // 2] = float("-inf")
    x[1] = float("-inf")
    x[2, 1:] = float("-inf")
    x[3, :-1] = float("-inf")
    y = kernels.softmax(x, plan=plan)
    assert torch.isfinite(y).all() and (y[1] == 0).all() and y[2, 0] == 1 and y[3, -1] == 1
    assert_close(y, ref_softmax(x), torch.bfloat16)


def test_offsets_past_two_to_the_31() -> None:
    rows, width = 65600, 32768  # 2.15e9 elements: row * stride overflows int32
    x = torch.randn((rows, width), device="cuda", dtype=torch.bfloat16)
    y = kernels.softmax(x)
    tail = slice(rows - 3, rows)
    assert_close(y[tail], ref_softmax(x[tail]), torch.bfloat16)


def _compiled_kernels() -> int:
    return sum(len(cache[0]) for k in KERNELS for cache in k.device_caches.values())


@pytest.mark.parametrize(("width", "plan"), [(4096, "block"), (127, "block"), (40000, "looped"), (40000, "split")])
def test_new_row_counts_never_recompile(width, plan) -> None:
    def step(rows: int) -> None:
        x = randn((rows, width), torch.bfloat16).requires_grad_()
        torch.autograd.grad(kernels.softmax(x, plan=plan), x, torch.ones_like(x))

    step(5)  # compiles this width's forward and backward kernels
    before = _compiled_kernels()
    for rows in (1, 2, 3, 16, 17, 129, 1000, 4099):
        step(rows)
    assert _compiled_kernels() == before


def test_torch_compile_fullgraph_matches_eager() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return kernels.softmax(x * 1.5, plan=None).sum(dim=0)

    compiled = torch.compile(f, fullgraph=True)
    for rows in (64, 1000):
        x = randn((rows, 4096), torch.bfloat16).requires_grad_()
        out_c, out_e = compiled(x), f(x)
        torch.testing.assert_close(out_c, out_e)
        g = torch.randn_like(out_e)
        (gc,) = torch.autograd.grad(out_c, x, g)
        (ge,) = torch.autograd.grad(out_e, x, g)
        torch.testing.assert_close(gc, ge)


def test_registered_op_opcheck_on_gpu() -> None:
    from kernels.softmax import _softmax_op

    for plan in (None, "looped", "split"):
        torch.library.opcheck(_softmax_op, (randn((33, 5000), torch.float32).requires_grad_(), plan))


@pytest.mark.parametrize("one_launch", [True, False])
@pytest.mark.parametrize("shape", [(4, 32769), (64, 131072), (8, 1048576), (130, 20000)])
def test_split_one_and_two_launches_agree_and_repeat(shape, one_launch) -> None:
    x = randn(shape, torch.bfloat16)
    x[0, : shape[1] // 2] = float("-inf")
    x[-1] = float("-inf")
    plan = dataclasses.replace(plan_for(x, "split"), one_launch=one_launch)
    assert not plan_for(x, "split").one_launch  # the planner's own choice is two launches
    y = torch.full_like(x, float("nan"))
    forward_rows(x, y, plan)
    assert_close(y, ref_softmax(x), torch.bfloat16)
    dy = randn(shape, torch.bfloat16, 1.0)
    dx = torch.full_like(x, float("nan"))
    backward_rows(y, dy, dx, plan)
    yd, dyd = y.double(), dy.double()
    assert_close(dx, yd * (dyd - (yd * dyd).sum(-1, keepdim=True)), torch.bfloat16, "dx")
    # A race between the row's programs would show as a result that changes between calls.
    for _ in range(50):
        y2, dx2 = torch.empty_like(y), torch.empty_like(dx)
        forward_rows(x, y2, plan)
        backward_rows(y, dy, dx2, plan)
        assert torch.equal(y2, y) and torch.equal(dx2, dx)


def test_one_launch_split_is_allowed_only_where_it_cannot_deadlock() -> None:
    from kernels._rowwise import one_launch_split_ok

    assert one_launch_split_ok(256, 132) and not one_launch_split_ok(265, 132)
