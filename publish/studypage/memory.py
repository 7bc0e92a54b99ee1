"""Peak memory as a result beside time: what the studies that record it in each variant's
meta share (the cross-entropy, fused linear cross-entropy and pointwise training-kernel pages).  A variant's meta holds
``peak_bytes`` (the most one step allocated above its inputs, read with
``torch.cuda.max_memory_allocated``), ``inputs_bytes`` and ``logits_bytes`` (the logits' size,
or the size the full logits would have where a fused step never makes them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from publish.numbers import Num, Source
from publish.results import CaseResult, Measurement
from publish.studypage.common import DEVICE_TIME, time_or_why
from publish.studypage.spec import StudyView
from publish.tables import Column, Table, Text

MIB = 2**20


def _whole(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def peak(m: Measurement | None) -> int | None:
    """The step's peak memory with its inputs (bytes), as the sweep recorded it, or None."""
    if m is None:
        return None
    extra, inputs = m.meta.get("peak_bytes"), m.meta.get("inputs_bytes")
    return int(extra) + int(inputs) if _whole(extra) and _whole(inputs) else None  # type: ignore[arg-type]


INPUTS_AND_MORE = "inputs plus the most one step allocated above them"


def peak_num(c: CaseResult, variant: str, what: str = INPUTS_AND_MORE) -> Num | Text:
    """The peak in MiB, linked to its run, case and variant; or why there is none."""
    m = c.variants.get(variant)
    if m is None:
        return Text("—", "not run for this case")
    value = peak(m)
    if value is None:
        return Text("not measured", str(m.meta.get("memory") or m.meta.get("meta_error") or "not recorded"))
    src = Source(c.run.run_id, c.case_id, variant, "meta inputs_bytes + peak_bytes", "torch.cuda.max_memory_allocated")
    return Num(value / MIB, "MiB", (src,), note=what)


def logits_bytes(c: CaseResult) -> int | None:
    for m in c.variants.values():
        v = m.meta.get("logits_bytes")
        if _whole(v):
            return int(v)
    return None


def ours_peak(ours: str) -> Callable[[CaseResult], int | None]:
    """A basis for :func:`memory_table`: ``ours``' own peak in the case."""
    return lambda c: peak(c.variants.get(ours))


def memory_table(
    view: StudyView, cases: Sequence[CaseResult], variants: Sequence[str], table_id: str, caption: str,
    title: Callable[[CaseResult], str], what: str, ratio_what: str,
    basis: tuple[str, str, Callable[[CaseResult], int | None]] = ("× logits", "logits_bytes", logits_bytes),
) -> Table | None:  # fmt: skip
    """Per case, each variant's median device time and its step's peak memory (inputs
    included, described by ``what``) in MiB, and that peak as a multiple of ``basis``
    (column title, its name in a source, its bytes per case; the logits' size by default),
    described by ``ratio_what``."""
    if not cases:
        return None
    head, basis_name, basis_bytes = basis
    cols = [
        Column("case", "Case", numeric=False),
        Column("variant", "Variant", numeric=False),
        Column("time", "Median µs", f"median, {DEVICE_TIME}"),
        Column("peak", "Peak MiB", what),
        Column("times", head, ratio_what),
    ]
    table = Table(table_id, caption, cols)
    for c in cases:
        base = basis_bytes(c)
        first = True
        for v in variants:
            if v not in c.variants:
                continue
            value = peak(c.variants[v])
            ratio: Num | Text = Text("—", "no peak recorded")
            if value is not None and base:
                src = Source(c.run.run_id, c.case_id, v, f"meta (inputs_bytes + peak_bytes) / {basis_name}")
                ratio = Num(value / base, "x", (src,), note=ratio_what)
            row: dict[str, Any] = {
                "case": Text(title(c) if first else ""),
                "variant": Text(view.label(v)),
                "time": time_or_why(c, v),
                "peak": peak_num(c, v, what),
                "times": ratio,
            }
            table.rows.append(row)
            first = False
    return table
