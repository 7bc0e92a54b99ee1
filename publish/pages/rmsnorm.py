"""The residual RMSNorm case study: its page declared (peers, targets, tables, charts), and
what only RMSNorm has: the row plans forced beside the planner's choice, and which Liger
entry point the runs timed.  The generic machinery is :mod:`publish.studypage`; the prose is
``templates/rmsnorm.md.j2``.  Peers and their labels come from the run files."""

from __future__ import annotations

from typing import Any

from publish.claims import Claim, sentence
from publish.numbers import Num
from publish.results import CaseResult
from publish.safe import readable
from publish.studypage.claims import eager_flips, pairwise, warm_exceeds_dram
from publish.studypage.common import DEVICE_TIME, ELEM_BYTES, NOT_INSTALLED, cases_evidence, l2_cell, time_or_why
from publish.studypage.rowwise import COPY_TARGET, QUACK_TARGET, WHY_QUACK, WIDE_COLD_TARGET
from publish.studypage.spec import (
    DIRECTION_TITLES,
    AtMost,
    Bandwidth,
    Case,
    CopyShare,
    CopyShareAt,
    DeviceVsEager,
    EagerEverywhere,
    NoSlower,
    Speedups,
    SpeedupsAt,
    StudyPage,
    StudyView,
    Target,
    WarmCold,
)
from publish.tables import Column, Table, Text

OURS = "triton"
PEERS = ("torch", "eager", "compile", "liger", "quack")
PLANS = ("triton", "triton-looped", "triton-split")  # the planner's choice, then each plan forced
# The shapes the targets name (issue 8).
DRAM_BOUND = Case("fwd", "bf16", 16384, 4096)
WIDE = Case("fwd", "bf16", 64, 131072)
STEP = Case("fwd+bwd", "bf16", 16384, 4096)


def explain(c: CaseResult, peer: str) -> str | None:
    """Why ours lost a resolved device-time case, where we think we know."""
    ours = c.get(OURS)
    if ours is None:
        return None
    if peer == "quack" and ours.meta.get("plan") in ("looped", "split"):
        return "one-read"
    return None


REASONS = {"one-read": ("one read per row", WHY_QUACK)}


# ----------------------------------------------------------------------------- the row plans


def plans_table(view: StudyView) -> Table | None:
    """Every plan timed in the same run, wherever the runs forced the multi-program plans."""
    present = [v for v in PLANS if any(v in c.variants for c in view.results.cases.values())]
    cases = [c for c in view.results.cases.values() if "triton-looped" in c.variants]
    if not cases:
        return None
    cols = [Column("case", "Case", numeric=False), Column("l2", "L2", numeric=False)]
    cols += [Column(v, view.label(v), f"median µs, {DEVICE_TIME}") for v in present]
    cols.append(Column("chosen", "Planner chose", numeric=False))
    table = Table("rmsnorm-plans", f"Wide rows: every plan timed in the same run (median µs, {DEVICE_TIME})", cols)
    for c in sorted(cases, key=lambda c: c.case_id):
        title = DIRECTION_TITLES.get(c.params["direction"], c.params["direction"])
        row: dict[str, Any] = {"case": f"{title}, {c.params['dtype']}, {c.shape}", "l2": l2_cell(c)}
        for v in present:
            row[v] = time_or_why(c, v)
        chosen = c.get(OURS)
        row["chosen"] = Text(str(chosen.meta.get("plan", "not recorded")) if chosen else "—")
        table.rows.append(row)
    return table


def plan_observations(view: StudyView) -> list[Claim]:
    """Splitting a row pays when rows are fewer than the SMs (of the GPU each run measured)."""
    with_split = [c for c in view.results.cases.values() if "triton-split" in c.variants]
    few = [c for c in with_split if c.params["rows"] < int(c.run.env["gpu"]["sm_count"])]
    claim = pairwise(
        view,
        "split-wins-few-rows",
        few,
        "triton-split",
        "triton-looped",
        "Device time (graph replay): with fewer rows than SMs, the split plan beat the looped plan in {k} of {n} "
        "cases and lost {l} ({u} within the noise), by up to {x} ({case}).",
        lambda won, lost, n: lost == 0 and won >= 0.75 * n,
        hypothesis="splitting a row across programs pays when rows are fewer than the SMs: the split plan beats the "
        "looped one in at least three in four such cases and loses none",
    )
    return [claim] if claim is not None else []


# ----------------------------------------------------------------------------- the training step's backward

FUSED = "triton-fused"
ROWS = "triton-rows"  # the row plan and its column sum forced (runs after the fused default)
STEP_PEERS = ("triton", FUSED, ROWS, "compile", "liger", "quack")


def fused_table(view: StudyView) -> Table | None:
    """The training step with the weight gradient summed two ways: the row plans then a
    column sum (a second read of dy and h), and the fused persistent pass; beside the fused
    peers."""
    cases = [c for c in view.results.cases.values() if FUSED in c.variants]
    if not cases:
        return None
    present = [v for v in STEP_PEERS if any(v in c.variants for c in cases)]
    cols = [Column("case", "Case", numeric=False), Column("l2", "L2", numeric=False)]
    cols += [Column(v, view.label(v), f"median µs, {DEVICE_TIME}") for v in present]
    table = Table("rmsnorm-fused", f"Training step: the weight gradient two ways (median µs, {DEVICE_TIME})", cols)
    for c in sorted(cases, key=lambda c: c.case_id):
        row: dict[str, Any] = {"case": f"{c.params['dtype']}, {c.shape}", "l2": l2_cell(c)}
        for v in present:
            row[v] = time_or_why(c, v)
        table.rows.append(row)
    return table


def _fused_by_default(c: CaseResult) -> bool:
    """Whether the planner's backward of the run's commit took the fused pass in this case:
    the run records the width it does so from (runs before that default: every case)."""
    meta = c.variants[FUSED].raw.get("meta", {})
    threshold = meta.get("default_from_width")
    if threshold is not None and int(c.params["cols"]) < int(threshold):
        return False
    # At commit 57ce648 the default also needed rows on the 16-byte grid (contiguous rows of a
    # width that is a multiple of 16 bytes); its run records that.
    vec = 16 // ELEM_BYTES.get(str(c.params.get("dtype")), 2)
    return not meta.get("default_needs_aligned_rows") or int(c.params["cols"]) % vec == 0


def fused_observations(view: StudyView) -> list[Claim]:
    """Whether one persistent backward pass beats the row plans plus a column sum where the
    planner takes it: against the row plan forced (``triton-rows``), or, in runs from before
    the fused default, against our planner's choice, which was then the row plan."""
    cases = [c for c in view.results.cases.values() if FUSED in c.variants and _fused_by_default(c)]
    with_rows = [c for c in cases if ROWS in c.variants]
    base, cases = (ROWS, with_rows) if with_rows else (OURS, cases)
    claim = pairwise(
        view,
        "fused-backward",
        cases,
        FUSED,
        base,
        "Device time (graph replay), training step, at the widths where the planner's backward takes the fused pass: "
        "folding the weight gradient into the backward's one pass beat the row plans with a separate column sum in "
        "{k} of {n} cases and lost {l} ({u} within the noise), by up to {x} ({case}).",
        lambda won, lost, n: lost == 0 and won > 0,
        hypothesis="where the planner takes the fused backward, it never loses to the row plans with a separate "
        "column sum, and wins somewhere",
    )
    return [claim] if claim is not None else []


# ----------------------------------------------------------------------------- the peers


def peer_observations(view: StudyView) -> list[Claim]:
    """Which Liger entry point the runs timed (its fused add + RMSNorm, or its RMSNorm after a
    separate add), and what QuACK refused: read from each variant's record."""
    out: list[Claim] = []
    liger = [m for c in view.results.cases.values() if (m := c.variants.get("liger")) is not None]
    entries = sorted({str(m.meta["entry"]) for m in liger if "entry" in m.meta})
    if entries:
        out.append(
            Claim(
                "liger-entry",
                sentence(
                    "The Liger-Kernel cases timed {entries} (its version as each run recorded it); an unfused entry "
                    "pays a separate add, as a user of that version would.",
                    entries=" and ".join(entries),
                ),
                True,
            )
        )
    with_quack = [c for c in view.results.cases.values() if "quack" in c.variants]
    # A machine without the package never offered it the case; the rest are counted by what
    # QuACK did with them: declined (its own refusal), raised, or failed our float64 check.
    absent = [c for c in with_quack if NOT_INSTALLED in (c.variants["quack"].error or "")]
    offered = [c for c in with_quack if c not in absent]
    kinds: dict[str, list[CaseResult]] = {"declined": [], "raised": [], "failed": []}
    for c in offered:
        m = c.variants["quack"]
        if m.check is not None and not m.check.get("passed", True):
            kinds["failed"].append(c)
        elif (m.error or "").startswith("refused"):
            kinds["declined"].append(c)
        elif m.error:
            kinds["raised"].append(c)
    if offered:
        text = sentence(
            "QuACK was offered {n} cases: it declined {r}, raised an error in {e} and failed our float64 check in {f}",
            n=Num(len(offered), "count"),
            r=Num(len(kinds["declined"]), "count"),
            e=Num(len(kinds["raised"]), "count"),
            f=Num(len(kinds["failed"]), "count"),
        )
        for kind, what in (("declined", "declined"), ("raised", "raised")):
            if kinds[kind]:
                text += sentence("; where it {what}, the first message: \u201c{msg}\u201d", what=what,
                                 msg=_message(kinds[kind][0].variants["quack"].error or ""))  # fmt: skip
        if absent:
            text += sentence(
                "; {a} more ran on a machine without it installed, so it was not offered them",
                a=Num(len(absent), "count"),
            )
        out.append(
            Claim(
                "quack-refusals",
                text + sentence(". Those cases show no QuACK time (each table cell says why)."),
                True,
                evidence=cases_evidence("declined", kinds["declined"])
                + cases_evidence("raised", kinds["raised"])
                + cases_evidence("failed the check", kinds["failed"]),
            )
        )
    return out


def _message(error: str) -> str:
    """A peer's error as a reader can read it: terminal colour codes out, one line, cut short."""
    return " ".join(readable(error).split())[:160]


def extra(view: StudyView) -> dict[str, Any]:
    return {"plans": plans_table(view), "fused": fused_table(view)}


# ----------------------------------------------------------------------------- the page

PAGE = StudyPage(
    study="rmsnorm",
    title="Residual RMSNorm",
    summary="the add and RMSNorm of a transformer block in one launch, with its backward, against the eager "
    "composition, F.rms_norm, torch.compile, Liger-Kernel and QuACK; device time and the eager call",
    ours=OURS,
    peers=PEERS,
    charts=(
        Speedups("fwd"),
        Bandwidth("fwd", (OURS, *PEERS)),
        Bandwidth("fwd+bwd", (OURS, *PEERS)),
        DeviceVsEager("fwd", (OURS, "torch", "liger", "quack")),
        WarmCold("fwd"),
    ),
    targets=(
        Target("target-copy-16384x4096", CopyShare(COPY_TARGET), DRAM_BOUND),
        Target("target-liger-16384x4096", NoSlower("liger"), DRAM_BOUND),
        Target("target-quack-16384x4096", NoSlower("quack"), DRAM_BOUND),
        Target("target-copy-64x131072-cold", CopyShare(WIDE_COLD_TARGET), WIDE, ("cold",)),
        Target("target-quack-64x131072-cold", AtMost("quack", QUACK_TARGET), WIDE, ("cold",)),
        Target("target-step-16384x4096", NoSlower("compile"), STEP),
        Target("target-eager-liger", EagerEverywhere("liger")),
    ),
    evidence=(CopyShareAt(DRAM_BOUND), SpeedupsAt(DRAM_BOUND, ("liger", "quack")), SpeedupsAt(STEP, ("compile",))),
    observations=(plan_observations, fused_observations, peer_observations, warm_exceeds_dram, eager_flips),
    explain=explain,
    reasons=REASONS,
    extra=extra,
)
