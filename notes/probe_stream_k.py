"""Probe (2026-12-04, eighteenth session): stream-K in the persistent kernel.

Between one and four waves of the persistent kernel's 128x256 tiles, a tile count that is not
a multiple of the SMs leaves the last wave part empty (144 tiles on 132 SMs: two tile-times
for 1.09 tiles of work).  The warp-specialized kernel's 128x128 tiles fill that wave better,
not fully: cuBLAS ran 1.4-1.8x ahead at such shapes (run matmul-20261204T142003Z-b3b9b87).
Timed here, on shapes outside the held-out sets, in shuffled rounds (CUDA graphs of CALLS
calls, warm, median µs): the persistent kernel with whole tiles, the same with stream-K
(``kernels.matmul.stream_k_tiles``), the warp-specialized kernel and cuBLAS.  Each row also
gives the stream-K kernel's error against cuBLAS (relative L2), whether two of its calls give
the same bits, and both kernels' tile counts.  Two stream-K plans: the last full wave and
the partial one shared out (Stream-K's hybrid), and the partial wave alone (the second
run, after the first: notes/2026-12-04d-probe-stream-k-*.log, in order).  The stream-K
rows ignore the planner's bounds (``STREAM_K_MIN_K_TILES``, ``STREAM_K_MAX_WAVES``) so that
their edges are measured too.

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

km = importlib.import_module("kernels.matmul")  # the package exports a function of this name

ROUNDS = 11
CALLS = 10
# (M, N, K, epilogue): deep-K products of one to four waves, the LM head's dA, shallow K, whole waves
SHAPES = [(6144, 768, 16384, None), (3072, 1536, 8192, None), (1536, 4096, 8192, None), (8192, 768, 50257, None),
          (4096, 2304, 4096, None), (3072, 3072, 3072, None), (2048, 4096, 2048, None), (2560, 2048, 8192, None),
          (4096, 4096, 1024, None), (2176, 2048, 512, None), (3072, 1536, 8192, "bias_gelu"),
          (3072, 1536, 8192, "residual"), (2048, 3072, 4096, None), (3584, 2048, 4096, None)]  # fmt: skip
_PLANNER = km.stream_k_tiles


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def graphed(fn: Callable[[], object]) -> Callable[[], None]:
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(CALLS):
            fn()
    return g.replay


def stream_k(how: str) -> None:
    # Every tile count that is not a multiple of the SMs, whatever its K or waves: "wave" the
    # last full wave and the partial one, "remainder" the partial one, "" none.
    def sk(tiles: int, k_tiles: int, sms: int) -> int:
        if tiles <= sms or not tiles % sms or not how or tiles % sms * k_tiles < sms:
            return 0
        return tiles % sms + (sms if how == "wave" else 0)

    km.stream_k_tiles = sk
    km._PREPARED.clear()


def one(m: int, n: int, k: int, epilogue: str | None, g: torch.Generator, rng: random.Random, sms: int) -> None:
    bf = torch.bfloat16
    a = torch.randn((m, k), generator=g, device="cuda").to(bf)
    b = torch.randn((k, n), generator=g, device="cuda").to(bf)
    kw: dict[str, object] = {}
    if epilogue == "bias_gelu":
        kw = {"bias": torch.randn((n,), generator=g, device="cuda").to(bf)}
    elif epilogue == "residual":
        kw = {"residual": torch.randn((m, n), generator=g, device="cuda").to(bf)}
    ref = km.matmul(a, b, variant="warp_specialized", epilogue=epilogue, **kw).float()
    replays, errors, same = {}, {}, True
    plans = (
        ("whole tiles", "persistent", ""),
        ("stream-K", "persistent", "wave"),
        ("stream-K remainder", "persistent", "remainder"),
        ("ws", "warp_specialized", ""),
    )
    for name, variant, sk in plans:
        stream_k(sk)
        fn = lambda v=variant: km.matmul(a, b, variant=v, epilogue=epilogue, **kw)
        out = fn()
        errors[name] = float(torch.linalg.vector_norm(out.float() - ref) / torch.linalg.vector_norm(ref))
        if name.startswith("stream-K"):
            same = same and all(torch.equal(out, fn()) for _ in range(3))
        replays[name] = graphed(fn)
    stream_k("")
    if epilogue is None:
        replays["cublas"] = graphed(lambda: torch.mm(a, b))
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
    tiles, k_tiles = km.cdiv(m, 128) * km.cdiv(n, 256), km.cdiv(k, 64)
    emit(shape=f"{m}x{n}x{k}", epilogue=epilogue, sms=sms, tiles=tiles, waves=round(tiles / sms, 2),
         k_tiles=k_tiles, ws_tiles=km.cdiv(m, 128) * km.cdiv(n, 128), planner=_PLANNER(tiles, k_tiles, sms),
         rel_error_vs_ws=errors, stream_k_same_bits=same,
         us={x: round(statistics.median(v), 1) for x, v in times.items()})  # fmt: skip


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(0)
    rng = random.Random(0)
    sms = km.sm_count(torch.device("cuda"))
    for m, n, k, epilogue in SHAPES:
        try:
            one(m, n, k, epilogue, g, rng, sms)
        except Exception as e:  # one failing shape must not lose the others
            emit(shape=f"{m}x{n}x{k}", epilogue=epilogue, error=repr(e)[:2000])


if __name__ == "__main__":
    main()
