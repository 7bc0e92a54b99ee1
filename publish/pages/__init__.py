"""The pages of the site, declared in order: output file, template, and the function that
computes the page's context from the loaded data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from publish.results import StudyResults
from publish.review import Withdrawal
from publish.runs import Gpu, Run, reference_gpu

# The studies with a page of their own, in nav order (each loads as a StudyResults).
STUDIES = ("softmax", "rowgrid", "dispatch")


@dataclass
class SiteData:
    """Every stored run, the withdrawals, and the results computed from the runs in force."""

    all_runs: list[Run]
    withdrawals: list[Withdrawal] = field(default_factory=list)

    @cached_property
    def withdrawn(self) -> dict[str, Withdrawal]:
        return {w.run_id: w for w in self.withdrawals}

    @cached_property
    def in_force(self) -> list[Run]:
        """All runs but the withdrawn."""
        return [r for r in self.all_runs if r.run_id not in self.withdrawn]

    @cached_property
    def reference_gpus(self) -> dict[str, Gpu]:
        """Per study, the GPU its results come from (:func:`publish.runs.reference_gpu`)."""
        studies = sorted({r.study for r in self.in_force})
        out = {}
        for study in studies:
            gpu = reference_gpu([r for r in self.in_force if r.study == study])
            if gpu is not None:
                out[study] = gpu
        return out

    @cached_property
    def other_gpu(self) -> dict[str, Gpu]:
        """Runs in force that measured another GPU than their study's reference, by run id,
        with that reference.  They are listed (Sources: "other GPU, not mixed in") and kept
        out of every table, chart, claim and comparison."""
        return {r.run_id: self.reference_gpus[r.study] for r in self.in_force if r.gpu != self.reference_gpus[r.study]}

    @cached_property
    def runs(self) -> list[Run]:
        """The runs whose numbers appear on the pages: all but the withdrawn, and, per study,
        only those of the study's reference GPU (tables, charts, claims and comparisons never
        mix GPUs)."""
        return [r for r in self.in_force if r.run_id not in self.other_gpu]

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
    claims: bool = False  # evaluated again on earlier sets of runs for the review record
    report: Callable[[SiteData], list[str]] | None = None  # extra lines for the build's report


def pages() -> list[Page]:
    """The content pages, in the order of mkdocs.yml's nav (the review page is built last,
    from what these report)."""
    from publish.pages import compare, dispatch, home, methodology, rowgrid, softmax, sources, stability

    return [
        Page("index.md", "index.md.j2", home.context),
        Page("softmax.md", "softmax.md.j2", lambda data: softmax.context(data.studies["softmax"]), claims=True),
        Page("rowgrid.md", "rowgrid.md.j2", rowgrid.context, claims=True, report=rowgrid.report),
        Page("dispatch.md", "dispatch.md.j2", dispatch.context, claims=True),
        Page("stability.md", "stability.md.j2", stability.context),
        Page("compare.md", "compare.md.j2", compare.context),
        Page("methodology.md", "methodology.md.j2", methodology.context),
        Page("sources.md", "sources.md.j2", sources.context),
    ]
