"""Probe: what the last, partly filled wave of tiles costs the persistent GEMM (H200, bf16).

Why: at 4096³ the 128x256 tiles number 512, 3.88 per SM of 132, so every program but 16
computes four tiles and the product takes four tile-times for 3.88 tile-times of work; at
8192³ 2048 tiles make 15.5 waves.  If the idle SMs of the last wave are the loss, then M =
4224 (528 tiles: four full waves) takes about as long as M = 4096, and M = 8448 (2112
tiles: 16 full waves) as long as 8192.  Under a power cap the idle SMs let the busy ones
clock higher, and the loss is smaller: the times say which.  cuBLAS beside every shape, in
interleaved rounds (every function once per round, so clock drift hits all alike), device
time by CUDA events, median over rounds.  Exploration, not a study: JSON lines.

    python3 notes/probe_matmul_waves.py > $OUT/probe_matmul_waves.log
"""

from __future__ import annotations

import json
import statistics

import torch

from bench.timing import interleaved_us
from kernels.matmul import matmul

ROUNDS = 9
SHAPES = {4096: (3968, 4096, 4224), 8192: (7936, 8192, 8448)}
CALLS = {4096: 20, 8192: 4}


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def main() -> None:
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    for dtype in (torch.bfloat16, torch.float16):
        for n, ms in SHAPES.items():
            g = torch.Generator(device=dev).manual_seed(0)
            b = torch.randn((n, n), generator=g, device=dev).to(dtype)
            fns = {}
            for m in ms:
                a = torch.randn((m, n), generator=g, device=dev).to(dtype)
                fns[f"ours/{m}"] = lambda a=a, b=b: matmul(a, b, variant="persistent")
                fns[f"cublas/{m}"] = lambda a=a, b=b: torch.mm(a, b)
            for name, ts in interleaved_us(fns, CALLS[n], ROUNDS).items():
                who, m = name.split("/")
                us = statistics.median(ts)
                tiles = -(-int(m) // 128) * -(-n // 256)
                emit(dtype=str(dtype).split(".")[-1], m=int(m), n=n, k=n, who=who, us=round(us, 1),
                     tflops=round(2 * int(m) * n * n / us / 1e6, 1), waves=round(tiles / sms, 3),
                     spread=round(max(ts) / min(ts) - 1, 4))  # fmt: skip


if __name__ == "__main__":
    main()
