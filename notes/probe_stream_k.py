"""Probe (2026-12-04, eighteenth session): stream-K in the persistent kernel.

Between one and four waves of the persistent kernel's 128x256 tiles, a tile count that is not
a multiple of the SMs leaves the last wave part empty (144 tiles on 132 SMs: two tile-times
for 1.09 tiles of work).  The warp-specialized kernel's 128x128 tiles fill that wave better,
not fully: cuBLAS ran 1.4-1.8x ahead at such shapes (run matmul-20261204T142003Z-b3b9b87).
Timed here, on shapes outside the held-out sets, in shuffled rounds (CUDA graphs of CALLS
calls, warm, median µs): the persistent kernel with whole tiles, the same with its partial
last wave split along K (``kernels.matmul.tail_split``, at most 16 and at most 4 ranges a
tile, whatever the waves), the warp-specialized kernel and cuBLAS.  Each row also gives the
errors against the warp-specialized kernel (relative L2), whether repeated calls of the
split plans give the same bits, and the tile counts.

The first two runs (notes/2026-12-04d-probe-stream-k-0eeb4de.log and -819905a.log) timed
the kernel at those commits: Stream-K's contiguous ranges over tiles and K, for the last
full wave and the partial one ("stream-K") and for the partial wave alone ("stream-K
remainder"); the third (-a7b27e9) the same with the fixup's loads four at a time.

    python3 notes/probe_stream_k.py > $OUT/probe_stream_k.log
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
# (M, N, K, epilogue): deep-K products of one to four waves, the LM head's dA, shallow K, whole waves
SHAPES = [(6144, 768, 16384, None), (3072, 1536, 8192, None), (1536, 4096, 8192, None), (8192, 768, 50257, None),
          (4096, 2304, 4096, None), (3072, 3072, 3072, None), (2048, 4096, 2048, None), (2560, 2048, 8192, None),
          (4096, 4096, 1024, None), (2176, 2048, 512, None), (3072, 1536, 8192, "bias_gelu"),
          (3072, 1536, 8192, "residual"), (2048, 3072, 4096, None), (3584, 2048, 4096, None)]  # fmt: skip
_PLANNER = km.tail_split


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def graphed(fn: Callable[[], object]) -> Callable[[], None]:
    return timing.graphed(fn, CALLS)  # CALLS calls in one graph


def median_us(replays: dict[str, Callable[[], None]], rng: random.Random) -> dict[str, float]:
    """Median µs a call of each replay over ROUNDS rounds, each round in a shuffled order (a
    fixed order puts a clock or power drift on the same variant every round)."""
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
    return {x: round(statistics.median(v), 1) for x, v in times.items()}


def plan(how: str) -> None:
    # "": whole tiles; "tail" / "tail<=4": the partial wave split along K (at most 16 / 4
    # ranges), whatever its waves; "wave" / "remainder": the contiguous stream-K ranges of the
    # first two runs (kernel at 0eeb4de, not this one: kept to name what those runs timed).
    def split(tiles: int, k_tiles: int, sms: int) -> tuple[int, int]:
        tail = tiles % sms
        if not how or tiles < sms or not tail:
            return 0, 1
        splits = min(sms // tail, k_tiles, 4 if how == "tail<=4" else 16)
        splits = km.cdiv(k_tiles, km.cdiv(k_tiles, max(splits, 1)))
        return (tail, splits) if splits >= 2 else (0, 1)

    km.tail_split = split
    km._PREPARED.clear()


def draw(
    m: int, n: int, k: int, epilogue: str | None, g: torch.Generator, b_div: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, dict[str, object]]:  # fmt: skip
    """bf16 a [m, k], b [k, n] (over ``b_div``) and the epilogue's tensor as matmul's keyword
    (probe_tail_waves.py shares this)."""
    bf = torch.bfloat16
    a = torch.randn((m, k), generator=g, device="cuda").to(bf)
    b = (torch.randn((k, n), generator=g, device="cuda") / b_div).to(bf)
    kw: dict[str, object] = {}
    if epilogue == "bias_gelu":
        kw = {"bias": torch.randn((n,), generator=g, device="cuda").to(bf)}
    elif epilogue == "residual":
        kw = {"residual": torch.randn((m, n), generator=g, device="cuda").to(bf)}
    return a, b, kw


def one(m: int, n: int, k: int, epilogue: str | None, g: torch.Generator, rng: random.Random, sms: int) -> None:
    a, b, kw = draw(m, n, k, epilogue, g)
    ref = km.matmul(a, b, variant="warp_specialized", epilogue=epilogue, **kw).float()
    replays, errors, same = {}, {}, True
    plans = (
        ("whole tiles", "persistent", ""),
        ("split tail", "persistent", "tail"),
        ("split tail<=4", "persistent", "tail<=4"),
        ("ws", "warp_specialized", ""),
    )
    for name, variant, how in plans:
        plan(how)
        fn = lambda v=variant: km.matmul(a, b, variant=v, epilogue=epilogue, **kw)
        out = fn()
        errors[name] = float(torch.linalg.vector_norm(out.float() - ref) / torch.linalg.vector_norm(ref))
        if name.startswith("split"):
            same = same and all(torch.equal(out, fn()) for _ in range(3))
        replays[name] = graphed(fn)
    plan("")
    if epilogue is None:
        replays["cublas"] = graphed(lambda: torch.mm(a, b))
    us = median_us(replays, rng)
    tiles, k_tiles = km.cdiv(m, 128) * km.cdiv(n, 256), km.cdiv(k, 64)
    emit(shape=f"{m}x{n}x{k}", epilogue=epilogue, sms=sms, tiles=tiles, waves=round(tiles / sms, 2),
         k_tiles=k_tiles, ws_tiles=km.cdiv(m, 128) * km.cdiv(n, 128), planner=_PLANNER(tiles, k_tiles, sms),
         rel_error_vs_ws=errors, split_same_bits=same,
         us=us)  # fmt: skip


def run_shapes(shapes: list, one: Callable[..., None], seed: int, after: Callable[[], None] = lambda: None) -> None:  # type: ignore[type-arg]
    """``one(m, n, k, epilogue, generator, rng, sms)`` for each shape, seeded; a failing shape
    is a row with its error, not the end of the probe; ``after`` runs after each shape
    (probe_tail_waves.py shares this loop)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    rng = random.Random(seed)
    sms = km.sm_count(torch.device("cuda"))
    for m, n, k, epilogue in shapes:
        try:
            one(m, n, k, epilogue, g, rng, sms)
        except Exception as e:  # one failing shape must not lose the others
            emit(shape=f"{m}x{n}x{k}", epilogue=epilogue, error=repr(e)[:2000])
        finally:
            after()


def main() -> None:
    run_shapes(SHAPES, one, seed=0)


if __name__ == "__main__":
    main()
