"""``python -m bench`` and ``build.py``, on CPU: what each says when asked for something it
cannot do (issue 7's smaller items), and that it says it before doing anything."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import synthruns
from sitekit import ROOT

from bench.cli import main
from contract import studies

A = "softmax-20261201T000000Z-aaaaaaa"
B = "softmax-20261202T000000Z-bbbbbbb"


def test_run_names_an_unknown_study_before_asking_for_a_gpu() -> None:
    known = ", ".join(studies.names())  # the registry's
    with pytest.raises(SystemExit, match=rf"unknown study 'nosuch'; known: {known}$"):
        main(["run", "nosuch"])


def test_list_counts_what_a_full_run_file_holds(capsys) -> None:
    from bench.studies import load

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    softmax = load("softmax")
    assert f"softmax: {2 * len(softmax.cases(False))} cases ({len(softmax.cases(False))} shapes × 2 L2 modes" in out
    assert f"rowgrid: {len(load('rowgrid').cases(False))} cases" in out  # cold L2 only
    # What a stored full dispatch run holds per shape, times the shapes the study runs today
    full = json.loads((ROOT / "data" / "runs" / "dispatch" / "dispatch-20261129T231544Z-96cdb83.json").read_text())
    shapes = {(c["case"]["rows"], c["case"]["cols"]) for c in full["cases"]}
    per_shape = len(full["cases"]) // len(shapes)
    assert f"dispatch: {per_shape * len(load('dispatch').cases(False))} cases;" in out


def _two_runs(tmp_path: Path, shapes_b=((32, 127),)) -> tuple[Path, Path]:
    root = synthruns.project(tmp_path)
    a = synthruns.write(root, synthruns.softmax_doc(A, "2026-12-01T00:00:00Z", shapes=((1024, 1024),)))
    b = synthruns.write(root, synthruns.softmax_doc(B, "2026-12-02T00:00:00Z", shapes=shapes_b))
    return a, b


def test_compare_of_runs_with_no_case_in_common_says_so_and_fails(tmp_path, capsys) -> None:
    a, b = _two_runs(tmp_path)
    assert main(["compare", str(a), str(b), "--data", str(a.parent.parent.parent)]) == 2
    assert f"{A} and {B} have no case in common: nothing to compare" in capsys.readouterr().err


def test_compare_warns_about_a_withdrawn_run_and_another_gpu(tmp_path, capsys) -> None:
    a, b = _two_runs(tmp_path, shapes_b=((1024, 1024),))
    doc = json.loads(b.read_text())
    doc["env"]["gpu"]["name"] = "NVIDIA B200"
    b.write_text(json.dumps(doc))
    synthruns.withdraw(a.parent.parent.parent.parent, A, "A test withdrawal.")
    assert main(["compare", str(a), str(b), "--data", str(a.parent.parent.parent)]) == 0
    err = capsys.readouterr().err
    assert f"warning: {A} was withdrawn on 2026-12-01 (A test withdrawal.)" in err
    assert "different GPUs" in err and "cross-GPU" in err


def test_serve_on_a_busy_port_fails_before_building(tmp_path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = tmp_path / "site"
        cmd = [sys.executable, "build.py", "--serve", "--port", str(port), "--out", str(out)]
        result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert f"cannot serve on 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()  # nothing was built
