"""Probe: the cross-entropy kernels compile for sm_90 on a machine without a GPU (Triton's
compiler up to PTX), and what the PTX does with memory: 16-byte vector loads and stores of
the logits and gradient in the plans the planner picks at LLM shapes (the tuple ARG and the
per-row target and scale of the row base's extended form included), plus the backward's
scale kernel; and what the per-element arithmetic costs: libdevice calls (``logf`` once per
lane and step made the loss-only loop 1648 PTX instructions, 1064 without it and with 32-bit
target compares) and 64-bit compares.  Prints one JSON line per compiled launch.

python tests/ce_codegen_probe.py   # run by tests/test_cross_entropy_codegen.py in a process of its own
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from kernels import _rowwise as rw
from kernels.cross_entropy import FORWARD, LOSS_ONLY, POLICY, _scale_rows_kernel
from kernels.plans import plan_rows

INTS = ["n_rows", "a_stride", "b_stride", "c_stride", "out_stride", "out2_stride"]
TYPES = {"a": "*bf16", "b": "*bf16", "c": "*i64", "w": "*fp32", "out": "*bf16", "out2": "*bf16", "rstat": "*fp32",
         "stats": "*fp32", "sync": "*i32"}  # fmt: skip
H90 = GPUTarget("cuda", 90, 32)


def compile_step(step: rw._Step, warps: int) -> dict:
    fn = step.launcher.kernel.fn
    consts = dict(zip(step.launcher.kernel.const_names, step.consts, strict=True))
    ptr_names = [n for n in fn.arg_names if n.endswith("_ptr")]
    pointers = {name: TYPES[role] for name, role in zip(ptr_names, step.roles, strict=True)}
    signature = {**pointers, **dict.fromkeys(INTS, "i64"), **dict.fromkeys(consts, "constexpr")}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(pointers))}
    kernel = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs), target=H90,
                            options={"num_warps": warps})  # fmt: skip
    ops = Counter(re.findall(r"\b((?:ld|st)\.global[\w.:]*)", kernel.asm["ptx"]))
    return {
        "kernel": fn.__name__,
        "vector_loads": sum(n for o, n in ops.items() if o.startswith("ld.") and ".v4." in o),
        "vector_stores": sum(n for o, n in ops.items() if o.startswith("st.") and ".v4." in o),
        "scalar_16bit_loads": sum(n for o, n in ops.items() if o.startswith("ld.") and o.endswith("b16")),
        "shared_bytes": kernel.metadata.shared,
        "libdevice_calls": len(re.findall(r"call\.uni[^;]*__nv_|__nv_\w+\.exit", kernel.asm["ptx"])),
        "compares_64bit": len(re.findall(r"\bsetp\.\w+\.[bsu]64\b", kernel.asm["ptx"])),
        "instructions": len(re.findall(r"^\s+[a-z@][^:]*;", kernel.asm["ptx"], flags=re.M)),
    }


def main() -> None:
    grad_ext = rw.EXT_ON | rw.EXT_W | rw.EXT_RSTAT | rw.EXT_IDX | rw.EXT_WROW | rw.EXT_ARGS
    loss_ext = rw.EXT_ON | rw.EXT_RSTAT | rw.EXT_NOOUT | rw.EXT_IDX | rw.EXT_ARGS
    shapes = ((8192, 128256, rw.ALIGN_ROWS), (64, 128256, rw.ALIGN_ROWS), (8192, 50257, rw.ALIGN_WINDOW),
              (8192, 4000, rw.ALIGN_ROWS))  # fmt: skip
    for n_rows, width, align in shapes:
        plan = plan_rows(n_rows, width, 2, 132, POLICY, None, 7 if align == rw.ALIGN_WINDOW else 0)
        runs = [(op, ext, arg) for op, ext in ((FORWARD, grad_ext), (LOSS_ONLY, loss_ext))
                for arg in ((30.0, 0.9, 0.1 / width, True), (0.0, 1.0, 0.0, True))]  # fmt: skip
        # soft cap and smoothing; neither (bf16 logits: the fast tanh)
        for op, ext, arg in runs:
            for step in rw._steps(op, plan, width, 8, align, torch.bfloat16, torch.bfloat16, ext, arg):
                report = {"rows": n_rows, "width": width, "plan": plan.label, "op": op.name, "softcap": arg[0] > 0}
                print(json.dumps({**report, **compile_step(step, plan.num_warps)}), flush=True)
    signature = {"grad_ptr": "*bf16", "g_ptr": "*fp32", "n_rows": "i64", "stride": "i64", "blocks": "i64",
                 "WIDTH": "constexpr", "BLOCK": "constexpr", "VEC": "constexpr", "SCALAR": "constexpr"}  # fmt: skip
    for vec in (8, 1):  # rows on the 16-byte grid (the host checked), and not
        consts = {"WIDTH": 128256, "BLOCK": 4096, "VEC": vec, "SCALAR": vec == 8}
        attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
        source = ASTSource(fn=_scale_rows_kernel, signature=signature, constexprs=consts, attrs=attrs)
        ptx = triton.compile(source, target=H90, options={"num_warps": 4}).asm["ptx"]
        ops = Counter(re.findall(r"\b((?:ld|st)\.global[\w.:]*)", ptx))
        loads = {o: n for o, n in ops.items() if o.startswith("ld.")}
        print(json.dumps({"kernel": "_scale_rows_kernel", "vec": vec,
                          "vector_loads": sum(n for o, n in loads.items() if ".v4." in o),
                          "scalar_16bit_loads": sum(n for o, n in loads.items() if o.endswith("b16"))}))  # fmt: skip


if __name__ == "__main__":
    main()
