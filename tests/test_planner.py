"""The row planner (pure Python, kernels/plans.py): which plan for which shape, forcing,
split geometry, and the column-reduction plan; the column sum it drives."""

import dataclasses

import pytest

from kernels.plans import (
    MAX_SPLIT_CHUNKS,
    SOFTMAX_BACKWARD_POLICY,
    SOFTMAX_POLICY,
    RowPolicy,
    plan_columns,
    plan_rows,
    split_geometry,
)

POLICY = RowPolicy()


def test_rows_that_fit_use_one_block_and_the_window_widens_it() -> None:
    plan = plan_rows(16384, 4096, 2, 132, POLICY)
    assert (plan.kind, plan.block, plan.chunks) == ("block", 4096, 1)
    # A misaligned row needs up to 7 more elements of window: 4089 still fits in 4096, 4090 does not.
    assert plan_rows(16384, 4089, 2, 132, POLICY, pad=7).block == 4096
    assert plan_rows(16384, 4090, 2, 132, POLICY, pad=7).block == 8192


def test_narrow_rows_are_packed_only_when_there_are_many() -> None:
    many = plan_rows(32 * 132, 127, 2, 132, POLICY)
    few = plan_rows(32, 127, 2, 132, POLICY)
    assert many.kind == few.kind == "block" and many.block == 128
    assert many.rows_per_program > 1 and few.rows_per_program == 1


def test_few_wide_rows_split_many_wide_rows_loop() -> None:
    assert plan_rows(64, 131072, 2, 132, POLICY).kind == "split"
    assert plan_rows(8, 1048576, 2, 132, POLICY).kind == "split"
    assert plan_rows(4096, 131072, 2, 132, POLICY).kind == "looped"


@pytest.mark.parametrize("width", [32769, 50257, 1048576, 65535 * 4096 + 1000, 2**31 + 16])
def test_split_covers_the_row_with_at_most_1024_chunks(width) -> None:
    plan = plan_rows(4, width, 2, 132, POLICY, "split", pad=7)
    covered = plan.chunks * plan.span * plan.block
    assert covered >= width + 7 > covered - plan.span * plan.block
    assert plan.chunks <= MAX_SPLIT_CHUNKS


def test_split_geometry_lengthens_chunks_rather_than_multiplying_them() -> None:
    assert split_geometry(4096 * 10, 4096, 4096) == (10, 1)
    chunks, span = split_geometry(4096 * 5000, 4096, 4096)
    assert chunks <= MAX_SPLIT_CHUNKS and chunks * span * 4096 >= 4096 * 5000


@pytest.mark.parametrize("width", [1, 100, 130, 1000, 1025, 2041])
def test_a_forced_split_of_a_narrow_row_walks_no_block_past_it(width) -> None:
    """A row narrower than one split chunk is one chunk of the blocks it fills: a span of
    blocks past the row's end would be masked loads of nothing (and 8x the work at 130)."""
    plan = plan_rows(4, width, 2, 132, POLICY, "split", pad=7)
    assert plan.chunks == 1 and (plan.span - 1) * plan.block < width + 7 <= plan.span * plan.block


def test_choice_depends_on_width_not_on_row_count_within_a_plan() -> None:
    blocks = {plan_rows(n, 4096, 2, 132, POLICY) for n in (1, 7, 1000)}
    assert len(blocks) == 1


@pytest.mark.parametrize("force", ["block", "looped", "split"])
def test_every_plan_can_be_forced(force) -> None:
    assert plan_rows(1000, 5000, 4, 132, POLICY, force).kind == force


def test_unknown_plan_is_refused() -> None:
    with pytest.raises(ValueError, match="plan must be one of"):
        plan_rows(1, 10, 4, 132, POLICY, "tiled")  # type: ignore[arg-type]


def test_softmax_policies() -> None:
    # Forward: rows up to 32 KB whole, wider ones staged (or looped, in 16384-element steps
    # and 32768 from 98304 elements); the backward keeps rows up to 64 KB whole.
    assert plan_rows(8192, 16384, 2, 132, SOFTMAX_POLICY).kind == "block"
    assert plan_rows(8192, 32768, 2, 132, SOFTMAX_POLICY).kind == "staged"
    assert plan_rows(8192, 65536, 2, 132, SOFTMAX_POLICY).label == "looped-16384"
    assert plan_rows(4096, 151936, 2, 132, SOFTMAX_POLICY).label == "looped-32768"
    assert plan_rows(131, 65536, 2, 132, SOFTMAX_POLICY).kind == "split"  # fewer rows than SMs
    assert plan_rows(132, 65536, 2, 132, SOFTMAX_POLICY).kind == "looped"
    assert plan_rows(8192, 32768, 2, 132, SOFTMAX_BACKWARD_POLICY).kind == "block"
    assert plan_rows(8192, 32768, 4, 132, SOFTMAX_BACKWARD_POLICY).kind == "looped"


def test_column_plan_fills_the_gpu_and_covers_every_row() -> None:
    plan = plan_columns(16384, 4096, 132)
    assert plan.splits * plan.rows_per_split >= 16384 > (plan.splits - 1) * plan.rows_per_split
    assert plan.splits * (4096 // plan.block_cols) >= 132
    small = plan_columns(10, 300, 132)
    assert small.splits == 1 and small.rows_per_split == 10


def test_looped_step_is_the_longest_that_pads_the_row_little() -> None:
    policy = RowPolicy(chunk=4096, chunk_waste=0.3, max_chunk=32768)
    # 32768: 16384 pads nothing, 32768 is the whole row (not a loop)
    assert plan_rows(8192, 32768, 2, 132, policy).block == 16384
    # 50257 + 7: 8192 pads 14%, 16384 and 32768 pad 30.4%
    assert plan_rows(4096, 50257, 2, 132, policy, pad=7).block == 8192
    # 32769: every step past 4096 walks an almost empty last step
    assert plan_rows(4096, 32769, 2, 132, policy).block == 8192
    assert plan_rows(4096, 151936, 2, 132, policy).block == 32768  # 7.8%
    assert plan_rows(4096, 151936, 2, 132, RowPolicy(chunk=4096, chunk_waste=0.05)).block == 8192  # 2.4%; 32768: 7.8%
    assert plan_rows(4096, 131073, 2, 132, RowPolicy(chunk=4096, chunk_waste=0.2)).block == 16384  # 12.5%
    assert plan_rows(4096, 151936, 2, 132, RowPolicy(chunk=4096, chunk_waste=0.3, max_chunk=8192)).block == 8192
    # off (negative): the wide_chunk rule
    assert plan_rows(4096, 151936, 2, 132, RowPolicy(chunk=4096, wide_chunk=32768)).block == 32768
    assert plan_rows(4096, 65536, 2, 132, RowPolicy(chunk=4096, wide_chunk=32768)).block == 4096


def test_wide_rows_loop_over_the_wide_chunk() -> None:
    policy = RowPolicy(chunk=16384, wide_chunk=32768, wide_width=98304)
    assert plan_rows(4096, 98303, 2, 132, policy).block == 16384
    assert plan_rows(4096, 98304, 2, 132, policy).block == 32768
    assert plan_rows(4096, 151936, 2, 132, RowPolicy(chunk=16384)).block == 16384  # 0: the one chunk


def test_softmax_stages_rows_of_32_to_110_kb() -> None:
    # Rows too wide for a block, many enough not to split, whose staged footprint (whole
    # 4096-element chunks, window included) is above 32 KB and at most 110 KB: two programs
    # an SM in 227 KB of shared memory.
    plan = plan_rows(4096, 50257, 2, 132, SOFTMAX_POLICY, pad=7)
    assert (plan.kind, plan.block, plan.chunks, plan.label) == ("staged", 4096, 13, "staged-4096x13")
    assert plan_rows(1000, 50257, 2, 132, SOFTMAX_POLICY, pad=7).kind == "staged"
    assert plan_rows(8192, 32000, 2, 132, SOFTMAX_POLICY, pad=0).kind == "staged"  # 62.5 KB
    assert plan_rows(1000, 16384, 2, 132, SOFTMAX_POLICY).kind == "block"  # 32 KB: a block
    assert plan_rows(1000, 16385, 2, 132, SOFTMAX_POLICY).kind == "staged"  # 5 chunks: 40 KB
    assert plan_rows(1000, 50257, 4, 132, SOFTMAX_POLICY, pad=3).kind == "looped"  # 208 KB in fp32
    assert plan_rows(1000, 24576, 4, 132, SOFTMAX_POLICY).kind == "staged"  # 6 chunks: 96 KB
    assert plan_rows(1000, 24577, 4, 132, SOFTMAX_POLICY).kind == "looped"  # 7 chunks: 112 KB
    assert plan_rows(64, 50257, 2, 132, SOFTMAX_POLICY, pad=7).kind == "split"  # too few rows
    assert plan_rows(4096, 151936, 2, 132, SOFTMAX_POLICY).kind == "looped"
    # the policy without a staged kernel, and the backward's, never stage
    assert plan_rows(4096, 50257, 2, 132, POLICY, pad=7).kind == "looped"
    assert plan_rows(4096, 50257, 2, 132, SOFTMAX_BACKWARD_POLICY, pad=7).kind != "staged"
    assert plan_rows(1000, 5000, 2, 132, POLICY, "staged").kind == "staged"  # forcing builds it anyway
    with pytest.raises(ValueError, match="shared memory"):
        plan_rows(1000, 131072, 2, 132, POLICY, "staged")  # 256 KB


def test_rmsnorm_policy_never_stages_nor_takes_softmax_steps() -> None:
    from kernels.plans import RMSNORM_POLICY, ROW_POLICY_B48A875, SOFTMAX_POLICY

    assert RMSNORM_POLICY.staged_row_bytes == (0, 0)
    # the thresholds of the grid's scoring; only the eager one-launch rule is softmax's
    assert dataclasses.replace(RMSNORM_POLICY, one_launch_bytes=0) == ROW_POLICY_B48A875
    assert RMSNORM_POLICY.one_launch_bytes == SOFTMAX_POLICY.one_launch_bytes
    assert plan_rows(4096, 50257, 2, 132, RMSNORM_POLICY, pad=7).label == "looped-8192"  # no staged kernel
    assert plan_rows(100, 65536, 2, 132, RMSNORM_POLICY).kind == "looped"  # splits below half the SMs only


def test_cross_entropy_policies_start_from_the_b48a875_rule() -> None:
    from kernels.plans import CROSS_ENTROPY_LOSS_POLICY, CROSS_ENTROPY_POLICY

    for p in (CROSS_ENTROPY_POLICY, CROSS_ENTROPY_LOSS_POLICY):
        assert plan_rows(100, 128256, 2, 132, p).label == "looped-4096"  # 100 rows: past half the SMs
        assert plan_rows(4096, 151936, 2, 132, p).label == "looped-4096"  # no 32768-element wide step
