"""Plotly figures as plain JSON specs, drawn in the browser by ``assets/charts.js`` with the
Plotly bundle the site serves itself (no CDN).  Every point's hover names its run."""

from __future__ import annotations

import json
from dataclasses import dataclass

from publish.numbers import Num

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


def bars(
    chart_id: str,
    title: str,
    categories: list[str],
    series: list[tuple[str, list[Num | None]]],
    y_title: str,
    *,
    ref: tuple[str, float] | None = None,
    log_y: bool = False,
    styles: list[dict] | None = None,
) -> Chart:
    """Grouped bars: one trace per series, one group per category; ``None`` leaves a gap.
    ``styles`` (one per series) replaces a series' marker, e.g. to give two measurements of
    one variant the same colour and tell them apart by a hatch pattern."""
    data = []
    for i, (name, nums) in enumerate(series):
        data.append(
            {
                "type": "bar",
                "name": name,
                "x": categories,
                "y": [n.value if n is not None else None for n in nums],
                "text": [n.text() if n is not None else "" for n in nums],
                "textposition": "none",
                "customdata": [n.sources[0].run_id if n is not None and n.sources else "" for n in nums],
                "hovertemplate": "%{x}<br>" + name + ": %{text}<br>run %{customdata}<extra></extra>",
                "marker": styles[i] if styles is not None else {"color": PALETTE[i % len(PALETTE)]},
            }
        )
    layout: dict = {
        "title": {"text": title, "font": {"size": 14}},
        "barmode": "group",
        "yaxis": {"title": {"text": y_title}, "type": "log" if log_y else "linear", "rangemode": "tozero"},
        "xaxis": {"type": "category"},
        "legend": {"orientation": "h", "y": -0.2},
        "margin": {"t": 40, "r": 10, "b": 10, "l": 60},
        "height": 380,
    }
    if ref is not None:
        label, value = ref
        layout["shapes"] = [
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "y0": value,
                "y1": value,
                "line": {"dash": "dash", "width": 1.5, "color": "#444"},
            }
        ]
        layout["annotations"] = [
            {
                "xref": "paper",
                "x": 1,
                "y": value,
                "text": label,
                "showarrow": False,
                "xanchor": "right",
                "yanchor": "bottom",
                "font": {"size": 11},
            }
        ]
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
    import math

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
