"""The row planner: which plan for which shape, and that forcing works."""

import pytest

from kernels._rowwise import RowPolicy, plan_rows

POLICY = RowPolicy()


def test_rows_that_fit_use_one_block() -> None:
    plan = plan_rows(16384, 4096, 2, 132, POLICY)
    assert (plan.kind, plan.block, plan.chunks) == ("block", 4096, 1)


def test_narrow_rows_are_packed_several_per_program() -> None:
    plan = plan_rows(32, 127, 2, 132, POLICY)
    assert plan.kind == "block" and plan.block == 128 and plan.rows_per_program > 1


def test_few_wide_rows_split_many_wide_rows_loop() -> None:
    assert plan_rows(64, 131072, 2, 132, POLICY).kind == "split"
    assert plan_rows(8, 1048576, 2, 132, POLICY).kind == "split"
    assert plan_rows(4096, 131072, 2, 132, POLICY).kind == "looped"


def test_split_covers_the_row_with_chunks() -> None:
    plan = plan_rows(4, 32769, 2, 132, POLICY, "split")
    assert plan.chunks * plan.block >= 32769 > (plan.chunks - 1) * plan.block


def test_choice_depends_on_width_not_on_row_count_within_a_plan() -> None:
    # Same plan for every row count that keeps the same kind: nothing to recompile.
    blocks = {plan_rows(n, 4096, 2, 132, POLICY) for n in (1, 7, 1000, 123457)}
    assert len(blocks) == 1


@pytest.mark.parametrize("force", ["block", "looped", "split"])
def test_every_plan_can_be_forced(force) -> None:
    assert plan_rows(1000, 5000, 4, 132, POLICY, force).kind == force


def test_unknown_plan_is_refused() -> None:
    with pytest.raises(ValueError, match="plan must be one of"):
        plan_rows(1, 10, 4, 132, POLICY, "tiled")  # type: ignore[arg-type]


def test_softmax_backward_keeps_rows_up_to_64_kb_whole() -> None:
    from kernels.softmax import BACKWARD_POLICY, POLICY

    assert plan_rows(8192, 32768, 2, 132, POLICY).kind == "looped"
    assert plan_rows(8192, 32768, 2, 132, BACKWARD_POLICY).kind == "block"
    assert plan_rows(8192, 32768, 4, 132, BACKWARD_POLICY).kind == "looped"
