"""``python -m bench``: run a study on the current GPU and store the run file.

python -m bench run softmax            # the whole study, into data/runs/softmax/
python -m bench run softmax --quick    # a small subset, for a first look
python -m bench list                   # the studies and their case counts
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def code_identity(commit: str | None, dirty: bool | None) -> dict[str, object]:
    """The commit that ran.  On a machine without the repository's history (a copy of the
    work tree), pass ``--commit`` and ``--dirty``/``--clean`` from where the history is."""
    commit = commit or os.environ.get("LAB_COMMIT") or _git("rev-parse", "HEAD")
    if not commit:
        raise SystemExit("cannot tell which commit is running: pass --commit SHA (and --dirty or --clean)")
    if dirty is None:
        env = os.environ.get("LAB_DIRTY")
        if env is not None:
            dirty = env not in ("0", "false", "")
        else:
            status = _git("status", "--porcelain", "--untracked-files=no")
            if status is None:
                raise SystemExit("cannot tell whether the tree is dirty: pass --dirty or --clean")
            dirty = bool(status)
    return {"commit": commit, "dirty": dirty}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run a study and write data/runs/<study>/<run_id>.json")
    run.add_argument("study")
    run.add_argument("--quick", action="store_true", help="a small subset of the cases")
    run.add_argument("--only", help="only cases whose id contains this text, e.g. 'fwd/bf16'")
    run.add_argument("--rounds", type=int, default=None, help="samples per variant per case (default 30; 12 quick)")
    run.add_argument("--out", type=Path, default=None, help="directory for the run file (default data/runs/<study>)")
    run.add_argument("--commit", help="git commit of the code (default: git rev-parse HEAD)")
    dirty = run.add_mutually_exclusive_group()
    dirty.add_argument("--dirty", dest="dirty", action="store_true", default=None)
    dirty.add_argument("--clean", dest="dirty", action="store_false")
    run.add_argument("--seed", type=int, default=0)
    sub.add_parser("list", help="list the studies")
    cmp = sub.add_parser("compare", help="per-case changes between two runs, tested over the raw samples")
    cmp.add_argument("run_a", help="run id (or path to a run file): the baseline")
    cmp.add_argument("run_b", help="run id (or path): the run compared with it")
    cmp.add_argument("--threshold", type=float, default=0.05, help="smallest change flagged (default 0.05)")
    cmp.add_argument("--alpha", type=float, default=0.01, help="significance level (default 0.01)")
    cmp.add_argument(
        "--noise-floor",
        type=float,
        default=None,
        help="the run-to-run spread a change must exceed, e.g. 0.08 (default: measured on the repeat runs, at one "
        "commit, stored beside the two runs)",
    )
    cmp.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when a regression is flagged, 2 when nothing could be tested",
    )
    cmp.add_argument("--data", type=Path, default=ROOT / "data", help="the data directory (default data/)")
    return p


def _find_run(ref: str) -> Path:
    path = Path(ref)
    if path.is_file():
        return path
    found = sorted((ROOT / "data" / "runs").glob(f"*/{ref}.json"))
    if not found:
        raise SystemExit(f"no run {ref!r}: give a run id from data/runs/ or a path to a run file")
    return found[0]


def compare(args: argparse.Namespace) -> int:
    from publish.compare import compare_runs, exit_code, floor_for, report
    from publish.runs import load_run

    run_a, run_b = (load_run(_find_run(r), ROOT) for r in (args.run_a, args.run_b))
    floor = floor_for(run_a, run_b, args.data, manual=args.noise_floor)
    changes = compare_runs(run_a, run_b, floor=floor, threshold=args.threshold, alpha=args.alpha)
    if not changes:
        print(
            f"{run_a.run_id} and {run_b.run_id} have no case and variant timed in both: nothing to compare",
            file=sys.stderr,
        )
        return 2
    print(report(run_a, run_b, changes, floor, args.alpha))
    return exit_code(changes, args.fail_on_regression)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from bench.studies import STUDIES, load

    if args.cmd == "compare":
        return compare(args)
    if args.cmd == "list":
        for name in STUDIES:
            study = load(name)
            print(f"{name}: {len(study.cases(False))} cases ({len(study.cases(True))} with --quick)")
        return 0

    import torch

    from bench import environment, harness
    from bench.backends import CudaBackend
    from bench.runfile import RunWriter, make_run_id, utc_now

    if not torch.cuda.is_available():
        raise SystemExit("python -m bench run needs a CUDA GPU (the CPU tests drive the harness without one)")
    study = load(args.study)
    code = code_identity(args.commit, args.dirty)
    defaults = study.options(args.quick) if hasattr(study, "options") else {}
    rounds = args.rounds or defaults.pop("rounds", 12 if args.quick else 30)
    defaults.pop("rounds", None)
    opts = harness.Options(quick=args.quick, rounds=rounds, only=args.only, seed=args.seed, **defaults)
    device = torch.device("cuda", torch.cuda.current_device())
    before = environment.gpu_state()  # before anything of ours touches the GPU
    started = utc_now()
    env = {**environment.describe(device), "before": before}
    backend = CudaBackend(device)
    env["peaks"] = environment.measure_peaks(device)
    command = "python -m bench " + shlex.join(argv if argv is not None else sys.argv[1:])
    header = {
        "run_id": make_run_id(study.name, started, str(code["commit"]), args.quick),
        "study": study.name,
        "started_at": started,
        "command": command,
        "code": code,
        "env": env,
        "method": {
            **backend.method(),
            **opts.describe(),
            "check": "relative L2 error against float64 on fresh random inputs; outputs land in NaN-poisoned memory",
            "l2_modes": list(opts.l2_modes),
        },
    }
    writer = RunWriter(args.out or ROOT / "data" / "runs" / study.name, header)
    print(f"writing {writer.path}", file=sys.stderr)
    print(
        f"copy {env['peaks']['copy_GBps']:.0f} GB/s, bf16 mm {env['peaks']['mm_bf16_TFLOPs']:.0f} TFLOP/s, "
        f"SM clock before {before['sm_clock_mhz']} MHz, load {before['utilization_pct']}%",
        file=sys.stderr,
    )
    harness.run_study(study, backend, writer, opts, sys.stderr)
    print(f"done: {writer.path}", file=sys.stderr)
    return 0
