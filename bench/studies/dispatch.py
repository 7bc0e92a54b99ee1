"""Dispatch: what one eager call costs the host, piece by piece, and what chains of calls
cost eagerly, under ``torch.compile`` and under ``mode="reduce-overhead"``.

Host time per call (timer ``host-loop``): ``perf_counter`` around a loop of ``CALLS`` calls
that queue work without waiting for it.  At these sizes every call's kernels finish long
before the host has queued the next call, so the loop's time is the host's.  The pieces of
our call are timed alone, each the same way:

* validation: ``kernels.softmax.check_args`` (types, dtype, device, dim);
* planning: the row layout (alignment of every row) and the cached plan lookup;
* allocation: ``torch.empty`` of the output;
* launch: the cached launch of the planned kernel into a preallocated output, and the same
  kernel through Triton's own ``kernel[grid](...)`` path (what the cache saves);
* the whole call without autograd, with autograd (``torch.autograd.Function``), and through
  the registered ``torch.library`` op (what dispatching through the op costs).

torch.softmax and Liger-Kernel get the same treatment where their code allows a piece to be
called alone.  Training step: forward then ``torch.autograd.grad``.

Chains (timer ``eager-events``): one op, or 16 softmax ops in a row, called from Python
with CUDA events around ``CALLS`` calls: what a user's loop sees, host and device together.
"""

from __future__ import annotations

import importlib
import random
import time
from collections.abc import Callable
from typing import Any

import torch

import kernels
from bench.harness import Options, describe_error
from kernels import _rowwise

softmax_module = importlib.import_module("kernels.softmax")  # the package attribute is the function

# Two block-plan shapes, and a few wide rows that take the two-launch split plan (its eager
# path is a separate one: one statistics allocation, two launches).
SHAPES = [(32, 127), (1024, 1024), (4, 32769)]
CALLS = 100
CHAIN = 16


def host_loop_us(fn: Callable[[], object], calls: int = CALLS) -> float:
    """Host µs per call of ``fn`` over a loop of ``calls`` calls that never waits for the GPU."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) * 1e6 / calls


def events_loop_us(fn: Callable[[], object], calls: int = CALLS) -> float:
    """What a Python loop of ``calls`` calls takes per call, host and device together."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000 / calls


def _ours_pieces(x: torch.Tensor, xg: torch.Tensor, dy: torch.Tensor) -> dict[str, tuple[str, Callable[[], object]]]:
    y = torch.empty_like(x)
    call = softmax_module._FORWARD_CALL
    prepared = call.prepare(x, None, y)
    assert prepared is not None, "the dispatch study needs the eager fast path (a CUDA tensor on the current GPU)"
    n_rows = x.shape[0]
    plan, vec, align = call.plan(x, None, y, None)
    yg = softmax_module.softmax(xg).detach()

    def uncached() -> None:
        for launcher in _rowwise.LAUNCHERS:
            launcher.uncached = True
        try:
            _rowwise.run_rows(softmax_module.FORWARD, plan, x, None, y, align, vec)
        finally:
            for launcher in _rowwise.LAUNCHERS:
                launcher.uncached = False

    def step() -> None:
        torch.autograd.grad(kernels.softmax(xg), xg, dy)

    def op_step() -> None:
        torch.autograd.grad(softmax_module._softmax_op(xg, None, None), xg, dy)

    return {
        "ours/validate": ("validation (check_args)", lambda: softmax_module.check_args(x, -1, None, None)),
        "ours/plan": ("planning: the prepared-launch lookup (plan, layout, kernels)", lambda: call.prepare(x, None, y)),
        "ours/allocate": (
            "allocation (torch.empty_like)",
            lambda: torch.empty_like(x, dtype=x.dtype, memory_format=torch.contiguous_format),
        ),
        "ours/launch": ("launch: the prepared launch into a preallocated output", lambda: prepared(x, x, y, n_rows)),
        "ours/launch-triton": ("launch through Triton's kernel[grid]", uncached),
        "ours/forward": ("forward without validation (_forward)", lambda: softmax_module._forward(x, None, x.dtype)),
        "ours/call": ("kernels.softmax(x)", lambda: kernels.softmax(x)),
        "ours/call-grad": ("kernels.softmax(x), x requires grad", lambda: kernels.softmax(xg)),
        "ours/backward": (
            "backward without autograd (_backward)",
            lambda: softmax_module._backward(yg, dy, None, x.dtype),
        ),
        "ours/op": ("the registered op, torch.ops.labnotes.softmax", lambda: softmax_module._softmax_op(x, None, None)),
        "ours/op-grad": ("the registered op, x requires grad", lambda: softmax_module._softmax_op(xg, None, None)),
        "ours/step": ("training step: forward + autograd.grad", step),
        "ours/op-step": ("training step through the registered op", op_step),
    }


def _torch_pieces(x: torch.Tensor, xg: torch.Tensor, dy: torch.Tensor) -> dict[str, tuple[str, Callable[[], object]]]:
    return {
        "torch/allocate": ("allocation (torch.empty_like)", lambda: torch.empty_like(x)),
        "torch/call": ("torch.softmax(x, -1)", lambda: torch.softmax(x, -1)),
        "torch/aten": ("torch.ops.aten._softmax.default", lambda: torch.ops.aten._softmax.default(x, -1, False)),
        "torch/call-grad": ("torch.softmax(x, -1), x requires grad", lambda: torch.softmax(xg, -1)),
        "torch/step": (
            "training step: forward + autograd.grad",
            lambda: torch.autograd.grad(torch.softmax(xg, -1), xg, dy),
        ),
    }


def _liger_pieces(x: torch.Tensor, xg: torch.Tensor, dy: torch.Tensor) -> dict[str, tuple[str, Callable[[], object]]]:
    try:
        from liger_kernel.ops import softmax as liger
    except ImportError:
        return {}
    y = torch.empty_like(x)
    block, warps = liger.calculate_settings(x.shape[1])

    def launch() -> None:
        liger._softmax_single_block_forward_kernel[(x.shape[0],)](
            y, y.stride(0), x, x.stride(0), x.shape[1], BLOCK_SIZE=block, num_warps=warps
        )

    return {
        "liger/launch-triton": ("launch through Triton's kernel[grid]", launch),
        "liger/forward": ("forward without autograd (_softmax_forward)", lambda: liger._softmax_forward(x)),
        "liger/call": ("LigerSoftmaxFunction.apply(x)", lambda: liger.LigerSoftmaxFunction.apply(x)),
        "liger/call-grad": (
            "LigerSoftmaxFunction.apply(x), x requires grad",
            lambda: liger.LigerSoftmaxFunction.apply(xg),
        ),
        "liger/step": (
            "training step: forward + autograd.grad",
            lambda: torch.autograd.grad(liger.LigerSoftmaxFunction.apply(xg), xg, dy),
        ),
    }


def _quack_pieces(x: torch.Tensor, xg: torch.Tensor, dy: torch.Tensor) -> dict[str, tuple[str, Callable[[], object]]]:
    try:
        from quack.softmax import softmax as quack_softmax
    except ImportError:
        return {}
    if x.shape[1] % 8:
        return {}
    return {
        "quack/call": ("quack.softmax.softmax(x)", lambda: quack_softmax(x)),
        "quack/step": (
            "training step: forward + autograd.grad",
            lambda: torch.autograd.grad(quack_softmax(xg), xg, dy),
        ),
    }


def _chain(op: Callable[[torch.Tensor], torch.Tensor], n: int) -> Callable[[torch.Tensor], torch.Tensor]:
    def f(x: torch.Tensor) -> torch.Tensor:
        for _ in range(n):
            x = op(x)
        return x

    return f


def _chain_variants(n: int) -> dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]]:
    torch_op = _chain(lambda t: torch.softmax(t, -1), n)
    ours_op = _chain(lambda t: kernels.softmax(t), n)
    out: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {}
    for who, fn in (("torch", torch_op), ("ours", ours_op)):
        out[f"{who}/eager"] = (f"{who}, eager", fn)
        out[f"{who}/compile"] = (f"{who}, torch.compile", torch.compile(fn, fullgraph=True, dynamic=False))
        out[f"{who}/reduce-overhead"] = (
            f"{who}, torch.compile(mode='reduce-overhead')",
            torch.compile(fn, fullgraph=True, dynamic=False, mode="reduce-overhead"),
        )
    return out


def _entry(case_id: str, case: dict[str, Any], nbytes: int, variants: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"id": case_id, "case": case, "bytes": nbytes, "flops": 0, "variants": variants}


def _measure(
    pieces: dict[str, tuple[str, Callable[[], object]]],
    timer: Callable[[Callable[[], object]], float],
    rounds: int,
    kind: str,
) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    live: dict[str, Callable[[], object]] = {}
    for name, (label, fn) in pieces.items():
        rec = {"label": label, "samples_us": [], "error": None, "check": None, "timer": kind,
               "calls_per_sample": CALLS, "meta": {"label": label}}  # fmt: skip
        try:
            for _ in range(3):  # compile, autotune, allocate, capture: nothing of that is timed
                fn()
            torch.cuda.synchronize()
            live[name] = fn
        except Exception as exc:
            rec["error"] = describe_error(exc)
        records[name] = rec
    rng = random.Random(f"{kind}:{len(pieces)}")
    for _ in range(rounds):
        order = list(live)
        rng.shuffle(order)  # interleaved, in a new order every round
        for name in order:
            records[name]["samples_us"].append(round(timer(live[name]), 4))
    return records


class DispatchStudy:
    name = "dispatch"
    directions = ("fwd", "fwd+bwd")

    def cases(self, quick: bool) -> list[dict[str, Any]]:
        return [{"rows": r, "cols": c} for r, c in SHAPES]

    def options(self, quick: bool) -> dict[str, Any]:
        return {"eager": False, "l2_modes": ("warm",), "rounds": 8 if quick else 15}

    def entries(self, quick: bool) -> int:
        """Cases a run file holds: per shape, the host pieces and each chain length timed two ways."""
        return len(self.cases(quick)) * (1 + len((1, CHAIN)) * len(("user", "host")))

    def run(self, backend: Any, writer: Any, opts: Options, stream: Any) -> None:
        run(backend, writer, opts, stream)


STUDY = DispatchStudy()


def run(backend: Any, writer: Any, opts: Options, stream: Any) -> None:
    """Measure every piece and chain; the writer stores each case as it finishes."""
    device = backend.device
    rounds = opts.rounds
    gen = torch.Generator(device=device).manual_seed(opts.seed)
    try:
        for rows, cols in SHAPES:
            x = (torch.randn((rows, cols), generator=gen, device=device) * 4).to(torch.bfloat16)
            xg = x.clone().requires_grad_()
            dy = torch.randn((rows, cols), generator=gen, device=device).to(torch.bfloat16)
            nbytes = 2 * rows * cols * 2
            pieces = {
                **_ours_pieces(x, xg, dy),
                **_torch_pieces(x, xg, dy),
                **_liger_pieces(x, xg, dy),
                **_quack_pieces(x, xg, dy),
            }
            backend.before_case()
            case = {"op": "softmax", "direction": "fwd+bwd", "dtype": "bf16", "rows": rows, "cols": cols, "l2": "warm",
                    "measure": "host"}  # fmt: skip
            writer.add_case(
                _entry(f"host/bf16/{rows}x{cols}", case, nbytes, _measure(pieces, host_loop_us, rounds, "host-loop"))
            )
            print(f"host pieces {rows}x{cols} done", file=stream, flush=True)
            for n in (1, CHAIN):
                chains = _chain_variants(n)
                fns = {name: (label, lambda f=f, x=x: f(x)) for name, (label, f) in chains.items()}
                backend.before_case()
                for measure, timer, kind in (
                    ("user", events_loop_us, "eager-events"),
                    ("host", host_loop_us, "host-loop"),
                ):
                    case = {"op": f"softmax-chain{n}", "direction": "fwd", "dtype": "bf16", "rows": rows, "cols": cols,
                            "l2": "warm", "measure": measure, "chain": n}  # fmt: skip
                    writer.add_case(
                        _entry(
                            f"chain{n}/{measure}/bf16/{rows}x{cols}",
                            case,
                            n * nbytes,
                            _measure(fns, timer, rounds, kind),
                        )
                    )
                print(f"chain of {n} {rows}x{cols} done", file=stream, flush=True)
                torch._dynamo.reset()
    except BaseException as exc:
        writer.finish("interrupted", note=describe_error(exc))
        raise
    writer.finish("complete")
