"""Fit a cooperative warp-specialized tile's entry for ``kernels.matmul.WS_TILES`` from a
``notes/probe_ws_configs.py`` log, without a GPU (twenty-seventh session, 2026-12-06).

The dispatch's model (``kernels.matmul.ws_cost``) charges a tile its waves rounded up, times
its area over the persistent 128x256 tile's, times its tile-time.  Ping-pong 128x128 is the
unit.  A cooperative tile's two consumers run the epilogue together with no main loop beside
it, so its tile-time is taken to grow as K shrinks:

    tile_time(K) = t * (1 + E / k_steps)        (k_steps: K in 64-deep steps)

The measured time of the candidate over ping-pong's, times ping-pong's modelled cost over the
candidate's (``ws_cost`` of a tile-time of 1: waves, area and K tail), is
``y = t + t*E / k_steps``: a straight line in ``1 / k_steps``, fitted here by least squares
(``scipy.stats.linregress``) on the shapes named as the fit set.  That is the entry
``WsTile(config, t, E, epilogues=False)`` (plain products only, as the table's cooperative
entries are); the script also fits a constant tile-time (the mean of ``y``, E = 0) for
comparison.  For each entry it asks ``kernels.matmul.ws_config`` itself, with the entry
added to ``WS_TILES``, which tile it would run.  The other shapes of the log are held out: for
each shape the script prints the measured ratio, both models' and both choices.

    python notes/fit_ws_tiles.py LOG NAME SPEC [FIT_SHAPE ...]

LOG: the probe's JSON lines; NAME: the candidate's variant name in the log (``coopk32s6``);
SPEC: its config as the probe took it (``128,256,32,8,6,8``); FIT_SHAPE: ``4096x4096x4096``
and so on, the fit set (default: every shape of at least 4096 K); ping-pong (``WS_CONFIG``)
must be in the log as ``pp5`` or ``ws-pp5``.  E needs shapes of short K among the fit set
(16384x1024x1024): with K of 4096 and 8192 alone its line is noise.  Prints a table; writes
nothing.  A shape either tile has no time for (not probed, wrong or failed: the probe times
neither) is reported and left out.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections import defaultdict

from scipy.stats import linregress

sys.path.insert(0, ".")
mm = importlib.import_module("kernels.matmul")
SMS = 132  # the H100 and H200 the probes ran on


def main(argv: list[str]) -> None:
    log, name, spec, *fit_names = argv
    candidate = mm.TileConfig(*map(int, spec.split(",")))
    name = name.removeprefix("ws-")
    times: dict[str, dict[str, float]] = defaultdict(dict)
    with open(log) as f:
        for line in f:
            if not line.startswith("{"):
                continue
            row = json.loads(line)
            if "us" in row and row["case"].split()[0] in ("bf16", "fp16"):
                times[row["case"]][row["variant"].removeprefix("ws-")] = row["us"]
    shapes = []
    for case, row in times.items():
        if "pp5" not in row or name not in row:
            print(f"{case}: no time for {'pp5' if 'pp5' not in row else name} (not probed, wrong or failed), left out")
            continue
        m, n, k = map(int, case.split()[1].split("x"))
        shapes.append((case, m, n, k, row[name] / row["pp5"]))
    fit = [s for s in shapes if (s[0].split()[1] in fit_names if fit_names else s[3] >= 4096)]
    if len(fit) < 2:
        raise SystemExit(f"need at least two fit shapes with both tiles timed, got {len(fit)}")

    def unit(m: int, n: int, k: int) -> float:  # the candidate's ws_cost at a tile-time of 1
        return mm.ws_cost(candidate, m, n, k, SMS)

    def over_pp(r: float, m: int, n: int, k: int) -> float:  # measured ratio -> tile-time
        return r * mm.ws_cost(mm.WS_CONFIG, m, n, k, SMS) / unit(m, n, k)

    xs = [1 / mm.cdiv(k, 64) for _, _, _, k, _ in fit]
    ys = [over_pp(r, m, n, k) for _, m, n, k, r in fit]
    line = linregress(xs, ys)
    t, e = line.intercept, line.slope / line.intercept
    t0 = sum(ys) / len(ys)
    print(f"{name} {spec}: tile_time(K) = {t:.4f} x (1 + {e:.2f} / k_steps)", end="  ")
    print(f"(fit on {len(fit)} shapes, r={line.rvalue:.3f}); constant entry {t0:.4f}")
    rows = []
    for case, m, n, k, r in shapes:  # both models before an entry is in the table
        pp = mm.ws_cost(mm.WS_CONFIG, m, n, k, SMS)
        rows.append((case, m, n, k, r, unit(m, n, k) * t * (1 + e / mm.cdiv(k, 64)) / pp, unit(m, n, k) * t0 / pp))
    picks = {}
    for label, entry in (("K", mm.WsTile(candidate, t, e, False)), ("constant", mm.WsTile(candidate, t0, 0.0, False))):
        table = mm.WS_TILES
        mm.WS_TILES = (*table, entry)
        try:
            picks[label] = [name if mm.ws_config(m, n, k, SMS) == candidate else "pp5" for _, m, n, k, *_ in rows]
        finally:
            mm.WS_TILES = table
    print("case | set | measured / ping-pong | K model | constant entry | ws_config would run: K entry, constant entry")
    for i, (case, _, _, _, r, model, constant) in enumerate(rows):
        where = "fit" if any(case == s[0] for s in fit) else "held out"
        marks = [
            p + ("" if (r < 1) == (p == name) else " (measured the other way)")
            for p in (picks["K"][i], picks["constant"][i])
        ]
        print(f"{case} | {where} | {r:.3f} | {model:.3f} | {constant:.3f} | {marks[0]}, {marks[1]}")


if __name__ == "__main__":
    main(sys.argv[1:])
