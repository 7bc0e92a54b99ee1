"""The softmax case study: tables, charts, claims, targets and the decision card, all
computed from the current results.  The prose around them lives in
``templates/softmax.md.j2``; every number reaches it through this module."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from markupsafe import Markup

from publish.charts import PALETTE, Chart, dots
from publish.claims import Claim, sentence
from publish.numbers import Num, Source, definition
from publish.results import EAGER, CaseResult, Measurement, StudyResults
from publish.tables import Column, Table, Text

OURS = "triton"
PEERS = {
    "torch": "torch.softmax",
    "eager": "eager composition",
    "compile": "torch.compile",
    "liger": "Liger-Kernel",
    "quack": "QuACK",
}
PLANS = {
    "triton": "planner's choice",
    "triton-looped": "looped",
    "triton-split": "split (two launches)",
    "triton-split-1launch": "split (one launch)",
}
LABELS = {**PLANS, "triton": "Triton (ours)", **PEERS}
DIRECTIONS = {"fwd": "Forward", "fwd+bwd": "Forward + backward"}
DTYPES = ("bf16", "fp16", "fp32")
# The two measurements, named the same way everywhere on the page.
DEVICE_TIME = "device time, graph replay"
EAGER_CALL = "eager call, host included"
# Set, not measured: the targets (issue 6's performance list; the study catalogue's copy
# target) and the loss table's "close" margin.
COPY_TARGET = definition(90, "pct", "target: fraction of the copy bandwidth measured in the same run")
VOCAB_COPY_TARGET = definition(85, "pct", "target: fraction of the copy bandwidth measured in the same run")
WIDE_COLD_TARGET = definition(70, "pct", "target: fraction of the copy bandwidth, cold L2")
QUACK_TARGET = definition(1.10, "x", "target: our time at most this multiple of QuACK's")
EAGER_TORCH_TARGET = definition(2, "x_set", "target: our eager call at most this multiple of torch.softmax's")
CLOSE = definition(3, "pct", "a loss this small is reported as 'near the same bound'")
WHY_QUACK = (
    "QuACK keeps a whole row on chip across a cluster of thread blocks and reads it from memory once; our looped "
    "and split plans read a row this wide twice (the second time hoping to find it in L2)."
)


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
    raised (a library's own limit, such as Liger's widest block, arrives as an exception);
    or, for eager calls, the run took no eager samples."""
    m = c.variants.get(variant)
    if m is None:
        return Text("—", "not run for this case")
    if m.error is None:
        if m.samples_key == EAGER:
            return Text("not measured", "this run took no eager samples", "refused")
        return Text("not measured", "no samples", "refused")
    error = m.error
    label = "refused" if error.startswith("refused") else "failed check" if error.startswith("check") else "error"
    return Text(label, error, "refused")


def _l2(c: CaseResult) -> Text | str:
    """The L2 mode; a cold case whose rotating inputs could not exceed the L2 says so."""
    if c.within_l2:
        return Text(
            "cold, fits in L2",
            "the rotating input sets together hold less than the L2: inputs can stay in L2 between calls",
        )
    return c.params["l2"]


def _bare(n: Num) -> Num:
    return Num(n.value, "us_bare", n.sources, n.note, n.css)


def _eager_time(c: CaseResult, variant: str) -> Num | Text:
    m = c.eager().get(variant)
    return _bare(m.time()) if m is not None else _refusal(c.eager(), variant)


def _has_eager(cases: list[CaseResult]) -> bool:
    return any(c.eager().get(OURS) is not None for c in cases)


def speed_table(results: StudyResults, direction: str, dtype: str) -> Table | None:
    shapes = _shapes(results, direction, dtype)
    if not shapes:
        return None
    cols = [
        Column("shape", "Shape", "rows × width", numeric=False),
        Column("l2", "L2", "cold: inputs come from DRAM; warm: the same buffers every call", numeric=False),
        Column("ours", "Ours (µs)", f"median time of our kernel: {DEVICE_TIME}"),
        Column("ours_eager", "Ours, eager call (µs)", f"median of our {EAGER_CALL}: a different measurement"),
        Column("gbps", "GB/s", "bytes counted from the problem / median device time"),
        Column("pct", "% copy", "of the device-copy bandwidth measured in the same run"),
    ] + [
        Column(p, f"vs {label}", f"{label} time / our time, {DEVICE_TIME}: above 1.00× we are faster")
        for p, label in PEERS.items()
    ]
    table = Table(
        f"softmax-{_slug(direction)}-{dtype}",
        f"{DIRECTIONS[direction]}, {dtype}: our time and speedup over each peer ({DEVICE_TIME}; "
        f"our {EAGER_CALL} beside it)",
        cols,
    )
    for rows, width in shapes:
        for l2 in ("cold", "warm"):
            c = results.find(direction=direction, dtype=dtype, rows=rows, cols=width, l2=l2)
            if c is None:
                continue
            ours = c.get(OURS)
            row: dict[str, Any] = {"shape": c.shape, "l2": _l2(c)}
            if ours is None:
                row["ours"] = _refusal(c, OURS)
            else:
                gbps = ours.gbps()
                row |= {
                    "ours": _bare(ours.time()),
                    "gbps": Num(gbps.value, "GBps_bare", gbps.sources, gbps.note),
                    "pct": ours.pct_copy(),
                }
            row["ours_eager"] = _eager_time(c, OURS)
            for peer in PEERS:
                row[peer] = c.speedup(OURS, peer) or _refusal(c, peer)
            table.rows.append(row)
    return table


def eager_table(results: StudyResults, direction: str, dtype: str) -> Table | None:
    """The same cases through the eager call: our time and the speedup over each peer's
    eager call, decided by the same verdict rule."""
    cases = results.where(direction=direction, dtype=dtype)
    if not _has_eager(cases):
        return None
    cols = [
        Column("shape", "Shape", "rows × width", numeric=False),
        Column("l2", "L2", numeric=False),
        Column("ours", "Ours, eager call (µs)", f"median of our {EAGER_CALL}"),
        Column("device", "Ours, device (µs)", f"median of our {DEVICE_TIME}, for reference"),
    ] + [
        Column(p, f"vs {label}", f"{label}'s eager call / ours ({EAGER_CALL}): above 1.00× ours is faster")
        for p, label in PEERS.items()
    ]
    table = Table(
        f"softmax-{_slug(direction)}-{dtype}-eager",
        f"{DIRECTIONS[direction]}, {dtype}: the {EAGER_CALL}, ours and the speedup over each peer's",
        cols,
    )
    for rows, width in _shapes(results, direction, dtype):
        for l2 in ("cold", "warm"):
            c = results.find(direction=direction, dtype=dtype, rows=rows, cols=width, l2=l2)
            if c is None:
                continue
            e = c.eager()
            ours = c.get(OURS)
            row: dict[str, Any] = {
                "shape": c.shape,
                "l2": _l2(c),
                "ours": _eager_time(c, OURS),
                "device": _bare(ours.time()) if ours is not None else _refusal(c, OURS),
            }
            for peer in PEERS:
                row[peer] = e.speedup(OURS, peer) or _refusal(e, peer)
            table.rows.append(row)
    return table


def time_table(results: StudyResults, direction: str, dtype: str, *, eager: bool = False) -> Table | None:
    """Every peer's median beside ours (the forced plans have their own table)."""
    cases = results.where(direction=direction, dtype=dtype)
    if not cases or (eager and not _has_eager(cases)):
        return None
    shown = [OURS, *PEERS]  # the forced plans have their own table
    present = [v for v in shown if any(v in c.variants for c in cases)]
    measure = EAGER_CALL if eager else DEVICE_TIME
    cols = [Column("shape", "Shape", numeric=False), Column("l2", "L2", numeric=False)] + [
        Column(v, LABELS[v], f"median µs, {measure}") for v in present
    ]
    table = Table(
        f"softmax-{_slug(direction)}-{dtype}-{'eager-times' if eager else 'times'}",
        f"{DIRECTIONS[direction]}, {dtype}: median time of ours and every peer (µs), {measure}",
        cols,
    )
    for rows, width in _shapes(results, direction, dtype):
        for l2 in ("cold", "warm"):
            c = results.find(direction=direction, dtype=dtype, rows=rows, cols=width, l2=l2)
            if c is None:
                continue
            view = c.eager() if eager else c
            row: dict[str, Any] = {"shape": c.shape, "l2": _l2(c)}
            for v in present:
                m = view.get(v)
                row[v] = _bare(m.time()) if m else _refusal(view, v)
            table.rows.append(row)
    return table


def plans_table(results: StudyResults) -> Table:
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
        "softmax-plans", f"Wide rows: every plan timed in the same run ({DEVICE_TIME}; eager call beside)", cols
    )
    for direction in DIRECTIONS:
        for dtype in DTYPES:
            for c in results.where(direction=direction, dtype=dtype):
                if "triton-looped" not in c.variants:
                    continue
                row: dict[str, Any] = {"case": f"{DIRECTIONS[direction]}, {dtype}, {c.shape}", "l2": _l2(c)}
                for v in PLANS:
                    m = c.get(v)
                    row[v] = _bare(m.time()) if m else _refusal(c, v)
                row["eager"] = _eager_time(c, OURS)
                chosen = c.get(OURS)
                row["chosen"] = Text(chosen.meta.get("plan", "?") if chosen else "—")
                table.rows.append(row)
    return table


# ----------------------------------------------------------------------------- the answer


def _count(k: int, cases: list[CaseResult], what: str) -> Num:
    """A count of cases, linked to the runs the cases came from."""
    runs = sorted({c.run.run_id for c in cases})
    return Num(k, "count", tuple(Source(r, statistic="holds cases counted here") for r in runs), note=what)


def summary_table(results: StudyResults) -> Table:
    """One line per peer: in how many cases ours was faster, unresolved or slower, on device
    time and as an eager call, and the widest loss: the page's answer in one table."""
    cols = [Column("peer", "Peer", numeric=False)]
    for key, label in (("dev", "Device time"), ("eag", "Eager call")):
        cols += [
            Column(f"{key}_win", f"{label}: ours faster", "cases where the one verdict is a win"),
            Column(f"{key}_tie", f"{label}: unresolved", "cases where the difference is not resolved: shown as a tie"),
            Column(f"{key}_loss", f"{label}: ours slower", "cases where the one verdict is a loss"),
        ]
    cols.append(Column("worst", "Widest loss (device)", "the lowest resolved speedup, and its case", numeric=False))
    table = Table(
        "softmax-summary", "Ours against each peer: cases won, unresolved and lost, every shape and dtype", cols
    )
    timed = [c for c in results.cases.values() if c.get(OURS) is not None]
    for peer, label in PEERS.items():
        row: dict[str, Any] = {"peer": Text(label)}
        compared_any = False
        for key, view in (("dev", lambda c: c), ("eag", lambda c: c.eager())):
            outcomes = [(c, _outcome(view(c), peer)) for c in timed]
            compared = [c for c, o in outcomes if o is not None]
            compared_any |= bool(compared)
            for outcome, col in (("win", "win"), ("unresolved", "tie"), ("loss", "loss")):
                found = [c for c, o in outcomes if o == outcome]
                row[f"{key}_{col}"] = (
                    _count(len(found), compared, f"{outcome} against {label} in {len(found)} of {len(compared)} cases")
                    if compared
                    else Text("—", "not measured")
                )
        if not compared_any:
            continue
        losses = [c for c in timed if _outcome(c, peer) == "loss"]
        if losses:
            worst = min(losses, key=lambda c: c.ratio(peer, OURS).value)  # type: ignore[union-attr]
            row["worst"] = Text.rich(
                sentence("{x} at {case}", x=worst.speedup(OURS, peer), case=worst.case_id.replace("x", "×"))  # type: ignore[arg-type]
            )
        else:
            row["worst"] = Text("none", "no resolved loss on device time")
        table.rows.append(row)
    return table


def _section_line(results: StudyResults, direction: str, dtype: str) -> Markup:
    """What a collapsed section holds, in one line: its cases, and where ours lost."""
    cases = [c for c in results.where(direction=direction, dtype=dtype) if c.get(OURS) is not None]
    lost = [c for c in cases if any(_outcome(c, p) == "loss" for p in PEERS)]
    eager = [c for c in cases if any(_outcome(c.eager(), p) == "loss" for p in PEERS)]
    text = sentence(
        "{n} cases; ours slower than some peer in {k} on device time",
        n=_count(len(cases), cases, "cases in force"),
        k=_count(len(lost), cases, "cases with a resolved loss, device time"),
    )
    if any(c.eager().get(OURS) for c in cases):
        text += sentence(
            " and in {e} as an eager call", e=_count(len(eager), cases, "cases with a resolved eager loss")
        )
    return text


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
        "one-read": ("one read per row", sentence(WHY_QUACK)),
        "host": (
            "host cost",
            sentence(
                "An eager-call loss: the call's host work (validation, planning, allocation, launch, op dispatch, "
                "autograd) outlasts the kernel. The dispatch page breaks it down."
            ),
        ),
        "unexplained": ("not yet explained", sentence("We have no explanation yet; it is on the list.")),
    }


def _why(c: CaseResult, peer: str, resolved: bool, close: bool, eager: bool = False) -> str:
    ours = c.get(OURS)
    assert ours is not None
    if not resolved:
        return "unresolved"
    if eager:
        return "host"
    if close:
        return "close"
    if peer == "liger" and ours.summary is not None and ours.summary.median < 10:
        return "latency"
    if peer == "quack" and ours.meta.get("plan") in ("looped", "split"):
        return "one-read"
    return "unexplained"


def losses_table(results: StudyResults, *, eager: bool = False) -> tuple[Table, Table, list[tuple[str, Markup]]]:
    """Every case where a peer's median beat ours: the losses by the one verdict, and,
    apart, the cases where the peer's median was lower but the difference is unresolved."""
    measure = EAGER_CALL if eager else DEVICE_TIME
    cols = [
        Column("case", "Case", numeric=False),
        Column("peer", "Faster peer", numeric=False),
        Column("ours", "Ours (µs)", f"median, {measure}"),
        Column("theirs", "Peer (µs)", f"median, {measure}"),
        Column("ratio", "Speedup", "below 1.00×: we are slower"),
        Column("why", "Why", numeric=False),
    ]
    base = "softmax-losses-eager" if eager else "softmax-losses"
    lost = Table(base, f"Every case a peer won by the verdict (ours slower, resolved), {measure}", cols)
    close = Table(
        f"{base}-unresolved", f"Cases where a peer's median was lower but the difference is unresolved, {measure}", cols
    )
    reasons, used = _reasons(), {}
    for case in sorted(results.cases.values(), key=lambda c: (c.params["direction"], c.params["dtype"], _shape_key(c))):
        c = case.eager() if eager else case
        for peer in PEERS:
            r = c.ratio(peer, OURS)
            if r is None or r.value >= 1.0:
                continue
            ours, theirs = c.get(OURS), c.get(peer)
            assert ours is not None and theirs is not None
            resolved = _outcome(c, peer) == "loss"
            key = _why(case, peer, resolved, r.lo >= 1 - CLOSE.value / 100, eager)
            used[key] = reasons[key]
            (lost if resolved else close).rows.append(
                {
                    "case": Text(c.case_id.replace("x", "×")),
                    "peer": PEERS[peer],
                    "ours": _bare(ours.time()),
                    "theirs": _bare(theirs.time()),
                    "ratio": c.speedup(OURS, peer),
                    "why": Text(reasons[key][0], _plain(reasons[key][1])),
                }
            )
    return lost, close, list(used.values())


# ----------------------------------------------------------------------------- charts


def _missing(c: CaseResult, variant: str) -> Text:
    """A chart's mark for a variant with no time in a case: refused, failed check, error,
    not measured, or not run."""
    m = _refusal(c, variant)
    return Text("not run", m.title) if m.text == "—" else m


def _point(c: CaseResult, variant: str, value: Callable[[Measurement], Num]) -> Num | Text:
    m = c.get(variant)
    return value(m) if m is not None else _missing(c, variant)


def _speedup_chart(results: StudyResults) -> Chart | None:
    """The key chart: forward, bf16, cold L2, ours against each peer, as time ratios, so a
    32×127 case of 2 µs reads as well as a 8192×32768 case of 300 µs."""
    cases = results.where(direction="fwd", dtype="bf16", l2="cold")
    cases = [c for c in cases if c.get(OURS) is not None]
    if not cases:
        return None
    peers = [p for p in PEERS if any(p in c.variants for c in cases)]
    series, intervals = [], []
    for p in peers:
        points: list[Num | Text] = []
        bounds: list[tuple[float, float] | None] = []
        for c in cases:
            x = c.speedup(OURS, p)
            points.append(x if x is not None else _missing(c, p))
            r = c.ratio(p, OURS)
            bounds.append((r.lo, r.hi) if r is not None else None)
        series.append((PEERS[p], points))
        intervals.append(bounds)
    return dots(
        "softmax-fwd-speedup",
        f"Forward, bf16, cold L2: how many times faster ours ran than each peer ({DEVICE_TIME})",
        [c.shape for c in cases],
        series,
        "peer's time / our time (log scale; above 1: ours faster)",
        log_y=True,
        ratio_ticks=True,
        ref=("1.00×: the same time", 1.0),
        intervals=intervals,
    )


def _bandwidth_chart(results: StudyResults, direction: str, l2: str) -> Chart | None:
    cases = results.where(direction=direction, dtype="bf16", l2=l2)
    if not cases:
        return None
    variants = [OURS, "liger", "quack", "compile", "torch", "eager"]
    variants = [v for v in variants if any(v in c.variants for c in cases)]
    series = [(LABELS[v], [_point(c, v, Measurement.gbps) for c in cases]) for v in variants]
    peak = cases[0].run.copy_peak
    return dots(
        f"softmax-{_slug(direction)}-bw-{l2}",
        f"{DIRECTIONS[direction]}, bf16, {l2} L2: achieved bandwidth ({DEVICE_TIME})",
        [c.shape for c in cases],
        series,
        "GB/s (bytes counted from the problem; log scale)",
        log_y=True,  # latency-bound shapes move a few GB/s, the large ones thousands: both readable
        ref=(f"device copy, same run: {peak:,.0f} GB/s", peak),
    )


def _eager_chart(results: StudyResults, direction: str) -> Chart | None:
    """Device time and eager call side by side, for ours and each peer, where a run took both."""
    cases = [c for c in results.where(direction=direction, dtype="bf16", l2="cold") if c.eager().get(OURS)]
    if not cases:
        return None
    series, styles = [], []
    for i, v in enumerate((OURS, "torch", "liger", "quack")):
        if not any(v in c.variants for c in cases):
            continue
        colour = PALETTE[i % len(PALETTE)]
        series.append((f"{LABELS[v]}, device", [_point(c, v, Measurement.time) for c in cases]))
        series.append((f"{LABELS[v]}, eager call", [_point(c.eager(), v, Measurement.time) for c in cases]))
        styles += [{"color": colour}, {"color": colour, "symbol": "circle-open"}]
    return dots(
        f"softmax-{_slug(direction)}-eager-chart",
        f"{DIRECTIONS[direction]}, bf16, cold L2: {DEVICE_TIME} (filled) against the {EAGER_CALL} (open)",
        [c.shape for c in cases],
        series,
        "µs per call (log scale)",
        log_y=True,
        styles=styles,
    )


def _plans_chart(results: StudyResults) -> Chart | None:
    """Each plan's time over the planner's choice's, per wide shape: a ratio, so shapes of
    10 µs and of 1 ms read on one scale."""
    cases = [c for c in results.where(direction="fwd", dtype="bf16", l2="cold") if "triton-looped" in c.variants]
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
            points.append(r if r is not None else _missing(c, v))
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
        ("cold L2", [_point(c, OURS, Measurement.gbps) for c in cold]),
        ("warm L2", [_point(w, OURS, Measurement.gbps) if w is not None else Text("not run") for w in warm]),
    ]
    peak = cold[0].run.copy_peak
    return dots(
        "softmax-warm-cold",
        f"Ours, forward, bf16: warm against cold L2 ({DEVICE_TIME})",
        [c.shape for c in cold],
        series,
        "GB/s (log scale)",
        log_y=True,
        ref=(f"device copy: {peak:,.0f} GB/s", peak),
    )


# ----------------------------------------------------------------------------- claims


def _case_target(
    results: StudyResults,
    claim_id: str,
    head: Markup,
    direction: str,
    rows: int,
    cols: int,
    evaluate: Callable[[CaseResult], tuple[Markup, bool]],
    l2s: tuple[str, ...] = ("cold", "warm"),
    after: Callable[[list[CaseResult]], Markup] | None = None,
) -> Claim:
    """A target on one shape: evaluated in every L2 mode the data hold (each must pass); a
    shape the data do not hold is reported as not met, never dropped."""
    found = [c for l2 in l2s if (c := results.find(direction=direction, dtype="bf16", rows=rows, cols=cols, l2=l2))]
    if not found:
        return Claim(
            claim_id,
            head + sentence(" Not met: no run in force measured {case}.", case=f"{rows}×{cols} ({', '.join(l2s)} L2)"),
            False,
            "target",
        )
    parts, ok = [], True
    for c in found:
        text, passed = evaluate(c)
        parts.append(sentence("{l2} L2: ", l2=c.params["l2"]) + text)
        ok = ok and passed
    text = head + Markup(" ") + Markup("; ").join(parts) + Markup(".")
    if after is not None:
        text += after(found)
    return Claim(claim_id, text, ok, "target")


def _no_slower(peer: str, eager: bool = False) -> Callable[[CaseResult], tuple[Markup, bool]]:
    """No slower than ``peer``: the one verdict rule must not call it a loss."""

    def evaluate(c: CaseResult) -> tuple[Markup, bool]:
        view = c.eager() if eager else c
        x = view.speedup(OURS, peer)
        if x is None:
            missing = OURS if view.get(OURS) is None else peer
            return sentence("not measured ({why})", why=_refusal(view, missing).title or "no samples"), False
        outcome = _outcome(view, peer)
        return sentence("{x} ({verdict})", x=x, verdict=_VERDICT_WORDS[outcome]), outcome != "loss"

    return evaluate


_VERDICT_WORDS = {"win": "faster", "loss": "slower", "unresolved": "unresolved", None: "not compared"}


def _outcome(c: CaseResult, peer: str, ours: str = OURS) -> str | None:
    """The one verdict (publish.results.verdict) on ours against ``peer`` in this case:
    "win", "loss", "unresolved", or None where either has no time."""
    v = c.verdict(ours, peer)
    return v.outcome if v is not None else None


def _copy_share(target: Num) -> Callable[[CaseResult], tuple[Markup, bool]]:
    def evaluate(c: CaseResult) -> tuple[Markup, bool]:
        ours = c.get(OURS)
        if ours is None:
            return sentence("not measured ({why})", why=_refusal(c, OURS).title or "no samples"), False
        pct = ours.pct_copy()
        return sentence("{gbps}, {pct} of the copy", gbps=ours.gbps(), pct=pct), pct.value >= target.value

    return evaluate


def _vs_quack(c: CaseResult) -> tuple[Markup, bool]:
    q = c.variants.get("quack")
    if q is None:
        return sentence("QuACK was not run"), False
    if q.error is not None:
        if q.error.startswith("check failed"):
            return sentence("QuACK failed its float64 check, so the target does not apply here"), True
        return sentence("QuACK has no time ({why})", why=q.error[:160]), False
    ratio = c.time_ratio(OURS, "quack")
    if ratio is None:
        return sentence("not measured ({why})", why=_refusal(c, OURS).title or "no samples"), False
    text = sentence("ours took {r} of QuACK's time", r=ratio)
    if _outcome(c, "quack") == "loss":
        text += sentence(" (QuACK stays ahead)")
    return text, ratio.value <= QUACK_TARGET.value


def _why_quack(found: list[CaseResult]) -> Markup:
    """Why QuACK stays ahead, said once for the cases of a target where it does."""
    ahead = [c for c in found if _outcome(c, "quack") == "loss"]
    if not ahead:
        return Markup("")
    plans = {(c.get(OURS).meta.get("plan") if c.get(OURS) else None) for c in ahead}  # type: ignore[union-attr]
    if plans <= {"looped", "split"}:
        return sentence(" {why}", why=WHY_QUACK)
    return sentence(" Why is not yet explained (our block plan reads once too).")


def _eager_vs_torch(c: CaseResult) -> tuple[Markup, bool]:
    e = c.eager()
    r = e.time_ratio(OURS, "torch")
    if r is None:
        missing = OURS if e.get(OURS) is None else "torch"
        return sentence("not measured ({why})", why=_refusal(e, missing).title or "no samples"), False
    return sentence("ours took {r} of torch.softmax's eager call", r=r), r.value <= EAGER_TORCH_TARGET.value


def _eager_liger(results: StudyResults) -> Claim:
    head = sentence(
        "Eager call (host included): ours no slower than Liger-Kernel's eager call at every case Liger accepts, "
        "forward and training step."
    )
    accepted = [c for c in results.cases.values() if c.get("liger") is not None]
    if not accepted:
        return Claim(
            "target-eager-liger", head + sentence(" Not met: no case in force has a Liger time."), False, "target"
        )
    both = {c.case_id for c in accepted if c.eager().get("liger") is not None and c.eager().get(OURS) is not None}
    measured = [c for c in accepted if c.case_id in both]
    missing = [c for c in accepted if c.case_id not in both]
    losses = [c for c in measured if _outcome(c.eager(), "liger") == "loss"]
    text = head + sentence(
        " Of {n} cases Liger accepts, {m} have eager samples of both; ours was slower (resolved) in {k} of them.",
        n=Num(len(accepted), "count"),
        m=Num(len(measured), "count"),
        k=Num(len(losses), "count"),
    )
    if missing:
        text += sentence(
            " Not measured in {u} cases (their newest run took no eager samples), so the target cannot be met yet.",
            u=Num(len(missing), "count"),
        )
    return Claim(
        "target-eager-liger",
        text,
        bool(measured) and not losses and not missing,
        "target",
        evidence=_cases("slower eagerly", losses) + _cases("no eager samples", missing),
    )


def _targets(results: StudyResults) -> list[Claim]:
    """Issue 6's performance list, device time unless a target says otherwise."""
    dev = "Device time (graph replay): "
    out = [
        _case_target(
            results, "target-torch-4096x50257",
            sentence(dev + "4096×50257 bf16 forward no slower than torch.softmax."),
            "fwd", 4096, 50257, _no_slower("torch"),
        ),
        _case_target(
            results, "target-torch-1000x50257",
            sentence(dev + "1000×50257 bf16 forward no slower than torch.softmax."),
            "fwd", 1000, 50257, _no_slower("torch"),
        ),
        _case_target(
            results, "target-copy-4096x50257",
            sentence(dev + "4096×50257 bf16 forward at least {t} of the copy bandwidth.", t=VOCAB_COPY_TARGET),
            "fwd", 4096, 50257, _copy_share(VOCAB_COPY_TARGET),
        ),
        _case_target(
            results, "target-copy-64x131072-cold",
            sentence(dev + "64×131072 bf16 forward, cold L2, at least {t} of the copy bandwidth.", t=WIDE_COLD_TARGET),
            "fwd", 64, 131072, _copy_share(WIDE_COLD_TARGET), ("cold",),
        ),
    ]  # fmt: skip
    for rows, cols in ((8192, 32768), (64, 131072), (4096, 151936)):
        out.append(
            _case_target(
                results,
                f"target-quack-{rows}x{cols}",
                sentence(
                    dev + "{shape} bf16 forward: our time at most {t} QuACK's, where QuACK passes its check.",
                    shape=f"{rows}×{cols}",
                    t=QUACK_TARGET,
                ),
                "fwd",
                rows,
                cols,
                _vs_quack,
                after=_why_quack,
            )
        )
    out += [
        _case_target(
            results, "target-step-4096x50257",
            sentence(dev + "4096×50257 bf16 training step (forward + backward) no slower than torch.softmax."),
            "fwd+bwd", 4096, 50257, _no_slower("torch"),
        ),
        _eager_liger(results),
        _case_target(
            results, "target-eager-torch-1024x1024",
            sentence(
                "Eager call (host included): 1024×1024 bf16 forward at most {t} torch.softmax's eager call.",
                t=EAGER_TORCH_TARGET,
            ),
            "fwd", 1024, 1024, _eager_vs_torch,
        ),
    ]  # fmt: skip
    for l2 in ("cold", "warm"):
        out.append(
            _case_target(
                results,
                f"target-copy-peak-{l2}",
                sentence(dev + "16384×4096 bf16 forward, {l2} L2, at least {t} of the copy bandwidth.", l2=l2,
                         t=COPY_TARGET),
                "fwd", 16384, 4096, _copy_share(COPY_TARGET), (l2,),
            )
        )  # fmt: skip
    out.append(
        _case_target(
            results,
            "target-liger-16384x4096",
            sentence(dev + "16384×4096 bf16 forward no slower than Liger-Kernel."),
            "fwd", 16384, 4096, _no_slower("liger"),
        )
    )  # fmt: skip
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
    claim_id: str,
    cases: list[CaseResult],
    fast: str,
    slow: str,
    text: str,
    holds: Callable[[int, int, int], bool],
) -> Claim | None:
    """A claim that variant ``fast`` beats ``slow`` over ``cases``, counted by the one verdict:
    ``text`` has the slots {k} (wins of ``fast``), {l} (its losses), {u} (unresolved), {n},
    and {x} and {case} for the widest gap; ``holds(wins, losses, n)``."""
    outcomes = {c.case_id: o for c in cases if (o := _outcome(c, slow, fast)) is not None}
    if not outcomes:
        return None
    compared = [c for c in cases if c.case_id in outcomes]
    wins = [c for c in compared if outcomes[c.case_id] == "win"]
    losses = [c for c in compared if outcomes[c.case_id] == "loss"]
    best = max(compared, key=lambda c: c.ratio(slow, fast).value)  # type: ignore[union-attr]
    return Claim(
        claim_id,
        sentence(
            text,
            k=Num(len(wins), "count"),
            l=Num(len(losses), "count"),
            u=Num(len(compared) - len(wins) - len(losses), "count"),
            n=Num(len(compared), "count"),
            x=best.speedup(fast, slow),  # type: ignore[arg-type]
            case=best.case_id,
        ),
        holds(len(wins), len(losses), len(compared)),
        evidence=_cases(f"{slow} was faster", losses)
        + _cases("unresolved", [c for c in compared if c not in wins + losses]),
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
            "Device time (graph replay): splitting a row across programs pays when rows are fewer than the SMs: the "
            "split plan beat the looped plan in {k} of {n} such cases, by up to {x} ({case}).",
            lambda won, lost, n: won == n,
        ),
        _pairwise(
            "one-launch-split-loses",
            [c for c in with_one if c.params["dtype"] != "fp32"],
            "triton-split",
            "triton-split-1launch",
            "Device time (graph replay), a negative result: the one-launch split, which reads each row once "
            "instead of twice, was slower than the two-launch split in {k} of {n} bf16 and fp16 wide cases (at "
            "least four in five), faster in {l} and unresolved in {u}; the widest gap {x} ({case}).",
            lambda won, lost, n: won >= 0.8 * n and lost <= 0.1 * n,
        ),
        _pairwise(
            "one-launch-split-fp32",
            [c for c in with_one if c.params["dtype"] == "fp32"],
            "triton-split-1launch",
            "triton-split",
            "Device time (graph replay): in fp32, where a 4096-wide chunk is twice the bytes, the one-launch split won "
            "{k} of {n} cases (best {x} at {case}).",
            lambda won, lost, n: won > 0,
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
                    "Device time (graph replay): warm numbers can exceed DRAM: with inputs left in L2, {case} moved "
                    "{gbps}, {pct} of the device copy. Warm results describe repeated calls on cache-resident data, "
                    "not saved traffic.",
                    case=best_warm.case_id,
                    gbps=best_warm.get(OURS).gbps(),  # type: ignore[union-attr]
                    pct=best_warm.get(OURS).pct_copy(),
                ),  # type: ignore[union-attr]
                True,
            )
        )
    big = results.find(direction="fwd", dtype="bf16", rows=16384, cols=4096, l2="cold")
    if big is not None and big.get("liger") is not None and big.get(OURS) is not None:
        out.append(
            Claim(
                "dram-bound-tie",
                sentence(
                    "Device time (graph replay): at the DRAM-bound 16384×4096 both fused kernels sit at the copy "
                    "bandwidth: ours {a}, Liger {b}; the speedup {x} is a tie, not a win.",
                    a=big.get(OURS).pct_copy(),  # type: ignore[union-attr]
                    b=big.get("liger").pct_copy(),
                    x=big.speedup(OURS, "liger"),
                ),  # type: ignore[union-attr, arg-type]
                _outcome(big, "liger") == "unresolved",
            )
        )
        eager = big.speedup(OURS, "eager")
        if eager is not None:
            out.append(
                Claim(
                    "fusion-vs-eager",
                    sentence(
                        "Device time (graph replay): fusion is the first-order effect: the unfused composition "
                        "(upcast, max, subtract, exp, sum, divide) took {x} as long as ours at 16384×4096 bf16.",
                        x=eager,
                    ),
                    eager.value > 5 and _outcome(big, "eager") == "win",
                )
            )
    out += _quack_observations(results)
    out += _eager_observations(results)
    return out


def _quack_observations(results: StudyResults) -> list[Claim]:
    """QuACK's record, like Liger's: what it refused, where it failed our check."""
    with_quack = [c for c in results.cases.values() if "quack" in c.variants]
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
    size = {"bf16": 2, "fp16": 2, "fp32": 4}
    unaligned = [c for c in ran if (c.params["cols"] * size.get(c.params["dtype"], 2)) % 16]
    refused = [c for c in ran if (c.variants["quack"].error or "").startswith("refused")]
    out.append(
        Claim(
            "quack-refuses-unaligned",
            sentence(
                "QuACK refuses rows whose width is not a multiple of 16 bytes: it declined {r} of the {u} such cases "
                "and {o} of the {a} others.",
                r=Num(len([c for c in refused if c in unaligned]), "count"),
                u=Num(len(unaligned), "count"),
                o=Num(len([c for c in refused if c not in unaligned]), "count"),
                a=Num(len(ran) - len(unaligned), "count"),
            ),
            all(c in refused for c in unaligned) and all(c in unaligned for c in refused),
            evidence=_cases("refused though aligned", [c for c in refused if c not in unaligned])
            + _cases("accepted though unaligned", [c for c in unaligned if c not in refused]),
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
                evidence=_cases("raised", raised),
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
                evidence=_cases("failed", failed),
            )
        )
    return out


def _eager_observations(results: StudyResults) -> list[Claim]:
    """Where device time and the eager call disagree: a device win that is an eager loss."""
    flips: list[tuple[CaseResult, str, Num, Num]] = []
    compared = 0
    for c in sorted(results.cases.values(), key=lambda c: c.case_id):
        e = c.eager()
        for peer in PEERS:
            dev, eag = c.speedup(OURS, peer), e.speedup(OURS, peer)
            if dev is None or eag is None:
                continue
            compared += 1
            if _outcome(c, peer) != "loss" and _outcome(e, peer) == "loss":
                flips.append((c, peer, dev, eag))
    if not compared:
        return []
    if not flips:
        return [
            Claim(
                "eager-agrees",
                sentence(
                    "Device time against the eager call: in all {n} comparisons measured both ways, ours never wins or "
                    "ties on the device only to lose the eager call.",
                    n=Num(compared, "count"),
                ),
                True,
            )
        ]
    c, peer, dev, eag = max(flips, key=lambda f: f[2].value / f[3].value)
    return [
        Claim(
            "eager-flips",
            sentence(
                "Device time against the eager call: in {k} of {n} comparisons measured both ways, ours wins or "
                "ties on device time but loses the eager call, where host work counts. The widest gap: {case} "
                "against {peer}, {dev} on the device but {eag} as an eager call.",
                k=Num(len(flips), "count"),
                n=Num(compared, "count"),
                case=c.case_id,
                peer=PEERS[peer],
                dev=dev,
                eag=eag,
            ),
            True,
            evidence=_cases("flipped", [f[0] for f in flips]),
        )
    ]


def _losses_by_peer(cases: list[CaseResult]) -> tuple[dict[str, list[CaseResult]], int]:
    """Which peers beat ours where (a loss by the one verdict rule), and in how many cases
    ours won or tied against every peer."""
    beaten_by: dict[str, list[CaseResult]] = {}
    ahead_or_tied = 0
    for c in cases:
        losses = [p for p in PEERS if _outcome(c, p) == "loss"]
        for p in losses:
            beaten_by.setdefault(p, []).append(c)
        ahead_or_tied += not losses
    return beaten_by, ahead_or_tied


def _decision(results: StudyResults, targets: list[Claim]) -> dict[str, Any]:
    """The decision card: conclusions counted from the cases, evidence as linked numbers."""
    timed = [c for c in results.cases.values() if c.get(OURS) is not None]
    beaten_by, ahead_or_tied = _losses_by_peer(timed)
    conclusion = [
        sentence(
            "Device time (graph replay): ours was faster than every peer, or tied with it, in {k} of {n} cases.",
            k=Num(ahead_or_tied, "count"),
            n=Num(len(timed), "count"),
        )
    ]
    for peer, cases in beaten_by.items():
        worst = min(cases, key=lambda c: c.ratio(peer, OURS).value)  # type: ignore[union-attr]
        widths = sorted({c.params["cols"] for c in cases})
        conclusion.append(
            sentence(
                "{peer} was faster on the device in {k} cases, all at widths {widths}; the largest gap is {x} at "
                "{case}.",
                peer=PEERS[peer],
                k=Num(len(cases), "count"),
                widths=", ".join(str(w) for w in widths),
                x=worst.speedup(OURS, peer),
                case=worst.case_id,
            )
        )  # type: ignore[arg-type]
    eager = [c.eager() for c in timed if c.eager().get(OURS) is not None]
    if eager:
        eager_beaten, eager_ahead = _losses_by_peer(eager)
        peers = [
            sentence("{peer} was faster in {k}", peer=PEERS[p], k=_count(len(cs), cs, f"{PEERS[p]} faster, eager call"))
            for p, cs in eager_beaten.items()
        ]
        conclusion.append(
            sentence(
                "Eager call (host included): ours was faster than every peer, or tied, in {k} of the {n} cases "
                "measured this way; ",
                k=Num(eager_ahead, "count"),
                n=Num(len(eager), "count"),
            )
            + (Markup("; ").join(peers) if peers else sentence("no peer was faster"))
            + Markup(".")
        )
    else:
        conclusion.append(sentence("Eager call (host included): not measured in the runs in force."))
    big = results.find(direction="fwd", dtype="bf16", rows=16384, cols=4096, l2="cold")
    wide = results.find(direction="fwd", dtype="bf16", rows=64, cols=131072, l2="cold")
    evidence: list[Markup] = []
    if big is not None and big.get(OURS):
        evidence.append(
            sentence(
                "{pct} of the copy bandwidth at 16384×4096 bf16 forward, cold L2 (device time)",
                pct=big.get(OURS).pct_copy(),  # type: ignore[union-attr]
            )
        )
    if wide is not None and wide.speedup(OURS, "compile"):
        evidence.append(
            sentence(
                "{x} over torch.compile and {y} over torch.softmax at 64×131072, cold L2 (device time)",
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


_ELEM_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8}


def _shipped_plan(c: CaseResult, backward: bool) -> str:
    """The plan the shipped planner (kernels/plans.py) picks for a case, as ``kind-block``."""
    from kernels.plans import SOFTMAX_BACKWARD_POLICY, SOFTMAX_POLICY, VECTOR_BYTES, plan_rows

    rows, cols, elem = c.params["rows"], c.params["cols"], _ELEM_BYTES[c.params["dtype"]]
    vec = VECTOR_BYTES // elem
    pad = vec - 1 if rows > 1 and cols % vec else 0
    policy = SOFTMAX_BACKWARD_POLICY if backward else SOFTMAX_POLICY
    plan = plan_rows(rows, cols, elem, int(c.run.env["gpu"]["sm_count"]), policy, None, pad)
    return f"{plan.kind}-{plan.block}"


def _planner_current(results: StudyResults) -> Claim | None:
    """Whether the planner's choices timed in the runs are the shipped planner's: a planner
    refitted after a run leaves the run's "ours" column timing the earlier choice."""
    checked, stale = 0, []
    for c in sorted(results.cases.values(), key=lambda c: c.case_id):
        ours = c.variants.get(OURS)
        if ours is None or "plan" not in ours.meta or "block" not in ours.meta:
            continue
        timed = [(f"{ours.meta['plan']}-{ours.meta['block']}", _shipped_plan(c, False))]
        back = ours.meta.get("backward")
        if isinstance(back, dict) and "plan" in back:
            timed.append((f"{back['plan']}-{back['block']}", _shipped_plan(c, True)))
        checked += 1
        if any(t != s for t, s in timed):
            stale.append((c, "; ".join(f"timed {t}, now {s}" for t, s in timed if t != s)))
    if not checked:
        return None
    listed = "; ".join(f"{c.case_id} ({why})" for c, why in stale[:10])
    return Claim(
        "planner-current",
        sentence(
            "The plan our column timed is the one the shipped planner (kernels/plans.py) picks in {k} of {n} "
            "cases. Where it is not, the run timed an earlier planner's choice; the forced-plan columns of the "
            "wide-row table show what each plan costs there.",
            k=Num(checked - len(stale), "count"),
            n=Num(checked, "count"),
        ),
        not stale,
        evidence=sentence("Earlier choices: {cases}", cases=listed) if stale else Markup(""),
    )


def _policy() -> dict[str, int]:
    """The forward and backward block limits, read from the planner (set, not measured)."""
    from kernels.plans import SOFTMAX_BACKWARD_POLICY, SOFTMAX_POLICY

    return {
        "fwd_block_kb": SOFTMAX_POLICY.max_block_bytes // 1024,
        "bwd_block_kb": SOFTMAX_BACKWARD_POLICY.max_block_bytes // 1024,
    }


def _rows(t: Table) -> Num:
    """How many rows a table holds, linked to the runs they come from."""
    return Num(len(t.rows), "count", tuple(Source(r, statistic=f"rows of {t.id}") for r in t.run_ids))


def context(results: StudyResults) -> dict[str, Any]:
    sections = []
    for direction in DIRECTIONS:
        for dtype in DTYPES:
            speed = speed_table(results, direction, dtype)
            if speed is None:
                continue
            sections.append(
                {
                    "direction": direction,
                    "dtype": dtype,
                    "title": f"{DIRECTIONS[direction]}, {dtype}",
                    "line": _section_line(results, direction, dtype),
                    "speed": speed,
                    "eager": eager_table(results, direction, dtype),
                    "times": time_table(results, direction, dtype),
                    "eager_times": time_table(results, direction, dtype, eager=True),
                }
            )
    targets = _targets(results)
    losses = losses_table(results)
    eager_losses = losses_table(results, eager=True)
    charts = [
        c
        for c in (
            _speedup_chart(results),
            _bandwidth_chart(results, "fwd", "cold"),
            _bandwidth_chart(results, "fwd+bwd", "cold"),
            _eager_chart(results, "fwd"),
            _eager_chart(results, "fwd+bwd"),
            _plans_chart(results),
            _warm_cold_chart(results),
        )
        if c is not None
    ]
    plans = plans_table(results)
    return {
        "results": results,
        "summary": summary_table(results),
        "sections": sections,
        "plans": plans if plans.rows else None,
        "losses": losses[0],
        "losses_unresolved": losses[1],
        "losses_unresolved_n": _rows(losses[1]),
        "loss_reasons": losses[2],
        "eager_losses": eager_losses[0],
        "eager_losses_unresolved": eager_losses[1],
        "eager_losses_unresolved_n": _rows(eager_losses[1]),
        "eager_loss_reasons": eager_losses[2],
        "has_eager": any(s["eager"] is not None for s in sections),
        "charts": {c.id: c for c in charts},
        "targets": targets,
        "observations": [o for o in (*_observations(results), _planner_current(results)) if o is not None],
        "decision": _decision(results, targets),
        "directions": DIRECTIONS,
        "peers": PEERS,
        "policy": _policy(),
        "v1_runs": [r for r in results.used_runs if r.doc["schema_version"] < 2],
        "v2_runs": [r for r in results.used_runs if r.doc["schema_version"] >= 2],
    }
