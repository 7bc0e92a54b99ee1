"""Probe (2026-12-03, tenth session): a warp-specialized Hopper GEMM in Gluon, against cuBLAS
and our persistent Triton kernel (H200, bf16, device time).  Exploration, not a study.

Why: issue 9 still misses fp16 4096³ (0.97-0.98x cuBLAS, a consistent loss in per-round
pairs) and a resolved win for bias + GELU at 8192³ (1.00-1.02x).  The epilogue runs between
two tiles' main loops with the tensor cores idle; cuBLAS hides it in other warps.  Triton 3.6
compiles ``tl.range(warp_specialize=True)`` to one partition on sm_90, so this writes the
partitions by hand (``gl.warp_specialize``):

- a producer warp issues the TMA loads of every tile this program owns into an S-stage ring
  (``ready``/``empty`` mbarriers);
- two consumer warpgroups each own every other tile (128 x 128, fp32 accumulator in registers,
  async wgmma with one group in flight) and run its epilogue (bias, GELU, a TMA store through
  their own shared tile).  The ring is filled in tile order, so the second consumer's main loop
  starts as the first one's ends and each one's epilogue overlaps the other's main loop
  (a ping-pong without explicit ordering).

    python3 notes/probe_gluon_ws_gemm.py > $OUT/probe_gluon_ws_gemm.log
    python3 notes/probe_gluon_ws_gemm.py compile   # CPU: compile for sm_90 only
"""

from __future__ import annotations

import json
import statistics
import sys

import torch
import triton
from torch.nn.functional import gelu
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

sys.path.insert(0, ".")

from kernels._activations import GELU_A, GELU_C

BM, BN, BK = gl.constexpr(128), gl.constexpr(128), gl.constexpr(64)


@gluon.jit
def _tile(t, num_m, num_n, GROUP_M: gl.constexpr):
    group = GROUP_M * num_n
    first_m = (t // group) * GROUP_M
    size_m = gl.minimum(num_m - first_m, GROUP_M)
    return first_m + (t % group) % size_m, (t % group) // size_m


@gluon.jit
def _producer(a_desc, b_desc, a_bufs, b_bufs, ready, empty, num_tiles, num_m, num_n, k_steps,
              S: gl.constexpr, GROUP_M: gl.constexpr):  # fmt: skip
    i = 0
    for t in range(gl.program_id(0), num_tiles, gl.num_programs(0)):
        pid_m, pid_n = _tile(t, num_m, num_n, GROUP_M)
        for k in range(k_steps):
            s = i % S
            mbarrier.wait(empty.index(s), ((i // S) & 1) ^ 1)  # a fresh barrier passes parity 1
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [pid_m * BM, k * BK], ready.index(s), a_bufs.index(s))
            tma.async_copy_global_to_shared(b_desc, [k * BK, pid_n * BN], ready.index(s), b_bufs.index(s))
            i += 1


@gluon.jit
def _consumer(c_desc, bias_ptr, a_bufs, b_bufs, ready, empty, turn, c_smem, num_tiles, num_m, num_n, k_steps,
              WG: gl.constexpr, S: gl.constexpr, GROUP_M: gl.constexpr, EPILOGUE: gl.constexpr):  # fmt: skip
    # The two consumers take the ring's stages in turn, a whole tile each: consumer WG waits on
    # turn[WG] before its main loop and hands the turn over after it.  Without the turn, the
    # second consumer would wait on a stage several fills ahead, and a phase parity cannot
    # tell fills two apart.
    layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BN, 16])
    pid, nprog = gl.program_id(0), gl.num_programs(0)
    m = 0
    for t in range(pid + WG * nprog, num_tiles, 2 * nprog):
        j = (t - pid) // nprog  # this program's local tile index: its place in the ring
        pid_m, pid_n = _tile(t, num_m, num_n, GROUP_M)
        acc = gl.zeros((BM, BN), gl.float32, layout)
        i0 = j * k_steps
        mbarrier.wait(turn.index(WG), (m & 1) ^ (1 - WG))  # consumer 0's first tile passes at once
        for k in range(k_steps):
            i = i0 + k
            s = i % S
            mbarrier.wait(ready.index(s), (i // S) & 1)
            acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=(acc, a_bufs.index(s), b_bufs.index(s)))[0]
            mbarrier.arrive(empty.index((i + S - 1) % S), count=1, pred=k > 0)  # the step before is done
        mbarrier.arrive(turn.index(1 - WG), count=1)
        m += 1  # noqa: SIM113 (a jit loop: no enumerate)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index((i0 + k_steps - 1) % S), count=1)
        if EPILOGUE >= 1:  # bias (per column)
            cols = pid_n * BN + gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
            acc = acc + gl.load(bias_ptr + cols).to(gl.float32)[None, :]
        if EPILOGUE == 2:  # GELU, tanh form: z * sigmoid(2u) = z / (1 + exp(-2u))
            u = GELU_C * (acc + GELU_A * acc * acc * acc)
            acc = acc / (1.0 + gl.exp2(-2.8853900817779268 * u))
        tma.store_wait(0)  # the previous tile's store has left c_smem
        c_smem.store(acc.to(c_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [pid_m * BM, pid_n * BN], c_smem)
    tma.store_wait(0)


@gluon.jit
def ws_gemm_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K, S: gl.constexpr, GROUP_M: gl.constexpr,
                   EPILOGUE: gl.constexpr, CONSUMER_REGS: gl.constexpr):  # fmt: skip
    dtype: gl.constexpr = a_ptr.dtype.element_ty
    a_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BM, BK], dtype)
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BK, BN], dtype)
    c_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BM, BN], dtype)
    a_desc = tma.make_tensor_descriptor(a_ptr, [M, K], [K, 1], [BM, BK], a_layout)
    b_desc = tma.make_tensor_descriptor(b_ptr, [K, N], [N, 1], [BK, BN], b_layout)
    c_desc = tma.make_tensor_descriptor(c_ptr, [M, N], [N, 1], [BM, BN], c_layout)
    a_bufs = gl.allocate_shared_memory(dtype, [S, BM, BK], a_layout)
    b_bufs = gl.allocate_shared_memory(dtype, [S, BK, BN], b_layout)
    c0 = gl.allocate_shared_memory(dtype, [BM, BN], c_layout)
    c1 = gl.allocate_shared_memory(dtype, [BM, BN], c_layout)
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(turn.index(0), count=1)
    mbarrier.init(turn.index(1), count=1)
    ready = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(S):
        mbarrier.init(ready.index(s), count=1)
        mbarrier.init(empty.index(s), count=1)
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BN)
    k_steps = gl.cdiv(K, BK)
    num_tiles = num_m * num_n
    gl.warp_specialize(
        [
            (_consumer, (c_desc, bias_ptr, a_bufs, b_bufs, ready, empty, turn, c0, num_tiles, num_m, num_n,
                         k_steps, 0, S, GROUP_M, EPILOGUE)),
            (_consumer, (c_desc, bias_ptr, a_bufs, b_bufs, ready, empty, turn, c1, num_tiles, num_m, num_n,
                         k_steps, 1, S, GROUP_M, EPILOGUE)),
            (_producer, (a_desc, b_desc, a_bufs, b_bufs, ready, empty, num_tiles, num_m, num_n, k_steps, S, GROUP_M)),
        ],
        [4, 1],
        [CONSUMER_REGS, 40],
    )  # fmt: skip


def ws_gemm(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, epilogue: int = 0, stages: int = 4,
            group_m: int = 8, regs: int = 232) -> torch.Tensor:  # fmt: skip
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty(m, n, device=a.device, dtype=a.dtype)
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    grid = (min(sms, triton.cdiv(m, BM) * triton.cdiv(n, BN)),)
    ws_gemm_kernel[grid](a, b, c, a if bias is None else bias, m, n, k, stages, group_m, epilogue, regs, num_warps=4)
    return c


def compile_only() -> None:
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    for epilogue in (0, 2):
        consts = {"S": 4, "GROUP_M": 8, "EPILOGUE": epilogue, "CONSUMER_REGS": 232}
        sig = {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "bias_ptr": "*bf16", "M": "i32", "N": "i32",
               "K": "i32", **{k: "constexpr" for k in consts}}  # fmt: skip
        attrs = {(i,): [["tt.divisibility", 16]] for i in range(7)}
        kernel = triton.compile(GluonASTSource(fn=ws_gemm_kernel, signature=sig, constexprs=consts, attrs=attrs),
                                target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})  # fmt: skip
        ptx = kernel.asm["ptx"]
        print(json.dumps({"epilogue": epilogue, "shared": kernel.metadata.shared, "wgmma": ptx.count("wgmma.mma_async"),
                          "setmaxnreg": ptx.count("setmaxnreg"), "regs": getattr(kernel, "n_regs", None)}))  # fmt: skip


def main() -> None:
    from bench.timing import interleaved_us
    from kernels import matmul

    triton.set_allocator(lambda size, align, stream: torch.empty(size, device="cuda", dtype=torch.int8))
    gen = torch.Generator(device="cuda").manual_seed(0)
    for size in (4096, 8192):
        for dtype in (torch.bfloat16, torch.float16):
            a = torch.randn(size, size, device="cuda", dtype=dtype, generator=gen)
            b = torch.randn(size, size, device="cuda", dtype=dtype, generator=gen)
            bias = torch.randn(size, device="cuda", dtype=dtype, generator=gen)
            ref = (a.double() @ b.double()).float()
            fns = {"cublas": lambda a=a, b=b: torch.mm(a, b), "ours": lambda a=a, b=b: matmul(a, b)}
            for stages in (3, 4, 5):  # 32 KB a stage; two 32 KB output tiles beside them
                fns[f"ws-s{stages}"] = lambda a=a, b=b, s=stages: ws_gemm(a, b, stages=s)
            if dtype == torch.bfloat16 and size == 8192:
                fns["addmm+gelu"] = lambda a=a, b=b, bias=bias: gelu(torch.addmm(bias, a, b), approximate="tanh")
                fns["ours-bias-gelu"] = lambda a=a, b=b, bias=bias: matmul(a, b, epilogue="bias_gelu", bias=bias)
                fns["ws-bias-gelu"] = lambda a=a, b=b, bias=bias: ws_gemm(a, b, bias, 2)
            ok = {}
            for name, fn in list(fns.items()):
                print(json.dumps({"size": size, "dtype": str(dtype)[6:], "checking": name}), flush=True)
                try:
                    got = fn()
                    torch.cuda.synchronize()
                    want = gelu(ref + bias.float(), approximate="tanh") if "gelu" in name else ref
                    err = ((got.float() - want).norm() / want.norm()).item()
                    ok[name] = err
                    if not err < 1e-2:
                        fns.pop(name)
                except Exception as e:  # reported, the probe goes on
                    print(json.dumps({"size": size, "variant": name, "error": repr(e)[:400]}), flush=True)
                    fns.pop(name)
            calls = 10 if size == 4096 else 3
            times = interleaved_us(fns, calls, 12)
            flops = 2 * size**3
            for name, ts in times.items():
                us = statistics.median(ts)
                print(json.dumps({"size": size, "dtype": str(dtype)[6:], "variant": name, "us": round(us, 1),
                                  "tflops": round(flops / us / 1e6, 1), "rel_err": ok.get(name),
                                  "samples": [round(x, 1) for x in ts]}), flush=True)  # fmt: skip


if __name__ == "__main__":
    if sys.argv[1:] == ["compile"]:
        compile_only()
    else:
        main()
