"""Probe: launch layouts of two pointwise kernels that trail torch.compile (H200, bf16, device
time by CUDA events, every input past the L2).  JSON lines.

- RoPE, 16384 (and 4096) positions x 32 q / 8 kv heads of 128, q and k transposed views of
  [B, T, H, D] projections: one program per (batch, position) row at 2, 4 and 8 warps (8 was
  the launch at b6cb1d3: 104 us forward in its run against compile's 85); forward and
  backward; torch.compile of the formula for scale.  At c40eadc this probe also timed one
  program per head tile (half-tiles of 256 ... 2048 elements, 1-16 warps), slower at every
  setting (notes/2026-12-02-probe-pointwise-c40eadc.log); that launch option was removed.
- Bias + GELU + dropout's backward at 16384 x 8192 and 8192 x 4096 (p = 0.1, bias gradient
  wanted): the flat kernel alone and then a column sum of dx (a fourth pass).  At c40eadc and
  3596ad1 this probe also timed a backward that folded the bias gradient's partial sums into
  its pass (programs of 8 ... 128 rows): slower than the separate column sum once that read
  16-byte vectors (3596ad1: 468 against 439 us, 148 against 126); it was removed.
- RoPE: q's and k's loads issued together (``together``) against tile by tile.

    python3 notes/probe_pointwise_layouts.py > $OUT/probe-pointwise.log
"""

from __future__ import annotations

import importlib
import json

import torch

from bench.timing import mean_event_us as time_us

rope = importlib.import_module("kernels.rope")  # the module (kernels.rope is the function)
bgd = importlib.import_module("kernels.bias_gelu_dropout")
from kernels._rowwise import column_sum  # noqa: E402


def emit(**row: object) -> None:
    print(json.dumps(row), flush=True)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def formula(q, k, cos, sin):  # type: ignore[no-untyped-def]
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def probe_rope() -> None:
    dev = torch.device("cuda")
    d, hq, hk = 128, 32, 8
    compiled = torch.compile(formula)
    for t in (16384, 4096):
        g = torch.Generator(device=dev).manual_seed(0)
        q = torch.randn((1, t, hq, d), generator=g, device=dev).to(torch.bfloat16).transpose(1, 2)
        k = torch.randn((1, t, hk, d), generator=g, device=dev).to(torch.bfloat16).transpose(1, 2)
        emb = torch.randn((1, t, d), generator=g, device=dev).to(torch.bfloat16)
        cos, sin = emb.cos(), emb.sin()
        moved = 2 * (q.numel() + k.numel()) * 2 + 2 * cos.numel() * 2
        qo, ko = torch.empty_like(q), torch.empty_like(k)
        want_q, want_k = formula(q.double(), k.double(), cos.double(), sin.double())
        us = time_us(lambda i=(q, k, cos, sin): compiled(*i))
        emit(op="rope", T=t, config="torch.compile", us=round(us, 1), TBps=round(moved / us / 1e6, 2))
        for nw, together in ((2, False), (4, False), (8, False), (2, True), (4, True), (8, True)):
            name = f"row-w{nw}" + ("-together" if together else "")
            for backward in (False, True):

                def call(b=backward, nw=nw, tg=together, i=(q, k, cos, sin, qo, ko)):  # type: ignore[no-untyped-def]
                    rope.rope_into(*i, backward=b, num_warps=nw, together=tg)

                call()
                err = None
                if not backward:
                    err = max(float((qo.double() - want_q).abs().max()), float((ko.double() - want_k).abs().max()))
                us = time_us(call)
                emit(op="rope", T=t, config=name, backward=backward, us=round(us, 1),
                     TBps=round(moved / us / 1e6, 2), max_abs_err=err)  # fmt: skip


def probe_bgd(rows: int, width: int) -> None:
    dev = torch.device("cuda")
    p, seed = 0.1, 1234
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn((rows, width), generator=g, device=dev).to(torch.bfloat16)
    b = torch.randn((width,), generator=g, device=dev).to(torch.bfloat16)
    dy = torch.randn((rows, width), generator=g, device=dev).to(torch.bfloat16)
    dx = torch.empty_like(x)
    moved = 3 * x.numel() * 2

    def separate() -> torch.Tensor:
        bgd.backward_flat(dy, x, b, dx, p, seed)
        return column_sum(dx.view(-1, width), out_dtype=b.dtype)

    us = time_us(lambda: bgd.forward_flat(x, b, dx, p, seed))
    emit(op="bgd", shape=[rows, width], config="forward", us=round(us, 1))
    us = time_us(lambda: bgd.backward_flat(dy, x, b, dx, p, seed))
    emit(op="bgd", shape=[rows, width], config="backward-flat-only", us=round(us, 1), TBps=round(moved / us / 1e6, 2))
    us = time_us(separate)
    emit(op="bgd", shape=[rows, width], config="backward+column_sum", us=round(us, 1), TBps=round(moved / us / 1e6, 2))


if __name__ == "__main__":
    emit(gpu=torch.cuda.get_device_name(), sms=torch.cuda.get_device_properties(0).multi_processor_count)
    probe_bgd(16384, 8192)
    probe_bgd(8192, 4096)
    probe_rope()
