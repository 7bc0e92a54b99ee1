"""Argument checks and the eager-path test that every functional shares.

Each functional validates its arguments before anything else (so a bad call raises a
clear error naming the argument, before any launch) and then asks :func:`eager_path`
whether it may take the lean launch path: a plain tensor outside any tracer, where it
calls the kernels directly; otherwise it goes through its ``torch.library`` op, which
``torch.compile``, functorch and subclasses understand.  The messages are one wording
for all operators: ``"<fn>: <argument> ..."``.
"""

from __future__ import annotations

import torch

from kernels._launch import INTERPRETER
from kernels.plans import PLAN_KINDS

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
FLOAT_NAMES = "float16, bfloat16, float32 or float64"
ACCEPTED = frozenset(FLOAT_DTYPES)

_is_compiling = torch.compiler.is_compiling
_functorch_active = torch._C._are_functorch_transforms_active


def on_gpu(t: torch.Tensor) -> bool:
    """``t.is_cuda``: the common-call tests of the functionals ask through this, so that the
    CPU suite can run them under the interpreter (tests/test_common_calls.py)."""
    return t.is_cuda


# Plain tensors and parameters (a layer's weight or bias is one); any other subclass goes
# through the registered op, which its __torch_function__ / __torch_dispatch__ understands.
_PLAIN_TYPES = frozenset((torch.Tensor, torch.nn.Parameter))


def eager_path(*tensors: torch.Tensor | None) -> bool:
    """True when the eager launch path applies to these tensors (``None`` entries skipped):
    plain tensors or parameters, none of them meta, no tracer, no functorch."""
    for t in tensors:
        if t is not None and (type(t) not in _PLAIN_TYPES or t.is_meta):
            return False
    return not _is_compiling() and not _functorch_active()


def check_tensor(fn: str, name: str, x: object, *, optional: bool = False) -> None:
    """Raise ``TypeError`` unless ``x`` is a tensor (or None, with ``optional``)."""
    if not isinstance(x, torch.Tensor) and not (optional and x is None):
        kind = "a torch.Tensor or None" if optional else "a torch.Tensor"
        raise TypeError(f"{fn}: {name} must be {kind}, got {type(x).__name__}")


def check_float(fn: str, name: str, x: torch.Tensor, hint: str = "") -> None:
    """Raise ``TypeError`` unless ``x`` is float16, bfloat16, float32 or float64."""
    if x.dtype not in ACCEPTED:
        raise TypeError(f"{fn}: {name} has dtype {x.dtype}; expected {FLOAT_NAMES}{hint}")


def check_device(fn: str, name: str, x: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``x`` is on a CUDA GPU (or meta; or the CPU under the
    Triton interpreter)."""
    if not (x.is_cuda or x.is_meta or (INTERPRETER and x.is_cpu)):
        raise ValueError(
            f"{fn}: {name} is on device '{x.device}'; expected a CUDA tensor "
            "(CPU tensors run only under TRITON_INTERPRET=1)"
        )


def check_same_device(fn: str, name: str, t: torch.Tensor, other: str, x: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``t`` is on ``x``'s device."""
    if t.device != x.device:
        raise ValueError(f"{fn}: {name} is on {t.device} but {other} is on {x.device}")


def check_plan(fn: str, plan: str | None, kinds: tuple[str, ...] = PLAN_KINDS) -> None:
    """Raise ``ValueError`` unless ``plan`` is None or one of the row plans."""
    if plan is not None and plan not in kinds:
        names = ", ".join(repr(k) for k in kinds)
        raise ValueError(f"{fn}: plan must be {names} or None, got {plan!r}")
