"""The RoPE case study (issue 10): q and k rotated in one launch, against the model code's
formula, torch.compile of it and Liger-Kernel; declared through
:mod:`publish.studypage.pointwise`.  Shapes are tokens × head dim × query heads × key/value
heads, as the registry writes them; the prose is ``templates/rope.md.j2``."""

from __future__ import annotations

from publish.studypage.pointwise import page
from publish.studypage.spec import Case

# The longest sequence the bench runs (bench/studies/rope.py): Llama 3 8B's heads at T = 16384.
LONG = (("heads", 32), ("kv_heads", 8))
DRAM_BOUND = (
    Case("fwd", "bf16", 16384, 128, more=LONG),
    Case("fwd+bwd", "bf16", 16384, 128, more=LONG),
)

PAGE = page(
    "rope",
    "RoPE",
    "rotary position embedding on q and k (32 query heads, 8 key/value heads) in one launch, forward and "
    "backward, against the model code's formula, torch.compile and Liger-Kernel",
    ("torch", "compile", "liger"),
    DRAM_BOUND,
)
