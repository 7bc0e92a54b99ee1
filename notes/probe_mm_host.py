"""Probe (2026-12-03, eleventh session; rounds interleaved in the thirteenth): the host's
cost of an eager ``matmul`` call, per variant, against ``torch.mm`` in the same process
(issue 9: eager host cost ≤ 20 µs a call), and where it goes (cProfile).  Shapes small
enough that the device never sets the pace: the loop's time per call is the host's.

    python3 notes/probe_mm_host.py > $OUT/probe_mm_host.log
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import sys

import torch

sys.path.insert(0, ".")

from bench.timing import rotated_loops_us
from kernels.matmul import matmul

CALLS = 2000
ROUNDS = 5  # every function once per round, the order rotated: no loop always runs first


def interleaved(fns: dict) -> dict:  # type: ignore[type-arg]
    """{label: (best, median)} µs a call over ROUNDS rounds, each round every function in turn
    (bench.timing.rotated_loops_us; until 2026-12-04 these loops were written out here)."""
    return rotated_loops_us(fns, CALLS, ROUNDS, warmup=50)


def main() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    cases = {
        "64x256x256": (64, 256, 256, (None, "fixed", "autotuned", "persistent", "warp_specialized")),
        "127x255x65": (127, 255, 65, (None, "fixed", "autotuned", "persistent")),
        "512x512x512": (512, 512, 512, (None, "autotuned", "persistent")),
        "16x4096x4096": (16, 4096, 4096, (None, "split_k", "autotuned")),
    }
    for label, (m, n, k, variants) in cases.items():
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=gen)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=gen)
        wa, wb = a.clone().requires_grad_(), b.clone().requires_grad_()
        fns = {"torch.mm": lambda a=a, b=b: torch.mm(a, b)}
        for v in variants:
            fns[str(v)] = lambda a=a, b=b, v=v: matmul(a, b, variant=v)
        fns["addmm"] = lambda a=a, b=b, bias=bias: torch.addmm(bias, a, b)
        fns["bias (default)"] = lambda a=a, b=b, bias=bias: matmul(a, b, epilogue="bias", bias=bias)
        fns["torch.mm requires_grad"] = lambda wa=wa, wb=wb: torch.mm(wa, wb)
        fns["requires_grad default (forward)"] = lambda wa=wa, wb=wb: matmul(wa, wb)
        row = {"case": label, "us (best, median of rounds)": interleaved(fns)}
        print(json.dumps(row), flush=True)
    a = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16, generator=gen)
    for v in (None, "persistent"):
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(CALLS):
            matmul(a, b, variant=v)
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
        print(f"--- cProfile, {CALLS} calls, variant={v}\n{text.getvalue()}", flush=True)


if __name__ == "__main__":
    main()
