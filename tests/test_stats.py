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
