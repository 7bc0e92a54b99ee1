"""Probe: SwiGLU's block size (elements per program) for the forward (3 passes) and the
backward (5 passes) at 8192 x 14336 and 4096 x 11008 bf16 (H200, device time by CUDA events
over 20 calls).  Run swiglu-20261201T185131Z-0173ca4 had the forward at the copy peak and the
backward ~10% behind torch.compile's.  JSON lines.

    python3 notes/probe_swiglu_blocks.py > $OUT/probe-swiglu-blocks.log
"""

from __future__ import annotations

import importlib
import json

import torch

from bench.timing import mean_event_us as time_us

sw = importlib.import_module("kernels.swiglu")  # the module (kernels.swiglu is the function)

SHAPES = [(8192, 14336), (4096, 11008)]
BLOCKS = (1024, 2048, 4096, 8192, 16384)


def main() -> None:
    dev = torch.device("cuda")
    for n, w in SHAPES:
        g = torch.Generator(device=dev).manual_seed(0)
        gate, up, dy = (torch.randn((n, w), generator=g, device=dev).to(torch.bfloat16) for _ in range(3))
        out, dgate, dup = (torch.empty_like(gate) for _ in range(3))
        for block in BLOCKS:
            fwd = time_us(lambda b=block, t=(gate, up, out): sw.swiglu_flat(*t, b))
            bwd = time_us(lambda b=block, t=(dy, gate, up, dgate, dup): sw.swiglu_backward_flat(*t, b))
            elems = gate.numel() * 2
            print(json.dumps({"shape": f"{n}x{w}", "block": block, "fwd_us": round(fwd, 1), "bwd_us": round(bwd, 1),
                              "fwd_TBps": round(3 * elems / fwd / 1e6, 2),
                              "bwd_TBps": round(5 * elems / bwd / 1e6, 2)}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
