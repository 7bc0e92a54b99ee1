"""Compile the generic row kernels for sm_90 on a machine without a GPU and report what the
compiled code does with memory (run by tests/test_codegen.py in a process of its own: the
interpreter, which the other CPU tests use, compiles nothing).

    python tests/codegen_probe.py   # prints one JSON object per kernel configuration
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kernels import _rowwise as rw
from kernels.softmax import BACKWARD, FORWARD

INTS = {"n_rows": "i64", "a_stride": "i64", "b_stride": "i64", "c_stride": "i64", "out_stride": "i64",
        "out2_stride": "i64"}  # fmt: skip
# The extended form's constexprs, off: softmax is the two-tile form (see kernels/_rowwise.py).
PLAIN = {"EXT": 0, "FINISH": None, "M_INIT": float("-inf"), "ARG": 0.0}


def compile_kernel(fn, pointers: dict[str, str], consts: dict, warps: int, ints: dict[str, str] = INTS) -> dict:
    signature = {**pointers, **ints, **{k: "constexpr" for k in consts}}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(pointers))}  # every pointer 16-byte aligned
    kernel = triton.compile(
        ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": warps},
    )
    ptx = kernel.asm["ptx"]
    ops = Counter(re.findall(r"\b((?:ld|st)\.global[\w.:]*)", ptx))
    return {
        "vector_loads": sum(n for op, n in ops.items() if op.startswith("ld.") and ".v4." in op),
        "scalar_16bit_loads": sum(n for op, n in ops.items() if op.startswith("ld.") and op.endswith("b16")),
        "vector_stores": sum(n for op, n in ops.items() if op.startswith("st.") and ".v4." in op),
        "scalar_16bit_stores": sum(n for op, n in ops.items() if op.startswith("st.") and op.endswith("b16")),
        "shared_bytes": kernel.metadata.shared,
        "async_copies": len(re.findall(r"\bcp\.async\.\w+\.shared\.global", ptx)),
        "ldmatrix": len(re.findall(r"\bldmatrix\.", ptx)),
        "barriers": len(re.findall(r"\bbar\.sync\b", ptx)),
    }


def main() -> None:
    ab = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "w_ptr": "*bf16"}
    ab_out = {**ab, "out_ptr": "*bf16", "out2_ptr": "*bf16", "rstat_ptr": "*bf16"}
    for width, align in ((50257, rw.ALIGN_WINDOW), (50264, rw.ALIGN_ROWS), (50257, rw.ALIGN_NONE)):
        base = {"WIDTH": width, "BLOCK": 4096, "VEC": 8, "ALIGN": align, "ACC": tl.float32}
        tail = PLAIN
        fwd = {**base, "A_CAST": tl.bfloat16, "A_FILL": float("-inf"), "HAS_B": False}
        bwd = {**base, "A_CAST": tl.float32, "A_FILL": 0.0, "HAS_B": True}
        for name, op, c in (("fwd", FORWARD, fwd), ("bwd", BACKWARD, bwd)):
            lanes = {**c, "LANES": 8 * 32 * 8}  # 8 warps, one 16-byte vector per thread: 2 per block
            looped = compile_kernel(
                rw.row_looped_kernel,
                ab_out,
                {
                    **lanes,
                    "ACCUMULATE": op.accumulate,
                    "COMBINE": op.combine,
                    "APPLY": op.apply,
                    "STAGES": 1,
                    "EVICT": True,
                    **tail,
                },
                8,
            )
            apply = compile_kernel(
                rw.row_split_apply_kernel,
                {**ab_out, "stats_ptr": "*fp32"},
                {**lanes, "COMBINE": op.combine, "APPLY": op.apply, "CHUNKS": 13, "SPAN": 1, **tail},
                8,
            )
            reduce = compile_kernel(
                rw.row_split_reduce_kernel,
                {**ab, "stats_ptr": "*fp32"},
                {**lanes, "ACCUMULATE": op.accumulate, "COMBINE": op.combine, "CHUNKS": 13, "SPAN": 2, **tail},
                8,
            )
            one = compile_kernel(
                rw.row_split_one_launch_kernel,
                {**ab_out, "stats_ptr": "*fp32", "sync_ptr": "*i32"},
                {
                    **lanes,
                    "ACCUMULATE": op.accumulate,
                    "COMBINE": op.combine,
                    "APPLY": op.apply,
                    "CHUNKS": 13,
                    "SPAN": 1,
                    **tail,
                },
                8,
            )
            block = compile_kernel(
                rw.row_block_kernel,
                ab_out,
                {
                    **c,
                    "BLOCK": 65536,
                    "ROWS": 1,
                    "ROW_FN": op.row,
                    "APPLY": op.apply,
                    "ACCUMULATE": op.accumulate,
                    **tail,
                },
                16,
            )
            reports = (("looped", looped), ("split-apply", apply), ("split-reduce", reduce), ("one-launch", one),
                       ("block", block))  # fmt: skip
            for plan, report in reports:
                print(json.dumps({"op": name, "width": width, "align": align, "plan": plan, **report}), flush=True)

    extended()


def extended() -> None:
    """RMSNorm (forward, backward) and the row sum: the row base's extended form (c, w,
    out2, rstat) at model widths with aligned rows, whole-row and looped plans."""
    from kernels.rmsnorm import BACKWARD as RMS_BWD
    from kernels.rmsnorm import FORWARD as RMS_FWD
    from kernels.rowsum import FORWARD as ROW_SUM

    ptrs = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "w_ptr": "*bf16", "out_ptr": "*bf16",
            "out2_ptr": "*bf16", "rstat_ptr": "*fp32"}  # fmt: skip
    ops = (("rms_fwd", RMS_FWD, rw.EXT_ON | rw.EXT_C | rw.EXT_W | rw.EXT_OUT2, False),
           ("rms_bwd", RMS_BWD, rw.EXT_ON | rw.EXT_C | rw.EXT_W | rw.EXT_RSTAT, True),
           ("row_sum", ROW_SUM, rw.EXT_ON | rw.EXT_RSTAT | rw.EXT_NOOUT, False))  # fmt: skip
    for width in (4096, 5120):
        for name, op, ext, has_b in ops:
            c = {"WIDTH": width, "VEC": 8, "ALIGN": rw.ALIGN_ROWS, "ACC": tl.float32,
                 "A_CAST": tl.float32 if has_b else tl.bfloat16, "A_FILL": 0.0, "HAS_B": has_b,
                 "EXT": ext, "FINISH": op.finish, "M_INIT": op.m_init, "ARG": 1e-6}  # fmt: skip
            looped = compile_kernel(
                rw.row_looped_kernel,
                ptrs,
                {**c, "BLOCK": 4096, "LANES": 8 * 32 * 8, "ACCUMULATE": op.accumulate, "COMBINE": op.combine,
                 "APPLY": op.apply, "STAGES": 1, "EVICT": True},
                8,
            )  # fmt: skip
            block = compile_kernel(
                rw.row_block_kernel,
                ptrs,
                {**c, "BLOCK": 8192, "ROWS": 1, "ROW_FN": op.row, "APPLY": op.apply, "ACCUMULATE": op.accumulate},
                8,
            )
            for plan, report in (("looped", looped), ("block", block)):
                print(json.dumps({"op": name, "width": width, "align": 1, "plan": plan, **report}), flush=True)
    fused()


def fused() -> None:
    """RMSNorm's fused backward (a persistent pass of its own, runtime row strides): with the
    strides' multiple shown (VEC 8, rows on the 16-byte grid) and without (VEC 1), with and
    without rows in flight through shared memory (STAGES)."""
    from kernels.rmsnorm import _bwd_fused_kernel

    ptrs = {"h_ptr": "*bf16", "dy_ptr": "*bf16", "dh_ptr": "*bf16", "w_ptr": "*bf16", "dx_ptr": "*bf16",
            "part_ptr": "*fp32"}  # fmt: skip
    ints = {"rows": "i64", "h_stride": "i64", "dy_stride": "i64", "dh_stride": "i64", "dx_stride": "i64"}
    for width, warps in ((4096, 8), (5120, 16)):
        for vec in (8, 1):
            for stages in (1, 3):
                c = {"WIDTH": width, "BLOCK": triton.next_power_of_2(width), "EPS": 1e-6, "HAS_DH": True,
                     "ACC": tl.float32, "PREFETCH": False, "VEC": vec, "STAGES": stages}  # fmt: skip
                report = compile_kernel(_bwd_fused_kernel, ptrs, c, warps, ints)
                row = {"op": "rms_bwd_fused", "width": width, "align": 1 if vec > 1 else 0, "plan": "fused"}
                print(json.dumps({**row, "stages": stages, **report}), flush=True)


def staged() -> None:
    """Softmax's staged plan (a Gluon kernel): every chunk of the row copied into shared
    memory with 16-byte cp.async, whole 16-byte groups stored as vectors, at widths with and
    without the alignment window, in 16 and 32 bits."""
    from triton.experimental.gluon._runtime import GluonASTSource

    from kernels.plans import STAGED_CHUNK, STAGED_WARPS
    from kernels.softmax import staged_softmax_kernel

    for width, align, dt in ((50257, rw.ALIGN_WINDOW, "bf16"), (50264, rw.ALIGN_ROWS, "bf16"),
                             (50257, rw.ALIGN_WINDOW, "fp16"), (20000, rw.ALIGN_ROWS, "fp32"),
                             (27001, rw.ALIGN_WINDOW, "fp32")):  # fmt: skip
        vec = 4 if dt == "fp32" else 8
        chunks = -(-(width + (vec - 1 if align == rw.ALIGN_WINDOW else 0)) // STAGED_CHUNK)
        cast = {"bf16": tl.bfloat16, "fp16": tl.float16, "fp32": tl.float32}[dt]
        consts = {"WIDTH": width, "CHUNK": STAGED_CHUNK, "NCHUNK": chunks, "VEC": vec, "ALIGN": align,
                  "A_CAST": cast, "NUM_WARPS": STAGED_WARPS}  # fmt: skip
        ptrs = {name: f"*{dt}" for name in ("a_ptr", "b_ptr", "c_ptr", "w_ptr", "out_ptr", "out2_ptr", "rstat_ptr")}
        signature = {**ptrs, **INTS, **{k: "constexpr" for k in consts}}
        attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(ptrs))}
        kernel = triton.compile(
            GluonASTSource(fn=staged_softmax_kernel, signature=signature, constexprs=consts, attrs=attrs),
            target=GPUTarget("cuda", 90, 32),
            options={"num_warps": STAGED_WARPS},
        )
        ptx = kernel.asm["ptx"]
        scalar = "b32" if dt == "fp32" else "b16"
        print(json.dumps({
            "op": "softmax_staged", "width": width, "align": align, "plan": "staged", "dtype": dt, "chunks": chunks,
            "vector_loads": len(re.findall(r"\bcp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], 0x10\b", ptx)),
            "async_copies": len(re.findall(r"\bcp\.async\.c[ag]\.shared\.global", ptx)),
            "vector_stores": len(re.findall(r"\bst\.global(?:\.\w+)*\.v4\.", ptx)),
            "scalar_loads": len(re.findall(rf"\bld\.global\.{scalar}\b", ptx)),
            "scalar_stores": len(re.findall(rf"\bst\.global\.{scalar}\b", ptx)),
            "scalar_16bit_loads": len(re.findall(r"\bld\.global\.b16\b", ptx)),
            "scalar_16bit_stores": len(re.findall(r"\bst\.global\.b16\b", ptx)),
            "shared_bytes": kernel.metadata.shared,
        }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
    staged()
