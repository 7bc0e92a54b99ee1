"""Observations as claims checked against the data.

A claim pairs a sentence with the condition that makes it true, evaluated on the current
results every build.  The page shows a claim the data no longer support as contradicted,
with the numbers that contradict it, instead of publishing the sentence anyway; the build
report lists it.  A *target* (from the study catalogue) is reported as met or missed: a
missed target is a published result, not an error.  A target whose case no run in force
measured has *no data*: it is neither met nor missed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from markupsafe import Markup, escape

from publish.numbers import Num, render
from publish.safe import data_text


def sentence(template: str, **values: Num | str) -> Markup:
    """Fill ``{name}`` slots: ``Num`` values render with their provenance, markup passes,
    text (a case id, a run's error message) is escaped for HTML and Markdown alike: claims
    also appear in Markdown tables (the review record)."""
    rendered = {k: Markup(render(v)) if isinstance(v, Num) else data_text(v) for k, v in values.items()}
    return Markup(str(escape(template)).format(**rendered))


@dataclass
class Claim:
    id: str
    text: Markup
    holds: bool
    kind: Literal["observation", "target"] = "observation"
    evidence: Markup = field(default_factory=Markup)  # what the condition looked at
    no_data: bool = False  # a target whose case no run in force measured (``holds`` is then False)
    # What an observation that the data can contradict expects, in our words: "holds" and
    # "contradicted" are said of it, and the text is what was measured.
    hypothesis: str = ""

    @property
    def status(self) -> str:
        if self.kind == "target":
            return "no data" if self.no_data else "met" if self.holds else "missed"
        if not self.hypothesis:  # a measurement stated as such: nothing it could contradict
            return "observed" if self.holds else "contradicted"
        return "holds" if self.holds else "contradicted"

    @property
    def stated(self) -> Markup:
        """The text a reader sees: an observation's hypothesis first (what "holds" and
        "contradicted" are said of), then what was measured."""
        if not self.hypothesis:
            return self.text
        return (
            Markup('<span class="lab-hypothesis">')
            + sentence("Expected: {h}.", h=self.hypothesis)
            + Markup("</span> Measured: ")
            + self.text
        )

    @property
    def css(self) -> str:
        """The status as a class name (``lab-no-data``)."""
        return self.status.replace(" ", "-")
