"""Probe (2026-12-04, twenty-first session): split-K in one launch, for decode products.

Why: split-K (kernels.matmul, variant ``split_k``) launches two kernels a call, the partial
products into an fp32 workspace and then their sum with the epilogue, and takes the
workspace from the allocator.  Over the stored runs since its tile last changed
(notes/score_decode_rule.py, log 2026-12-04g-score-decode-rule-9c6d184.log) it ran 1.3-1.8x
ahead of the autotuned kernel on the device at 1, 16 and 64 x 4096x4096, but up to 1.87x
behind it in eager calls, so the dispatch now picks it at K = 4096 only for calls captured in
a CUDA graph.  One launch would remove the second kernel's host cost and its launch gap on the
device: each program writes its partial, counts itself in on a per-tile counter (release),
and the program that arrives last (acquire) sums the tile's partials in split order, runs the
epilogue, stores, and resets the counter for the next call.  Summed in the same order from
zero as the reduce kernel, the result should be bitwise the two-launch split-K's.  No
program waits on another, so no cooperative launch is needed (the persistent kernel's split
tail waits: every range's program shares the sum).

The counters: one int32 per output tile, zero between calls, one buffer per device and
stream (two streams never share one), as kernels.matmul's _COUNTERS for the split tail.

Checks, then times (interleaved rounds), at decode shapes against weights 4096x4096 (where
the eager rule keeps the autotuned kernel), 14336x4096, 4096x14336 and 8192x28672:

- correctness against float64 and bitwise equality with ``matmul(variant="split_k")``, the
  epilogues included, in eager calls (the timing below replays it from a CUDA graph, unchecked);
- device time: ``CALLS`` calls captured in one graph, replays timed by CUDA events;
- the eager call: ``bench.timing.rotated_loops_us`` (host and device together);
- beside two-launch split-K, the autotuned kernel and cuBLAS (``torch.mm``).

On the CPU (``TRITON_INTERPRET=1 python notes/probe_split_one_launch.py --check``) it checks
only the first point, at small odd shapes through the interpreter (programs run one after
another there, so only the last program's sum is exercised, not the ordering).

    python3 notes/probe_split_one_launch.py > $OUT/probe_split_one_launch.log
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, ".")

from bench import timing
from kernels.plans import cdiv

km = importlib.import_module("kernels.matmul")  # the package exports a function of this name
_split_partial, _finish = km._split_partial, km._finish

ROUNDS = 9
CALLS = 20
EAGER_CALLS = 200
SHAPES = [(m, 4096, 4096) for m in (1, 16, 64, 128)] + [
    (1, 14336, 4096), (16, 14336, 4096), (1, 4096, 14336), (16, 4096, 14336), (64, 4096, 14336), (8, 8192, 28672),
]  # fmt: skip


@triton.jit(do_not_specialize=["M", "N", "K", "k_per_split", "splits", "s_am", "s_ak", "s_bk", "s_bn", "s_cm",
                               "s_bias", "s_rm", "s_rn"])  # fmt: skip
def split_one_launch_kernel(
    a_ptr, b_ptr, ws_ptr, count_ptr, c_ptr, pre_ptr, bias_ptr, res_ptr, M: tl.int64, N: tl.int64, K: tl.int64,
    k_per_split: tl.int64, splits: tl.int64, s_am: tl.int64, s_ak: tl.int64, s_bk: tl.int64, s_bn: tl.int64,
    s_cm: tl.int64, s_bias: tl.int64, s_rm: tl.int64, s_rn: tl.int64,
    A_LAYOUT: tl.constexpr, B_LAYOUT: tl.constexpr, A_VEC: tl.constexpr, B_VEC: tl.constexpr,
    M_VEC: tl.constexpr, C_VEC: tl.constexpr, K_VEC: tl.constexpr, EVEN_K: tl.constexpr,
    PRECISION: tl.constexpr, R_LAYOUT: tl.constexpr, R_VEC: tl.constexpr, EPILOGUE: tl.constexpr,
    STORE_PRE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):  # fmt: skip
    # Program (tile, split): the fp32 partial of its K range to ws[split] (as _mm_split_kernel),
    # then the tile's counter; the last of the tile's ``splits`` programs to arrive reads every
    # partial back (.cg: written by other SMs, past L1), sums them in split order from zero (the
    # reduce kernel's order: the same bits), runs the epilogue and resets the counter.
    tile = tl.program_id(0)
    acc, split, rm, rn, n, mask = _split_partial(a_ptr, b_ptr, M, N, K, k_per_split, s_am, s_ak, s_bk, s_bn,
                                                 A_LAYOUT, B_LAYOUT, A_VEC, B_VEC, M_VEC, C_VEC, K_VEC, EVEN_K,
                                                 PRECISION, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)  # fmt: skip
    off = rm[:, None] * n + rn[None, :]
    tl.store(ws_ptr + split * M * n + off, acc, mask=mask)
    tl.debug_barrier()  # every warp's stores issued before the release below
    arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel", scope="gpu")
    if arrived == splits - 1:
        tot = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in range(0, splits):
            tot += tl.load(ws_ptr + s * M * n + off, mask=mask, other=0.0, cache_modifier=".cg")
        _finish(tot, rm, rn, M, N, c_ptr, s_cm, pre_ptr, bias_ptr, s_bias, res_ptr, s_rm, s_rn,
                EPILOGUE, STORE_PRE, R_LAYOUT, R_VEC, C_VEC)  # fmt: skip
        tl.atomic_xchg(count_ptr + tile, 0, sem="relaxed", scope="gpu")


_COUNTERS: dict[tuple[object, int], torch.Tensor] = {}


def _counters(device: torch.device, tiles: int) -> torch.Tensor:
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device, stream)
    have = _COUNTERS.get(key)
    if have is None or have.numel() < tiles:
        have = _COUNTERS[key] = torch.zeros(max(tiles, 1024), dtype=torch.int32, device=device)
    return have


def split_one_launch(
    a: torch.Tensor, b: torch.Tensor, epilogue: str | None = None, bias: torch.Tensor | None = None,
    residual: torch.Tensor | None = None,
) -> torch.Tensor:  # fmt: skip
    """``epilogue(a @ b)`` for 16-bit ``a [M, K]`` (K contiguous) and ``b [K, N]`` of any
    strides, by one-launch split-K with kernels.matmul's split-K tile and split count."""
    (m, k), n = a.shape, b.shape[1]
    cfg = km.split_config(m, a.dtype)
    sms = km.sm_count(a.device)  # 132 for CPU tensors, as kernels.matmul counts them
    splits, k_per_split = km.split_count(m, n, k, cfg, sms)
    out = a.new_empty((m, n))
    ws = torch.empty((splits, m, n), device=a.device, dtype=torch.float32)
    tiles = cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n)
    count = _counters(a.device, tiles)
    a_lay, s_am, s_ak, a_vec = km._layout(a)
    b_lay, s_bk, s_bn, b_vec = km._layout(b)
    vec = 16 // out.element_size()
    c_vec = vec if n % vec == 0 else 1
    m_vec = vec if a_lay == km._OUTER and m % vec == 0 else 1
    k_vec = vec if k % vec == 0 else 1
    r_lay, s_rm, s_rn, r_vec = km._layout(residual) if residual is not None else (km._INNER, 0, 1, 1)
    split_one_launch_kernel[(tiles, splits)](
        a, b, ws, count, out, out, bias if bias is not None else out, residual if residual is not None else out,
        m, n, k, k_per_split, splits, s_am, s_ak, s_bk, s_bn, out.stride(0),
        bias.stride(0) if bias is not None else 0, s_rm, s_rn,
        A_LAYOUT=a_lay, B_LAYOUT=b_lay, A_VEC=a_vec, B_VEC=b_vec, M_VEC=m_vec, C_VEC=c_vec, K_VEC=k_vec,
        EVEN_K=k % cfg.block_k == 0, PRECISION=km._precision_name(a.dtype, None), R_LAYOUT=r_lay, R_VEC=r_vec,
        EPILOGUE=km._EPILOGUE_CODE[epilogue], STORE_PRE=False, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
        BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m, num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )  # fmt: skip
    return out


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def check(device: str, shapes: list[tuple[int, int, int]], dtypes: list[torch.dtype]) -> bool:
    """Against float64 and bitwise against two-launch split-K, each epilogue; True if all pass."""
    ok = True
    g = torch.Generator(device=device).manual_seed(0)
    for m, n, k in shapes:
        for dtype in dtypes:
            a = torch.randn((m, k), generator=g, device=device).to(dtype)
            w = (torch.randn((n, k), generator=g, device=device) * k**-0.5).to(dtype)
            bias = torch.randn((n,), generator=g, device=device).to(dtype)
            residual = torch.randn((m, n), generator=g, device=device).to(dtype)
            for epilogue in (None, "bias", "bias_gelu", "residual"):
                kw = {"bias": bias} if epilogue in ("bias", "bias_gelu") else {}
                kw |= {"residual": residual} if epilogue == "residual" else {}
                got = split_one_launch(a, w.T, epilogue, **kw)
                two = km.matmul(a, w.T, variant="split_k", epilogue=epilogue, **kw)
                z = a.double() @ w.double().T + (bias.double() if "bias" in kw else 0)
                z = torch.nn.functional.gelu(z, approximate="tanh") if epilogue == "bias_gelu" else z
                z = z + residual.double() if epilogue == "residual" else z
                err = ((got.double() - z).norm() / z.norm()).item()
                same = torch.equal(got, two)
                ok &= same and err < 1e-2 and bool(torch.isfinite(got).all())
                splits = km.split_count(m, n, k, km.split_config(m, dtype), km.sm_count(a.device))[0]
                emit(check=f"{m}x{n}x{k}", dtype=str(dtype), epilogue=epilogue, splits=splits, rel_l2=round(err, 6),
                     bitwise=same)  # fmt: skip
    return ok


def main() -> None:
    if "--check" in sys.argv:
        shapes = [(1, 160, 96), (13, 200, 136), (33, 72, 264)]
        sys.exit(0 if check("cpu", shapes, [torch.bfloat16, torch.float16]) else 1)
    emit(gpu=torch.cuda.get_device_name(), sms=km.sm_count(torch.device("cuda")), commit=sys.argv[1:] or None)
    if not check("cuda", [(1, 4096, 4096), (16, 4096, 4096), (33, 4096, 14336), (64, 8192, 6144)], [torch.bfloat16]):
        emit(error="a check failed: no timings")
        sys.exit(1)
    g = torch.Generator(device="cuda").manual_seed(1)
    for m, n, k in SHAPES:
        time_shape(m, n, k, g)


def time_shape(m: int, n: int, k: int, g: torch.Generator) -> None:
    a = torch.randn((m, k), generator=g, device="cuda").to(torch.bfloat16)
    w = (torch.randn((n, k), generator=g, device="cuda") * k**-0.5).to(torch.bfloat16)
    # several weights of this shape in rotation, so that each call reads its weight from HBM
    ws = [w] + [w.clone() for _ in range(max(1, 2 * 50 * 2**20 // w.nbytes))]
    turn = iter(range(10**9))

    def pick() -> torch.Tensor:
        return ws[next(turn) % len(ws)].T

    fns = {
        "split_k one launch": lambda: split_one_launch(a, pick()),
        "split_k": lambda: km.matmul(a, pick(), variant="split_k"),
        "autotuned": lambda: km.matmul(a, pick(), variant="autotuned"),
        "cublas": lambda: torch.mm(a, pick()),
    }
    replays = {name: timing.graphed(fn, CALLS) for name, fn in fns.items()}
    device = {name: statistics.median(x) / CALLS for name, x in timing.interleaved_us(replays, 1, ROUNDS).items()}
    eager = timing.rotated_loops_us(fns, EAGER_CALLS, ROUNDS, warmup=3)
    emit(shape=f"{m}x{n}x{k}", weights=len(ws), device_us={x: round(y, 2) for x, y in device.items()},
         eager_us={x: y[1] for x, y in eager.items()})  # fmt: skip


if __name__ == "__main__":
    main()
