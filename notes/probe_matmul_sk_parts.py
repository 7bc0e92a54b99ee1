"""Probe: where the persistent GEMM's stream-K tail loses its time (H200, bf16, 4096³ and 8192³).

Runs against ``kernels/matmul.py`` as it was at 75ac73d (``_tile_product``, ``stream_k_plan``;
the stream-K tail was removed after this probe, notes/README.md "ninth session").

Why: spreading the last wave's K blocks over every program should save 3% at 4096³ and 8192³
(the last wave leaves SMs idle for a tile-time), but it cost 26-30 µs at 4096³ and did not
save the 3% at 8192³ under Nsight Compute (notes/2026-12-03-probe-matmul-streamk-*.log,
notes/2026-12-03-ncu-matmul-streamk-6cc31e8.txt).  Here the tail phase alone, as a kernel of
its own (the shipped kernel's stream-K loop with the whole tiles left out), in three forms:

* ``full``: as shipped: each piece's partial stored, counted in, the last piece sums them;
* ``no-partials``: the same pieces' products, each stored straight to c (a wrong result:
  this times the products alone, without the partial tiles' traffic);
* ``owner-waits``: the tile's first program waits for the others' partials and adds them
  to its accumulator (half the partial traffic; ptxas spills ~340 bytes a thread for it);
* ``aligned``: as ``no-partials`` with every piece's K blocks moved to start at block 0 (the
  same number of blocks: the programs sharing A and B strips read them at the same K
  offsets at the same time, as whole tiles do).

beside a whole-tile reference: the persistent kernel at M = 4224 (four full waves of 132
tiles), whose time over 4 is one tile-time.  Device time by CUDA events, interleaved rounds,
median.  Exploration, not a study: JSON lines.

    python3 notes/probe_matmul_sk_parts.py > $OUT/probe_matmul_sk_parts.log
"""

from __future__ import annotations

import importlib
import json
import statistics

import torch
import triton
import triton.language as tl

from bench.timing import interleaved_us

mm = importlib.import_module("kernels.matmul")
ROUNDS = 9


@triton.jit
def _tail_kernel(
    a_ptr, b_ptr, c_ptr, ws_ptr, cnt_ptr, M: tl.int64, N: tl.int64, K: tl.int64, sk_tiles: tl.int64,
    sk_slots: tl.int64, MODE: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr,
):  # fmt: skip
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    num_tiles = (num_m * num_n).to(tl.int32)
    k_tiles = tl.cdiv(K, BLOCK_K).to(tl.int32)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BLOCK_K, BLOCK_N])
    num_dp = num_tiles - sk_tiles.to(tl.int32)
    pid = tl.program_id(0).to(tl.int64)
    total = sk_tiles * k_tiles
    start = pid * total // NUM_SMS
    end = (pid + 1) * total // NUM_SMS
    first = start // k_tiles
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    it = start
    while it < end:
        t = it // k_tiles
        k0 = it - t * k_tiles
        k1 = tl.minimum(k0 + (end - it), k_tiles)
        pid_m, pid_n = mm._grouped(num_dp + t, num_m, num_n, GROUP_M)
        ka, kb = k0, k1
        if MODE == 2:
            ka, kb = k0 - k0, k1 - k0
        acc = mm._tile_product(a_desc, b_desc, a_ptr, b_ptr, pid_m, pid_n, M, N, K, ka.to(tl.int32),
                               kb.to(tl.int32), K, 1, N, 1, 1, 1, 8, 8, 1, 8, 8, True, "tf32",
                               BLOCK_M, BLOCK_N, BLOCK_K, True)  # fmt: skip
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        owner0 = ((t * k_tiles + 1) * NUM_SMS - 1) // total
        owner1 = ((t + 1) * k_tiles * NUM_SMS - 1) // total
        if (MODE == 1 or MODE == 2) or owner0 == owner1:
            mm._finish(acc, rm, rn, M, N, c_ptr, N, c_ptr, c_ptr, 0, c_ptr, 0, 0, 0, False, 1, 8, 8)
        elif MODE == 3:  # the tile's first program sums it, waiting for the others' first pieces
            if pid != owner0:
                tl.store(ws_ptr + (pid * sk_slots + t - first) * (BLOCK_M * BLOCK_N) + offs, acc)
                tl.debug_barrier()
                tl.atomic_add(cnt_ptr + t, 1, sem="release")
            else:
                need = (owner1 - owner0).to(tl.int32)
                seen = tl.atomic_add(cnt_ptr + t, 0, sem="acquire")
                while seen < need:
                    seen = tl.atomic_add(cnt_ptr + t, 0, sem="acquire")
                for q in range(owner0 + 1, owner1 + 1):
                    slot = q * sk_slots + t - (q * total // NUM_SMS) // k_tiles
                    acc += tl.load(ws_ptr + slot * (BLOCK_M * BLOCK_N) + offs, cache_modifier=".cg")
                tl.store(cnt_ptr + t, 0)
                mm._finish(acc, rm, rn, M, N, c_ptr, N, c_ptr, c_ptr, 0, c_ptr, 0, 0, 0, False, 1, 8, 8)
        else:
            tl.store(ws_ptr + (pid * sk_slots + t - first) * (BLOCK_M * BLOCK_N) + offs, acc)
            tl.debug_barrier()
            arrived = tl.atomic_add(cnt_ptr + t, 1, sem="acq_rel")
            if arrived.to(tl.int64) == owner1 - owner0:
                whole = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
                for q in range(owner0, owner1 + 1):
                    slot = q * sk_slots + t - (q * total // NUM_SMS) // k_tiles
                    whole += tl.load(ws_ptr + slot * (BLOCK_M * BLOCK_N) + offs, cache_modifier=".cg")
                tl.store(cnt_ptr + t, 0)
                mm._finish(whole, rm, rn, M, N, c_ptr, N, c_ptr, c_ptr, 0, c_ptr, 0, 0, 0, False, 1, 8, 8)
        it = t * k_tiles + k1


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def main() -> None:
    mm._ensure_allocator()
    for n in (4096, 8192):
        probe(n)


def probe(n: int) -> None:
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    cfg = mm.PERSISTENT_CONFIG
    if True:
        g = torch.Generator(device=dev).manual_seed(0)
        a = torch.randn((n, n), generator=g, device=dev).to(torch.bfloat16)
        a_full = torch.randn((n + n // 32, n), generator=g, device=dev).to(torch.bfloat16)  # M = 4224 / 8448
        b = torch.randn((n, n), generator=g, device=dev).to(torch.bfloat16)
        c = torch.empty((n, n), device=dev, dtype=torch.bfloat16)
        tiles = (n // cfg.block_m) * (n // cfg.block_n)
        k_tiles = n // cfg.block_k
        sk, slots = mm.stream_k_plan(tiles, k_tiles, sms)
        ws = torch.empty(sms * slots * cfg.block_m * cfg.block_n, device=dev, dtype=torch.float32)
        cnt = torch.zeros(max(sk, 1), device=dev, dtype=torch.int32)

        def tail(mode: int) -> None:
            _tail_kernel[(sms,)](a, b, c, ws, cnt, n, n, n, sk, slots, mode, cfg.block_m, cfg.block_n, cfg.block_k,
                                 cfg.group_m, sms, num_warps=cfg.num_warps, num_stages=cfg.num_stages)  # fmt: skip

        want = torch.mm(a.float(), b.float())
        tail(3)
        tail(3)  # twice: the counters must be back at zero
        c3 = c.clone()
        c.zero_()
        tail(0)
        done = torch.zeros(n // cfg.block_m, n // cfg.block_n, dtype=torch.bool)
        for t in range(sk):  # only the tail's tiles were written
            pm, pn = _grouped_host(tiles - sk + t, n // cfg.block_m, n // cfg.block_n, cfg.group_m)
            done[pm, pn] = True
        mask = done.repeat_interleave(cfg.block_m, 0).repeat_interleave(cfg.block_n, 1).to(dev)
        err = ((c.float() - want).abs()[mask].max() / want.abs().max()).item()
        err3 = ((c3.float() - want).abs()[mask].max() / want.abs().max()).item()
        fns = {
            "whole-4-waves": lambda: mm.matmul(a_full, b, variant="persistent"),
            "tail-full": lambda: tail(0),
            "tail-no-partials": lambda: tail(1),
            "tail-aligned": lambda: tail(2),
            "tail-owner-waits": lambda: tail(3),
        }
        times = interleaved_us(fns, 20, ROUNDS)
        tile_us = statistics.median(times["whole-4-waves"]) / (4 if n == 4096 else 16)
        for name, ts in times.items():
            us = statistics.median(ts)
            emit(n=n, who=name, us=round(us, 1), tile_us=round(tile_us, 1), tail_tiles=sk,
                 tail_share_of_a_tile=round(sk * k_tiles / sms / k_tiles, 3), in_tile_times=round(us / tile_us, 3),
                 spread=round(max(ts) / min(ts) - 1, 4), tail_err=err, owner_waits_err=err3)  # fmt: skip


def _grouped_host(tile: int, num_m: int, num_n: int, group_m: int) -> tuple[int, int]:
    per_group = group_m * num_n
    first_m = tile // per_group * group_m
    size_m = min(num_m - first_m, group_m)
    return first_m + (tile % per_group) % size_m, (tile % per_group) // size_m


if __name__ == "__main__":
    main()
