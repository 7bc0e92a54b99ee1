"""What the compiled kernels do with memory, read from sm_90 PTX compiled on this CPU-only
machine (tests/codegen_probe.py): 16-byte vectors at widths like 50257, and split statistics
that do not drag the chunk's tile through shared memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("codegen_probe.py")


@pytest.fixture(scope="module")
def reports() -> list[dict]:
    done = subprocess.run([sys.executable, str(PROBE)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_misaligned_and_odd_width_rows_load_and_store_16_byte_vectors(reports) -> None:
    windowed = [r for r in reports if r["align"] in (1, 2) and r["op"] in ("fwd", "bwd")]
    assert len(windowed) == 20
    for r in windowed:
        assert r["vector_loads"] > 0, r
        assert r["vector_stores"] > 0 or r["plan"] == "split-reduce", r  # the reduce pass writes statistics only
        # Only the at most two partial 16-byte groups at a row's ends go element by element.
        assert r["scalar_16bit_loads"] <= 8 and r["scalar_16bit_stores"] <= 1, r


def test_aligned_widths_need_no_element_wise_edges(reports) -> None:
    for r in reports:
        if r["width"] % 8 == 0 and r["align"]:
            assert r["scalar_16bit_loads"] == 0 and r["scalar_16bit_stores"] == 0, r


def test_unaligned_pointers_fall_back_to_element_loads(reports) -> None:
    for r in reports:
        if r["align"] == 0 and r["op"] != "rms_bwd_fused":  # (its weight is read as vectors either way)
            assert r["vector_loads"] == 0 and r["scalar_16bit_loads"] > 0, r


def test_split_apply_keeps_the_chunk_out_of_shared_memory(reports) -> None:
    # Statistics laid out like the small per-chunk tile once made the compiler convert every
    # chunk tile through shared memory (33 barriers a program; 5-20x slower on the H200).
    for r in reports:
        if r["plan"] == "split-apply":
            assert r["shared_bytes"] == 0, r


def test_extended_form_keeps_16_byte_vectors_at_model_widths(reports) -> None:
    # RMSNorm's x, residual, weight, y and h, its backward's h, dy, dh, weight and dx, and
    # the row sum's x: every load and store a 16-byte vector on aligned rows.
    extended = [r for r in reports if r["op"] in ("rms_fwd", "rms_bwd", "row_sum")]
    assert len(extended) == 12
    for r in extended:
        assert r["vector_loads"] > 0 and r["scalar_16bit_loads"] == 0 and r["scalar_16bit_stores"] == 0, r
        assert r["vector_stores"] > 0 or r["op"] == "row_sum", r  # the row sum writes one value a row


def test_fused_rmsnorm_backward_reads_vectors_through_runtime_strides(reports) -> None:
    # Its row strides are runtime values: until 2026-12-02 the compiler proved no alignment
    # and moved h, dy, dh and dx one element at a time (16 ld.global.b16 a row tile at 4096
    # wide, 8 warps), at 3 TB/s on the H200.  VEC 1 (rows off the 16-byte grid) still must.
    fused = [r for r in reports if r["op"] == "rms_bwd_fused"]
    assert len(fused) == 8
    for r in fused:
        if r["align"]:
            assert r["scalar_16bit_loads"] == 0 and r["scalar_16bit_stores"] == 0 and r["vector_stores"] > 0, r
        else:
            assert r["scalar_16bit_loads"] > 0 and r["scalar_16bit_stores"] > 0, r
        # STAGES 3 on aligned rows: the next rows come through cp.async into shared memory,
        # no registers held for them (a copy moves 4 bytes at least: none for lone elements).
        assert (r["async_copies"] > 0) == (r["stages"] > 1 and r["align"] == 1), r


def test_lane_statistics_fold_without_a_shared_memory_transpose(reports) -> None:
    # lanes_to_row once laid the [LANES] per-lane statistics out as a [1, LANES] row, which
    # made the compiler transpose them through shared memory (ldmatrix and two more barriers)
    # in every looped row and every split chunk; a transposed [LANES, 1] column folds them
    # where they are.
    rows = [r for r in reports if r["plan"] in ("looped", "split-reduce", "one-launch", "block")]
    assert len(rows) >= 30
    for r in rows:
        assert r["ldmatrix"] == 0, r


def test_staged_rows_come_in_through_16_byte_async_copies(reports) -> None:
    # Softmax's staged plan (a Gluon kernel): every chunk of the row copied into shared memory
    # with 16-byte cp.async (two per thread and 4096-element chunk at 8 warps, 16-bit), the
    # outputs stored as 16-byte vectors, and only the at most two partial groups of a
    # windowed row element by element; small enough for two programs an SM (227 KB).
    staged = [r for r in reports if r["plan"] == "staged"]
    assert len(staged) == 5
    for r in staged:
        per_chunk = 2 if r["dtype"] != "fp32" else 4
        assert r["vector_loads"] == r["async_copies"] == per_chunk * r["chunks"], r
        assert r["vector_stores"] == per_chunk * r["chunks"], r
        edges = 1 if r["align"] == 2 or r["width"] % (4 if r["dtype"] == "fp32" else 8) else 0
        assert r["scalar_loads"] == r["scalar_stores"] == edges, r
        assert r["shared_bytes"] <= 113 * 1024, r
