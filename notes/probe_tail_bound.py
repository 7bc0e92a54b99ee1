"""Probe (2026-12-04, eighteenth session): where the split tail beats the warp-specialized kernel.

The dispatch sends a product between one and four waves to the persistent kernel when its
partial last wave splits along K at least ``TAIL_MIN_SPLITS`` (4) ways.  Held-out set eight
put the bound's other side at 1.07x regret (4352x1280x12288, three ways: the split tail
forced ran 210.8 µs cold where the dispatch's warp-specialized kernel ran 225.9, run
matmul-20261204T170246Z-47c5ca6).  This times, on shapes outside every held-out set and
outside notes/probe_stream_k.py's, products whose partial wave splits two, three and four or
more ways, with probe_stream_k's plans and rounds (warm, median µs), to set the bound on
shapes the held-out sets did not choose.

    python3 notes/probe_tail_bound.py > $OUT/probe_tail_bound.log
"""

from __future__ import annotations

import random
import sys

import torch

sys.path.insert(0, "notes")
sys.path.insert(0, ".")

import probe_stream_k as base  # notes/ is not a package: by path

# (M, N, K): three ways (tail 34-44 tiles), two ways (45-66), sixteen, and a shallow K
SHAPES = [(5376, 1024, 11264), (5632, 1024, 8192), (2432, 2304, 8192), (2816, 2048, 4096), (2816, 2048, 2048),
          (4224, 1536, 8192), (3456, 1536, 12288), (2176, 4096, 8192), (4480, 1024, 16384)]  # fmt: skip


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(1)
    rng = random.Random(1)
    sms = base.km.sm_count(torch.device("cuda"))
    for m, n, k in SHAPES:
        try:
            base.one(m, n, k, None, g, rng, sms)
        except Exception as e:  # one failing shape must not lose the others
            base.emit(shape=f"{m}x{n}x{k}", error=repr(e)[:2000])


if __name__ == "__main__":
    main()
