"""Where a study runs: the CUDA backend for real runs, and a host backend that lets the
CPU tests drive the whole harness through the Triton interpreter.

Host-clock samples are for testing the harness only; ``publish`` refuses to show them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from bench import timing


class CudaBackend:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.l2_bytes = int(torch.cuda.get_device_properties(device).L2_cache_size)
        self.flusher = timing.L2Flusher(self.l2_bytes, device)
        self.warmup = timing.Warmup(device)

    def method(self) -> dict[str, Any]:
        return {
            "timer": timing.GRAPH,
            "timer_fallback": timing.EVENTS,
            "l2": {
                "warm": "the same buffers every call; one sample = one CUDA-graph replay of N calls / N",
                "cold": f"L2 flushed before every sample by reading {self.flusher.bytes} bytes "
                f"({self.flusher.bytes / self.l2_bytes:.0f}x L2); one sample = one replay of a one-call graph",
            },
            "warmup": self.warmup.describe(),
        }

    def make_timer(self, fn: Callable[[], object], l2: str, target_ms: float) -> timing.Timer:
        return timing.make_timer(fn, l2, target_ms, self.flusher)

    def before_case(self) -> None:
        self.warmup.maybe_burst()

    def after_round(self) -> None:
        self.warmup.touch()

    def poison(self, nbytes: int) -> None:
        block = torch.full((max(nbytes, 4) // 4,), float("nan"), device=self.device)
        del block

    def cleanup(self) -> None:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


@dataclass
class HostTimer:
    fn: Callable[[], object]
    calls: int = 1
    timer: str = "host-clock"

    def sample_us(self) -> float:
        t0 = time.perf_counter()
        self.fn()
        return (time.perf_counter() - t0) * 1e6

    def release(self) -> None:
        pass


class HostBackend:
    """CPU tensors, host clock: exercises checks, errors, ordering and writing, not speed."""

    def __init__(self) -> None:
        self.device = torch.device("cpu")
        self.l2_bytes = 0

    def method(self) -> dict[str, Any]:
        return {"timer": "host-clock", "l2": {"warm": "host test run", "cold": "host test run"}, "warmup": {}}

    def make_timer(self, fn: Callable[[], object], l2: str, target_ms: float) -> HostTimer:
        fn()
        return HostTimer(fn)

    def before_case(self) -> None:
        pass

    def after_round(self) -> None:
        pass

    def poison(self, nbytes: int) -> None:
        pass

    def cleanup(self) -> None:
        pass
