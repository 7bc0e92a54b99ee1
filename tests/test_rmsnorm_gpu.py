"""RMSNorm, row sum and vector add at real sizes, on a GPU (``pytest -m gpu``).

What the CPU suite checks through the interpreter, here on compiled kernels: every plan at
model widths and widths that are not multiples of the 16-byte vector, the weight gradient's
bits, no recompilation across row counts, ``torch.compile`` graphs and ``opcheck``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tolerances import assert_close

import kernels
from kernels import _rowwise, rmsnorm
from kernels._rowwise import LAUNCHERS

pytestmark = pytest.mark.gpu
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def randn(shape, dtype, scale=1.0, shift=0.0, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(shape, device="cuda", dtype=torch.float32, generator=g) * scale + shift).to(dtype)


def reference(x, r, w, eps):
    h = x.double() + r.double()
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * w.double(), h


SHAPES = [
    ((16384, 4096), None),
    ((8192, 5120), None),
    ((4096, 7168), None),
    ((2048, 14336), None),
    ((512, 4097), None),
    ((4, 32769), None),
    ((4, 32769), "looped"),
    ((64, 131072), None),
    ((64, 131072), "split"),
    ((8, 1048576), None),
    ((1, 1048576), "looped"),
    ((300, 12289), "split"),
    ((33, 1531), None),
    ((1, 1), None),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("shape", "plan"), SHAPES, ids=str)
def test_residual_rms_norm_real_sizes_every_plan(shape, plan, dtype) -> None:
    eps = 1e-6
    x = randn(shape, dtype, seed=1).requires_grad_()
    r = randn(shape, dtype, scale=4.0, seed=2).requires_grad_()
    w = randn((shape[-1],), dtype, scale=0.1, shift=1.0, seed=3).requires_grad_()
    y, h = kernels.rms_norm(x, (shape[-1],), w, eps, residual=r, plan=plan)
    y_ref, h_ref = reference(x.detach(), r.detach(), w.detach(), eps)
    x2d = x.detach().reshape(-1, shape[-1])
    if (plan or rmsnorm.plan_for(x2d, torch.empty_like(x2d))[0].kind) == "split":
        # the split plans normalize h as they return it (RowOp.early_out2; test_rmsnorm.y_reference)
        y_ref = y_ref * (h.detach().double() / h_ref).nan_to_num(1.0)
    assert_close(y, y_ref, dtype, "y")
    assert_close(h, h_ref, dtype, "h")
    dy, dh = randn(shape, dtype, seed=4), randn(shape, dtype, seed=5)
    dx, dr, dw = torch.autograd.grad((y, h), (x, r, w), (dy, dh))
    h64 = h.detach().double().requires_grad_()
    w64 = w.detach().double().requires_grad_()
    y64 = F.rms_norm(h64, (shape[-1],), w64, eps)
    dx_ref, dw_ref = torch.autograd.grad((y64 * dy.double()).sum() + (h64 * dh.double()).sum(), (h64, w64))
    assert torch.equal(dx, dr)
    torch.testing.assert_close(dx.double(), dx_ref, rtol=0.05 if dtype != torch.float32 else 1e-4, atol=0.05)
    assert_close(dw, dw_ref, dtype, "dw")


def test_weight_gradient_same_bits_every_call() -> None:
    x = randn((16384, 4096), torch.bfloat16, seed=7).requires_grad_()
    w = randn((4096,), torch.bfloat16, shift=1.0, seed=8).requires_grad_()
    dy = randn((16384, 4096), torch.bfloat16, seed=9)
    first = torch.autograd.grad(kernels.rms_norm(x, (4096,), w), w, dy)[0]
    for _ in range(3):
        assert torch.equal(torch.autograd.grad(kernels.rms_norm(x, (4096,), w), w, dy)[0], first)


def _compiled_count() -> int:
    kernels_ = [launcher.kernel.fn for launcher in LAUNCHERS]
    kernels_ += [_rowwise._column_partial_sum, _rowwise._column_final_sum]
    return sum(len(c[0]) for fn in kernels_ for c in fn.device_caches.values())


@pytest.mark.parametrize(("width", "plan"), [(4096, "block"), (5120, None), (40000, "looped"), (40000, "split")])
def test_new_row_counts_never_recompile(width, plan) -> None:
    w = randn((width,), torch.bfloat16, shift=1.0).requires_grad_()

    def step(rows: int) -> None:
        x = randn((rows, width), torch.bfloat16).requires_grad_()
        r = randn((rows, width), torch.bfloat16)
        y, h = kernels.rms_norm(x, (width,), w, 1e-6, residual=r, plan=plan)
        torch.autograd.grad((y, h), (x, w), (torch.ones_like(y), torch.ones_like(h)))
        kernels.row_sum(x.detach(), plan=plan)

    for rows in (5, 7):
        step(rows)
    before = _compiled_count()
    for rows in (2, 3, 16, 17, 129, 1000):
        step(rows)
    assert _compiled_count() == before


def test_torch_compile_fullgraph_matches_eager() -> None:
    w = randn((4096,), torch.bfloat16, shift=1.0).requires_grad_()

    def f(x: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        y, h = kernels.rms_norm(x * 1.5, (4096,), w, 1e-6, residual=r)
        return kernels.add(kernels.row_sum(y, keepdim=True), h).sum(dim=0)

    compiled = torch.compile(f, fullgraph=True)
    for rows in (64, 1000):
        x = randn((rows, 4096), torch.bfloat16, seed=rows).requires_grad_()
        r = randn((rows, 4096), torch.bfloat16, seed=rows + 1)
        out_c, out_e = compiled(x, r), f(x, r)
        torch.testing.assert_close(out_c, out_e)
        g = torch.randn_like(out_e)
        for a, b in zip(torch.autograd.grad(out_c, (x, w), g), torch.autograd.grad(out_e, (x, w), g), strict=True):
            torch.testing.assert_close(a, b)


def test_registered_ops_opcheck_on_gpu() -> None:
    x = randn((64, 4097), torch.bfloat16).requires_grad_()
    r = randn((64, 4097), torch.bfloat16).requires_grad_()
    w = randn((4097,), torch.bfloat16, shift=1.0).requires_grad_()
    for plan in (None, "looped", "split"):
        torch.library.opcheck(rmsnorm._rms_norm_residual_op, (x, r, w, 1e-6, 4097, plan))
        torch.library.opcheck(rmsnorm._rms_norm_op, (x, None, 1e-6, 4097, plan))


@pytest.mark.parametrize("n", [2**20 + 3, 16 * 2**20, 2**31 + 5])
def test_add_large_and_past_2_31_elements(n) -> None:
    if n > 2**31 and torch.cuda.get_device_properties(0).total_memory < 24 * 2**30:
        pytest.skip("needs 12 GB for three 4 GB tensors")
    a = torch.ones(n, device="cuda", dtype=torch.bfloat16)
    b = torch.full((n,), 2.0, device="cuda", dtype=torch.bfloat16)
    b[-1] = 5.0
    out = kernels.add(a, b)
    assert out[0].item() == 3.0 and out[-1].item() == 6.0 and out[n // 2].item() == 3.0
    del a, b, out


def test_row_sum_wide_rows_every_plan() -> None:
    x = randn((64, 131072), torch.bfloat16, shift=0.5)
    for plan in (None, "looped", "split"):
        assert_close(kernels.row_sum(x, plan=plan), x.double().sum(-1), torch.bfloat16)


@pytest.mark.parametrize(("shape", "residual"), [((16, 1048576), False), ((64, 131072), True)])
def test_a_captured_split_replays_its_two_launches_and_nothing_else(shape, residual) -> None:
    # Scratch allocated while a stream captures becomes part of every replay: zeroed counters
    # were a fill kernel a call (about a microsecond of device time, 2026-12-03).  A replay
    # of one captured split call runs the reduce and the merge/apply launch, nothing else.
    x = randn(shape, torch.bfloat16, shift=0.5)
    r = randn(shape, torch.bfloat16, seed=1)
    w = randn(shape[-1:], torch.bfloat16, shift=1.0, seed=2)

    def call():  # type: ignore[no-untyped-def]
        if residual:
            return kernels.rms_norm(x, shape[-1:], w, 1e-6, residual=r)
        return kernels.row_sum(x)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = call()
    graph.replay()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert len(names) == 2 and all("row_split" in n for n in names), names
    if residual:
        y, h = got
        want_y, want_h = reference(x, r, w, 1e-6)
        assert_close(h, want_h, torch.bfloat16)
        assert_close(y, want_y, torch.bfloat16)
    else:
        assert_close(got, x.double().sum(-1), torch.bfloat16)


@pytest.mark.parametrize(("shape", "residual"), [((16, 1048576), False), ((64, 131072), True)])
def test_reduce_overhead_compile_of_a_split_shape(shape, residual) -> None:
    # torch.compile's CUDA graphs (mode="reduce-overhead") run their warm-ups eagerly in a
    # private memory pool: a registered op must not allocate the eager lane's cached split
    # statistics there ("tensors in the cudagraph pool not tracked as outputs").  The cache
    # is emptied after an eager call, so that a warm-up would have to allocate it.
    torch._dynamo.reset()
    x = randn(shape, torch.bfloat16, shift=0.5)
    r = randn(shape, torch.bfloat16, seed=1)
    w = randn(shape[-1:], torch.bfloat16, shift=1.0, seed=2)

    def f(x: torch.Tensor):  # type: ignore[no-untyped-def]
        if residual:
            return kernels.rms_norm(x * 1.0, shape[-1:], w, 1e-6, residual=r)
        return kernels.row_sum(x * 1.0)

    f(x)  # an eager call first: the shape's key is then a remembered lane, as in a real program
    _rowwise._ONE_LAUNCH_SCRATCH.clear()
    compiled = torch.compile(f, mode="reduce-overhead")
    for _ in range(4):  # warm-up, recording, replays
        got = compiled(x)
        got = tuple(t.clone() for t in got) if residual else got.clone()
    torch.cuda.synchronize()
    if residual:
        want_y, want_h = reference(x, r, w, 1e-6)
        assert_close(got[1], want_h, torch.bfloat16)
        assert_close(got[0], want_y, torch.bfloat16)
    else:
        assert_close(got, x.double().sum(-1), torch.bfloat16)
