"""Probe (2026-12-04, fifteenth session): split-K's tile and split count for decode products
(M = 1..128 rows against a deep weight), beside the autotuned kernel and cuBLAS in the same
process.

Why: under rule 0bedac7ce8 split-K lost to the autotuned kernel at 32x4096x14336 (50.4 against
43.8 µs, run matmul-20261203T202619Z-b035874) and at 8x8192x28672 (129.5 against 111.5, run
matmul-20261203T223642Z-ec17b0f), and cuBLAS was 1.2-1.7x ahead of both at K = 14336.  The
split count aims at two programs per SM, but the default tile (128x128x128, 4 stages: 160 KB
of shared memory at M = 32) fits one program per SM, so 32 tiles x 9 splits = 288 programs
run in three rounds on 132 SMs, the last a fifth full.  This times tiles and split counts
that fill one round (or two resident programs per SM) exactly.

Tuned on weights (N, K) = (4096, 14336) (the study's), (2048, 8192), (6144, 16384) and
(11008, 8192); the held-out decode shapes of bench/studies/matmul.py (48x5120x13824,
8x8192x28672) are not timed here, so they still score the refit.

Device time: each candidate's ``CALLS`` calls captured in one CUDA graph, the graph's replays
timed by CUDA events in interleaved rounds (every candidate once per round), median over
rounds.  The weights (48-235 MB) exceed the 50 MB L2, so every call reads its weight from
HBM.  Exploration, not a study: JSON lines.

    python3 notes/probe_split_decode.py > $OUT/probe_split_decode.log
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
from collections.abc import Callable

import torch

sys.path.insert(0, ".")

from bench import timing

km = importlib.import_module("kernels.matmul")  # the package exports a function of this name

ROUNDS = 7
CALLS = 10
WEIGHTS = [(4096, 14336), (2048, 8192), (6144, 16384), (11008, 8192)]  # (N, K)
MS = [1, 4, 16, 32, 64, 128]
# (block_n, block_k, stages, warps); block_m from M's bucket (and 64 beside 128 at M = 128).
TILES = [
    (128, 128, 4, 4), (128, 64, 6, 4), (128, 128, 3, 4), (256, 64, 4, 8), (64, 128, 4, 4),
    (64, 256, 4, 4), (128, 256, 3, 4), (256, 128, 3, 8), (64, 128, 6, 4), (128, 64, 8, 4),
]  # fmt: skip
SMEM = 220 * 1024


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def graphed(fn: Callable[[], object]) -> Callable[[], None]:
    return timing.graphed(fn, CALLS)  # CALLS calls in one graph


def time_all(fns: dict[str, Callable[[], None]]) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    for _ in range(ROUNDS):
        for name, fn in fns.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times[name].append(s.elapsed_time(e) * 1000 / CALLS)
    return {k: statistics.median(v) for k, v in times.items()}


def split_launch(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: km.TileConfig, splits: int):
    """The split-K launch pair with ``splits`` forced (``kernels.matmul.split_count`` patched
    while the launch is prepared)."""
    k = a.shape[1]
    kps = km.cdiv(km.cdiv(k, cfg.block_k), splits) * cfg.block_k
    saved = km.split_count
    km.split_count = lambda *_: (km.cdiv(k, kps), kps)
    try:
        prepared = km._prepare(a, b, out, None, None, None, "split_k", None, None, cfg, out.device.index or 0)
    finally:
        km.split_count = saved
    ep = (out, out, out, out)
    return lambda: km._split_launch(a, b, ep, out.device.index or 0, prepared), km.cdiv(k, kps)


def main() -> None:
    dev = torch.device("cuda")
    sms = km.sm_count(dev)
    emit(device=torch.cuda.get_device_name(), sms=sms, rule=km.dispatch_rule())
    for n, k in WEIGHTS:
        g = torch.Generator(device=dev).manual_seed(0)
        b = torch.randn((k, n), generator=g, device=dev).to(torch.bfloat16)
        for m in MS:
            a = torch.randn((m, k), generator=g, device=dev).to(torch.bfloat16)
            want = torch.mm(a.double(), b.double()) if m <= 16 else None
            fns: dict[str, Callable[[], None]] = {
                "cublas": graphed(lambda a=a, b=b: torch.mm(a, b)),
                "autotuned": graphed(lambda a=a, b=b: km.matmul(a, b, variant="autotuned")),
                "split_k-default": graphed(lambda a=a, b=b: km.matmul(a, b, variant="split_k")),
            }
            bms = {max(16, min(128, km.m_bucket(m)))} | ({64} if m > 64 else set())
            for bm in sorted(bms):
                for bn, bk, st, w in TILES:
                    if (bm + bn) * bk * 2 * st > SMEM:
                        continue
                    cfg = km.TileConfig(bm, bn, bk, 1, st, w)
                    tiles = km.cdiv(m, bm) * km.cdiv(n, bn)
                    counts = {max(1, sms // tiles), max(1, 2 * sms // tiles), km.cdiv(sms, tiles)}
                    for s in sorted(c for c in counts if c <= km.cdiv(k, bk)):
                        out = torch.empty((m, n), device=dev, dtype=torch.bfloat16)
                        try:
                            fn, eff = split_launch(a, b, out, cfg, s)
                            name = f"{bm}x{bn}x{bk}s{st}w{w}/{eff}"
                            fns[name] = graphed(fn)
                            if want is not None:
                                err = ((out.double() - want).norm() / want.norm()).item()
                                if err > 1e-2:
                                    emit(n=n, k=k, m=m, config=name, error=f"rel_l2 {err:.3g}")
                                    del fns[name]
                        except Exception as exc:  # one config that does not compile must not lose the rest
                            emit(n=n, k=k, m=m, config=f"{bm}x{bn}x{bk}s{st}w{w}/{s}", error=repr(exc)[:200])
            res = time_all(fns)
            wbytes = n * k * 2
            best = min((v, name) for name, v in res.items() if name not in ("cublas", "autotuned", "split_k-default"))
            for name, us in sorted(res.items(), key=lambda kv: kv[1]):
                emit(n=n, k=k, m=m, config=name, us=round(us, 2), tbs=round(wbytes / us / 1e6, 2),
                     vs_cublas=round(res["cublas"] / us, 3))  # fmt: skip
            emit(n=n, k=k, m=m, summary=True, best=best[1], best_us=round(best[0], 2),
                 cublas=round(res["cublas"], 2), autotuned=round(res["autotuned"], 2),
                 default=round(res["split_k-default"], 2))  # fmt: skip
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
