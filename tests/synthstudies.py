"""Synthetic runs of the RMSNorm and the row sum / vector add studies (tests/synthruns.py's
documents and variants), with the labels and case parameters their bench modules write:
times from a simple model against the 4000 GB/s copy of every synthetic run."""

from __future__ import annotations

import math
from typing import Any

from synthruns import L2, document, variant

COPY = 4000.0  # GB/s: the copy peak of synthruns.document
RMSNORM_LABELS = {
    "triton": "Triton (ours, planner's choice)",
    "triton-looped": "Triton, looped plan forced",
    "triton-split": "Triton, split plan forced",
    "triton-fused": "Triton, fused backward (dx and the weight gradient's partials in one pass)",
    "torch": "F.rms_norm after the add",
    "eager": "unfused eager composition",
    "compile": "torch.compile(eager composition)",
    "liger": "Liger-Kernel",
    "quack": "QuACK",
}
RMSNORM_SHAPES = ((32, 127), (4096, 4096), (16384, 4096), (8192, 7168), (64, 131072))
ADD_LABELS = {
    "triton": "Triton (ours), block 4096 (default)",
    "triton-1024": "Triton (ours), block 1024",
    "triton-8192": "Triton (ours), block 8192",
    "torch-add": "torch.add",
    "compile-add": "torch.compile(torch.add)",
}
ROW_SUM_LABELS = {
    "triton": "Triton (ours, planner's choice)",
    "triton-looped": "Triton, looped plan forced",
    "triton-split": "Triton, split plan forced",
    "torch-sum": "torch.sum(x, -1)",
    "compile-sum": "torch.compile(torch.sum)",
}
# 4194305 and 1024 x 4096 stay in the L2 when warm; 1 x 257 is both an add and a row sum.
ADD_SIZES = (257, 4194305, 16777216, 67108864)
ROW_SHAPES = ((1, 257), (1024, 4096), (4096, 4096), (16384, 1024), (16, 1048576))


def _case(
    case_id: str, params: dict[str, Any], nbytes: int, times: dict[str, tuple[float, float] | str], labels: dict
) -> dict[str, Any]:
    """A case as bench writes it: every variant with its label, device and eager medians (or
    an error string), a rotation for cold L2."""
    variants = {}
    for name, t in times.items():
        if isinstance(t, str):
            v = variant(None, error=t, eager_run=True)
        else:
            meta = {"plan": "split" if params.get("cols", 0) > 16384 else "block"} if name == "triton" else {}
            if name == "liger":
                meta = {"version": "0.8.5", "entry": "liger_kernel.ops.fused_add_rms_norm"}
            v = variant(t[0], eager=t[1], eager_run=True, meta=meta)
        variants[name] = {"label": labels[name], **v}
    sets = 1 if params["l2"] == "warm" else max(2, min(512, math.ceil(4 * L2 / nbytes) + 1))
    return {
        "id": case_id,
        "case": params,
        "bytes": nbytes,
        "flops": nbytes,
        "rotation": {"sets": sets, "bytes": sets * nbytes},
        "variants": variants,
    }


# ----------------------------------------------------------------------------- RMSNorm


def rmsnorm_times(name: str, direction: str, rows: int, cols: int, nbytes: int) -> tuple[float, float] | str | None:
    """Ours at 92% of the copy on large shapes, Liger a little slower, QuACK faster on the
    wide rows and refusing rows that are not a multiple of 16 bytes, compile slower."""
    t = nbytes / (COPY * 1e3 * 0.92)  # µs
    if name == "quack":
        if cols * 2 % 16:
            return "refused: QuACK needs rows of a multiple of 16 bytes; width 127 is 254 bytes"
        if direction != "fwd":
            return "refused: this quack.rmsnorm.rmsnorm has no backward here"
        return (round(t * (0.85 if cols > 65536 else 1.02) + 2, 4), round(t + 9, 4))
    base = {"triton": 1.0, "triton-looped": 1.3, "triton-split": 1.0, "triton-fused": 0.8, "torch": 2.2, "eager": 6.0,
            "compile": 1.25, "liger": 1.08}[name]  # fmt: skip
    host = {"triton": 12.0, "triton-looped": 12.0, "triton-split": 14.0, "triton-fused": 12.0, "torch": 15.0,
            "eager": 60.0, "compile": 40.0, "liger": 35.0}[name]  # fmt: skip
    device = round(t * base + 2, 4)
    return device, round(max(device, host) + 1, 4)


def rmsnorm_doc(run_id: str, started: str, shapes=RMSNORM_SHAPES) -> dict[str, Any]:
    """A RMSNorm run: forward at every shape, the training step at two, cold and warm."""
    cases = []
    for direction in ("fwd", "fwd+bwd"):
        for rows, cols in shapes:
            if direction == "fwd+bwd" and (rows, cols) not in ((32, 127), (16384, 4096)):
                continue
            nbytes = (4 if direction == "fwd" else 8) * rows * cols * 2 + cols * 2
            names = ["triton", *(["triton-looped", "triton-split"] if cols > 16384 else []),
                     *(["triton-fused"] if direction == "fwd+bwd" and cols <= 8192 else []), "torch", "eager",
                     "compile", "liger", "quack"]  # fmt: skip
            times = {n: t for n in names if (t := rmsnorm_times(n, direction, rows, cols, nbytes)) is not None}
            for l2 in ("cold", "warm"):
                params = {"op": "rms_norm", "direction": direction, "dtype": "bf16", "rows": rows, "cols": cols,
                          "residual": True, "l2": l2}  # fmt: skip
                cases.append(_case(f"{direction}/bf16/{rows}x{cols}/{l2}", params, nbytes, times, RMSNORM_LABELS))
    return document("rmsnorm", run_id, started, cases, eager=True, version=4)


# ----------------------------------------------------------------------------- row sum, vector add


def _stream(nbytes: int, l2: str, share: float, reuse: float) -> float:
    """A streaming kernel's µs: ``share`` of the copy from DRAM; warm and small enough for
    the L2, ``reuse`` times that (L2 residency); half a µs to launch."""
    rate = COPY * share * (reuse if l2 == "warm" and nbytes < L2 / 2 else 1.0)
    return round(nbytes / (rate * 1e3) + 0.5, 4)


def rowsum_add_doc(run_id: str, started: str, *, add_sizes=ADD_SIZES, row_shapes=ROW_SHAPES) -> dict[str, Any]:
    """A row sum / vector add run: ours at 98% of the copy from DRAM and torch the same (a
    tie), but ours gains more from a warm L2 (a warm win that is only L2 residency); the
    wide row sum at 80%, the other block sizes and plans a little slower.  A row sum of 64M
    elements or more (none by default) streams at 104% of the copy, from DRAM as warm: it
    only reads, and the copy reads and writes."""
    cases = []
    for n in add_sizes:
        nbytes = 3 * n * 2
        for l2 in ("cold", "warm"):
            shares = {"triton": (0.98, 2.5), "triton-1024": (0.9, 2.5), "triton-8192": (0.95, 2.5),
                      "torch-add": (0.98, 2.0), "compile-add": (0.93, 2.0)}  # fmt: skip
            times: dict[str, tuple[float, float] | str] = {}
            for name, (share, reuse) in shares.items():
                device = _stream(nbytes, l2, share, reuse)
                times[name] = (device, round(device + 6, 4))
            params = {"op": "add", "direction": "fwd", "dtype": "bf16", "rows": 1, "cols": n, "l2": l2}
            cases.append(_case(f"add/bf16/1x{n}/{l2}", params, nbytes, times, ADD_LABELS))
    for rows, cols in row_shapes:
        nbytes = (rows * cols + rows) * 2
        wide = cols * 2 > 32768
        names = ["triton", *(["triton-looped", "triton-split"] if wide else []), "torch-sum", "compile-sum"]
        for l2 in ("cold", "warm"):
            big = rows * cols >= 2**26
            shares = {"triton": 0.8 if wide else 1.04 if big else 0.98, "triton-looped": 0.7, "triton-split": 0.8,
                      "torch-sum": 0.98, "compile-sum": 0.9}  # fmt: skip
            times = {}
            for name in names:
                device = _stream(nbytes, l2, shares[name], 2.5 if name.startswith("triton") else 2.0)
                times[name] = (device, round(device + 6, 4))
            params = {"op": "row_sum", "direction": "fwd", "dtype": "bf16", "rows": rows, "cols": cols, "l2": l2}
            cases.append(_case(f"row_sum/bf16/{rows}x{cols}/{l2}", params, nbytes, times, ROW_SUM_LABELS))
    return document("rowsum_add", run_id, started, cases, eager=True, version=4)


# ----------------------------------------------------------------------------- GEMM

MM_PEAK = 750.0  # TFLOP/s: the bf16 matrix rate of synthruns.document
MM_RULE = "0123456789"  # the dispatch rule's fingerprint the default's meta records
MATMUL_FWD = {
    "bf16": ((127, 255, 65), (1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (16, 4096, 4096),
             (16, 4096, 14336), (128, 14336, 4096)),
    "fp16": ((4096, 4096, 4096), (8192, 8192, 8192)),
    "tf32": ((4096, 4096, 4096),),
    "fp32": ((4096, 4096, 4096),),
}  # fmt: skip
MATMUL_STEP = ((127, 255, 65), (4096, 4096, 4096))
MATMUL_EPILOGUES = (("mm_bias", (8192, 8192, 8192)), ("mm_bias_gelu", (4096, 4096, 4096)),
                    ("mm_bias_gelu", (8192, 8192, 8192)), ("mm_residual", (8192, 8192, 8192)))  # fmt: skip
# What the sweep reads from the compiled code (bench/evidence.py), per Triton variant.
_WGMMA = {"kernels": 1, "kernel_names": ["_mm_persistent_kernel"], "regs": [168], "spills": [0],
          "smem_bytes": [197632], "sass_instructions": [1480], "sass_hgmma": [32], "sass_hmma": [0],
          "sass_tma": [4], "sass_cp_async": [0], "sass_ldsm": [0], "sass_bar": [3], "sass": "ok",
          "matrix_path": "wgmma"}  # fmt: skip
_HMMA = _WGMMA | {"kernel_names": ["_mm_fixed_kernel"], "regs": [128], "smem_bytes": [98304], "sass_hgmma": [0],
                  "sass_hmma": [64], "sass_tma": [0], "sass_cp_async": [12], "sass_ldsm": [16],
                  "matrix_path": "mma.sync"}  # fmt: skip
_SASS_KEYS = ("sass_instructions", "sass_hgmma", "sass_hmma", "sass_tma", "sass_cp_async", "sass_ldsm", "sass_bar")
_NO_SASS = (
    _WGMMA
    | {k: [None] for k in _SASS_KEYS}
    | {
        "sass": "unavailable: the disassembler is not installed (FileNotFoundError: cuobjdump)",
        "matrix_path": "unknown",
    }
)
CUBLAS_META = {"entry": "torch.mm", "allow_bf16_reduced_precision_reduction": True,
               "allow_fp16_reduced_precision_reduction": True, "allow_tf32": False,
               "float32_matmul_precision": "highest"}  # fmt: skip


def _mm_cublas_us(case: dict[str, Any], flops: int, nbytes: int) -> float:
    """cuBLAS: 95% of the matrix rate on large bf16/fp16 products (TF32 half, IEEE fp32 a
    fifteenth), at least the bytes at 80% of the copy, plus 3 µs."""
    rate = MM_PEAK * 0.95 * {"tf32": 0.5, "fp32": 1 / 15}.get(case["dtype"], 1.0)
    return flops / (rate * 1e6) + nbytes / (COPY * 1e3 * 0.8) + 3.0


def matmul_times(name: str, case: dict[str, Any], flops: int, nbytes: int) -> tuple[float, float] | str:
    """Ours at 0.99x cuBLAS on large products and 0.97x on the training step (inside the
    targets), faster on decode shapes (split-K reads the weight at 90% of the copy), slower on
    the smallest product (launch-bound); the fixed tile slower on HMMA; GROUP_M 1 slower where
    A and B exceed the L2; the epilogues fused against a separate pass over C."""
    m, n = case["rows"], case["cols"]
    mm = _mm_cublas_us(case, flops, nbytes)
    op, decode, small = case["op"], m <= 128 and n * case["k"] >= 4096 * 4096, flops < 2 * 1024**3
    pass_over_c = 2 * m * n * 2 / (COPY * 1e3 * 0.9)  # read and write C once more, µs
    if decode:
        ours = nbytes / (COPY * 1e3 * 0.9) + 3.0
    elif small:
        ours = mm + 2.0
    else:
        ours = mm * (1.03 if case["direction"] == "fwd+bwd" else 1.01)
    if op != "mm":
        ours += pass_over_c * 0.05
    table = {
        "triton": ours,
        "triton-fixed": ours * 1.4,
        "triton-autotuned": ours * 1.1,
        "triton-persistent": ours if not decode else ours * 3,
        "triton-warp-specialized": ours * (0.99 if op == "mm_bias_gelu" else 1.0) if not decode else ours * 2,
        "triton-split-k": ours,
        "triton-group1": ours * (1.15 if m >= 8192 else 1.0),
        "triton-group4": ours * 1.01,
        "triton-group8": ours,
        "triton-group16": ours * 0.995,
        "cublas": mm,
        "compile": mm * 1.05,
        "cublas-bias": mm * 1.02,
        "compile-bias": mm * 1.04,
        "cublas-bias-gelu": mm * 1.02 + pass_over_c,
        "cublaslt-bias-gelu": mm * 1.03,
        "compile-bias-gelu": mm * 1.05,
        "cublas-residual": mm + pass_over_c * 1.5,
        "compile-residual": mm * 1.04,
    }
    if name == "compile" and case["dtype"] == "fp32":
        return "check failed: relative L2 error 0.0021 (tolerance 1e-05, finite=True)"
    device = round(table[name], 4)
    host = 12.0 if name.startswith("triton") else 8.0 if name.startswith("cublas") else 30.0
    return device, round(max(device, host) + 1, 4)


def _mm_meta(name: str, case: dict[str, Any]) -> dict[str, Any]:
    if name.startswith("cublas"):
        return CUBLAS_META | ({"allow_tf32": case["dtype"] == "tf32"} if case["dtype"] in ("tf32", "fp32") else {})
    if name.startswith("compile"):
        return {"entry": "torch.mm", "mode": "max-autotune", "fullgraph": True, "dynamic": False}
    base = {"variant": name.removeprefix("triton-") if name != "triton" else "default dispatch"}
    if name == "triton":
        from bench.studies.matmul import held_out

        base["dispatch"] = "split_k" if case["rows"] <= 128 else "persistent"
        base |= {"held_out": held_out(case), "dispatch_rule": MM_RULE}
    if name == "triton-fixed":
        return base | _HMMA
    if name == "triton-autotuned":
        return base | _NO_SASS
    return base | _WGMMA


def matmul_doc(run_id: str, started: str, *, fwd=MATMUL_FWD, step=MATMUL_STEP, epilogues=MATMUL_EPILOGUES) -> dict:
    """A GEMM run: the cases, variants and labels bench/studies/matmul.py writes, at a few
    shapes of each kind, cold and warm, with times from :func:`matmul_times`."""
    from bench.studies.matmul import STUDY

    def case_of(op: str, direction: str, dtype: str, shape: tuple[int, int, int]) -> dict[str, Any]:
        m, n, k = shape
        return {"op": op, "direction": direction, "dtype": dtype, "rows": m, "cols": n, "k": k}

    wanted = [case_of("mm", "fwd", dtype, s) for dtype, shapes in fwd.items() for s in shapes]
    wanted += [case_of("mm", "fwd+bwd", "bf16", s) for s in step]
    wanted += [case_of(op, "fwd", "bf16", s) for op, s in epilogues]
    cases = []
    for case in wanted:
        nbytes, flops = STUDY.traffic(case)
        labels = {v.name: v.label for v in STUDY.variants(case)}
        times = {name: matmul_times(name, case, flops, nbytes) for name in labels}
        for l2 in ("cold", "warm"):
            params = {**case, "l2": l2}
            variants = {}
            for name, t in times.items():
                if isinstance(t, str):
                    v = variant(None, error=t, eager_run=True, meta=_mm_meta(name, case))
                else:
                    v = variant(t[0], eager=t[1], eager_run=True, meta=_mm_meta(name, case))
                variants[name] = {"label": labels[name], **v}
            sets = 1 if l2 == "warm" else max(2, min(512, math.ceil(4 * L2 / nbytes) + 1))
            cases.append(
                {
                    "id": f"{STUDY.case_id(case)}/{l2}",
                    "case": params,
                    "bytes": nbytes,
                    "flops": flops,
                    "rotation": {"sets": sets, "bytes": sets * nbytes},
                    "variants": variants,
                }
            )
    return document("matmul", run_id, started, cases, eager=True, version=4)


# ----------------------------------------------------------------------------- specialization

SPEC_LABELS = {
    "spec-all_constexpr": "Triton, every size constexpr",
    "spec-model_fixed": "Triton, model-fixed sizes constexpr",
    "spec-all_runtime": "Triton, every size runtime",
    "spec-triton_default": "Triton, Triton's default specialization",
    "triton": "Triton (ours): kernels.rms_norm",
    "torch": "F.rms_norm",
}
SPEC_ROWS = (1, 3, 64, 1000, 8191)
SPEC_WIDTHS = (4096, 5120)


def specialization_doc(run_id: str, started: str, *, spills: int = 0) -> dict[str, Any]:
    """A specialization run: each mode's time (every-size runtime 30% slower, the others
    alike), and the meta the sweep records: one compilation per shape for every-size
    constexpr, one per width for model-fixed, one in all for every-size runtime, and
    Triton's ==1 / %16 classes for its default."""
    cases = []
    seen: dict[str, set] = {name: set() for name in SPEC_LABELS}
    for cols in SPEC_WIDTHS:
        for rows in SPEC_ROWS:
            nbytes = 2 * rows * cols * 2 + cols * 2
            t = nbytes / (COPY * 1e3 * 0.9) + 3
            keys = {
                "spec-all_constexpr": (rows, cols),
                "spec-model_fixed": cols,
                "spec-all_runtime": 0,
                "spec-triton_default": (rows == 1, rows % 16 == 0, cols),
            }
            compiled = {}
            for name, key in keys.items():
                compiled[name] = 0 if key in seen[name] else 1
                seen[name].add(key)
            for l2 in ("warm", "cold"):
                variants = {}
                for name, label in SPEC_LABELS.items():
                    scale = {"spec-all_runtime": 1.3, "torch": 1.5}.get(name, 1.0)
                    meta: dict[str, Any] = {}
                    if name in keys:
                        meta = {"mode": name.removeprefix("spec-"), "first_call_ms": 900.0 if compiled[name] else 0.05,
                                "compiled_now": compiled[name], "compilations": len(seen[name]), "kernels": 1,
                                "kernel_names": ["_rms_rows"], "regs": [40 if name != "spec-all_runtime" else 32],
                                "spills": [spills if name == "spec-all_constexpr" else 0],
                                "smem_bytes": [16]}  # fmt: skip
                    variants[name] = {"label": label, **variant(round(t * scale, 4), eager=round(t * scale + 8, 4),
                                                                eager_run=True, meta=meta)}  # fmt: skip
                params = {"op": "rms_norm", "direction": "fwd", "dtype": "bf16", "rows": rows, "cols": cols, "l2": l2}
                sets = 1 if l2 == "warm" else max(2, min(512, math.ceil(4 * L2 / nbytes) + 1))
                cases.append({"id": f"bf16/{rows}x{cols}/{l2}", "case": params, "bytes": nbytes, "flops": nbytes,
                              "rotation": {"sets": sets, "bytes": sets * nbytes}, "variants": variants})  # fmt: skip
    return document("specialization", run_id, started, cases, eager=True, version=4)


# ----------------------------------------------------------------------------- cross-entropy

CE_SHAPES = {"fwd": ((4096, 32000), (4096, 50257), (8192, 128256), (16384, 262144)),
             "fwd+bwd": ((4096, 32000), (4096, 50257), (8192, 128256), (8192, 262144))}  # fmt: skip
CE_MEMORY = "torch.cuda.max_memory_allocated() during one step, minus the memory allocated before it"
CE_MORE = (("cross_entropy", "fp32", 4096, 32000), ("cross_entropy_ls", "bf16", 8192, 128256),
           ("cross_entropy_softcap", "bf16", 8192, 128256))  # fmt: skip


def _ce_peak(name: str, case: dict[str, Any], logits: int, *, inplace_per_token: int, compile_lean: bool) -> int:
    """Bytes a step allocates above its inputs: a new gradient is one more logits; in place
    only per-token numbers; torch's eager log-softmax keeps a second copy of the logits."""
    n, step = case["rows"], case["direction"] == "fwd+bwd"
    if not step:
        return {"torch": logits}.get(name, 24 * n)
    return {
        "triton": logits + 40 * n,
        "triton-inplace": inplace_per_token * n,
        "torch": 2 * logits + 16 * n,
        "compile": (logits if compile_lean else 2 * logits) + 16 * n,
        "liger": 16 * n,
        "quack": logits + 16 * n,
    }[name]


def cross_entropy_doc(
    run_id: str, started: str, *, liger_share: float = 0.65, inplace_per_token: int = 40, compile_lean: bool = False
) -> dict[str, Any]:
    """A cross-entropy run: the cases, variants and labels bench/studies/cross_entropy.py
    writes, cold L2, with times from a bandwidth model and each variant's peak memory in its
    meta.  Ours takes ``liger_share`` of Liger's time on the training step (the target is
    0.7); torch.compile is 5% faster than ours at the 4096 x 32000 step and holds a second
    copy of the logits there (or not: ``compile_lean``); in place, the step allocates
    ``inplace_per_token`` bytes per token; QuACK refuses 50257 (rows of 100514 bytes) and the
    variations, as the bench records it."""
    from bench.studies.cross_entropy import OPS, STUDY

    def case_of(op: str, direction: str, dtype: str, rows: int, cols: int) -> dict[str, Any]:
        return {"op": op, "direction": direction, "dtype": dtype, "rows": rows, "cols": cols, **OPS[op]}

    wanted = [case_of("cross_entropy", d, "bf16", n, v) for d, shapes in CE_SHAPES.items() for n, v in shapes]
    wanted += [case_of(op, d, dtype, n, v) for d in ("fwd", "fwd+bwd") for op, dtype, n, v in CE_MORE]
    cases = []
    for case in wanted:
        nbytes, flops = STUDY.traffic(case)
        labels = {v.name: v.label for v in STUDY.variants(case)}
        size = 4 if case["dtype"] == "fp32" else 2
        logits = case["rows"] * case["cols"] * size
        inputs = logits + 8 * case["rows"]
        step = case["direction"] == "fwd+bwd"
        ours = nbytes / (COPY * 1e3 * 0.9) + 4.0
        model = {
            "triton": ours,
            "triton-inplace": ours * 0.995,
            "torch": ours * (3.2 if step else 2.4),
            "compile": ours * (0.95 if step and case["cols"] == 32000 else 1.3),
            "liger": ours / liger_share if step else ours * 1.2,
            "quack": ours * 1.1,
        }
        variants = {}
        for name, label in labels.items():
            refused = name == "quack" and (case["cols"] * size % 16 or case["op"] != "cross_entropy")
            peak = _ce_peak(name, case, logits, inplace_per_token=inplace_per_token, compile_lean=compile_lean)
            meta = {"logits_bytes": logits, "peak_bytes": peak, "inputs_bytes": inputs, "memory": CE_MEMORY}
            if name == "liger":
                meta |= {"version": "0.8.5", "entry": "liger_kernel.ops.cross_entropy.LigerCrossEntropyFunction",
                         "gradient": "written over the logits by the forward when they require grad"}  # fmt: skip
            if refused:
                error = "refused: QuACK's cross_entropy takes neither label_smoothing nor a softcap"
                if case["op"] == "cross_entropy":
                    error = f"refused: QuACK needs rows of a multiple of 16 bytes; width {case['cols']} is odd"
                v = variant(None, error=error, eager_run=True, meta={"logits_bytes": logits, "memory": "not measured"})
            else:
                device = round(model[name], 4)
                host = {"liger": 60.0, "compile": 40.0, "torch": 25.0}.get(name, 15.0)
                v = variant(device, eager=round(max(device, host) + 2, 4), eager_run=True,
                            timer="cuda-events" if name == "liger" else "cuda-graph", meta=meta)  # fmt: skip
            variants[name] = {"label": label, **v}
        sets = max(2, min(512, math.ceil(4 * L2 / nbytes) + 1))
        cases.append({"id": f"{STUDY.case_id(case)}/cold", "case": {**case, "l2": "cold"}, "bytes": nbytes,
                      "flops": flops, "rotation": {"sets": sets, "bytes": sets * nbytes},
                      "variants": variants})  # fmt: skip
    return document("cross_entropy", run_id, started, cases, eager=True, version=4)


# ----------------------------------------------------------------------------- fused linear cross-entropy

LCE_SHAPES = ((4096, 128256), (8192, 128256), (8192, 32000))


def linear_cross_entropy_doc(run_id: str, started: str, *, ours_share: float = 0.2) -> dict[str, Any]:
    """A fused linear cross-entropy run: the cases, variants and labels
    bench/studies/linear_cross_entropy.py writes (training steps, cold L2), times from a
    TFLOP/s model (ours 10% slower than the unfused step, Liger 5% slower than ours) and each
    variant's peak memory in its meta: the unfused eager step holds the logits three times
    over, ours ``ours_share`` of that (the target: a quarter)."""
    from bench.studies.linear_cross_entropy import STUDY

    cases = []
    for case in STUDY.cases(False):
        if (case["rows"], case["cols"]) not in LCE_SHAPES:
            continue
        nbytes, flops = STUDY.traffic(case)
        labels = {v.name: v.label for v in STUDY.variants(case)}
        n, v_, h = case["rows"], case["cols"], case["hidden"]
        logits, inputs = n * v_ * 2, (n * h + v_ * h) * 2 + 8 * n
        unfused_peak = 3 * logits + inputs
        peaks = {"torch": unfused_peak, "compile": 2 * logits + inputs, "liger": int(0.25 * unfused_peak),
                 "triton": int(ours_share * unfused_peak)}  # fmt: skip
        unfused = flops / 600e12 * 1e6  # µs at 600 TFLOP/s
        model = {"torch": unfused, "compile": unfused * 0.97, "triton": unfused * 1.1, "liger": unfused * 1.155}
        variants = {}
        for name, label in labels.items():
            meta = {"logits_bytes": logits, "peak_bytes": peaks[name], "inputs_bytes": inputs, "memory": CE_MEMORY}
            device = round(model[name], 4)
            variants[name] = {"label": label, **variant(device, eager=round(device + 30.0, 4), eager_run=True,
                                                        timer="cuda-graph", meta=meta)}  # fmt: skip
        cases.append({"id": f"{STUDY.case_id(case)}/cold", "case": {**case, "l2": "cold"}, "bytes": nbytes,
                      "flops": flops, "rotation": {"sets": 2, "bytes": 2 * nbytes}, "variants": variants})  # fmt: skip
    return document("linear_cross_entropy", run_id, started, cases, eager=True, version=4)


POINTWISE_COPY = 4000.0  # GB/s: the copy peak the synthetic runs' times are modelled on


def pointwise_doc(study: str, run_id: str, started: str, *, ours_vs_compile: float = 0.95,
                  dropped_share: float | None = None) -> dict[str, Any]:  # fmt: skip
    """A run of one pointwise study (rope, swiglu, bias_gelu_dropout): its cases, variants
    and labels as bench/studies/<study>.py writes them (cold L2, device time and eager
    calls), times from a bandwidth model (compile at 80% of the copy peak, eager PyTorch at
    40%, Liger at 70%, ours at ``ours_vs_compile`` × compile's time), each training step's
    peak memory in its meta and, for dropout, each variant's dropped count
    (``dropped_share`` of the outputs; None: the set p)."""
    import importlib

    bench_study = importlib.import_module(f"bench.studies.{study}").STUDY
    rate = {"compile": 0.8, "torch": 0.4, "liger": 0.7}
    cases = []
    for case in bench_study.cases(False):
        nbytes, flops = bench_study.traffic(case)
        labels = {v.name: v.label for v in bench_study.variants(case)}
        compile_us = nbytes / (rate["compile"] * POINTWISE_COPY * 1e3)
        variants = {}
        for name, label in labels.items():
            device = compile_us * ours_vs_compile if name == "triton" else nbytes / (rate[name] * POINTWISE_COPY * 1e3)
            meta: dict[str, Any] = {}
            if case["direction"] == "fwd+bwd":
                meta |= {"peak_bytes": int(nbytes * (0.4 if name == "triton" else 0.6)), "inputs_bytes": nbytes // 2,
                         "memory": CE_MEMORY}  # fmt: skip
            if study == "bias_gelu_dropout":
                n = case["rows"] * case["cols"]
                share = 0.1 if dropped_share is None or name != "triton" else dropped_share
                meta |= {"p": 0.1, "dropped": round(n * share), "elements": n}
            variants[name] = {"label": label, **variant(round(device, 4), eager=round(device + 20.0, 4),
                                                        eager_run=True, meta=meta)}  # fmt: skip
        cases.append({"id": f"{bench_study.case_id(case)}/cold", "case": {**case, "l2": "cold"}, "bytes": nbytes,
                      "flops": flops, "rotation": {"sets": 2, "bytes": 2 * nbytes}, "variants": variants})  # fmt: skip
    return document(study, run_id, started, cases, eager=True, version=4)
