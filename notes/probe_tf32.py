"""Probe (2026-12-03, twelfth session): TF32 through the persistent kernel with the MN-major
operand read into registers (``REG_OPERAND``, kernels/matmul.py) in several tiles, against
cuBLAS (TF32 allowed) and the autotuned kernel; IEEE fp32 (autotuned, persistent) against
cuBLAS; and bf16 mid-size products (1024³ to 16384x1024x1024), where the persistent 128x256
tile has fewer tiles than the GPU has SMs, persistent against autotuned.  Exploration for
``PERSISTENT_CONFIG_FP32`` and the default dispatch, not a study: interleaved rounds, medians
in µs, the per-round paired ratio (the peer's time over the variant's: above 1 is faster) and
rounds won; ``rel_err`` against float64.

    python3 notes/probe_tf32.py > $OUT/probe_tf32.log
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

sys.path.insert(0, ".")

from bench.timing import interleaved_us
from kernels.matmul import TileConfig, matmul

TF32_CONFIGS = {
    "p128x128x32s3w8": TileConfig(128, 128, 32, 8, 3, 8),
    "p128x128x32s4w8": TileConfig(128, 128, 32, 8, 4, 8),
    "p128x128x64s3w8": TileConfig(128, 128, 64, 8, 3, 8),
    "p128x256x32s3w8": TileConfig(128, 256, 32, 8, 3, 8),
    "p256x128x32s3w8": TileConfig(256, 128, 32, 8, 3, 8),
    "p128x128x32s4w4": TileConfig(128, 128, 32, 8, 4, 4),
    "p64x128x32s4w4": TileConfig(64, 128, 32, 8, 4, 4),
}
TF32_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (1024, 1024, 1024), (2048, 2048, 2048)]
FP32_SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096)]
BF16_SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (1536, 1536, 1536), (16384, 1024, 1024),
               (3072, 3072, 3072)]  # fmt: skip


def report(label: str, times: dict[str, list[float]], flops: int, peer: str, errors: dict[str, float]) -> None:
    base = times[peer]
    for name, ts in times.items():
        ratios = [b / t for b, t in zip(base, ts, strict=True)]
        print(json.dumps({"case": label, "variant": name, "us": round(statistics.median(ts), 1),
                          "tflops": round(flops / statistics.median(ts) / 1e6, 1),
                          "paired": round(statistics.median(ratios), 3), "won": sum(r > 1 for r in ratios),
                          "rounds": len(ts), "rel_err": errors.get(name)}), flush=True)  # fmt: skip


def run_case(label: str, fns: dict, ref: torch.Tensor, flops: int, tol: float, rate: float) -> None:
    errors = {}
    for name, fn in list(fns.items()):
        try:
            got = fn().double()
            errors[name] = round(float((got - ref).norm() / ref.norm()), 7)
            if not errors[name] < tol:
                print(json.dumps({"case": label, "variant": name, "wrong": errors[name]}), flush=True)
                fns.pop(name)
        except Exception as e:  # reported, the probe goes on
            print(json.dumps({"case": label, "variant": name, "error": repr(e)[:300]}), flush=True)
            fns.pop(name)
    calls = max(1, round(2e-3 / (flops / rate)))  # about 2 ms a sample
    report(label, interleaved_us(fns, calls, 12), flops, "cublas", errors)


def main() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    for m, n, k in TF32_SHAPES:
        a = torch.randn(m, k, device="cuda", generator=gen)
        b = torch.randn(k, n, device="cuda", generator=gen) / k**0.5
        ref = a.double() @ b.double()
        for layout, (x, y) in {"a b": (a, b), "aT bT": (a.T.contiguous().T, b.T.contiguous().T)}.items():
            if layout != "a b" and m != 4096:
                continue
            fns = {"cublas": lambda x=x, y=y: torch.mm(x, y),
                   "autotuned": lambda x=x, y=y: matmul(x, y, variant="autotuned", precision="tf32")}  # fmt: skip
            for name, cfg in TF32_CONFIGS.items():
                fns[name] = lambda x=x, y=y, cfg=cfg: matmul(x, y, variant="persistent", precision="tf32", config=cfg)
            run_case(f"tf32 {layout} {m}x{n}x{k}", fns, ref, 2 * m * n * k, 5e-3, 350e12)
        del a, b, ref
    torch.backends.cuda.matmul.allow_tf32 = False
    for m, n, k in FP32_SHAPES:
        a = torch.randn(m, k, device="cuda", generator=gen)
        b = torch.randn(k, n, device="cuda", generator=gen) / k**0.5
        ref = a.double() @ b.double()
        fns = {"cublas": lambda a=a, b=b: torch.mm(a, b),
               "autotuned": lambda a=a, b=b: matmul(a, b, variant="autotuned", precision="ieee"),
               "persistent": lambda a=a, b=b: matmul(a, b, variant="persistent", precision="ieee")}  # fmt: skip
        run_case(f"fp32 {m}x{n}x{k}", fns, ref, 2 * m * n * k, 1e-5, 50e12)
    for m, n, k in BF16_SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=gen) / k**0.5
        ref = a.double() @ b.double()
        fns = {"cublas": lambda a=a, b=b: torch.mm(a, b),
               "autotuned": lambda a=a, b=b: matmul(a, b, variant="autotuned"),
               "persistent": lambda a=a, b=b: matmul(a, b, variant="persistent"),
               "warp_specialized": lambda a=a, b=b: matmul(a, b, variant="warp_specialized")}  # fmt: skip
        run_case(f"bf16 {m}x{n}x{k}", fns, ref, 2 * m * n * k, 1e-2, 600e12)


if __name__ == "__main__":
    main()
