"""The build's side of the ledger (the format, reading and recording are
:mod:`contract.ledger`, shared with ``bench``): the run files and the ledger must agree
exactly, or the build fails naming the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from contract.ledger import SOURCE, key, load
from contract.schema import RunFileError


def check(data_dir: Path, runs: list[Any]) -> None:
    """Fail unless the run files and the ledger agree exactly (the rule :mod:`contract.ledger` states)."""
    entries = load(data_dir)
    by_key = {key(data_dir, r.path): r for r in runs}
    for i, k in enumerate(sorted(entries)):
        if k not in by_key:
            run_id = Path(k).stem
            raise RunFileError(
                SOURCE,
                f"runs[{i}] ({k})",
                f"the run file data/{k} is missing. Runs are never deleted: restore it "
                f"(git checkout -- data/{k}); to take its numbers off the pages, withdraw it with "
                f'python -m bench withdraw {run_id} --reason "..."',
            )
    unknown = [r for k, r in by_key.items() if k not in entries]
    if unknown:
        files = " ".join(r.source for r in unknown)
        first = unknown[0]
        others = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise RunFileError(
            first.source,
            "(ledger)",
            f"is not in {SOURCE}{others}. A run that has just landed is recorded with: "
            f"python -m bench ledger --add {files}",
        )
    for k, run in sorted(by_key.items()):
        if entries[k].sha256 != run.sha256:
            raise RunFileError(
                run.source,
                "sha256",
                f"the file no longer matches the sha256 {SOURCE} recorded when it landed: run files are "
                f"never edited. Restore it (git checkout -- {run.source}); a wrong run is withdrawn "
                f'(python -m bench withdraw {run.run_id} --reason "...")',
            )
