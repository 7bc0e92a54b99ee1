"""The charts a comparison page declares (:mod:`publish.studypage.spec`): markers on log
axes, so that latency-bound cases read beside large ones; a variant with no time is marked
with why.  Chart ids are ``<study>-<direction>-speedup``, ``-bw-<l2>``, ``-eager-chart``
and ``<study>-warm-cold``."""

from __future__ import annotations

import statistics
from collections.abc import Callable

from contract import studies
from publish.charts import PALETTE, Chart, dots
from publish.numbers import Num
from publish.results import CaseResult, Measurement
from publish.runs import Run
from publish.studypage.common import DEVICE_TIME, EAGER_CALL, missing, slug
from publish.studypage.spec import (
    DIRECTION_TITLES,
    Bandwidth,
    ChartSpec,
    DeviceVsEager,
    Speedups,
    StudyView,
    Throughput,
    WarmCold,
)
from publish.tables import Text

# Past the palette's eight colours a variant takes the next marker shape, so no two variants
# of a page look alike.
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "pentagon")


def style(view: StudyView, variant: str, *, hollow: bool = False) -> dict[str, str]:
    """One marker per variant on every chart of a page, whichever of them a chart shows:
    ours first, the peers in column order, then the page's other variants by name, each a
    colour and, past the palette, a shape.  ``hollow``: the open form of the same marker
    (a second measure of the variant: its eager call, its warm L2)."""
    order = view.variant_order
    i = order.index(variant) if variant in order else len(order)  # a variant no case holds: after them all
    symbol = SYMBOLS[(i // len(PALETTE)) % len(SYMBOLS)]
    return {"color": PALETTE[i % len(PALETTE)], "symbol": f"{symbol}-open" if hollow else symbol}


def _point(c: CaseResult, variant: str, value: Callable[[Measurement], Num]) -> Num | Text:
    m = c.get(variant)
    return value(m) if m is not None else missing(c, variant)


def _where(direction: str, dtype: str, l2: str | None = None) -> str:
    head = f"{DIRECTION_TITLES.get(direction, direction)}, {dtype}"
    return f"{head}, {l2} L2" if l2 else head


def speedups(view: StudyView, spec: Speedups) -> Chart | None:
    """The key chart: ours against each peer, as time ratios, so a case of 2 µs reads as well
    as one of 300 µs; the whiskers are the ratios' 95% intervals."""
    cases = view.where(direction=spec.direction, dtype=spec.dtype, l2=spec.l2)
    cases = [c for c in cases if c.get(view.ours) is not None]
    if not cases:
        return None
    peers = [p for p in view.peers if any(p in c.variants for c in cases)]
    series, intervals = [], []
    for p in peers:
        points: list[Num | Text] = []
        bounds: list[tuple[float, float] | None] = []
        for c in cases:
            x = c.speedup(view.ours, p)
            points.append(x if x is not None else missing(c, p))
            r = c.ratio(p, view.ours)
            bounds.append((r.lo, r.hi) if r is not None else None)
        series.append((view.label(p), points))
        intervals.append(bounds)
    return dots(
        f"{view.study}-{slug(spec.direction)}-speedup",
        f"{_where(spec.direction, spec.dtype, spec.l2)}: how many times faster ours ran than each peer ({DEVICE_TIME})",
        [c.shape for c in cases],
        series,
        "peer's time / ours (log; above 1: ours faster)",  # short enough for the plot's height
        log_y=True,
        ratio_ticks=True,
        ref=("1.00×: the same time", 1.0),
        intervals=intervals,
        styles=[style(view, p) for p in peers],
    )


def ceiling(cases: list[CaseResult], what: str, unit: str, peak: Callable[[Run], float]) -> tuple[str, float]:
    """The line a throughput chart draws for a ceiling every run re-measures (``peak``): its
    value in the run of the points where they share one; else the median over their runs,
    labelled with how many runs and their range, since each point's share of the ceiling is
    its own run's (the tables' "% of" columns)."""
    runs = {c.run.run_id: c.run for c in cases}
    values = sorted(peak(r) for r in runs.values())
    if len(values) == 1:
        return f"{what}, same run: {values[0]:,.0f} {unit}", values[0]
    mid = statistics.median(values)
    return (
        f"{what}: median {mid:,.0f} {unit} over the {len(values)} runs of these points "
        f"({values[0]:,.0f}-{values[-1]:,.0f})",
        mid,
    )


def throughput(view: StudyView, spec: Throughput) -> Chart | None:
    """Achieved TFLOP/s (flops counted from the problem) against the bf16 matrix rate of the run."""
    cases = [c for c in view.where(direction=spec.direction, dtype=spec.dtype, l2=spec.l2) if c.flops > 0]
    if not cases:
        return None
    variants = [v for v in spec.variants if any(v in c.variants for c in cases)]
    series = [(view.label(v), [_point(c, v, Measurement.tflops) for c in cases]) for v in variants]
    return dots(
        f"{view.study}-{slug(spec.direction)}-tflops-{spec.l2}",
        f"{_where(spec.direction, spec.dtype, spec.l2)}: achieved TFLOP/s ({DEVICE_TIME})",
        [c.shape for c in cases],
        series,
        "TFLOP/s (flops counted from the problem; log scale)",
        log_y=True,
        ref=ceiling(cases, "cuBLAS bf16 matrix rate", "TFLOP/s", lambda r: r.mm_peak),
        styles=[style(view, v) for v in variants],
    )


def bandwidth(view: StudyView, spec: Bandwidth) -> Chart | None:
    cases = view.where(direction=spec.direction, dtype=spec.dtype, l2=spec.l2)
    if not cases:
        return None
    variants = [v for v in spec.variants if any(v in c.variants for c in cases)]
    series = [(view.label(v), [_point(c, v, Measurement.gbps) for c in cases]) for v in variants]
    return dots(
        f"{view.study}-{slug(spec.direction)}-bw-{spec.l2}",
        f"{_where(spec.direction, spec.dtype, spec.l2)}: achieved bandwidth ({DEVICE_TIME})",
        [c.shape for c in cases],
        series,
        "GB/s (bytes counted from the problem; log scale)",
        log_y=True,  # latency-bound shapes move a few GB/s, the large ones thousands: both readable
        ref=ceiling(cases, "device copy", "GB/s", lambda r: r.copy_peak),
        styles=[style(view, v) for v in variants],
    )


def device_vs_eager(view: StudyView, spec: DeviceVsEager) -> Chart | None:
    """Device time and eager call side by side, for ours and each peer, where a run took both."""
    where = view.where(direction=spec.direction, dtype=spec.dtype, l2=spec.l2)
    cases = [c for c in where if c.eager().get(view.ours)]
    if not cases:
        return None
    series, styles = [], []
    for v in spec.variants:
        if not any(v in c.variants for c in cases):
            continue
        series.append((f"{view.label(v)}, device", [_point(c, v, Measurement.time) for c in cases]))
        series.append((f"{view.label(v)}, eager call", [_point(c.eager(), v, Measurement.time) for c in cases]))
        styles += [style(view, v), style(view, v, hollow=True)]
    return dots(
        f"{view.study}-{slug(spec.direction)}-eager-chart",
        f"{_where(spec.direction, spec.dtype, spec.l2)}: {DEVICE_TIME} (filled) against the {EAGER_CALL} (open)",
        [c.shape for c in cases],
        series,
        "µs per call (log scale)",
        log_y=True,
        styles=styles,
    )


def warm_cold(view: StudyView, spec: WarmCold) -> Chart | None:
    cold = view.where(direction=spec.direction, dtype=spec.dtype, l2="cold")
    if not cold:
        return None
    names = studies.shape(view.study)
    warm = [
        view.find(
            direction=spec.direction, dtype=spec.dtype, l2="warm", **{p: c.params[p] for p in names if p in c.params}
        )
        for c in cold
    ]
    series = [
        ("cold L2", [_point(c, view.ours, Measurement.gbps) for c in cold]),
        ("warm L2", [_point(w, view.ours, Measurement.gbps) if w is not None else Text("not run") for w in warm]),
    ]
    line = ceiling(cold, "device copy", "GB/s", lambda r: r.copy_peak)
    return dots(
        f"{view.study}-warm-cold",
        f"Ours, {DIRECTION_TITLES.get(spec.direction, spec.direction).lower()}, {spec.dtype}: warm against cold L2 "
        f"({DEVICE_TIME})",
        [c.shape for c in cold],
        series,
        "GB/s (log scale)",
        log_y=True,
        ref=line,
        styles=[style(view, view.ours), style(view, view.ours, hollow=True)],
    )


def chart(view: StudyView, spec: ChartSpec) -> Chart | None:
    """The chart a declaration asks for (a callable is a study's own chart)."""
    if isinstance(spec, Speedups):
        return speedups(view, spec)
    if isinstance(spec, Bandwidth):
        return bandwidth(view, spec)
    if isinstance(spec, Throughput):
        return throughput(view, spec)
    if isinstance(spec, DeviceVsEager):
        return device_vs_eager(view, spec)
    if isinstance(spec, WarmCold):
        return warm_cold(view, spec)
    return spec(view)
