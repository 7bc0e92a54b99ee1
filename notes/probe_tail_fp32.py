"""Probe (2026-12-04, eighteenth session): the split tail in float32 (TF32 and IEEE).

The split tail's constants were set on bf16 products (notes/probe_stream_k.py,
probe_tail_bound.py); float32 runs the persistent kernel with other tiles (TF32 256x128x32,
IEEE 128x128x32), and TF32's default is the persistent kernel, so the split tail applies to
it unasked.  Timed here (warm, median µs, probe_stream_k's rounds): whole tiles and the split
tail, and cuBLAS (TF32 allowed for TF32, not for IEEE), with the split tail's error against
float64 (relative L2).

    python3 notes/probe_tail_fp32.py > $OUT/probe_tail_fp32.log
"""

from __future__ import annotations

import random
import sys

import torch

sys.path.insert(0, "notes")
sys.path.insert(0, ".")

import probe_stream_k as base  # notes/ is not a package: by path

SHAPES = [(3072, 1536, 8192), (2560, 2048, 8192), (6144, 768, 16384), (4096, 2304, 4096)]


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(2)
    rng = random.Random(2)
    for m, n, k in SHAPES:
        a = torch.randn((m, k), generator=g, device="cuda")
        b = torch.randn((k, n), generator=g, device="cuda")
        ref = (a.double() @ b.double()).float()
        for precision in ("tf32", "ieee"):
            replays, errors = {}, {}
            for name, how in (("whole tiles", ""), ("split tail", "tail")):
                base.plan(how)
                fn = lambda p=precision, a=a, b=b: base.km.matmul(a, b, variant="persistent", precision=p)
                out = fn()
                errors[name] = float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref))
                replays[name] = base.graphed(fn)
            base.plan("")
            torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            replays["cublas"] = base.graphed(lambda a=a, b=b: torch.mm(a, b))
            us = base.median_us(replays, rng)
            torch.backends.cuda.matmul.allow_tf32 = False
            base.emit(shape=f"{m}x{n}x{k}", precision=precision, rel_error=errors,
                      us=us)  # fmt: skip


if __name__ == "__main__":
    main()
