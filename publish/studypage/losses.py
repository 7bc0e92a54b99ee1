"""Losses are published like wins: every case a peer's median beat ours, with why we think
it did.  A loss is what the one verdict calls a loss; a lower median whose difference is
unresolved is listed apart."""

from __future__ import annotations

from markupsafe import Markup

from publish.claims import sentence
from publish.numbers import definition
from publish.results import CaseResult
from publish.studypage.common import DEVICE_TIME, EAGER_CALL, bare, plain, shape_key
from publish.studypage.spec import THROUGHPUT, StudyView
from publish.tables import Column, Table, Text


def reasons(view: StudyView) -> dict[str, tuple[str, Markup]]:
    """Why we lose, by kind: a short label for the table and the explanation under it; a
    spec adds its own kinds (and may say more about these)."""
    out = {
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
                "A loss within {gap}, with ours at {near} or more of the rate measured in the same run (the {column} "
                "column of the case's table): both kernels run near the same limit, and such gaps come and go "
                "between runs.",
                gap=view.spec.close,
                near=NEAR_BOUND,
                column="% mm peak" if view.spec.rates[:1] == (THROUGHPUT,) else "% copy",
            ),
        ),
        "host": (
            "host cost",
            sentence(
                "An eager-call loss: the call's host work (validation, planning, allocation, launch, op dispatch, "
                "autograd) outlasts the kernel."
            ),
        ),
        "few-calls": (
            "few calls a sample",
            sentence(
                "An eager-call loss measured with at most four calls a sample on both sides: the eager timer makes as "
                "many calls as the device-time graph holds (a sample lasts about a millisecond, so a case of a "
                "quarter to half a millisecond holds two to four, and a cold case at least its input sets). A "
                "difference in the host's latency to the first kernel, which a longer loop hides behind the device, "
                "then counts once a sample, spread over those few calls. On the GEMM training step at 4096³ "
                "notes/probe_step_calls.py found it to be most of the gap (over two calls a sample the gap to torch's "
                "step was several times the gap over 64); elsewhere it has not been measured apart from the host's "
                "work per call or a wait inside the call."
            ),
        ),
        "unexplained": ("not yet explained", sentence("We have no explanation yet; it is on the list.")),
    }
    return out | {key: (label, sentence(text)) for key, (label, text) in view.spec.reasons.items()}


# An eager loss off the device whose samples held at most this many calls, on both sides, is
# labelled by that condition (the first call's latency weighs heavily there), not put down to
# host work per call (notes/probe_step_calls.py).
FEW_EAGER_CALLS = 4


def why(view: StudyView, c: CaseResult, peer: str, resolved: bool, close: bool, eager: bool = False) -> str:
    """The kind of a loss: unresolved, host cost (an eager loss most of whose gap is not in the
    device times; "few calls a sample" where both sides held the same number of calls a
    sample, at most ``FEW_EAGER_CALLS``), near the same bound, what the spec explains, or not
    yet explained.  ``c``
    is the case's device-time result.  An eager loss where the device times differ by at
    least half as much as the eager calls do has the device's reason, resolved or not (a 1 ms
    product is not lost on its host work)."""
    if not resolved:
        return "unresolved"
    if eager:
        device = c.ratio(peer, view.ours)
        if device is None or _gap(c, peer, view.ours) < 0.5 * _gap(c.eager(), peer, view.ours):
            return "few-calls" if _few_calls(c, peer, view.ours) else "host"
        close = _within(view, device.value)
    if close and _near_bound(view, c):
        return "close"
    explained = view.spec.explain(c, peer) if view.spec.explain is not None else None
    return explained or "unexplained"


# Set, not measured: ours must run at least this share of its run's ceiling (the copy, or the
# bf16 matrix rate on a page that shows TFLOP/s first) for a small loss to be put down to a
# shared limit; a small loss far from any ceiling (a launch-bound size) is not.
NEAR_BOUND = definition(70, "pct", "a small loss is 'near the same bound' only with ours at this share of the ceiling")


def _within(view: StudyView, ratio: float) -> bool:
    # "Near the same bound" is said of the ratio the table prints (the peer's median time over
    # ours), so that two losses of one size read alike whatever their intervals' widths.
    return ratio >= 1 - view.spec.close.value / 100


def _near_bound(view: StudyView, c: CaseResult) -> bool:
    """Whether ours ran at NEAR_BOUND or more of its run's ceiling in the case (device time):
    the matrix rate where the page shows TFLOP/s first, else the copy."""
    ours = c.get(view.ours)
    if ours is None or ours.summary is None:
        return False
    if view.spec.rates[:1] == (THROUGHPUT,):
        share = ours.pct_mm() if c.flops > 0 else None
    else:
        share = ours.pct_copy() if c.bytes > 0 else None
    return share is not None and share.value >= NEAR_BOUND.value


def _few_calls(c: CaseResult, peer: str, ours: str) -> bool:
    # Both eager timings held the same number of calls a sample, at most FEW_EAGER_CALLS: with
    # unequal counts a first-call latency weighs differently on the two, and explains nothing.
    counts = [m.raw.get("eager_calls_per_sample") if m is not None else None for m in (c.get(ours), c.get(peer))]
    first = counts[0]
    if not isinstance(first, int) or isinstance(first, bool) or not 0 < first <= FEW_EAGER_CALLS:
        return False
    return counts[1] == first and not isinstance(counts[1], bool)


def _gap(c: CaseResult, peer: str, ours: str) -> float:
    # Our median time less the peer's (µs), 0 where either has none.
    mine, theirs = c.get(ours), c.get(peer)
    if mine is None or theirs is None or mine.summary is None or theirs.summary is None:
        return 0.0
    return mine.time().value - theirs.time().value


def _order(c: CaseResult) -> tuple[str, str, tuple[int, int]]:
    return (c.params["direction"], c.params["dtype"], shape_key(c))


def losses_table(view: StudyView, *, eager: bool = False) -> tuple[Table, Table, list[tuple[str, Markup]]]:
    """Every case where a peer's median beat ours: the losses by the one verdict, and,
    apart, the cases where the peer's median was lower but the difference is unresolved;
    and the reasons the two tables use."""
    measure = EAGER_CALL if eager else DEVICE_TIME
    cols = [
        Column("case", "Case", numeric=False),
        Column("peer", "Faster peer", numeric=False),
        Column("ours", "Ours (µs)", f"median, {measure}"),
        Column("theirs", "Peer (µs)", f"median, {measure}"),
        Column("ratio", "Speedup", "below 1.00×: we are slower"),
        Column("why", "Why", numeric=False),
    ]
    base = f"{view.study}-losses-eager" if eager else f"{view.study}-losses"
    lost = Table(base, f"Every case a peer won by the verdict (ours slower, resolved), {measure}", cols)
    close = Table(
        f"{base}-unresolved", f"Cases where a peer's median was lower but the difference is unresolved, {measure}", cols
    )
    known, used = reasons(view), {}
    for case in sorted(view.results.cases.values(), key=_order):
        c = case.eager() if eager else case
        for peer in view.peers:
            r = c.ratio(peer, view.ours)
            if r is None or r.value >= 1.0:
                continue
            ours, theirs = c.get(view.ours), c.get(peer)
            assert ours is not None and theirs is not None
            resolved = view.outcome(c, peer) == "loss"
            key = why(view, case, peer, resolved, _within(view, r.value), eager)
            used[key] = known[key]
            (lost if resolved else close).rows.append(
                {
                    "case": Text(c.case_id.replace("x", "×")),
                    "peer": view.label(peer),
                    "ours": bare(ours.time()),
                    "theirs": bare(theirs.time()),
                    "ratio": c.speedup(view.ours, peer),
                    "why": Text(known[key][0], plain(known[key][1])),
                }
            )
    return lost, close, list(used.values())
