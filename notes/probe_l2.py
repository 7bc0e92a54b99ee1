"""Probe: where the wide-row softmax plans lose time on the H200 (bf16 forward, device time
from CUDA-graph replay, cold L2 by rotating input sets).  Exploration, not a study.

* ``looped``: the looped plan at rows of 32000-151936, block x warps x stages x evict.  At
  4cafc7f it ran twice, with ``LAB_ROW_STORE=`` and ``LAB_ROW_STORE=.cs`` (a knob, since
  removed, that stored row outputs with the streaming cache operator so that they would not
  push the first pass's reads out of L2 before the second pass reads them again).
* ``split``: few wide rows (64 x 131072 ...): the two-launch split, its reduce launch alone,
  and the one-launch split, over blocks, warps, blocks a chunk walks and (at 1d37497, an
  option since removed) pipelining stages of a chunk's loop.
* ``ncu``: one call of each named configuration after warm-up, between cudaProfilerStart
  and Stop, for ``ncu --profile-from-start off``.

    LAB_ROW_STORE=.cs python notes/probe_l2.py looped > $OUT/l2-cs.log
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, ".")
from bench.timing import Warmup, make_timer, rotation_sets
from kernels import _rowwise
from kernels.plans import RowPlan, split_geometry
from kernels.softmax import FORWARD, forward_rows, plan_for

STORE = os.environ.get("LAB_ROW_STORE", "")
LOOPED_SHAPES = [(4096, 50257), (8192, 32768), (4096, 151936), (4096, 32000), (2048, 65536)]
# (block, warps, stages, evict)
LOOPED = [(8192, 8, 1, True), (8192, 8, 2, True), (8192, 8, 1, False), (8192, 16, 1, True), (16384, 8, 1, True),
          (16384, 16, 1, True), (16384, 16, 2, True), (16384, 16, 1, False)]  # fmt: skip
SPLIT_SHAPES = [(64, 131072), (4, 32769), (64, 1048576), (128, 50257)]


def time_us(fn_for_set, sets: int) -> float:
    timer, _eager = make_timer(fn_for_set, sets, target_ms=0.5)
    samples = [timer.sample_us() for _ in range(7)]
    timer.release()
    return statistics.median(samples)


def copy_peak() -> float:
    a = torch.empty(1 << 28, device="cuda", dtype=torch.float32)
    b = torch.empty_like(a)
    b.copy_(a)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        b.copy_(a)
    torch.cuda.synchronize()
    return 2 * a.numel() * 4 * 20 / (time.perf_counter() - t0) / 1e9


def reduce_only(plan: RowPlan):
    """The split's first launch alone (its statistics into a scratch buffer)."""

    def run(x: torch.Tensor, y: torch.Tensor) -> None:
        vec, align = _rowwise.row_layout((x, y))
        step = _rowwise._steps(FORWARD, plan, x.shape[1], vec, align, x.dtype, y.dtype)[0]
        stats = torch.empty(x.shape[0], plan.chunks, 2, device=x.device)
        s = x.stride(0)
        step.launcher([x, x, x, x, stats], x.shape[0], (s, s, s, s, s), step.consts, plan.num_warps, 1, plan.chunks)

    return run


def run_shape(rows: int, cols: int, plans: dict, warm: Warmup, copy_gbps: float) -> None:
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(rows * 7919 + cols)
    nbytes = rows * cols * 2 * 2
    sets = rotation_sets(nbytes, torch.cuda.get_device_properties(0).L2_cache_size)
    xs = [torch.randn(rows, cols, device=dev, dtype=torch.bfloat16, generator=gen) * 3 for _ in range(sets)]
    ys = [torch.empty_like(x) for x in xs]
    ref = torch.softmax(xs[0].double(), dim=-1)
    floor = nbytes / copy_gbps / 1e3
    for name, plan in plans.items():
        warm.maybe_burst()
        _rowwise.SPLIT_PDL = True
        try:
            if plan is None:

                def fn(i: int) -> None:
                    torch.softmax(xs[i], dim=-1)

                ys[0] = torch.softmax(xs[0], dim=-1)
            elif callable(plan):

                def fn(i: int, plan=plan) -> None:
                    plan(xs[i], ys[i])

            else:

                def fn(i: int, plan: RowPlan = plan) -> None:
                    forward_rows(xs[i], ys[i], plan)

            ys[0].fill_(float("nan"))
            fn(0)
            torch.cuda.synchronize()
            err = (ys[0].double() - ref).abs().max().item()
            us = time_us(fn, sets)
        except Exception as e:  # a configuration that does not compile or launch is reported
            print(json.dumps({"shape": f"{rows}x{cols}", "config": name, "error": repr(e)[:300]}), flush=True)
            continue
        row = {"shape": f"{rows}x{cols}", "config": name, "store": STORE, "us": round(us, 2)}
        print(json.dumps({**row, "copy_share": round(floor / us, 3), "max_abs_err": err, "sets": sets}), flush=True)
    xs.clear()
    ys.clear()
    torch.cuda.empty_cache()


def looped_plans(rows: int, cols: int) -> dict:
    x = torch.empty(rows, cols, device="cuda", dtype=torch.bfloat16)
    planned = plan_for(x, x)[0]
    plans: dict = {"torch": None, f"planner:{planned.label}": planned}
    for block, warps, stages, evict in LOOPED:
        name = f"looped-{block}w{warps}s{stages}" + ("" if evict else "-noevict")
        plans[name] = RowPlan("looped", block, warps, stages=stages, evict=evict)
    return plans


def split_plans(rows: int, cols: int) -> dict:
    x = torch.empty(rows, cols, device="cuda", dtype=torch.bfloat16)
    planned = plan_for(x, x)[0]
    plans: dict = {"torch": None, f"planner:{planned.label}": planned}
    pad = 7 if rows > 1 and cols % 8 else 0
    # (block, warps, blocks a chunk walks, pipelining stages)
    for block, warps, span, stages in (
        (2048, 4, 1, 1),
        (4096, 4, 1, 1),
        (4096, 8, 1, 1),
        (8192, 8, 1, 1),
        (8192, 16, 1, 1),
        (16384, 16, 1, 1),
        (4096, 8, 4, 1),
        (2048, 4, 4, 1),
    ):
        chunks, span = split_geometry(cols + pad, block * span, block)
        name = f"{block}x{span}w{warps}s{stages}"
        plan = RowPlan("split", block, warps, chunks=chunks, span=span, stages=stages)
        plans[f"split-{name}"] = plan
        plans[f"reduce-only-{name}"] = reduce_only(plan)
        plans[f"one-launch-{name}"] = RowPlan("split", block, warps, chunks=chunks, span=span, stages=stages,
                                              one_launch=True)  # fmt: skip
    return plans


def host(rows: int, cols: int) -> None:
    """Host µs per eager forward call (no waiting) under the two-launch and one-launch split
    (at 0a038a5 through a policy field since renamed; now ``one_launch_bytes``)."""
    from dataclasses import replace

    from bench.studies.dispatch import host_loop_us
    from kernels._rowwise import RowCall
    from kernels.softmax import POLICY

    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    out = {"shape": f"{rows}x{cols}"}
    for name, policy in (("two", POLICY), ("one", replace(POLICY, one_launch_bytes=1 << 40))):
        call = RowCall(FORWARD, policy)
        call(x, None, y)
        torch.cuda.synchronize()
        err = (y.double() - torch.softmax(x.double(), -1)).abs().max().item()
        prepared = call.prepare(x, None, y)
        out[f"{name}:plan"] = prepared.plan.label
        out[f"{name}:err"] = err
        launch = statistics.median(host_loop_us(lambda call=call: call(x, None, y)) for _ in range(7))
        out[f"{name}:launch_us"] = round(launch, 2)
        out[f"{name}:call_us"] = round(
            statistics.median(host_loop_us(lambda call=call: call(x, None, torch.empty_like(x))) for _ in range(7)), 2
        )
    out["torch:call_us"] = round(statistics.median(host_loop_us(lambda: torch.softmax(x, -1)) for _ in range(7)), 2)
    print(json.dumps(out), flush=True)


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "looped"
    copy_gbps = copy_peak()
    print(json.dumps({"copy_GBps": round(copy_gbps, 1), "store": STORE}), flush=True)
    warm = Warmup(torch.device("cuda"))
    if mode == "looped":
        for rows, cols in LOOPED_SHAPES:
            run_shape(rows, cols, looped_plans(rows, cols), warm, copy_gbps)
    elif mode == "split":
        for rows, cols in SPLIT_SHAPES:
            run_shape(rows, cols, split_plans(rows, cols), warm, copy_gbps)
    elif mode == "host":
        for rows, cols in ((4, 32769), (64, 131072), (1, 65536)):
            host(rows, cols)
    elif mode == "ncu":
        for rows, cols, plan in (
            (4096, 50257, RowPlan("looped", 8192, 8)),
            (4096, 50257, RowPlan("looped", 16384, 16)),
            (64, 131072, RowPlan("split", 2048, 4, chunks=64)),
        ):
            x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
            y = torch.empty_like(x)
            for _ in range(3):
                forward_rows(x, y, plan)
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStart()
            forward_rows(x, y, plan)
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()


if __name__ == "__main__":
    main()
