"""``python -m bench``: run a study on the current GPU and store the run file.

python -m bench run softmax            # the whole study, into data/runs/softmax/
python -m bench run softmax --quick    # a small subset, for a first look
python -m bench list                   # the studies and how many cases a run file of each holds
python -m bench compare RUN_A RUN_B    # per-case changes between two runs
python -m bench withdraw RUN_ID --reason "..."     # take a wrong run off the pages (data/withdrawn.yaml)
python -m bench ledger --add data/runs/<study>/<run_id>.json  # record run files copied in (data/ledger.json)
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"


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
    run.add_argument(
        "--only",
        help="only cases whose id contains this text ('fwd/bf16'), or starts with it ('^fwd/'); "
        "alternatives split on '|' ('/tf32/|/fp32/')",
    )
    run.add_argument("--rounds", type=int, default=None, help="samples per variant per case (default 30; 12 quick)")
    run.add_argument("--out", type=Path, default=None, help="directory for the run file (default data/runs/<study>)")
    run.add_argument("--commit", help="git commit of the code (default: git rev-parse HEAD)")
    dirty = run.add_mutually_exclusive_group()
    dirty.add_argument("--dirty", dest="dirty", action="store_true", default=None)
    dirty.add_argument("--clean", dest="dirty", action="store_false")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--skip", default="", help="variants not to run, comma-separated (each records the reason)")
    run.add_argument("--skip-reason", default="", help="why --skip leaves them out (stored in the run file)")
    sub.add_parser("list", help="the studies, and how many cases a run file of each holds")
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
    wd = sub.add_parser("withdraw", help="take a stored run off the pages: append a valid entry to withdrawn.yaml")
    wd.add_argument("run_id", help="the run id (the file's name under data/runs/<study>/, without .json)")
    wd.add_argument("--reason", required=True, help="why (cite cases and commits, not measured numbers)")
    wd.add_argument("--date", type=dt.date.fromisoformat, default=None, help="YYYY-MM-DD (default today, UTC)")
    led = sub.add_parser("ledger", help="record run files copied into data/runs in data/ledger.json")
    led.add_argument("--add", nargs="+", metavar="FILE", required=True, help="run files under data/runs/<study>/")
    led.add_argument(
        "--replace", action="store_true", help="re-record a file first recorded while bench was still writing it"
    )
    for sp in (cmp, wd, led):
        sp.add_argument("--data", type=Path, default=DATA, help="the data directory (default data/)")
    return p


def _find_run(ref: str, data: Path) -> Path:
    path = Path(ref)
    if path.is_file():
        return path
    found = sorted((data / "runs").glob(f"*/{ref}.json"))
    if not found:
        raise SystemExit(f"no run {ref!r}: give a run id from data/runs/ or a path to a run file")
    return found[0]


def _withdrawn(data: Path) -> dict[str, object]:
    """The withdrawals by run id (for a warning; an unreadable file is reported, not fatal)."""
    from contract.schema import RunFileError
    from publish.review import load_withdrawals

    known = sorted(p.stem for p in (data / "runs").glob("*/*.json"))
    try:
        return {w.run_id: w for w in load_withdrawals(data, known)}
    except RunFileError as exc:
        print(f"warning: cannot read the withdrawals: {exc}", file=sys.stderr)
        return {}


def compare(args: argparse.Namespace) -> int:
    from publish.compare import compare_runs, exit_code, floor_for, report
    from publish.runs import load_run, same_gpu

    run_a, run_b = (load_run(_find_run(r, args.data), ROOT) for r in (args.run_a, args.run_b))
    withdrawn = _withdrawn(args.data)
    for run in (run_a, run_b):
        w = withdrawn.get(run.run_id)
        if w is not None:
            print(
                f"warning: {run.run_id} was withdrawn on {w.date} ({w.reason}); its numbers are on no page",
                file=sys.stderr,
            )
    if not same_gpu(run_a, run_b):
        print(
            f"warning: the runs measured different GPUs ({run_a.gpu} and {run_b.gpu}): this is a cross-GPU "
            "comparison, not a regression test",
            file=sys.stderr,
        )
    floor = floor_for(run_a, run_b, args.data, manual=args.noise_floor)
    changes = compare_runs(run_a, run_b, floor=floor, threshold=args.threshold, alpha=args.alpha)
    if not changes:
        shared = {c["id"] for c in run_a.doc["cases"]} & {c["id"] for c in run_b.doc["cases"]}
        what = "no case in common" if not shared else "no variant timed in both on any common case"
        print(f"{run_a.run_id} and {run_b.run_id} have {what}: nothing to compare", file=sys.stderr)
        return 2
    print(report(run_a, run_b, changes, floor, args.alpha))
    return exit_code(changes, args.fail_on_regression)


def withdraw(args: argparse.Namespace) -> int:
    """Append one entry to ``data/withdrawn.yaml``, quoted so YAML reads it back exactly;
    refuse an unknown or already-withdrawn run, and a reason the build would refuse."""
    from publish.check import stray_numbers
    from publish.review import entry_text, load_withdrawals, parse_withdrawals
    from publish.runs import load_runs

    data: Path = args.data
    runs = load_runs(data)
    if args.run_id not in {r.run_id for r in runs}:
        raise SystemExit(f"no stored run {args.run_id!r} under {data / 'runs'}; withdraw a run by its id")
    existing = load_withdrawals(data, runs)
    for w in existing:
        if w.run_id == args.run_id:
            raise SystemExit(f"{args.run_id} is already withdrawn (on {w.date}: {w.reason})")
    reason = " ".join(args.reason.split())
    if not reason:
        raise SystemExit("--reason must say why the run is withdrawn")
    if stray_numbers(reason):
        raise SystemExit(
            f"the reason quotes measured numbers ({'; '.join(stray_numbers(reason))}); the site shows measured "
            "numbers only from the data: cite the cases and commits instead"
        )
    date = args.date or dt.datetime.now(dt.timezone.utc).date()
    path = data / "withdrawn.yaml"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if not existing:  # keep the comments, drop an empty list ("[]") the new entry replaces
        old = "".join(line for line in old.splitlines(keepends=True) if line.lstrip().startswith("#"))
    if old and not old.endswith("\n"):
        old += "\n"
    text = old + entry_text(args.run_id, date, reason)
    added = parse_withdrawals(text, runs)[-1]  # read back exactly as the build will read it
    if (added.run_id, added.date, added.reason) != (args.run_id, date, reason):
        raise SystemExit(f"the entry would read back differently ({added}); nothing written")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    print(f"withdrew {args.run_id} on {date}: appended to {path}; build and commit it")
    return 0


def ledger_add(args: argparse.Namespace) -> int:
    """Record run files copied into data/runs (from a GPU machine): each is validated, and
    refused if it copies another run's measurements or was recorded with other contents."""
    from contract import ledger
    from publish.runs import load_run, load_runs

    data: Path = args.data
    runs_dir = (data / "runs").resolve()
    paths = []
    for name in args.add:
        path = Path(name).resolve()
        if not path.is_file():
            raise SystemExit(f"{name}: no such file")
        if path.parent.parent != runs_dir or path.suffix != ".json":
            raise SystemExit(f"{name}: not a run file under {data / 'runs'}/<study>/ (copy it there first)")
        paths.append(path)
    load_runs(data)  # every stored run valid, and none a copy of another
    for path in paths:
        run = load_run(path, data.parent)
        entry = ledger.record(data, path, run.doc["status"], replace=args.replace)
        note = "" if run.doc["status"] == "complete" else f" (status {run.doc['status']})"
        print(f"recorded {entry.path} sha256 {entry.sha256[:12]}…{note}")
    print(f"now build (python build.py) and commit the run files with {data / ledger.NAME}")
    return 0


def list_studies() -> int:
    """Each study with the number of cases a run file of it holds: the harness writes one
    per case and L2 mode; a study that measures itself says how many it writes."""
    from bench.harness import Options
    from bench.studies import load
    from contract import studies

    for name in studies.names():
        study = load(name)
        counts = []
        for quick in (False, True):
            if hasattr(study, "entries"):
                counts.append((study.entries(quick), ""))
                continue
            opts = study.options(quick) if hasattr(study, "options") else {}
            modes = tuple(opts.get("l2_modes", Options.l2_modes))
            n = len(study.cases(quick))
            counts.append((n * len(modes), f" ({n} shapes × {len(modes)} L2 mode{'s' if len(modes) > 1 else ''}: "
                                             f"{', '.join(modes)})"))  # fmt: skip
        (full, how), (quick_n, _) = counts
        print(f"{name}: {full} cases{how}; {quick_n} with --quick")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from contract.schema import RunFileError

    try:
        if args.cmd == "compare":
            return compare(args)
        if args.cmd == "list":
            return list_studies()
        if args.cmd == "withdraw":
            return withdraw(args)
        if args.cmd == "ledger":
            return ledger_add(args)
    except RunFileError as exc:
        print(f"bench {args.cmd} failed: {exc}", file=sys.stderr)
        return 1

    from bench.studies import load

    study = load(args.study)  # an unknown study is named before anything needs a GPU

    import torch

    from bench import environment, harness
    from bench.backends import CudaBackend
    from bench.runfile import RunWriter, make_run_id, utc_now

    if not torch.cuda.is_available():
        raise SystemExit("python -m bench run needs a CUDA GPU (the CPU tests drive the harness without one)")
    code = code_identity(args.commit, args.dirty)
    defaults = study.options(args.quick) if hasattr(study, "options") else {}
    rounds = args.rounds or defaults.pop("rounds", 12 if args.quick else 30)
    defaults.pop("rounds", None)
    skip = tuple(v for v in args.skip.split(",") if v)
    if skip and not args.skip_reason:
        raise SystemExit("--skip needs --skip-reason: the run file says why each variant has no numbers")
    opts = harness.Options(quick=args.quick, rounds=rounds, only=args.only, seed=args.seed, skip=skip,
                           skip_reason=args.skip_reason, **defaults)  # fmt: skip
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
    out = args.out or DATA / "runs" / study.name
    # Inside a project's data/runs/<study>/, the run is recorded in that data/ledger.json as
    # it is written; anywhere else it is recorded when copied in (python -m bench ledger --add).
    ledger_dir = out.resolve().parent.parent if out.resolve().parent.name == "runs" else None
    writer = RunWriter(out, header, ledger_dir=ledger_dir)
    print(f"writing {writer.path}" + ("" if ledger_dir else " (not recorded in a ledger)"), file=sys.stderr)
    print(
        f"copy {env['peaks']['copy_GBps']:.0f} GB/s, bf16 mm {env['peaks']['mm_bf16_TFLOPs']:.0f} TFLOP/s, "
        f"SM clock before {before['sm_clock_mhz']} MHz, load {before['utilization_pct']}%",
        file=sys.stderr,
    )
    harness.run_study(study, backend, writer, opts, sys.stderr)
    print(f"done: {writer.path}", file=sys.stderr)
    if ledger_dir is None:
        print(
            f"once copied into data/runs/{study.name}/: python -m bench ledger --add "
            f"data/runs/{study.name}/{writer.path.name}",
            file=sys.stderr,
        )
    return 0
