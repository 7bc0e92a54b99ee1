"""Probe (2026-12-02, seventh session; rms_norm without a residual added 2026-12-03): host
time of an eager call of row_sum, add and rms_norm with a residual, against torch's, in
one process (H200 machine).  The rowsum_add
run at f901a52 had row_sum's eager samples at 35.0 µs for 4096 x 4096 bf16 (device 9.5)
but 22.1 at 4096 x 4097.  Exploration, not a study.

host: a Python loop of calls without a sync, per call; events: the same loop timed by CUDA
events (what a loop of calls costs when the GPU also has to keep up).

    python3 notes/probe_rowsum_host.py > $OUT/probe_rowsum_host.log
"""

from __future__ import annotations

import json
import sys

import torch

sys.path.insert(0, ".")
sys.path.insert(0, "notes")
from probe_host_pieces import events_us, host_us

import kernels


def main() -> None:
    dev = torch.device("cuda")
    for shape in ((1, 257), (64, 4096), (4096, 4096), (4096, 4097), (16384, 1024), (16, 1048576)):
        x = torch.randn(shape, device=dev, dtype=torch.bfloat16)
        for name, fn in (("ours", lambda x=x: kernels.row_sum(x)), ("torch", lambda x=x: torch.sum(x, -1))):
            fn()
            print(json.dumps({"op": "row_sum", "shape": shape, "variant": name, "host": host_us(fn),
                              "events": events_us(fn)}), flush=True)  # fmt: skip
    for n in (257, 65537, 1 << 24):
        a, b = (torch.randn(n, device=dev, dtype=torch.bfloat16) for _ in range(2))
        for name, fn in (("ours", lambda a=a, b=b: kernels.add(a, b)), ("torch", lambda a=a, b=b: torch.add(a, b))):
            fn()
            print(json.dumps({"op": "add", "n": n, "variant": name, "host": host_us(fn), "events": events_us(fn)}),
                  flush=True)  # fmt: skip
    for shape in ((32, 127), (4, 32769), (1024, 4096), (64, 131072)):
        x, r = (torch.randn(shape, device=dev, dtype=torch.bfloat16) for _ in range(2))
        w = torch.randn(shape[-1], device=dev, dtype=torch.bfloat16)

        def ours(x=x, r=r, w=w, width=shape[-1]):  # type: ignore[no-untyped-def]
            return kernels.rms_norm(x, (width,), w, 1e-6, residual=r)

        def composed(x=x, r=r, w=w, width=shape[-1]):  # type: ignore[no-untyped-def]
            h = x + r
            return torch.nn.functional.rms_norm(h, (width,), w, 1e-6), h

        for name, fn in (("ours", ours), ("torch-composed", composed), ("ours-two-launches", ours)):
            if name == "ours-two-launches":  # eager splits as two launches, as before 2026-12-03
                from dataclasses import replace

                from kernels import rmsnorm
                from kernels._rowwise import RowCall

                shipped = rmsnorm._FORWARD_CALL
                rmsnorm._FORWARD_CALL = RowCall(rmsnorm.FORWARD, replace(rmsnorm.POLICY, one_launch_bytes=0))
            fn()
            print(json.dumps({"op": "rms_norm+residual", "shape": shape, "variant": name, "host": host_us(fn),
                              "events": events_us(fn)}), flush=True)  # fmt: skip
            if name == "ours-two-launches":
                rmsnorm._FORWARD_CALL = shipped
        plain = (("ours", lambda x=x, w=w, n=shape[-1]: kernels.rms_norm(x, (n,), w, 1e-6)),
                 ("torch", lambda x=x, w=w, n=shape[-1]: torch.nn.functional.rms_norm(x, (n,), w, 1e-6)))  # fmt: skip
        for name, fn in plain:
            fn()
            print(json.dumps({"op": "rms_norm", "shape": shape, "variant": name, "host": host_us(fn),
                              "events": events_us(fn)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
