"""Plotly figures as plain JSON specs, drawn in the browser by ``assets/charts.js`` with the
Plotly bundle the site serves itself (no CDN).  Every point's hover names its run."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from publish.numbers import Num
from publish.tables import Text

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


@dataclass
class Chart:
    id: str
    title: str
    figure: dict

    def spec(self) -> str:
        """The figure as JSON, to be HTML-escaped into a data attribute.  (Not a <script>
        element: Material's instant navigation re-creates scripts without their type and
        would run the JSON as JavaScript.)"""
        return json.dumps(self.figure, separators=(",", ":"))


Point = Num | Text | None  # a value; a Text marks a missing one ("refused", "failed check"); None: not applicable

SMALL = 0.06  # on a linear axis, a value under this share of the largest is labelled with its number
# Above this many cases a category is too narrow for a missing value's label ("not run"): the
# marks go unlabelled, a key over the plot says what they mean, and each mark's hover says why.
LABELLED_MARKS = 30
NO_TIME_KEY = "✕ no time (hover a mark for why)"
# About how wide a chart's plot is drawn, and one character of a mark's label (10 px text), in
# pixels: a label wider than its category would run into the next one's.
PLOT_PX = 650
CHAR_PX = 6
# A missing mark's step under the data on a log axis, as a share of the axis's span in log
# units: 13% of a plot some 205-240 px tall is 27-31 px, a 12 px mark and an 11 px label.
FOOT_STEP = 0.13


def _ref_line(layout: dict, ref: tuple[str, float] | None) -> None:
    if ref is None:
        return
    label, value = ref
    # The line is named in the legend, not by a label beside it: a label on the plot sat over
    # the markers near the line's end.
    layout["shapes"] = [
        {
            "type": "line",
            "xref": "paper",
            "x0": 0,
            "x1": 1,
            "y0": value,
            "y1": value,
            "line": {"dash": "dash", "width": 1.5, "color": "#444"},
            "name": label,
            "showlegend": True,
        }
    ]


RATIO_TICKS = (1 / 8, 1 / 4, 1 / 2, 2 / 3, 0.8, 1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100)


def _ratio_ticks(values: list[float]) -> dict:
    """Tick marks for a log axis of ratios: a few readable ratios across the data's range."""
    lo, hi = min(values, default=1.0), max(values, default=1.0)
    steps = RATIO_TICKS if hi / lo < 6 else (1 / 8, 1 / 4, 1 / 2, 1, 2, 5, 10, 20, 50, 100)  # labels a line apart
    ticks = [t for t in steps if lo / 1.6 <= t <= hi * 1.6] or [1.0]
    return {"tickvals": ticks, "ticktext": [f"{round(t, 2):g}×" for t in ticks]}


def _layout(title: str, y_title: str, *, log_y: bool, ref: tuple[str, float] | None) -> dict:
    layout: dict = {
        "title": {"text": title, "font": {"size": 14}},
        "yaxis": {"title": {"text": y_title}, "type": "log" if log_y else "linear"},
        "xaxis": {"type": "category", "automargin": True},
        # Under everything, in the figure's own coordinates: the case labels, however long,
        # push the plot up rather than run under the legend.
        "legend": {"orientation": "h", "x": 0, "y": 0, "yref": "container", "yanchor": "bottom"},
        "margin": {"t": 40, "r": 40, "b": 10, "l": 60},
        "height": 400,
    }
    if not log_y:
        layout["yaxis"]["rangemode"] = "tozero"
    _ref_line(layout, ref)
    return layout


def _finite(points: list[Point]) -> list[float]:
    return [n.value for n in points if isinstance(n, Num) and n.value is not None and math.isfinite(n.value)]


def bars(
    chart_id: str,
    title: str,
    categories: list[str],
    series: list[tuple[str, list[Point]]],
    y_title: str,
    *,
    ref: tuple[str, float] | None = None,
    styles: list[dict] | None = None,
) -> Chart:
    """Grouped bars on a linear axis (a bar's length means something only from zero: never on
    a log axis; use :func:`dots` there).  A missing value is a zero-height bar labelled with
    why ("refused", "failed check"); a value too small to see is labelled with its number."""
    top = max((v for _, pts in series for v in _finite(pts)), default=0.0)
    data = []
    for i, (name, points) in enumerate(series):
        y, text, hover = [], [], []
        for p in points:
            if isinstance(p, Num):
                y.append(p.value)
                text.append(p.text() if top and p.value < SMALL * top else "")
                hover.append(p.text())
            else:
                y.append(0 if isinstance(p, Text) else None)
                text.append(p.text if isinstance(p, Text) else "")
                hover.append(f"{p.text}: {p.title}" if isinstance(p, Text) else "")
        data.append(
            {
                "type": "bar",
                "name": name,
                "x": categories,
                "y": y,
                "text": text,
                "textposition": "outside",
                "textangle": -90,
                "cliponaxis": False,
                "customdata": [[h, _run(p)] for h, p in zip(hover, points, strict=True)],
                "hovertemplate": "%{x}<br>" + name + ": %{customdata[0]}<br>run %{customdata[1]}<extra></extra>",
                "marker": styles[i] if styles is not None else {"color": PALETTE[i % len(PALETTE)]},
            }
        )
    layout = _layout(title, y_title, log_y=False, ref=ref)
    layout["barmode"] = "group"
    return Chart(chart_id, title, {"data": data, "layout": layout})


def _run(p: Point) -> str:
    return p.sources[0].run_id if isinstance(p, Num) and p.sources else ""


def dots(
    chart_id: str,
    title: str,
    categories: list[str],
    series: list[tuple[str, list[Point]]],
    y_title: str,
    *,
    log_y: bool = False,
    ref: tuple[str, float] | None = None,
    styles: list[dict] | None = None,
    intervals: list[list[tuple[float, float] | None]] | None = None,
    ratio_ticks: bool = False,
) -> Chart:
    """Markers, one trace per series, side by side in each category: readable on a log axis
    (where bars would mislead) and for small values next to large ones.  A missing value
    is drawn as a cross under the data, labelled with why ("refused", "failed check"); on a
    linear axis a value too small to read is labelled with its number.  ``intervals`` (per
    series, per point) adds error bars, e.g. a ratio's 95% interval; ``ratio_ticks`` labels
    a log axis of ratios at readable ratios (0.5×, 1×, 2×)."""
    finite = [v for _, pts in series for v in _finite(pts)]
    top = max(finite, default=1.0)
    bottom = min(finite, default=1.0)
    placed = [0] * len(categories)  # missing marks already placed in each category
    labelled = len(categories) <= LABELLED_MARKS
    said: set[tuple[int, str, str]] = set()  # (category, colour, label) already written
    room = PLOT_PX / max(1, len(categories))  # about how wide one category is drawn

    def label(j: int, colour: str, text: str, prev: dict[int, str]) -> str:
        """A missing mark's label, written once: not again in a category where a series of
        the same colour (a variant's device and eager series) already says it, and, where
        a label is wider than a category, not for each of a run of categories where this
        series says the same, so that the labels do not run together (the hover still
        says why at every mark)."""
        run_on = prev.get(j - 1) == text and len(text) * CHAR_PX > room
        if not labelled or (j, colour, text) in said or run_on:
            return ""
        said.add((j, colour, text))
        return text

    def colour_of(i: int) -> str:
        return (styles[i] if styles is not None else {}).get("color", PALETTE[i % len(PALETTE)])

    # Missing marks of one colour and reason in a category (a variant's device and eager
    # series) share a height; each other mark there takes a step lower.  On a log axis a step
    # is a share of the axis's whole span in decades (the data's and the steps' own, for the
    # deepest stack of any category), so that it is drawn about as tall in pixels whatever
    # the span: a mark and the label over it fit in one step.
    heights: dict[tuple[int, str, str], float] = {}
    stacks = [
        {(colour_of(i), p.text) for i, (_, pts) in enumerate(series) if isinstance(p := pts[j], Text)}
        for j in range(len(categories))
    ]
    deepest = min(max((len(st) for st in stacks), default=0), 5)
    decades = math.log10(max(top / bottom, 3.0)) if log_y and bottom > 0 else 0.0
    step = 10 ** (FOOT_STEP * decades / (1 - FOOT_STEP * deepest)) if log_y else 1.0

    def foot(j: int, colour: str, text: str) -> float:
        """Where a missing mark goes: a step under the data, one step lower for each other
        mark already in the category, so that a mark's label (drawn over it) clears the data
        and the marks above it."""
        if (j, colour, text) not in heights:
            k = placed[j]
            placed[j] += 1
            heights[(j, colour, text)] = bottom / step ** (k + 1) if log_y else -0.1 * top * (k + 1)
        return heights[(j, colour, text)]

    data = []
    for i, (name, points) in enumerate(series):
        style = dict(styles[i]) if styles is not None else {"color": PALETTE[i % len(PALETTE)]}
        colour = style.get("color", PALETTE[i % len(PALETTE)])
        group = {"legendgroup": name, "offsetgroup": str(i), "cliponaxis": False}
        y = [p.value if isinstance(p, Num) else None for p in points]
        small = [isinstance(p, Num) and not log_y and p.value < SMALL * top for p in points]
        trace: dict = {
            "type": "scatter",
            "mode": "markers+text",
            "name": name,
            "x": categories,
            "y": y,
            "text": [p.text() if s else "" for p, s in zip(points, small, strict=True)],  # type: ignore[union-attr]
            "textposition": "top center",
            "textfont": {"size": 10},
            "marker": {
                "size": 9,
                "color": colour,
                "symbol": style.get("symbol", "circle"),
                "line": {"width": 1.5, "color": colour},
            },
            "customdata": [[p.text() if isinstance(p, Num) else "", _run(p)] for p in points],
            "hovertemplate": "%{x}<br>" + name + ": %{customdata[0]}<br>run %{customdata[1]}<extra></extra>",
            **group,
        }
        if intervals is not None and intervals[i] is not None:
            ups, downs = [], []
            for v, iv in zip(y, intervals[i], strict=True):
                ok = iv is not None and v is not None
                ups.append(iv[1] - v if ok else 0)  # type: ignore[index, operator]
                downs.append(v - iv[0] if ok else 0)  # type: ignore[index, operator]
            trace["error_y"] = {"type": "data", "symmetric": False, "array": ups, "arrayminus": downs, "width": 3,
                                "thickness": 1.2, "color": colour}  # fmt: skip
        data.append(trace)
        gone = [(j, p) for j, p in enumerate(points) if isinstance(p, Text)]
        prev = {j: p.text for j, p in gone}
        if gone:
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers+text",
                    "name": f"{name}: no time",
                    "showlegend": False,
                    "x": [categories[j] for j, _ in gone],
                    "y": [foot(j, colour, p.text) for j, p in gone],
                    "text": [label(j, colour, p.text, prev) for j, p in gone],
                    "textposition": "top center",
                    "textfont": {"size": 10, "color": colour},
                    "marker": {
                        "size": 9,
                        "symbol": "x-thin-open",
                        "color": colour,
                        "line": {"width": 2, "color": colour},
                    },
                    "customdata": [f"no time: {p.text}" + (f" ({p.title[:160]})" if p.title else "") for _, p in gone],
                    "hovertemplate": "%{x}<br>" + name + ": %{customdata}<extra></extra>",
                    **group,
                }
            )
    layout = _layout(title, y_title, log_y=log_y, ref=ref)
    if not labelled:  # many cases: their labels take the height the plot needs
        layout["xaxis"]["tickfont"] = {"size": 10}
        layout["height"] = 540
        if any(t.get("showlegend") is False for t in data):
            layout["margin"]["t"] = 60
            key = {"xref": "paper", "yref": "paper", "x": 0, "y": 1, "xanchor": "left", "yanchor": "bottom"}
            key |= {"text": NO_TIME_KEY, "showarrow": False, "font": {"size": 11}}
            layout.setdefault("annotations", []).append(key)
    if log_y and ratio_ticks:
        layout["yaxis"] |= _ratio_ticks([v for t in data for v in t["y"] if v is not None])
    elif log_y:
        layout["yaxis"]["dtick"] = "D2"  # 1, 2, 5 in each decade, no crowded minor labels
    layout["scattermode"] = "group"
    layout["scattergap"] = 0.35
    return Chart(chart_id, title, {"data": data, "layout": layout})


def heatmap(
    chart_id: str,
    title: str,
    x: list[str],
    y: list[str],
    cells: list[list[Num | None]],
    *,
    x_title: str,
    y_title: str,
    value: str = "",
    categories: list[str] | None = None,
    labels: list[list[str]] | None = None,
    colorscale: str | list | None = None,
    zmid: float | None = None,
    log: bool = False,
) -> Chart:
    """A grid of cells (rows ``y`` by columns ``x``), coloured by each ``Num``'s value;
    ``None`` leaves a hole.  With ``categories`` the values are indices into it and the
    colour bar names them (e.g. the best plan of each cell); ``labels`` then gives each
    cell's name for the hover.  ``log`` colours by log2 of the value (ratios around 1)."""

    def z_of(n: Num | None) -> float | None:
        if n is None or n.value is None or not math.isfinite(n.value):
            return None
        if log:
            return math.log2(n.value) if n.value > 0 else None
        return n.value

    z = [[z_of(n) for n in row] for row in cells]
    text = []
    for i, row in enumerate(cells):
        line = []
        for j, n in enumerate(row):
            name = labels[i][j] if labels is not None else ""
            shown = n.text() if n is not None and categories is None else ""
            line.append(" ".join(p for p in (name, shown) if p) if n is not None else "not measured")
        text.append(line)
    runs = [[n.sources[0].run_id if n is not None and n.sources else "" for n in row] for row in cells]
    trace: dict = {
        "type": "heatmap",
        "x": x,
        "y": y,
        "z": z,
        "text": text,
        "customdata": runs,
        "hoverongaps": False,
        "xgap": 1,
        "ygap": 1,
        "hovertemplate": y_title
        + " %{y}, "
        + x_title
        + " %{x}<br>"
        + (value + ": " if value else "")
        + "%{text}<br>run %{customdata}<extra></extra>",
    }
    if categories is not None:
        k = max(len(categories), 1)
        scale = []
        for i in range(k):
            colour = PALETTE[i % len(PALETTE)]
            scale += [[i / k, colour], [(i + 1) / k, colour]]
        trace |= {
            "colorscale": scale,
            "zmin": -0.5,
            "zmax": k - 0.5,
            "colorbar": {"tickvals": list(range(k)), "ticktext": categories, "title": {"text": value}},
        }
    else:
        trace["colorscale"] = colorscale or "Viridis"
        if zmid is not None:
            trace["zmid"] = math.log2(zmid) if log and zmid > 0 else zmid
        bar: dict = {"title": {"text": value}}
        if log:
            finite = [v for row in z for v in row if v is not None] or [0.0]
            lo, hi = min(*finite, 0.0), max(*finite, 0.0)
            ratios = [1 / 16, 1 / 8, 1 / 4, 1 / 2, 2 / 3, 0.8, 1, 1.25, 1.5, 2, 4, 8, 16]
            ticks = [r for r in ratios if lo - 1e-9 <= math.log2(r) <= hi + 1e-9]
            bar |= {"tickvals": [math.log2(r) for r in ticks], "ticktext": [f"{round(r, 2):g}×" for r in ticks]}
        trace["colorbar"] = bar
    layout = {
        "title": {"text": title, "font": {"size": 14}},
        "xaxis": {"type": "category", "title": {"text": x_title}},
        "yaxis": {"type": "category", "title": {"text": y_title}},
        "margin": {"t": 40, "r": 10, "b": 60, "l": 70},
        "height": max(380, 26 * len(y) + 140),
    }
    return Chart(chart_id, title, {"data": [trace], "layout": layout})
