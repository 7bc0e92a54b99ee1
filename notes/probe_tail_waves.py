"""Probe (2026-12-04, nineteenth session): the split tail beyond four waves.

The dispatch sends a 16-bit product with four or more waves of the warp-specialized kernel's
128x128 tiles (two a program: two or more waves of program pairs) to that kernel.  Its tiles
leave the last wave as empty as the persistent kernel's do: at 3072³ (288 persistent tiles,
2.18 waves; 576 of the warp-specialized kernel's, 2.18 waves of pairs) it ran 93.5 µs cold
against cuBLAS's 78.7, and at 3000x7168x3000 (5.09 waves) 231.8 against 183.3 (run
matmul-20261204T142003Z-b3b9b87).  The persistent kernel's split tail (kernels.matmul.
tail_split) was used below four of its waves only.  Timed here, on shapes outside every
held-out set (two to nine waves, partial waves that split three to eight ways at K of 2048,
4096 and 8192), in shuffled rounds (probe_stream_k.median_us: CUDA graphs of ten calls,
warm, median µs): the persistent kernel with whole tiles, with the split tail whatever its
waves (tail_split with TAIL_MAX_WAVES lifted: the production planner otherwise), the
warp-specialized kernel and cuBLAS.  Each row gives the errors against the warp-specialized
kernel (relative L2) and whether the split tail repeats bit for bit.

    python3 notes/probe_tail_waves.py > $OUT/probe_tail_waves.log
"""

from __future__ import annotations

import random
import sys

import torch

sys.path.insert(0, "notes")
sys.path.insert(0, ".")

import probe_stream_k as base  # notes/ is not a package: by path

km = base.km
# (M, N, K, epilogue) by waves of persistent tiles; the partial waves split 3 to 16 ways (planner= in each row)
SHAPES = [
    (2944, 3072, 2048, None), (3712, 2560, 4096, None), (2176, 4352, 8192, None), (2816, 3584, 4096, None),  # 2 waves
    (7808, 1792, 4096, None), (2560, 5376, 8192, None), (4608, 3072, 8192, None), (6016, 2304, 2048, None),  # 3
    (3072, 5888, 4096, None), (2304, 7936, 8192, None), (5760, 3072, 4096, None), (2816, 6656, 4096, None),  # 4
    (2944, 7680, 4096, None), (4864, 4608, 8192, None), (3328, 6656, 2048, None), (3712, 5888, 4096, None),  # 5
    (8064, 3328, 4096, None), (5504, 4864, 8192, None), (6272, 4352, 4096, None),  # 6: 4 5 3
    (4224, 7424, 4096, None), (6400, 4864, 8192, None),  # 7: 4 5
    (8192, 4352, 4096, None), (6528, 5376, 8192, None),  # 8: 4 8
    (5760, 6912, 4096, None),  # 9: 4
    (2944, 7680, 4096, "bias_gelu"), (2944, 7680, 4096, "residual"),  # 5: 4, with an epilogue
]  # fmt: skip
PRODUCTION = km.TAIL_MAX_WAVES


def plan(max_waves: int) -> None:
    km.TAIL_MAX_WAVES = max_waves  # 0: whole tiles; read by tail_split at each plan
    km._PREPARED.clear()


def one(m: int, n: int, k: int, epilogue: str | None, g: torch.Generator, rng: random.Random, sms: int) -> None:
    a, b, kw = base.draw(m, n, k, epilogue, g, b_div=k**0.5)
    ref = km.matmul(a, b, variant="warp_specialized", epilogue=epilogue, **kw).float()
    replays, errors, same = {}, {}, True
    for name, variant, waves in (("whole tiles", "persistent", 0), ("split tail", "persistent", 1000),
                                 ("ws", "warp_specialized", PRODUCTION)):  # fmt: skip
        plan(waves)
        fn = lambda v=variant: km.matmul(a, b, variant=v, epilogue=epilogue, **kw)
        out = fn()
        errors[name] = float(torch.linalg.vector_norm(out.float() - ref) / torch.linalg.vector_norm(ref))
        if name == "split tail":
            same = all(torch.equal(out, fn()) for _ in range(3))
        replays[name] = base.graphed(fn)
    plan(1000)
    tiles, k_tiles = km.cdiv(m, 128) * km.cdiv(n, 256), km.cdiv(k, 64)
    planned = km.tail_split(tiles, k_tiles, sms)
    plan(PRODUCTION)
    if epilogue is None:
        replays["cublas"] = base.graphed(lambda: torch.mm(a, b))
    us = base.median_us(replays, rng)
    ws_tiles = km.cdiv(m, 128) * km.cdiv(n, 128)
    base.emit(shape=f"{m}x{n}x{k}", epilogue=epilogue, sms=sms, tiles=tiles, waves=round(tiles / sms, 2),
              k_tiles=k_tiles, ws_pair_waves=round(ws_tiles / (2 * sms), 2), planner=planned,
              rel_error_vs_ws=errors, split_same_bits=same, us=us)  # fmt: skip


def main() -> None:
    # the loop of probe_stream_k.py (until 2026-12-04 written out here again, as it ran at a99058f)
    base.run_shapes(SHAPES, one, seed=2, after=lambda: plan(PRODUCTION))


if __name__ == "__main__":
    main()
