"""Cells and counts every part of a comparison page shares: a variant's time or why it has
none, the L2 mode, a count of cases linked to their runs."""

from __future__ import annotations

from markupsafe import Markup

from publish.claims import sentence
from publish.numbers import Num, Source
from publish.results import DEVICE as DEVICE_SAMPLES
from publish.results import EAGER, MEASURES, CaseResult
from publish.tables import Table, Text

# The two measurements, named the same way everywhere on a page.
DEVICE_TIME = MEASURES[DEVICE_SAMPLES]
ELEM_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp64": 8}  # a run's dtype names and their sizes
EAGER_CALL = MEASURES[EAGER]
# What a sweep records for a peer whose package the machine lacked ("refused: quack-kernels is not
# installed (...)"): that run made no comparison with it, which is not a refusal of the case.
NOT_INSTALLED = " is not installed ("
VERDICT_WORDS = {"win": "faster", "loss": "slower", "unresolved": "unresolved", None: "not compared"}


def slug(direction: str) -> str:
    """A direction as it appears in a table or chart id ("fwd+bwd" -> "fwdbwd")."""
    return direction.replace("+", "")


def shape_key(c: CaseResult) -> tuple[int, int]:
    return (c.params["cols"], c.params["rows"])


def refusal(c: CaseResult, variant: str) -> Text:
    """Why a variant has no time here: it declined the case, failed the float64 check, or
    raised (a library's own limit arrives as an exception); or, for eager calls, the run
    took no eager samples."""
    m = c.variants.get(variant)
    if m is None:
        return Text("—", "not run for this case")
    if m.error is None:
        if m.samples_key == EAGER:
            return Text("not measured", "this run took no eager samples", "refused")
        return Text("not measured", "no samples", "refused")
    error = m.error
    label = (
        "not installed" if NOT_INSTALLED in error
        else "refused" if error.startswith("refused")
        else "failed check" if error.startswith("check")
        else "not run" if error.startswith("not run")
        else "error"
    )  # fmt: skip
    return Text(label, error, "refused")


def missing(c: CaseResult, variant: str) -> Text:
    """A chart's mark for a variant with no time in a case: refused, failed check, error,
    not measured, or not run."""
    m = refusal(c, variant)
    return Text("not run", m.title) if m.text == "—" else m


def l2_cell(c: CaseResult) -> Text | str:
    """The L2 mode; a cold case whose rotating inputs could not exceed the L2 says so."""
    if c.within_l2:
        return Text(
            "cold, fits in L2",
            "the rotating input sets together hold less than the L2: inputs can stay in L2 between calls",
        )
    return c.params["l2"]


def bare(n: Num) -> Num:
    """A time without its unit, for a column whose header names it."""
    return Num(n.value, "us_bare", n.sources, n.note, n.css)


def time_or_why(c: CaseResult, variant: str) -> Num | Text:
    m = c.get(variant)
    return bare(m.time()) if m is not None else refusal(c, variant)


def count(k: int, cases: list[CaseResult], what: str) -> Num:
    """A count of cases, linked to the runs the cases came from."""
    runs = sorted({c.run.run_id for c in cases})
    return Num(k, "count", tuple(Source(r, statistic="holds cases counted here") for r in runs), note=what)


def rows_of(t: Table) -> Num:
    """How many rows a table holds, linked to the runs they come from."""
    return Num(len(t.rows), "count", tuple(Source(r, statistic=f"rows of {t.id}") for r in t.run_ids))


def cases_evidence(label: str, cases: list[CaseResult]) -> Markup:
    """Evidence for a report: the cases that break a claim."""
    if not cases:
        return Markup("")
    return sentence("{label}: {ids}. ", label=label, ids=", ".join(c.case_id for c in cases[:8]))


def plain(markup: Markup) -> str:
    return Text.rich(markup).text


def meta_num(c: CaseResult, variant: str, key: str, kind: str = "int", *, part: str | None = None) -> Num | Text:
    """A number a variant's meta stores, linked to its run and case; or why there is none.
    Per-kernel lists (bench/evidence.py) give their largest value for registers and shared
    memory and their sum otherwise (counts over the kernels one call launched)."""
    m = c.variants.get(variant)
    if m is None:
        return Text("—", "not run for this case")
    meta = m.meta if part is None else (m.meta.get(part) or {})
    value = meta.get(key)
    if isinstance(value, list):
        if not value or any(v is None for v in value):
            return Text("—", str(meta.get("sass") or meta.get("evidence") or "not recorded"))
        value = max(value) if key in ("regs", "smem_bytes") else sum(value)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        why = meta.get("evidence_error") or meta.get("evidence") or meta.get("sass") or "not recorded in this run"
        return Text("—", str(why))
    what = f"{key} as the sweep read it from the compiled kernel(s)"
    return Num(value, kind, (Source(c.run.run_id, c.case_id, variant, f"meta {key}", what),), note=what)
