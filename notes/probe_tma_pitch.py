"""Probe (2026-12-04, seventeenth session): the row pitch of the copies made for TMA.

Run matmul-20261204T135548Z-98bc581 (the held-out shapes under the rule that sends an odd N
to the warp-specialized kernel) had that kernel 4-19% behind the persistent one on every
odd-N product with a row-major b, which is copied for TMA into rows padded to 16 bytes,
while notes/2026-12-04c-probe-ws-odd-n-ea106a4.log had it ahead with x @ w.T, whose rows are
1536 bytes.  An earlier probe (notes/2026-12-04-probe-odd-rows-7983412.log) had the same
kernel slow at K = 4104 (a's rows 8208 bytes, read in place) and level at K = 4160 (8320 =
65 x 128).  The guess: a TMA box row that straddles 128-byte lines costs more requests.  Here
the copies' pitch (kernels.matmul.TMA_ROW_ALIGN) is 16 or 128 bytes, on shapes outside the
held-out sets: 8192x50257x768 (b row-major and w.T), 4096x50257x4096, 16384x11001x1536,
4096x4096x4098 (a copied).  Each configuration's output against cuBLAS (relative L2 error),
then device time: CUDA graphs of CALLS calls (warm), every round in a fresh shuffled order,
median µs.

    python3 notes/probe_tma_pitch.py > $OUT/probe_tma_pitch.log
"""

from __future__ import annotations

import importlib
import json
import random
import statistics
import sys
from collections.abc import Callable

import torch

sys.path.insert(0, ".")

from bench import timing

km = importlib.import_module("kernels.matmul")  # the package exports a function of this name

ROUNDS = 11
CALLS = 10
SHAPES = [(8192, 50257, 768, "b"), (8192, 50257, 768, "w.T"), (4096, 50257, 4096, "b"), (16384, 11001, 1536, "b"),
          (4096, 4096, 4098, "b")]  # fmt: skip


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def graphed(fn: Callable[[], object]) -> Callable[[], None]:
    return timing.graphed(fn, CALLS)  # CALLS calls in one graph


def rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm((x - ref).float()) / torch.linalg.vector_norm(ref.float()))


def main() -> None:
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    rng = random.Random(0)
    bf = torch.bfloat16
    for m, n, k, layout in SHAPES:
        a = torch.randn((m, k), generator=g, device=dev).to(bf)
        w = (torch.randn((n, k), generator=g, device=dev) * k**-0.5).to(bf)
        b = w.T if layout == "w.T" else w.T.contiguous()
        ref = torch.mm(a, b)
        replays, errors = {}, {}
        for pitch in (16, 128):
            km.TMA_ROW_ALIGN = pitch
            km._PREPARED.clear()  # a prepared launch holds the copy's strides
            for variant in ("persistent", "warp_specialized"):
                name = f"{variant} pitch {pitch}"
                fn = lambda a=a, b=b, v=variant: km.matmul(a, b, variant=v)
                errors[name] = rel(fn(), ref)
                replays[name] = graphed(fn)
        replays["cublas"] = graphed(lambda a=a, b=b: torch.mm(a, b))
        times: dict[str, list[float]] = {k: [] for k in replays}
        for _ in range(ROUNDS):
            order = list(replays)
            rng.shuffle(order)
            for name in order:
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                replays[name]()
                e.record()
                e.synchronize()
                times[name].append(s.elapsed_time(e) * 1000 / CALLS)
        us = {k: round(statistics.median(v), 1) for k, v in times.items()}
        emit(shape=f"{m}x{n}x{k}", layout=layout, rel_error=errors, us=us)


if __name__ == "__main__":
    main()
