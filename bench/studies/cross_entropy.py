"""Cross-entropy over a vocabulary: our one-pass kernel against what a trainer would pick.

Every case is the loss of N tokens over a vocabulary of V classes (class-index targets, 5%
of them ``ignore_index``, ``reduction="mean"``), as an lm head's loss runs: bf16 logits at
every shape, fp32 at two, and a few cases with label smoothing (0.1) or a logit soft cap
(30, Gemma's).  Directions: ``fwd``, the loss alone (logits that do not require grad), and
``fwd+bwd``, the loss and then its gradient over the logits through autograd: the full
step, which is what Liger's forward computes anyway, so full steps are what compare.

Variants: ours (``kernels.cross_entropy``: the gradient into a new buffer), ours with
``inplace_backward=True`` (the gradient written over the logits: no second ``[N, V]``
tensor; training steps only, the forward alone writes no gradient), ``F.cross_entropy``
eager, ``torch.compile`` of it (fullgraph, static shapes, compiled afresh per case),
Liger-Kernel's ``LigerCrossEntropyFunction`` (its arguments matched to the installed
version's signature) and QuACK's ``quack.cross_entropy.cross_entropy`` where installed
(it takes neither label smoothing nor a soft cap: refused there, as it is for rows that are
not a multiple of 16 bytes).  The soft cap is ``cap * tanh(x / cap)`` before the loss; a
peer without one computes it as a user would, in the logits' dtype.

**Peak memory is a result.**  Each variant's meta (which the harness records once per case,
before the check) calls the variant's step twice on inputs of its own, freshly drawn on the
GPU, and stores ``peak_bytes``: ``torch.cuda.max_memory_allocated()`` during the second call
(after ``reset_peak_memory_stats``) minus what was allocated just before it (the inputs), so
an out-of-place gradient counts and the logits do not; beside it ``logits_bytes``.  The first
call compiles whatever compiles (Triton, Inductor), so the peak is one step's.  On a machine
without CUDA the meta says memory was not measured.

**Variants that write over their logits** (ours in place; Liger, whose forward stores the
gradient in its input): each reads its own copy of the logits from the inputs (``x_<name>``),
so its overwrite never reaches another variant's check, and the check itself runs on fresh
logits.  In the timed loop the harness calls a step again and again on the same inputs, so
from the second call on such a variant computes on the gradient the previous call left:
finite values of magnitude at most 1 (a probability minus a target share, scaled by 1/N),
and the same work per element, since neither kernel branches on the values.  That is the
honest price of timing an in-place step without a copy inside the timed region.

Traffic (from the problem): the forward reads the logits once and the targets; the training
step adds one write of the gradient, ``N * V`` elements (the minimum: Liger's and ours both
move exactly this).  The float64 reference is computed in chunks of rows (sum reduction,
divided by the rows not ignored: torch's mean), so that it fits beside the largest cases;
the largest training step, 16384 x 262144 (2^32 elements), is left out: the harness's
float64 comparison of its gradient alone would need four float64 copies, 128 GiB.

Registered (contract/studies.py); its page is ``publish/pages/cross_entropy.py`` with
``templates/cross_entropy.md.j2``.
"""

from __future__ import annotations

import inspect
from importlib import metadata
from typing import Any

import torch
import torch.nn.functional as F

import kernels
from bench.studies import Params, Refused, Step, Tensors, Variant, _memory
from bench.studies._rows import DTYPES, TOLERANCE, element_size, package_meta, require_16_byte_rows

OP = "cross_entropy"
IGNORE = -100
IGNORED_SHARE = 0.05  # of the targets set to ignore_index
SMOOTHING = 0.1
SOFTCAP = 30.0
# The loss's variations, one operator name each (their cases share shapes with the plain loss).
OPS = {OP: {}, "cross_entropy_ls": {"label_smoothing": SMOOTHING}, "cross_entropy_softcap": {"softcap": SOFTCAP}}
TOKENS = (4096, 8192, 16384)
# Llama 2's 32000, GPT-2's 50257 (odd), Llama 3's 128256, Qwen2's 151936, Gemma's 262144 (2^18)
VOCABS = (32000, 50257, 128256, 151936, 262144)
TOO_BIG_TO_CHECK = {("fwd+bwd", 16384, 262144)}  # see the module docstring
FP32_SHAPES = ((4096, 32000), (8192, 128256))
VARIANT_SHAPES = ((8192, 128256), (4096, 151936))  # label smoothing and soft cap, bf16
QUICK = ((OP, "bf16", 8192, 128256), (OP, "bf16", 4096, 50257), ("cross_entropy_softcap", "bf16", 8192, 128256))
LOGITS_SCALE = 2.0  # logits drawn as N(0, 2^2): a trained lm head's spread
REF_CHUNK = 1 << 26  # float64 elements per chunk of the reference


def _options(case: Params) -> tuple[float, float | None]:
    """(label_smoothing, softcap) of a case."""
    return float(case.get("label_smoothing", 0.0)), case.get("softcap")


def _capped(x: torch.Tensor, cap: float | None) -> torch.Tensor:
    """The soft cap as a user writes it (Gemma's ``logits / cap``, ``tanh``, ``* cap``)."""
    return x if cap is None else torch.tanh(x / cap) * cap


def _summed(x: torch.Tensor, target: torch.Tensor, eps: float, cap: float | None) -> torch.Tensor:
    return F.cross_entropy(_capped(x, cap), target, ignore_index=IGNORE, label_smoothing=eps, reduction="sum")


def _logits(t: Tensors, key: str) -> torch.Tensor:
    """The logits a variant reads: its own copy where the inputs hold one (``key``)."""
    return t[key] if key in t else t["x"]


def _apply(fn, case: Params, key: str = "x") -> Step:  # type: ignore[no-untyped-def]
    """Wrap ``fn(logits, target) -> loss`` into the step a case times: the loss, or the loss
    then its gradient over the logits through autograd (upstream gradient 1)."""
    if case["direction"] == "fwd":
        return lambda t: (fn(_logits(t, key), t["target"]),)

    def step(t: Tensors) -> tuple[torch.Tensor, ...]:
        x = _logits(t, key)
        loss = fn(x, t["target"])
        (dx,) = torch.autograd.grad(loss, x)
        return loss, dx

    return step


def _ours(inplace: bool):  # type: ignore[no-untyped-def]
    def build(case: Params) -> Step:
        eps, cap = _options(case)

        def fn(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            return kernels.cross_entropy(
                x, t, ignore_index=IGNORE, label_smoothing=eps, softcap=cap, inplace_backward=inplace
            )

        return _apply(fn, case, "x_triton-inplace" if inplace else "x")

    return build


def _torch_fn(case: Params):  # type: ignore[no-untyped-def]
    eps, cap = _options(case)

    def fn(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(_capped(x, cap), t, ignore_index=IGNORE, label_smoothing=eps)

    return fn


def _compiled(case: Params) -> Step:
    # Every case compiles afresh (Dynamo falls back to eager past its recompile limit).
    torch._dynamo.reset()
    return _apply(torch.compile(_torch_fn(case), dynamic=False, fullgraph=True), case)


# ----------------------------------------------------------------------------- Liger


def _liger_function():  # type: ignore[no-untyped-def]
    try:
        from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
    except ImportError as exc:
        raise Refused(f"liger-kernel is not installed ({exc})") from exc
    return LigerCrossEntropyFunction


def liger_args(params: list[inspect.Parameter], leading: list[Any], known: dict[str, Any]) -> list[Any]:
    """Positional arguments for an installed Liger-Kernel ``Function.forward`` (without ctx):
    ``leading`` for its first parameters, then each by name from ``known`` or its default
    (versions add and reorder parameters: weight, reduction, softcap, z-loss, token
    accuracy).  Raises Refused for a parameter it does not know that has no default."""
    args: list[Any] = []
    for i, p in enumerate(params):
        if i < len(leading):
            args.append(leading[i])
        elif p.name in known:
            args.append(known[p.name])
        elif p.default is not inspect.Parameter.empty:
            args.append(p.default)
        else:
            raise Refused(f"this Liger-Kernel function has a parameter the study does not know: {p.name}")
    return args


def _liger_args(params: list[inspect.Parameter], x: Any, t: Any, eps: float, cap: float | None) -> list[Any]:
    """``LigerCrossEntropyFunction``'s arguments; Refused where the case needs a parameter
    the installed version lacks."""
    names = [p.name for p in params]
    if cap is not None and "softcap" not in names:
        raise Refused(f"this Liger-Kernel's cross-entropy takes no softcap (parameters: {', '.join(names)})")
    if eps and "label_smoothing" not in names:
        raise Refused(f"this Liger-Kernel's cross-entropy takes no label_smoothing (parameters: {', '.join(names)})")
    known = {"ignore_index": IGNORE, "label_smoothing": eps, "reduction": "mean", "softcap": cap, "weight": None,
             "lse_square_scale": 0.0, "return_z_loss": False}  # fmt: skip
    return liger_args(params, [x, t], known)


def _liger(case: Params) -> Step:
    fn = _liger_function()
    params = list(inspect.signature(fn.forward).parameters.values())[1:]  # without ctx
    eps, cap = _options(case)
    _liger_args(params, None, None, eps, cap)  # refuse now, not in the check

    def loss(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        out = fn.apply(*_liger_args(params, x, t, eps, cap))
        return out[0] if isinstance(out, tuple) else out

    return _apply(loss, case, "x_liger")


def _liger_meta(case: Params) -> dict[str, Any]:
    try:
        version = metadata.version("liger-kernel")
    except metadata.PackageNotFoundError:
        return {}
    out = {"version": version, "entry": "liger_kernel.ops.cross_entropy.LigerCrossEntropyFunction"}
    try:  # versions since late 2024 skip the gradient when the logits do not require grad
        import liger_kernel.ops.cross_entropy as module

        loss_only = "HAS_GRADIENTS" in inspect.getsource(module)
    except (ImportError, OSError, TypeError):
        return out
    out["gradient"] = "written over the logits by the forward" + (
        " when they require grad (a forward alone computes the loss only)"
        if loss_only
        else ", even for a forward alone (this version has no loss-only path)"
    )
    return out


# ----------------------------------------------------------------------------- QuACK


def _quack(case: Params) -> Step:
    try:
        from quack.cross_entropy import cross_entropy as quack_ce
    except ImportError as exc:
        raise Refused(f"quack-kernels is not installed ({exc})") from exc
    eps, cap = _options(case)
    if eps or cap is not None:
        raise Refused("QuACK's cross_entropy takes neither label_smoothing nor a softcap")
    require_16_byte_rows(case)
    params = inspect.signature(quack_ce).parameters
    names = list(params)
    if "ignore_index" not in params:
        raise Refused(f"this quack.cross_entropy takes no ignore_index (parameters: {', '.join(names)})")
    if "reduction" in params:

        def fn(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            return quack_ce(x, t, ignore_index=IGNORE, reduction="mean")

    elif len(names) >= 2:  # an older version: per-row losses (0 where ignored), reduced here as torch's mean

        def fn(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            return quack_ce(x, t, ignore_index=IGNORE).sum() / (t != IGNORE).sum()

    else:
        raise Refused(f"unknown quack.cross_entropy signature ({', '.join(names)})")
    return _apply(fn, case)


# ----------------------------------------------------------------------------- memory


def _draw(case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
    """Logits and targets (5% ignored); the logits require grad for a training step."""
    rows, cols = case["rows"], case["cols"]
    x = torch.randn((rows, cols), generator=gen, device=device, dtype=torch.float32).mul_(LOGITS_SCALE)
    x = x.to(DTYPES[case["dtype"]])
    target = torch.randint(0, cols, (rows,), generator=gen, device=device)
    ignored = torch.rand((rows,), generator=gen, device=device) < IGNORED_SHARE
    target = torch.where(ignored, torch.full_like(target, IGNORE), target)
    if case["direction"] == "fwd+bwd":
        x.requires_grad_()
    return {"x": x, "target": target}


def logits_bytes(case: Params) -> int:
    return case["rows"] * case["cols"] * element_size(case)


def memory_meta(build, extra=None, draw=None):  # type: ignore[no-untyped-def]
    """A variant's meta: ``extra(case)``, ``logits_bytes`` and the step's peak memory
    (:func:`bench.studies._memory.peak_memory`) on this study's logits and targets (or
    ``draw``'s inputs)."""
    return _memory.memory_meta(build, draw or _draw, lambda c: (dict(extra(c)) if extra else {}) | {
        "logits_bytes": logits_bytes(c)})  # fmt: skip


# ----------------------------------------------------------------------------- the study


def case_id(case: Params) -> str:
    head = "" if case["op"] == OP else f"{case['op'].removeprefix('cross_entropy_')}/"
    return f"{head}{case['direction']}/{case['dtype']}/{case['rows']}x{case['cols']}"


class CrossEntropyStudy:
    name = "cross_entropy"
    directions = ("fwd", "fwd+bwd")

    def cases(self, quick: bool) -> list[Params]:
        def case(op: str, direction: str, dtype: str, rows: int, cols: int) -> Params:
            return {"op": op, "direction": direction, "dtype": dtype, "rows": rows, "cols": cols, **OPS[op]}

        out: list[Params] = []
        for direction in self.directions:
            if quick:
                out += [case(op, direction, dtype, n, v) for op, dtype, n, v in QUICK]
                continue
            for v in VOCABS:
                for n in TOKENS:
                    if (direction, n, v) not in TOO_BIG_TO_CHECK:
                        out.append(case(OP, direction, "bf16", n, v))
            out += [case(OP, direction, "fp32", n, v) for n, v in FP32_SHAPES]
            for op in OPS:
                if op != OP:
                    out += [case(op, direction, "bf16", n, v) for n, v in VARIANT_SHAPES]
        return out

    def case_id(self, case: Params) -> str:
        return case_id(case)

    def options(self, quick: bool) -> dict[str, Any]:
        # Every case moves hundreds of MB or more: far past the L2, so warm and cold alike.
        return {"rounds": 10 if quick else 12, "l2_modes": ("cold",)}

    def variants(self, case: Params) -> list[Variant]:
        ours = _ours(False)
        out = [
            Variant(
                "triton",
                "Triton (ours): kernels.cross_entropy",
                ours,
                memory_meta(ours, lambda c: {"gradient": "a new buffer"}),
            )
        ]
        if case["direction"] == "fwd+bwd":
            inplace = _ours(True)
            out.append(
                Variant(
                    "triton-inplace",
                    "Triton (ours), gradient over the logits (inplace_backward)",
                    inplace,
                    memory_meta(inplace, lambda c: {"gradient": "written over the logits"}),
                )
            )
        eager = lambda c: _apply(_torch_fn(c), c)
        compile_meta = lambda c: {"mode": "default", "dynamic": False, "fullgraph": True}
        out += [
            Variant("torch", "F.cross_entropy (eager)", eager, memory_meta(eager)),
            Variant("compile", "torch.compile(F.cross_entropy)", _compiled, memory_meta(_compiled, compile_meta)),
            Variant("liger", "Liger-Kernel", _liger, memory_meta(_liger, _liger_meta)),
            Variant(
                "quack",
                "QuACK",
                _quack,
                memory_meta(_quack, package_meta("quack-kernels", "quack.cross_entropy.cross_entropy")),
            ),
        ]
        return out

    def inputs(self, case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
        t = _draw(case, device, gen)
        # Each variant that writes over its logits gets a copy of its own (module docstring).
        own = ["x_liger"] + (["x_triton-inplace"] if case["direction"] == "fwd+bwd" else [])
        for key in own:
            t[key] = t["x"].detach().clone().requires_grad_(t["x"].requires_grad)
        return t

    def reference(self, case: Params, inputs: Tensors) -> tuple[torch.Tensor, ...]:
        """float64 ``F.cross_entropy`` (and its gradient), chunked over rows: each chunk's
        summed loss, divided by the rows not ignored, is torch's mean."""
        eps, cap = _options(case)
        x, target = inputs["x"].detach(), inputs["target"]
        valid = int((target != IGNORE).sum())
        rows, cols = x.shape
        chunk = max(1, REF_CHUNK // max(cols, 1))
        total = torch.zeros((), dtype=torch.float64, device=x.device)
        grad = torch.empty((rows, cols), dtype=torch.float64, device=x.device) if case["direction"] != "fwd" else None
        for start in range(0, rows, chunk):
            xc = x[start : start + chunk].double()
            tc = target[start : start + chunk]
            if grad is None:
                total += _summed(xc, tc, eps, cap)
                continue
            xc.requires_grad_()
            part = _summed(xc, tc, eps, cap)
            (g,) = torch.autograd.grad(part, xc)
            grad[start : start + chunk] = g
            total += part.detach()
            del xc, g, part
        loss = total / valid if valid else torch.tensor(float("nan"), dtype=torch.float64, device=x.device)
        if grad is None:
            return (loss,)
        grad /= max(valid, 1)
        return loss, grad

    def traffic(self, case: Params) -> tuple[int, int]:
        elems = case["rows"] * case["cols"]
        targets = case["rows"] * 8
        if case["direction"] == "fwd":
            return elems * element_size(case) + targets, 4 * elems  # max, subtract, exp, sum
        return 2 * elems * element_size(case) + targets, 7 * elems  # + exp, divide, subtract the target share

    def tolerance(self, case: Params) -> float:
        return TOLERANCE[case["dtype"]]


STUDY = CrossEntropyStudy()
