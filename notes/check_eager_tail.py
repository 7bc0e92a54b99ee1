"""Check (2026-12-04, eighteenth session): the split tail as a user calls it, at shapes no
probe or held-out set chose.  Each shape: the plan and the dispatch's choice, the error
against float64 (relative L2), and the time per call of 200 eager calls in a Python loop
(host and device, one synchronize at the end) beside torch.mm in the same loop.

    python3 notes/check_eager_tail.py > $OUT/check_eager_tail.log
"""

from __future__ import annotations

import importlib
import json
import sys

import torch

sys.path.insert(0, ".")

from bench.timing import loop_us

km = importlib.import_module("kernels.matmul")  # the package exports a function of this name

CALLS = 200
# (M, N, K, dtype, precision, epilogue): 161 tiles (29 in the tail: 4 ways), 141 (9: 14 ways),
# an odd N without an epilogue, TF32, and a bias at an odd N (tiles run whole)
SHAPES = [(2944, 1792, 7424, torch.bfloat16, None, None), (6016, 768, 12800, torch.bfloat16, None, "bias_gelu"),
          (6016, 767, 12800, torch.bfloat16, None, None), (2944, 1792, 7424, torch.float32, "tf32", None),
          (6016, 767, 12800, torch.bfloat16, None, "bias")]  # fmt: skip


def per_call(fn) -> float:
    fn()  # compiles; then bench.timing.loop_us (until 2026-12-04 the loop was written out here)
    return loop_us(fn, CALLS)


def main() -> None:
    g = torch.Generator(device="cuda").manual_seed(3)
    sms = km.sm_count(torch.device("cuda"))
    for m, n, k, dtype, precision, epilogue in SHAPES:
        a = torch.randn((m, k), generator=g, device="cuda").to(dtype)
        b = torch.randn((k, n), generator=g, device="cuda").to(dtype)
        bias = torch.randn((n,), generator=g, device="cuda").to(dtype)
        kw = {"bias": bias} if epilogue else {}
        ref = a.double() @ b.double()
        if epilogue:
            ref = ref + bias.double()
        if epilogue == "bias_gelu":
            ref = torch.nn.functional.gelu(ref, approximate="tanh")
        km._PREPARED.clear()
        out = km.matmul(a, b, epilogue=epilogue, precision=precision, **kw)
        plans = [e[-1] for e in km._PREPARED.values() if e[0] is km._PERSISTENT]
        err = float(torch.linalg.vector_norm(out.double() - ref) / torch.linalg.vector_norm(ref))
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        ours = per_call(lambda a=a, b=b, kw=kw, e=epilogue, p=precision: km.matmul(a, b, epilogue=e, precision=p, **kw))
        theirs = per_call(lambda a=a, b=b: torch.mm(a, b))
        torch.backends.cuda.matmul.allow_tf32 = False
        tiles = km.cdiv(m, 128) * km.cdiv(n, 256)
        print(
            json.dumps(
                {
                    "shape": f"{m}x{n}x{k}",
                    "dtype": str(dtype),
                    "precision": precision,
                    "epilogue": epilogue,
                    "default": km.dispatch(a, b, epilogue, precision),
                    "plans": plans,
                    "plan_bf16": km.tail_split(tiles, km.cdiv(k, 64), sms),
                    "rel_error": err,
                    "eager_us": round(ours, 1),
                    "torch_mm_eager_us": round(theirs, 1),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
