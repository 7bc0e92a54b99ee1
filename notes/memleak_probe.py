"""Probe (GPU): which cross-entropy case leaves device memory behind.  Runs the study's cases
(LAB_ONLY selects, as --only does) through bench.harness.measure_case with 3 rounds, and after
each case prints what the allocator holds and every live CUDA tensor over 64 MiB with the
types of what refers to it.  python notes/memleak_probe.py [study]"""

from __future__ import annotations

import gc
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import harness
from bench.backends import CudaBackend
from bench.studies import load


def live_tensors() -> list[torch.Tensor]:
    out = []
    for obj in gc.get_objects():
        try:
            if isinstance(obj, torch.Tensor) and obj.is_cuda and obj.untyped_storage().nbytes() > 64 * 2**20:
                out.append(obj)
        except Exception:
            pass
    return out


def main() -> None:
    study = load(sys.argv[1] if len(sys.argv) > 1 else "cross_entropy")
    device = torch.device("cuda", 0)
    backend = CudaBackend(device)
    defaults = study.options(False) if hasattr(study, "options") else {}
    defaults.pop("rounds", None)
    opts = harness.Options(quick=False, rounds=3, only=os.environ.get("LAB_ONLY"), **defaults)
    cases = harness.select_cases(study, opts)
    if hasattr(study, "prepare"):
        study.prepare(cases, device, sys.stdout)
    for i, case in enumerate(cases):
        try:
            entries = harness.measure_case(study, case, i, backend, opts)
            errors = {n: v["error"][:80] for e in entries for n, v in e["variants"].items() if v["error"]}
        except Exception as exc:
            errors = {"case": repr(exc)[:200]}
        gc.collect()
        backend.cleanup()
        print(f"[{i}] {study.case_id(case)}{backend.memory_note()} errors={errors}", flush=True)
        for t in live_tensors():
            refs = [type(r).__name__ for r in gc.get_referrers(t)][:6]
            print(f"    live {tuple(t.shape)} {t.dtype} {t.untyped_storage().nbytes() / 2**20:.0f} MiB refs={refs}")


if __name__ == "__main__":
    main()
