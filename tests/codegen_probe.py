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

INTS = {"n_rows": "i64", "a_stride": "i64", "b_stride": "i64", "out_stride": "i64"}


def compile_kernel(fn, pointers: dict[str, str], consts: dict, warps: int) -> dict:
    signature = {**pointers, **INTS, **{k: "constexpr" for k in consts}}
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
    }


def main() -> None:
    ab_out = {"a_ptr": "*bf16", "b_ptr": "*bf16", "out_ptr": "*bf16"}
    for width, align in ((50257, rw.ALIGN_WINDOW), (50264, rw.ALIGN_ROWS), (50257, rw.ALIGN_NONE)):
        base = {"WIDTH": width, "BLOCK": 4096, "VEC": 8, "ALIGN": align, "ACC": tl.float32}
        fwd = {**base, "A_CAST": tl.bfloat16, "A_FILL": float("-inf"), "HAS_B": False}
        bwd = {**base, "A_CAST": tl.float32, "A_FILL": 0.0, "HAS_B": True}
        for name, op, c in (("fwd", FORWARD, fwd), ("bwd", BACKWARD, bwd)):
            lanes = {**c, "LANES": 8 * 32 * 8}  # 8 warps, one 16-byte vector per thread: 2 per block
            looped = compile_kernel(
                rw.row_looped_kernel,
                ab_out,
                {**lanes, "ACCUMULATE": op.accumulate, "COMBINE": op.combine, "APPLY": op.apply, "STAGES": 1,
                 "EVICT": True},
                8,
            )
            apply = compile_kernel(
                rw.row_split_apply_kernel,
                {**ab_out, "stats_ptr": "*fp32"},
                {**lanes, "COMBINE": op.combine, "APPLY": op.apply, "CHUNKS": 13, "SPAN": 1},
                8,
            )
            reduce = compile_kernel(
                rw.row_split_reduce_kernel,
                {"a_ptr": "*bf16", "b_ptr": "*bf16", "stats_ptr": "*fp32"},
                {**lanes, "ACCUMULATE": op.accumulate, "COMBINE": op.combine, "CHUNKS": 13, "SPAN": 2},
                8,
            )
            one = compile_kernel(
                rw.row_split_one_launch_kernel,
                {**ab_out, "stats_ptr": "*fp32", "sync_ptr": "*i32"},
                {**c, "ACCUMULATE": op.accumulate, "COMBINE": op.combine, "APPLY": op.apply, "CHUNKS": 13},
                8,
            )
            block = compile_kernel(
                rw.row_block_kernel, ab_out, {**c, "BLOCK": 65536, "ROWS": 1, "ROW_FN": op.row, "APPLY": op.apply}, 16
            )
            reports = (("looped", looped), ("split-apply", apply), ("split-reduce", reduce), ("one-launch", one),
                       ("block", block))  # fmt: skip
            for plan, report in reports:
                print(json.dumps({"op": name, "width": width, "align": align, "plan": plan, **report}), flush=True)


if __name__ == "__main__":
    main()
