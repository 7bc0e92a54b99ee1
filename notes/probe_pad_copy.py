"""Probe (2026-12-04, sixteenth session): the pad copy's tile (kernels.matmul._pad_copy_kernel,
BLOCK_R x BLOCK_C a program, warps) on the operands the odd-row products copy: the 768x50257
weight, a 4096x4100 operand, an 8192x50257 output gradient (the LM head's dZ); held out from
the choice: 2048x100277 and 3001x5001.  Each config's copy is checked bit for bit.  The
reference: torch's copy of the same bytes between contiguous buffers (the copy peak).

Device time: CUDA graphs of CALLS copies, interleaved rounds, median µs.  JSON lines.

    python3 notes/probe_pad_copy.py > $OUT/probe_pad_copy.log
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys

import torch

sys.path.insert(0, ".")

from bench import timing

km = importlib.import_module("kernels.matmul")  # the package exports a function of this name

ROUNDS = 7
CALLS = 10
CONFIGS = [(16, 256, 4), (8, 512, 4), (32, 256, 8), (4, 1024, 4), (16, 512, 8), (64, 128, 4), (32, 512, 8)]
SHAPES = [(768, 50257), (4096, 4100), (8192, 50257), (2048, 100277), (3001, 5001)]


def copy_with(src: torch.Tensor, dst: torch.Tensor, cfg: tuple[int, int, int]) -> None:
    rows, cols = src.shape
    ld = dst.stride(0)
    grid = (km.cdiv(rows, cfg[0]), km.cdiv(ld, cfg[1]), 1)
    key = km._launch_key(0, (src, dst))
    km._PAD_COPY.launch(key, 0, grid, (src, dst, rows, cols, *src.stride(), ld), (8, cfg[0], cfg[1]), cfg[2], 1)


def one(rows: int, cols: int, g: torch.Generator, dev: torch.device) -> None:
    src = torch.randn((rows, cols), generator=g, device=dev).to(torch.bfloat16)
    dst = torch.empty((rows, km.cdiv(cols, 8) * 8), device=dev, dtype=torch.bfloat16)
    flat = torch.empty_like(dst)
    fns = {f"{r}x{c}/{w}": (lambda cfg=(r, c, w): copy_with(src, dst, cfg)) for r, c, w in CONFIGS}
    fns["contiguous copy (peak)"] = lambda: flat.copy_(dst)
    fns["torch strided copy"] = lambda: dst[:, :cols].copy_(src)
    ok = {}
    for name, fn in fns.items():
        dst.zero_()
        fn()
        ok[name] = bool(torch.equal(dst[:, :cols], src)) if "/" in name else True
    replays = {name: timing.graphed(fn, CALLS) for name, fn in fns.items()}
    times = {k: [x / CALLS for x in v] for k, v in timing.interleaved_us(replays, 1, ROUNDS).items()}
    med = {k: round(statistics.median(v), 1) for k, v in times.items()}
    gbps = {k: round(2 * src.numel() * 2 / (v * 1e3), 0) for k, v in med.items()}
    print(json.dumps({"shape": f"{rows}x{cols}", "us": med, "GBps": gbps, "exact": ok}), flush=True)


def main() -> None:
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    for rows, cols in SHAPES:
        one(rows, cols, g, dev)


if __name__ == "__main__":
    main()
