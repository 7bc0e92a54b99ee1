"""The pointwise training kernels' pages (RoPE, SwiGLU, bias + GELU + dropout), declared one
way: ours against the eager formula, ``torch.compile`` of it and Liger-Kernel where it has
the op; forward and training step; device time and the eager call, each time beside its
bandwidth and share of the copy measured in the same run; the issue's target (no slower than
``torch.compile`` at the DRAM-bound shapes) and the training step's peak memory beside its
time.  Each page module calls :func:`page` with its study's cases and adds what only it has."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from publish.claims import Claim
from publish.results import CaseResult
from publish.studypage import memory
from publish.studypage.claims import eager_flips
from publish.studypage.spec import (
    DIRECTION_TITLES,
    Bandwidth,
    Case,
    CopyShareAt,
    DeviceVsEager,
    NoSlower,
    Speedups,
    SpeedupsAt,
    StudyPage,
    StudyView,
    Target,
)
from publish.tables import Table

OURS = "triton"


def memory_step(view: StudyView, variants: Sequence[str]) -> Table | None:
    """Per training-step case, each variant's median device time and its step's peak memory
    (inputs included), and that peak as a multiple of ours."""
    cases = sorted(view.results.where(direction="fwd+bwd"), key=lambda c: c.case_id)

    def title(c: CaseResult) -> str:
        return f"{DIRECTION_TITLES['fwd+bwd']}, {c.params['dtype']}, {c.shape}"

    return memory.memory_table(
        view, cases, variants, f"{view.study}-memory", "Training step: time and peak memory side by side", title,
        "inputs plus the most one training step allocated above them", "the variant's peak over ours",
        basis=("× ours", "ours' inputs_bytes + peak_bytes", memory.ours_peak(OURS)),
    )  # fmt: skip


def _target_id(c: Case) -> str:
    return f"target-compile-{c.direction.replace('+', '')}-{c.shape.replace('×', 'x')}"


def page(
    study: str,
    title: str,
    summary: str,
    peers: tuple[str, ...],
    dram_bound: Sequence[Case],
    *,
    extra: Callable[[StudyView], dict[str, Any]] | None = None,
    observations: tuple[Callable[[StudyView], list[Claim]], ...] = (),
    explain: Callable[[CaseResult, str], str | None] | None = None,
    reasons: dict[str, tuple[str, str]] | None = None,
) -> StudyPage:
    """A pointwise page.  ``dram_bound``: the cases (one per direction) the issue's target
    holds ours to ``torch.compile`` at, with cold L2; the first forward one is the decision
    card's bandwidth evidence and the training step the speedup evidence.  ``explain`` and
    ``reasons``: the page's own explanations of losses (as :class:`StudyPage` takes them)."""
    variants = (OURS, *peers)
    fwd = next((c for c in dram_bound if c.direction == "fwd"), dram_bound[0])
    step = next((c for c in dram_bound if c.direction == "fwd+bwd"), dram_bound[-1])

    def context(view: StudyView) -> dict[str, Any]:
        return {"memory_step": memory_step(view, variants)} | (extra(view) if extra is not None else {})

    return StudyPage(
        study=study,
        title=title,
        summary=summary,
        ours=OURS,
        peers=peers,
        charts=(
            Speedups("fwd"),
            Speedups("fwd+bwd"),
            Bandwidth("fwd", variants),
            Bandwidth("fwd+bwd", variants),
            DeviceVsEager("fwd", variants),
        ),
        targets=tuple(Target(_target_id(c), NoSlower("compile"), c, ("cold",)) for c in dram_bound),
        evidence=(CopyShareAt(fwd), SpeedupsAt(step, peers)),
        observations=(*observations, eager_flips),
        extra=context,
        explain=explain,
        reasons=dict(reasons or {}),
    )
