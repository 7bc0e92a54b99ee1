"""Score decode dispatch rules on the stored runs, without a GPU.

Every decode-like forward product (M ≤ ``kernels.matmul.SPLIT_K_MAX_M``) that a stored run
timed with both ``split_k`` and ``autotuned`` forced is a vote: within one run and one L2
state, a rule's regret is its choice's median time over the faster of the two.  Only runs
from 20261204T045154Z on count: split-K's tile (``SPLIT_K_CONFIG``, 9ca2a75) and kernel are
unchanged since, so every time here is of the code a rule would dispatch to.  Withdrawn runs
(``data/withdrawn.yaml``) are left out.

Both timers are scored: device time (graph replay, what a captured decode step pays) and the
eager time (one Python call after another, what an eager loop pays; split-K launches two
kernels and takes a workspace per call).  Shapes are split as the sweep splits them: studied
(the rule may be fitted to them) and held out (``meta.held_out``: their timings must not set
the rule; they only check it).  ``held_out`` is the flag each run recorded: held out from the
rule in force then, and scored here with the results in view, so not a blind test of a rule
fitted now.  Every cell (shape, dtype, L2) counts once, however many runs timed it (1 to 5).

A rule is a function ``(m, n, k, dtype) -> "split_k" | "autotuned"`` under the wave bound
the dispatch keeps (split-K only where its tiles fill at most half a wave).

Run: ``python notes/score_decode_rule.py`` (reads data/, prints tables; writes nothing).
"""

from __future__ import annotations

import importlib
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.matmul import SPLIT_K_BLOCK_N, SPLIT_K_MAX_M, SPLIT_K_MAX_WAVE, m_bucket  # noqa: E402
from publish.review import load_withdrawals  # noqa: E402
from publish.runs import load_runs  # noqa: E402

FIRST_RUN = "matmul-20261204T045154Z"  # the first run of split-K's current tile (9ca2a75)
SMS = 132  # the H200's, which every run here measured (checked below)
Rule = Callable[[int, int, int, str], str]


def within_wave(m: int, n: int) -> bool:
    # split-K's tiles (block_m from M's bucket, up to 128; 128 columns) in at most half a wave
    return -(-m // min(m_bucket(m), 128)) * -(-n // SPLIT_K_BLOCK_N) <= SPLIT_K_MAX_WAVE * SMS


def min_k_rule(min_k: int, max_m: int = SPLIT_K_MAX_M, deep_k: int = 8192) -> Rule:
    """split-K from ``min_k`` deep where M ≤ ``max_m``; above ``max_m`` from ``deep_k``."""

    def rule(m: int, n: int, k: int, dtype: str) -> str:
        floor = min_k if m <= max_m else deep_k
        return "split_k" if k >= floor and within_wave(m, n) else "autotuned"

    return rule


def code_rule(captured: bool) -> Rule:
    """``kernels.matmul.default_variant`` itself, as it answers on an H200 (its checks for the
    interpreter, the SM count and the capability answered as there)."""
    import torch

    km = importlib.import_module("kernels.matmul")
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16}

    def rule(m: int, n: int, k: int, dtype: str) -> str:
        saved = km.INTERPRETER, km.sm_count, km._capability
        km.INTERPRETER, km.sm_count, km._capability = False, lambda device: SMS, lambda index: (9, 0)
        try:
            return km.default_variant(m, n, k, torch.device("cuda", 0), dtypes[dtype], captured=captured)
        finally:
            km.INTERPRETER, km.sm_count, km._capability = saved

    return rule


def votes() -> list[dict]:
    data = ROOT / "data"
    runs = load_runs(data)
    withdrawn = {w.run_id for w in load_withdrawals(data, runs)}
    found = []
    for run in runs:
        if run.study != "matmul" or run.run_id < FIRST_RUN or run.run_id in withdrawn:
            continue
        assert run.gpu.sm_count == SMS, run.gpu
        for case in run.doc["cases"]:
            c, v = case["case"], case["variants"]
            if c.get("op") != "mm" or c["direction"] != "fwd" or c["rows"] > SPLIT_K_MAX_M:
                continue
            if c["dtype"] not in ("bf16", "fp16"):  # the rules here are for 16-bit operands
                continue
            split, tuned, ours = v.get("triton-split-k"), v.get("triton-autotuned"), v.get("triton", {})
            if not split or not tuned or not split.get("samples_us") or not tuned.get("samples_us"):
                continue
            found.append({
                "run": run.run_id, "m": c["rows"], "n": c["cols"], "k": c["k"], "dtype": c["dtype"], "l2": c["l2"],
                "held_out": bool(ours.get("meta", {}).get("held_out")),
                "device": {"split_k": statistics.median(split["samples_us"]),
                           "autotuned": statistics.median(tuned["samples_us"])},
                "eager": {"split_k": statistics.median(split["eager_us"]) if split.get("eager_us") else None,
                          "autotuned": statistics.median(tuned["eager_us"]) if tuned.get("eager_us") else None},
            })  # fmt: skip
    return found


def regrets(found: list[dict], rule: Rule, timer: str) -> dict[tuple, float]:
    """Per shape and L2 state: the median over runs of (the rule's choice / the faster)."""
    per: dict[tuple, list[float]] = defaultdict(list)
    for f in found:
        t = f[timer]
        if None in t.values():
            continue
        choice = rule(f["m"], f["n"], f["k"], f["dtype"])
        per[(f["held_out"], f["dtype"], f["m"], f["n"], f["k"], f["l2"])].append(t[choice] / min(t.values()))
    return {key: statistics.median(r) for key, r in per.items()}


def summary(r: dict[tuple, float], held_out: bool) -> str:
    xs = [x for key, x in r.items() if key[0] is held_out]
    if not xs:
        return "none"
    if max(xs) <= 1.0:
        return f"{len(xs)} cases, geomean regret 1.000, no regret"
    worst = max(r, key=lambda key: r[key] if key[0] is held_out else 0)
    shape = f"{worst[1]} {worst[2]}x{worst[3]}x{worst[4]} {worst[5]}"
    return (
        f"{len(xs)} cases, geomean regret {statistics.geometric_mean(xs):.3f}, over 1.05: "
        f"{sum(x > 1.05 for x in xs)}, worst {max(xs):.2f} at {shape}"
    )


def main() -> None:
    found = votes()
    runs = sorted({f["run"] for f in found})
    print(f"{len(found)} votes from {len(runs)} runs ({runs[0]} .. {runs[-1]})\n")
    print("per shape (median over runs, µs): device split-K / autotuned, eager split-K / autotuned")
    shapes: dict[tuple, list[dict]] = defaultdict(list)
    for f in found:
        shapes[(f["held_out"], f["dtype"], f["m"], f["n"], f["k"], f["l2"])].append(f)
    for key in sorted(shapes):
        fs = shapes[key]
        med = {t: {v: statistics.median(x[t][v] for x in fs if x[t][v] is not None) for v in ("split_k", "autotuned")}
               for t in ("device", "eager")}  # fmt: skip
        tuned = sorted(round(x["device"]["autotuned"], 1) for x in fs)
        print(f"  {'held-out' if key[0] else 'studied '} {key[1]} {key[2]:>3}x{key[3]}x{key[4]} {key[5]:<4} "
              f"runs {len(fs)}: device {med['device']['split_k']:6.1f} / {med['device']['autotuned']:6.1f}"
              f" (autotuned per run {tuned[0]}..{tuned[-1]})  eager {med['eager']['split_k']:6.1f} / "
              f"{med['eager']['autotuned']:6.1f}")  # fmt: skip
    rules = {"eager rule: K ≥ 8192": min_k_rule(8192)}
    for min_k in (2048, 3072, 4096, 6144):
        rules[f"K ≥ {min_k}"] = min_k_rule(min_k)
        for max_m in (32, 64, 96):
            rules[f"K ≥ {min_k} at M ≤ {max_m}, else K ≥ 8192"] = min_k_rule(min_k, max_m)
    for timer in ("device", "eager"):
        print(f"\n{timer} time:")
        code = {f"the code ({'captured' if timer == 'device' else 'eager'} call)": code_rule(timer == "device")}
        for name, rule in (code | rules).items():
            r = regrets(found, rule, timer)
            print(f"  {name:<36} studied: {summary(r, False)}")
            print(f"  {'':<36} held-out: {summary(r, True)}")
            print(f"  {'':<36} every cell: {summary({(True, *key[1:]): x for key, x in r.items()}, True)}")


if __name__ == "__main__":
    main()
