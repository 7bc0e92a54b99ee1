"""Numbers that know where they came from.

Every measured number on the site is a :class:`Num`: its value, unit and format, plus the
run, case, variant and statistic it was derived from.  Rendering one gives a link to the
run's entry on the sources page whose tooltip names all of that, so a reader can trace any
figure to the raw samples.  Templates receive ``Num`` objects, never bare floats.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Source:
    """Where a number came from."""

    run_id: str
    case: str = ""  # case id, e.g. "fwd/bf16/16384x4096/cold"
    variant: str = ""
    statistic: str = ""  # e.g. "median of 30 samples"
    detail: str = ""  # spread, CI, timer, ...
    # The timer of the samples behind it (a measurement's: cuda-graph, eager-events, ...): with
    # run, case and variant, the key of its rows in the tidy frame (publish.frame).
    timer: str = ""

    def describe(self) -> str:
        parts = [f"run {self.run_id}"]
        if self.case:
            parts.append(f"case {self.case}")
        if self.variant:
            parts.append(f"variant {self.variant}")
        if self.statistic:
            parts.append(self.statistic)
        if self.detail:
            parts.append(self.detail)
        return " · ".join(parts)


def _fmt_us(v: float) -> str:
    if v < 10:
        return f"{v:.2f}"
    if v < 100:
        return f"{v:.1f}"
    return f"{v:,.0f}"


def _fmt_x(v: float) -> str:
    # Within 10% of parity every verdict and target sits (1.00×, 0.98×, 0.95×): two decimals
    # there would print a 0.996× loss as 1.00× and a 0.977× miss as the 0.98× it missed.
    if 0.9 <= v < 1.1:
        return f"{v:.3f}×"
    return f"{v:.2f}×"


FORMATS = {
    "us": lambda v: f"{_fmt_us(v)} µs",
    "us_bare": _fmt_us,
    "GBps": lambda v: f"{v:,.0f} GB/s",
    "GBps_bare": lambda v: f"{v:,.0f}",
    "TFLOPs": lambda v: f"{v:,.0f} TFLOP/s" if v >= 10 else f"{v:.2g} TFLOP/s",
    "TFLOPs_bare": lambda v: f"{v:,.0f}" if v >= 10 else f"{v:.2g}",
    "pct": lambda v: f"{v:.1f}%" if abs(v) < 100 else f"{v:.0f}%",  # one decimal: 94.7% is not 95%
    "pct_signed": lambda v: f"{v:+.1f}%",
    "x": _fmt_x,
    "x3": lambda v: f"{v:.3f}×",  # a speedup beside a threshold it rounds to (1.497× against 1.5×)
    "x_set": lambda v: f"{v:g}×",
    "MHz": lambda v: f"{v:,.0f} MHz",
    "ms": lambda v: f"{v:,.0f} ms" if v >= 100 else f"{v:.3g} ms",  # three figures, as the µs columns
    "s": lambda v: f"{v:g} s",
    "MiB": lambda v: f"{v:,.0f} MiB",
    "bytes": lambda v: f"{v:,.0f} bytes",
    "count": lambda v: f"{v:,.0f}",
    "p": lambda v: f"{v:.2g}",
    "relerr": lambda v: f"{v:.2g}",
    "int": lambda v: f"{v:,.0f}",
    "size": lambda v: f"{v:.0f}",  # a row count or width, written as in shapes (4096×50257)
}


@dataclass(frozen=True)
class Num:
    value: float
    kind: str  # a key of FORMATS
    sources: tuple[Source, ...] = field(default_factory=tuple)
    note: str = ""  # e.g. "95% CI 1.02-1.05×; resolved"
    css: str = ""  # extra class: "win", "loss", "tie"

    def text(self) -> str:
        if self.value is None or (isinstance(self.value, float) and not math.isfinite(self.value)):
            return "—"
        return FORMATS[self.kind](self.value)

    def title(self) -> str:
        lines = [s.describe() for s in self.sources]
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    def __html__(self) -> str:
        return render(self)

    def __str__(self) -> str:  # in Markdown contexts the HTML form is what we want
        return render(self)


def definition(value: float, kind: str, note: str) -> Num:
    """A number that is set, not measured (a target, a threshold), shown like the others so
    a reader sees where it comes from."""
    return Num(value, kind, (), note=note)


def _attribute(text: str) -> str:
    # Line breaks become character references: the element stays on one line, so a number
    # inside a Markdown table row (the review record's) cannot break the row.
    return html.escape(text, quote=True).replace("\n", "&#10;")


def render(num: Num) -> str:
    classes = " ".join(c for c in ("num", num.css) if c)
    text = html.escape(num.text())
    if not num.sources:
        return f'<span class="{classes}" title="{_attribute(num.title())}">{text}</span>'
    first = num.sources[0]
    return (
        f'<a class="{classes}" href="sources.html#run-{html.escape(first.run_id, quote=True)}" '
        f'data-run="{html.escape(first.run_id, quote=True)}" '
        f'title="{_attribute(num.title())}">{text}</a>'
    )


def combine(value: float, kind: str, parts: tuple[Num, ...], note: str) -> Num:
    """A number derived from other numbers (a ratio of a difference to a time, say): it
    carries every source of every part, so it traces back to all the samples it used."""
    sources: list[Source] = []
    for p in parts:
        sources += [s for s in p.sources if s not in sources]
    return Num(value, kind, tuple(sources), note=note)
