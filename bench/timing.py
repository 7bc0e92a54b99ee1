"""Device-side timers and the L2 modes.

Every sample is measured on the device, never with a host clock around asynchronous work:

* ``warm``: the variant's call is captured ``calls`` times into one CUDA graph over the same
  buffers; one sample is one replay between two CUDA events, divided by ``calls``.  Graph
  replay removes the host launch gaps that would otherwise dominate kernels of a few µs.
* ``cold``: before every sample the L2 is flushed by *reading* a buffer of several times
  its size (read, not written, so no dirty lines are evicted into our measurement), then a
  one-call graph is replayed between events.  A short device sleep between the flush and
  the start event gives the host time to queue the replay, so the GPU never waits on it.
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


@dataclass
class Timer:
    """Takes one sample per call of :meth:`sample` for one variant in one L2 mode."""

    fn: Callable[[], object]
    calls: int
    timer: str
    graph: torch.cuda.CUDAGraph | None = None
    flush: Callable[[], None] | None = None

    def sample_us(self) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if self.flush is not None:
            self.flush()
            torch.cuda._sleep(50_000)  # ~25 µs of device time: the host queues the replay meanwhile
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


def calls_for(estimate_ms: float, target_ms: float, most: int = 500) -> int:
    """How many calls one warm sample replays, so that it lasts about ``target_ms``."""
    return max(1, min(most, round(target_ms / max(estimate_ms, 1e-4))))


def make_timer(fn: Callable[[], object], l2: str, target_ms: float, flush: Callable[[], None]) -> Timer:
    """Warm the variant up, estimate one call, then capture the graph the samples replay."""
    _warm_up_eagerly(fn)
    estimate = event_time_ms(fn, repeat=3)
    calls = calls_for(estimate, target_ms) if l2 == "warm" else 1
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        graph.replay()
        torch.cuda.synchronize()
        return Timer(fn, calls, GRAPH, graph=graph, flush=flush if l2 == "cold" else None)
    except Exception:
        torch.cuda.synchronize()
        return Timer(fn, calls, EVENTS, flush=flush if l2 == "cold" else None)


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
