"""Device-side timers, the L2 modes, and the eager timer.

Device time is measured on the device, never with a host clock around asynchronous work:

* ``warm``: the variant's call is captured ``calls`` times into one CUDA graph over the same
  buffers; one sample is one replay between two CUDA events, divided by ``calls``.  Graph
  replay removes the host launch gaps that would otherwise dominate kernels of a few µs.
* ``cold``: the graph's calls rotate through ``sets`` input sets that together exceed the
  L2 several times, so every call finds its inputs in DRAM, and one sample is again one
  replay divided by its calls: no flush and no launch inside the timed interval (a per-
  sample flush followed by a one-call replay carried a floor of several µs per sample).
  Where the sets cannot exceed the L2 within the cap on sets (problems of a few hundred KB)
  the run file says so (``rotation_bytes`` against ``l2_bytes``).
* In both modes a short device sleep precedes the start event, so the host has queued the
  replay before the clock starts and the GPU never waits on it inside the interval.
* When a variant cannot be captured (some library paths can't), the same calls run eagerly
  between events; each sample records which timer produced it.

The **eager** timer measures what a user's Python loop gets: ``calls`` ordinary calls (no
graph) between two CUDA events, host dispatch included, divided by ``calls``.  The device is
idle when the start event is recorded, so a call whose host work outlasts its kernels shows
its host time, and one whose kernels outlast the host shows their device time.
"""

from __future__ import annotations

import contextlib
import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

GRAPH = "cuda-graph"
EVENTS = "cuda-events"
EAGER = "eager-events"
HIDE_LAUNCH_CYCLES = 50_000  # ~25 µs of device sleep: the host queues the replay meanwhile
MAX_SETS = 512  # input sets a cold graph rotates through, at most
# Variants of one case whose calls per sample are within this factor of the case's most take
# that many (bench.harness._share_calls says why).
SHARED_CALLS_SPAN = 4
COLD_FACTOR = 4  # the sets together hold at least this many L2s where the cap allows


def rotation_sets(case_bytes: int, l2_bytes: int) -> int:
    """Input sets for a cold measurement: enough that their total exceeds ``COLD_FACTOR``
    L2s (a call's inputs were last touched that many L2s of traffic ago), at least 2."""
    need = math.ceil(COLD_FACTOR * l2_bytes / max(case_bytes, 1)) + 1
    return max(2, min(MAX_SETS, need))


def _warm_up_eagerly(fn: Callable[[], object], times: int = 3) -> None:
    # Capture needs the allocator, autotuners and lazy compilers already settled; doing the
    # first calls on a side stream is what torch.cuda.graphs asks for (autograd included).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(times):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


def event_time_ms(fn: Callable[[], object], repeat: int = 1) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeat


def mean_event_us(fn: Callable[[], object], repeat: int = 20) -> float:
    """A probe's number (notes/): one call first (it compiles), then the mean µs of
    ``repeat`` calls between two CUDA events, host and device together."""
    fn()
    torch.cuda.synchronize()
    return event_time_ms(fn, repeat) * 1000


def interleaved_us(fns: dict[str, Callable[[], object]], calls: int, rounds: int) -> dict[str, list[float]]:
    """A probe's samples (notes/): every function once (it compiles), then ``rounds`` rounds
    in which each function takes one sample, the mean µs of ``calls`` calls between two CUDA
    events; interleaved, so that clock drift under load hits every function alike."""
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(event_time_ms(fn, calls) * 1000)
    return times


def graphed(fn: Callable[[], object], calls: int) -> Callable[[], None]:
    """A probe's replay (notes/): ``fn`` called once eagerly (it compiles, and loads what it
    launches), then ``calls`` calls of it captured in one CUDA graph; returns the graph's
    ``replay`` (time it with :func:`interleaved_us`, a sample being ``calls`` calls)."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph.replay


def loop_us(fn: Callable[[], object], calls: int) -> float:
    """A probe's number (notes/): µs a call of ``calls`` calls in a Python loop between two
    synchronizations, read by the host clock (host and device together)."""
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls * 1e6


def rotated_loops_us(
    fns: dict[str, Callable[[], object]], calls: int, rounds: int, warmup: int
) -> dict[str, tuple[float, float]]:  # fmt: skip
    """A probe's numbers (notes/): {label: (best, median)} of :func:`loop_us` over ``rounds``
    rounds, every function once a round and the order rotated each round (no loop always runs
    first), after ``warmup`` calls of each."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    seen: dict[str, list[float]] = {label: [] for label in fns}
    labels = list(fns)
    for r in range(rounds):
        for label in labels[r % len(labels) :] + labels[: r % len(labels)]:
            seen[label].append(loop_us(fns[label], calls))
    return {label: (round(min(xs), 2), round(sorted(xs)[len(xs) // 2], 2)) for label, xs in seen.items()}


def calls_for(estimate_ms: float, target_ms: float, most: int = 1000) -> int:
    """How many calls one sample holds, so that it lasts about ``target_ms``."""
    return max(1, min(most, round(target_ms / max(estimate_ms, 1e-4))))


@dataclass
class Timer:
    """One device-time sample per :meth:`sample_us` call for one variant in one L2 mode."""

    fn_for_set: Callable[[int], object]
    calls: int
    sets: int
    timer: str
    graph: torch.cuda.CUDAGraph | None = None

    def sample_us(self) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(HIDE_LAUNCH_CYCLES)
        start.record()
        if self.graph is not None:
            self.graph.replay()
        else:
            for i in range(self.calls):
                self.fn_for_set(i % self.sets)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / self.calls

    def release(self) -> None:
        self.graph = None


@dataclass
class EagerTimer:
    """What a Python loop of ordinary calls costs per call: host dispatch included, no graph."""

    fn_for_set: Callable[[int], object]
    calls: int
    sets: int
    timer: str = EAGER

    def sample_us(self) -> float:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(self.calls):
            self.fn_for_set(i % self.sets)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / self.calls

    def release(self) -> None:
        pass


def _capture(fn_for_set: Callable[[int], object], calls: int, sets: int, pool: Any = None) -> torch.cuda.CUDAGraph:
    graph = torch.cuda.CUDAGraph()
    ended = False
    try:
        with torch.cuda.graph(graph, pool=pool):
            for i in range(calls):
                fn_for_set(i % sets)
        ended = True
    finally:
        if not ended:
            _release_failed_capture(graph)
    graph.replay()
    torch.cuda.synchronize()
    return graph


def _release_failed_capture(graph: torch.cuda.CUDAGraph) -> None:
    """Give back what a capture that failed can give back.  ``CUDAGraph.reset()`` clears the
    graph's state so that its destructor does not release the pool a second time (releasing
    the pool directly, as 77963e9 did, made the destructor's second release abort the
    process).  It does not give the pool back: PyTorch up to 2.13 releases a graph's pool only
    if its capture ended (pytorch/pytorch#190348, fixed after 2.13), so a failed capture's pool
    stays reserved for the rest of the process.  Hence :func:`capturable` first, and a failed
    capture never in a pool other graphs share."""
    with contextlib.suppress(Exception):  # nothing to give back (the capture never began)
        graph.reset()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def capturable(fn: Callable[[], object]) -> bool:
    """Whether ``fn`` (already warm) makes no call that synchronizes with the host, which a
    CUDA-graph capture refuses: one call under ``torch.cuda.set_sync_debug_mode("error")``.
    A capture that fails keeps its memory pool for the rest of the process (see
    :func:`_release_failed_capture`): with one pool per case, Liger-Kernel's and QuACK's
    cross-entropy, which are timed with events, kept every case's pool (137 GiB reserved after
    14 cases in the sweep at b2a50f2, and every later case ran out of memory)."""
    before = torch.cuda.get_sync_debug_mode()
    try:
        torch.cuda.set_sync_debug_mode("error")
        fn()
    except RuntimeError:
        return False
    finally:
        torch.cuda.set_sync_debug_mode(before)
    torch.cuda.synchronize()
    return True


def make_timer(
    fn_for_set: Callable[[int], object], sets: int, target_ms: float, eager_most: int = 200, pool: Any = None,
    capture: bool = True, calls: int | None = None,
) -> tuple[Timer, EagerTimer]:  # fmt: skip
    """Warm the variant up, estimate one call's device time, and build its two timers.
    ``calls``: the calls a sample holds, given (a multiple of ``sets``), instead of estimated.

    ``fn_for_set(i)`` runs the variant on input set ``i`` of ``sets`` (1 for warm L2).  The
    graph holds a whole number of rotations, at least ``target_ms`` long; the eager timer
    makes the same number of calls, at most ``eager_most``.  ``pool``: a CUDA-graph memory
    pool (``torch.cuda.graph_pool_handle()``) shared with other graphs that are only ever
    replayed one at a time on the same stream; ``None``, a private pool per graph.  A variant
    that synchronizes with the host (:func:`capturable`) is timed with CUDA events without a
    capture; the first capture of a variant (one call) takes a private pool of its own, so
    that a capture that fails anyway leaks one call's temporaries, not the shared pool."""
    for i in range(min(sets, 2)):
        _warm_up_eagerly(lambda i=i: fn_for_set(i))
    try:
        if not capture or not capturable(lambda: fn_for_set(0)):
            raise _NotCapturable
        if calls is None:
            # One call's device time, from a one-call graph: an eager estimate would count the
            # host's dispatch (hundreds of µs for an autograd step) and give far too few calls.
            one = Timer(fn_for_set, 1, 1, GRAPH, graph=_capture(fn_for_set, 1, 1, None))
            estimate = sorted(one.sample_us() for _ in range(5))[2] / 1000.0
            one.release()
            calls = max(sets, math.ceil(calls_for(estimate, target_ms) / sets) * sets)
        timer = Timer(fn_for_set, calls, sets, GRAPH, graph=_capture(fn_for_set, calls, sets, pool))
    except Exception:
        torch.cuda.synchronize()
        if calls is None:
            estimate = event_time_ms(lambda: fn_for_set(0), repeat=3)
            calls = max(sets, math.ceil(calls_for(estimate, target_ms) / sets) * sets)
        timer = Timer(fn_for_set, calls, sets, EVENTS)
    return timer, EagerTimer(fn_for_set, max(1, min(calls, eager_most)), sets)


class _NotCapturable(Exception):
    """The variant synchronizes with the host: timed with events, never captured."""


def replay_median_us(fn_for_set: Callable[[int], object], sets: int, samples: int, target_ms: float = 0.5) -> float:
    """A probe's number (notes/): the median of ``samples`` CUDA-graph replay samples of
    ``fn_for_set`` rotating over ``sets`` input sets (cold L2 when they exceed it), µs a call."""
    timer, _ = make_timer(fn_for_set, sets, target_ms=target_ms)
    try:
        return statistics.median(timer.sample_us() for _ in range(samples))
    finally:
        timer.release()


class Warmup:
    """A compute burst before a case, unless the GPU was busy moments ago.

    An idle GPU drops its clocks; the first kernels after a pause run slow until they climb
    back.  ``burst_ms`` of matrix products restores them; ``idle_s`` is how long a pause may
    last before another burst is needed.
    """

    def __init__(self, device: torch.device, burst_ms: float = 200.0, idle_s: float = 0.25) -> None:
        self.burst_ms, self.idle_s = burst_ms, idle_s
        self._a = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
        self._last_busy = 0.0
        self.bursts = 0

    def touch(self) -> None:
        self._last_busy = time.monotonic()

    def maybe_burst(self) -> bool:
        if time.monotonic() - self._last_busy < self.idle_s:
            return False
        deadline = time.monotonic() + self.burst_ms / 1000.0
        while time.monotonic() < deadline:
            for _ in range(8):
                torch.mm(self._a, self._a)
            torch.cuda.synchronize()
        self.bursts += 1
        self.touch()
        return True

    def describe(self) -> dict[str, float]:
        return {"burst_ms": self.burst_ms, "idle_s": self.idle_s}
