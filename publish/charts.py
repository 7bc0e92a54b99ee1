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
) -> Chart:
    """Grouped bars: one trace per series, one group per category; ``None`` leaves a gap."""
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
                "marker": {"color": PALETTE[i % len(PALETTE)]},
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
