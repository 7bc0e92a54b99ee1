"""Probe (2026-12-05, twenty-second session): where split-K's eager gap comes from.

Why: in the GEMM sweep's eager timer (bench.timing.EagerTimer: a Python loop of calls between
two CUDA events) split-K ran 30-50 µs a call at 4096x4096-sized decode weights where the
autotuned kernel ran 19-30 (runs matmul-20261205T021419Z-342e58f, -023152Z-466decf), a gap of
10-17 µs.  The earlier host probe (notes/probe_split_k_host.py, 1x256x8192) found split-K's
host cost only 1 µs over the autotuned kernel's, and its pieces (the workspace's
allocation 2.9 µs, each launch 5.3-5.5) cannot add up to the sweep's gap.  So: is the eager
loop host-bound at these shapes, and if not, what does the device do between the launches?

For each shape (bf16; 1x256x8192 as the earlier probe, 16 and 64 x 4096x4096):

- ``loop``: bench.timing.loop_us (host and device together, µs a call);
- ``enqueue``: the host time to issue 100 calls, before any synchronization (µs a call; the
  launch queue holds them all);
- ``events``: as the sweep's EagerTimer (CUDA events around the loop);
- pieces: the workspace's allocation, each launch from the prepared tuple, the two launches
  into a workspace allocated once, and one-launch split-K (notes/probe_split_one_launch.py's
  kernel) through the cached launcher (kernels._launch.FastKernel) with its workspace and
  counters allocated once: what a one-launch split-K would cost an eager call;
- a torch.profiler trace of 40 eager split-K calls: each kernel's device time, the gap from
  the partial kernel's end to the reduce kernel's start, and the period from one call's
  first kernel to the next call's.

    python3 notes/probe_split_eager_gap.py > $OUT/probe_split_eager_gap.log
"""

from __future__ import annotations

import importlib
import itertools
import json
import statistics
import sys
import time
from collections.abc import Callable

import torch

sys.path.insert(0, ".")
sys.path.insert(0, "notes")

from bench.timing import event_time_ms, loop_us
from kernels._launch import FastKernel
from kernels.plans import cdiv

km = importlib.import_module("kernels.matmul")  # the package exports a function of this name
one = importlib.import_module("probe_split_one_launch")

SHAPES = [(1, 256, 8192), (16, 4096, 4096), (64, 4096, 4096)]
CALLS = 100
ROUNDS = 7
_ONE = FastKernel(one.split_one_launch_kernel)


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def best_median(fn: Callable[[], float]) -> list[float]:
    xs = [fn() for _ in range(ROUNDS)]
    return [round(min(xs), 2), round(statistics.median(xs), 2)]


def enqueue_us(fn: Callable[[], object]) -> float:
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(CALLS):
        fn()
    host = (time.perf_counter() - t) / CALLS * 1e6
    torch.cuda.synchronize()
    return host


def events_us(fn: Callable[[], object]) -> float:
    torch.cuda.synchronize()  # an idle device when the start event is recorded, as EagerTimer
    return event_time_ms(fn, CALLS) * 1000.0


def timings(fn: Callable[[], object]) -> dict[str, list[float]]:
    """[best, median] µs a call over ``ROUNDS`` rounds, by each of the three clocks."""
    return {
        "loop": best_median(lambda: loop_us(fn, CALLS)),
        "enqueue": best_median(lambda: enqueue_us(fn)),
        "events": best_median(lambda: events_us(fn)),
    }


def one_launch_fn(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> Callable[[], object]:
    """One-launch split-K through the cached launcher, workspace and counters allocated once."""
    (m, k), n = a.shape, b.shape[1]
    cfg = km.split_config(m, a.dtype)
    splits, k_per_split = km.split_count(m, n, k, cfg, km.sm_count(a.device))
    ws = torch.empty((splits, m, n), device=a.device, dtype=torch.float32)
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    count = one._counters(a.device, tiles)
    a_lay, s_am, s_ak, a_vec = km._layout(a)
    b_lay, s_bk, s_bn, b_vec = km._layout(b)
    vec = 16 // out.element_size()
    consts = (a_lay, b_lay, a_vec, b_vec, 1, vec if n % vec == 0 else 1, vec if k % vec == 0 else 1,
              k % cfg.block_k == 0, km._precision_name(a.dtype, None), km._INNER, 1, km._EPILOGUE_CODE[None], False,
              cfg.block_m, cfg.block_n, cfg.block_k, cfg.group_m)  # fmt: skip
    args = (a, b, ws, count, out, out, out, out, m, n, k, k_per_split, splits, s_am, s_ak, s_bk, s_bn, out.stride(0),
            0, 0, 1)  # fmt: skip
    key = ("probe-one-launch", a.device.index, a.dtype, m, n, k)
    index = a.device.index or 0

    def run() -> None:
        _ONE.launch(key, index, (tiles, splits, 1), args, consts, cfg.num_warps, cfg.num_stages)

    return run


def trace(fn: Callable[[], object]) -> dict[str, object]:
    """Kernel times and gaps of 40 eager calls (torch.profiler's CUDA activity, µs)."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(40):
            fn()
        torch.cuda.synchronize()
    kernels = sorted(
        (e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and "kernel" in e.name.lower()),
        key=lambda e: e.time_range.start,
    )
    part = [e for e in kernels if "reduce" not in e.name]
    red = [e for e in kernels if "reduce" in e.name]
    gaps = [r.time_range.start - p.time_range.end for p, r in zip(part, red, strict=False)]
    periods = [y.time_range.start - x.time_range.start for x, y in itertools.pairwise(part)]

    def med(xs: list[float]) -> float | None:
        return round(statistics.median(xs), 2) if xs else None

    return {
        "names": sorted({e.name[:40] for e in kernels}),
        "partial_us": med([e.time_range.elapsed_us() for e in part]),
        "reduce_us": med([e.time_range.elapsed_us() for e in red]),
        "gap_us": med(gaps),
        "period_us": med(periods),
    }


def candidates(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> tuple[dict[str, Callable[[], object]], int]:
    """The loops timed at one shape, and split-K's split count there."""
    dev, index = a.device, a.device.index or 0
    prepared = km._prepare(a, b, out, None, None, None, "split_k", None, None, None, index)
    _, keys, grids, _, consts, warps, stages, tails, *_ = prepared
    ws = torch.empty(tails[2], device=dev, dtype=torch.float32)
    ep = (out, out, out, out)

    def partial() -> None:
        km._SPLIT.launch(keys[0], index, grids[0], (a, b, ws, *tails[0]), consts[0], warps, stages)

    def reduce() -> None:
        km._SPLIT_REDUCE.launch(keys[1], index, grids[1], (ws, *ep, *tails[1]), consts[1], 4, 1)

    fns: dict[str, Callable[[], object]] = {
        "torch.mm": lambda: torch.mm(a, b),
        "matmul autotuned": lambda: km.matmul(a, b, variant="autotuned"),
        "matmul split_k": lambda: km.matmul(a, b, variant="split_k"),
        "_split_launch": lambda: km._split_launch(a, b, ep, index, prepared),
        "workspace alloc": lambda: torch.empty(tails[2], device=dev, dtype=torch.float32),
        "partial launch": partial,
        "reduce launch": reduce,
        "two launches, workspace once": lambda: (partial(), reduce()),
        "one launch, cached": one_launch_fn(a, b, out),
    }
    return fns, tails[2][0]


def main() -> None:
    dev = torch.device("cuda")
    emit(gpu=torch.cuda.get_device_name(), commit=sys.argv[1:] or None, sync_debug=torch.cuda.get_sync_debug_mode())
    g = torch.Generator(device=dev).manual_seed(0)
    for m, n, k in SHAPES:
        shape = f"{m}x{n}x{k}"
        a = torch.randn(m, k, device=dev, generator=g).to(torch.bfloat16)
        b = (torch.randn(k, n, device=dev, generator=g) * k**-0.5).to(torch.bfloat16)
        out = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
        fns, splits = candidates(a, b, out)
        fns["one launch, cached"]()
        torch.cuda.synchronize()
        emit(shape=shape, one_launch_bitwise_two_launch=torch.equal(out, km.matmul(a, b, variant="split_k")))
        for label, fn in fns.items():
            for _ in range(20):
                fn()
            emit(shape=shape, what=label, splits=splits, **timings(fn))
        for label in ("matmul split_k", "matmul autotuned", "one launch, cached"):
            emit(shape=shape, trace=label, **trace(fns[label]))
    # the sweep's setting while it times (bench.timing checks a capture under "error")
    torch.cuda.set_sync_debug_mode("warn")
    a = torch.randn(16, 4096, device=dev, generator=g).to(torch.bfloat16)
    b = (torch.randn(4096, 4096, device=dev, generator=g) * 0.02).to(torch.bfloat16)
    for label in ("split_k", "autotuned"):

        def fn(label: str = label) -> object:
            return km.matmul(a, b, variant=label)

        emit(shape="16x4096x4096", sync_debug="warn", what=f"matmul {label}", **timings(fn))
    torch.cuda.set_sync_debug_mode(0)


if __name__ == "__main__":
    main()
