"""Score warp-specialized tile tables for one GPU on ``notes/probe_ws_configs.py`` logs,
without a GPU (thirtieth session, 2026-12-07).

For each probed shape, the variant the dispatch would run (``kernels.matmul.default_variant``
and, for the warp-specialized kernel, ``ws_config`` with the table under test), on a faked
132-SM Hopper GPU of the name given, and its measured time over the fastest of the persistent
kernel, ping-pong (``pp5``) and the cooperative tile (``coopk32s6``) in the log: the regret.
Prints each table's mean and worst regret and the per-shape choices.  Tables: the GPU's
entry in ``WS_TILES_BY_GPU`` as it stands, the H200's ``WS_TILES`` alone, and any given as
``PP_TIME,COOP_TIME`` (tile-times of ping-pong's and the cooperative entry, persistent tile = 1).

    python notes/score_ws_tables.py "NVIDIA H100 80GB HBM3" LOG [LOG ...] [--table 1.06,1.0 ...] \
        [--grid] [--held-out LOG ...]

``--grid`` fits a table on the LOGS (``grid``); ``--held-out`` scores every table on other logs apart.

Plain products only (the logs' bias + GELU rows are skipped).  A shape missing any of the
three variants is left out.  Writes nothing.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
mm = importlib.import_module("kernels.matmul")
NAMES = ("persistent", "pp5", "coopk32s6")


def load(paths: list[str]) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if not line.startswith("{"):
                continue
            d = json.loads(line)
            if "us" in d and not d["case"].startswith("bias"):
                rows.setdefault(d["case"], {})[d["variant"]] = d["us"]
    return {case: t for case, t in rows.items() if all(n in t for n in NAMES)}


def score(
    label: str, rows: dict[str, dict[str, float]], device: torch.device, quiet: bool = False
) -> tuple[float, float]:
    regrets, lines = [], []
    for case, t in rows.items():
        dt, dims = case.split()
        m, n, k = map(int, dims.split("x"))
        variant = mm.default_variant(m, n, k, device, torch.bfloat16 if dt == "bf16" else torch.float16)
        name = variant
        if variant == "warp_specialized":
            name = "coopk32s6" if mm.ws_config(m, n, k, 132, None, mm.ws_tiles(device)) == mm.COOP_CONFIG else "pp5"
        best = min(NAMES, key=t.__getitem__)
        regrets.append(t[name] / t[best])
        lines.append(f"    {case}: {name} ({t[name] / t[best]:.3f}; fastest {best})")
    mean, worst = statistics.mean(regrets) - 1, max(regrets) - 1
    if not quiet:
        print(f"{label}: mean regret {mean:.2%}, worst {worst:.2%}")
        print("\n".join(lines))
    return mean, worst


def h100_style(gpu: str, pp: float, coop: float) -> None:
    table = (mm.WsTile(mm.WS_CONFIG, pp), mm.WsTile(mm.COOP_CONFIG, coop, epilogues=False))
    mm.WS_TILES_BY_GPU = ((gpu, table),)


def grid(gpu: str, fit: dict[str, dict[str, float]], device: torch.device) -> tuple[float, float]:
    """The table of the lowest mean regret on ``fit`` over a grid of tile-times (ping-pong 0.95-1.20,
    the cooperative tile 0.90-1.10, steps of 0.005), then of the lowest worst regret; of those
    (a region: the choices change only where a cost crosses another) the point nearest the
    middle of each range (the middle itself where the region holds it)."""
    scored = {}
    for i in range(51):
        for j in range(41):
            pp, coop = round(0.95 + 0.005 * i, 3), round(0.90 + 0.005 * j, 3)
            h100_style(gpu, pp, coop)
            mean, worst = score("", fit, device, quiet=True)
            scored[pp, coop] = (round(mean, 6), round(worst, 6))
    best = min(scored.values())
    region = [key for key, value in scored.items() if value == best]
    pps, coops = sorted({pp for pp, _ in region}), sorted({c for _, c in region})
    print(
        f"grid: mean regret {best[0]:.2%}, worst {best[1]:.2%} at {len(region)} points; ping-pong "
        f"{pps[0]}-{pps[-1]}, cooperative {coops[0]}-{coops[-1]}"
    )
    middle = ((pps[0] + pps[-1]) / 2, (coops[0] + coops[-1]) / 2)
    return min(region, key=lambda key: (key[0] - middle[0]) ** 2 + (key[1] - middle[1]) ** 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gpu")
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--table", action="append", default=[], help="PP_TIME,COOP_TIME")
    parser.add_argument("--held-out", nargs="+", default=[], help="logs scored apart, and not fitted by --grid")
    parser.add_argument("--grid", action="store_true", help="fit a table on LOGS over a grid (see grid())")
    args = parser.parse_args()
    mm.INTERPRETER = False
    mm.sm_count = lambda device: 132
    mm._capability = lambda index: (9, 0)
    mm._gpu_name = lambda index: args.gpu
    device = torch.device("cuda", 0)
    sets = {"": load(args.logs)}
    if args.held_out:
        sets = {" (fit logs)": sets[""], " (held out)": load(args.held_out)}
    stands = mm.WS_TILES_BY_GPU
    tables = [tuple(map(float, spec.split(","))) for spec in args.table]
    if args.grid:
        tables.append(grid(args.gpu, sets[next(iter(sets))], device))
    for suffix, rows in sets.items():
        mm.WS_TILES_BY_GPU = stands
        score(f"{args.gpu}'s table as it stands{suffix}", rows, device)
        mm.WS_TILES_BY_GPU = ()
        score(f"the H200's WS_TILES alone{suffix}", rows, device)
        for pp, coop in tables:
            h100_style(args.gpu, pp, coop)
            score(f"ping-pong {pp}, cooperative {coop}{suffix}", rows, device)
    mm.WS_TILES_BY_GPU = stands


if __name__ == "__main__":
    main()
