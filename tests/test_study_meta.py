"""Every study's declared variant metadata is what a run file may hold, for every case.

A GPU run validates each case as it writes it; a study whose metadata breaks the contract
stops the sweep at the first such case (the RMSNorm run at e64b1a1 stopped at its first
training-step case: ``meta.backward`` was text, and the contract reads it as an object).
This checks the same thing on the CPU, before any GPU time is spent."""

from __future__ import annotations

import pytest

from bench.harness import _safe_meta
from bench.studies import load
from contract import studies
from contract.schema import RunFileError, validate_meta

# Studies whose metadata comes from a first call of the kernel (compiled and run through the
# interpreter here): a few cases, which hold every key the others do.
FIRST_CASES = {"specialization": 2}


@pytest.mark.parametrize("name", studies.names())
def test_every_variant_meta_fits_the_run_file_contract(name: str) -> None:
    study = load(name)
    if not hasattr(study, "variants"):
        pytest.skip(f"{name} times host pieces, not variants with metadata")
    seen = 0
    for quick in (True, False):
        cases = study.cases(quick)
        for case in cases[: FIRST_CASES.get(name, len(cases))]:
            for v in study.variants(case):
                meta = _safe_meta(v, case)
                # A variant may refuse on this machine (no GPU, no one-launch split under the
                # interpreter): the run file then holds the refusal, which must fit too.
                problem = meta.get("meta_error", "Refused:")
                assert problem.startswith("Refused:"), f"{name} {study.case_id(case)} {v.name}: {problem}"
                validate_meta(meta, f"{name}:{study.case_id(case)}:{v.name}")
                seen += 1
    assert seen > 0


def test_validate_meta_names_the_broken_field() -> None:
    with pytest.raises(RunFileError, match=r"meta\.backward"):
        validate_meta({"plan": "looped", "backward": "row plan, then a column sum"}, "planted")
    with pytest.raises(RunFileError, match=r"meta\.block"):
        validate_meta({"plan": "block", "block": 0}, "planted")
    validate_meta({"plan": "fused", "backward": {"plan": "rows"}}, "fine")
