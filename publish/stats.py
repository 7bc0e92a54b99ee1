"""Statistics of raw samples, computed at build time (run files store only samples).

The median is the headline; its 95% confidence interval comes from order statistics
(distribution-free, deterministic: no bootstrap draws that change between builds).  A ratio
of two medians is the headline of a comparison.  Its interval: where the two variants were
sampled in the same interleaved rounds (the harness takes one sample of every variant per
round, in shuffled order), the order-statistic interval of the median of the per-round
ratios (:func:`paired_ratio`): a clock or thermal drift that moves a whole round moves both
samples of the pair and cancels.  Otherwise the conservative interval made of the two
medians' intervals' ends (:func:`ratio`).  Either way it counts as *resolved* only when the
interval excludes 1 and the ratio of medians lies on the same side.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from scipy.stats import binom


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    q1: float
    q3: float
    lo: float  # 95% CI of the median
    hi: float
    minimum: float
    maximum: float

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median."""
        return (self.q3 - self.q1) / self.median if self.median else math.inf


def quantile(sorted_xs: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_xs:
        raise ValueError("quantile of no samples")
    pos = q * (len(sorted_xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


@functools.cache
def _median_rank(n: int, level: float) -> int:
    """The largest 1-based rank ``r`` whose interval ``[x_(r), x_(n-r+1)]`` covers the median
    with probability ``1 - 2 P(Bin(n, 1/2) <= r - 1) >= level``; 0 when none does."""
    r = int(binom.ppf((1 - level) / 2, n, 0.5))
    while r >= 1 and binom.cdf(r - 1, n, 0.5) > (1 - level) / 2:
        r -= 1
    return max(r, 0)


def median_ci(sorted_xs: list[float], level: float = 0.95) -> tuple[float, float]:
    """Order-statistic interval for the median (distribution-free).  With too few samples for
    any such interval (fewer than 6 at 95%) the full range is returned."""
    n = len(sorted_xs)
    r = _median_rank(n, level)
    if r < 1:
        return sorted_xs[0], sorted_xs[-1]
    return sorted_xs[r - 1], sorted_xs[n - r]


def summarize(samples: list[float]) -> Summary:
    xs = sorted(samples)
    if not xs:
        raise ValueError("no samples to summarize")
    lo, hi = median_ci(xs)
    return Summary(len(xs), quantile(xs, 0.5), quantile(xs, 0.25), quantile(xs, 0.75), lo, hi, xs[0], xs[-1])


@dataclass(frozen=True)
class Ratio:
    """``slow / fast`` style ratio of two medians: ``value > 1`` means the denominator is faster."""

    value: float
    lo: float
    hi: float

    paired: bool = False  # the interval is that of the per-round ratios (paired_ratio)

    @property
    def resolved(self) -> bool:
        return (self.lo > 1.0 and self.value > 1.0) or (self.hi < 1.0 and self.value < 1.0)


def ratio(num: Summary, den: Summary) -> Ratio:
    """The ratio of two medians with the interval made of the two medians' intervals' ends
    (conservative: it assumes nothing about how the samples were taken)."""
    return Ratio(num.median / den.median, num.lo / den.hi, num.hi / den.lo)


PAIRED_MIN = 6  # the fewest rounds whose per-round ratios have a 95% interval of their median


def paired_ratio(num: Summary, den: Summary, num_samples: list[float], den_samples: list[float]) -> Ratio:
    """The ratio of two medians with the 95% interval of the median of the per-round ratios
    ``num_samples[i] / den_samples[i]``: for samples taken in the same rounds, sample ``i`` of
    each in round ``i``.  Raises ValueError where the rounds do not pair (different counts, or
    fewer than ``PAIRED_MIN``)."""
    if len(num_samples) != len(den_samples) or len(num_samples) < PAIRED_MIN:
        raise ValueError(f"paired ratio of {len(num_samples)} and {len(den_samples)} samples")
    per_round = sorted(a / b for a, b in zip(num_samples, den_samples, strict=True))
    lo, hi = median_ci(per_round)
    return Ratio(num.median / den.median, lo, hi, paired=True)
