"""The softmax case study: its page declared (peers, targets, tables, charts), and what only
softmax has: the row plans (the forced-plan table and chart, whether the runs timed the
shipped planner), and what we know of Liger-Kernel's and QuACK's limits.  The generic
machinery is :mod:`publish.studypage`; the prose is ``templates/softmax.md.j2``."""

from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup

from publish.charts import Chart, dots
from publish.claims import Claim, sentence
from publish.numbers import Num, definition
from publish.results import CaseResult
from publish.studypage.charts import missing, style
from publish.studypage.claims import eager_flips, pairwise, warm_exceeds_dram
from publish.studypage.common import DEVICE_TIME, EAGER_CALL, ELEM_BYTES, cases_evidence, l2_cell, time_or_why
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
    Headline,
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
# The plans a wide row can take, each a column of the plan table (the variants' own labels,
# in the run files, say "Triton, looped plan forced" and so on).
PLANS = {
    "triton": "planner's choice",
    "triton-looped": "looped",
    "triton-split": "split (two launches)",
    "triton-split-1launch": "split (one launch)",
}
# Set, not measured: the targets only softmax has (issue 6; the shared ones: publish/studypage/rowwise.py).
VOCAB_COPY_TARGET = definition(85, "pct", "target: fraction of the copy bandwidth measured in the same run")
EAGER_TORCH_TARGET = definition(2, "x_set", "target: our eager call at most this multiple of torch.softmax's")
LIGER_WIDEST = 65536  # Liger-Kernel's widest row (its largest Triton block), a limit of the library
# The shapes the targets name (issue 6), and the one case where both fused kernels are bound by DRAM.
VOCAB = Case("fwd", "bf16", 4096, 50257)
DRAM_BOUND = Case("fwd", "bf16", 16384, 4096)
WIDE = Case("fwd", "bf16", 64, 131072)


# ----------------------------------------------------------------------------- losses: why


def explain(c: CaseResult, peer: str) -> str | None:
    """Why ours lost a resolved device-time case, where we think we know."""
    ours = c.get(OURS)
    if ours is None:
        return None
    if peer == "liger" and ours.summary is not None and ours.summary.median < 10:
        return "latency"
    if peer == "quack" and ours.meta.get("plan") in ("looped", "split"):
        return "one-read"
    return None


REASONS = {
    "latency": (
        "latency-bound",
        "A case of a few µs. Our planner packs several narrow rows into one program (a choice measured best at "
        "16384×1024; the run file records rows_per_program for each case); Liger runs one row per program, so it "
        "starts more, shorter programs, which likely finish sooner when there is little data. A hypothesis, not yet "
        "tested: next, pack rows only when there are many of them.",
    ),
    "one-read": ("one read per row", WHY_QUACK),
    "host": (
        "host cost",
        "An eager-call loss: the call's host work (validation, planning, allocation, launch, op dispatch, autograd) "
        "outlasts the kernel. The dispatch page breaks it down.",
    ),
}


def why_quack(view: StudyView, found: list[CaseResult]) -> Markup:
    """Why QuACK stays ahead, said once for the cases of a target where it does."""
    ahead = [c for c in found if view.outcome(c, "quack") == "loss"]
    if not ahead:
        return Markup("")
    plans = {(c.get(OURS).meta.get("plan") if c.get(OURS) else None) for c in ahead}  # type: ignore[union-attr]
    if plans <= {"looped", "split"}:
        return sentence(" {why}", why=WHY_QUACK)
    # A plan that keeps the row on chip (block: registers; staged: shared memory) reads it
    # once, as QuACK does, so one read per row cannot be the reason: name the plans it ran.
    once = sorted(str(p) for p in plans - {"looped", "split"} if p is not None)
    if not once:
        return sentence(" Why is not yet explained (the run does not record our plan).")
    return sentence(
        " Why is not yet explained: our {plans} plan reads each row from memory once too.",
        plans=" and ".join(once),
    )


# ----------------------------------------------------------------------------- the row plans


def plans_table(view: StudyView) -> Table:
    """Every plan timed in the same run, wherever the forced plans were timed."""
    cols = (
        [Column("case", "Case", numeric=False), Column("l2", "L2", numeric=False)]
        + [Column(v, label, f"median µs, {DEVICE_TIME}") for v, label in PLANS.items()]
        + [
            Column("eager", "Planner's choice, eager call", f"median µs, {EAGER_CALL}"),
            Column("chosen", "Planner chose", numeric=False),
        ]
    )
    table = Table(
        "softmax-plans",
        f"Wide rows: every plan timed in the same run (median µs, {DEVICE_TIME}; eager call beside)",
        cols,
    )
    for direction in view.directions():
        for dtype in view.dtypes():
            for c in view.results.where(direction=direction, dtype=dtype):
                if "triton-looped" not in c.variants:
                    continue
                title = DIRECTION_TITLES.get(direction, direction)
                row: dict[str, Any] = {"case": f"{title}, {dtype}, {c.shape}", "l2": l2_cell(c)}
                for v in PLANS:
                    row[v] = time_or_why(c, v)
                row["eager"] = time_or_why(c.eager(), OURS)
                chosen = c.get(OURS)
                row["chosen"] = Text(chosen.meta.get("plan", "?") if chosen else "—")
                table.rows.append(row)
    return table


def plans_chart(view: StudyView) -> Chart | None:
    """Each plan's time over the planner's choice's, per wide shape: a ratio, so shapes of
    10 µs and of 1 ms read on one scale."""
    cases = [c for c in view.results.where(direction="fwd", dtype="bf16", l2="cold") if "triton-looped" in c.variants]
    cases = [c for c in cases if c.get(OURS) is not None]
    if not cases:
        return None
    series = []
    for v, label in PLANS.items():
        if v == OURS:
            continue
        points: list[Num | Text] = []
        for c in cases:
            r = c.time_ratio(v, OURS)
            points.append(r if r is not None else missing(c, v))
        series.append((label, points))
    return dots(
        "softmax-plans-chart",
        f"Wide rows, forward, bf16, cold L2: each plan's time over the planner's choice ({DEVICE_TIME})",
        [c.shape for c in cases],
        series,
        "plan's time / planner's choice (log scale; above 1: slower)",
        log_y=True,
        ratio_ticks=True,
        ref=("the planner's choice", 1.0),
        styles=[style(view, v) for v in PLANS if v != OURS],
    )


def _shipped_plan(c: CaseResult, backward: bool) -> str:
    """The plan the shipped planner (kernels/plans.py) picks for a case on the GPU the run
    measured, as ``kind-block``."""
    from kernels.plans import SOFTMAX_BACKWARD_POLICY, SOFTMAX_POLICY, VECTOR_BYTES, plan_rows

    rows, cols, elem = c.params["rows"], c.params["cols"], ELEM_BYTES[c.params["dtype"]]
    vec = VECTOR_BYTES // elem
    pad = vec - 1 if rows > 1 and cols % vec else 0
    policy = SOFTMAX_BACKWARD_POLICY if backward else SOFTMAX_POLICY
    plan = plan_rows(rows, cols, elem, int(c.run.env["gpu"]["sm_count"]), policy, None, pad)
    return f"{plan.kind}-{plan.block}"


def planner_current(view: StudyView) -> list[Claim]:
    """Whether the planner's choices timed in the runs are the shipped planner's: a planner
    refitted after a run leaves the run's "ours" column timing the earlier choice."""
    checked, stale = 0, []
    for c in sorted(view.results.cases.values(), key=lambda c: c.case_id):
        ours = c.variants.get(OURS)
        if ours is None or "plan" not in ours.meta or "block" not in ours.meta:
            continue
        timed = [("forward", f"{ours.meta['plan']}-{ours.meta['block']}", _shipped_plan(c, False))]
        back = ours.meta.get("backward")
        if isinstance(back, dict) and "plan" in back:
            timed.append(("backward", f"{back['plan']}-{back['block']}", _shipped_plan(c, True)))
        checked += 1
        if any(t != s for _, t, s in timed):
            stale.append((c, "; ".join(f"{what} timed {t}, now {s}" for what, t, s in timed if t != s)))
    if not checked:
        return []
    listed = "; ".join(f"{c.case_id} ({why})" for c, why in stale[:5])
    if len(stale) > 5:
        listed += f"; and {len(stale) - 5} more"
    return [
        Claim(
            "planner-current",
            sentence(
                "The plan our column timed is the one the shipped planner (kernels/plans.py) picks in {k} of {n} "
                "cases. Where it is not, the run timed an earlier planner's choice; the forced-plan columns of the "
                "wide-row table show what each plan costs there.",
                k=Num(checked - len(stale), "count"),
                n=Num(checked, "count"),
            ),
            not stale,
            hypothesis="every plan our column timed is the one the shipped planner picks today",
            evidence=sentence("Earlier choices: {cases}", cases=listed) if stale else Markup(""),
        )
    ]


def plan_observations(view: StudyView) -> list[Claim]:
    """Splitting a row pays when rows are fewer than the SMs (of the GPU each run measured);
    the one-launch split, a negative result."""
    with_split = [c for c in view.results.cases.values() if "triton-split" in c.variants]
    with_one = [c for c in view.results.cases.values() if "triton-split-1launch" in c.variants]
    claims = [
        pairwise(
            view,
            "split-wins-few-rows",
            [c for c in with_split if c.params["rows"] < int(c.run.env["gpu"]["sm_count"])],
            "triton-split",
            "triton-looped",
            "Device time (graph replay): with fewer rows than SMs, the split plan beat the looped plan in {k} of "
            "{n} cases and lost {l} ({u} within the noise), by up to {x} ({case}).",
            lambda won, lost, n: lost == 0 and won >= 0.75 * n,
            hypothesis="splitting a row across programs pays when rows are fewer than the SMs: the split plan beats "
            "the looped one in at least three in four such cases and loses none",
        ),
        pairwise(
            view,
            "one-launch-split-loses",
            [c for c in with_one if c.params["dtype"] != "fp32"],
            "triton-split",
            "triton-split-1launch",
            "Device time (graph replay): the one-launch split was slower than the two-launch split in {k} of {n} "
            "bf16 and fp16 wide cases, faster in {l} and unresolved in {u}; the widest gap {x} ({case}).",
            lambda won, lost, n: won >= 0.8 * n and lost <= 0.1 * n,
            hypothesis="in bf16 and fp16, the one-launch split is slower than the two-launch split in at least four in "
            "five wide cases, and faster in at most one in ten (a negative result)",
        ),
        pairwise(
            view,
            "one-launch-split-fp32",
            [c for c in with_one if c.params["dtype"] == "fp32"],
            "triton-split-1launch",
            "triton-split",
            "Device time (graph replay): in fp32 the one-launch split beat the two-launch split in {k} of {n} cases "
            "and lost {l} ({u} within the noise; its best {x}, {case}).",
            lambda won, lost, n: won > 0,
            hypothesis="in fp32, where a 4096-wide chunk is twice the bytes, the one-launch split wins somewhere",
        ),
    ]
    return [c for c in claims if c is not None]


def policy() -> dict[str, int]:
    """The forward and backward block limits, read from the planner (set, not measured)."""
    from kernels.plans import SOFTMAX_BACKWARD_POLICY, SOFTMAX_POLICY

    return {
        "fwd_block_kb": SOFTMAX_POLICY.max_block_bytes // 1024,
        "bwd_block_kb": SOFTMAX_BACKWARD_POLICY.max_block_bytes // 1024,
        "staged_high_kb": SOFTMAX_POLICY.staged_row_bytes[1] // 1024,
    }


# ----------------------------------------------------------------------------- the peers' limits


def _refused(c: CaseResult, variant: str) -> bool:
    m = c.variants.get(variant)
    return m is not None and m.error is not None and not m.error.startswith("check failed")


def _installed(c: CaseResult, variant: str) -> bool:
    """The peer was there to ask: a run on a machine without its package records the
    absence as a refusal ("... is not installed"), which says nothing of the peer."""
    m = c.variants.get(variant)
    return m is not None and "is not installed" not in (m.error or "")


def liger_observations(view: StudyView) -> list[Claim]:
    """Liger-Kernel's widest row, and its bf16 backward's accuracy."""
    out: list[Claim] = []
    with_liger = [c for c in view.results.cases.values() if _installed(c, "liger")]
    wide = [c for c in with_liger if c.params["cols"] > LIGER_WIDEST]
    narrow = [c for c in with_liger if c.params["cols"] <= LIGER_WIDEST]
    if wide:
        refused_wide = [c for c in wide if _refused(c, "liger")]
        refused_narrow = [c for c in narrow if _refused(c, "liger")]
        example = wide[0].variants["liger"].error or ""
        out.append(
            Claim(
                "liger-refuses-wide",
                sentence(
                    "Liger-Kernel declined {r} of the {w} cases wider than {widest} elements and {rn} of the {n} "
                    "narrower ones. "
                    "Its message: \u201c{msg}\u201d",
                    widest=str(LIGER_WIDEST),
                    r=Num(len(refused_wide), "count"),
                    w=Num(len(wide), "count"),
                    rn=Num(len(refused_narrow), "count"),
                    n=Num(len(narrow), "count"),
                    msg=example[:160],
                ),
                len(refused_wide) == len(wide) and not refused_narrow,
                hypothesis=f"Liger-Kernel refuses rows wider than {LIGER_WIDEST} elements, and only those",
                evidence=cases_evidence("accepted though wide", [c for c in wide if c not in refused_wide])
                + cases_evidence("refused though narrow", refused_narrow),
            )
        )
    failed = [c for c in with_liger if (m := c.variants["liger"]).check is not None and not m.check["passed"]]
    if failed:
        c = failed[0]
        lig, ours = c.variants["liger"], c.variants[OURS]
        out.append(
            Claim(
                "liger-bf16-backward-accuracy",
                sentence(
                    "Liger-Kernel failed our float64 check in {k} cases: at {case} its input "
                    "gradient had a relative L2 error of {theirs} against our {ours} (tolerance {tol}); its "
                    "backward multiplies and sums y and dy in bf16 (liger_kernel/ops/softmax.py, release 0.8.5; "
                    "Triton's tl.sum keeps the input type). These cases show no Liger time.",
                    k=Num(len(failed), "count"),
                    case=c.case_id,
                    theirs=Num(lig.raw["check"]["rel_l2"][-1], "relerr", (lig.source("check"),)),
                    ours=Num(ours.raw["check"]["rel_l2"][-1], "relerr", (ours.source("check"),)),
                    tol=Num(lig.raw["check"]["tolerance"], "relerr", (lig.source("check"),)),
                ),
                all(c.params["direction"] == "fwd+bwd" for c in failed),
                hypothesis="where Liger-Kernel fails our float64 check, it fails in the backward, never the forward",
                evidence=cases_evidence("failed in the forward", [c for c in failed if c.params["direction"] == "fwd"]),
            )
        )
    return out


def dram_bound_observations(view: StudyView) -> list[Claim]:
    """At the DRAM-bound case both fused kernels sit at the copy bandwidth (a tie), and the
    unfused composition is several times slower: fusion is the first-order effect."""
    big = DRAM_BOUND.find(view.results, "cold")
    if big is None or big.get("liger") is None or big.get(OURS) is None:
        return []
    out = [
        Claim(
            "dram-bound-tie",
            sentence(
                "Device time (graph replay): at {shape}, ours ran at {a} of the copy bandwidth, Liger at {b}; the "
                "speedup {x} is {verdict}.",
                shape=big.shape,
                a=big.get(OURS).pct_copy(),  # type: ignore[union-attr]
                b=big.get("liger").pct_copy(),  # type: ignore[union-attr]
                x=big.speedup(OURS, "liger"),  # type: ignore[arg-type]
                verdict={"unresolved": "a tie, not a win", "win": "a win", "loss": "a loss"}.get(
                    str(view.outcome(big, "liger")), "not compared"
                ),
            ),
            view.outcome(big, "liger") == "unresolved",
            hypothesis="at the DRAM-bound shape both fused kernels sit at the copy bandwidth, so the comparison is a "
            "tie",
        )
    ]
    eager = big.speedup(OURS, "eager")
    if eager is not None:
        out.append(
            Claim(
                "fusion-vs-eager",
                sentence(
                    "Device time (graph replay): the unfused composition (upcast, max, subtract, exp, sum, divide) "
                    "took {x} as long as ours at {shape} {dtype}.",
                    x=eager,
                    shape=big.shape,
                    dtype=big.params["dtype"],
                ),
                eager.value > 5 and view.outcome(big, "eager") == "win",
                hypothesis="fusion is the first-order effect: the unfused composition takes more than five times as "
                "long as ours at the DRAM-bound shape",
            )
        )
    return out


def quack_observations(view: StudyView) -> list[Claim]:
    """QuACK's record, like Liger's: what it refused, where it raised or failed our check."""
    with_quack = [c for c in view.results.cases.values() if "quack" in c.variants]
    ran = [c for c in with_quack if "not installed" not in (c.variants["quack"].error or "")]
    out: list[Claim] = []
    if with_quack and not ran:
        runs = sorted({c.run.run_id for c in with_quack})
        out.append(
            Claim(
                "quack-not-installed",
                sentence(
                    "QuACK was not installed where {runs} ran: all {n} of its entries record the refusal, so no QuACK "
                    "time appears yet.",
                    runs=", ".join(runs),
                    n=Num(len(with_quack), "count"),
                ),
                True,
            )
        )
        return out
    if not ran:
        return out
    unaligned = [c for c in ran if (c.params["cols"] * ELEM_BYTES.get(c.params["dtype"], 2)) % 16]
    refused = [c for c in ran if (c.variants["quack"].error or "").startswith("refused")]
    out.append(
        Claim(
            "quack-refuses-unaligned",
            sentence(
                "QuACK declined {r} of the {u} cases whose row is not a multiple of 16 bytes and {o} of the {a} "
                "others.",
                r=Num(len([c for c in refused if c in unaligned]), "count"),
                u=Num(len(unaligned), "count"),
                o=Num(len([c for c in refused if c not in unaligned]), "count"),
                a=Num(len(ran) - len(unaligned), "count"),
            ),
            all(c in refused for c in unaligned) and all(c in unaligned for c in refused),
            hypothesis="QuACK refuses rows whose width is not a multiple of 16 bytes, and only those",
            evidence=cases_evidence("refused though aligned", [c for c in refused if c not in unaligned])
            + cases_evidence("accepted though unaligned", [c for c in unaligned if c not in refused]),
        )
    )
    raised = [
        c
        for c in ran
        if (e := c.variants["quack"].error)
        and not e.startswith(("refused", "check failed"))
        and not (c.variants["quack"].check and not c.variants["quack"].check.get("passed", True))
    ]
    if raised:
        message = (raised[0].variants["quack"].error or "")[:200]
        out.append(
            Claim(
                "quack-raised",
                sentence(
                    "QuACK accepted {k} aligned cases and then raised, so they show no QuACK time, for example "
                    "{case}: \u201c{msg}\u201d",
                    k=Num(len(raised), "count"),
                    case=raised[0].case_id,
                    msg=message,
                ),
                True,
                evidence=cases_evidence("raised", raised),
            )
        )
    failed = [c for c in ran if (m := c.variants["quack"]).check is not None and not m.check.get("passed", True)]
    if failed:
        c = failed[0]
        q = c.variants["quack"]
        check = q.raw["check"]
        out.append(
            Claim(
                "quack-failed-check",
                sentence(
                    "QuACK failed our float64 check in {k} cases, for example {case} (relative L2 error {err}, "
                    "finite outputs: {finite}); those cases show no QuACK time and its targets there do not apply.",
                    k=Num(len(failed), "count"),
                    case=c.case_id,
                    err=Num(max(check["rel_l2"]), "relerr", (q.source("check"),))
                    if all(math.isfinite(v) for v in check["rel_l2"])
                    else "not finite",
                    finite="yes" if check.get("finite") else "no",
                ),
                True,
                evidence=cases_evidence("failed", failed),
            )
        )
    return out


def extra(view: StudyView) -> dict[str, Any]:
    plans = plans_table(view)
    return {"plans": plans if plans.rows else None, "policy": policy()}


# ----------------------------------------------------------------------------- the page

PAGE = StudyPage(
    study="softmax",
    title="Softmax",
    summary="one Triton kernel with three row plans against torch, torch.compile, Liger-Kernel and QuACK; device "
    "time and the eager call",
    ours=OURS,
    peers=("torch", "eager", "compile", "liger", "quack"),
    charts=(
        Speedups("fwd"),
        Bandwidth("fwd", (OURS, "liger", "quack", "compile", "torch", "eager")),
        Bandwidth("fwd+bwd", (OURS, "liger", "quack", "compile", "torch", "eager")),
        DeviceVsEager("fwd", (OURS, "torch", "liger", "quack")),
        plans_chart,
        WarmCold("fwd"),
    ),
    targets=(
        Target("target-torch-4096x50257", NoSlower("torch"), VOCAB),
        Target("target-torch-1000x50257", NoSlower("torch"), Case("fwd", "bf16", 1000, 50257)),
        Target("target-copy-4096x50257", CopyShare(VOCAB_COPY_TARGET), VOCAB),
        Target("target-copy-64x131072-cold", CopyShare(WIDE_COLD_TARGET), WIDE, ("cold",)),
        *(
            Target(
                f"target-quack-{rows}x{cols}",
                AtMost("quack", QUACK_TARGET),
                Case("fwd", "bf16", rows, cols),
                after=why_quack,
            )
            for rows, cols in ((8192, 32768), (64, 131072), (4096, 151936))
        ),
        Target("target-step-4096x50257", NoSlower("torch"), Case("fwd+bwd", "bf16", 4096, 50257)),
        Target("target-eager-liger", EagerEverywhere("liger")),
        Target(
            "target-eager-torch-1024x1024",
            AtMost("torch", EAGER_TORCH_TARGET, eager=True),
            Case("fwd", "bf16", 1024, 1024),
        ),
        Target("target-copy-peak-cold", CopyShare(COPY_TARGET), DRAM_BOUND, ("cold",)),
        Target("target-copy-peak-warm", CopyShare(COPY_TARGET), DRAM_BOUND, ("warm",)),
        Target("target-liger-16384x4096", NoSlower("liger"), DRAM_BOUND),
    ),
    evidence=(CopyShareAt(DRAM_BOUND), SpeedupsAt(WIDE, ("compile", "torch"))),
    observations=(
        liger_observations,
        plan_observations,
        warm_exceeds_dram,
        dram_bound_observations,
        quack_observations,
        eager_flips,
        planner_current,
    ),
    explain=explain,
    reasons=REASONS,
    headline=Headline(
        shapes=(
            (32, 127),
            (1024, 1024),
            (16384, 4096),
            (8192, 32768),
            (4, 32769),
            (1000, 50257),
            (4096, 50257),
            (64, 131072),
            (4096, 151936),
            (8, 1048576),
        ),
        versus="compile",
    ),
    extra=extra,
)
