"""Device-side timers and the L2 modes.

Every sample is measured on the device, never with a host clock around asynchronous work:

* ``warm``: the variant's call is captured ``calls`` times into one CUDA graph over the same
  buffers; one sample is one replay between two CUDA events, divided by ``calls``.  Graph
  replay removes the host launch gaps that would otherwise dominate kernels of a few µs.
* ``cold``: before every sample the L2 is flushed by *reading* a buffer of several times
  its size (read, not written, so no dirty lines are evicted into our measurement), then a
  one-call graph is replayed between events.
* In both modes a short device sleep precedes the start event, so the host has queued the
  replay before the clock starts and the GPU never waits on it inside the interval.
* When a variant cannot be captured (some library paths can't), the same loops run eagerly
  between events; each sample records which timer produced it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

GRAPH = "cuda-graph"
EVENTS = "cuda-events"


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


HIDE_LAUNCH_CYCLES = 50_000  # ~25 µs of device sleep: the host queues the replay meanwhile


@dataclass
class Timer:
    """Takes one sample per call of :meth:`sample` for one variant in one L2 mode.

    Before the start event the device sleeps briefly, so that the start event is not
    recorded while the GPU waits for the host to submit the graph: the interval holds the
    calls, not the host's launch latency.  In cold mode the L2 flush goes before the sleep.
    """

    fn: Callable[[], object]
    calls: int
    timer: str
    graph: torch.cuda.CUDAGraph | None = None
    flush: Callable[[], None] | None = None

    def sample_us(self) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if self.flush is not None:
            self.flush()
        torch.cuda._sleep(HIDE_LAUNCH_CYCLES)
        start.record()
        if self.graph is not None:
            self.graph.replay()
        else:
            for _ in range(self.calls):
                self.fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / self.calls

    def release(self) -> None:
        self.graph = None


def calls_for(estimate_ms: float, target_ms: float, most: int = 1000) -> int:
    """How many calls one warm sample replays, so that it lasts about ``target_ms``."""
    return max(1, min(most, round(target_ms / max(estimate_ms, 1e-4))))


def _capture(fn: Callable[[], object], calls: int) -> torch.cuda.CUDAGraph:
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def make_timer(fn: Callable[[], object], l2: str, target_ms: float, flush: Callable[[], None]) -> Timer:
    """Warm the variant up, measure one call's device time, then capture the graph the
    samples replay (``calls`` calls for warm samples, one for cold)."""
    _warm_up_eagerly(fn)
    cold_flush = flush if l2 == "cold" else None
    try:
        # One call's device time, from a one-call graph: an eager estimate would count the
        # host's dispatch (hundreds of µs for an autograd step) and give far too few calls.
        one = Timer(fn, 1, GRAPH, graph=_capture(fn, 1))
        estimate = sorted(one.sample_us() for _ in range(5))[2] / 1000.0
        if l2 == "cold":
            one.flush = cold_flush
            return one
        one.release()
        calls = calls_for(estimate, target_ms)
        return Timer(fn, calls, GRAPH, graph=_capture(fn, calls))
    except Exception:
        torch.cuda.synchronize()
        estimate = event_time_ms(fn, repeat=3)
        calls = calls_for(estimate, target_ms) if l2 == "warm" else 1
        return Timer(fn, calls, EVENTS, flush=cold_flush)


class L2Flusher:
    """Evicts the L2 by reading a buffer of ``factor`` times its size into a one-element sum."""

    def __init__(self, l2_bytes: int, device: torch.device, factor: int = 4) -> None:
        self.bytes = factor * l2_bytes
        self._buf = torch.ones(self.bytes // 4, dtype=torch.float32, device=device)
        self._out = torch.empty((), dtype=torch.float32, device=device)

    def __call__(self) -> None:
        torch.sum(self._buf, dim=0, out=self._out)


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
