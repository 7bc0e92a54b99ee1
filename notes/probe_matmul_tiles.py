"""Probe: the persistent GEMM's tile, stages, warps and group size at 4096³ and 8192³ (H200,
bf16 and fp16), and the bias + GELU epilogue at 8192³, beside cuBLAS in the same process.

Why: in run matmul-20261201T145556Z-b2a50f2-quick the default tile (128x256x64, 3 stages,
8 warps, GROUP_M 8) took 0.97x cuBLAS's speed at 4096³ fp16 (the 0.98x target, missed by
the verdict; 0.99x a run earlier), and the bias + GELU epilogue ran 60-75 µs behind the
plain product at 8192³ (its GELU then took ``tl.exp`` and a full division; now two MUFU
instructions, kernels/_activations.py).  Second pass (db8affa): c written through a TMA
descriptor in two half tiles against the pointer stores, for the 128x256x64 tiles and the
bias + GELU epilogue: within 1% either way (notes/2026-12-02-probe-matmul-tiles-db8affa.log),
and the TMA store was removed (this file as it ran then is in commit db8affa).  Device time
by CUDA events, interleaved rounds (every config once per round, cuBLAS among them, so clock
drift under load hits all alike), median over rounds.  Exploration, not a study: JSON lines.

    python3 notes/probe_matmul_tiles.py > $OUT/probe_matmul_tiles.log
"""

from __future__ import annotations

import json
import statistics

import torch
import torch.nn.functional as F

from bench.timing import event_time_ms
from kernels.matmul import PERSISTENT_CONFIG, TileConfig, matmul

ROUNDS = 7
CALLS = {4096: 20, 8192: 4}
# At f73b7c2: eleven tiles (notes/2026-12-02-probe-matmul-tiles-f73b7c2.log); GROUP_M 16 became
# the default.  At the next commit: c through a TMA descriptor in two half tiles, on and off.
TILES = [(128, 256, 64, 8, 3, 8), (128, 256, 64, 16, 3, 8), (128, 256, 64, 4, 3, 8), (128, 256, 64, 16, 4, 8)]


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def interleaved(fns: dict[str, object], calls: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():  # compile and warm up
        fn()  # type: ignore[operator]
    torch.cuda.synchronize()
    for _ in range(ROUNDS):
        for name, fn in fns.items():
            times[name].append(event_time_ms(fn, calls) * 1000)  # type: ignore[arg-type]
    return {k: round(statistics.median(v), 1) for k, v in times.items()}


def probe_tiles() -> None:
    dev = torch.device("cuda")
    for dtype in (torch.float16, torch.bfloat16):
        for n in (4096, 8192):
            g = torch.Generator(device=dev).manual_seed(0)
            a = torch.randn((n, n), generator=g, device=dev).to(dtype)
            b = torch.randn((n, n), generator=g, device=dev).to(dtype)
            fns: dict[str, object] = {"cublas": lambda a=a, b=b: torch.mm(a, b)}
            for t in TILES:
                cfg = TileConfig(*t)
                fns["x".join(map(str, t))] = lambda a=a, b=b, cfg=cfg: matmul(a, b, variant="persistent", config=cfg)
            try:
                res = interleaved(fns, CALLS[n])
            except Exception as exc:  # one config that does not compile must not lose the rest
                emit(shape=n, dtype=str(dtype), error=repr(exc)[:300])
                fns = {k: v for k, v in fns.items() if _runs(v)}
                res = interleaved(fns, CALLS[n])
            flops = 2 * n**3
            for name, us in res.items():
                emit(shape=f"{n}^3", dtype=str(dtype).split(".")[-1], config=name, us=us,
                     tflops=round(flops / us / 1e6, 1), vs_cublas=round(res["cublas"] / us, 3))  # fmt: skip


def _runs(fn: object) -> bool:
    try:
        fn()  # type: ignore[operator]
        torch.cuda.synchronize()
        return True
    except Exception:
        return False


def probe_gelu() -> None:
    dev = torch.device("cuda")
    n = 8192
    g = torch.Generator(device=dev).manual_seed(1)
    a = (torch.randn((n, n), generator=g, device=dev) / 8).to(torch.bfloat16)
    b = torch.randn((n, n), generator=g, device=dev).to(torch.bfloat16)
    bias = torch.randn((n,), generator=g, device=dev).to(torch.bfloat16)
    ours = matmul(a, b, epilogue="bias_gelu", bias=bias, variant="persistent")
    want = F.gelu(torch.addmm(bias.float(), a.float(), b.float()), approximate="tanh")
    err = ((ours.float() - want).abs().max() / want.abs().max()).item()
    fns = {
        "ours-mm": lambda: matmul(a, b, variant="persistent"),
        "ours-bias-gelu": lambda: matmul(a, b, epilogue="bias_gelu", bias=bias, variant="persistent"),
        "ours-bias": lambda: matmul(a, b, epilogue="bias", bias=bias, variant="persistent"),
        "cublas-mm": lambda: torch.mm(a, b),
        "addmm+gelu": lambda: F.gelu(torch.addmm(bias, a, b), approximate="tanh"),
        "cublaslt-gelu": lambda: torch._addmm_activation(bias, a, b, use_gelu=True),
    }
    for name, us in interleaved(fns, 4).items():
        emit(shape="8192^3", op="bias_gelu", config=name, us=us, default=str(PERSISTENT_CONFIG), max_rel_err=err)


if __name__ == "__main__":
    probe_gelu()
    probe_tiles()
