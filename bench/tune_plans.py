"""Exploratory sweep of launch configurations for the row plans (not a study run).

    python -m bench.tune_plans --out DIR

Times forward and backward softmax, bf16, for hand-picked configurations of each plan at the
shapes where the planner's thresholds matter, warm and cold, interleaved.  The planner's
constants in ``kernels/_rowwise.py`` and ``kernels/softmax.py`` were chosen from its output;
the notes file records which run and what it showed."""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import torch

from bench.timing import L2Flusher, Warmup, make_timer
from kernels._rowwise import RowPlan, warps_for
from kernels.softmax import backward_rows, forward_rows


def configs(rows: int, width: int) -> list[RowPlan]:
    out: list[RowPlan] = []
    for chunk in (4096, 8192):
        out.append(RowPlan("looped", chunk, warps_for(chunk)))
    for chunk in (2048, 4096, 8192):
        for one in (False, True):
            out.append(RowPlan("split", chunk, warps_for(chunk), chunks=-(-width // chunk), one_launch=one))
    return out


SHAPES = [(4, 32769), (64, 131072), (8, 1048576), (1, 1048576), (132, 32768), (264, 32768), (128, 131072), (512, 16384)]
BWD_SHAPES = {(4, 32769), (64, 131072), (8, 1048576), (264, 32768)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    dev = torch.device("cuda")
    flush = L2Flusher(torch.cuda.get_device_properties(dev).L2_cache_size, dev)
    warm = Warmup(dev)
    results = []
    for rows, width in SHAPES:
        x = (torch.randn(rows, width, device=dev) * 4).to(torch.bfloat16)
        y = torch.empty_like(x)
        dy = torch.randn_like(x)
        dx = torch.empty_like(x)
        for direction in ("fwd", "bwd") if (rows, width) in BWD_SHAPES else ("fwd",):
            for l2 in ("warm", "cold"):
                warm.maybe_burst()
                timers = {}
                for plan in configs(rows, width):
                    if direction == "fwd":
                        fn = lambda p=plan, x=x, y=y: forward_rows(x, y, p)
                    else:
                        fn = lambda p=plan, y=y, dy=dy, dx=dx: backward_rows(y, dy, dx, p)
                    try:
                        timers[plan] = make_timer(fn, l2, 1.0, flush)
                    except Exception as exc:
                        print(f"  {plan}: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
                samples: dict[RowPlan, list[float]] = {p: [] for p in timers}
                for _ in range(args.rounds):
                    order = list(timers)
                    random.shuffle(order)
                    for p in order:
                        samples[p].append(timers[p].sample_us())
                    warm.touch()
                ranked = sorted(samples.items(), key=lambda kv: sorted(kv[1])[len(kv[1]) // 2])
                nbytes = (2 if direction == "fwd" else 3) * x.numel() * 2
                print(f"{rows}x{width} {direction} {l2}:", file=sys.stderr)
                for p, s in ranked[:6]:
                    med = sorted(s)[len(s) // 2]
                    print(f"   {med:9.2f} us {nbytes / med / 1e3:7.0f} GB/s  {p.describe()}", file=sys.stderr)
                for p, s in samples.items():
                    results.append(
                        {
                            "rows": rows,
                            "width": width,
                            "direction": direction,
                            "l2": l2,
                            "plan": p.describe(),
                            "samples_us": s,
                            "bytes": nbytes,
                        }
                    )
                for t in timers.values():
                    t.release()
        torch.cuda.empty_cache()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tune_plans.json").write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
