"""The measuring harness on CPU: checks, refusals, errors, incremental and atomic writes.

The host backend times with the host clock (labelled so, and refused by the site); what is
tested here is everything around the timer."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch

from bench import harness
from bench.backends import HostBackend
from bench.runfile import RunWriter, make_run_id, utc_now
from bench.studies import Refused, Variant
from bench.studies.softmax import STUDY as SOFTMAX
from contract.labels import LABELS_SINCE
from contract.schema import SCHEMA_VERSION, RunFileError, validate_run


class ToyStudy:
    """Doubling a vector, with one honest variant and three that go wrong."""

    name = "toy"
    directions = ("fwd",)

    def __init__(self, n_cases: int = 3, interrupt_at: int | None = None) -> None:
        self.n_cases, self.interrupt_at = n_cases, interrupt_at

    def cases(self, quick: bool) -> list[dict]:
        return [{"op": "double", "direction": "fwd", "dtype": "fp32", "n": 10 + i} for i in range(self.n_cases)]

    def case_id(self, case: dict) -> str:
        return f"fwd/fp32/{case['n']}"

    def variants(self, case: dict) -> list[Variant]:
        def good(c):
            if self.interrupt_at is not None and c["n"] == 10 + self.interrupt_at:
                raise KeyboardInterrupt
            return lambda t: (t["x"] * 2,)

        def refuses(c):
            raise Refused("toy library refuses every case")

        def wrong(c):
            return lambda t: (t["x"] * 2 + 1,)

        def crashes(c):
            def step(t):
                raise RuntimeError("boom: out of resources\nsecond line")

            return step

        return [
            Variant("good", "x * 2, as written", good, lambda c: {"plan": "x2"}),
            Variant("refuses", "a library that refuses", refuses),
            Variant("wrong", "x * 2 + 1 (wrong)", wrong),
            Variant("crashes", "a kernel that raises", crashes),
        ]

    def inputs(self, case, device, gen):
        return {"x": torch.randn(case["n"], generator=gen, device=device)}

    def reference(self, case, inputs):
        return (inputs["x"].double() * 2,)

    def traffic(self, case):
        return 8 * case["n"], case["n"]

    def tolerance(self, case):
        return 1e-6


def header(study: str = "toy") -> dict:
    started = utc_now()
    return {
        "run_id": make_run_id(study, started, "0123456789abcdef", quick=True),
        "study": study,
        "started_at": started,
        "command": "python -m bench run toy",
        "code": {"commit": "0123456789abcdef", "dirty": False},
        "env": {
            "gpu": {"name": "host", "sm_count": 1, "l2_bytes": 0, "compute_capability": "none"},
            "driver": None,
            "cuda": None,
            "torch": torch.__version__,
            "triton": None,
            "python": "3",
            "before": {"sm_clock_mhz": None, "utilization_pct": None},
            "peaks": {"copy_GBps": 1.0, "mm_bf16_TFLOPs": 1.0},
        },
        "method": {**HostBackend().method(), "rounds": 3},
    }


def run(tmp_path: Path, study, opts: harness.Options) -> Path:
    writer = RunWriter(tmp_path, header(study.name), allow_host_timer=True)
    harness.run_study(study, HostBackend(), writer, opts, io.StringIO())
    return writer.path


def test_every_variant_keeps_an_entry_with_its_reason(tmp_path) -> None:
    path = run(tmp_path, ToyStudy(), harness.Options(rounds=3))
    doc = json.loads(path.read_text())
    validate_run(doc, str(path), allow_host_timer=True)
    assert doc["status"] == "complete"
    assert [c["id"] for c in doc["cases"]] == [f"fwd/fp32/{n}/{m}" for n in (10, 11, 12) for m in ("warm", "cold")]
    v = doc["cases"][0]["variants"]
    assert len(v["good"]["samples_us"]) == 3 and v["good"]["error"] is None and v["good"]["check"]["passed"]
    assert v["good"]["meta"] == {"plan": "x2"}
    assert v["refuses"]["error"] == "refused: toy library refuses every case" and v["refuses"]["samples_us"] == []
    assert v["wrong"]["error"].startswith("check failed: relative L2 error")
    assert v["wrong"]["check"]["passed"] is False and v["wrong"]["samples_us"] == []
    assert v["crashes"]["error"].startswith("RuntimeError: boom: out of resources (at step)")
    # Every variant stores its label, the refused and the failed too: the site reads it from there.
    assert doc["schema_version"] == SCHEMA_VERSION >= LABELS_SINCE
    labels = {name: v[name]["label"] for name in v}
    assert labels == {variant.name: variant.label for variant in ToyStudy().variants({})}


def test_interrupted_sweep_keeps_finished_cases(tmp_path) -> None:
    writer = RunWriter(tmp_path, header(), allow_host_timer=True)
    with pytest.raises(KeyboardInterrupt):
        harness.run_study(ToyStudy(interrupt_at=2), HostBackend(), writer, harness.Options(rounds=2), io.StringIO())
    doc = json.loads(writer.path.read_text())
    assert doc["status"] == "interrupted"
    assert len(doc["cases"]) == 4  # cases 10 and 11, warm and cold
    assert not list(tmp_path.glob("*.tmp"))


def test_writer_refuses_to_overwrite_and_to_write_bad_data(tmp_path) -> None:
    h = header()
    RunWriter(tmp_path, h, allow_host_timer=True)
    with pytest.raises(FileExistsError):
        RunWriter(tmp_path, h, allow_host_timer=True)
    bad = header()
    bad["run_id"] += "-2"
    writer = RunWriter(tmp_path, bad, allow_host_timer=True)
    entry = {
        "id": "a",
        "case": {"op": "x", "direction": "fwd", "dtype": "fp32", "l2": "warm"},
        "bytes": 1,
        "flops": 1,
        "variants": {
            "v": {"samples_us": [float("nan")], "error": None, "check": None, "timer": "host-clock", "meta": {}}
        },
    }
    with pytest.raises(RunFileError, match=r"cases\[0\]\.variants\.v\.samples_us\[0\]"):
        writer.add_case(entry)
    assert json.loads(writer.path.read_text())["cases"] == []  # the file on disk is untouched


def test_progress_reports_each_case() -> None:
    out = io.StringIO()
    study = ToyStudy(n_cases=1)
    entries = harness.measure_case(study, study.cases(False)[0], 0, HostBackend(), harness.Options(rounds=2))
    harness.Progress(1, out).case_done(1, entries)
    text = out.getvalue()
    assert "[1/1]" in text and "fwd/fp32/10/warm" in text and "good=" in text and "errors: refuses" in text


def test_softmax_study_declares_peers_and_checks_them() -> None:
    case = {"op": "softmax", "direction": "fwd+bwd", "dtype": "bf16", "rows": 3, "cols": 40}
    names = [v.name for v in SOFTMAX.variants(case)]
    assert names == ["triton", "torch", "eager", "compile", "liger", "quack"]
    wide = {**case, "rows": 4, "cols": 200000}
    assert [v.name for v in SOFTMAX.variants(wide)][:4] == [
        "triton",
        "triton-looped",
        "triton-split",
        "triton-split-1launch",
    ]
    # Run the cheap variants end to end on CPU; compile and Liger are GPU business.
    study = SOFTMAX

    class Cheap:
        def __getattr__(self, name):
            return getattr(study, name)

        def variants(self, c):
            return [v for v in study.variants(c) if v.name in ("triton", "torch", "eager")]

    entries = harness.measure_case(Cheap(), case, 0, HostBackend(), harness.Options(rounds=2, l2_modes=("warm",)))
    (entry,) = entries
    assert entry["bytes"] == 5 * 3 * 40 * 2
    for name in ("triton", "torch", "eager"):
        v = entry["variants"][name]
        assert v["error"] is None, v["error"]
        assert v["check"]["passed"] and len(v["check"]["rel_l2"]) == 2  # y and dx
    assert entry["variants"]["triton"]["meta"]["plan"] == "block"


def test_counted_traffic_is_the_minimum() -> None:
    fwd = {"op": "softmax", "direction": "fwd", "dtype": "fp16", "rows": 8, "cols": 16}
    assert SOFTMAX.traffic(fwd)[0] == 2 * 8 * 16 * 2
    assert SOFTMAX.traffic({**fwd, "direction": "fwd+bwd", "dtype": "fp32"})[0] == 5 * 8 * 16 * 4


def test_a_nan_output_is_written_as_strict_json(tmp_path) -> None:
    """A variant whose output is NaN fails its check with an infinite error, which the run
    file stores as the string "inf": strict JSON that any parser reads."""

    class NanStudy(ToyStudy):
        def variants(self, case: dict) -> list[Variant]:
            return [Variant("nan", "nan", lambda c: lambda t: (t["x"] * float("nan"),))]

    path = run(tmp_path, NanStudy(n_cases=1), harness.Options(rounds=2))

    def refuse(token: str) -> None:
        raise ValueError(f"{token} is not strict JSON")

    doc = json.loads(path.read_text(), parse_constant=refuse)
    v = doc["cases"][0]["variants"]["nan"]
    assert v["check"]["rel_l2"] == ["inf"] and v["check"]["finite"] is False
    assert v["error"].startswith("check failed: relative L2 error inf")


def test_skipped_variants_are_never_built_and_say_why(tmp_path) -> None:
    """--skip: a variant left out (one that faulted the GPU in a probe: the fault is sticky)
    keeps its entry, with no samples and the reason, and is never built or called."""
    built: list[str] = []

    class Spy(ToyStudy):
        def variants(self, case: dict) -> list[Variant]:
            out = super().variants(case)
            return [Variant(v.name, v.label, lambda c, v=v: built.append(v.name) or v.build(c), v.meta) for v in out]

    opts = harness.Options(rounds=2, skip=("crashes", "good"), skip_reason="faulted in a probe")
    doc = json.loads(run(tmp_path, Spy(n_cases=1), opts).read_text())
    v = doc["cases"][0]["variants"]
    for name in ("crashes", "good"):
        assert v[name]["error"] == "not run: faulted in a probe" and v[name]["samples_us"] == []
    assert "good" not in built and "crashes" not in built and "wrong" in built
    described = opts.describe()  # what the CLI writes into the run file's method
    assert described["skipped_variants"] == ["crashes", "good"] and described["skip_reason"] == "faulted in a probe"


def test_graphs_of_one_case_share_one_memory_pool(monkeypatch) -> None:
    # A pool per graph holds every variant's temporaries at once: one pool per case and L2 mode.
    from bench import backends, timing

    handles = iter(range(100, 200))
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: next(handles))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    pools: list[object] = []
    fake = timing.Timer(lambda i: None, 1, 1, timing.GRAPH)
    monkeypatch.setattr(
        timing,
        "make_timer",
        lambda fn, sets, ms, pool=None, capture=True, calls=None: pools.append(pool) or (fake, None),
    )
    backend = object.__new__(backends.CudaBackend)
    backend._pool, backend.uncapturable = None, set()
    for _case in range(2):
        for _variant in range(3):
            backend.make_timer(lambda i: None, 1, 1.0)
        backend.cleanup()
    assert pools == [100, 100, 100, 101, 101, 101]


def _fake_cuda_timing(monkeypatch, *, sync_free: bool, capture_fails: bool) -> list[object]:
    """timing.make_timer without a GPU: the warm-up, the sync screen, the capture and the
    event timer replaced; returns the pools the captures were asked for."""
    from bench import timing

    captures: list[object] = []

    def capture(fn, calls, sets, pool=None):
        captures.append(pool)
        if capture_fails:
            raise RuntimeError("operation not permitted when stream is capturing")
        return None  # a Timer with graph=None times its calls eagerly: enough for sample_us here

    monkeypatch.setattr(timing, "_warm_up_eagerly", lambda fn, times=3: None)
    monkeypatch.setattr(timing, "capturable", lambda fn: sync_free)
    monkeypatch.setattr(timing, "_capture", capture)
    monkeypatch.setattr(timing, "event_time_ms", lambda fn, repeat=1: 0.01)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(timing.Timer, "sample_us", lambda self: 10.0)
    return captures


@pytest.mark.parametrize("sync_free, capture_fails", [(True, False), (False, False), (True, True)])
def test_failed_or_refused_captures_never_touch_the_shared_pool(monkeypatch, sync_free, capture_fails) -> None:
    # PyTorch keeps the pool of a capture that failed (pytorch/pytorch#190348): with one pool
    # per case, the cross-entropy peers that sync with the host (timed with events) kept every
    # case's pool, 137 GiB after 14 cases at b2a50f2.  A variant that syncs is never captured;
    # the first capture of the others (one call) takes a private pool (None), so only the
    # second capture, after one succeeded, goes into the shared pool.
    from bench import timing

    captures = _fake_cuda_timing(monkeypatch, sync_free=sync_free, capture_fails=capture_fails)
    timer, _ = timing.make_timer(lambda i: None, 1, 1.0, pool="shared")
    if not sync_free:
        assert captures == [] and timer.timer == timing.EVENTS
    elif capture_fails:
        assert captures == [None] and timer.timer == timing.EVENTS
    else:
        assert captures == [None, "shared"] and timer.timer == timing.GRAPH


def test_a_variant_whose_capture_failed_is_not_captured_in_later_cases(monkeypatch) -> None:
    from bench import backends, timing

    asked: list[bool] = []

    def make_timer(fn, sets, ms, pool=None, capture=True, calls=None):
        asked.append(capture)
        kind = timing.EVENTS if not capture or fn(0) == "syncs" else timing.GRAPH
        return timing.Timer(fn, 1, 1, kind), None

    monkeypatch.setattr(timing, "make_timer", make_timer)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: 7)
    backend = object.__new__(backends.CudaBackend)
    backend._pool, backend.uncapturable = None, set()
    for _case in range(2):
        backend.make_timer(lambda i: "syncs", 1, 1.0, name="liger")
        backend.make_timer(lambda i: None, 1, 1.0, name="triton")
    assert asked == [True, True, False, True]
    assert backend.uncapturable == {"liger"}


def test_a_variant_that_writes_over_its_inputs_is_timed_on_inputs_of_its_own() -> None:
    # Liger's in-place kernels write over their inputs: with own_inputs the others never see it.
    seen: list[float] = []

    class InPlace(ToyStudy):
        def variants(self, case):
            def reads(c):
                def step(t):
                    seen.append(float(t["x"].abs().max()))
                    return (t["x"] * 2,)

                return step

            def writes(c):
                def step(t):
                    out = t["x"] * 2  # right, then writes over its input (checked last, as Liger is)
                    t["x"].add_(1e6)
                    return (out,)

                return step

            writer = Variant("writes", "x * 2, then x += 1e6", writes, own_inputs=True)
            return [Variant("reads", "x * 2", reads), writer]

    study = InPlace(n_cases=1)
    entries = harness.measure_case(study, study.cases(False)[0], 0, HostBackend(),
                                   harness.Options(rounds=3, l2_modes=("warm",)))  # fmt: skip
    assert all(entries[0]["variants"][v]["samples_us"] for v in ("reads", "writes")), "both timed"
    assert len(seen) > 3 and max(seen) < 100, "the reading variant saw what the writing one wrote"


def test_variants_within_the_span_share_the_most_calls() -> None:
    """Calls per sample come from each variant's estimate; variants within SHARED_CALLS_SPAN of
    the case's most are rebuilt with that many (a planted removal of _share_calls leaves 4
    and 8); one far slower keeps its own; a rebuild that fails is recorded, not raised."""
    from bench import harness
    from bench.harness import VariantRecord
    from bench.timing import SHARED_CALLS_SPAN

    class FakeTimer:
        def __init__(self, calls: int) -> None:
            self.calls, self.timer, self.released = calls, "cuda-graph", False

        def release(self) -> None:
            self.released = True

    built: list[tuple[str, int | None]] = []

    class FakeBackend:
        def make_timer(self, fn, sets, ms, name=None, calls=None):  # type: ignore[no-untyped-def]
            built.append((name, calls))
            if name == "broken":
                raise RuntimeError("capture failed")
            return FakeTimer(calls), FakeTimer(min(calls, 200))

    first = {"ours": FakeTimer(4), "peer": FakeTimer(8), "slow": FakeTimer(1), "broken": FakeTimer(4)}
    timers = {name: (t, FakeTimer(t.calls)) for name, t in first.items()}
    recs = {name: VariantRecord(label=name, meta={}) for name in timers}
    harness._share_calls(timers, dict.fromkeys(timers, lambda i: None), FakeBackend(), 4, 1.0, recs)
    assert SHARED_CALLS_SPAN < 8 <= 4 * SHARED_CALLS_SPAN  # "slow" (1 call) is out of the span, "ours" (4) inside
    assert timers["ours"][0].calls == 8 and first["ours"].released
    assert timers["peer"][0] is first["peer"] and timers["slow"][0] is first["slow"]
    assert "broken" not in timers and "capture failed" in recs["broken"].error
    assert built == [("ours", 8), ("broken", 8)]


def test_only_takes_alternatives_split_on_a_bar() -> None:
    from bench.harness import Options, select_cases
    from bench.studies.matmul import STUDY

    ids = [STUDY.case_id(c) for c in select_cases(STUDY, Options(only="/tf32/|^fwd+bwd/fp16/|"))]
    assert ids == ["fwd/tf32/1024x1024x1024", "fwd/tf32/4096x4096x4096", "fwd+bwd/fp16/4096x4096x4096"]
    assert select_cases(STUDY, Options(only="|")) == []  # empty alternatives match nothing
