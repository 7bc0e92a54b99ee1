"""Probe (2026-12-04, fifteenth session): split-K, as refitted at 0917ad6, against the autotuned
kernel and cuBLAS for decode products with a K under SPLIT_K_MIN_K (8192), where the dispatch
runs the autotuned kernel.  The rule's K threshold came from split-K's earlier tile (run
matmul-20261201T072628Z-ebbf780); at 64x4096x4096 the autotuned kernel takes 19 µs where
cuBLAS takes 9-12, so the question is whether the new split-K closes that, on the device
and in an eager call (two launches and a workspace where the autotuned kernel has one).

Tuned on weights (N, K) = (4096, 4096) (the study's), (5120, 5120), (2048, 6144), (8192, 2048),
(14336, 4096) (the study's; 112 tiles: over half a wave); M = 1, 16, 32, 64, 128.  Held out
(bench/studies/matmul.py HELD_OUT, chosen before this ran, not timed here): 40x3072x5120,
8x6144x3072, 120x1536x6144.

Device time: CUDA graphs of CALLS calls, warm (one weight: it stays in the 50 MB L2) and cold
(the calls cycle through copies of the weight totalling over 200 MB), interleaved rounds,
median.  Eager: a Python loop of EAGER calls between two synchronizations, per call, the
order rotated each round.  JSON lines.

    python3 notes/probe_split_shallow.py > $OUT/probe_split_shallow.log
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable

import torch

sys.path.insert(0, ".")

km = importlib.import_module("kernels.matmul")  # the package exports a function of this name

ROUNDS = 7
CALLS = 12
EAGER = 300
WEIGHTS = [(4096, 4096), (5120, 5120), (2048, 6144), (8192, 2048), (14336, 4096)]  # (N, K)
MS = [1, 16, 32, 64, 128]


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def graphed(fns: list[Callable[[], object]]) -> Callable[[], None]:
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(CALLS):
            fns[i % len(fns)]()
    return g.replay


def device_us(fns: dict[str, Callable[[], None]]) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for name, fn in fns.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times[name].append(s.elapsed_time(e) * 1000 / CALLS)
    return {k: statistics.median(v) for k, v in times.items()}


def eager_us(fns: dict[str, Callable[[], object]]) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    names = list(fns)
    for r in range(5):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn = fns[name]
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(EAGER):
                fn()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - t) * 1e6 / EAGER)
    return {k: statistics.median(v) for k, v in times.items()}


def one(n: int, k: int, m: int, dev: torch.device) -> None:
    g = torch.Generator(device=dev).manual_seed(0)
    copies = max(1, -(-200 * 2**20 // (n * k * 2)))
    bs = [torch.randn((k, n), generator=g, device=dev).to(torch.bfloat16) for _ in range(copies)]
    a = torch.randn((m, k), generator=g, device=dev).to(torch.bfloat16)
    want = torch.mm(a.double(), bs[0].double())
    for variant in ("autotuned", "split_k"):
        got = km.matmul(a, bs[0], variant=variant).double()
        err = ((got - want).norm() / want.norm()).item()
        if not err < 1e-2:
            emit(n=n, k=k, m=m, variant=variant, error=f"rel_l2 {err:.3g}")
    calls = {
        "cublas": lambda b: torch.mm(a, b),
        "autotuned": lambda b: km.matmul(a, b, variant="autotuned"),
        "split_k": lambda b: km.matmul(a, b, variant="split_k"),
    }
    fns = {}
    for name, call in calls.items():
        fns[f"{name}/warm"] = graphed([lambda call=call: call(bs[0])])
        fns[f"{name}/cold"] = graphed([lambda call=call, b=b: call(b) for b in bs])
    dev_t = device_us(fns)
    eag = eager_us({name: (lambda call=call: call(bs[0])) for name, call in calls.items()})
    splits = km.split_count(m, n, k, km.split_config(m, torch.bfloat16), km.sm_count(dev))[0]
    row = {key: round(v, 2) for key, v in dev_t.items()} | {f"{key}/eager": round(v, 2) for key, v in eag.items()}
    emit(n=n, k=k, m=m, dispatch=km.dispatch(a, bs[0]), splits=splits, **row)


def main() -> None:
    dev = torch.device("cuda")
    emit(device=torch.cuda.get_device_name(), rule=km.dispatch_rule())
    for n, k, m in [(n, k, m) for n, k in WEIGHTS for m in MS]:
        one(n, k, m, dev)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
