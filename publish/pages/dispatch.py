"""The dispatch page: what one eager call costs the host, piece by piece, for ours and the
peers, and what chains of 1 and 16 calls cost eagerly, under torch.compile and under
mode="reduce-overhead".  Derived pieces (op dispatch, autograd, backward) are differences
of two medians of the same run, carrying the sources of both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from publish.claims import Claim, sentence
from publish.numbers import Num, combine, definition
from publish.pages import SiteData
from publish.results import CaseResult, StudyResults
from publish.runs import Run
from publish.studypage.spec import StudyPage
from publish.tables import Column, Table, Text

IMPLS = {"ours": "Ours (kernels.softmax)", "torch": "torch.softmax", "liger": "Liger-Kernel", "quack": "QuACK"}
HOST_TARGET = definition(20, "us", "target from issue 6: host time of one eager call on the H200 machine")
Spec = str | tuple[str, str]  # a variant, or (minuend, subtrahend): the difference of two medians


@dataclass(frozen=True)
class Piece:
    key: str
    label: str
    help: str
    specs: dict[str, Spec]
    per: str = "call"  # what a ratio to torch.softmax divides by: its "call" or its "step"


PIECES = [
    Piece("validate", "Validation", "checking types, dtype, device and dim", {"ours": "ours/validate"}),
    Piece("plan", "Planning", "row layout (alignment of every row) and the cached plan lookup", {"ours": "ours/plan"}),
    Piece(
        "allocate", "Allocation", "allocating the output tensor", {"ours": "ours/allocate", "torch": "torch/allocate"}
    ),
    Piece(
        "launch",
        "Launch, cached",
        "the cached launch of the planned kernel into a ready output",
        {"ours": "ours/launch"},
    ),
    Piece(
        "launch-triton",
        "Launch through Triton's kernel[grid]",
        "the same kernel through Triton's own launch path",
        {"ours": "ours/launch-triton", "liger": "liger/launch-triton"},
    ),
    Piece(
        "forward",
        "Forward without validation or autograd",
        "the internal forward function",
        {"ours": "ours/forward", "liger": "liger/forward"},
    ),
    Piece(
        "call",
        "Eager forward call",
        "the public call as a user makes it",
        {"ours": "ours/call", "torch": "torch/call", "liger": "liger/call", "quack": "quack/call"},
    ),
    Piece(
        "op",
        "Through the registered op",
        "ours: torch.ops.labnotes.softmax; torch: torch.ops.aten._softmax.default",
        {"ours": "ours/op", "torch": "torch/aten"},
    ),
    Piece(
        "op-dispatch",
        "Op dispatch",
        "derived: the registered op minus the plain forward",
        {"ours": ("ours/op", "ours/forward")},
    ),
    Piece(
        "call-grad",
        "Forward call, input requires grad",
        "the public call when autograd records it",
        {"ours": "ours/call-grad", "torch": "torch/call-grad", "liger": "liger/call-grad"},
    ),
    Piece(
        "autograd",
        "Autograd",
        "derived: the call with grad minus the call without",
        {
            "ours": ("ours/call-grad", "ours/call"),
            "torch": ("torch/call-grad", "torch/call"),
            "liger": ("liger/call-grad", "liger/call"),
        },
    ),
    Piece(
        "step",
        "Training step",
        "forward, then torch.autograd.grad",
        {"ours": "ours/step", "torch": "torch/step", "liger": "liger/step", "quack": "quack/step"},
        per="step",
    ),
    Piece(
        "op-step",
        "Training step through the registered op",
        "forward through the op, then torch.autograd.grad",
        {"ours": "ours/op-step"},
        per="step",
    ),
    Piece(
        "backward",
        "Backward and autograd.grad",
        "derived: the training step minus the forward call with grad",
        {
            "ours": ("ours/step", "ours/call-grad"),
            "torch": ("torch/step", "torch/call-grad"),
            "liger": ("liger/step", "liger/call-grad"),
        },
        per="step",
    ),
    Piece(
        "backward-fn",
        "Our backward function alone",
        "the backward function autograd calls (_backward), timed without autograd: what the backward target reads",
        {"ours": "ours/backward"},
        per="step",
    ),
]
CHAIN_MODES = {"eager": "eager", "compile": "torch.compile", "reduce-overhead": 'mode="reduce-overhead"'}
MEASURES = {
    "user": "a Python loop of calls between two CUDA events (timer eager-events): host and device together, "
    "what a user's loop waits for",
    "host": "host time per call (timer host-loop): perf_counter around a loop that never waits for the GPU",
}


def _impl(variant: str) -> str:
    return variant.split("/", 1)[0]


def _missing(c: CaseResult, variant: str) -> Text:
    m = c.variants.get(variant)
    if m is None:
        who = IMPLS.get(_impl(variant), _impl(variant))
        return Text("not measured", f"{variant} is not in this run ({who} not installed, or the piece was not timed)")
    error = m.error or "no samples"
    return Text("refused" if error.startswith("refused") else "error", error, "refused")


def _bare(n: Num | Text) -> Num | Text:
    """The same number without its unit, for a table whose header names the unit."""
    return Num(n.value, "us_bare", n.sources, n.note, n.css) if isinstance(n, Num) else n


def value(c: CaseResult, spec: Spec) -> Num | Text:
    """The host µs of one piece in one case: a median, or a difference of two medians."""
    if isinstance(spec, str):
        m = c.get(spec)
        return m.time() if m is not None else _missing(c, spec)
    a, b = spec
    d = c.difference(a, b)
    if d is None:
        return _missing(c, a if c.get(a) is None else b)
    return d


def host_cases(results: StudyResults, run: Run) -> list[CaseResult]:
    cases = [c for c in results.run_cases(run.run_id) if c.params.get("measure") == "host" and "chain" not in c.params]
    return sorted(cases, key=lambda c: (c.params["cols"], c.params["rows"]))


def chain_cases(results: StudyResults, run: Run, measure: str) -> list[CaseResult]:
    cases = [c for c in results.run_cases(run.run_id) if c.params.get("measure") == measure and "chain" in c.params]
    return sorted(cases, key=lambda c: (c.params["chain"], c.params["cols"], c.params["rows"]))


def _present(cases: list[CaseResult]) -> list[str]:
    """The implementations this run has any host piece of (QuACK only where it ran)."""
    have = {_impl(v) for c in cases for v in c.variants}
    return [i for i in IMPLS if i in have]


def breakdown_table(c: CaseResult, impls: list[str]) -> Table:
    shape = c.shape.replace("×", "x")
    cols = [Column("piece", "Piece (host µs per call)", numeric=False)] + [Column(i, IMPLS[i]) for i in impls]
    table = Table(
        f"dispatch-host-{shape}",
        f"{c.shape} bf16: host time per eager call, piece by piece (median µs, host-loop, {c.run.run_id})",
        cols,
    )
    for p in PIECES:
        row: dict[str, Any] = {"piece": Text(p.label, p.help)}
        if not any(i in p.specs for i in impls):
            continue
        for i in impls:
            spec = p.specs.get(i)
            row[i] = (
                _bare(value(c, spec)) if spec is not None else Text("—", "not a separate piece of this implementation")
            )
        table.rows.append(row)
    return table


def verdict_table(cases: list[CaseResult], impls: list[str], run: Run) -> Table:
    peers = [i for i in impls if i != "ours"]
    cols = [Column("case", "Shape and call", numeric=False)] + [
        Column(p, f"vs {IMPLS[p]}", f"{IMPLS[p]}'s host time / ours: above 1.00× ours costs the host less")
        for p in peers
    ]
    table = Table("dispatch-verdicts", f"Ours against each peer, host time of the same call ({run.run_id})", cols)
    for c in cases:
        for what, label in (("call", "eager forward call"), ("step", "training step")):
            row: dict[str, Any] = {"case": Text(f"{c.shape}, {label}")}
            for p in peers:
                x = c.speedup(f"ours/{what}", f"{p}/{what}")
                row[p] = x if x is not None else _missing(c, f"{p}/{what}")
            table.rows.append(row)
    return table


def _per_torch(c: CaseResult, p: Piece, num: Num | Text) -> Num | Text:
    """A piece of ours divided by torch.softmax's whole call (or step) in the same run: a
    ratio that survives a change of host CPU, unlike the absolute times."""
    if not isinstance(num, Num):
        return Text("—", "no time for this piece")
    d = c.get(f"torch/{p.per}")
    if d is None:
        return _missing(c, f"torch/{p.per}")
    t = d.time()
    return combine(num.value / t.value, "x", (num, t), note=f"this piece / torch.softmax's {p.per} in the same run")


def before_after_table(before: list[CaseResult], after: list[CaseResult], a: Run, b: Run) -> Table:
    cols = [
        Column("case", "Shape and piece", numeric=False),
        Column("before", "Before (µs)", f"host time in {a.run_id}"),
        Column("after", "After (µs)", f"host time in {b.run_id}"),
        Column("before_x", "Before ÷ torch", "this piece over torch.softmax's call (or step), same run"),
        Column("after_x", "After ÷ torch", "this piece over torch.softmax's call (or step), same run"),
    ]
    table = Table("dispatch-before-after", f"Ours, before ({a.run_id}) → after ({b.run_id}), host-loop", cols)
    old = {c.case_id: c for c in before}
    for c in after:
        o = old.get(c.case_id)
        if o is None:
            continue
        for p in PIECES:
            spec = p.specs.get("ours")
            if spec is None:
                continue
            vb, va = value(o, spec), value(c, spec)
            table.rows.append(
                {
                    "case": Text(f"{c.shape}: {p.label}", p.help),
                    "before": _bare(vb),
                    "after": _bare(va),
                    "before_x": _per_torch(o, p, vb),
                    "after_x": _per_torch(c, p, va),
                }
            )
    return table


def chain_table(cases: list[CaseResult], measure: str, run: Run) -> Table:
    cols = (
        [Column("case", "Chain, shape, ops by", numeric=False)]
        + [Column(m, f"{label} (µs)", "per call of the whole chain") for m, label in CHAIN_MODES.items()]
        + [
            Column("compile_x", "torch.compile vs eager", "eager time / compiled time: above 1.00× compiling pays"),
            Column("ro_x", "reduce-overhead vs eager", "eager time / reduce-overhead time"),
            Column("vs_torch", "Ours vs torch, eager", "torch's eager chain / ours: above 1.00× ours is faster"),
        ]
    )
    title = "host time per call (host-loop)" if measure == "host" else "a user's loop, host and device (events)"
    table = Table(f"dispatch-chains-{measure}", f"Chains of softmax calls: {title} ({run.run_id})", cols)
    for c in cases:
        n = int(c.params["chain"])
        for who in ("torch", "ours"):
            row: dict[str, Any] = {"case": Text(f"{n} op{'s' if n > 1 else ''}, {c.shape}, {IMPLS[who]}")}
            for m in CHAIN_MODES:
                row[m] = _bare(value(c, f"{who}/{m}"))
            row["compile_x"] = c.speedup(f"{who}/compile", f"{who}/eager")
            row["ro_x"] = c.speedup(f"{who}/reduce-overhead", f"{who}/eager")
            row["vs_torch"] = c.speedup("ours/eager", "torch/eager") if who == "ours" else None
            table.rows.append(row)
    return table


# ----------------------------------------------------------------------------- claims


def targets(cases: list[CaseResult], run: Run | None) -> list[Claim]:
    out = []
    for key, spec, label in (
        ("target-host-forward", "ours/call", "an eager forward call of ours"),
        ("target-host-backward", "ours/backward", "the backward of ours in a training step (our backward "
                                                  "function, which autograd calls; the engine's own share is "
                                                  "in the step tables and is the same for every library)"),
    ):  # fmt: skip
        if run is None or not cases:
            out.append(
                Claim(
                    key,
                    sentence(
                        "Host-loop time: {what} costs at most {target} of host time on the H200 machine. Not met: "
                        "no dispatch run is in force.",
                        what=label,
                        target=HOST_TARGET,
                    ),
                    False,
                    "target",
                )
            )
            continue
        values = [(c, value(c, spec)) for c in cases]
        parts = [
            sentence("{shape} {v}", shape=c.shape, v=v)
            if isinstance(v, Num)
            else sentence("{shape} not measured", shape=c.shape)
            for c, v in values
        ]
        holds = all(isinstance(v, Num) and v.value <= HOST_TARGET.value for _, v in values)
        out.append(
            Claim(
                key,
                sentence(
                    "Host-loop time: {what} costs at most {target} of host time on the H200 machine (host time "
                    "depends on the host CPU). Measured in {run}: ",
                    what=label,
                    target=HOST_TARGET,
                    run=run.run_id,
                )
                + sentence("; ").join(parts)
                + sentence("."),
                holds,
                "target",
            )
        )
    return out


def observations(cases: list[CaseResult], chains: list[CaseResult], run: Run | None) -> list[Claim]:
    out: list[Claim] = []
    for c in cases:
        call = c.get("ours/call")
        parts = [p for p in PIECES if p.key in ("validate", "plan", "allocate", "launch")]
        pieces = [(p, v) for p in parts if isinstance((v := value(c, p.specs["ours"])), Num)]
        if call is None or not pieces:
            continue
        p, v = max(pieces, key=lambda pv: pv[1].value)
        out.append(
            Claim(
                f"largest-host-piece-{c.shape.replace('×', 'x')}",
                sentence(
                    "Host-loop time, {shape}: the largest single piece of our eager forward call is {piece}, {v} of "
                    "the whole call's {call}.",
                    shape=c.shape,
                    piece=p.label.lower(),
                    v=v,
                    call=call.time(),
                ),
                v.value <= call.time().value,
                hypothesis="each piece, timed apart in the host loop, takes no longer than the whole call",
            )
        )
    sixteen = [c for c in chains if int(c.params["chain"]) > 1 and c.params.get("measure") == "user"]
    verdicts = [(c, x) for c in sixteen if (x := c.speedup("ours/reduce-overhead", "ours/eager")) is not None]
    if verdicts:
        wins = [c for c, _ in verdicts if c.verdict("ours/reduce-overhead", "ours/eager").outcome == "win"]  # type: ignore[union-attr]
        best = max(verdicts, key=lambda cx: cx[1].value)
        out.append(
            Claim(
                "chain-reduce-overhead",
                sentence(
                    'A user\'s loop (events): for a chain of 16 of our calls, capturing it with mode="reduce-overhead" '
                    "beat eager calls at {k} of {n} shapes, by up to {x} ({case}).",
                    k=Num(len(wins), "count"),
                    n=Num(len(verdicts), "count"),
                    x=best[1],
                    case=best[0].shape,
                ),
                len(wins) == len(verdicts),
                hypothesis='capturing a chain of 16 calls with mode="reduce-overhead" beats calling them eagerly at '
                "every shape",
            )
        )
    return out


# ----------------------------------------------------------------------------- page


def context(data: SiteData) -> dict[str, Any]:
    results: StudyResults = data.studies["dispatch"]
    runs = results.runs
    withdrawn = [r for r in data.all_runs if r.study == "dispatch" and r.run_id in data.withdrawn]
    run = runs[-1] if runs else None
    cases = host_cases(results, run) if run is not None else []
    chains = {m: chain_cases(results, run, m) for m in MEASURES} if run is not None else {}
    impls = _present(cases)
    before = runs[0] if len(runs) >= 2 else None
    return {
        "run": run,
        "runs": runs,
        "withdrawn": withdrawn,
        "before": before,
        "measures": MEASURES,
        "breakdowns": [breakdown_table(c, impls) for c in cases],
        "verdicts": verdict_table(cases, impls, run) if cases and run is not None else None,
        "before_after": before_after_table(host_cases(results, before), cases, before, run)
        if before is not None and run is not None
        else None,
        "chains": [(m, chain_table(cs, m, run)) for m, cs in chains.items() if cs and run is not None],
        **_claim_parts(cases, [c for cs in chains.values() for c in cs], run),
        "has_quack": "quack" in impls,
    }


def claims(data: SiteData) -> list[Claim]:
    """The page's claims as :func:`context` holds them: its targets, then its observations."""
    results = data.studies["dispatch"]
    run = results.runs[-1] if results.runs else None
    cases = host_cases(results, run) if run is not None else []
    chains = [c for m in MEASURES for c in chain_cases(results, run, m)] if run is not None else []
    parts = _claim_parts(cases, chains, run)
    return parts["targets"] + parts["observations"]


def _claim_parts(cases: list[CaseResult], chains: list[CaseResult], run: Run | None) -> dict[str, list[Claim]]:
    return {"targets": targets(cases, run), "observations": observations(cases, chains, run)}


PAGE = StudyPage(
    study="dispatch",
    title="Dispatch",
    summary="the host time of one eager call, piece by piece, and chains of calls eager, compiled and graph-replayed",
    context=context,
    claims=claims,
)
