"""The registry of studies: the one list a new study is added to.

Everything else follows from it: ``python -m bench run <study>`` loads
``bench/studies/<study>.py``; the site builds ``publish/pages/<study>.py``'s page (its
spec) with ``templates/<study>.md.j2``, puts it in the nav in this order, lists it on Home,
follows its comparisons on the Stability page and its runs on Compare; the build refuses
runs of a study not listed here; and the tests walk the same list.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StudyEntry:
    """What the contract needs to know about a study's run files.

    ``checked``: the harness checks every variant against a float64 reference before
    timing it, so a timed variant must carry its (passed) check.  ``params``: the case
    parameters (beyond op, direction, dtype and l2, which every case has) that its pages
    read, so every case must hold them: positive whole numbers, the case's shape, written
    in this order ("4096×50257" for rows × cols; a matrix product's rows × cols × k is
    M×N×K)."""

    name: str
    checked: bool = True
    params: tuple[str, ...] = ("rows", "cols")


# In nav order.  Adding a study: one line here (and its three files; see README, "Adding a study").
REGISTRY: tuple[StudyEntry, ...] = (
    StudyEntry("softmax"),
    StudyEntry("rowgrid"),
    StudyEntry("dispatch", checked=False),
    StudyEntry("rmsnorm"),
    StudyEntry("rowsum_add"),  # an add of n elements is a case of 1 x n
    StudyEntry("matmul", params=("rows", "cols", "k")),  # C[rows, cols] = A[rows, k] @ B[k, cols]: M×N×K
    StudyEntry("specialization"),  # one RMSNorm source, its sizes compile-time or runtime
    StudyEntry("cross_entropy"),  # N tokens x V classes: rows x cols
    StudyEntry("linear_cross_entropy", params=("rows", "cols", "hidden")),  # N tokens x V classes x H hidden
    StudyEntry("rope", params=("rows", "cols", "heads", "kv_heads")),  # T tokens x D head dim x Hq x Hk heads
    StudyEntry("swiglu"),  # tokens x intermediate features
    StudyEntry("bias_gelu_dropout"),  # tokens x features
)


def names() -> tuple[str, ...]:
    """The registered studies, in nav order (read at call time, so a test may register one)."""
    return tuple(s.name for s in REGISTRY)


def entry(name: str) -> StudyEntry | None:
    return next((s for s in REGISTRY if s.name == name), None)


def shape(name: str) -> tuple[str, ...]:
    """The parameters a case of ``name`` is written by as its shape, in order (rows × cols
    for a study the registry does not list)."""
    found = entry(name)
    return found.params if found is not None else ("rows", "cols")
