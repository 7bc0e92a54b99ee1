"""The fused linear cross-entropy case study (issue 10): its page declared (peers, the
memory target, tables, charts).  What only this study has: memory is the result and time
the price, so the page puts every variant's peak beside its time and holds ours to a
quarter of the unfused step's peak.  Peaks are read from each variant's meta as
bench/studies/linear_cross_entropy.py stores it (``peak_bytes`` above the inputs,
``inputs_bytes``, ``logits_bytes`` the size the full logits would have).  The generic
machinery is :mod:`publish.studypage`; the prose is ``templates/linear_cross_entropy.md.j2``."""

from __future__ import annotations

from typing import Any

from publish.results import CaseResult
from publish.studypage import memory
from publish.studypage.claims import eager_flips
from publish.studypage.spec import (
    DIRECTION_TITLES,
    THROUGHPUT,
    Case,
    MetaAtMost,
    Speedups,
    SpeedupsAt,
    StudyPage,
    StudyView,
    Target,
    explained_by,
)
from publish.tables import Table

OP = "linear_cross_entropy"
OURS = "triton"
PEERS = ("torch", "compile", "liger")
VARIANTS = (OURS, *PEERS)
HIDDEN = 4096
# The issue's case: 8192 tokens, hidden 4096, Llama 3's vocabulary, a bf16 training step.
STEP = Case("fwd+bwd", "bf16", 8192, 128256, op=OP, more=(("hidden", HIDDEN),))
SHARE = 0.25  # of the unfused step's peak above its inputs


def _quarter_of_unfused(c: CaseResult) -> float:
    """A quarter of the unfused eager step's peak above its inputs; NaN (a miss that says
    why) where that step recorded none."""
    m = c.variants.get("torch")
    value = m.meta.get("peak_bytes") if m is not None else None
    if not isinstance(value, int) or isinstance(value, bool):
        return float("nan")
    return SHARE * value


REASONS = {
    "weight-gradient-passes": (
        "weight-gradient passes",
        "We think this is the price of the chunks: ours accumulates the weight gradient one chunk of tokens at a "
        "time, so each chunk's product reads and writes the whole [V, H] gradient once more (the run's meta holds "
        "the chunk, chunk_rows), traffic the unfused step does not have: it forms the gradient in one product over "
        "all N tokens, from the [N, V] logits it keeps.",
    )
}


MEMORY_TARGET = MetaAtMost(
    OURS,
    "peak_bytes",
    _quarter_of_unfused,
    "the training step's peak memory above its inputs",
    "a quarter of the unfused step's (F.linear, then F.cross_entropy, eager) in the same case",
    unit="bytes",
)


def memory_table(view: StudyView) -> Table | None:
    """Per case, each variant's median device time and its step's peak memory (inputs
    included), and that peak as a multiple of what the full logits would take."""
    cases = sorted(view.results.cases.values(), key=lambda c: (c.params["cols"], c.params["rows"]))

    def title(c: CaseResult) -> str:
        return f"{DIRECTION_TITLES.get(c.params['direction'], c.params['direction'])}, {c.params['dtype']}, {c.shape}"

    return memory.memory_table(
        view, cases, VARIANTS, "linear_cross_entropy-memory", "Training step: time and peak memory side by side",
        title, "inputs (hidden states, weight, targets) plus the most one step allocated above them",
        "the step's peak over the size the full [N, V] logits would have",
    )  # fmt: skip


def extra(view: StudyView) -> dict[str, Any]:
    return {"memory_step": memory_table(view)}


PAGE = StudyPage(
    study="linear_cross_entropy",
    title="Fused linear cross-entropy",
    summary="the lm head's projection and the loss over chunks of tokens, so the [N, V] logits never exist, "
    "against F.linear then F.cross_entropy, torch.compile and Liger-Kernel; peak memory first, time beside it",
    ours=OURS,
    peers=PEERS,
    op=OP,
    rates=(THROUGHPUT,),
    charts=(Speedups("fwd+bwd"),),
    targets=(Target("target-memory-quarter-8192x128256", MEMORY_TARGET, STEP, ("cold",)),),
    evidence=(SpeedupsAt(STEP, ("liger", "compile", "torch")),),
    observations=(eager_flips,),
    explain=explained_by("weight-gradient-passes", ("torch", "compile")),
    reasons=REASONS,
    extra=extra,
)
