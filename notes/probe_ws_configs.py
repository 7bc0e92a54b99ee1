"""Probe (2026-12-03, eleventh session): the warp-specialized GEMM variant as built into
``kernels.matmul`` (ping-pong 128x128 with 4 or 5 stages, cooperative 256x128 and 128x256
with 3), against cuBLAS and the persistent Triton kernel, at the study's large shapes; and the
kernel cuBLAS runs at each (its name says its tile, cluster and schedule).  Exploration for
the default dispatch and ``WS_CONFIG``, not a study: interleaved rounds, medians in µs, the
per-round paired ratio (cuBLAS over the variant: above 1 is faster) and rounds won.

    python3 notes/probe_ws_configs.py > $OUT/probe_ws_configs.log

A subset or other candidates (twenty-third session): ``LAB_WS_CONFIGS="name=128,128,64,16,5,4;..."``
(block_m, block_n, block_k, group_m, stages, warps; ``default`` for the tile ``kernels.matmul.ws_config``
picks on this GPU: ``WS_CONFIG`` everywhere until 2026-12-07, a table of its own on an H100 SXM
since, so name ping-pong ``128,128,64,8,5,4`` where it must be ping-pong),
``LAB_WS_SHAPES="bf16:4096x4096x4096;..."``, ``LAB_WS_GELU=0`` to leave out the bias + GELU case,
``LAB_WS_ROUNDS`` (12).  A config whose two output tiles leave its ring too little room runs
them as half-width boxes (``kernels.matmul.ws_epilogue_split``, from 5b93630), e.g.
``128,256,64,8,4,8`` or ``128,256,32,8,6,8``; its JSON lines name it as given.  Logs: H200
2026-12-03 (``2026-12-03-probe-ws-configs-c315e77.log``), H100 2026-12-06
(``2026-12-06c-probe-ws-configs-5b93630-h100.log``, split configs among them).
"""

from __future__ import annotations

import json
import os
import statistics
import sys

import torch
from torch.nn.functional import gelu

sys.path.insert(0, ".")

from bench.timing import interleaved_us
from kernels.matmul import TileConfig, matmul

CONFIGS = {
    "ws-pp5": None,
    "ws-pp4": TileConfig(128, 128, 64, 8, 4, 4),
    "ws-coop256x128": TileConfig(256, 128, 64, 8, 3, 8),
    "ws-coop128x256": TileConfig(128, 256, 64, 8, 3, 8),
}
SHAPES = [
    ("bf16", (4096, 4096, 4096)),
    ("fp16", (4096, 4096, 4096)),
    ("bf16", (8192, 8192, 8192)),
    ("fp16", (8192, 8192, 8192)),
    ("bf16", (4096, 14336, 4096)),
    ("bf16", (8192, 5120, 13824)),
    ("bf16", (16384, 1024, 1024)),
    ("bf16", (2048, 2048, 2048)),
]
DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
if os.environ.get("LAB_WS_CONFIGS"):
    CONFIGS = {
        name: None if spec == "default" else TileConfig(*map(int, spec.split(",")))
        for name, spec in (item.split("=") for item in os.environ["LAB_WS_CONFIGS"].split(";"))
    }
if os.environ.get("LAB_WS_SHAPES"):
    SHAPES = [
        (dt, tuple(map(int, dims.split("x"))))
        for dt, dims in (item.split(":") for item in os.environ["LAB_WS_SHAPES"].split(";"))
    ]
ROUNDS = int(os.environ.get("LAB_WS_ROUNDS", "12"))


def cublas_kernels(fn) -> list[str]:  # type: ignore[no-untyped-def]
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})


def report(label: str, times: dict[str, list[float]], flops: int, peer: str, errors: dict[str, float]) -> None:
    base = times[peer]
    for name, ts in times.items():
        ratios = [b / t for b, t in zip(base, ts, strict=True)]
        print(json.dumps({"case": label, "variant": name, "us": round(statistics.median(ts), 1),
                          "tflops": round(flops / statistics.median(ts) / 1e6, 1),
                          "paired": round(statistics.median(ratios), 3), "won": sum(r > 1 for r in ratios),
                          "rounds": len(ts), "rel_err": errors.get(name)}), flush=True)  # fmt: skip


def main() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    for dtype_name, (m, n, k) in SHAPES:
        dtype = DT[dtype_name]
        a = torch.randn(m, k, device="cuda", dtype=dtype, generator=gen)
        b = torch.randn(k, n, device="cuda", dtype=dtype, generator=gen) / k**0.5
        label = f"{dtype_name} {m}x{n}x{k}"
        ref = (a.double() @ b.double()).float()
        fns = {
            "cublas": lambda a=a, b=b: torch.mm(a, b),
            "persistent": lambda a=a, b=b: matmul(a, b, variant="persistent"),
        }
        for name, cfg in CONFIGS.items():
            fns[name] = lambda a=a, b=b, cfg=cfg: matmul(a, b, variant="warp_specialized", config=cfg)
        errors = {}
        for name, fn in list(fns.items()):
            try:
                got = fn().float()
                errors[name] = round(float((got - ref).norm() / ref.norm()), 6)
                if not errors[name] < 1e-2:
                    print(json.dumps({"case": label, "variant": name, "wrong": errors[name]}), flush=True)
                    fns.pop(name)
            except Exception as e:  # reported, the probe goes on
                print(json.dumps({"case": label, "variant": name, "error": repr(e)[:300]}), flush=True)
                fns.pop(name)
        print(json.dumps({"case": label, "cublas_kernels": cublas_kernels(fns["cublas"])}), flush=True)
        calls = max(1, round(2e-3 / (2 * m * n * k / 650e12)))  # about 2 ms a sample
        report(label, interleaved_us(fns, calls, ROUNDS), 2 * m * n * k, "cublas", errors)
        del a, b, ref
        torch.cuda.empty_cache()
    if os.environ.get("LAB_WS_GELU") == "0":
        return
    # bias + GELU at 8192³ bf16: against addmm + GELU and cuBLASLt's own GELU epilogue
    m = n = k = 8192
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16, generator=gen) / k**0.5
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=gen) * 0.5
    ref = gelu((a.double() @ b.double()) + bias.double(), approximate="tanh").float()
    fns = {
        "addmm+gelu": lambda: gelu(torch.addmm(bias, a, b), approximate="tanh"),
        "cublaslt-gelu": lambda: torch._addmm_activation(bias, a, b, use_gelu=True),
        "persistent": lambda: matmul(a, b, variant="persistent", epilogue="bias_gelu", bias=bias),
    }
    for name, cfg in CONFIGS.items():
        fns[name] = lambda cfg=cfg: matmul(a, b, variant="warp_specialized", epilogue="bias_gelu", bias=bias,
                                           config=cfg)  # fmt: skip
    errors = {name: round(float((fn().float() - ref).norm() / ref.norm()), 6) for name, fn in fns.items()}
    report("bias_gelu bf16 8192x8192x8192", interleaved_us(fns, 2, ROUNDS), 2 * m * n * k, "addmm+gelu", errors)


if __name__ == "__main__":
    main()
