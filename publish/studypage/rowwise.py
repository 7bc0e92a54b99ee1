"""What the row-wise studies' pages (softmax, RMSNorm) share: the targets their issues set
for them, and why QuACK leads where a row is too wide for one thread block."""

from __future__ import annotations

from publish.numbers import definition

# Set, not measured: the targets (issues 6 and 8, the study catalogue's copy target).
COPY_TARGET = definition(90, "pct", "target: fraction of the copy bandwidth measured in the same run")
WIDE_COLD_TARGET = definition(70, "pct", "target: fraction of the copy bandwidth, cold L2")
QUACK_TARGET = definition(1.10, "x_set", "target: our time at most this multiple of QuACK's")
WHY_QUACK = (
    "QuACK keeps a whole row on chip across a cluster of thread blocks and reads it from memory once; our looped "
    "and split plans read a row this wide twice (the second time hoping to find it in L2)."
)
