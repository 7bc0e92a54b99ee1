"""Peak memory of one step, as the memory studies record it in a variant's meta (cross-entropy,
fused linear cross-entropy, the pointwise training kernels).

``torch.cuda.max_memory_allocated`` around a second call (the first compiles what compiles
and fills the caching allocator), on inputs of the variant's own, minus what was allocated
just before it: an out-of-place gradient counts, the inputs do not (``inputs_bytes`` is
stored beside).  Measured once per case and variant, before the check; CUDA only.  Not a
study: the registry lists no ``_memory``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from bench.studies import Params, Refused, Step, Tensors

MEMORY_SEED = 20261130  # the inputs the memory is measured on (not the checked or timed ones)

Draw = Callable[[Params, torch.device, torch.Generator], Tensors]


def peak_memory(case: Params, build: Callable[[Params], Step], draw: Draw) -> dict[str, Any]:
    """``peak_bytes`` (one step's peak above its inputs), ``inputs_bytes`` and ``memory`` (how,
    or why not measured: no CUDA device, a refusal, an error) for ``build(case)`` on inputs
    from ``draw(case, device, generator)``."""
    out: dict[str, Any] = {}
    if not torch.cuda.is_available():
        out["memory"] = "not measured: no CUDA device (torch.cuda.max_memory_allocated needs one)"
        return out
    device = torch.device("cuda")
    try:
        step = build(case)
    except Refused as exc:
        out["memory"] = f"not measured: refused ({str(exc)[:160]})"
        return out
    try:
        t = draw(case, device, torch.Generator(device=device).manual_seed(MEMORY_SEED))
        warm = step(t)  # compiles what compiles; an in-place variant leaves its result in its inputs
        del warm
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        outs = step(t)
        torch.cuda.synchronize(device)
        out["peak_bytes"] = int(torch.cuda.max_memory_allocated(device) - before)
        out["inputs_bytes"] = int(sum(v.numel() * v.element_size() for v in t.values()))
        out["memory"] = "torch.cuda.max_memory_allocated() during one step, minus the memory allocated before it"
        del outs, t
    except Exception as exc:  # an out-of-memory or a peer's error: the check will say more
        out["memory"] = f"not measured: {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    finally:
        del step
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
    return out


def memory_meta(
    build: Callable[[Params], Step], draw: Draw, extra: Callable[[Params], dict[str, Any]] | None = None
) -> Callable[[Params], dict[str, Any]]:
    """A variant's meta: ``extra(case)`` and the step's peak memory (:func:`peak_memory`)."""

    def meta(case: Params) -> dict[str, Any]:
        base = dict(extra(case)) if extra is not None else {}
        return base | peak_memory(case, build, draw)

    return meta
