"""Probe: where an eager softmax call's host time goes at 4 x 32769 bf16 (the one-launch
split), piece by piece, against the two-launch split and torch.softmax, in one process on one
host (H200 machine).  Exploration, not a study.

Why: the dispatch runs at 8cdc8c2 and 4fd73ce put the forward call at 25.5-26.2 µs where
ab65958 had 17.9; every piece of ours and torch's grew with it there, so part of it is the host.
Here each piece is timed in one process, so that ratios can be compared.

    python3 notes/probe_host_pieces.py > $OUT/probe_host_pieces.log
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import time

import torch

sys.path.insert(0, ".")
import kernels
from kernels import _rowwise
from kernels._launch import capturing, current_stream

sm = sys.modules["kernels.softmax"]


def host_us(fn, n: int = 100, reps: int = 15) -> float:
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        out.append((t1 - t0) / n * 1e6)
    return round(statistics.median(out), 2)


def events_us(fn, n: int = 100) -> float:
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    e.synchronize()
    return round(s.elapsed_time(e) * 1000 / n, 2)


def main() -> None:
    for shape in ((4, 32769), (64, 131072), (32, 127)):
        pieces(shape)


def pieces(shape: tuple[int, int]) -> None:
    rows: dict[str, object] = {}
    if True:
        x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        kernels.softmax(x)
        torch.cuda.synchronize()
        tag = "x".join(map(str, shape))
        rows[f"{tag} ours call"] = host_us(lambda: kernels.softmax(x))
        rows[f"{tag} ours call events"] = events_us(lambda: kernels.softmax(x))
        rows[f"{tag} torch call"] = host_us(lambda: torch.softmax(x, -1))
        rows[f"{tag} empty_like"] = host_us(lambda: torch.empty_like(x))
        rows[f"{tag} lane into y"] = host_us(lambda: sm._FORWARD_CALL.lane(x, None, y))
        rows[f"{tag} lane into y events"] = events_us(lambda: sm._FORWARD_CALL.lane(x, None, y))
        prep = sm._FORWARD_CALL.prepare(x, None, y)
        rows[f"{tag} plan"] = prep.plan.label if prep else "-"
        if prep is not None and prep.one is not None:
            idx = x.get_device()
            rows[f"{tag} capturing()"] = host_us(capturing)
            rows[f"{tag} current_stream"] = host_us(lambda: current_stream(idx))
            rows[f"{tag} scratch"] = host_us(lambda: _rowwise._one_launch_scratch(shape[0], prep.plan.chunks, idx,
                                                                                   torch.float32))  # fmt: skip
            pa, po = x.data_ptr(), y.data_ptr()
            rows[f"{tag} one_launch_call"] = host_us(lambda: prep.one_launch_call(pa, pa, po, shape[1], shape[1],
                                                                                  shape[1], shape[0]))  # fmt: skip
            rows[f"{tag} lookup"] = host_us(lambda: sm._FORWARD_CALL._lookup(x, None, y, None, _rowwise._NO_EXTRAS))
            # the same call with the eager rule off: the two-launch split
            saved = sm._FORWARD_CALL.policy
            sm._FORWARD_CALL.policy = dataclasses.replace(saved, one_launch_bytes=0)
            sm._FORWARD_CALL._prepared.clear()
            sm._FORWARD_CALL._lane.clear()
            kernels.softmax(x)
            rows[f"{tag} two-launch call"] = host_us(lambda: kernels.softmax(x))
            rows[f"{tag} two-launch call events"] = events_us(lambda: kernels.softmax(x))
            sm._FORWARD_CALL.policy = saved
            sm._FORWARD_CALL._prepared.clear()
            sm._FORWARD_CALL._lane.clear()
            kernels.softmax(x)
    for k, v in rows.items():
        print(json.dumps({"piece": k, "us": v}), flush=True)


if __name__ == "__main__":
    main()
