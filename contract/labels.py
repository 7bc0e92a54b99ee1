"""What each variant is called on the pages: its label, as the run file stores it.

Since schema 4 every variant of a run file stores the ``label`` that bench's
:class:`bench.studies.Variant` gave it, and the site shows that label, nowhere repeating it.
Run files are never edited, so the files written before schema 4 (which stored no label)
are read through the table below: the label each of their variants had on the pages when
those runs were made.  A variant the table does not name is read by its study's rule
(:data:`LEGACY_RULES`), and failing that by its own name.
"""

from __future__ import annotations

from typing import Any

LABELS_SINCE = 4  # the first schema version whose variants store their label

# study -> variant name -> label, for run files of schema < LABELS_SINCE.
LEGACY_LABELS: dict[str, dict[str, str]] = {
    "softmax": {
        "triton": "Triton (ours)",
        "torch": "torch.softmax",
        "eager": "eager composition",
        "compile": "torch.compile",
        "liger": "Liger-Kernel",
        "quack": "QuACK",
        "triton-looped": "Triton, looped plan forced",
        "triton-split": "Triton, split plan forced",
        "triton-split-1launch": "Triton, split in one launch",
    },
    "rowgrid": {
        "planner": "planner's choice (kernels.softmax)",
        "torch": "torch.softmax",
        "compile": "torch.compile",
    },
}
# study -> how a variant the table does not name was labelled before schema 4:
# "plan": the row plan it forces ("plan looped-4096"); "meta": the label its metadata
# records (the dispatch study's pieces and chains always stored one there).
LEGACY_RULES: dict[str, str] = {"rowgrid": "plan", "dispatch": "meta"}


def legacy_label(study: str, name: str, variant: dict[str, Any]) -> str:
    """The label of variant ``name`` in a run file of schema < :data:`LABELS_SINCE`."""
    found = LEGACY_LABELS.get(study, {}).get(name)
    if found is not None:
        return found
    rule = LEGACY_RULES.get(study)
    if rule == "plan":
        return f"plan {name}"
    meta = variant.get("meta")
    if rule == "meta" and isinstance(meta, dict) and isinstance(meta.get("label"), str):
        return str(meta["label"])
    return name


def variant_label(study: str, version: int, name: str, variant: dict[str, Any]) -> str:
    """The label of variant ``name`` (its entry ``variant``) in a run file of ``study`` written
    at schema ``version``: stored since :data:`LABELS_SINCE`, from the legacy table before."""
    if version >= LABELS_SINCE:
        return str(variant["label"])
    return legacy_label(study, name, variant)
