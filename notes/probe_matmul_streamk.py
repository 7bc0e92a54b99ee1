"""Probe: the persistent GEMM with and without its stream-K tail (H200, bf16 and fp16).

The stream-K tail was built at f35118b and 6406b22 and removed at the next commits (it cost
more than it saved, notes/README.md "ninth session"): this file runs against
``kernels/matmul.py`` as it was at 6406b22 (``stream_k_plan``, ``STREAM_K_MIN_GAIN``).

Second pass: the tail spread before the whole tiles (at f35118b it ran after them and cost
more than it saved: notes/2026-12-03-probe-matmul-streamk-f35118b.log).

Why: notes/2026-12-03-probe-matmul-waves-2805c9e.log showed the last, partly filled wave of
128 x 256 tiles costing a whole tile-time (M = 3968, 4096 and 4224 took the same time, for
ours and for cuBLAS).  The persistent kernel now spreads the last wave's K blocks over every
program (``kernels.matmul.stream_k_plan``).  Here the same kernel with the tail spread and
with it off (``STREAM_K_MIN_GAIN`` above 1: never), beside cuBLAS, at the study's large
shapes, plus the bias + GELU epilogue at 8192³ beside addmm + GELU and cuBLASLt's epilogue.
Each result is checked against an fp32 product first, and the spread call is repeated to
check it gives the same bits.  Device time by CUDA events, interleaved rounds (every
function once per round, so clock drift hits all alike), median over rounds.  Exploration,
not a study: JSON lines.

    python3 notes/probe_matmul_streamk.py > $OUT/probe_matmul_streamk.log
"""

from __future__ import annotations

import importlib
import json
import statistics

import torch
import torch.nn.functional as F

from bench.timing import interleaved_us

mm = importlib.import_module("kernels.matmul")

ROUNDS = 9
SHAPES = [(4096, 4096, 4096), (3968, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096), (8192, 5120, 13824),
          (16384, 1024, 1024), (2048, 2048, 2048)]  # fmt: skip


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def ours(a, b, spread: bool, **kw):  # type: ignore[no-untyped-def]
    # config= takes the uncached path, which plans on every call: the gain floor decides.
    mm.STREAM_K_MIN_GAIN = 0.01 if spread else 2.0
    return mm.matmul(a, b, variant="persistent", config=mm.PERSISTENT_CONFIG, **kw)


def interleaved(fns: dict, calls: int) -> dict[str, tuple[float, float]]:
    times = interleaved_us(fns, calls, ROUNDS)
    return {k: (statistics.median(v), max(v) / min(v) - 1) for k, v in times.items()}


def main() -> None:
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    for dtype in (torch.bfloat16, torch.float16):
        for m, n, k in SHAPES:
            if dtype == torch.float16 and (m, n, k) not in ((4096, 4096, 4096), (8192, 8192, 8192)):
                continue
            g = torch.Generator(device=dev).manual_seed(0)
            a = torch.randn((m, k), generator=g, device=dev).to(dtype)
            b = torch.randn((k, n), generator=g, device=dev).to(dtype)
            want = torch.mm(a.float(), b.float())
            tiles = -(-m // 128) * -(-n // 256)
            mm.STREAM_K_MIN_GAIN = 0.01
            sk, slots = mm.stream_k_plan(tiles, -(-k // 64), sms)
            got = ours(a, b, True)
            err = ((got.float() - want).abs().max() / want.abs().max()).item()
            same = all(torch.equal(ours(a, b, True), got) for _ in range(3))
            fns = {
                "ours-spread": lambda a=a, b=b: ours(a, b, True),
                "ours-whole": lambda a=a, b=b: ours(a, b, False),
                "cublas": lambda a=a, b=b: torch.mm(a, b),
            }
            calls = max(2, min(40, int(4e12 / (2 * m * n * k) * 10)))
            res = interleaved(fns, calls)
            flops = 2 * m * n * k
            for name, (us, spread) in res.items():
                emit(dtype=str(dtype).split(".")[-1], shape=f"{m}x{n}x{k}", who=name, us=round(us, 1),
                     tflops=round(flops / us / 1e6, 1), vs_cublas=round(res["cublas"][0] / us, 3),
                     spread=round(spread, 4), sk_tiles=sk, slots=slots, waves=round(tiles / sms, 3),
                     max_rel_err=err, repeat_same_bits=same)  # fmt: skip
    n = 8192
    g = torch.Generator(device=dev).manual_seed(1)
    a = (torch.randn((n, n), generator=g, device=dev) / 8).to(torch.bfloat16)
    b = torch.randn((n, n), generator=g, device=dev).to(torch.bfloat16)
    bias = torch.randn((n,), generator=g, device=dev).to(torch.bfloat16)
    got = ours(a, b, True, epilogue="bias_gelu", bias=bias)
    want = F.gelu(torch.addmm(bias.float(), a.float(), b.float()), approximate="tanh")
    err = ((got.float() - want).abs().max() / want.abs().max()).item()
    fns = {
        "ours-spread": lambda: ours(a, b, True, epilogue="bias_gelu", bias=bias),
        "ours-whole": lambda: ours(a, b, False, epilogue="bias_gelu", bias=bias),
        "addmm+gelu": lambda: F.gelu(torch.addmm(bias, a, b), approximate="tanh"),
        "cublaslt-gelu": lambda: torch._addmm_activation(bias, a, b, use_gelu=True),
    }
    res = interleaved(fns, 4)
    for name, (us, spread) in res.items():
        emit(dtype="bfloat16", shape="8192^3", op="bias_gelu", who=name, us=round(us, 1),
             vs_addmm_gelu=round(res["addmm+gelu"][0] / us, 3), spread=round(spread, 4), max_rel_err=err)  # fmt: skip


if __name__ == "__main__":
    main()
