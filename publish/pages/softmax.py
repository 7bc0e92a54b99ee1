"""The softmax case study: tables, charts, claims, targets and the decision card, all
computed from the current results.  The prose around them lives in
``templates/softmax.md.j2``; every number reaches it through this module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from markupsafe import Markup

from publish.charts import Chart, bars
from publish.claims import Claim, sentence
from publish.numbers import Num, definition
from publish.results import CaseResult, StudyResults
from publish.tables import Column, Table, Text

OURS = "triton"
PEERS = {"torch": "torch.softmax", "eager": "eager composition", "compile": "torch.compile", "liger": "Liger-Kernel"}
PLANS = {
    "triton": "planner's choice",
    "triton-looped": "looped",
    "triton-split": "split (two launches)",
    "triton-split-1launch": "split (one launch)",
}
LABELS = {**PLANS, "triton": "Triton (ours)", **PEERS}
DIRECTIONS = {"fwd": "Forward", "fwd+bwd": "Forward + backward"}
DTYPES = ("bf16", "fp16", "fp32")
# Set, not measured: the targets of the study catalogue and the loss table's "close" margin.
COPY_TARGET = definition(90, "pct", "target from the study catalogue: fraction of the copy bandwidth")
COMPILE_TARGET = definition(3, "x_set", "target from the study catalogue: speedup over torch.compile")
CLOSE = definition(3, "pct", "a loss this small is reported as 'near the same bound'")


def _slug(direction: str) -> str:
    return direction.replace("+", "")


def _shape_key(c: CaseResult) -> tuple[int, int]:
    return (c.params["cols"], c.params["rows"])


def _shapes(results: StudyResults, direction: str, dtype: str) -> list[tuple[int, int]]:
    seen = sorted(
        {(c.params["rows"], c.params["cols"]) for c in results.where(direction=direction, dtype=dtype)},
        key=lambda rc: (rc[1], rc[0]),
    )
    return seen


def _refusal(c: CaseResult, variant: str) -> Text:
    """Why a variant has no time here: it declined the case, failed the float64 check, or
    raised (a library's own limit, such as Liger's widest block, arrives as an exception)."""
    m = c.variants.get(variant)
    if m is None:
        return Text("—", "not run for this case")
    error = m.error or ""
    label = "refused" if error.startswith("refused") else "failed check" if error.startswith("check") else "error"
    return Text(label, error, "refused")


def speed_table(results: StudyResults, direction: str, dtype: str) -> Table | None:
    shapes = _shapes(results, direction, dtype)
    if not shapes:
        return None
    cols = [
        Column("shape", "Shape", "rows × width", numeric=False),
        Column("l2", "L2", "cold: flushed before each sample; warm: same buffers", numeric=False),
        Column("ours", "Ours", "median time of our kernel"),
        Column("gbps", "GB/s", "bytes counted from the problem / median time"),
        Column("pct", "% copy", "of the device-copy bandwidth measured in the same run"),
    ] + [Column(p, f"vs {label}", f"{label} time / our time: above 1.00× we are faster") for p, label in PEERS.items()]
    table = Table(
        f"softmax-{_slug(direction)}-{dtype}",
        f"{DIRECTIONS[direction]}, {dtype}: our time and speedup over each peer",
        cols,
    )
    for rows, width in shapes:
        for l2 in ("cold", "warm"):
            c = results.find(direction=direction, dtype=dtype, rows=rows, cols=width, l2=l2)
            if c is None:
                continue
            ours = c.get(OURS)
            row: dict[str, Any] = {"shape": c.shape, "l2": l2}
            if ours is None:
                row["ours"] = _refusal(c, OURS)
            else:
                row |= {"ours": ours.time(), "gbps": ours.gbps(), "pct": ours.pct_copy()}
            for peer in PEERS:
                row[peer] = c.speedup(OURS, peer) or _refusal(c, peer)
            table.rows.append(row)
    return table


def time_table(results: StudyResults, direction: str, dtype: str) -> Table | None:
    cases = results.where(direction=direction, dtype=dtype)
    if not cases:
        return None
    present = [v for v in LABELS if any(v in c.variants for c in cases)]
    cols = [Column("shape", "Shape", numeric=False), Column("l2", "L2", numeric=False)] + [
        Column(v, LABELS[v], "median µs") for v in present
    ]
    table = Table(
        f"softmax-{_slug(direction)}-{dtype}-times",
        f"{DIRECTIONS[direction]}, {dtype}: median time of every variant (µs)",
        cols,
    )
    for rows, width in _shapes(results, direction, dtype):
        for l2 in ("cold", "warm"):
            c = results.find(direction=direction, dtype=dtype, rows=rows, cols=width, l2=l2)
            if c is None:
                continue
            row: dict[str, Any] = {"shape": c.shape, "l2": l2}
            for v in present:
                m = c.get(v)
                row[v] = Num(m.time().value, "us_bare", m.time().sources) if m else _refusal(c, v)
            table.rows.append(row)
    return table


def plans_table(results: StudyResults) -> Table:
    cols = (
        [Column("case", "Case", numeric=False), Column("l2", "L2", numeric=False)]
        + [Column(v, label, "median µs") for v, label in PLANS.items()]
        + [Column("chosen", "Planner chose", numeric=False)]
    )
    table = Table("softmax-plans", "Wide rows: every plan timed in the same run (bf16)", cols)
    for direction in DIRECTIONS:
        for c in results.where(direction=direction, dtype="bf16"):
            if "triton-looped" not in c.variants:
                continue
            row: dict[str, Any] = {"case": f"{DIRECTIONS[direction]} {c.shape}", "l2": c.params["l2"]}
            for v in PLANS:
                m = c.get(v)
                row[v] = Num(m.time().value, "us_bare", m.time().sources) if m else _refusal(c, v)
            chosen = c.get(OURS)
            row["chosen"] = Text(chosen.meta.get("plan", "?") if chosen else "—")
            table.rows.append(row)
    return table


# ----------------------------------------------------------------------------- losses


def _reasons() -> dict[str, tuple[str, Markup]]:
    """Why we lose, by kind: a short label for the table and the explanation under it."""
    return {
        "unresolved": (
            "unresolved",
            sentence(
                "The difference is inside the 95% intervals of the two medians or inside the run-to-run spread of "
                "this comparison: not a measured loss."
            ),
        ),
        "close": (
            "near the same bound",
            sentence(
                "A loss within {gap}: both kernels run near the same limit (see the % copy column of the case's "
                "table); at this size such gaps come and go between runs.",
                gap=CLOSE,
            ),
        ),
        "latency": (
            "latency-bound",
            sentence(
                "A case of a few µs. Our planner packs several narrow rows into one program (a choice measured best at "
                "16384×1024; the run file records rows_per_program for each case); Liger runs one row per program, "
                "so it starts more, shorter programs, which likely finish sooner when there is little data. A "
                "hypothesis, not yet tested: next, pack rows only when there are many of them."
            ),
        ),
        "unexplained": ("not yet explained", sentence("We have no explanation yet; it is on the list.")),
    }


def _why(c: CaseResult, peer: str, resolved: bool, close: bool) -> str:
    ours = c.get(OURS)
    assert ours is not None
    if not resolved:
        return "unresolved"
    if close:
        return "close"
    if peer == "liger" and ours.summary is not None and ours.summary.median < 10:
        return "latency"
    return "unexplained"


def losses_table(results: StudyResults) -> tuple[Table, list[tuple[str, Markup]]]:
    cols = [
        Column("case", "Case", numeric=False),
        Column("peer", "Faster peer", numeric=False),
        Column("ours", "Ours"),
        Column("theirs", "Peer"),
        Column("ratio", "Speedup", "below 1.00×: we are slower"),
        Column("why", "Why", numeric=False),
    ]
    table = Table("softmax-losses", "Every case where a peer's median beat ours", cols)
    reasons, used = _reasons(), {}
    for c in sorted(results.cases.values(), key=lambda c: (c.params["direction"], c.params["dtype"], _shape_key(c))):
        for peer in PEERS:
            r = c.ratio(peer, OURS)
            if r is None or r.value >= 1.0:
                continue
            ours, theirs = c.get(OURS), c.get(peer)
            assert ours is not None and theirs is not None
            speedup = c.speedup(OURS, peer)
            resolved = speedup is not None and speedup.css == "loss"
            close = r.lo >= 1 - CLOSE.value / 100
            key = _why(c, peer, resolved, close)
            used[key] = reasons[key]
            table.rows.append(
                {
                    "case": Text(c.case_id.replace("x", "×")),
                    "peer": PEERS[peer],
                    "ours": ours.time(),
                    "theirs": theirs.time(),
                    "ratio": c.speedup(OURS, peer),
                    "why": Text(reasons[key][0], _plain(reasons[key][1])),
                }
            )
    return table, list(used.values())


# ----------------------------------------------------------------------------- charts


def _bandwidth_chart(results: StudyResults, direction: str, l2: str) -> Chart | None:
    cases = results.where(direction=direction, dtype="bf16", l2=l2)
    if not cases:
        return None
    variants = [OURS, "liger", "compile", "torch", "eager"]
    series = [(LABELS[v], [c.get(v).gbps() if c.get(v) else None for c in cases]) for v in variants]
    peak = cases[0].run.copy_peak
    return bars(
        f"softmax-{_slug(direction)}-bw-{l2}",
        f"{DIRECTIONS[direction]}, bf16, {l2} L2: achieved bandwidth",
        [c.shape for c in cases],
        series,
        "GB/s (bytes counted from the problem)",
        ref=(f"device copy, same run: {peak:,.0f} GB/s", peak),
    )


def _plans_chart(results: StudyResults) -> Chart | None:
    cases = [c for c in results.where(direction="fwd", dtype="bf16", l2="cold") if "triton-looped" in c.variants]
    if not cases:
        return None
    series = [(label, [c.get(v).time() if c.get(v) else None for c in cases]) for v, label in PLANS.items()]
    return bars(
        "softmax-plans-chart",
        "Wide rows, forward, bf16, cold L2: time of each plan",
        [c.shape for c in cases],
        series,
        "µs (log scale)",
        log_y=True,
    )


def _warm_cold_chart(results: StudyResults) -> Chart | None:
    cold = results.where(direction="fwd", dtype="bf16", l2="cold")
    if not cold:
        return None
    warm = [
        results.find(direction="fwd", dtype="bf16", rows=c.params["rows"], cols=c.params["cols"], l2="warm")
        for c in cold
    ]
    series = [
        ("cold L2", [c.get(OURS).gbps() if c.get(OURS) else None for c in cold]),
        ("warm L2", [w.get(OURS).gbps() if w is not None and w.get(OURS) else None for w in warm]),
    ]
    peak = cold[0].run.copy_peak
    return bars(
        "softmax-warm-cold",
        "Ours, forward, bf16: warm against cold L2",
        [c.shape for c in cold],
        series,
        "GB/s",
        ref=(f"device copy: {peak:,.0f} GB/s", peak),
    )


# ----------------------------------------------------------------------------- claims


def _targets(results: StudyResults) -> list[Claim]:
    out: list[Claim] = []
    for l2 in ("cold", "warm"):
        c = results.find(direction="fwd", dtype="bf16", rows=16384, cols=4096, l2=l2)
        if c is None or c.get(OURS) is None:
            continue
        ours = c.get(OURS)
        pct = ours.pct_copy()  # type: ignore[union-attr]
        out.append(
            Claim(
                f"target-copy-peak-{l2}",
                sentence(
                    "16384×4096 bf16 forward, {l2} L2: at least {target} of the copy bandwidth. Measured {gbps}, "
                    "{pct} of the copy measured in the same run.",
                    l2=l2,
                    target=COPY_TARGET,
                    gbps=ours.gbps(),  # type: ignore[union-attr]
                    pct=pct,
                ),
                pct.value >= COPY_TARGET.value,
                "target",
            )
        )
    # No slower than Liger at every shape it accepts: a loss counts only when resolved.
    accepted = [c for c in results.cases.values() if c.get("liger") is not None and c.get(OURS) is not None]
    losses = [c for c in accepted if (x := c.speedup(OURS, "liger")) is not None and x.css == "loss"]
    out.append(
        Claim(
            "target-liger",
            sentence(
                "No slower than Liger-Kernel at every case it accepts. Slower (resolved) in {n} of {total} cases; "
                "they are listed under Losses below.",
                n=Num(len(losses), "count"),
                total=Num(len(accepted), "count"),
            ),
            not losses,
            "target",
        )
    )
    for l2 in ("cold", "warm"):
        c = results.find(direction="fwd", dtype="bf16", rows=64, cols=131072, l2=l2)
        if c is None:
            continue
        vs_compile, vs_torch = c.speedup(OURS, "compile"), c.speedup(OURS, "torch")
        if vs_compile is None or vs_torch is None:
            continue
        out.append(
            Claim(
                f"target-wide-compile-{l2}",
                sentence(
                    "64×131072 bf16 forward, {l2} L2: at least {target} faster than torch.compile. Measured {x}.",
                    l2=l2,
                    target=COMPILE_TARGET,
                    x=vs_compile,
                ),
                vs_compile.value >= COMPILE_TARGET.value,
                "target",
            )
        )
        out.append(
            Claim(
                f"target-wide-torch-{l2}",
                sentence(
                    "64×131072 bf16 forward, {l2} L2: faster than torch.softmax. Measured {x}.", l2=l2, x=vs_torch
                ),
                vs_torch.value > 1 and "loss" not in vs_torch.css,
                "target",
            )
        )
    return out


def _plain(markup: Markup) -> str:
    return Text.rich(markup).text


def _refused(c: CaseResult, variant: str) -> bool:
    m = c.variants.get(variant)
    return m is not None and m.error is not None and not m.error.startswith("check failed")


def _cases(label: str, cases: list[CaseResult]) -> Markup:
    """Evidence for a report: the cases that break a claim."""
    if not cases:
        return Markup("")
    return sentence("{label}: {ids}. ", label=label, ids=", ".join(c.case_id for c in cases[:8]))


def _pairwise(
    claim_id: str, cases: list[CaseResult], fast: str, slow: str, text: str, holds: Callable[[int, int], bool]
) -> Claim | None:
    """A claim that variant ``fast`` beats ``slow`` over ``cases``: how often, and by how much
    at most.  ``text`` has the slots {k}, {n}, {x} and {case}."""
    ratios = {c.case_id: r.value for c in cases if (r := c.ratio(slow, fast)) is not None}
    if not ratios:
        return None
    wins = [c for c in cases if ratios.get(c.case_id, 0) > 1]
    best = max((c for c in cases if c.case_id in ratios), key=lambda c: ratios[c.case_id])
    return Claim(
        claim_id,
        sentence(
            text, k=Num(len(wins), "count"), n=Num(len(ratios), "count"), x=best.speedup(fast, slow), case=best.case_id
        ),  # type: ignore[arg-type]
        holds(len(wins), len(ratios)),
        evidence=_cases(f"{slow} was faster", [c for c in cases if c.case_id in ratios and c not in wins]),
    )


def _observations(results: StudyResults) -> list[Claim]:
    out: list[Claim] = []
    with_liger = [c for c in results.cases.values() if "liger" in c.variants]
    wide = [c for c in with_liger if c.params["cols"] > 65536]
    narrow = [c for c in with_liger if c.params["cols"] <= 65536]
    if wide:
        refused_wide = [c for c in wide if _refused(c, "liger")]
        refused_narrow = [c for c in narrow if _refused(c, "liger")]
        example = wide[0].variants["liger"].error or ""
        out.append(
            Claim(
                "liger-refuses-wide",
                sentence(
                    "Liger-Kernel refuses rows wider than 65536 elements: it declined {r} of {w} such cases and "
                    "{rn} of {n} narrower ones. Its message: \u201c{msg}\u201d",
                    r=Num(len(refused_wide), "count"),
                    w=Num(len(wide), "count"),
                    rn=Num(len(refused_narrow), "count"),
                    n=Num(len(narrow), "count"),
                    msg=example[:160],
                ),
                len(refused_wide) == len(wide) and not refused_narrow,
                evidence=_cases("accepted though wide", [c for c in wide if c not in refused_wide])
                + _cases("refused though narrow", refused_narrow),
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
                    "Liger-Kernel failed our float64 check in {k} cases, all in the backward: at {case} its input "
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
                evidence=_cases("failed in the forward", [c for c in failed if c.params["direction"] == "fwd"]),
            )
        )
    with_split = [c for c in results.cases.values() if "triton-split" in c.variants]
    with_one = [c for c in results.cases.values() if "triton-split-1launch" in c.variants]
    claims = [
        _pairwise(
            "split-wins-few-rows",
            [c for c in with_split if c.params["rows"] < 132],
            "triton-split",
            "triton-looped",
            "Splitting a row across programs pays when rows are fewer than the SMs: the split plan beat the looped "
            "plan in {k} of {n} such cases, by up to {x} ({case}).",
            lambda k, n: k == n,
        ),
        _pairwise(
            "loop-wins-many-rows",
            [c for c in with_split if c.params["rows"] >= 132],
            "triton-looped",
            "triton-split",
            "With rows enough to fill the GPU, looping beats splitting: looped was faster in {k} of {n} such cases, "
            "by up to {x} ({case}).",
            lambda k, n: k == n,
        ),
        _pairwise(
            "one-launch-split-loses",
            [c for c in with_one if c.params["dtype"] != "fp32"],
            "triton-split",
            "triton-split-1launch",
            "Negative result: the one-launch split, which reads each row once instead of twice, was slower than the "
            "two-launch split in {k} of {n} bf16 and fp16 wide cases, by up to {x} ({case}).",
            lambda k, n: k == n,
        ),
        _pairwise(
            "one-launch-split-fp32",
            [c for c in with_one if c.params["dtype"] == "fp32"],
            "triton-split-1launch",
            "triton-split",
            "In fp32, where a 4096-wide chunk is twice the bytes, the one-launch split won {k} of {n} cases "
            "(best {x} at {case}).",
            lambda k, n: k > 0,
        ),
    ]
    out += [c for c in claims if c is not None]
    warm_fast = []
    for c in results.where(direction="fwd", l2="warm"):
        m = c.get(OURS)
        if m is not None and m.gbps().value > c.run.copy_peak and c.bytes < c.run.env["gpu"]["l2_bytes"]:
            warm_fast.append(c)
    if warm_fast:
        best_warm = max(warm_fast, key=lambda c: c.get(OURS).gbps().value)  # type: ignore[union-attr]
        out.append(
            Claim(
                "warm-exceeds-dram",
                sentence(
                    "Warm numbers can exceed DRAM: with inputs left in L2, {case} moved {gbps}, {pct} of the "
                    "device copy. Warm results describe repeated calls on cache-resident data, not saved traffic.",
                    case=best_warm.case_id,
                    gbps=best_warm.get(OURS).gbps(),  # type: ignore[union-attr]
                    pct=best_warm.get(OURS).pct_copy(),
                ),  # type: ignore[union-attr]
                True,
            )
        )
    big = results.find(direction="fwd", dtype="bf16", rows=16384, cols=4096, l2="cold")
    if big is not None and big.get("liger") is not None and big.get(OURS) is not None:
        r = big.ratio("liger", OURS)
        out.append(
            Claim(
                "dram-bound-tie",
                sentence(
                    "At the DRAM-bound 16384×4096 both fused kernels sit at the copy bandwidth: ours {a}, Liger "
                    "{b}; the speedup {x} is a tie, not a win.",
                    a=big.get(OURS).pct_copy(),  # type: ignore[union-attr]
                    b=big.get("liger").pct_copy(),
                    x=big.speedup(OURS, "liger"),
                ),  # type: ignore[union-attr, arg-type]
                r is not None and abs(r.value - 1) < 0.03,
            )
        )
        eager = big.speedup(OURS, "eager")
        if eager is not None:
            out.append(
                Claim(
                    "fusion-vs-eager",
                    sentence(
                        "Fusion is the first-order effect: the unfused composition (upcast, max, subtract, exp, sum, "
                        "divide) took {x} as long as ours at 16384×4096 bf16.",
                        x=eager,
                    ),
                    eager.value > 5,
                )
            )
    return out


def _decision(results: StudyResults, targets: list[Claim]) -> dict[str, Any]:
    """The decision card: conclusions counted from the cases, evidence as linked numbers."""
    timed = [c for c in results.cases.values() if c.get(OURS) is not None]
    beaten_by: dict[str, list[CaseResult]] = {}
    ahead_or_tied = 0
    for c in timed:
        losses = [p for p in PEERS if (r := c.ratio(p, OURS)) is not None and r.value < 1 and r.resolved]
        for p in losses:
            beaten_by.setdefault(p, []).append(c)
        ahead_or_tied += not losses
    conclusion = [
        sentence(
            "Ours was faster than every peer, or tied within the 95% intervals, in {k} of {n} cases.",
            k=Num(ahead_or_tied, "count"),
            n=Num(len(timed), "count"),
        )
    ]
    for peer, cases in beaten_by.items():
        worst = min(cases, key=lambda c: c.ratio(peer, OURS).value)  # type: ignore[union-attr]
        widths = sorted({c.params["cols"] for c in cases})
        conclusion.append(
            sentence(
                "{peer} was faster in {k} cases, all at widths {widths}; the largest gap is {x} at {case}.",
                peer=PEERS[peer],
                k=Num(len(cases), "count"),
                widths=", ".join(str(w) for w in widths),
                x=worst.speedup(OURS, peer),
                case=worst.case_id,
            )
        )  # type: ignore[arg-type]
    big = results.find(direction="fwd", dtype="bf16", rows=16384, cols=4096, l2="cold")
    wide = results.find(direction="fwd", dtype="bf16", rows=64, cols=131072, l2="cold")
    evidence: list[Markup] = []
    if big is not None and big.get(OURS):
        evidence.append(
            sentence("{pct} of the copy bandwidth at 16384×4096 bf16 forward, cold L2", pct=big.get(OURS).pct_copy())
        )  # type: ignore[union-attr]
    if wide is not None and wide.speedup(OURS, "compile"):
        evidence.append(
            sentence(
                "{x} over torch.compile and {y} over torch.softmax at 64×131072, cold L2",
                x=wide.speedup(OURS, "compile"),
                y=wide.speedup(OURS, "torch"),
            )
        )  # type: ignore[arg-type]
    return {
        "conclusion": conclusion,
        "evidence": evidence,
        "met": [t for t in targets if t.holds],
        "missed": [t for t in targets if not t.holds],
    }


def context(results: StudyResults) -> dict[str, Any]:
    speed, times = [], []
    for direction in DIRECTIONS:
        for dtype in DTYPES:
            if (t := speed_table(results, direction, dtype)) is not None:
                speed.append((direction, dtype, t))
            if (t := time_table(results, direction, dtype)) is not None:
                times.append((direction, dtype, t))
    targets = _targets(results)
    losses = losses_table(results)
    charts = [
        c
        for c in (
            _bandwidth_chart(results, "fwd", "cold"),
            _bandwidth_chart(results, "fwd+bwd", "cold"),
            _plans_chart(results),
            _warm_cold_chart(results),
        )
        if c is not None
    ]
    return {
        "results": results,
        "speed_tables": speed,
        "time_tables": times,
        "plans": plans_table(results),
        "losses": losses[0],
        "loss_reasons": losses[1],
        "charts": {c.id: c for c in charts},
        "targets": targets,
        "observations": _observations(results),
        "decision": _decision(results, targets),
        "directions": DIRECTIONS,
        "peers": PEERS,
    }
