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
