"""The column reduction of the row base (what RMSNorm's weight gradient will use)."""

import pytest
import torch

from kernels._rowwise import column_sum
from kernels.plans import ColumnPlan


@pytest.mark.parametrize(("rows", "width"), [(1, 1), (7, 300), (300, 17), (1000, 513)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_column_sum_matches_float64_and_repeats_bit_for_bit(rows, width, dtype) -> None:
    x = (torch.randn((rows, width), generator=torch.Generator().manual_seed(rows * 7919 + width)) * 3).to(dtype)
    plan = ColumnPlan(block_cols=64, rows_per_split=64, splits=-(-rows // 64), num_warps=4)
    got = column_sum(x, plan)
    want = x.double().sum(dim=0)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    assert torch.allclose(got.double(), want, rtol=tol, atol=tol * max(1.0, float(want.abs().max())))
    assert torch.equal(column_sum(x, plan), got), "the same inputs must give the same bits"


def test_column_sum_edges_and_errors() -> None:
    assert column_sum(torch.empty(0, 5)).eq(0).all()
    assert column_sum(torch.empty(3, 0)).shape == (0,)
    with pytest.raises(ValueError, match="2-D"):
        column_sum(torch.ones(3))


@pytest.mark.parametrize("out_dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_float64_sums_reach_every_output_dtype(out_dtype) -> None:
    """float64 partial sums (float64 inputs: RMSNorm's weight gradient for float64 x and a
    16-bit weight) stored as each output dtype: the value rounded, never reinterpreted bits."""
    g = torch.Generator().manual_seed(64)
    x, y = (torch.randn((130, 24), generator=g, dtype=torch.float64) for _ in range(2))
    scale = torch.rand(130, generator=g, dtype=torch.float64)
    got = column_sum(x, y=y, row_scale=scale, out_dtype=out_dtype)
    want = (x * y * scale[:, None]).sum(dim=0)
    assert got.dtype == out_dtype
    ulp = torch.finfo(out_dtype).eps  # the interpreter truncates to bfloat16: one ulp, not half
    assert torch.allclose(got.double(), want, rtol=ulp, atol=ulp * float(want.abs().max()))


@pytest.mark.parametrize(
    ("width", "x_pad", "y_pad"),
    [(1024, 8, 16), (1024, 4, 0), (264, 8, 8), (1000, 2, 6), (1024, 1, 0), (1004, 4, 12)],
    ids=str,
)
@pytest.mark.parametrize("on", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_strided_rows_inside_nan_guards(width, x_pad, y_pad, on) -> None:
    """Row views of NaN-filled buffers whose rows are ``width + pad`` apart (strides and widths
    that are multiples of 8, 4, 2 and 1 elements: the vector width the launch promises the
    compiler), with ``y`` and a row scale: a load outside a view brings a NaN into a sum.  On
    the GPU too, where a promise the strides do not keep reads misaligned vectors (the
    interpreter ignores the promise)."""
    rows, g = 37, torch.Generator().manual_seed(width * 31 + x_pad * 7 + y_pad)
    xb = torch.full((rows, width + x_pad), float("nan"), dtype=torch.bfloat16, device=on)
    yb = torch.full((rows, width + y_pad), float("nan"), dtype=torch.bfloat16, device=on)
    x, y = xb[:, :width], yb[:, :width]
    x.copy_(torch.randn((rows, width), generator=g))
    y.copy_(torch.randn((rows, width), generator=g))
    scale = torch.rand(rows, generator=g).to(on)
    plan = ColumnPlan(block_cols=128, rows_per_split=16, splits=3, num_warps=4)
    got = column_sum(x, plan, y=y, row_scale=scale, out_dtype=torch.float32)
    want = (x.double() * y.double() * scale.double()[:, None]).sum(dim=0)
    assert not got.isnan().any()
    assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))
