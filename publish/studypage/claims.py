"""Targets, observations and the decision card of a comparison page: each a sentence with the
condition that makes it true, evaluated by the one verdict on the cases in force.  A case is
written as the data hold it; a target whose case no run in force measured has no data."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from markupsafe import Markup

from contract import studies
from publish.claims import Claim, sentence
from publish.numbers import FORMATS, Num, Source
from publish.results import CaseResult
from publish.studypage.common import NOT_INSTALLED, VERDICT_WORDS, cases_evidence, count, refusal
from publish.studypage.spec import (
    AtLeast,
    AtMost,
    CopyShare,
    CopyShareAt,
    EagerEverywhere,
    Faster,
    MatrixShareAt,
    MetaAtMost,
    NoSlower,
    SpeedupsAt,
    StudyView,
    Target,
)

DEVICE_HEAD = "Device time (graph replay): "
EAGER_HEAD = "Eager call (host included): "
# A direction in a list of them ("forward and training step").
_DIRECTION_NOUNS = {"fwd": "forward", "fwd+bwd": "training step"}

Evaluation = Callable[[CaseResult], tuple[Markup, bool]]


# ----------------------------------------------------------------------------- targets


def _not_measured(view: StudyView, c: CaseResult, peer: str) -> Markup:
    """Why a comparison of ours with ``peer`` has no value in this case (or view of it)."""
    gone = view.ours if c.get(view.ours) is None else peer
    return sentence("not measured ({why})", why=refusal(c, gone).title or "no samples")


def _no_slower(view: StudyView, m: NoSlower) -> Evaluation:
    """No slower than the peer: the one verdict rule must not call it a loss."""

    def evaluate(c: CaseResult) -> tuple[Markup, bool]:
        seen = c.eager() if m.eager else c
        x = seen.speedup(view.ours, m.peer)
        if x is None:
            return _not_measured(view, seen, m.peer), False
        outcome = view.outcome(seen, m.peer)
        return sentence("{x} ({verdict})", x=x, verdict=VERDICT_WORDS[outcome]), outcome != "loss"

    return evaluate


def _faster(view: StudyView, m: Faster) -> Evaluation:
    """Faster than the peer: the one verdict rule must call it a win."""

    def evaluate(c: CaseResult) -> tuple[Markup, bool]:
        seen = c.eager() if m.eager else c
        x = seen.speedup(view.ours, m.peer)
        if x is None:
            return _not_measured(view, seen, m.peer), False
        outcome = view.outcome(seen, m.peer)
        return sentence("{x} ({verdict})", x=x, verdict=VERDICT_WORDS[outcome]), outcome == "win"

    return evaluate


def _check_failed(c: CaseResult, peer: str) -> bool:
    """Whether ``peer`` ran this case and failed its float64 check."""
    theirs = c.variants.get(peer)
    return theirs is not None and theirs.error is not None and theirs.error.startswith("check failed")


def _peer_failed(view: StudyView, c: CaseResult, peer: str) -> tuple[Markup, bool] | None:
    """Where a threshold against ``peer`` cannot be read: the peer was not run (missed), it
    failed its float64 check (the target does not apply), or it has no time (missed)."""
    label = view.label(peer)
    theirs = c.variants.get(peer)
    if theirs is None:
        return sentence("{peer} was not run", peer=label), False
    if theirs.error is not None:
        if _check_failed(c, peer):
            return sentence("{peer} failed its float64 check, so the target does not apply here", peer=label), True
        return sentence("{peer} has no time ({why})", peer=label, why=theirs.error[:160]), False
    return None


def _peer_absent(view: StudyView, found: list[CaseResult], peer: str | None) -> Markup | None:
    """Why a target against ``peer`` has no data where the run's machine did not have the
    peer's package installed (the sweep records "refused: <package> is not installed"): no
    comparison was made, so the target is neither met nor missed by that run."""
    if peer is None:
        return None
    for c in found:
        theirs = c.variants.get(peer)
        if theirs is not None and theirs.error is not None and NOT_INSTALLED in theirs.error:
            return sentence(
                "No data: {peer} was not installed on the machine of {run}, the newest run of this case ({why}).",
                peer=view.label(peer), run=c.run.run_id, why=theirs.error[:160],
            )  # fmt: skip
    return None


def beside(x: Num, threshold: Num) -> Num:
    """``x`` as a target shows it: with three decimals where two would read as the threshold
    itself (1.497× missing 1.5× must not print as 1.50×; near parity, where 0.98× and 0.95×
    lie, the speedup format has three already)."""
    if x.kind == "x" and FORMATS["x"](x.value) == FORMATS["x"](threshold.value) and x.value != threshold.value:
        return dataclasses.replace(x, kind="x3")
    return x


def _at_least(view: StudyView, m: AtLeast) -> Evaluation:
    """Our speedup over the peer (its median over ours) at least the threshold."""

    def evaluate(c: CaseResult) -> tuple[Markup, bool]:
        seen = c.eager() if m.eager else c
        failed = _peer_failed(view, c, m.peer)
        if failed is not None:
            return failed
        x = seen.speedup(view.ours, m.peer)
        if x is None:
            return _not_measured(view, seen, m.peer), False
        text = sentence("{x} ({verdict})", x=beside(x, m.threshold), verdict=VERDICT_WORDS[view.outcome(seen, m.peer)])
        return text, x.value >= m.threshold.value

    return evaluate


def _copy_share(view: StudyView, m: CopyShare) -> Evaluation:
    def evaluate(c: CaseResult) -> tuple[Markup, bool]:
        ours = c.get(view.ours)
        if ours is None:
            return sentence("not measured ({why})", why=refusal(c, view.ours).title or "no samples"), False
        pct = ours.pct_copy()
        return sentence("{gbps}, {pct} of the copy", gbps=ours.gbps(), pct=pct), pct.value >= m.threshold.value

    return evaluate


def _at_most(view: StudyView, m: AtMost) -> Evaluation:
    """Our median at most a multiple of the peer's; a peer that failed its float64 check
    has no time to hold ours to, so the target does not apply there."""
    label = view.label(m.peer)

    def evaluate(c: CaseResult) -> tuple[Markup, bool]:
        seen = c.eager() if m.eager else c
        failed = _peer_failed(view, c, m.peer)
        if failed is not None:
            return failed
        r = seen.time_ratio(view.ours, m.peer)
        if r is None:
            return _not_measured(view, seen, m.peer), False
        if m.eager:
            return sentence("ours took {r} of {peer}'s eager call", r=r, peer=label), r.value <= m.threshold.value
        text = sentence("ours took {r} of {peer}'s time", r=r, peer=label)
        if view.outcome(seen, m.peer) == "loss":
            text += sentence(" ({peer} stays ahead)", peer=label)
        return text, r.value <= m.threshold.value

    return evaluate


def _meta_at_most(view: StudyView, m: MetaAtMost) -> Evaluation:
    """A number the variant's meta holds, at most the bound of the case."""
    label = view.label(m.variant)

    def evaluate(c: CaseResult) -> tuple[Markup, bool]:
        v = c.variants.get(m.variant)
        if v is None:
            return sentence("{v} was not run", v=label), False
        value = v.meta.get(m.key)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            why = str(v.meta.get("memory") or v.meta.get("meta_error") or "not recorded in this run")
            return sentence("{what} not measured ({why})", what=m.what, why=why[:160]), False
        source = Source(c.run.run_id, c.case_id, m.variant, f"meta {m.key}", f"{m.what}, as the sweep recorded it")
        limit = m.bound(c)
        shown = Num(value / m.scale, m.unit, (source,), note=m.what)
        bound = Num(limit / m.scale, m.unit, (Source(c.run.run_id, c.case_id, statistic="the case's shape"),),
                    note=m.limit)  # fmt: skip
        return sentence("{what} {value}, bound {bound}", what=m.what, value=shown, bound=bound), value <= limit

    return evaluate


def _head(view: StudyView, t: Target, found: CaseResult | None) -> Markup:
    """The target in words: the measure, the case (as the data hold it), the condition."""
    m = t.metric
    assert t.case is not None and not isinstance(m, EagerEverywhere)
    eager = getattr(m, "eager", False)
    where = t.case.describe(found, view.op_words) + (f", {t.l2[0]} L2" if len(t.l2) == 1 else "")
    if isinstance(m, MetaAtMost):
        return sentence(
            "Recorded by the sweep, {where}, {v}: {what} at most {limit}.",
            where=where,
            v=view.label(m.variant),
            what=m.what,
            limit=m.limit,
        )
    if isinstance(m, CopyShare):
        condition, values = " at least {t} of the copy bandwidth.", {"t": m.threshold}
    elif isinstance(m, NoSlower):
        condition = " no slower than {peer}'s eager call." if eager else " no slower than {peer}."
        values = {"peer": view.label(m.peer)}
    elif isinstance(m, Faster):
        condition = " faster than {peer}'s eager call." if eager else " faster than {peer} (a resolved win)."
        values = {"peer": view.label(m.peer)}
    elif isinstance(m, AtLeast):
        condition = (
            ": our eager call at least {t} as fast as {peer}'s."
            if eager
            else ": ours at least {t} as fast as {peer} (its time over ours), where {peer} passes its check."
        )
        values = {"t": m.threshold, "peer": view.label(m.peer)}
    elif eager:
        condition, values = " at most {t} {peer}'s eager call.", {"t": m.threshold, "peer": view.label(m.peer)}
    else:
        condition = ": our time at most {t} {peer}'s, where {peer} passes its check."
        values = {"t": m.threshold, "peer": view.label(m.peer)}
    if len(t.l2) == 1 and condition.startswith(" "):
        condition = "," + condition
    return sentence((EAGER_HEAD if eager else DEVICE_HEAD) + "{where}" + condition, where=where, **values)


def case_target(view: StudyView, t: Target) -> Claim:
    """A target on one case: evaluated in every L2 mode the data hold (each must pass); a
    case the data do not hold is reported as having no data, never dropped."""
    assert t.case is not None
    found = [c for l2 in t.l2 if (c := t.case.find(view.results, l2)) is not None]
    head = _head(view, t, found[0] if found else None)
    if not found:
        missing = f"{t.case.shape} ({', '.join(t.l2)} L2)"
        text = head + sentence(" No data: no run in force measured {case}.", case=missing)
        return Claim(t.id, text, False, "target", no_data=True)
    m = t.metric
    absent = _peer_absent(view, found, getattr(m, "peer", None))
    if absent is not None:  # the machine lacked the peer's package: no comparison was made
        return Claim(t.id, head + Markup(" ") + absent, False, "target", no_data=True)
    peer = getattr(m, "peer", None)
    if peer is not None and all(_check_failed(c, peer) for c in found):
        # No number of the peer's to hold ours to anywhere: neither met nor missed.
        text = head + sentence(
            " No data: {peer} failed its float64 check in every L2 mode measured, so no comparison was made.",
            peer=view.label(peer),
        )
        return Claim(t.id, text, False, "target", no_data=True)
    evaluate = (
        _copy_share(view, m)
        if isinstance(m, CopyShare)
        else _no_slower(view, m)
        if isinstance(m, NoSlower)
        else _faster(view, m)
        if isinstance(m, Faster)
        else _at_least(view, m)
        if isinstance(m, AtLeast)
        else _meta_at_most(view, m)
        if isinstance(m, MetaAtMost)
        else _at_most(view, m)  # type: ignore[arg-type]
    )
    parts, ok = [], True
    for c in found:
        text, passed = evaluate(c)
        parts.append(sentence("{l2} L2: ", l2=c.params["l2"]) + text)
        ok = ok and passed
    text = head + Markup(" ") + Markup("; ").join(parts) + Markup(".")
    if t.after is not None:
        text += t.after(view, found)
    return Claim(t.id, text, ok, "target")


def _directions(directions: list[str]) -> str:
    words = [_DIRECTION_NOUNS.get(d, d) for d in directions]
    return " and ".join(words) if len(words) <= 2 else ", ".join(words[:-1]) + " and " + words[-1]


def eager_everywhere(view: StudyView, t: Target) -> Claim:
    """As an eager call, ours no slower than the peer in every case the peer accepts."""
    assert isinstance(t.metric, EagerEverywhere)
    peer, label = t.metric.peer, view.label(t.metric.peer)
    # One run decides (the "same run"): the newest full run that timed the peer.  A
    # case only an older run measured (a shape the sweep no longer runs) is left to that
    # run's record instead of holding the target open forever.
    pool = [c for c in view.results.cases.values() if c.get(peer) is not None]
    with_peer = {id(c.run) for c in pool}
    runs = [r for r in view.results.runs if id(r) in with_peer]
    deciding = next((r for r in reversed(runs) if not r.quick), runs[-1] if runs else None)
    accepted = [c for c in pool if c.run is deciding]
    directions = sorted({c.params["direction"] for c in accepted}, key=view.directions().index) or view.directions()
    head = sentence(
        EAGER_HEAD
        + "ours no slower than {peer}'s eager call at every case {peer} accepts"
        + (", {directions}." if directions else "."),  # (no case in force: no direction to name)
        peer=label,
        directions=_directions(directions),
    )
    if not accepted:
        text = head + sentence(" No data: no case in force has a {peer} time.", peer=label)
        return Claim(t.id, text, False, "target", no_data=True)
    both = {c.case_id for c in accepted if c.eager().get(peer) is not None and c.eager().get(view.ours) is not None}
    measured = [c for c in accepted if c.case_id in both]
    unmeasured = [c for c in accepted if c.case_id not in both]
    losses = [c for c in measured if view.outcome(c.eager(), peer) == "loss"]
    text = head + sentence(
        " In {run}, the newest full run that timed {peer}: of {n} cases {peer} accepts, {m} have eager samples of "
        "both; ours was slower (resolved) in {k} of them.",
        run=deciding.run_id,  # type: ignore[union-attr]
        n=Num(len(accepted), "count"),
        peer=label,
        m=Num(len(measured), "count"),
        k=Num(len(losses), "count"),
    )
    if unmeasured:
        text += sentence(
            " Not measured in {u} cases (their newest run took no eager samples), so the target cannot be met yet.",
            u=Num(len(unmeasured), "count"),
        )
    return Claim(
        t.id,
        text,
        bool(measured) and not losses and not unmeasured,
        "target",
        evidence=cases_evidence("slower eagerly", losses) + cases_evidence("no eager samples", unmeasured),
    )


def targets(view: StudyView) -> list[Claim]:
    """The spec's targets, in its order."""
    return [
        eager_everywhere(view, t) if isinstance(t.metric, EagerEverywhere) else case_target(view, t)
        for t in view.spec.targets
    ]


# ----------------------------------------------------------------------------- observations


def pairwise(
    view: StudyView,
    claim_id: str,
    cases: list[CaseResult],
    fast: str,
    slow: str,
    text: str,
    holds: Callable[[int, int, int], bool],
    *,
    hypothesis: str,
) -> Claim | None:
    """A claim that variant ``fast`` beats ``slow`` over ``cases``, counted by the one verdict:
    ``text`` has the slots {k} (wins of ``fast``), {l} (its losses), {u} (unresolved), {n},
    and {x} and {case} for the widest gap; ``holds(wins, losses, n)`` decides whether
    ``hypothesis`` (what the page expects, in words) holds."""
    outcomes = {c.case_id: o for c in cases if (o := view.outcome(c, slow, fast)) is not None}
    if not outcomes:
        return None
    compared = [c for c in cases if c.case_id in outcomes]
    wins = [c for c in compared if outcomes[c.case_id] == "win"]
    losses = [c for c in compared if outcomes[c.case_id] == "loss"]
    best = max(compared, key=lambda c: c.ratio(slow, fast).value)  # type: ignore[union-attr]
    measured = sentence(
        text,
        k=Num(len(wins), "count"),
        l=Num(len(losses), "count"),
        u=Num(len(compared) - len(wins) - len(losses), "count"),
        n=Num(len(compared), "count"),
        x=best.speedup(fast, slow),  # type: ignore[arg-type]
        case=best.case_id,
    )
    if losses:  # the size of the losses, whichever way the hypothesis points
        worst = min(losses, key=lambda c: c.ratio(slow, fast).value)  # type: ignore[union-attr]
        measured += sentence(
            " Its largest loss: {y} at {case}.",
            y=worst.speedup(fast, slow),
            case=worst.case_id,  # type: ignore[arg-type]
        )
    return Claim(
        claim_id,
        measured,
        holds(len(wins), len(losses), len(compared)),
        hypothesis=hypothesis,
        # Every case that was not a tie, both ways: the ones against the hypothesis are among them.
        evidence=cases_evidence(f"{view.label(fast)} was faster", wins)
        + cases_evidence(f"{view.label(slow)} was faster", losses)
        + cases_evidence("unresolved", [c for c in compared if c not in wins + losses]),
    )


def warm_exceeds_dram(view: StudyView) -> list[Claim]:
    """Warm numbers can exceed DRAM: a forward case small enough to stay in the L2 (the GPU's
    L2, as the run recorded it) that moved more than the copy bandwidth."""
    warm_fast = []
    for c in view.results.where(direction="fwd", l2="warm"):
        m = c.get(view.ours)
        if m is not None and m.gbps().value > c.run.copy_peak and c.bytes < c.run.env["gpu"]["l2_bytes"]:
            warm_fast.append(c)
    if not warm_fast:
        return []
    best = max(warm_fast, key=lambda c: c.get(view.ours).gbps().value)  # type: ignore[union-attr]
    ours = best.get(view.ours)
    assert ours is not None
    return [
        Claim(
            "warm-exceeds-dram",
            sentence(
                "Device time (graph replay): warm numbers can exceed DRAM: with inputs left in L2, {case} moved "
                "{gbps}, {pct} of the device copy. Warm results describe repeated calls on cache-resident data, "
                "not saved traffic.",
                case=best.case_id,
                gbps=ours.gbps(),
                pct=ours.pct_copy(),
            ),
            True,
        )
    ]


def eager_flips(view: StudyView) -> list[Claim]:
    """Where device time and the eager call disagree: a device win that is an eager loss."""
    flips: list[tuple[CaseResult, str, Num, Num]] = []
    compared = 0
    for c in sorted(view.results.cases.values(), key=lambda c: c.case_id):
        e = c.eager()
        for peer in view.peers:
            dev, eag = c.speedup(view.ours, peer), e.speedup(view.ours, peer)
            if dev is None or eag is None:
                continue
            compared += 1
            if view.outcome(c, peer) != "loss" and view.outcome(e, peer) == "loss":
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
                peer=view.label(peer),
                dev=dev,
                eag=eag,
            ),
            True,
            evidence=cases_evidence("flipped", [f[0] for f in flips]),
        )
    ]


# ----------------------------------------------------------------------------- the answer


def losses_by_peer(view: StudyView, cases: list[CaseResult]) -> tuple[dict[str, list[CaseResult]], int]:
    """Which peers beat ours where (a loss by the one verdict rule), and in how many cases
    ours won or tied against every peer."""
    beaten_by: dict[str, list[CaseResult]] = {}
    ahead_or_tied = 0
    for c in cases:
        losses = [p for p in view.peers if view.outcome(c, p) == "loss"]
        for p in losses:
            beaten_by.setdefault(p, []).append(c)
        ahead_or_tied += not losses
    return beaten_by, ahead_or_tied


def _evidence(view: StudyView) -> list[Markup]:
    """The decision card's evidence, each at a case the spec names, written as the data hold
    it; a named case not measured is left out."""
    out: list[Markup] = []
    for e in view.spec.evidence:
        c = e.case.find(view.results, e.l2)
        if c is None:
            continue
        ours = c.get(view.ours)
        if isinstance(e, MatrixShareAt) and ours is not None and ours.flops > 0:
            out.append(
                sentence(
                    "{tflops}, {pct} of the bf16 matrix rate measured in the same run, at {case}, {l2} L2 "
                    "(device time)",
                    tflops=ours.tflops(),
                    pct=ours.pct_mm(),
                    case=e.case.describe(c, view.op_words),
                    l2=e.l2,
                )
            )
        elif isinstance(e, CopyShareAt) and ours is not None:
            out.append(
                sentence(
                    "{pct} of the copy bandwidth at {case}, {l2} L2 (device time)",
                    pct=ours.pct_copy(),
                    case=e.case.describe(c, view.op_words),
                    l2=e.l2,
                )
            )
        elif isinstance(e, SpeedupsAt):
            found = [(p, x) for p in e.peers if (x := c.speedup(view.ours, p)) is not None]
            if not found or len(found) < len(e.peers):
                continue
            # The spec's peers first, then every other peer timed in the case: evidence that
            # names only the peers ours beat would hide the one it lost to.
            found += [(p, x) for p in view.peers if p not in e.peers and (x := c.speedup(view.ours, p)) is not None]
            # Each speedup carries the one verdict's word, so a tie or a loss quoted here reads
            # as one, and the case says its dtype and direction (forward or training step).
            slots = (
                {f"x{i}": x for i, (_, x) in enumerate(found)}
                | {f"p{i}": view.label(p) for i, (p, _) in enumerate(found)}
                | {f"v{i}": VERDICT_WORDS[view.outcome(c, p)] for i, (p, _) in enumerate(found)}
            )
            over = ", ".join(f"{{x{i}}} over {{p{i}}} ({{v{i}}})" for i in range(len(found)))
            out.append(
                sentence(
                    over + " at {case}, {l2} L2 (device time)",
                    case=e.case.describe(c, view.op_words),
                    l2=e.l2,
                    **slots,
                )
            )
    return out


def decision(view: StudyView, targets: list[Claim]) -> dict[str, object]:
    """The decision card: conclusions counted from the cases, evidence as linked numbers."""
    timed = view.timed()
    beaten_by, ahead_or_tied = losses_by_peer(view, timed)
    conclusion = [
        sentence(
            "Device time (graph replay): ours was faster than every peer, or tied with it, in {k} of {n} cases.",
            k=Num(ahead_or_tied, "count"),
            n=Num(len(timed), "count"),
        )
    ]
    for peer, cases in beaten_by.items():
        worst = min(cases, key=lambda c: c.ratio(peer, view.ours).value)  # type: ignore[union-attr]
        if studies.shape(view.study) == ("rows", "cols"):
            widths = sorted({c.params["cols"] for c in cases})
            where = (
                "at width " if len(cases) == 1 else "all at width " if len(widths) == 1 else "all at widths "
            ) + ", ".join(str(w) for w in widths)
        else:  # a shape of more dimensions than a width: the shapes themselves
            shapes = sorted({c.dims: c.shape for c in cases}.items())
            where = "at " + (", ".join(s for _, s in shapes[:8]) + (" and others" if len(shapes) > 8 else ""))
        conclusion.append(
            sentence(
                "{peer} was faster on the device in {k} "
                + ("case" if len(cases) == 1 else "cases")
                + ", {where}; the largest gap is {x} at {case}.",
                peer=view.label(peer),
                k=Num(len(cases), "count"),
                where=where,
                x=worst.speedup(view.ours, peer),  # type: ignore[arg-type]
                case=worst.case_id,
            )
        )
    eager = [c.eager() for c in timed if c.eager().get(view.ours) is not None]
    if eager:
        eager_beaten, eager_ahead = losses_by_peer(view, eager)
        peers = [
            sentence(
                "{peer} was faster in {k}",
                peer=view.label(p),
                k=count(len(cs), cs, f"{view.label(p)} faster, eager call"),
            )
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
    return {
        "conclusion": conclusion,
        "evidence": _evidence(view),
        "met": [t for t in targets if t.holds],
        "missed": [t for t in targets if not t.holds and not t.no_data],
        "no_data": [t for t in targets if t.no_data],
    }
