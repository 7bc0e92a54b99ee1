"""Probe (2026-12-03, tenth session): where the host time of an eager ``rms_norm`` with a
residual goes at 64 x 131072 bf16 (the two-launch split), piece by piece, against 1024 x 4096
(one launch) and torch's composition, in one process (H200 machine).  Exploration, not a study.

Why: issue 8 asks ≤ 20 µs of host time per eager call; notes/probe_rowsum_host.py put this
call at 23.9 and 31.9 µs in two runs (torch's composition 16.5 and 24.3), the 1024 x 4096 call
at 15.3 and 23.9.  Timed here: the whole call; the two output allocations; the row base's
lane with the outputs given; the prepared launches alone (``_Prepared.bound_call``); the same
with the second launch not a programmatic dependent (PDL off: a plain ``cuLaunchKernelEx``);
each launch alone.

    python3 notes/probe_rms_host.py > $OUT/probe_rms_host.log
"""

from __future__ import annotations

import json
import sys

import torch

sys.path.insert(0, ".")
sys.path.insert(0, "notes")
from probe_host_pieces import events_us, host_us

import kernels
from kernels import _rowwise
from kernels.rmsnorm import _FORWARD_CALL


def pieces(shape: tuple[int, int]) -> None:
    dev = torch.device("cuda")
    x, r = (torch.randn(shape, device=dev, dtype=torch.bfloat16) for _ in range(2))
    w = torch.randn(shape[-1], device=dev, dtype=torch.bfloat16)
    y, h = torch.empty_like(x), torch.empty_like(x)
    width, eps = shape[-1], 1e-6
    tag = "x".join(map(str, shape))
    rows: dict[str, object] = {}

    def ours() -> object:
        return kernels.rms_norm(x, (width,), w, eps, residual=r)

    def composed() -> object:
        s = x + r
        return torch.nn.functional.rms_norm(s, (width,), w, eps), s

    ours()
    rows["ours call"] = host_us(ours)
    rows["ours call events"] = events_us(ours)
    rows["torch composed"] = host_us(composed)
    rows["torch F.rms_norm alone"] = host_us(lambda: torch.nn.functional.rms_norm(x, (width,), w, eps))
    rows["empty_like x2"] = host_us(lambda: (torch.empty_like(x), torch.empty_like(x)))
    rows["lane_ext into y, h"] = host_us(lambda: _FORWARD_CALL.lane_ext(x, None, y, r, w, h, None, eps))
    extras = _rowwise.RowExtras(c=r, w=w, out2=h, arg=eps)
    prepared = _FORWARD_CALL.prepare(x, None, y, None, extras)
    rows["plan"] = prepared.plan.label if prepared is not None else "-"
    if prepared is not None and prepared.fast is not None:
        ptrs = (x.data_ptr(), x.data_ptr(), r.data_ptr(), w.data_ptr(), y.data_ptr(), h.data_ptr(), y.data_ptr())
        strides = (x.stride(0), x.stride(0), r.stride(0), y.stride(0), h.stride(0))
        n = shape[0]
        rows["bound_call"] = host_us(lambda: prepared.bound_call(ptrs, strides, n))
        steps, scratch, chunks, dtype = prepared.fast
        if len(steps) == 2:
            saved = prepared.fast
            # the apply launch without the PDL attribute (index 4 of a step: pdl)
            plain = tuple((*s[:4], False, *s[5:]) for s in steps)
            prepared.fast = (plain, scratch, chunks, dtype)
            rows["bound_call pdl off"] = host_us(lambda: prepared.bound_call(ptrs, strides, n))
            rows["bound_call pdl off events"] = events_us(lambda: prepared.bound_call(ptrs, strides, n))
            prepared.fast = ((steps[0],), scratch, chunks, dtype)
            rows["reduce launch alone"] = host_us(lambda: prepared.bound_call(ptrs, strides, n))
            prepared.fast = ((steps[1],), scratch, chunks, dtype)
            rows["apply launch alone (pdl)"] = host_us(lambda: prepared.bound_call(ptrs, strides, n))
            prepared.fast = ((plain[1],), scratch, chunks, dtype)
            rows["apply launch alone (no pdl)"] = host_us(lambda: prepared.bound_call(ptrs, strides, n))
            prepared.fast = saved
            rows["bound_call again"] = host_us(lambda: prepared.bound_call(ptrs, strides, n))
        rows["scratch lookup"] = host_us(lambda: _rowwise._one_launch_scratch(n, chunks, x.get_device(), dtype))
    for k, v in rows.items():
        print(json.dumps({"shape": tag, "piece": k, "us": v}), flush=True)


def main() -> None:
    for shape in ((64, 131072), (1024, 4096), (32, 127)):
        pieces(shape)


if __name__ == "__main__":
    main()
