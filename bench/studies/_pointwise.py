"""What the pointwise training-kernel studies (RoPE, SwiGLU, bias + GELU + dropout) share:
the step a case times (the forward, or the forward then the backward through autograd with
given upstream gradients), ``torch.compile`` of a composition compiled afresh per case, a
Liger-Kernel entry point or its refusal, and the peak-memory meta of a training step.  Not a
study: the registry lists no ``_pointwise``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

import torch

from bench.studies import Params, Refused, Step, Tensors, _memory
from bench.studies._rows import TOLERANCE

Fn = Callable[..., Any]


def step(fn: Fn, case: Params, args: Callable[[Tensors], Sequence[Any]], leaves: Sequence[str],
         upstream: Sequence[str]) -> Step:  # fmt: skip
    """The timed step: ``fn(*args(t))`` (a tensor or a tuple of them); for a training step
    (``fwd+bwd``) also the gradients of ``leaves`` through autograd, given the ``upstream``
    gradients of the outputs in order.  Returns the outputs, then the gradients."""

    def outputs(t: Tensors) -> tuple[torch.Tensor, ...]:
        out = fn(*args(t))
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    if case["direction"] == "fwd":
        return outputs

    def train(t: Tensors) -> tuple[torch.Tensor, ...]:
        outs = outputs(t)
        grads = torch.autograd.grad(outs, [t[k] for k in leaves], [t[k] for k in upstream])
        return (*outs, *grads)

    return train


def compiled(fn: Fn) -> Fn:
    """``torch.compile(fn)`` (fullgraph, static shapes) after a Dynamo reset: every case
    compiles afresh (Dynamo falls back to eager past its recompile limit)."""
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False, fullgraph=True)


COMPILE_META = {"mode": "default", "dynamic": False, "fullgraph": True}


class PointwiseCases:
    """The case loop the pointwise studies share: bf16 forward and training step at each
    (rows, cols) of ``shapes`` (``quick``: of ``quick_shapes``), cold L2 only (every shape is
    past the L2 or about it), ids ``direction/dtype/rowsxcols``, the rows' tolerances."""

    op: str
    shapes: Sequence[tuple[int, int]]
    quick_shapes: Sequence[tuple[int, int]]
    directions = ("fwd", "fwd+bwd")

    def cases(self, quick: bool) -> list[Params]:
        return [
            {"op": self.op, "direction": d, "dtype": "bf16", "rows": r, "cols": c}
            for d in self.directions
            for r, c in (self.quick_shapes if quick else self.shapes)
        ]

    def case_id(self, case: Params) -> str:
        return f"{case['direction']}/{case['dtype']}/{case['rows']}x{case['cols']}"

    def options(self, quick: bool) -> dict[str, Any]:
        return {"rounds": 10 if quick else 12, "l2_modes": ("cold",)}

    def tolerance(self, case: Params) -> float:
        return TOLERANCE[case["dtype"]]


def liger(module: str, name: str) -> Any:
    """``liger_kernel.ops.<module>.<name>``, or :class:`Refused` where it is not installed."""
    try:
        mod = __import__(f"liger_kernel.ops.{module}", fromlist=[name])
        return getattr(mod, name)
    except (ImportError, AttributeError) as exc:
        raise Refused(f"liger-kernel has no liger_kernel.ops.{module}.{name} ({exc})") from exc


def liger_meta(entry: str) -> Callable[[Params], dict[str, Any]]:
    def meta(case: Params) -> dict[str, Any]:
        try:
            return {"version": metadata.version("liger-kernel"), "entry": entry}
        except metadata.PackageNotFoundError:
            return {}

    return meta


def training_memory(
    build: Callable[[Params], Step], draw: _memory.Draw, extra: Callable[[Params], dict[str, Any]] | None = None
) -> Callable[[Params], dict[str, Any]]:
    """A variant's meta: ``extra(case)``, and for a training step its peak memory above its
    inputs (:mod:`bench.studies._memory`); a forward records none (it holds its output only)."""
    with_memory = _memory.memory_meta(build, draw, extra)

    def meta(case: Params) -> dict[str, Any]:
        if case["direction"] == "fwd+bwd":
            return with_memory(case)
        return dict(extra(case)) if extra is not None else {}

    return meta
