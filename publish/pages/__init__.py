"""The pages of the site, declared in order: output file, template, and the function that
computes the page's context from the loaded data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from publish.results import StudyResults
from publish.runs import Run

STUDIES = ("softmax",)


@dataclass
class SiteData:
    runs: list[Run]

    @cached_property
    def studies(self) -> dict[str, StudyResults]:
        return {name: StudyResults(name, self.runs) for name in STUDIES}

    @property
    def latest(self) -> Run | None:
        return self.runs[-1] if self.runs else None


@dataclass(frozen=True)
class Page:
    output: str
    template: str
    context: Callable[[SiteData], dict[str, Any]]


def pages() -> list[Page]:
    from publish.pages import home, methodology, softmax, sources

    return [
        Page("index.md", "index.md.j2", home.context),
        Page("softmax.md", "softmax.md.j2", lambda data: softmax.context(data.studies["softmax"])),
        Page("methodology.md", "methodology.md.j2", methodology.context),
        Page("sources.md", "sources.md.j2", sources.context),
    ]
