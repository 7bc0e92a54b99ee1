"""Runs a study: check every variant, then time them interleaved, case by case.

For each case the harness
1. builds every variant; one that refuses records its reason;
2. runs each on fresh random inputs into a NaN-poisoned allocator and compares against a
   float64 reference; one that fails keeps its error and the numbers that failed it;
3. for each L2 mode, captures a timer per surviving variant, then takes ``rounds`` samples
   of each in shuffled order, so a burst of outside load spoils a few samples of every
   variant rather than all samples of one;
4. hands the case to the writer, which puts it on disk before the next case starts.
"""

from __future__ import annotations

import gc
import random
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from bench.studies import Params, Refused, Step, Study, Tensors
from bench.timing import SHARED_CALLS_SPAN
from contract.schema import json_number, number_value


@dataclass
class Options:
    quick: bool = False
    rounds: int = 30
    target_ms: float = 1.0
    l2_modes: tuple[str, ...] = ("warm", "cold")
    only: str | None = None
    seed: int = 0
    eager: bool = True
    # Variants not run at all, with the reason the run file gives for each (e.g. one that
    # crashed the process in a probe: a CUDA fault is sticky and would end every later case).
    skip: tuple[str, ...] = ()
    skip_reason: str = ""

    def describe(self) -> dict[str, Any]:
        return {
            "rounds": self.rounds,
            "target_sample_ms": self.target_ms,
            "seed": self.seed,
            "quick": self.quick,
            "eager_samples": self.eager,
            **({"skipped_variants": list(self.skip), "skip_reason": self.skip_reason} if self.skip else {}),
        }


class Timer(Protocol):
    timer: str
    calls: int

    def sample_us(self) -> float: ...
    def release(self) -> None: ...


class Backend(Protocol):
    device: torch.device
    l2_bytes: int

    def sets_for(self, l2: str, case_bytes: int) -> int: ...
    def make_timer(
        self, fn_for_set: Callable[[int], object], sets: int, target_ms: float, name: str | None = None,
        calls: int | None = None,
    ) -> tuple[Timer, Timer]: ...  # fmt: skip
    def before_case(self) -> None: ...
    def after_round(self) -> None: ...
    def poison(self, nbytes: int) -> None: ...
    def cleanup(self) -> None: ...
    def memory_note(self) -> str: ...


@dataclass
class VariantRecord:
    label: str  # what the pages call the variant (Variant.label), stored since schema 4
    meta: dict[str, Any]
    error: str | None = None
    check: dict[str, Any] | None = None
    samples_us: list[float] = field(default_factory=list)
    eager_us: list[float] = field(default_factory=list)
    timer: str | None = None
    calls_per_sample: int | None = None
    eager_calls_per_sample: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "samples_us": [round(s, 4) for s in self.samples_us],
            "eager_us": [round(s, 4) for s in self.eager_us],
            "error": self.error,
            "check": self.check,
            "timer": self.timer,
            "calls_per_sample": self.calls_per_sample,
            "eager_calls_per_sample": self.eager_calls_per_sample,
            "meta": self.meta,
        }


def describe_error(exc: BaseException) -> str:
    """One readable line: the exception type and the first line of its message."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    where = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    origin = f" (at {where.name})" if where is not None else ""
    return f"{type(exc).__name__}: {text[:400]}{origin}"


def compare(outs: tuple[torch.Tensor, ...], refs: tuple[torch.Tensor, ...], tol: float) -> dict[str, Any]:
    """Relative L2 error of each output against its float64 reference; NaN never passes.

    As it is stored: strict JSON, so an error that is not finite (an output holding NaN)
    is written as the string "inf" or "nan" (:func:`contract.schema.json_number`)."""
    rel, max_abs, finite = [], [], True
    for out, ref in zip(outs, refs, strict=True):
        o = out.detach().double()
        finite = finite and bool(torch.isfinite(o).all())
        diff = torch.nan_to_num(o - ref, nan=float("inf"))
        rel.append(float(torch.linalg.vector_norm(diff) / torch.linalg.vector_norm(ref).clamp_min(1e-300)))
        max_abs.append(float(diff.abs().max()) if diff.numel() else 0.0)
    passed = finite and all(r <= tol for r in rel)
    return {
        "rel_l2": [json_number(r) for r in rel],
        "max_abs": [json_number(m) for m in max_abs],
        "tolerance": tol,
        "finite": finite,
        "passed": passed,
    }


def _check(
    study: Study, case: Params, step: Step, inputs: Tensors, refs: tuple[torch.Tensor, ...], backend: Backend
) -> dict[str, Any]:
    out_bytes = sum(t.numel() * t.element_size() for t in inputs.values())
    backend.poison(2 * out_bytes)  # outputs allocated next land in NaN-filled memory
    outs = step(inputs)
    # A random operator (dropout) has no one right output: its study builds the float64
    # reference from the variant's own outputs (its mask), and raises where they are not a
    # valid draw (the harness records the error as the check's failure).
    given = getattr(study, "reference_for", None)
    if given is not None:
        refs = given(case, inputs, outs)
    return compare(outs, refs, study.tolerance(case))


def measure_case(study: Study, case: Params, index: int, backend: Backend, opts: Options) -> list[dict[str, Any]]:
    """Check and time every variant of one case; returns one entry per L2 mode."""
    gen = torch.Generator(device=backend.device).manual_seed(opts.seed * 100_003 + index)
    variants = study.variants(case)
    base = {v.name: VariantRecord(label=v.label, meta=_safe_meta(v, case)) for v in variants}
    steps: dict[str, Step] = {}

    check_inputs = study.inputs(case, backend.device, gen)
    refs = study.reference(case, check_inputs)
    for v in variants:
        rec = base[v.name]
        if v.name in opts.skip:
            rec.error = f"not run: {opts.skip_reason or 'skipped by the command line'}"
            continue
        try:
            step = v.build(case)
            rec.check = _check(study, case, step, check_inputs, refs, backend)
            if rec.check["passed"]:
                steps[v.name] = step
            else:
                worst = max(number_value(r) for r in rec.check["rel_l2"])
                rec.error = (
                    f"check failed: relative L2 error {worst:.3g} "
                    f"(tolerance {rec.check['tolerance']:.0e}, finite={rec.check['finite']})"
                )
        except Refused as exc:
            rec.error = f"refused: {exc}"
        except Exception as exc:
            rec.error = describe_error(exc)
    del check_inputs, refs
    backend.cleanup()

    traffic_bytes, flops = study.traffic(case)
    entries = []
    for l2 in opts.l2_modes:
        recs = {
            name: VariantRecord(label=r.label, meta=r.meta, error=r.error, check=r.check) for name, r in base.items()
        }
        sets = backend.sets_for(l2, traffic_bytes)
        timed = [study.inputs(case, backend.device, gen) for _ in range(sets)]  # fresh draws, not the checked ones
        own = {v.name: [study.inputs(case, backend.device, gen) for _ in range(sets)]
               for v in variants if v.own_inputs and v.name in steps}  # fmt: skip
        backend.before_case()
        timers: dict[str, tuple[Timer, Timer]] = {}
        fns: dict[str, Callable[[int], object]] = {}
        for name, step in steps.items():
            try:
                sets_of = own.get(name, timed)
                fns[name] = fn = lambda i, step=step, timed=sets_of: step(timed[i])
                timers[name] = backend.make_timer(fn, sets, opts.target_ms, name=name)
            except Exception as exc:
                recs[name].error = f"timing failed: {describe_error(exc)}"
        _share_calls(timers, fns, backend, sets, opts.target_ms, recs)
        for name, (device_timer, eager_timer) in timers.items():
            rec = recs[name]
            rec.timer, rec.calls_per_sample = device_timer.timer, device_timer.calls
            rec.eager_calls_per_sample = eager_timer.calls if opts.eager else None
        rng = random.Random(f"{opts.seed}:{index}:{l2}")
        for _ in range(opts.rounds):
            order = list(timers)
            rng.shuffle(order)
            for name in order:
                device_timer, eager_timer = timers[name]
                recs[name].samples_us.append(device_timer.sample_us())
                if opts.eager:
                    recs[name].eager_us.append(eager_timer.sample_us())
            backend.after_round()
        for device_timer, eager_timer in timers.values():
            device_timer.release()
            eager_timer.release()
        del timers, timed
        entries.append(
            {
                "id": f"{study.case_id(case)}/{l2}",
                "case": {**case, "l2": l2},
                "bytes": traffic_bytes,
                "flops": flops,
                "rotation": {"sets": sets, "bytes": sets * traffic_bytes},
                "variants": {name: rec.as_json() for name, rec in recs.items()},
            }
        )
        backend.cleanup()
    return entries


def _share_calls(
    timers: dict[str, tuple[Timer, Timer]], fns: dict[str, Callable[[int], object]], backend: Backend, sets: int,
    target_ms: float, recs: dict[str, VariantRecord],
) -> None:  # fmt: skip
    """Give every variant whose calls per sample are within ``SHARED_CALLS_SPAN`` of the case's
    most the same calls (its timer rebuilt).  Each variant's calls come from its own estimate
    of one call, rounded to whole rotations; two variants of one kernel at a rounding edge
    took 4 and 8 calls, and the one with 4 read 1.5-2% slower in every such run
    (data/runs/matmul, fp16 4096³, 2026-12-01 to 12-03).  A variant far slower than the
    fastest keeps its own (its samples would grow past the span)."""
    most = max((t.calls for t, _ in timers.values()), default=0)
    for name, (device_timer, eager_timer) in list(timers.items()):
        if device_timer.calls >= most or device_timer.calls * SHARED_CALLS_SPAN < most:
            continue
        device_timer.release()
        eager_timer.release()
        try:
            timers[name] = backend.make_timer(fns[name], sets, target_ms, name=name, calls=most)
        except Exception as exc:
            del timers[name]
            recs[name].error = f"timing failed: {describe_error(exc)}"


def failed_case(study: Study, case: Params, exc: Exception, opts: Options) -> list[dict[str, Any]]:
    """The entries of a case that raised outside any variant: every variant keeps the error."""
    error = f"case failed: {describe_error(exc)}"
    traffic_bytes, flops = study.traffic(case)
    labels = {v.name: v.label for v in study.variants(case)}
    return [
        {
            "id": f"{study.case_id(case)}/{l2}",
            "case": {**case, "l2": l2},
            "bytes": traffic_bytes,
            "flops": flops,
            "variants": {n: VariantRecord(label=label, meta={}, error=error).as_json() for n, label in labels.items()},
        }
        for l2 in opts.l2_modes
    ]


def _safe_meta(v: Any, case: Params) -> dict[str, Any]:
    try:
        return dict(v.meta(case))
    except Exception as exc:
        return {"meta_error": describe_error(exc)}


def select_cases(study: Study, opts: Options) -> list[Params]:
    """The study's cases, or those ``opts.only`` names: alternatives split on ``|``, each a
    text the case id holds, or (``^`` first) one it starts with."""
    cases = study.cases(opts.quick)
    if not opts.only:
        return cases

    def wanted(case_id: str) -> bool:
        for alt in opts.only.split("|"):
            if alt.startswith("^"):  # a prefix: "^fwd/" is softmax's grid cells, not RMSNorm's
                if case_id.startswith(alt[1:]):
                    return True
            elif alt and alt in case_id:
                return True
        return False

    return [c for c in cases if wanted(study.case_id(c))]


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


class Progress:
    """One line per finished case on stderr: what ran, how long, what is left."""

    def __init__(self, total: int, stream: Any) -> None:
        self.total, self.stream, self.t0 = total, stream, time.monotonic()

    def case_done(self, done: int, entries: list[dict[str, Any]], memory: str = "") -> None:
        elapsed = time.monotonic() - self.t0
        eta = elapsed / done * (self.total - done)
        parts = []
        for e in entries:
            med = {n: _median(v["samples_us"]) for n, v in e["variants"].items() if v["samples_us"]}
            refused = [n for n, v in e["variants"].items() if v["error"]]
            line = " ".join(f"{n}={t:.1f}" for n, t in sorted(med.items(), key=lambda kv: kv[1]))
            parts.append(f"  {e['id']:<34} µs: {line}" + (f"  [errors: {', '.join(refused)}]" if refused else ""))
        # memory: what the device holds after the case (a case that leaks shows as growth)
        print(f"[{done}/{self.total}] {elapsed:6.0f}s elapsed, ~{eta:4.0f}s left{memory}", file=self.stream)
        print("\n".join(parts), file=self.stream, flush=True)


def run_study(study: Study, backend: Backend, writer: Any, opts: Options, stream: Any) -> None:
    """Measure every selected case; the writer saves each before the next one starts.
    A study with its own ``run`` (the dispatch study) measures itself."""
    if hasattr(study, "run"):
        study.run(backend, writer, opts, stream)
        return
    cases = select_cases(study, opts)
    if hasattr(study, "prepare"):
        study.prepare(cases, backend.device, stream)
    progress = Progress(len(cases), stream)
    try:
        for i, case in enumerate(cases):
            try:
                entries = measure_case(study, case, i, backend, opts)
            except Exception as exc:  # one failing case must not lose the sweep
                entries = failed_case(study, case, exc, opts)
            for entry in entries:
                writer.add_case(entry)
            gc.collect()
            backend.cleanup()
            progress.case_done(i + 1, entries, backend.memory_note())
    except BaseException as exc:
        writer.finish("interrupted", note=describe_error(exc))
        raise
    writer.finish("complete")
