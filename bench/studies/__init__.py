"""Studies: one module per case study, each declaring its cases, variants and reference.

A study module exposes ``STUDY``, an object with the attributes of :class:`Study`.  The
harness knows nothing about softmax or any other operator; it asks the study.  Which studies
exist is the contract's registry (:mod:`contract.studies`); each is ``bench/studies/<name>.py``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from contract import studies

Params = dict[str, Any]
Tensors = dict[str, torch.Tensor]
Step = Callable[[Tensors], tuple[torch.Tensor, ...]]


class Refused(Exception):
    """A variant declines a case (a library limit, a missing package): recorded, not timed."""


@dataclass(frozen=True)
class Variant:
    """One implementation a reader could choose.  ``build`` returns the callable that is
    checked and timed for one case, or raises :class:`Refused`.  ``label`` is what the pages
    call it: the run file stores it, and the site reads it from there."""

    name: str
    label: str
    build: Callable[[Params], Step]
    meta: Callable[[Params], dict[str, Any]] = field(default=lambda p: {})
    # A variant that writes over its inputs (Liger's in-place RoPE and SwiGLU backward) is
    # timed on input sets of its own, so the other variants never see what it wrote.
    own_inputs: bool = False


class Study(Protocol):
    name: str
    directions: tuple[str, ...]

    def cases(self, quick: bool) -> list[Params]: ...
    def variants(self, case: Params) -> list[Variant]: ...
    def inputs(self, case: Params, device: torch.device, gen: torch.Generator) -> Tensors: ...
    def reference(self, case: Params, inputs: Tensors) -> tuple[torch.Tensor, ...]: ...
    def traffic(self, case: Params) -> tuple[int, int]: ...
    def tolerance(self, case: Params) -> float: ...
    def case_id(self, case: Params) -> str: ...

    # Optional: ``reference_for(case, inputs, outs) -> refs`` builds the float64 reference a
    # variant's outputs are checked against from those outputs (a random operator's mask);
    # it raises where the outputs are not a valid draw (bench/harness.py, _check).


def load(name: str) -> Study:
    known = studies.names()
    if name not in known:
        raise SystemExit(f"unknown study {name!r}; known: {', '.join(known)}")
    return importlib.import_module(f"bench.studies.{name}").STUDY
