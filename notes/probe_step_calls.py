"""Probe (2026-12-04, twentieth session): the eager training step at 4096³ per call, against
the number of calls between the two CUDA events.

Why: run matmul-20261204T210646Z-4293da2 timed the bf16 4096³ step's eager call at 663 µs
against a device time of 577 (graph replay), while cuBLAS's step read 595 against 562.  The
study's eager timer makes as many calls as the graph holds, at most 200: two here.  If the
gap is the host's latency to the first kernel, it shrinks as 1/calls; if something in our
step waits for the device (a hidden synchronization), it stays.  Also: each step once under
torch.cuda.set_sync_debug_mode("warn"), with the warnings it raises counted.

    python3 notes/probe_step_calls.py > $OUT/probe_step_calls.log
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
import warnings

import torch

sys.path.insert(0, ".")

from bench.timing import event_time_ms

km = importlib.import_module("kernels.matmul")

ROUNDS = 7
CALLS = (1, 2, 4, 16, 64)


def step(fn, a, b, dc):  # type: ignore[no-untyped-def]
    c = fn(a, b)
    return torch.autograd.grad(c, (a, b), dc)


def syncs(fn) -> list[str]:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    return [str(w.message)[:120] for w in seen]


def main() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    for size in (2048, 4096):
        a = torch.randn(size, size, device="cuda", generator=gen).to(torch.bfloat16).requires_grad_()
        b = (torch.randn(size, size, device="cuda", generator=gen) / size**0.5).to(torch.bfloat16).requires_grad_()
        dc = torch.randn(size, size, device="cuda", generator=gen).to(torch.bfloat16)
        fns = {
            "torch step": lambda a=a, b=b, dc=dc: step(torch.mm, a, b, dc),
            "ours step": lambda a=a, b=b, dc=dc: step(km.matmul, a, b, dc),
            "torch fwd": lambda a=a, b=b: torch.mm(a.detach(), b.detach()),
            "ours fwd": lambda a=a, b=b: km.matmul(a.detach(), b.detach()),
        }
        for fn in fns.values():
            for _ in range(3):
                fn()
        torch.cuda.synchronize()
        row: dict[str, object] = {"size": size}
        row["sync warnings"] = {name: syncs(fn) for name, fn in fns.items()}
        for calls in CALLS:
            times: dict[str, list[float]] = {name: [] for name in fns}
            for _ in range(ROUNDS):
                for name, fn in fns.items():
                    torch.cuda.synchronize()
                    times[name].append(event_time_ms(fn, calls) * 1000)
            row[f"{calls} calls, µs a call (median of {ROUNDS})"] = {
                name: round(statistics.median(v), 1) for name, v in times.items()
            }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
