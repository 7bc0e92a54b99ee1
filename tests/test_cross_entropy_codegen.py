"""What the cross-entropy kernels cost per element, read from sm_90 PTX compiled on this
CPU-only machine (tests/ce_codegen_probe.py, in a process of its own: the interpreter the
other CPU tests use compiles nothing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("ce_codegen_probe.py")


@pytest.fixture(scope="module")
def all_reports() -> list[dict]:
    done = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def reports(all_reports) -> list[dict]:
    return [r for r in all_reports if "plan" in r]


@pytest.fixture(scope="module")
def scale_reports(all_reports) -> list[dict]:
    return [r for r in all_reports if r.get("kernel") == "_scale_rows_kernel"]


def test_cross_entropy_loops_call_no_libdevice(reports) -> None:
    # libdevice's logf, once per lane and step for the per-lane log-sum-exp, was 16 calls
    # (and a third of the instructions) in the loss loop's body at 4096 x 32000.
    assert len(reports) == 20
    for r in reports:
        assert r["libdevice_calls"] == 0, r


def test_cross_entropy_kernels_load_and_store_16_byte_vectors(reports) -> None:
    for r in reports:
        assert r["vector_loads"] > 0 or r["kernel"] == "row_split_apply_kernel", r
        if r["op"] == "cross_entropy" and r["kernel"] != "row_split_reduce_kernel":
            assert r["vector_stores"] > 0, r  # the gradient over the logits
        assert r["scalar_16bit_loads"] <= 1, r


def test_soft_capping_of_16_bit_logits_costs_a_few_instructions_per_element(reports) -> None:
    # bf16 logits take the two-MUFU tanh (ex2 + rcp.approx) and a multiply by 1/cap: the
    # looped loss kernel at 8192 x 128256 grew from 200 PTX instructions to 247 with it, and
    # to 562 with the exact form (a full-range division for x / cap and another in tanh); the
    # gradient kernel (tanh in both passes, 1 - t^2 in the second) from 411 to 949 (1056 exact).
    def count(width: int, op: str, softcap: bool) -> int:
        (r,) = [r for r in reports if r["width"] == width and r["rows"] == 8192 and r["op"] == op
                and r["softcap"] == softcap]  # fmt: skip
        return r["instructions"]

    for width in (128256, 50257):
        for op in ("cross_entropy", "cross_entropy_loss"):
            plain, capped = count(width, op, False), count(width, op, True)
            bound = 1.4 if op == "cross_entropy_loss" else 2.4
            assert capped <= bound * plain, (width, op, plain, capped)


def test_backward_row_scaling_reads_vectors_through_a_runtime_stride(scale_reports) -> None:
    # grad[row] *= dloss[row] (reduction "none", or a mean/sum gradient other than 1) walks
    # rows at a runtime stride: with the stride's multiple shown, 16-byte vectors; without it
    # (the kernel before 2026-12-02, and rows off the 16-byte grid now) one element at a time.
    by_vec = {r["vec"]: r for r in scale_reports}
    assert by_vec[8]["vector_loads"] > 0 and by_vec[8]["scalar_16bit_loads"] == 0, by_vec
    assert by_vec[1]["scalar_16bit_loads"] > 0, by_vec
