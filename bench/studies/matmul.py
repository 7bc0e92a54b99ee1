"""GEMM on Hopper (issue 9): our Triton matrix product, by default dispatch and with each
variant forced, against cuBLAS (``torch.mm``) and ``torch.compile`` (max-autotune).

Cases (``op``, ``direction``, ``dtype``, ``rows`` = M, ``cols`` = N, ``k`` = K; C[M, N] =
A[M, K] · B[K, N]):

- ``op="mm"``: square sizes 127×255×65 to 8192³, 16384×1024×1024, model shapes nobody
  tuned for (4096×14336×4096, 8192×5120×13824), and decode-like products (M = 1, 16, 64,
  128 against the weight shapes 4096×4096, 14336×4096, 4096×14336), forward in bf16 at
  every shape, fp16 at a few, fp32 as TF32 (dtype ``tf32``) and as IEEE fp32 (``fp32``)
  at two; the training step (forward, then dA = dC·Bᵀ and dB = Aᵀ·dC through autograd) at
  seven shapes (the last a vocabulary projection of 50257).
- ``op="mm_bias"``, ``"mm_bias_gelu"``, ``"mm_residual"``: the fused epilogues at 4096³
  and 8192³ bf16, against cuBLAS followed by the separate op(s) and ``torch.compile`` of
  the composition (and, for bias + GELU, cuBLASLt's own GELU epilogue).
- Held out (``HELD_OUT``): bf16 forward products whose timings set nothing in the
  dispatch, each variant forced and cuBLAS (no ``torch.compile``); the default's meta says
  ``held_out``, and the page scores the dispatch's regret on them apart.  ``TUNED_ON``: the
  first held-out set, which the rule was refitted to; run the same way, scored as studied.

Variants: ``triton`` (default dispatch) and each variant forced (``triton-fixed``,
``-autotuned``, ``-persistent``, ``-warp-specialized``, ``-split-k`` on decode shapes) on forward cases; at 4096³
and 8192³ bf16 the grouping study, one tile (128×256×64, 3 stages, 8 warps) with GROUP_M 1,
4 and 8 (``triton-group1`` ...).  Peers are named per operator (``cublas``,
``cublas-bias-gelu``, ``compile-residual`` ...): a name means one variant, and one label,
across the study.

Evidence: every Triton variant's meta holds what the call compiled (bench/evidence.py):
registers, spills, shared memory and the SASS instruction counts (HGMMA against HMMA, TMA,
cp.async), captured before the variant is checked; where the disassembler is missing the
meta says so and the sweep goes on.  cuBLAS's meta states the reduced-precision-reduction
and TF32 settings in force.

Counted work (from the problem, not from any implementation): flops 2·M·N·K forward, three
products (6·M·N·K) for the training step; bytes: the operands read once and the output
written once (plus the bias or residual read); the training step reads A, B and dC and
writes C, dA and dB.
"""

from __future__ import annotations

import importlib
import math
import os
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from bench import evidence
from bench.studies import Params, Refused, Step, Tensors, Variant

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32, "fp32": torch.float32}
PRECISION = {"tf32": "tf32", "fp32": "ieee"}  # fp32 tensors: the precision named, never chosen silently
TOLERANCE = {"bf16": 1e-2, "fp16": 5e-3, "tf32": 5e-3, "fp32": 1e-5}  # relative L2 error against float64

# M × N × K.  Square sizes from launch-bound to 8192³, a tall-skinny product, model shapes.
SHAPES = [
    (127, 255, 65),
    (512, 512, 512),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (16384, 1024, 1024),
    (4096, 14336, 4096),
    (8192, 5120, 13824),
]
# Decode: a few tokens against a weight (N, K): weight-read bound.
DECODE_M = (1, 16, 64, 128)
DECODE_NK = ((4096, 4096), (14336, 4096), (4096, 14336))
DECODE = [(m, n, k) for n, k in DECODE_NK for m in DECODE_M]
FP16_SHAPES = [(127, 255, 65), (1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (4096, 14336, 4096),
               (16, 4096, 4096), (128, 14336, 4096)]  # fmt: skip
FP32_SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096)]  # as TF32 and as IEEE fp32
# The last: a GPT-2 LM head's step (vocabulary 50257), whose dC and weight rows TMA cannot read as they lie.
STEP_SHAPES = [(127, 255, 65), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
               (4096, 14336, 4096), (8192, 50257, 768)]  # fmt: skip
EPILOGUE_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
# Held out: bf16 products whose timings set nothing in kernels.matmul (not the dispatch's
# thresholds, not a default tile, not the autotuner's configs); the page scores the dispatch's
# regret on them apart from the shapes the rule was fitted to.  They time our variants and
# cuBLAS, not torch.compile: they score our dispatch.
# TUNED_ON were the first held-out set (run matmul-20261203T202619Z-b035874).  Their regret
# under the rule of that run reshaped the rule (no persistent kernel where TMA cannot read
# the operands, the warp-specialized kernel from four waves of its tiles), so they are
# studied shapes now and still run, to show the new rule on them.
# The warp-specialized kernel's K tail (kernels.matmul.WS_K_TAIL_STEPS) was fitted on three
# held-out products, 4096x4096x4100, 3001x4001x5001 and 3000x7168x3000 (runs
# matmul-20261204T142003Z-b3b9b87 and matmul-20261204T171416Z-afd40a6), which joined them.
TUNED_ON = [(1536, 1536, 1536), (3072, 3072, 3072), (2000, 5120, 5120), (4096, 11008, 4096),
            (4096, 4096, 11008), (8192, 50257, 768), (32, 4096, 14336), (96, 14336, 4096),
            (4096, 4096, 4100), (3001, 4001, 5001), (3000, 7168, 3000)]  # fmt: skip
# The second held-out set, chosen before any of it ran: 2560³ (between the warp-specialized
# kernel's four waves and the persistent kernel's one), a short K (6144x6144x2048), M and K
# off the tile (3000x7168x3000), a tall product with few columns (12288x1536x1536), a
# vocabulary projection with an odd N (32001: no TMA), and decode at M = 48 and M = 8 against
# deep weights (5120x13824, 8192x28672).
# A third set, decode, chosen on 2026-12-04 before split-K's refit (notes/probe_split_decode.py,
# which timed none of the held-out shapes) ran on any of it: weights of 3584x18944,
# 7168x18432 and 2560x9728 at M = 24, 100 and 2 (split-K's side of its rule), and 9216x8192
# at M = 16 (72 tiles: more than half a wave, the autotuned kernel's side).  A fourth, decode
# with K under 8192, chosen before notes/probe_split_shallow.py (which does not time them)
# ran: 40x3072x5120, 8x6144x3072 and 120x1536x6144.  A fifth, operands TMA cannot read as
# they lie, chosen on 2026-12-04 before the copy for TMA (kernels.matmul.tma_copy) was timed
# anywhere: an odd vocabulary of 100277 at K = 2048, a K of 4100 (a's rows 8200 bytes), and
# every dimension odd (3001x4001x5001).  A sixth, odd N, chosen on 2026-12-04 before the
# warp-specialized kernel's pointer stores for such an output (notes/probe_ws_odd_n.py, which
# does not time them) ran anywhere: 6144x49999x1536, 1024x151655x896 (a vocabulary of
# 151655 at few rows) and 16384x12289x3072.  A seventh, between one and four waves, chosen on
# 2026-12-04 before the last-wave rule (notes/probe_waves.py, which does not time them) ran on
# any of it: 2304x2048x6144 (144 persistent tiles, 288 of the warp-specialized kernel),
# 1792x3584x8192 (196 and 392) and 5120x1280x5120 (200 and 400: last waves equally full).
# An eighth, the split tail (kernels.matmul.tail_split), chosen on 2026-12-04 after the
# probe's shapes (notes/probe_stream_k.py, which times none of them) set its constants and
# before it ran on any of these: 7040x768x14336 (165 tiles: 33 in the partial wave, split 4
# ways), 2688x1792x7168 (15, 8 ways), 3840x1280x9728 (18, 7 ways), and either side of the
# dispatch's bound of 4: 4352x1280x12288 (3 ways) and 2944x2048x9216 (2 ways).  The seventh
# set's 2304x2048x6144, where cuBLAS ran 1.46x ahead, is why the split tail was built.
# 4352x1280x12288 then found the bound of four ways 1.07x short; a probe on other shapes
# (notes/probe_tail_bound.py) moved it to three at a deep K, so it is held out from the split
# tail but not from that bound.  A ninth set, chosen on 2026-12-04 before the three-way rule
# ran on any of it: 5504x1024x10240 and 2688x2048x12288 (three ways, deep) and
# 5632x1024x4096 (three ways at K = 4096: the warp-specialized kernel's side).  A tenth,
# chosen on 2026-12-04 before the rule of costs (kernels.matmul.TAIL_COST_STEPS, fitted by
# notes/probe_tail_waves.py, which times none of these) ran on any of it: the split tail
# beyond four waves, 6016x4352x10240 (6.05 waves, 16 ways), 4864x5376x7168 (6.05, 14),
# 7424x5888x5120 (10.1, 9), 6784x4608x10240 (7.2, 4) and 7552x3584x12288 (6.3, 3); below
# two, 2176x2560x7168 (1.3 waves, 3 ways at 112 K steps: the model puts the split tail 2%
# ahead, just past its margin); the
# warp-specialized kernel's K tail, 4480x5120x3000 (5.3 waves, 3 ways) and 2432x6912x7000
# (whole tiles at 3.9 waves); and 7424x3072x6144 (5.3 waves, 3 ways: the warp-specialized
# kernel's side).  An eleventh, decode, chosen on 2026-12-04 (twenty-first session) before the
# rule for captured calls (kernels.matmul.SPLIT_K_GRAPH_MIN_K, fitted on studied shapes from
# the stored runs by notes/score_decode_rule.py) ran on any of it: split-K's side in a graph
# at 32x5120x4096, 4x3584x4608 and 48x6144x5120; the autotuned kernel's, above its rows
# (80x4096x5120) and below its K (12x2560x3072).  It found the row cap wrong (80x4096x5120:
# split-K 1.60x ahead), and the cap went.  A twelfth, decode, chosen on 2026-12-05 before the
# rule without it ran on any of it: split-K's side in a graph past 64 rows (96x4096x6144,
# 112x5120x4096, 72x2048x4608, 128x3072x4096); the autotuned kernel's, below the K
# (24x4096x3584) and past half a wave of split-K's tiles (32x11008x4096: 86 tiles).
HELD_OUT = [(2560, 2560, 2560), (6144, 6144, 2048), (12288, 1536, 1536),
            (4096, 32001, 1024), (48, 5120, 13824), (8, 8192, 28672),
            (24, 3584, 18944), (100, 7168, 18432), (2, 2560, 9728), (16, 9216, 8192),
            (40, 3072, 5120), (8, 6144, 3072), (120, 1536, 6144),
            (2048, 100277, 2048),
            (6144, 49999, 1536), (1024, 151655, 896), (16384, 12289, 3072),
            (2304, 2048, 6144), (1792, 3584, 8192), (5120, 1280, 5120),
            (7040, 768, 14336), (2688, 1792, 7168), (3840, 1280, 9728), (4352, 1280, 12288),
            (2944, 2048, 9216), (5504, 1024, 10240), (2688, 2048, 12288), (5632, 1024, 4096),
            (6016, 4352, 10240), (4864, 5376, 7168), (7424, 5888, 5120), (6784, 4608, 10240), (7552, 3584, 12288),
            (2176, 2560, 7168), (4480, 5120, 3000), (2432, 6912, 7000), (7424, 3072, 6144),
            (32, 5120, 4096), (4, 3584, 4608), (48, 6144, 5120), (80, 4096, 5120), (12, 2560, 3072),
            (96, 4096, 6144), (112, 5120, 4096), (72, 2048, 4608), (128, 3072, 4096), (24, 4096, 3584),
            (32, 11008, 4096)]  # fmt: skip
EPILOGUES = {"mm_bias": "bias", "mm_bias_gelu": "bias_gelu", "mm_residual": "residual"}  # op -> our epilogue
QUICK = {
    ("fwd", "bf16"): [(127, 255, 65), (4096, 4096, 4096), (8192, 8192, 8192), (16, 4096, 4096)],
    ("fwd", "fp16"): [(4096, 4096, 4096), (8192, 8192, 8192)],
    ("fwd+bwd", "bf16"): [(4096, 4096, 4096)],
}
QUICK_EPILOGUE = [("mm_bias_gelu", (8192, 8192, 8192))]

FORCED = ("fixed", "autotuned", "persistent", "warp_specialized", "split_k")  # kernels.matmul.VARIANTS, each forced
DECODE_MAX_M = 128  # split-K is offered where M is at most this (a decode shape)
# The grouping study: one tile, three tile orders (GROUP_M), at these shapes.
GROUPS = (1, 4, 8, 16)
GROUP_TILE = {"block_m": 128, "block_n": 256, "block_k": 64, "num_stages": 3, "num_warps": 8}
GROUP_VARIANT = "persistent"
GROUP_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
# torch.compile's mode.  "max-autotune" (the issue's) also has Inductor capture its own CUDA
# graphs, which copy inputs that are not static into the graph's buffers on every call, and
# which the harness's own graph capture then wraps; "max-autotune-no-cudagraphs" times the same
# autotuned kernels without them.  The run records the mode in the variant's label and meta.
# The default is max-autotune-no-cudagraphs since run 18b11a7 (withdrawn): with max-autotune,
# an illegal memory access followed the torch.compile check of the first case in the sweep's
# process (each variant alone passed; without Inductor's CUDA graphs every case ran:
# notes/bisect_matmul_fault.sh), and a fault on the GPU is sticky, so it ended every case after.
COMPILE_MODE = os.environ.get("LAB_MATMUL_COMPILE_MODE", "max-autotune-no-cudagraphs")


def _km():  # type: ignore[no-untyped-def]
    """kernels.matmul, or Refused where this checkout has none yet."""
    try:  # (by module path: the package exports a function of the same name)
        return importlib.import_module("kernels.matmul")
    except ImportError as exc:
        raise Refused(f"kernels.matmul is not available ({exc})") from exc


def dims(case: Params) -> tuple[int, int, int]:
    return case["rows"], case["cols"], case["k"]


def held_out(case: Params) -> bool:
    """A held-out case (``HELD_OUT``): a bf16 forward product that set nothing in the dispatch."""
    return case["op"] == "mm" and case["direction"] == "fwd" and case["dtype"] == "bf16" and dims(case) in HELD_OUT


def element_size(case: Params) -> int:
    return torch.empty((), dtype=DTYPES[case["dtype"]]).element_size()


def _variant_name(forced: str) -> str:
    return "triton-" + forced.replace("_", "-")


# ----------------------------------------------------------------------------- steps


def _apply(fn: Callable[..., torch.Tensor], case: Params, extra: tuple[str, ...] = ()) -> Step:
    """Wrap ``fn(a, b, *extra)`` into the step a case times: the forward, or the training
    step (the forward, then dA and dB through autograd with a given dC)."""
    if case["direction"] == "fwd":
        return lambda t: (fn(t["a"], t["b"], *(t[e] for e in extra)),)

    def step(t: Tensors) -> tuple[torch.Tensor, ...]:
        c = fn(t["a"], t["b"], *(t[e] for e in extra))
        da, db = torch.autograd.grad(c, (t["a"], t["b"]), t["dc"])
        return c, da, db

    return step


def _extras(op: str) -> tuple[str, ...]:
    return {"mm_bias": ("bias",), "mm_bias_gelu": ("bias",), "mm_residual": ("residual",)}.get(op, ())


def _ours_fn(case: Params, forced: str | None, config: Any = None) -> Callable[..., torch.Tensor]:
    km = _km()
    epilogue = EPILOGUES.get(case["op"])
    precision = PRECISION.get(case["dtype"])
    kw: dict[str, Any] = {"variant": forced, "epilogue": epilogue, "precision": precision, "config": config}
    if epilogue in ("bias", "bias_gelu"):
        return lambda a, b, bias: km.matmul(a, b, bias=bias, **kw)
    if epilogue == "residual":
        return lambda a, b, residual: km.matmul(a, b, residual=residual, **kw)
    return lambda a, b: km.matmul(a, b, **kw)


def _group_config(group_m: int) -> Any:
    return _km().TileConfig(group_m=group_m, **GROUP_TILE)


def _ours(forced: str | None, group_m: int | None = None) -> Callable[[Params], Step]:
    def build(case: Params) -> Step:
        config = _group_config(group_m) if group_m is not None else None
        return _apply(_ours_fn(case, forced, config), case, _extras(case["op"]))

    return build


def _matmul_flags() -> dict[str, Any]:
    """cuBLAS's settings in force: reduced-precision reductions and TF32."""
    out: dict[str, Any] = {}
    m = torch.backends.cuda.matmul
    for key in ("allow_bf16_reduced_precision_reduction", "allow_fp16_reduced_precision_reduction", "allow_tf32"):
        try:
            value = getattr(m, key)
        except Exception:  # an attribute a torch version lacks
            continue
        out[key] = value if isinstance(value, (bool, int, float, str)) else str(value)
    out["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    return out


def _fp32_mode(case: Params) -> Callable[[], None] | None:
    """For fp32 tensors, the setting every call of a peer runs under (TF32 or IEEE): set
    on each call, since cuBLAS and Inductor read it then."""
    if case["dtype"] not in PRECISION:
        return None
    tf32 = case["dtype"] == "tf32"

    def set_mode() -> None:
        torch.backends.cuda.matmul.allow_tf32 = tf32

    return set_mode


def _torch_fn(op: str) -> Callable[..., torch.Tensor]:
    """cuBLAS followed by the separate op(s), as a user writes it."""
    if op == "mm_bias":
        return lambda a, b, bias: torch.addmm(bias, a, b)
    if op == "mm_bias_gelu":
        return lambda a, b, bias: F.gelu(torch.addmm(bias, a, b), approximate="tanh")
    if op == "mm_residual":
        return lambda a, b, residual: torch.mm(a, b) + residual
    return torch.mm


def _peer(fn_for: Callable[[Params], Callable[..., torch.Tensor]]) -> Callable[[Params], Step]:
    def build(case: Params) -> Step:
        fn = fn_for(case)
        set_mode = _fp32_mode(case)
        if set_mode is not None:
            set_mode()
            inner = fn

            def fn(*args: torch.Tensor) -> torch.Tensor:
                set_mode()
                return inner(*args)

        return _apply(fn, case, _extras(case["op"]))

    return build


def _compiled(case: Params) -> Callable[..., torch.Tensor]:
    # Every case compiles afresh (Dynamo falls back to eager past its recompile limit).
    torch._dynamo.reset()
    set_mode = _fp32_mode(case)
    if set_mode is not None:
        set_mode()
    return torch.compile(_torch_fn(case["op"]), mode=COMPILE_MODE, fullgraph=True, dynamic=False)


def _addmm_gelu(case: Params) -> Callable[..., torch.Tensor]:
    fused = getattr(torch, "_addmm_activation", None)
    if fused is None:
        raise Refused("this torch has no torch._addmm_activation (cuBLASLt's GELU epilogue)")
    return lambda a, b, bias: fused(bias, a, b, use_gelu=True)


# ----------------------------------------------------------------------------- meta and evidence


def _config_meta(config: dict[str, int] | None) -> dict[str, Any]:
    if config is None:
        return {}
    return {"tile": f"{config['block_m']}x{config['block_n']}x{config['block_k']}", **config}


def _evidence(case: Params, forced: str | None, config: dict[str, int] | None) -> dict[str, Any]:
    """What the call compiles at this case's shape, read from Triton's compiled kernels on
    the GPU (and, for a training step, what its two backward products compile); a failure
    (out of memory, a refused shape) is recorded beside the rest of the meta, never raised."""
    try:
        return _read_evidence(case, forced, config)
    except Exception as exc:
        return {"evidence_error": evidence.describe(exc)}
    finally:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _read_evidence(case: Params, forced: str | None, config: dict[str, int] | None) -> dict[str, Any]:
    if not torch.cuda.is_available():
        return {"evidence": "no GPU: nothing compiled to inspect"}
    try:
        km = _km()
    except Refused as exc:
        return {"evidence_error": str(exc)}
    m, n, k = dims(case)
    dtype = DTYPES[case["dtype"]]
    epilogue = EPILOGUES.get(case["op"])
    kw: dict[str, Any] = {"variant": forced, "precision": PRECISION.get(case["dtype"])}
    if config is not None:
        kw["config"] = km.TileConfig(**config)
    gen = torch.Generator(device="cuda").manual_seed(0)

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)

    a, b = draw(m, k), draw(k, n)
    extra: dict[str, Any] = {"epilogue": epilogue}
    if epilogue in ("bias", "bias_gelu"):
        extra["bias"] = draw(n)
    elif epilogue == "residual":
        extra["residual"] = draw(m, n)
    out = evidence.capture(lambda: km.compiled_kernels(a, b, **kw, **extra))
    if case["direction"] == "fwd+bwd":
        dc = draw(m, n)
        da = evidence.capture(lambda: km.compiled_kernels(dc, b.t(), **kw))  # dA = dC·Bᵀ: B read transposed
        db = evidence.capture(lambda: km.compiled_kernels(a.t(), dc, **kw))  # dB = Aᵀ·dC
        out["backward"] = {f"da_{key}": v for key, v in da.items()} | {f"db_{key}": v for key, v in db.items()}
    return out


def _dispatch(case: Params, captured: bool) -> str | None:
    """The variant the default dispatch runs for this case's operands on this GPU, in a
    captured CUDA graph (``captured``: what the device timer replays) or called eagerly:
    asked of ``kernels.matmul.dispatch`` with operands laid out as :meth:`inputs` lays them
    (fresh, row-major; uninitialised: only their shapes, strides and alignment count), so a
    choice that depends on TMA reading them is the one the call makes."""
    if not torch.cuda.is_available():
        return None
    try:
        m, n, k = dims(case)
        device = torch.device("cuda", torch.cuda.current_device())
        dtype = DTYPES[case["dtype"]]
        a, b = torch.empty(m, k, device=device, dtype=dtype), torch.empty(k, n, device=device, dtype=dtype)
        return str(_km().dispatch(a, b, EPILOGUES.get(case["op"]), PRECISION.get(case["dtype"]), captured))
    except Exception as exc:  # recorded, not raised: meta never stops a case
        return f"unknown ({type(exc).__name__})"


def _dispatch_tile(case: Params, variant: str | None) -> str | None:
    """The output tile ``BMxBN`` the dispatch's ``variant`` runs at this case's shape on this
    GPU (``kernels.matmul.default_config``: the warp-specialized kernel's is ``ws_config``'s
    pick), None for the autotuned kernel (it picks its own) or without a GPU: the page counts a
    partial last wave in these tiles."""
    if variant is None or variant.startswith("unknown") or not torch.cuda.is_available():
        return None
    try:
        m, n, k = dims(case)
        km = _km()
        device = torch.device("cuda", torch.cuda.current_device())
        dtype, precision, epilogue = DTYPES[case["dtype"]], PRECISION.get(case["dtype"]), EPILOGUES.get(case["op"])
        sms, tiles = km.sm_count(device), km.ws_tiles(device)
        config = km.default_config(variant, dtype, m, n, precision, sms, k=k, epilogue=epilogue, tiles=tiles)
        return None if config is None else f"{config.block_m}x{config.block_n}"
    except Exception as exc:  # recorded, not raised: meta never stops a case
        return f"unknown ({type(exc).__name__})"


def _dispatch_rule() -> str | None:
    """kernels.matmul.dispatch_rule(): which dispatch rule made the choice recorded beside it."""
    try:
        return str(_km().dispatch_rule())
    except Exception as exc:  # recorded, not raised: meta never stops a case
        return f"unknown ({type(exc).__name__})"


def _ours_meta(forced: str | None, group_m: int | None = None) -> Callable[[Params], dict[str, Any]]:
    def meta(case: Params) -> dict[str, Any]:
        config = {**GROUP_TILE, "group_m": group_m} if group_m is not None else None
        head: dict[str, Any] = {
            "variant": forced or "default dispatch",
            "epilogue": EPILOGUES.get(case["op"]),
            "precision": PRECISION.get(case["dtype"]),
            **_config_meta(config),
        }
        inspect = forced
        if forced is None:
            head["dispatch"] = _dispatch(case, captured=True)  # what a graph replay (the device time) runs
            head["dispatch_eager"] = _dispatch(case, captured=False)  # what the eager calls run
            head["dispatch_tile"] = _dispatch_tile(case, head["dispatch"])
            head["held_out"] = held_out(case)  # the page scores the dispatch on these apart
            head["dispatch_rule"] = _dispatch_rule()
            if case["direction"] == "fwd" and head["dispatch"] != head["dispatch_eager"] and head["dispatch"] in FORCED:
                inspect = head["dispatch"]  # the evidence of what the device time ran (compiled_kernels is eager)
        return head | _evidence(case, inspect, config)

    return meta


def _flags_for(case: Params) -> dict[str, Any]:
    """The settings a peer's calls run under in this case: as in force, except TF32, which
    every call of an fp32 case sets (on for dtype tf32, off for IEEE fp32)."""
    out = _matmul_flags()
    if case["dtype"] in PRECISION:
        out["allow_tf32"] = case["dtype"] == "tf32"
    return out


def _cublas_meta(entry: str) -> Callable[[Params], dict[str, Any]]:
    return lambda case: {"entry": entry, **_flags_for(case)}


def _compile_meta(entry: str) -> Callable[[Params], dict[str, Any]]:
    return lambda case: {"entry": entry, "mode": COMPILE_MODE, "fullgraph": True, "dynamic": False, **_flags_for(case)}


# ----------------------------------------------------------------------------- the study

OURS_LABEL = "Triton (ours, default dispatch)"
FORCED_LABELS = {
    "fixed": "Triton, fixed tile forced",
    "autotuned": "Triton, autotuned forced",
    "persistent": "Triton, persistent TMA kernel forced",
    "warp_specialized": "Triton (Gluon), warp-specialized kernel forced",
    "split_k": "Triton, split-K forced",
}
PEERS: dict[str, tuple[str, str, str]] = {
    # op -> (cuBLAS variant, its label, its entry); the compile peer is "compile" + the suffix
    "mm": ("cublas", "torch.mm (cuBLAS)", "torch.mm"),
    "mm_bias": ("cublas-bias", "torch.addmm (cuBLAS)", "torch.addmm(bias, a, b)"),
    "mm_bias_gelu": ("cublas-bias-gelu", "torch.addmm, then F.gelu(tanh)", "torch.addmm + F.gelu(approximate='tanh')"),
    "mm_residual": ("cublas-residual", "torch.mm, then + residual", "torch.mm(a, b) + residual"),
}
COMPILE_LABELS = {
    "mm": f"torch.compile(torch.mm), {COMPILE_MODE}",
    "mm_bias": f"torch.compile(addmm), {COMPILE_MODE}",
    "mm_bias_gelu": f"torch.compile(addmm + GELU), {COMPILE_MODE}",
    "mm_residual": f"torch.compile(mm + residual), {COMPILE_MODE}",
}


def compile_name(op: str) -> str:
    return PEERS[op][0].replace("cublas", "compile", 1)


class MatmulStudy:
    name = "matmul"
    directions = ("fwd", "fwd+bwd")

    def cases(self, quick: bool) -> list[Params]:
        def mm(direction: str, dtype: str, shape: tuple[int, int, int], op: str = "mm") -> Params:
            m, n, k = shape
            return {"op": op, "direction": direction, "dtype": dtype, "rows": m, "cols": n, "k": k}

        if quick:
            out = [mm(d, t, s) for (d, t), shapes in QUICK.items() for s in shapes]
            return out + [mm("fwd", "bf16", s, op) for op, s in QUICK_EPILOGUE]
        out = [mm("fwd", "bf16", s) for s in SHAPES + DECODE]
        out += [mm("fwd", "fp16", s) for s in FP16_SHAPES]
        out += [mm("fwd", dtype, s) for dtype in ("tf32", "fp32") for s in FP32_SHAPES]
        out += [mm("fwd+bwd", "bf16", s) for s in STEP_SHAPES]
        out.append(mm("fwd+bwd", "fp16", (4096, 4096, 4096)))
        out += [mm("fwd", "bf16", s, op) for op in EPILOGUES for s in EPILOGUE_SHAPES]
        out += [mm("fwd", "bf16", s) for s in HELD_OUT + TUNED_ON]
        return out

    def case_id(self, case: Params) -> str:
        m, n, k = dims(case)
        head = "" if case["op"] == "mm" else f"{case['op']}/"
        return f"{head}{case['direction']}/{case['dtype']}/{m}x{n}x{k}"

    def options(self, quick: bool) -> dict[str, Any]:
        return {"rounds": 10 if quick else 12}

    def variants(self, case: Params) -> list[Variant]:
        op = case["op"]
        out = [Variant("triton", OURS_LABEL, _ours(None), _ours_meta(None))]
        if case["direction"] == "fwd":
            for forced in FORCED:
                if forced == "split_k" and (op != "mm" or case["rows"] > DECODE_MAX_M):
                    continue
                out.append(Variant(_variant_name(forced), FORCED_LABELS[forced], _ours(forced), _ours_meta(forced)))
            if op == "mm" and case["dtype"] == "bf16" and dims(case) in GROUP_SHAPES:
                for g in GROUPS:
                    build, meta = _ours(GROUP_VARIANT, g), _ours_meta(GROUP_VARIANT, g)
                    out.append(Variant(f"triton-group{g}", f"Triton, one tile, GROUP_M {g}", build, meta))
        name, label, entry = PEERS[op]
        out.append(Variant(name, label, _peer(lambda c: _torch_fn(c["op"])), _cublas_meta(entry)))
        if op == "mm_bias_gelu":
            out.append(
                Variant(
                    "cublaslt-bias-gelu",
                    "torch._addmm_activation (cuBLASLt GELU epilogue)",
                    _peer(_addmm_gelu),
                    _cublas_meta("torch._addmm_activation(bias, a, b, use_gelu=True)"),
                )
            )
        if not held_out(case):
            out.append(
                Variant(compile_name(op), COMPILE_LABELS[op], lambda c: _apply(_compiled(c), c, _extras(c["op"])),
                        _compile_meta(entry))
            )  # fmt: skip
        return out

    def inputs(self, case: Params, device: torch.device, gen: torch.Generator) -> Tensors:
        m, n, k = dims(case)
        dtype = DTYPES[case["dtype"]]

        def draw(*shape: int, scale: float = 1.0) -> torch.Tensor:
            return (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * scale).to(dtype)

        # B scaled by 1/sqrt(K): every C element ~ N(0, 1), where GELU bends and no fp16 overflows.
        t = {"a": draw(m, k), "b": draw(k, n, scale=1 / math.sqrt(k))}
        if case["op"] in ("mm_bias", "mm_bias_gelu"):
            t["bias"] = draw(n, scale=0.5)
        elif case["op"] == "mm_residual":
            t["residual"] = draw(m, n)
        if case["direction"] == "fwd+bwd":
            t["a"].requires_grad_()
            t["b"].requires_grad_()
            t["dc"] = draw(m, n)
        return t

    def reference(self, case: Params, inputs: Tensors) -> tuple[torch.Tensor, ...]:
        a, b = (inputs[x].detach().double() for x in ("a", "b"))
        c = a @ b
        op = case["op"]
        if op in ("mm_bias", "mm_bias_gelu"):
            c = c + inputs["bias"].double()
        if op == "mm_bias_gelu":
            c = 0.5 * c * (1 + torch.tanh(math.sqrt(2 / math.pi) * (c + 0.044715 * c**3)))
        if op == "mm_residual":
            c = c + inputs["residual"].double()
        if case["direction"] == "fwd":
            return (c,)
        dc = inputs["dc"].double()
        return c, dc @ b.t(), a.t() @ dc

    def traffic(self, case: Params) -> tuple[int, int]:
        m, n, k = dims(case)
        size = element_size(case)
        operands = m * k + k * n + m * n  # A and B read, C written
        if case["direction"] == "fwd+bwd":
            return 2 * operands * size, 6 * m * n * k  # + dC read, dA and dB written; three products
        extra = {"mm_bias": n, "mm_bias_gelu": n, "mm_residual": m * n}.get(case["op"], 0)
        return (operands + extra) * size, 2 * m * n * k

    def tolerance(self, case: Params) -> float:
        return TOLERANCE[case["dtype"]]


STUDY = MatmulStudy()
