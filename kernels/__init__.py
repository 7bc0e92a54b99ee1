"""Kernel Lab Notes: Triton kernels with a functional API shaped like ``torch.nn.functional``.

Each operator works on CUDA tensors (CPU tensors under ``TRITON_INTERPRET=1``), trains
through autograd and is a ``torch.library`` custom op, so ``torch.compile`` can trace it.
``kernels.plans`` is pure Python: the site imports it to score the planner on stored runs
and builds where torch and Triton are not installed.
"""

from __future__ import annotations

import importlib.util

__all__ = [
    "add",
    "bias_gelu_dropout",
    "cross_entropy",
    "linear_cross_entropy",
    "matmul",
    "rms_norm",
    "rope",
    "row_sum",
    "softmax",
    "swiglu",
]

if importlib.util.find_spec("torch") is not None and importlib.util.find_spec("triton") is not None:
    from kernels.bias_gelu_dropout import bias_gelu_dropout
    from kernels.cross_entropy import cross_entropy
    from kernels.linear_cross_entropy import linear_cross_entropy
    from kernels.matmul import matmul
    from kernels.rmsnorm import rms_norm
    from kernels.rope import apply_rotary_pos_emb as rope
    from kernels.rowsum import row_sum
    from kernels.softmax import softmax
    from kernels.swiglu import swiglu
    from kernels.vector_add import add
