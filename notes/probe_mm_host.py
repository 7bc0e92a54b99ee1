"""Probe (2026-12-03, eleventh session): the host's cost of an eager ``matmul`` call, per
variant, against ``torch.mm`` in the same process (issue 9: eager host cost ≤ 20 µs a call),
and where it goes (cProfile).  Shapes small enough that the device never sets the pace: the
loop's time per call is the host's.

    python3 notes/probe_mm_host.py > $OUT/probe_mm_host.log
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import sys
import time

import torch

sys.path.insert(0, ".")

from kernels.matmul import matmul

CALLS = 3000


def per_call_us(fn) -> float:  # type: ignore[no-untyped-def]
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / CALLS * 1e6)
    return best


def main() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    cases = {
        "64x256x256": (64, 256, 256, (None, "fixed", "autotuned", "persistent", "warp_specialized")),
        "127x255x65": (127, 255, 65, (None, "fixed", "autotuned", "persistent")),
        "16x4096x4096": (16, 4096, 4096, (None, "split_k", "autotuned")),
    }
    for label, (m, n, k, variants) in cases.items():
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=gen)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=gen)
        row = {"case": label, "torch.mm": round(per_call_us(lambda a=a, b=b: torch.mm(a, b)), 2)}
        for v in variants:
            row[str(v)] = round(per_call_us(lambda a=a, b=b, v=v: matmul(a, b, variant=v)), 2)
        row["addmm"] = round(per_call_us(lambda a=a, b=b, bias=bias: torch.addmm(bias, a, b)), 2)
        row["bias (default)"] = round(
            per_call_us(lambda a=a, b=b, bias=bias: matmul(a, b, epilogue="bias", bias=bias)), 2
        )
        wa, wb = a.clone().requires_grad_(), b.clone().requires_grad_()
        with torch.no_grad():
            row["no_grad default"] = round(per_call_us(lambda a=a, b=b: matmul(a, b)), 2)
        row["requires_grad default (forward)"] = round(per_call_us(lambda wa=wa, wb=wb: matmul(wa, wb)), 2)
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
