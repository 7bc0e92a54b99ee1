"""The cross-entropy case study (issue 10): its page declared (peers, targets, tables, charts),
and what only this study has: peak memory as a result beside time.  Each variant's meta
(bench/studies/cross_entropy.py) stores the step's peak above its inputs (``peak_bytes``,
``torch.cuda.max_memory_allocated``) and the logits' size; this page puts them beside the
median device times, holds our in-place mode to the issue's memory target (logits + O(N)),
and checks from the data whether ours, where it loses on time, wins on memory.  Every win and
loss is the one verdict's.  The generic machinery is :mod:`publish.studypage`; the prose is
``templates/cross_entropy.md.j2``.  Peers and their labels come from the run files."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from publish.claims import Claim, sentence
from publish.numbers import Num, definition
from publish.results import CaseResult
from publish.studypage import memory
from publish.studypage.claims import eager_flips, pairwise
from publish.studypage.common import DEVICE_TIME, NOT_INSTALLED, cases_evidence, refusal, time_or_why
from publish.studypage.memory import peak
from publish.studypage.spec import (
    DIRECTION_TITLES,
    DTYPE_ORDER,
    AtMost,
    Bandwidth,
    Case,
    DeviceVsEager,
    MetaAtMost,
    Speedups,
    SpeedupsAt,
    StudyPage,
    StudyView,
    Target,
)
from publish.tables import Column, Table, Text

OP = "cross_entropy"  # the plain loss; its variations have tables of their own (below)
OURS = "triton"  # kernels.cross_entropy: the gradient into a new buffer
INPLACE = "triton-inplace"  # inplace_backward=True: the gradient over the logits
PEERS = (INPLACE, "torch", "compile", "liger", "quack")
VARIANTS = (OURS, *PEERS)
OTHERS = PEERS[1:]  # the peers that are not ours in another mode
OPS = {OP: "", "cross_entropy_ls": "label smoothing 0.1", "cross_entropy_softcap": "soft cap 30"}
# The issue's case: 8192 tokens x Llama 3's vocabulary, a bf16 training step.
STEP = Case("fwd+bwd", "bf16", 8192, 128256, op=OP)
FWD = Case("fwd", "bf16", 8192, 128256, op=OP)
LIGER_SHARE = definition(0.7, "x_set", "target: our training step's time at most this multiple of Liger's")
PER_TOKEN = 64  # bytes: "O(N)", sixteen fp32 numbers per token (per-row losses, scales, masks)


def _per_token_bound(c: CaseResult) -> float:
    return float(PER_TOKEN * int(c.params["rows"]))


MEMORY_TARGET = MetaAtMost(
    INPLACE,
    "peak_bytes",
    _per_token_bound,
    "the step's peak memory above its inputs",
    f"{PER_TOKEN} bytes per token (the whole step within the logits plus O(N))",
    unit="bytes",
)


# ----------------------------------------------------------------------------- memory from meta

PEAK_WHAT = "inputs (logits and targets) plus the most one step allocated above them"


def peak_num(c: CaseResult, variant: str) -> Num | Text:
    """The peak in MiB, linked to its run, case and variant; or why there is none."""
    return memory.peak_num(c, variant, PEAK_WHAT)


def _title(c: CaseResult) -> str:
    """ "Forward + backward, bf16, 8192×128256" (then ", soft cap 30")."""
    op = str(c.params.get("op", OP))
    tail = f", {OPS[op]}" if OPS.get(op) else ""
    return f"{DIRECTION_TITLES.get(c.params['direction'], c.params['direction'])}, {c.params['dtype']}, {c.shape}{tail}"


def _order(c: CaseResult) -> tuple[Any, ...]:
    op = str(c.params.get("op", OP))
    dtype = c.params["dtype"]
    rank = DTYPE_ORDER.index(dtype) if dtype in DTYPE_ORDER else len(DTYPE_ORDER)
    return (list(OPS).index(op) if op in OPS else len(OPS), rank, c.params["cols"], c.params["rows"])


def memory_table(view: StudyView, direction: str) -> Table | None:
    """Per case of ``direction``, each variant's median device time and its step's peak
    memory (inputs included) in MiB, side by side; and the logits' own size."""
    cases = sorted((c for c in view.results.cases.values() if c.params["direction"] == direction), key=_order)
    title = DIRECTION_TITLES.get(direction, direction)
    table_id = f"cross_entropy-memory-{direction.replace('+', '')}"
    return memory.memory_table(view, cases, VARIANTS, table_id, f"{title}: time and peak memory side by side", _title,
                               PEAK_WHAT, "the step's peak over the logits' size")  # fmt: skip


# ----------------------------------------------------------------------------- observations


def _steps(view: StudyView) -> list[CaseResult]:
    return sorted((c for c in view.results.cases.values() if c.params["direction"] == "fwd+bwd"), key=_order)


def time_for_memory(view: StudyView) -> list[Claim]:
    """Where fused loses on time, does it win memory?  Every training-step comparison our
    variants (new buffer, in place) lost on device time to a peer by the one verdict, and
    whether ours held the lower peak there (the peaks as each run recorded them)."""
    lost: list[tuple[CaseResult, str, str]] = []
    for c in _steps(view):
        for ours in (OURS, INPLACE):
            for peer in OTHERS:
                if view.outcome(c, peer, ours) == "loss":
                    lost.append((c, ours, peer))
    measured = [(c, o, p) for c, o, p in lost if peak(c.variants[o]) is not None and peak(c.variants[p]) is not None]
    if not lost:
        compared = [c for c in _steps(view) if any(view.outcome(c, p, OURS) is not None for p in OTHERS)]
        if not compared:
            return []
        return [
            Claim(
                "time-for-memory",
                sentence(
                    "Device time (graph replay), training step: neither of our modes (the gradient into a new buffer "
                    "or over the logits) lost a comparison with another library's kernel ({peers}) in the {n} "
                    + ("case" if len(compared) == 1 else "cases")
                    + " measured, so there is no time-for-memory trade to report (the losses table also holds the "
                    "two modes against each other).",
                    n=Num(len(compared), "count"),
                    peers=", ".join(view.label(p) for p in OTHERS),
                ),
                True,
            )
        ]
    lower = [(c, o, p) for c, o, p in measured if peak(c.variants[o]) < peak(c.variants[p])]  # type: ignore[operator]
    not_lower = [(c, o, p) for c, o, p in measured if (c, o, p) not in lower]
    text = sentence(
        "Device time (graph replay), training step: in {k} of the {n} comparisons ours lost on time (by the verdict) "
        "with both peaks recorded, its peak was the lower one",
        k=Num(len(lower), "count"),
        n=Num(len(measured), "count"),
    )
    if lower:
        c, o, p = max(lower, key=lambda f: peak(f[0].variants[f[2]]) / max(peak(f[0].variants[f[1]]) or 1, 1))  # type: ignore[operator]
        text += sentence(
            "; the widest: {case}, {ours} {mo} against {peer} {mp} (its time {x})",
            case=c.case_id,
            ours=view.label(o),
            mo=peak_num(c, o),  # type: ignore[arg-type]
            peer=view.label(p),
            mp=peak_num(c, p),  # type: ignore[arg-type]
            x=c.speedup(o, p),  # type: ignore[arg-type]
        )
    unmeasured = len(lost) - len(measured)
    if unmeasured:
        text += sentence(" ({u} more losses have no recorded peak)", u=Num(unmeasured, "count"))
    text += sentence(".")
    return [
        Claim(
            "time-for-memory",
            text,
            bool(measured) and not not_lower,
            hypothesis="where ours loses a training step on time, it holds less memory than the peer that won",
            evidence=cases_evidence("ours lost on time without saving memory", [f[0] for f in not_lower]),
        )
    ]


def inplace_observations(view: StudyView) -> list[Claim]:
    """Writing the gradient over the logits: what it costs in time (the one verdict) and
    whether the peak stays within the logits plus O(N) in every training step."""
    steps = _steps(view)
    out = []
    cost = pairwise(
        view,
        "inplace-costs-no-time",
        steps,
        INPLACE,
        OURS,
        "Device time (graph replay), training step: writing the gradient over the logits beat writing it into a new "
        "buffer in {k} of {n} cases and lost {l} ({u} within the noise; the widest gap {x}, {case}).",
        lambda won, lost, n: lost == 0,
        hypothesis="writing the gradient over the logits saves their size in memory and costs no time: it loses no "
        "training step to a new buffer",
    )
    liger = pairwise(
        view,
        "inplace-against-liger",
        steps,
        INPLACE,
        "liger",
        "Device time (graph replay), training step, both writing the gradient over the logits: ours beat Liger-Kernel "
        "in {k} of {n} cases and lost {l} ({u} within the noise; up to {x}, {case}).",
        lambda won, lost, n: lost == 0,
        hypothesis="with the same memory plan as Liger-Kernel (the gradient over the logits), ours loses no training "
        "step to it",
    )
    out += [c for c in (cost, liger) if c is not None]
    recorded = [(c, m) for c in steps if (m := c.variants.get(INPLACE)) is not None and peak(m) is not None]
    if recorded:
        over = [c for c, m in recorded if int(m.meta["peak_bytes"]) > _per_token_bound(c)]
        out.append(
            Claim(
                "inplace-memory-everywhere",
                sentence(
                    "Recorded by the sweep: in place, the step's peak stayed within the logits plus {b} bytes per "
                    "token in {k} of the {n} training steps whose peak was recorded.",
                    b=Num(PER_TOKEN, "int"),
                    k=Num(len(recorded) - len(over), "count"),
                    n=Num(len(recorded), "count"),
                ),
                not over,
                hypothesis="in place, a training step holds no second [N, V] tensor: its peak stays within the logits "
                "plus a bound per token",
                evidence=cases_evidence("over the bound", over),
            )
        )
    return out


def peer_observations(view: StudyView) -> list[Claim]:
    """What QuACK and Liger declined (label smoothing, the soft cap, rows that are not a
    multiple of 16 bytes, a missing package), read from each variant's record."""
    out = []
    liger = [m for c in view.results.cases.values() if (m := c.variants.get("liger")) is not None]
    notes = sorted(
        {f"release {m.meta['version']}, {m.meta['gradient']}" for m in liger if {"version", "gradient"} <= set(m.meta)}
    )
    if notes:
        out.append(
            Claim(
                "liger-gradient",
                sentence(
                    "The runs timed Liger-Kernel {notes} (where its forward writes the gradient). Its training steps "
                    "are compared as full steps, as they must be.",
                    notes="; ".join(notes),
                ),
                True,
            )
        )
    for peer in ("liger", "quack"):
        # A case whose machine lacked the package was never offered to the peer: its cell says
        # "not installed", and it is counted apart from the peer's own refusals.
        listed = [c for c in view.results.cases.values() if peer in c.variants]
        absent = [c for c in listed if NOT_INSTALLED in (c.variants[peer].error or "")]
        offered = [c for c in listed if c not in absent]
        refused = [c for c in offered if (c.variants[peer].error or "").startswith("refused")]
        if offered:
            text = sentence(
                "{peer} declined {r} of the {n} cases it was offered",
                peer=view.label(peer),
                r=Num(len(refused), "count"),
                n=Num(len(offered), "count"),
            )
            if refused:
                text += sentence("; those cases show no {peer} time (each table cell says why)", peer=view.label(peer))
            if absent:
                text += sentence(
                    "; {a} more were run on a machine without it installed, so it was not offered them",
                    a=Num(len(absent), "count"),
                )
            out.append(
                Claim(
                    f"{peer}-refusals",
                    text + Markup("."),
                    True,
                    evidence=cases_evidence("refused", refused),
                )
            )
    return out


# ----------------------------------------------------------------------------- the variations


def variations_table(view: StudyView) -> Table | None:
    """Label smoothing and the soft cap: every variant's median device time."""
    cases = sorted((c for c in view.results.cases.values() if c.params.get("op", OP) != OP), key=_order)
    if not cases:
        return None
    present = [v for v in VARIANTS if any(v in c.variants for c in cases)]
    cols = [Column("case", "Case", numeric=False)]
    cols += [Column(v, view.label(v), f"median µs, {DEVICE_TIME}") for v in present]
    table = Table("cross_entropy-variations", f"Label smoothing and the soft cap (median µs, {DEVICE_TIME})", cols)
    for c in cases:
        row: dict[str, Any] = {"case": Text(_title(c))}
        for v in present:
            row[v] = time_or_why(c, v) if v in c.variants else refusal(c, v)
        table.rows.append(row)
    return table


def extra(view: StudyView) -> dict[str, Any]:
    return {
        "memory_fwd": memory_table(view, "fwd"),
        "memory_step": memory_table(view, "fwd+bwd"),
        "variations": variations_table(view),
    }


# ----------------------------------------------------------------------------- the page

PAGE = StudyPage(
    study="cross_entropy",
    title="Cross-entropy",
    summary="the loss over a vocabulary and its gradient in one pass over the logits (in a new buffer or over the "
    "logits), against F.cross_entropy, torch.compile, Liger-Kernel and QuACK; device time and peak memory",
    ours=OURS,
    peers=PEERS,
    op=OP,
    charts=(
        Speedups("fwd+bwd"),
        Speedups("fwd"),
        Bandwidth("fwd+bwd", (OURS, INPLACE, "compile", "liger", "quack")),
        DeviceVsEager("fwd+bwd", (OURS, "torch", "liger")),
    ),
    targets=(
        Target("target-liger-step-8192x128256", AtMost("liger", LIGER_SHARE), STEP, ("cold",)),
        Target("target-memory-step-8192x128256", MEMORY_TARGET, STEP, ("cold",)),
    ),
    evidence=(SpeedupsAt(STEP, ("liger", "compile")), SpeedupsAt(FWD, ("torch", "compile"))),
    observations=(time_for_memory, inplace_observations, peer_observations, eager_flips),
    extra=extra,
)
