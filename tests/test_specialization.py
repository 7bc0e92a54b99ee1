"""The specialization study's kernel: every mode computes RMSNorm, on every shape.

The four modes compile one source four ways; a mode that drops a row, a chunk or the
weight would make the study time the wrong work.  Float64 reference, fixed seeds, odd
widths, more rows than programs (the persistent row loop), widths above ``RUNTIME_BLOCK``
(the chunk loop), large and non-finite rows.  The GPU test checks what the study counts:
compilations per mode across batch sizes.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kernels.specialization import MAX_BLOCK, MODES, RUNTIME_BLOCK, compilations, rms_norm_specialized
from tests.tolerances import assert_close

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# rows 9 > the 4 programs the interpreter runs; 2500 > RUNTIME_BLOCK: all_runtime loops
SHAPES = [(1, 1), (5, 127), (9, 33), (3, RUNTIME_BLOCK + 1), (2, 2500), (2, 3, 65), (0, 17)]


def _inputs(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, seed: int = 0, scale: float = 3.0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype).to(device)
    w = (torch.randn(shape[-1], generator=g, dtype=torch.float64)).to(dtype).to(device)
    return x, w


def _reference(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x.double(), (x.shape[-1],), w.double(), eps)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_mode_is_rms_norm(device, mode, dtype, shape) -> None:
    x, w = _inputs(shape, dtype, device, seed=len(shape) * 1000 + shape[-1])
    y = rms_norm_specialized(x, w, 1e-6, mode=mode)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert_close(y, _reference(x, w, 1e-6), dtype)


@pytest.mark.parametrize("mode", MODES)
def test_large_and_non_finite_rows_like_torch(device, mode) -> None:
    x, w = _inputs((5, 300), torch.float32, device, seed=7, scale=1e3)  # squares near 1e6: no overflow in fp32
    x[1, 17] = float("nan")
    x[2, 3] = float("inf")
    x[3] = 0.0  # a zero row: 0 * rsqrt(eps)
    y = rms_norm_specialized(x, w, 1e-6, mode=mode)
    ref = F.rms_norm(x.double(), (300,), w.double(), 1e-6)
    assert torch.equal(torch.isnan(y).cpu(), torch.isnan(ref).cpu())
    finite = torch.isfinite(ref)
    assert_close(y[finite], ref[finite], torch.float32)


def test_errors_name_the_argument(device) -> None:
    x, w = _inputs((4, 8), torch.float32, device)
    with pytest.raises(ValueError, match="mode must be one of"):
        rms_norm_specialized(x, w, mode="fastest")
    with pytest.raises(ValueError, match="weight has shape"):
        rms_norm_specialized(x, w[:7])
    with pytest.raises(TypeError, match=r"x has dtype torch\.int64"):
        rms_norm_specialized(x.long(), w)
    with pytest.raises(TypeError, match=r"weight must be a torch\.Tensor"):
        rms_norm_specialized(x, None)  # type: ignore[arg-type]
    wide, ww = torch.empty(1, MAX_BLOCK + 1, device=device), torch.empty(MAX_BLOCK + 1, device=device)
    with pytest.raises(ValueError, match="exceeds"):
        rms_norm_specialized(wide, ww, mode="model_fixed")


@pytest.mark.gpu
def test_compilations_follow_the_specialization() -> None:
    """What the study counts: a new batch size compiles all_constexpr again and nothing else."""
    dev = torch.device("cuda")
    width = 5120
    before = {m: compilations(m) for m in MODES}
    for rows in (1, 7, 64, 100, 1000):
        x, w = _inputs((rows, width), torch.bfloat16, dev, seed=rows)
        for mode in MODES:
            assert_close(rms_norm_specialized(x, w, 1e-6, mode=mode), _reference(x, w, 1e-6), torch.bfloat16)
    added = {m: compilations(m) - before[m] for m in MODES}
    assert added["all_constexpr"] == 5
    assert added["model_fixed"] <= 1 and added["all_runtime"] <= 1
    # Triton's own rules: rows == 1 is specialized; 7, 64, 100 and 1000 are not all alike mod 16
    assert 1 <= added["triton_default"] <= 3


def test_the_study_checks_every_variant_and_records_the_first_call(device) -> None:
    """bench/studies/specialization.py on a small case: every variant passes the harness's
    float64 check, and each mode's meta records the first call (no compiled kernel under
    the interpreter, which the evidence says)."""
    from bench.harness import compare
    from bench.studies.specialization import STUDY

    case = {"op": "rms_norm", "direction": "fwd", "dtype": "bf16", "rows": 5, "cols": 130}
    gen = torch.Generator(device=device).manual_seed(0)
    inputs = STUDY.inputs(case, device, gen)
    refs = STUDY.reference(case, inputs)
    names = []
    for v in STUDY.variants(case):
        names.append(v.name)
        check = compare(v.build(case)(inputs), refs, STUDY.tolerance(case))
        assert check["passed"], (v.name, check)
        meta = v.meta(case)
        if v.name.startswith("spec-"):
            assert meta["mode"] == v.name.removeprefix("spec-") and meta["first_call_ms"] > 0
            assert {"compiled_now", "compilations"} <= set(meta)
            if device.type == "cpu":
                assert "no compiled kernel" in meta["evidence"]
    assert names == [f"spec-{m}" for m in MODES] + ["triton", "torch"]
    ids = [STUDY.case_id(c) for c in STUDY.cases(quick=False)]
    assert len(ids) == len(set(ids)) and all(c["cols"] <= MAX_BLOCK for c in STUDY.cases(quick=False))
