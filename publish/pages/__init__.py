"""The pages of the site, declared in order: output file, template, nav title, and the
function that computes the page's context from the loaded data.

The study pages follow the contract's registry (:mod:`contract.studies`): each registered
study has its page spec in ``publish/pages/<study>.py`` (``PAGE``, a
:class:`publish.studypage.spec.StudyPage`) and its template ``templates/<study>.md.j2``.
The nav (:func:`nav`), Home, Stability, Compare and the tests all read this list."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from contract import studies as registry
from publish.frame import Stats
from publish.results import StudyResults
from publish.review import Withdrawal
from publish.runs import Gpu, Run, reference_gpu

if TYPE_CHECKING:
    from publish.claims import Claim
    from publish.studypage.spec import StudyPage


@dataclass
class SiteData:
    """Every stored run, the withdrawals, and the results computed from the runs in force."""

    all_runs: list[Run]
    withdrawals: list[Withdrawal] = field(default_factory=list)
    # The pivoted frame (publish.frame.Stats) of a larger set of runs holding these, made
    # already: the review record evaluates the claims again on every earlier set of runs.
    shared_stats: Stats | None = field(default=None, repr=False, compare=False)

    @cached_property
    def stats(self) -> Stats:
        """Every stored run as the tidy frame (withdrawn runs marked), pivoted to one row per
        measurement: what every number on the pages and in the downloads is read from."""
        if self.shared_stats is not None:
            return self.shared_stats
        return Stats.of(self.all_runs, set(self.withdrawn))

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
    def studies(self) -> Mapping[str, StudyResults]:
        """Every registered study's results, each made when first read (the review record
        evaluates one study's page at a time on earlier sets of runs)."""
        return _Studies(self)

    @property
    def latest(self) -> Run | None:
        return self.runs[-1] if self.runs else None


class _Studies(Mapping[str, StudyResults]):
    def __init__(self, data: SiteData) -> None:
        self._data = data
        self._names = registry.names()
        self._made: dict[str, StudyResults] = {}

    def __getitem__(self, name: str) -> StudyResults:
        if name not in self._made:
            if name not in self._names:
                raise KeyError(name)
            self._made[name] = StudyResults(name, self._data.runs, self._data.stats)
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


@dataclass(frozen=True)
class Page:
    output: str
    template: str
    context: Callable[[SiteData], dict[str, Any]]
    title: str  # in the nav
    # The page's claims alone (as its context holds them), evaluated again on earlier sets of
    # runs for the review record; None: a page that states no claims.
    claims: Callable[[SiteData], list[Claim]] | None = None
    report: Callable[[SiteData], list[str]] | None = None  # extra lines for the build's report
    study: str | None = None  # a study's page reads that study's runs alone


def study_pages() -> list[StudyPage]:
    """Every registered study's page spec, in the registry's order."""
    out = []
    for name in registry.names():
        module = importlib.import_module(f"publish.pages.{name}")
        spec: StudyPage | None = getattr(module, "PAGE", None)
        if spec is None or spec.study != name:
            raise TypeError(f"publish/pages/{name}.py must declare PAGE, the StudyPage of study {name!r}")
        out.append(spec)
    return out


def _study(spec: StudyPage) -> Page:
    """A study's page: its own context and claims, or the comparison page its spec declares."""
    from publish.studypage import page

    def compare(data: SiteData) -> dict[str, Any]:
        return page.context(spec, data.studies[spec.study])

    def compared_claims(data: SiteData) -> list[Claim]:
        return page.claims(spec, data.studies[spec.study])

    if spec.context is not None:
        if spec.claims is None:
            raise TypeError(f"publish/pages/{spec.study}.py: a page with its own context declares its claims too")
        compute, claims = spec.context, spec.claims
    else:
        compute, claims = compare, compared_claims
    return Page(spec.output, spec.template, compute, spec.title, claims=claims, report=spec.report, study=spec.study)


# Built last, from what the other pages report (publish.site); placed in the nav after Compare.
REVIEW = ("Review record", "review.md")


def pages() -> list[Page]:
    """The content pages, in nav order (the review page is built last, from what these report)."""
    from publish.pages import compare, home, methodology, sources, stability

    return [
        Page("index.md", "index.md.j2", home.context, "Home"),
        *(_study(spec) for spec in study_pages()),
        Page("stability.md", "stability.md.j2", stability.context, "Stability"),
        Page("compare.md", "compare.md.j2", compare.context, "Compare runs"),
        Page("methodology.md", "methodology.md.j2", methodology.context, "Methodology"),
        Page("sources.md", "sources.md.j2", sources.context, "Sources"),
    ]


def nav() -> list[dict[str, str]]:
    """MkDocs' nav, from the registry: every page in order, the review record after Compare."""
    out = []
    for p in pages():
        out.append({p.title: p.output})
        if p.output == "compare.md":
            out.append({REVIEW[0]: REVIEW[1]})
    return out
