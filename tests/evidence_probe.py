"""Compile one small ``tl.dot`` kernel for sm_90 and for sm_80 on a machine without a GPU
and print what bench/evidence.py reads from each (run by tests/test_evidence.py in a process
of its own: the interpreter, which the other CPU tests use, compiles nothing).

    python tests/evidence_probe.py   # one JSON object: capability -> evidence
"""

from __future__ import annotations

import json
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from bench import evidence


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm, rn, rk = tl.arange(0, BLOCK_M), tl.arange(0, BLOCK_N), tl.arange(0, BLOCK_K)
    a = tl.load(a_ptr + rm[:, None] * BLOCK_K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * BLOCK_N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * BLOCK_N + rn[None, :], tl.dot(a, b))


def main() -> None:
    signature = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*fp32", "BLOCK_M": "constexpr",
                 "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}  # fmt: skip
    out = {}
    for capability in (90, 80):
        kernel = triton.compile(
            ASTSource(fn=dot_kernel, signature=signature, constexprs={"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 16}),
            target=GPUTarget("cuda", capability, 32),
            options={"num_warps": 4},
        )
        out[capability] = evidence.kernel_evidence([kernel])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
