"""The RoPE case study (issue 10): q and k rotated in one launch, against the model code's
formula, torch.compile of it and Liger-Kernel; declared through
:mod:`publish.studypage.pointwise`.  Shapes are tokens × head dim × query heads × key/value
heads, as the registry writes them; the prose is ``templates/rope.md.j2``."""

from __future__ import annotations

from publish.studypage.pointwise import page
from publish.studypage.spec import Case, explained_by

# The longest sequence the bench runs (bench/studies/rope.py): Llama 3 8B's heads at T = 16384.
LONG = (("heads", 32), ("kv_heads", 8))
DRAM_BOUND = (
    Case("fwd", "bf16", 16384, 128, more=LONG),
    Case("fwd+bwd", "bf16", 16384, 128, more=LONG),
)


REASONS = {
    "occupancy": (
        "occupancy",
        "We think it is latency, not traffic: one program of ours rotates all 40 heads of a position. Up to "
        "commit b6cb1d3 it ran 8 warps, and Nsight Compute found it limited by its registers to half of each SM's "
        "warps and well short of the DRAM's bandwidth, where torch.compile's two lighter kernels (one for q, one "
        "for k) keep most warps resident (report: notes/2026-12-01-ncu-6b751ea/ncu-rope.txt and "
        "ncu-rope_compile.txt in the repository). From commit 3596ad1 it runs 4 warps and issues q's and k's loads "
        "before any arithmetic or store; that closed the gap at 16384 positions (probe: "
        "notes/2026-12-02-probe-pointwise-3596ad1.log). A loss listed here comes from a run of another commit, "
        "or from a shape that launch has not been timed on.",
    )
}

PAGE = page(
    "rope",
    "RoPE",
    "rotary position embedding on q and k (32 query heads, 8 key/value heads) in one launch, forward and "
    "backward, against the model code's formula, torch.compile and Liger-Kernel",
    ("torch", "compile", "liger"),
    DRAM_BOUND,
    explain=explained_by("occupancy", ("compile", "liger")),
    reasons=REASONS,
)
