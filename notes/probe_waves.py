"""Probe (2026-12-04, seventeenth session): wave quantization between one and four waves.

The dispatch sends a 16-bit product to the warp-specialized kernel (128x128 tiles, one at a
time per SM in ping-pong) from four waves of its tiles, else to the persistent kernel
(128x256 tiles) from one wave.  The LM head's dA = dZ.W (8192x768 over K = 50257) has 192
persistent tiles on 132 SMs: the second wave 45% full.  The warp-specialized kernel's 384
tiles would leave its SMs' last tile rounds 91% full.  Timed here, on shapes outside the
held-out sets, in shuffled rounds (CUDA graphs of CALLS calls, warm, median µs): the
persistent kernel, the warp-specialized kernel (ping-pong and cooperative 256x128), cuBLAS.
Each row also gives both kernels' tile counts.

    python3 notes/probe_waves.py > $OUT/probe_waves.log
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
# (M, N, K, how a and b lie): the LM head's two backward products, then deep-K products of 1-4 waves
SHAPES = [(8192, 768, 50257, "dA"), (50257, 768, 8192, "dW"), (6144, 768, 16384, "ab"),
          (4096, 1024, 32768, "ab"), (2048, 2048, 16384, "ab"), (1536, 4096, 8192, "ab"),
          (3072, 1536, 8192, "ab"), (4096, 2304, 4096, "ab")]  # fmt: skip
VARIANTS = {
    "persistent": ("persistent", None),
    "ws ping-pong": ("warp_specialized", None),
    "ws coop 256x128": ("warp_specialized", km.TileConfig(256, 128, 64, 8, 3, 8)),
}


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def graphed(fn: Callable[[], object]) -> Callable[[], None]:
    return timing.graphed(fn, CALLS)  # CALLS calls in one graph


def operands(m: int, n: int, k: int, how: str, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    dev, bf = "cuda", torch.bfloat16
    if how == "dA":  # dZ [M, V] (rows of 50257: copied for TMA) @ W [V, d]
        return torch.randn((m, k), generator=g, device=dev).to(bf), torch.randn((k, n), generator=g, device=dev).to(bf)
    if how == "dW":  # dZ.T [V, M] (its memory [M, V]) @ X [M, d]
        dz = torch.randn((k, m), generator=g, device=dev).to(bf)
        return dz.T, torch.randn((k, n), generator=g, device=dev).to(bf)
    return torch.randn((m, k), generator=g, device=dev).to(bf), torch.randn((k, n), generator=g, device=dev).to(bf)


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    rng = random.Random(0)
    sms = km.sm_count(torch.device("cuda"))
    for m, n, k, how in SHAPES:
        a, b = operands(m, n, k, how, g)
        ref = torch.mm(a, b)
        replays, errors = {}, {}
        for name, (variant, cfg) in VARIANTS.items():
            fn = lambda a=a, b=b, v=variant, c=cfg: km.matmul(a, b, variant=v, config=c)
            out = fn()
            errors[name] = float(torch.linalg.vector_norm((out - ref).float()) / torch.linalg.vector_norm(ref.float()))
            replays[name] = graphed(fn)
        replays["cublas"] = graphed(lambda a=a, b=b: torch.mm(a, b))
        times: dict[str, list[float]] = {x: [] for x in replays}
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
        tiles = {"persistent": km.cdiv(m, 128) * km.cdiv(n, 256), "ws": km.cdiv(m, 128) * km.cdiv(n, 128)}
        emit(shape=f"{m}x{n}x{k}", how=how, sms=sms, tiles=tiles, default=km.dispatch(a, b), rel_error=errors,
             us={x: round(statistics.median(v), 1) for x, v in times.items()})  # fmt: skip


if __name__ == "__main__":
    main()
