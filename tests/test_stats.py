"""Statistics of raw samples, on synthetic data with known answers."""

import random

import pytest

from publish.stats import median_ci, quantile, ratio, summarize


def test_summary_of_known_samples() -> None:
    s = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.n, s.median, s.q1, s.q3, s.minimum, s.maximum) == (5, 3.0, 2.0, 4.0, 1.0, 5.0)
    assert s.spread == pytest.approx(2.0 / 3.0)


def test_order_of_samples_does_not_matter() -> None:
    xs = [random.Random(1).gauss(10, 1) for _ in range(31)]
    assert summarize(xs) == summarize(list(reversed(xs)))


@pytest.mark.parametrize(("n", "ranks"), [(10, (2, 9)), (30, (10, 21)), (100, (40, 61))])
def test_median_interval_uses_the_tabulated_order_statistics(n, ranks) -> None:
    xs = [float(i) for i in range(1, n + 1)]
    assert median_ci(xs) == (float(ranks[0]), float(ranks[1]))


def test_median_interval_covers_the_true_median_about_95_percent() -> None:
    rng = random.Random(7)
    hits = sum(
        lo <= 0.0 <= hi for lo, hi in (median_ci(sorted(rng.gauss(0, 1) for _ in range(30))) for _ in range(2000))
    )
    assert 0.93 <= hits / 2000 <= 0.995


def test_too_few_samples_give_the_full_range() -> None:
    assert median_ci([1.0, 2.0, 3.0]) == (1.0, 3.0)


def test_quantile_interpolates() -> None:
    assert quantile([0.0, 10.0], 0.25) == 2.5
    with pytest.raises(ValueError):
        quantile([], 0.5)
    with pytest.raises(ValueError):
        summarize([])


def test_ratio_is_resolved_only_when_intervals_separate() -> None:
    fast = summarize([1.0 + 0.01 * i for i in range(30)])
    slow = summarize([2.0 + 0.01 * i for i in range(30)])
    r = ratio(slow, fast)
    assert r.value == pytest.approx(slow.median / fast.median) and r.resolved and r.lo > 1
    noisy = summarize([0.85 + 0.1 * (i % 7) for i in range(30)])  # median 1.15, wide spread
    assert not ratio(noisy, fast).resolved


def test_paired_ratio_cancels_a_drift_that_moves_whole_rounds() -> None:
    """Two variants sampled in the same rounds while the clock drifts by 20%: the per-round
    ratios are all 1.03, so the paired interval resolves what the medians' intervals cannot."""
    from publish.stats import paired_ratio

    drift = [1.0 + 0.2 * (i % 10) / 10 for i in range(30)]
    ours = [100.0 * d for d in drift]
    theirs = [103.0 * d for d in drift]
    unpaired = ratio(summarize(theirs), summarize(ours))
    paired = paired_ratio(summarize(theirs), summarize(ours), theirs, ours)
    assert not unpaired.resolved and unpaired.lo < 1 < unpaired.hi
    assert paired.resolved and paired.paired and abs(paired.lo - 1.03) < 1e-9 and abs(paired.hi - 1.03) < 1e-9
    assert paired.value == unpaired.value  # the headline stays the ratio of medians


def test_paired_ratio_needs_rounds_that_pair_and_a_consistent_side() -> None:
    from publish.stats import PAIRED_MIN, Ratio, paired_ratio

    xs = [float(x) for x in range(1, 13)]
    with pytest.raises(ValueError, match="paired"):
        paired_ratio(summarize(xs), summarize(xs[:-1]), xs, xs[:-1])
    with pytest.raises(ValueError, match="paired"):
        short = xs[: PAIRED_MIN - 1]
        paired_ratio(summarize(short), summarize(short), short, short)
    # an interval above 1 with a ratio of medians below it is not resolved either way
    assert not Ratio(0.99, 1.01, 1.05, paired=True).resolved
    assert Ratio(1.02, 1.01, 1.05, paired=True).resolved and Ratio(0.97, 0.95, 0.99).resolved


def test_a_case_pairs_the_rounds_of_its_own_run() -> None:
    """CaseResult.ratio pairs sample i of each variant (round i of the run), so reordering one
    variant's samples, which leaves both medians as they were, changes the interval."""
    from pathlib import Path

    from contract.schema import validate_run
    from publish.results import StudyResults
    from publish.runs import Run
    from tests.synthstudies import matmul_doc

    def results(shuffle: bool) -> object:
        doc = matmul_doc("matmul-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z")
        entry = next(c for c in doc["cases"] if c["id"] == "fwd/bf16/4096x4096x4096/cold")
        rounds = doc["method"]["rounds"]
        drift = [1.0 + 0.2 * (i % 5) / 5 for i in range(rounds)]
        entry["variants"]["triton"]["samples_us"] = [100.0 * d for d in drift]
        theirs = [103.0 * d for d in drift]
        entry["variants"]["cublas"]["samples_us"] = sorted(theirs) if shuffle else theirs
        validate_run(doc, doc["run_id"])
        run = Run(doc["run_id"], "matmul", Path("x.json"), doc)
        return StudyResults("matmul", [run]).cases["fwd/bf16/4096x4096x4096/cold"].ratio("cublas", "triton")

    paired, reordered = results(False), results(True)
    assert paired.paired and paired.resolved and paired.lo == pytest.approx(1.03)  # type: ignore[attr-defined]
    assert reordered.value == paired.value and not reordered.resolved  # type: ignore[attr-defined]


def test_paired_interval_is_the_order_statistic_interval_of_the_per_round_ratios() -> None:
    from publish.stats import paired_ratio

    rng = random.Random(7)
    ours = [rng.uniform(90, 110) for _ in range(30)]
    theirs = [x * rng.uniform(1.0, 1.1) for x in ours]
    r = paired_ratio(summarize(theirs), summarize(ours), theirs, ours)
    assert (r.lo, r.hi) == median_ci(sorted(t / o for t, o in zip(theirs, ours, strict=True)))
    assert 1.0 < r.lo < r.hi < 1.1 and r.resolved
