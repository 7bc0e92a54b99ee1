"""Mutation testing of the CPU suite: plant one bug at a time in the kernels and the planner,
run the suite, and report which test killed it (or that it survived).

    python tests/mutate.py            # every mutant (minutes: the interpreter is slow)
    python tests/mutate.py 3 7        # only mutants 3 and 7

Each mutant is a textual replacement that must match exactly once; the file is restored
afterwards even when the run is interrupted."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = ["tests/test_softmax.py", "tests/test_planner.py", "tests/test_codegen.py", "tests/test_column_sum.py",
         "tests/test_rmsnorm.py", "tests/test_rowsum_add.py"]  # fmt: skip

# (name, file, original text, planted bug)
MUTANTS = [
    ("no max subtraction (block plan)", "kernels/softmax.py",
     "e = exp(a - safe_shift(m)[:, None])  # one exp", "e = exp(a)  # one exp"),
    ("masked-row guard removed (shift by -inf)", "kernels/_rowwise.py",
     'return tl.where(m == float("-inf"), 0.0, m)', "return m"),
    ("NaN sum swallowed by the zero-sum guard", "kernels/_rowwise.py",
     "return tl.where(s == 0.0, 0.0, 1.0 / s)", "return tl.where(s > 0.0, 1.0 / s, 0.0)"),
    ("row mask off by one (reads one element past the row)", "kernels/_rowwise.py",
     "inside = (pos >= 0) & (pos < WIDTH)", "inside = (pos >= 0) & (pos <= WIDTH)"),
    ("store mask off by one (writes one group too many)", "kernels/_rowwise.py",
     "store = tl.max_constancy((group >= 0) & (group + VEC <= WIDTH), [VEC, 1])",
     "store = tl.max_constancy((group >= 0) & (group <= WIDTH), [VEC, 1])"),
    ("edge groups never written", "kernels/_rowwise.py",
     "    return k, partial & ((e < VEC) | (tail > 0))", "    return k, partial & (e < 0)"),
    ("split merge drops the last chunk", "kernels/_rowwise.py",
     "m_c = tl.load(slots, mask=c < CHUNKS, other=M_INIT, cache_modifier=CACHE)",
     "m_c = tl.load(slots, mask=c < CHUNKS - 1, other=M_INIT, cache_modifier=CACHE)"),
    ("backward sign flipped", "kernels/softmax.py", "return a * (b - s[:, None])", "return a * (b + s[:, None])"),
    ("looped second pass shifted by one block", "kernels/_rowwise.py",
     "k = lane_offsets(HI - 1 - i, LANES, UNROLL, WIDE)", "k = lane_offsets(HI - 2 - i, LANES, UNROLL, WIDE)"),
    ("looped first pass skips the row's masked tail", "kernels/_rowwise.py",
     "TAIL: tl.constexpr = HI if HI > LO else LO", "TAIL: tl.constexpr = HI if HI > LO else LO\n    NCHUNK = TAIL"),
    ("lanes summed without rescaling to the row's max", "kernels/_rowwise.py",
     "m, s = COMBINE(tl.full((1,), M_INIT, ACC), tl.zeros((1,), ACC), m[None, :], s[None, :])",
     "m, s = tl.max(m[None, :], axis=1), tl.sum(s[None, :], axis=1)"),
    ("a partial block taken for a full one (split)", "kernels/_rowwise.py",
     "full = (i >= LO) & (i < HI)", "full = (i >= LO) & (i <= HI)"),
    ("row stride ignored (assumes contiguous rows)", "kernels/_rowwise.py",
     'return (t["a"].stride(0), t["b"].stride(0), t["c"].stride(0), t["out"].stride(0), t["out2"].stride(0))',
     'return (t["a"].shape[1], t["b"].shape[1], t["c"].shape[1], t["out"].shape[1], t["out2"].shape[1])'),
    ("split programs ignore their span", "kernels/_rowwise.py",
     "        first = chunk * SPAN\n", "        first = chunk\n"),
    ("dtype= applied after the computation, not before", "kernels/_rowwise.py",
     "a = tl.where(inside, a.to(A_CAST).to(ACC), A_FILL)", "a = tl.where(inside, a.to(ACC), A_FILL)"),
    ("planner: split and looped thresholds swapped", "kernels/plans.py",
     "elif n_rows < policy.split_rows_per_sm * sm_count:", "elif n_rows >= policy.split_rows_per_sm * sm_count:"),
    ("packing narrow rows even when few", "kernels/plans.py",
     "pack = n_rows >= policy.pack_min_rows_per_sm * sm_count", "pack = True"),
    # RMSNorm, row sum and the extended form of the row base
    ("RMSNorm weight ignored in the forward", "kernels/rmsnorm.py",
     "return h * m[:, None] * w, h", "return h * m[:, None], h"),
    ("RMSNorm backward: r^2 for r^3 in the projection term", "kernels/rmsnorm.py",
     "return r, r * r * r * s / WIDTH", "return r, r * r * s / WIDTH"),
    ("RMSNorm backward drops the updated residual's gradient", "kernels/rmsnorm.py",
     "dx = m[:, None] * b * w - a * s[:, None] + c", "dx = m[:, None] * b * w - a * s[:, None]"),
    ("RMSNorm forward: the mean over width + 1 elements", "kernels/rmsnorm.py",
     "r = _rsqrt(s / WIDTH + EPS)\n    return r, r", "r = _rsqrt(s / (WIDTH + 1) + EPS)\n    return r, r"),
    ("weight read at the window offset, not the column (misaligned rows)", "kernels/_rowwise.py",
     "        wk = k - lead\n", "        wk = k\n"),
    ("weight gradient without the row's inverse RMS", "kernels/_rowwise.py",
     "            v *= tl.load(scale_ptr + rows, mask=ok, other=0).to(ACC)[:, None]",
     "            v *= 1.0"),
    ("column sum: a row split's partial overlaps the next split", "kernels/_rowwise.py",
     "ok = (rows < n_rows) & (rows < r0 + rows_per_split)", "ok = rows < n_rows"),
    ("column sum: the row slots folded by max, not summed", "kernels/_rowwise.py",
     "cols, tl.sum(acc, axis=0), mask=cols < width)", "cols, tl.max(acc, axis=0), mask=cols < width)"),
    ("row sum: the split merge drops chunks (one program's sum)", "kernels/rowsum.py",
     "return m, s + tl.sum(s_parts, axis=1)", "return m, s + tl.max(s_parts, axis=1)"),
]  # fmt: skip


def run(index: int) -> tuple[str, str, float]:
    name, rel, old, new = MUTANTS[index]
    path = ROOT / rel
    original = path.read_text()
    if original.count(old) != 1:
        return name, f"NOT APPLIED ({original.count(old)} matches)", 0.0
    planted = original.replace(old, new)
    t0 = time.monotonic()
    try:
        path.write_text(planted)
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *SUITE],
            cwd=ROOT, capture_output=True, text=True, timeout=3600,
        )  # fmt: skip
    finally:
        path.write_text(original)
    failed = re.findall(r"^FAILED (\S+)", done.stdout, re.M)
    if failed:
        verdict = f"killed by {failed[0]}"
    else:
        verdict = "SURVIVED" if done.returncode == 0 else f"error rc={done.returncode}"
    return name, verdict, time.monotonic() - t0


def main(argv: list[str]) -> int:
    chosen = [int(a) for a in argv] or list(range(len(MUTANTS)))
    killed = 0
    for i in chosen:
        name, verdict, seconds = run(i)
        killed += verdict.startswith("killed")
        print(f"{i:2d} {name}: {verdict} ({seconds:.0f} s)", flush=True)
    print(f"killed {killed} of {len(chosen)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
