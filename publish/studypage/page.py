"""A comparison page's context, from its spec and the study's results: the answer (decision
card, summary, key chart), targets, losses, the tables per direction and dtype, the charts
and the observations.  The study's template (``templates/<study>.md.j2``) lays them out
with the macros of ``templates/partials/study.html.j2``."""

from __future__ import annotations

from typing import Any

from publish.claims import Claim
from publish.results import StudyResults
from publish.studypage import charts as chart_kinds
from publish.studypage.claims import decision, targets
from publish.studypage.common import rows_of
from publish.studypage.losses import losses_table
from publish.studypage.spec import EAGER_LOSSES, LOSSES, SUMMARY, StudyPage, StudyView
from publish.studypage.tables import has_eager, sections, summary_table


def observations(view: StudyView) -> list[Claim]:
    """The spec's observations, in its order (the generic ones, such as
    :func:`publish.studypage.claims.eager_flips`, are listed in a spec like its own)."""
    return [claim for observe in view.spec.observations for claim in observe(view)]


def claims(spec: StudyPage, results: StudyResults) -> list[Claim]:
    """The page's claims as :func:`context` holds them (its targets, then its observations),
    without its tables and charts: what the review record evaluates on earlier sets of runs."""
    view = StudyView(spec, results)
    return targets(view) + observations(view)


def context(spec: StudyPage, results: StudyResults) -> dict[str, Any]:
    view = StudyView(spec, results)
    found = sections(view)
    aims = targets(view)
    out: dict[str, Any] = {
        "results": results,
        "summary": summary_table(view) if SUMMARY in spec.tables else None,
        "sections": found,
        # from the cases, not the sections: a page without per-direction sections (its own
        # tables instead) still shows its eager losses
        "has_eager": has_eager(view, list(results.cases.values())),
        "charts": {c.id: c for c in (chart_kinds.chart(view, k) for k in spec.charts) if c is not None},
        "targets": aims,
        "observations": observations(view),
        "decision": decision(view, aims),
        "peers": {p: view.label(p) for p in spec.peers},
        "ours": view.label(spec.ours),
    }
    for key, reasons_key, wanted, eager in (
        ("losses", "loss_reasons", LOSSES, False),
        ("eager_losses", "eager_loss_reasons", EAGER_LOSSES, True),
    ):
        lost, unresolved, reasons = losses_table(view, eager=eager) if wanted in spec.tables else (None, None, [])
        out |= {
            key: lost,
            f"{key}_unresolved": unresolved,
            f"{key}_unresolved_n": rows_of(unresolved) if unresolved is not None else None,
            reasons_key: reasons,
        }
    if spec.extra is not None:
        out |= spec.extra(view)
    return out
