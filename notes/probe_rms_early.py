"""Probe (2026-12-02, seventh session): RMSNorm with a residual, few wide rows, where the split
plan's apply pass reads back the h its reduce pass wrote (``RowOp.early_out2``) instead of
reading x and the residual a second time.  Exploration, not a study.

At 64 x 131072 bf16 the forward moves 67 MB (x, residual in; h, y out) and took 25.5 µs
cold in run rmsnorm-20261202T160625Z-8cdc8c2-quick (63% of copy), QuACK 21.2.  The split's
apply read 33.6 MB again, which L2 (50 MB) cannot keep beside the writes; h is 16.8 MB,
and just written.  The cost: y is computed from h as stored (rounded to bf16), as
``F.rms_norm(x + residual)`` does, instead of from the fp32 sum.

Device time, CUDA-graph replay, cold L2 (the study's timer), each variant checked against
float64 first.  ``early``: the operator as now built; ``reread``: the same plan with
``early_out2`` off (the plan before).

    python notes/probe_rms_early.py > $OUT/probe_rms_early.log
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import replace

import torch

sys.path.insert(0, ".")
sys.path.insert(0, "notes")
from probe_staged_split import copy_bandwidth  # the copy peak, measured the same way in every probe

from bench.timing import Warmup, make_timer, rotation_sets
from kernels._rowwise import RowExtras, run_rows
from kernels.rmsnorm import FORWARD, plan_for

SHAPES = ((64, 131072), (64, 131075), (32, 262144), (128, 131072), (8, 1048576), (256, 65536), (1024, 32768))
EPS = 1e-6


def emit(**kw: object) -> None:
    print(json.dumps(kw), flush=True)


def one_shape(rows: int, cols: int, copy: float, warm: Warmup) -> None:
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(rows * 31 + cols)
    nbytes = rows * cols * 2 * 4 + cols * 2
    sets = rotation_sets(nbytes, torch.cuda.get_device_properties(0).L2_cache_size)
    xs = [torch.randn(rows, cols, device=dev, generator=gen).bfloat16() for _ in range(sets)]
    rs = [torch.randn(rows, cols, device=dev, generator=gen).bfloat16() for _ in range(sets)]
    w = (torch.randn(cols, device=dev, generator=gen) * 0.1 + 1).bfloat16()
    ys = [torch.empty_like(x) for x in xs]
    hs = [torch.empty_like(x) for x in xs]
    hd = xs[0].double() + rs[0].double()
    y_ref = hd * (hd.pow(2).mean(-1, keepdim=True) + EPS).rsqrt() * w.double()
    split, vec, align = plan_for(xs[0], ys[0], "split")
    split = replace(split, one_launch=False)
    plans = {"split": split}
    for chunks in (split.chunks // 2, split.chunks * 2):
        if chunks >= 2 and chunks != split.chunks:
            plans[f"split-c{chunks}"] = replace(split, chunks=chunks, span=max(1, split.span * split.chunks // chunks))
    plans["one-launch"] = replace(split, one_launch=True)
    ops = {"early": FORWARD, "reread": replace(FORWARD, early_out2=None)}
    variants = {}
    for pname, plan in plans.items():
        for oname, op in ops.items():

            def fn(i: int, op=op, plan=plan) -> None:
                extras = RowExtras(c=rs[i], w=w, out2=hs[i], arg=EPS)
                run_rows(op, plan, xs[i], None, ys[i], align, vec, extras)

            variants[f"{oname}-{pname}"] = (fn, plan)

    def composed(i: int) -> torch.Tensor:
        return torch.nn.functional.rms_norm(xs[i] + rs[i], (cols,), w, EPS)

    variants["torch-composed"] = (composed, None)
    for name, (fn, plan) in variants.items():
        warm.maybe_burst()
        try:
            ys[0].fill_(float("nan"))
            hs[0].fill_(float("nan"))
            out = fn(0)
            torch.cuda.synchronize()
            got = out if isinstance(out, torch.Tensor) else ys[0]
            err = (got.double() - y_ref).abs().max().item()
            h_ok = True if out is not None else bool(torch.equal(hs[0], (xs[0].float() + rs[0].float()).bfloat16()))
            timer, _ = make_timer(fn, sets, target_ms=0.5)
            us = statistics.median(timer.sample_us() for _ in range(7))
            timer.release()
        except Exception as exc:  # reported, the probe goes on
            emit(shape=f"{rows}x{cols}", variant=name, error=repr(exc)[:400])
            continue
        emit(shape=f"{rows}x{cols}", variant=name, plan=plan.label if plan else None, us=round(us, 2),
             copy_share=round(nbytes / us / 1e3 / copy, 3), y_max_abs_err=err, h_exact=h_ok)  # fmt: skip


def main() -> None:
    copy = copy_bandwidth()
    emit(copy_GBps=round(copy, 1))
    warm = Warmup(torch.device("cuda"))
    for rows, cols in SHAPES:
        one_shape(rows, cols, copy, warm)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
