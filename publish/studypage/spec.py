"""A study page, declared: what a study compares and which tables, charts and targets its
page shows.  :mod:`publish.studypage.page` turns a spec and the study's results into the
page's context; nothing in a spec is measured, and nothing measured is typed into one.

The variants' labels are not declared here: every run file stores them (contract/labels.py),
and the page reads them from the runs in force.  A case a spec names (for a target or a line
of evidence) is written on the page as the data hold it, and a named case no run in force
measured is reported as "no data".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from contract import studies
from publish.numbers import Num, definition
from publish.results import CaseResult, StudyResults

if TYPE_CHECKING:
    from publish.charts import Chart
    from publish.claims import Claim
    from publish.pages import SiteData

# What a section of the page, a target or a chart is about, in words.
DIRECTION_TITLES = {"fwd": "Forward", "fwd+bwd": "Forward + backward"}
DIRECTION_WORDS = {"fwd": "forward", "fwd+bwd": "training step (forward + backward)"}
DTYPE_ORDER = ("bf16", "fp16", "tf32", "fp32", "fp64")  # tf32: fp32 tensors multiplied as TF32
L2_MODES = ("cold", "warm")

# The tables a comparison page can show (``StudyPage.tables``).
SUMMARY = "summary"  # one line per peer: cases won, unresolved, lost
SPEED = "speed"  # per direction and dtype: our time, bandwidth and the speedup over each peer
EAGER = "eager"  # the same cases as eager calls
TIMES = "times"  # every variant's median
EAGER_TIMES = "eager_times"
LOSSES = "losses"  # every case a peer won, and why
EAGER_LOSSES = "eager_losses"
ALL_TABLES = frozenset({SUMMARY, SPEED, EAGER, TIMES, EAGER_TIMES, LOSSES, EAGER_LOSSES})

# The rates a speed table shows beside each time (``StudyPage.rates``).
BANDWIDTH = "bandwidth"  # GB/s of the bytes counted from the problem, and % of the copy measured in the run
THROUGHPUT = "tflops"  # TFLOP/s of the flops counted from the problem, and % of the bf16 matrix rate measured


@dataclass(frozen=True)
class Case:
    """A case a spec names: a direction, a dtype and a shape (its L2 modes are chosen where
    it is used); ``op`` as well, for a study whose cases hold several operators."""

    direction: str
    dtype: str
    rows: int
    cols: int
    op: str | None = None
    # Further shape parameters the case is found by, in the registry's order (a matrix
    # product's inner dimension: (("k", 4096),)).
    more: tuple[tuple[str, int], ...] = ()

    def find(self, results: StudyResults, l2: str) -> CaseResult | None:
        which = ({} if self.op is None else {"op": self.op}) | dict(self.more)
        return results.find(direction=self.direction, dtype=self.dtype, rows=self.rows, cols=self.cols, l2=l2, **which)

    @property
    def shape(self) -> str:
        """The shape as a spec names it ("4096×50257"; "4096×4096×4096" with an inner dimension)."""
        return "×".join(str(d) for d in (self.rows, self.cols, *(v for _, v in self.more)))

    def describe(self, found: CaseResult | None = None, op_words: Mapping[str, str] | None = None) -> str:
        """ "4096×50257 bf16 forward": the shape as the data hold it when the case was found,
        preceded by the operator in the page's words where the case names one ("vector add
        1×16777216 bf16 forward"; ``op_words`` maps the run files' operator names to them,
        and an operator it maps to "" is the page's plain one)."""
        shape = found.shape if found is not None else self.shape
        dtype = found.params["dtype"] if found is not None else self.dtype
        op = ""
        if self.op is not None:
            name = str(found.params["op"] if found is not None else self.op)
            words = (op_words or {}).get(name, name)
            op = f"{words} " if words else ""
        return f"{op}{shape} {dtype} {DIRECTION_WORDS.get(self.direction, self.direction)}"


# ----------------------------------------------------------------------------- targets


@dataclass(frozen=True)
class NoSlower:
    """Ours no slower than ``peer``: the one verdict does not call it a loss."""

    peer: str
    eager: bool = False


@dataclass(frozen=True)
class CopyShare:
    """Our bandwidth at least ``threshold`` (a percentage) of the copy measured in the same run."""

    threshold: Num


@dataclass(frozen=True)
class AtMost:
    """Our median at most ``threshold`` (a multiple) times ``peer``'s; where the peer failed
    its float64 check the target does not apply.  ``eager``: the eager calls' medians."""

    peer: str
    threshold: Num
    eager: bool = False


@dataclass(frozen=True)
class AtLeast:
    """Our speedup over ``peer`` (its median over ours) at least ``threshold`` ("0.98× cuBLAS":
    ours may be up to 2% slower); where the peer failed its float64 check the target does
    not apply.  ``eager``: the eager calls' medians."""

    peer: str
    threshold: Num
    eager: bool = False


@dataclass(frozen=True)
class Faster:
    """Ours faster than ``peer``: the one verdict calls it a win (a tie is not enough)."""

    peer: str
    eager: bool = False


@dataclass(frozen=True)
class EagerEverywhere:
    """As an eager call, ours no slower than ``peer`` in every case the peer accepts."""

    peer: str


@dataclass(frozen=True)
class MetaAtMost:
    """A number ``variant``'s stored meta holds (``key``, e.g. a peak of memory in bytes) at
    most ``bound(case)`` (same unit): a result that is not a time, read from the run as the
    sweep recorded it.  ``what`` names the number and ``limit`` the bound, in words; shown
    divided by ``scale`` as ``unit`` (a key of :data:`publish.numbers.FORMATS`).  A case
    where the variant recorded no such number misses the target and says why."""

    variant: str
    key: str
    bound: Callable[[CaseResult], float]
    what: str
    limit: str
    unit: str = "int"
    scale: float = 1.0


Metric = NoSlower | Faster | CopyShare | AtMost | AtLeast | EagerEverywhere | MetaAtMost


@dataclass(frozen=True)
class Target:
    """A target from the study catalogue: ``metric`` on ``case`` in each of its ``l2`` modes
    the data hold (each must pass).  ``after`` adds a sentence from the cases found (e.g. why
    a peer stays ahead).  ``id`` is a permanent anchor (``claim-<id>``)."""

    id: str
    metric: Metric
    case: Case | None = None  # None only for EagerEverywhere, which looks at every case
    l2: tuple[str, ...] = L2_MODES
    after: Callable[[StudyView, list[CaseResult]], Markup] | None = None


# ----------------------------------------------------------------------------- charts and evidence


@dataclass(frozen=True)
class Speedups:
    """The key chart: how many times faster ours ran than each peer, with the intervals."""

    direction: str = "fwd"
    dtype: str = "bf16"
    l2: str = "cold"


@dataclass(frozen=True)
class Throughput:
    """Achieved TFLOP/s of ``variants`` (ours first) against the bf16 matrix rate measured in
    the run."""

    direction: str
    variants: tuple[str, ...]
    dtype: str = "bf16"
    l2: str = "cold"


@dataclass(frozen=True)
class Bandwidth:
    """Achieved bandwidth of ``variants`` (ours first) against the copy measured in the run."""

    direction: str
    variants: tuple[str, ...]
    dtype: str = "bf16"
    l2: str = "cold"


@dataclass(frozen=True)
class DeviceVsEager:
    """Device time and the eager call of ``variants`` side by side."""

    direction: str
    variants: tuple[str, ...]
    dtype: str = "bf16"
    l2: str = "cold"


@dataclass(frozen=True)
class WarmCold:
    """Our bandwidth with warm and with cold L2."""

    direction: str = "fwd"
    dtype: str = "bf16"


ChartSpec = Speedups | Bandwidth | Throughput | DeviceVsEager | WarmCold | Callable[["StudyView"], "Chart | None"]


@dataclass(frozen=True)
class CopyShareAt:
    """Decision card evidence: our share of the copy bandwidth at ``case``."""

    case: Case
    l2: str = "cold"


@dataclass(frozen=True)
class SpeedupsAt:
    """Decision card evidence: our speedup over each of ``peers`` at ``case``, then over every
    other peer timed there (the line names them all, losses included)."""

    case: Case
    peers: tuple[str, ...]
    l2: str = "cold"


@dataclass(frozen=True)
class MatrixShareAt:
    """Decision card evidence: our TFLOP/s and share of the bf16 matrix rate at ``case``."""

    case: Case
    l2: str = "cold"


Evidence = CopyShareAt | SpeedupsAt | MatrixShareAt


@dataclass(frozen=True)
class Headline:
    """Home's headline table: these shapes of one direction, dtype and L2 mode, ours against
    the fastest peer and against ``versus``."""

    shapes: tuple[tuple[int, int], ...]
    versus: str
    direction: str = "fwd"
    dtype: str = "bf16"
    l2: str = "cold"


# ----------------------------------------------------------------------------- the page

# Why ours lost a case: (short label for the losses table, the explanation under it).
Reason = tuple[str, str]


def explained_by(
    key: str, peers: tuple[str, ...], *, direction: str | None = None, ours: str = "triton"
) -> Callable[[CaseResult, str], str | None]:
    """A :class:`StudyPage` ``explain``: the reason ``key`` for every resolved loss of ours to
    one of ``peers`` (only in ``direction``, when given), in a case ours ran."""

    def explain(c: CaseResult, peer: str) -> str | None:
        if peer not in peers or c.get(ours) is None:
            return None
        return key if direction is None or c.params.get("direction") == direction else None

    return explain


CLOSE = definition(3, "pct", "a loss this small is reported as 'near the same bound'")


@dataclass(frozen=True)
class StudyPage:
    """One study's page.  A comparison page (ours against peers, per direction and dtype)
    is built from the declarations by :func:`publish.studypage.page.context`; a page of
    another shape gives its own ``context``.  Its template is ``templates/<study>.md.j2``."""

    study: str  # the registry's name (contract/studies.py)
    title: str  # the nav's and Home's name for the page
    summary: str  # Home's line about the study
    ours: str = ""  # our variant
    peers: tuple[str, ...] = ()  # the variants ours is compared with, in column order
    tables: frozenset[str] = ALL_TABLES
    # The operator the per-direction sections and charts show, for a study whose cases hold
    # several (the others get tables of their own); None: every case.  The summary, targets
    # and losses always cover every case.
    op: str | None = None
    rates: tuple[str, ...] = (BANDWIDTH,)  # beside each time in the speed tables, in order
    charts: tuple[ChartSpec, ...] = ()
    targets: tuple[Target, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    # Study-specific observations, in page order (the generic ones are in publish.studypage.claims).
    observations: tuple[Callable[[StudyView], list[Claim]], ...] = ()
    # Why ours lost a resolved device-time case to ``peer``: a key of ``reasons`` or None.
    explain: Callable[[CaseResult, str], str | None] | None = None
    reasons: Mapping[str, Reason] = field(default_factory=dict)  # added to (or replacing) the generic ones
    # The run files' operator names in the page's words, where a case names its operator
    # ("row_sum": "row sum"; "" for the page's plain operator).
    op_words: Mapping[str, str] = field(default_factory=dict)
    close: Num = CLOSE
    headline: Headline | None = None
    extra: Callable[[StudyView], dict[str, Any]] | None = None  # study-specific context (its own tables)
    context: Callable[[SiteData], dict[str, Any]] | None = None  # a page that is not a comparison
    # With ``context``: the page's claims (targets and observations) alone, as its context
    # holds them; the review record evaluates them on every earlier set of runs.
    claims: Callable[[SiteData], list[Claim]] | None = None
    report: Callable[[SiteData], list[str]] | None = None  # lines for the build's report

    @property
    def output(self) -> str:
        return f"{self.study}.md"

    @property
    def template(self) -> str:
        return f"{self.study}.md.j2"

    @property
    def compares(self) -> bool:
        """Whether the page compares ours with peers (the Stability page follows those)."""
        return bool(self.ours and self.peers)


@dataclass(frozen=True)
class StudyView:
    """A spec with the results it is evaluated on: what every table, chart and claim of a
    comparison page asks (our variant, the peers and their labels, the one verdict)."""

    spec: StudyPage
    results: StudyResults

    @property
    def study(self) -> str:
        return self.spec.study

    @property
    def ours(self) -> str:
        return self.spec.ours

    @property
    def peers(self) -> tuple[str, ...]:
        return self.spec.peers

    @cached_property
    def variant_order(self) -> list[str]:
        """Every variant of the page in one order: ours, the peers in column order, then the
        others the cases hold, by name (the charts' markers follow it)."""
        first = [self.ours, *self.peers]
        return first + sorted({v for c in self.results.cases.values() for v in c.variants} - set(first))

    @property
    def op_words(self) -> dict[str, str]:
        """The run files' operator names in the page's words; the page's own operator (the
        spec's ``op``) goes unsaid."""
        return ({} if self.spec.op is None else {self.spec.op: ""}) | dict(self.spec.op_words)

    def label(self, variant: str) -> str:
        """What the runs call ``variant`` (the label the newest run holding it stores)."""
        return self.results.label(variant)

    def outcome(self, c: CaseResult, peer: str, ours: str | None = None) -> str | None:
        """The one verdict (publish.results.verdict) on ours against ``peer`` in this case:
        "win", "loss", "unresolved", or None where either has no time."""
        v = c.verdict(ours or self.ours, peer)
        return v.outcome if v is not None else None

    def timed(self) -> list[CaseResult]:
        """Every case in force where ours has a time."""
        return [c for c in self.results.cases.values() if c.get(self.ours) is not None]

    def where(self, **params: Any) -> list[CaseResult]:
        """The cases of the spec's operator (every case where it names none) with ``params``."""
        return self.results.where(**params, **({} if self.spec.op is None else {"op": self.spec.op}))

    def find(self, **params: Any) -> CaseResult | None:
        found = self.where(**params)
        return found[0] if found else None

    def directions(self) -> list[str]:
        """The directions the data hold, forward first."""
        found = {str(c.params["direction"]) for c in self.where()}
        return _ordered(found, tuple(DIRECTION_TITLES))

    def dtypes(self) -> list[str]:
        found = {str(c.params["dtype"]) for c in self.where()}
        return _ordered(found, DTYPE_ORDER)

    def shapes(self, direction: str, dtype: str) -> list[dict[str, int]]:
        """The shape parameters of every case of ``direction`` and ``dtype`` (rows and cols,
        and any further ones the registry names), narrowest rows first."""
        names = studies.shape(self.study)
        seen = {
            tuple((p, c.params[p]) for p in names if p in c.params)
            for c in self.where(direction=direction, dtype=dtype)
        }
        found = [dict(dims) for dims in seen]
        return sorted(found, key=lambda d: (d.get("cols", 0), d.get("rows", 0), tuple(d.values())))


def _ordered(found: set[str], order: tuple[str, ...]) -> list[str]:
    return [v for v in order if v in found] + sorted(found - set(order))
