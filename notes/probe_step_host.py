"""Probe (2026-12-04, twentieth session): where the host time of an eager training step
(``c = matmul(a, b)``, then ``torch.autograd.grad(c, (a, b), dc)``) goes, against the same
step through ``torch.mm``, piece by piece, in one process on one host.  Exploration, not a
study.

Why: run matmul-20261204T191440Z-a7194ad timed the 127x255x65 bf16 step's eager call at
329.5 µs against torch's 214.0, with device times 18.3 and 17.4: about 115 µs of host time
that the forward alone (26.1 against 22.1) does not explain.

    python3 notes/probe_step_host.py > $OUT/probe_step_host.log
    PROBE_SHAPES=2048x2048x2048,127x255x65 python3 notes/probe_step_host.py  # other shapes

The shapes became a setting for a third log: at 2048³, notes/probe_step_calls.py (6e2a360)
found the step's eager call at 264 µs against torch's 198 over 64 calls, where the device
needs 78 and 74.
"""

from __future__ import annotations

import cProfile
import importlib
import io
import json
import os
import pstats
import sys

import torch

sys.path.insert(0, ".")

from bench.timing import rotated_loops_us

km = importlib.import_module("kernels.matmul")

CALLS = 400
ROUNDS = 5  # every function once per round, the order rotated: no loop always runs first


def interleaved(fns: dict) -> dict:  # type: ignore[type-arg]
    """{label: (best, median)} µs a call over ROUNDS rounds, each round every function in turn
    (bench.timing.rotated_loops_us; until 2026-12-04 these loops were written out here)."""
    return rotated_loops_us(fns, CALLS, ROUNDS, warmup=30)


class _TorchMM(torch.autograd.Function):
    """A Python autograd.Function around torch.mm: the cost of the Python Function itself."""

    @staticmethod
    def forward(ctx, a, b):  # type: ignore[no-untyped-def,override]
        ctx.save_for_backward(a, b)
        return torch.mm(a, b)

    @staticmethod
    def backward(ctx, dc):  # type: ignore[no-untyped-def,override]
        a, b = ctx.saved_tensors
        return torch.mm(dc, b.T), torch.mm(a.T, dc)


def step(fn, a, b, dc):  # type: ignore[no-untyped-def]
    c = fn(a, b)
    return torch.autograd.grad(c, (a, b), dc)


def main() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}), flush=True)
    shapes = os.environ.get("PROBE_SHAPES", "127x255x65,512x512x512,1024x1024x1024")
    for shape in shapes.split(","):
        m, n, k = (int(d) for d in shape.split("x"))
        measure(m, n, k, gen)


def measure(m: int, n: int, k: int, gen: torch.Generator) -> None:
    needs = (True, True, False, False)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=gen).requires_grad_()
    dc = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=gen)
    a0, b0 = a.detach(), b.detach()
    fns = {
        "torch step": lambda: step(torch.mm, a, b, dc),
        "ours step": lambda: step(km.matmul, a, b, dc),
        "Python Function(torch.mm) step": lambda: step(_TorchMM.apply, a, b, dc),
        "torch fwd (requires_grad)": lambda: torch.mm(a, b),
        "ours fwd (requires_grad)": lambda: km.matmul(a, b),
        "torch 3 products, no grad": lambda: (torch.mm(a0, b0), torch.mm(dc, b0.T), torch.mm(a0.T, dc)),
        "ours 3 products, no grad": lambda: (km.matmul(a0, b0), km.matmul(dc, b0.T), km.matmul(a0.T, dc)),
        "ours _grads direct": lambda: km._grads(dc, a0, b0, None, needs, None, None, None, None, False),
        "ours _one_copy_of_dz": lambda: km._one_copy_of_dz(dc, a0, b0, None, None),
    }
    print(json.dumps({"case": f"{m}x{n}x{k}", "us (best, median of rounds)": interleaved(fns)}), flush=True)
    torch.autograd.set_multithreading_enabled(False)  # backward on this thread: one GIL, no handoff
    try:
        single = {
            "torch step, one thread": lambda: step(torch.mm, a, b, dc),
            "ours step, one thread": lambda: step(km.matmul, a, b, dc),
            "Python Function step, one thread": lambda: step(_TorchMM.apply, a, b, dc),
        }
        print(json.dumps({"case": f"{m}x{n}x{k}", "us (best, median of rounds)": interleaved(single)}), flush=True)
        if m in (127, 2048):
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(CALLS):
                step(km.matmul, a, b, dc)
            prof.disable()
            torch.cuda.synchronize()
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
            print(f"--- cProfile, {CALLS} steps, one thread\n{text.getvalue()}", flush=True)
    finally:
        torch.autograd.set_multithreading_enabled(True)


if __name__ == "__main__":
    main()
