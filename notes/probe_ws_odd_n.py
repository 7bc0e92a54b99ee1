"""Probe (2026-12-04, seventeenth session): the warp-specialized kernel at an odd N.

Until now an odd N (output rows not 16-byte aligned, out of TMA's reach: a vocabulary of
50257) kept the warp-specialized kernel off, since it wrote every tile with a TMA store; the
persistent kernel ran those products and its element-wise stores sit between its main loops
(run matmul-20261204T112622Z-4b457d0: 8192x50257x768 1260 µs, torch.compile 960).  Now the
warp-specialized kernel stores such a tile through pointers (kernels/_matmul_ws.py, _store),
so a ping-pong consumer's stores overlap the other consumer's main loop.

Timed here: the tuning shapes only (the study's 8192x50257x768, 4096x50257x4096,
16384x11001x1536, and 2048x4097x4096 / 1536x6001x4096 next to the four-wave bound).  The
held-out odd-N shapes of bench/studies/matmul.py are not timed here.  For each: the
persistent kernel (today's choice), the warp-specialized kernel in four configurations,
cuBLAS, and cuBLAS on N padded to a multiple of 8 (what torch.compile runs).  First each
configuration's output against cuBLAS's (relative L2 error), then device time: CUDA graphs of
CALLS calls (warm), interleaved rounds, median µs.  Last, the names of cuBLAS's kernels.

    python3 notes/probe_ws_odd_n.py > $OUT/probe_ws_odd_n.log
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

ROUNDS = 9
CALLS = 10
CONFIGS = {
    "ws ping-pong": None,  # WS_CONFIG: 128x128x64, 5 stages
    "ws ping-pong g16": km.TileConfig(128, 128, 64, 16, 5, 4),
    "ws coop 256x128": km.TileConfig(256, 128, 64, 8, 3, 8),
    "ws coop 128x256": km.TileConfig(128, 256, 64, 8, 3, 8),
}
SHAPES = [(8192, 50257, 768), (4096, 50257, 4096), (16384, 11001, 1536), (2048, 4097, 4096), (1536, 6001, 4096)]


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def graphed(fn: Callable[[], object]) -> Callable[[], None]:
    return timing.graphed(fn, CALLS)  # CALLS calls in one graph


def device_us(fns: dict[str, Callable[[], object]]) -> dict[str, float]:
    replays = {k: graphed(f) for k, f in fns.items()}
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(ROUNDS):
        for name, replay in replays.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            replay()
            e.record()
            e.synchronize()
            times[name].append(s.elapsed_time(e) * 1000 / CALLS)
    return {k: round(statistics.median(v), 1) for k, v in times.items()}


def rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm((x - ref).float()) / torch.linalg.vector_norm(ref.float()))


def main() -> None:
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    bf = torch.bfloat16
    for m, n, k in SHAPES:
        a = torch.randn((m, k), generator=g, device=dev).to(bf)
        w = (torch.randn((n, k), generator=g, device=dev) * k**-0.5).to(bf)  # a linear layer's weight
        for layout, b in (("w.T", w.T), ("b", w.T.contiguous())):
            if layout == "b" and (m, n, k) != SHAPES[0]:
                continue
            pad = -n % 8
            pad_fn = torch.nn.functional.pad
            b_pad = pad_fn(w, (0, 0, 0, pad)).T if layout == "w.T" else pad_fn(b, (0, pad))
            ref = torch.mm(a, b)
            fns = {"persistent": lambda a=a, b=b: km.matmul(a, b, variant="persistent")}
            for name, cfg in CONFIGS.items():
                fns[name] = lambda a=a, b=b, cfg=cfg: km.matmul(a, b, variant="warp_specialized", config=cfg)
            errors = {name: rel(fn(), ref) for name, fn in fns.items()}
            fns["default"] = lambda a=a, b=b: km.matmul(a, b)
            fns["cublas"] = lambda a=a, b=b: torch.mm(a, b)
            fns["cublas N padded"] = lambda a=a, b=b_pad: torch.mm(a, b)
            emit(shape=f"{m}x{n}x{k}", layout=layout, default=km.dispatch(a, b), rel_error=errors, us=device_us(fns))
    names = {}
    for m, n, k in ((8192, 50264, 768), (8192, 50257, 768), (8192, 8192, 8192), (4096, 50264, 4096)):
        a = torch.randn((m, k), device=dev).to(bf)
        b = torch.randn((k, n), device=dev).to(bf)
        torch.mm(a, b)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            torch.mm(a, b)
            torch.cuda.synchronize()
        names[f"{m}x{n}x{k}"] = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    emit(cublas_kernels=names)


if __name__ == "__main__":
    main()
