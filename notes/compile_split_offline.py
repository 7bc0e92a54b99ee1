"""Offline (no GPU): registers and shared memory of split-K's partial kernel
(kernels.matmul._mm_split_kernel) and of the one-launch form (notes/probe_split_one_launch.py)
compiled for sm_90 at 16, 64 and 128 rows of tile, through Triton's ptxas and cuobjdump.

    python notes/compile_split_offline.py
"""

import importlib
import os
import subprocess
import sys
import tempfile

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, ".")
sys.path.insert(0, "notes")
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

km = importlib.import_module("kernels.matmul")
one = importlib.import_module("probe_split_one_launch")
cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump")


def compile_(fn, ptrs, ints, consts, warps, stages):
    sig = {**ptrs, **{k: "i64" for k in ints}, **{k: "constexpr" for k in consts}}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(ptrs))}
    k = triton.compile(
        ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs),
        target=GPUTarget("cuda", 90, 32),
        options={"num_warps": warps, "num_stages": stages},
    )
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(k.asm["cubin"])
        path = f.name
    out = subprocess.run([cuobjdump, "-res-usage", path], capture_output=True, text=True).stdout
    line = next(x for x in out.splitlines() if "REG" in x).strip()
    return line, k.metadata.shared


for bm in (16, 64, 128):
    common = dict(
        A_LAYOUT=km._INNER,
        B_LAYOUT=km._OUTER,
        A_VEC=8,
        B_VEC=8,
        M_VEC=1,
        C_VEC=8,
        K_VEC=8,
        EVEN_K=True,
        PRECISION="tf32",
    )
    tile = dict(BLOCK_M=bm, BLOCK_N=128, BLOCK_K=64, GROUP_M=1)
    c2 = {**common, **tile}
    two = compile_(
        km._mm_split_kernel,
        {"a_ptr": "*bf16", "b_ptr": "*bf16", "ws_ptr": "*fp32"},
        ["M", "N", "K", "k_per_split", "s_am", "s_ak", "s_bk", "s_bn"],
        c2,
        4,
        6,
    )
    c1 = {**common, "R_LAYOUT": km._INNER, "R_VEC": 1, "EPILOGUE": 0, "STORE_PRE": False, **tile}
    o = compile_(
        one.split_one_launch_kernel,
        {
            "a_ptr": "*bf16",
            "b_ptr": "*bf16",
            "ws_ptr": "*fp32",
            "count_ptr": "*i32",
            "c_ptr": "*bf16",
            "pre_ptr": "*bf16",
            "bias_ptr": "*bf16",
            "res_ptr": "*bf16",
        },
        ["M", "N", "K", "k_per_split", "splits", "s_am", "s_ak", "s_bk", "s_bn", "s_cm", "s_bias", "s_rm", "s_rn"],
        c1,
        4,
        6,
    )
    print(bm, "two-launch partial:", two, "| one-launch:", o, flush=True)
