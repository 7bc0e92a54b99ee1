"""The SwiGLU case study (issue 10): ``silu(gate) * up`` and its backward, against the eager
expression, torch.compile of it and Liger-Kernel; declared through
:mod:`publish.studypage.pointwise`.  The prose is ``templates/swiglu.md.j2``."""

from __future__ import annotations

from publish.studypage.pointwise import page
from publish.studypage.spec import Case

# Llama 3 8B's MLP at 8192 tokens (bench/studies/swiglu.py): 117M elements per tensor.
DRAM_BOUND = (Case("fwd", "bf16", 8192, 14336), Case("fwd+bwd", "bf16", 8192, 14336))

PAGE = page(
    "swiglu",
    "SwiGLU",
    "silu(gate) · up for an MLP of 14336 (and 11008) features, forward and a backward that recomputes the "
    "sigmoid, against the eager expression, torch.compile and Liger-Kernel",
    ("torch", "compile", "liger"),
    DRAM_BOUND,
)
