"""Probe: single-read softmax plans for wide rows (H200, bf16 forward, device time from CUDA-graph
replay, cold L2 by rotating through input sets).  Exploration, not a study: JSON lines per
configuration; published numbers come from `python -m bench run softmax` / `rowgrid`.

Two ideas, both reading the input once (the looped and two-launch split plans read it twice,
the second time hopefully from L2):

* ``hold``: a whole row per program, held in registers *in its 16-bit storage type* (half the
  registers of fp32), the exp computed twice (statistics pass, output pass) from a second
  conversion the compiler cannot merge with the first.  Half the registers is what lets two
  programs share an SM, so one row's reads overlap another's writes.
* ``resident``: few wide rows cut into chunks, one program per chunk holding it in registers,
  the row's programs swapping (max, sum) through global memory at a counter barrier that
  resets itself; launched cooperatively (the driver refuses a grid that cannot be resident at
  once, so it cannot deadlock) in waves of whole rows.

    python notes/probe_resident.py > $OUT/probe-resident.log
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, ".")
from bench.timing import Warmup, make_timer, rotation_sets
from kernels.softmax import forward_rows, plan_for

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def ex2(x):
    return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def widen_again(raw, DISTINCT: tl.constexpr):
    # bf16 -> fp32 by moving the bits up: the same value as raw.to(fp32), but an expression the
    # compiler does not recognise as the first conversion, so it recomputes it instead of
    # keeping 32-bit copies of the whole row alive across the reduction.
    if DISTINCT:
        return (raw.to(tl.uint16, bitcast=True).to(tl.uint32) << 16).to(tl.float32, bitcast=True)
    else:
        return raw.to(tl.float32)


@triton.jit
def hold_block(x_ptr, y_ptr, stride, WIDTH: tl.constexpr, BLOCK: tl.constexpr, DISTINCT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    k = tl.arange(0, BLOCK)
    raw = tl.load(x_ptr + row * stride + k, mask=k < WIDTH, other=float("-inf"))
    m = tl.max(raw.to(tl.float32), 0)
    s = tl.sum(ex2((raw.to(tl.float32) - m) * LOG2E), 0)
    c = m * LOG2E + tl.log2(s)
    y = ex2(widen_again(raw, DISTINCT) * LOG2E - c)
    tl.store(y_ptr + row * stride + k, y.to(tl.bfloat16), mask=k < WIDTH)


@triton.jit
def _again(w, ASM: tl.constexpr):
    # Not pure: the compiler may not merge it with the first pass's identical unpacking, so the
    # output pass unpacks again instead of keeping fp32 copies of the row alive.
    return tl.inline_asm_elementwise(ASM, "=r,r", [w], dtype=tl.uint32, is_pure=False, pack=1)


@triton.jit
def hold_packed(x_ptr, y_ptr, stride, WORDS: tl.constexpr, BLOCK: tl.constexpr):
    # The row as 32-bit words of two bf16 each: registers really hold two values apiece.
    row = tl.program_id(0).to(tl.int64)
    k = tl.arange(0, BLOCK)
    xw = x_ptr.to(tl.pointer_type(tl.uint32))
    yw = y_ptr.to(tl.pointer_type(tl.uint32))
    live = k < WORDS
    w = tl.load(xw + row * (stride // 2) + k, mask=live, other=0)
    lo = tl.where(live, (w << 16).to(tl.float32, bitcast=True), float("-inf"))
    hi = tl.where(live, (w & 0xFFFF0000).to(tl.float32, bitcast=True), float("-inf"))
    m = tl.maximum(tl.max(lo, 0), tl.max(hi, 0))
    lo1 = tl.where(live, _again(w, "shl.b32 $0, $1, 16;").to(tl.float32, bitcast=True), float("-inf"))
    hi1 = tl.where(live, _again(w, "and.b32 $0, $1, 0xFFFF0000;").to(tl.float32, bitcast=True), float("-inf"))
    s = tl.sum(ex2((lo1 - m) * LOG2E), 0) + tl.sum(ex2((hi1 - m) * LOG2E), 0)
    c = m * LOG2E + tl.log2(s)
    lo2 = _again(w, "shl.b32 $0, $1, 16;").to(tl.float32, bitcast=True)
    hi2 = _again(w, "and.b32 $0, $1, 0xFFFF0000;").to(tl.float32, bitcast=True)
    ylo = ex2(lo2 * LOG2E - c).to(tl.bfloat16).to(tl.uint16, bitcast=True).to(tl.uint32)
    yhi = ex2(hi2 * LOG2E - c).to(tl.bfloat16).to(tl.uint16, bitcast=True).to(tl.uint32)
    tl.store(yw + row * (stride // 2) + k, ylo | (yhi << 16), mask=live)


@triton.jit
def resident_split(x_ptr, y_ptr, stats_ptr, sync_ptr, n_rows, stride, WIDTH: tl.constexpr, CHUNK: tl.constexpr,
                   CHUNKS: tl.constexpr, WAVE: tl.constexpr, WAVES: tl.constexpr, DISTINCT: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    CP2: tl.constexpr = triton.next_power_of_2(CHUNKS)
    for wv in range(WAVES):
        item = wv * WAVE + pid
        row = (item // CHUNKS).to(tl.int64)
        chunk = item % CHUNKS
        if row < n_rows:
            k = chunk * CHUNK + tl.arange(0, CHUNK)
            raw = tl.load(x_ptr + row * stride + k, mask=k < WIDTH, other=float("-inf"))
            m = tl.max(raw.to(tl.float32), 0)
            shift = tl.where(m == float("-inf"), 0.0, m)
            s = tl.sum(ex2((raw.to(tl.float32) - shift) * LOG2E), 0)
            slot = stats_ptr + (row * CHUNKS + chunk) * 2
            tl.store(slot, m)
            tl.store(slot + 1, s)
            tl.debug_barrier()
            cnt = sync_ptr + row * 2
            tl.atomic_add(cnt, 1, sem="release")
            arrived = tl.atomic_add(cnt, 0, sem="acquire")
            while arrived < CHUNKS:
                arrived = tl.atomic_add(cnt, 0, sem="acquire")
            c = tl.arange(0, CP2)
            mc = tl.load(stats_ptr + (row * CHUNKS + c) * 2, mask=c < CHUNKS, other=float("-inf"), cache_modifier=".cg")
            sc = tl.load(stats_ptr + (row * CHUNKS + c) * 2 + 1, mask=c < CHUNKS, other=0.0, cache_modifier=".cg")
            mm = tl.max(mc, 0)
            ss = tl.sum(sc * ex2((mc - mm) * LOG2E), 0)
            gone = tl.atomic_add(cnt + 1, 1, sem="acq_rel")
            if gone == CHUNKS - 1:  # the row's last program out resets the counters for the next call
                tl.atomic_xchg(cnt, 0)
                tl.atomic_xchg(cnt + 1, 0)
            cc = mm * LOG2E + tl.log2(ss)
            y = ex2(widen_again(raw, DISTINCT) * LOG2E - cc)
            tl.store(y_ptr + row * stride + k, y.to(tl.bfloat16), mask=k < WIDTH)


def blocks_per_sm(n_regs: int, warps: int, shared: int) -> int:
    per_warp = -(-n_regs * 32 // 256) * 256
    by_regs = 65536 // (warps * per_warp) if n_regs else 32
    by_threads = 2048 // (32 * warps)
    by_smem = (228 * 1024) // max(shared + 1024, 1)
    return max(0, min(by_regs, by_threads, by_smem, 32))


def compiled_info(ck, warps: int) -> dict:
    ck._init_handles()
    return {"regs": ck.n_regs, "spills": ck.n_spills, "per_sm": blocks_per_sm(ck.n_regs, warps, ck.metadata.shared)}


def time_us(fn_for_set, sets: int) -> float:
    timer, _eager = make_timer(fn_for_set, sets, target_ms=0.5)
    samples = [timer.sample_us() for _ in range(7)]
    timer.release()
    return statistics.median(samples)


def emit(**kw) -> None:
    print(json.dumps(kw), flush=True)


def run(rows: int, cols: int, configs: list[tuple], warm: Warmup, copy_gbps: float) -> None:
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(rows * 7919 + cols)
    nbytes = rows * cols * 2 * 2
    sets = rotation_sets(nbytes, torch.cuda.get_device_properties(0).L2_cache_size)
    xs = [torch.randn(rows, cols, device=dev, dtype=torch.bfloat16, generator=gen) * 3 for _ in range(sets)]
    ys = [torch.empty_like(x) for x in xs]
    ref = torch.softmax(xs[0].double(), dim=-1)
    floor = nbytes / copy_gbps / 1e3
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for cfg in configs:
        kind = cfg[0]
        name = "-".join(str(c) for c in cfg)
        warm.maybe_burst()
        info: dict = {}
        try:
            if kind == "torch":

                def fn(i: int) -> None:
                    ys[i].copy_(torch.softmax(xs[i], dim=-1))

            elif kind == "planner":
                plan = plan_for(xs[0], ys[0])[0]
                name = f"planner:{plan.label}"

                def fn(i: int, plan=plan) -> None:
                    forward_rows(xs[i], ys[i], plan)

            elif kind == "hold":
                _, block, warps, distinct = cfg
                ck = hold_block.warmup(xs[0], ys[0], cols, WIDTH=cols, BLOCK=block, DISTINCT=distinct,
                                       num_warps=warps, grid=(rows,))  # fmt: skip
                ck._init_handles()
                info = compiled_info(ck, warps)

                def fn(i: int, block=block, warps=warps, distinct=distinct) -> None:
                    hold_block[(rows,)](xs[i], ys[i], cols, WIDTH=cols, BLOCK=block, DISTINCT=distinct, num_warps=warps)

            elif kind == "pack":
                _, block, warps = cfg
                words = cols // 2
                ck = hold_packed.warmup(xs[0], ys[0], cols, WORDS=words, BLOCK=block, num_warps=warps, grid=(rows,))
                ck._init_handles()
                info = compiled_info(ck, warps)

                def fn(i: int, block=block, warps=warps, words=words) -> None:
                    hold_packed[(rows,)](xs[i], ys[i], cols, WORDS=words, BLOCK=block, num_warps=warps)

            else:  # resident
                _, chunk, warps, distinct = cfg
                chunks = -(-cols // chunk)
                stats = torch.empty(rows * chunks * 2, device=dev, dtype=torch.float32)
                sync = torch.zeros(rows * 2, device=dev, dtype=torch.int32)
                consts = dict(WIDTH=cols, CHUNK=chunk, CHUNKS=chunks, DISTINCT=distinct)
                ck = resident_split.warmup(xs[0], ys[0], stats, sync, rows, cols, WAVE=chunks, WAVES=1, **consts,
                                           num_warps=warps, grid=(1,), launch_cooperative_grid=True)  # fmt: skip
                ck._init_handles()
                per_sm = blocks_per_sm(ck.n_regs, warps, ck.metadata.shared)
                wave = (per_sm * sms // chunks) * chunks
                if wave == 0:
                    raise RuntimeError(f"{chunks} chunks cannot be resident at {per_sm} programs per SM")
                items = rows * chunks
                wave = min(wave, items)
                waves = -(-items // wave)
                info = {"regs": ck.n_regs, "spills": ck.n_spills, "per_sm": per_sm, "wave": wave, "waves": waves}

                def fn(i: int, wave=wave, waves=waves, warps=warps, consts=consts, stats=stats, sync=sync) -> None:
                    resident_split[(wave,)](xs[i], ys[i], stats, sync, rows, cols, WAVE=wave, WAVES=waves, **consts,
                                            num_warps=warps, launch_cooperative_grid=True)  # fmt: skip

            for i in range(sets):
                fn(i)
            torch.cuda.synchronize()
            err = (ys[0].double() - ref).abs().max().item()
            err_last = (ys[-1].double() - torch.softmax(xs[-1].double(), dim=-1)).abs().max().item()
            us = time_us(fn, sets)
            # after many graph replays the self-resetting barrier must still be right
            for i in range(sets):
                ys[i].fill_(7.0)
                fn(i)
            torch.cuda.synchronize()
            err_after = (ys[0].double() - ref).abs().max().item()
        except Exception as e:  # a configuration that does not compile or launch is reported
            emit(shape=f"{rows}x{cols}", config=name, error=repr(e)[:300], **info)
            torch.cuda.synchronize()
            continue
        emit(shape=f"{rows}x{cols}", config=name, us=round(us, 2), copy_share=round(floor / us, 3),
             max_abs_err=max(err, err_last, err_after), sets=sets, **info)  # fmt: skip
    xs.clear()
    ys.clear()
    torch.cuda.empty_cache()


def main() -> None:
    dev = torch.device("cuda")
    a = torch.empty(1 << 28, device=dev, dtype=torch.float32)
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        b.copy_(a)
    torch.cuda.synchronize()
    copy_gbps = 2 * a.numel() * 4 * 20 / (time.perf_counter() - t0) / 1e9
    del a, b
    emit(copy_GBps=round(copy_gbps, 1))
    warm = Warmup(dev)
    base = [("torch",), ("planner",)]
    resident = [("resident", c, w, 0) for c, w in ((4096, 4), (8192, 8), (16384, 16), (16384, 8))]
    for rows, cols in ((64, 131072), (8, 1048576), (32, 262144), (132, 65536), (100, 151936), (4, 32768)):
        run(rows, cols, base + resident, warm, copy_gbps)
    hold = [("hold", 32768, w, d) for w in (16, 32) for d in (0,)] + [("pack", 16384, w) for w in (4, 8, 16)]
    for rows, cols in ((8192, 32768), (4096, 32000), (1000, 32768)):
        run(rows, cols, base + hold, warm, copy_gbps)
    hold = [("hold", 65536, 32, 0)] + [("pack", 32768, w) for w in (8, 16, 32)]
    for rows, cols in ((4096, 50264), (2048, 65536)):
        run(rows, cols, base + hold, warm, copy_gbps)
    run(16384, 4096, [*base, ("hold", 4096, 4, 0), ("pack", 2048, 4)], warm, copy_gbps)


if __name__ == "__main__":
    main()
