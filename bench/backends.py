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
        self.warmup = timing.Warmup(device)
        # One CUDA-graph memory pool for every graph of a case and L2 mode (see make_timer).
        self._pool: Any = None
        # Variants whose capture failed once: timed with events in every later case, never
        # captured again (each failed capture keeps its pool: timing._release_failed_capture).
        self.uncapturable: set[str] = set()

    def method(self) -> dict[str, Any]:
        return {
            "timer": timing.GRAPH,
            "timer_fallback": timing.EVENTS,
            "l2": {
                "warm": "the same buffers every call; one sample = one CUDA-graph replay of N calls / N",
                "cold": f"the graph's N calls rotate through input sets that together hold at least "
                f"{timing.COLD_FACTOR}x the L2 (at most {timing.MAX_SETS} sets; each case records its sets and "
                "bytes); one sample = one replay / N, with no flush or launch inside the interval",
            },
            "calls": f"each variant's calls per sample from its own estimate, for about the target time; then "
            f"every variant within {timing.SHARED_CALLS_SPAN}x of the case's most calls takes that many too (samples "
            "with fewer calls read up to 2% slower: a comparison must not depend on an estimate's rounding)",
            "eager": "eager_us: the same calls as ordinary Python calls (no graph) between two CUDA events, "
            "host dispatch included, divided by the calls (at most 200)",
            "warmup": self.warmup.describe(),
        }

    def sets_for(self, l2: str, case_bytes: int) -> int:
        return 1 if l2 == "warm" else timing.rotation_sets(case_bytes, self.l2_bytes)

    def make_timer(
        self, fn_for_set: Callable[[int], object], sets: int, target_ms: float, name: str | None = None,
        calls: int | None = None,
    ) -> tuple[timing.Timer, timing.EagerTimer]:  # fmt: skip
        # The graphs of one case share a memory pool: the harness replays them one at a time
        # on one stream, and every replay reads only its inputs (allocated before capture) and
        # what it wrote itself, so a graph's temporaries may sit where another's did (a pool
        # per graph holds every variant's temporaries at once).  What ran the cross-entropy
        # sweeps out of memory (bc8b644, b2a50f2: 137 GiB reserved after 14 cases) was not
        # that but the failed captures of the peers that sync with the host, whose pools
        # PyTorch never gives back: timing.make_timer screens them out first.
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        capture = name not in self.uncapturable
        timers = timing.make_timer(fn_for_set, sets, target_ms, pool=self._pool, capture=capture, calls=calls)
        if name is not None and timers[0].timer != timing.GRAPH:
            self.uncapturable.add(name)
        return timers

    def before_case(self) -> None:
        self.warmup.maybe_burst()

    def after_round(self) -> None:
        self.warmup.touch()

    def poison(self, nbytes: int) -> None:
        block = torch.full((max(nbytes, 4) // 4,), float("nan"), device=self.device)
        del block

    def cleanup(self) -> None:
        self._pool = None  # the next case's graphs start a new pool; this one goes with its graphs
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    def memory_note(self) -> str:
        gib = 2**30
        allocated, reserved = torch.cuda.memory_allocated(self.device), torch.cuda.memory_reserved(self.device)
        free, total = torch.cuda.mem_get_info(self.device)
        return (
            f"; device memory: {allocated / gib:.2f} GiB allocated, {reserved / gib:.2f} reserved, "
            f"{(total - free) / gib:.2f} in use"
        )


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

    def sets_for(self, l2: str, case_bytes: int) -> int:
        return 1 if l2 == "warm" else 2

    def make_timer(
        self, fn_for_set: Callable[[int], object], sets: int, target_ms: float, name: str | None = None,
        calls: int | None = None,
    ) -> tuple[HostTimer, HostTimer]:  # fmt: skip
        fn_for_set(0)
        return HostTimer(lambda: fn_for_set(0)), HostTimer(lambda: fn_for_set(sets - 1), timer="host-clock")

    def before_case(self) -> None:
        pass

    def after_round(self) -> None:
        pass

    def poison(self, nbytes: int) -> None:
        pass

    def cleanup(self) -> None:
        pass

    def memory_note(self) -> str:
        return ""
