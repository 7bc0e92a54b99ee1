"""SwiGLU at real sizes, on a GPU (``pytest -m gpu``).

What the CPU suite checks through the interpreter, here on compiled kernels: a Llama-size
``[8192, 14336]`` MLP activation against float64, the cached launch against Triton's own on
misaligned views, no recompilation across sizes, ``torch.compile(fullgraph=True)``,
``opcheck``, a tensor on a second GPU and offsets past 2^31 elements."""

from __future__ import annotations

import importlib

import pytest
import torch
import torch.nn.functional as F
from tolerances import assert_close

from kernels.swiglu import swiglu, swiglu_backward_flat, swiglu_flat

# The module (kernels.swiglu the attribute may be the function, once the package exports it).
sw = importlib.import_module("kernels.swiglu")

pytestmark = pytest.mark.gpu


def randn(shape, dtype, scale=2.0, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(shape, device=device, dtype=torch.float32, generator=g) * scale).to(dtype)


def reference(gate, up, dy):
    """float64 ``F.silu(gate) * up`` and its gradients (float64 autograd) from the same inputs."""
    g = gate.detach().double().requires_grad_()
    u = up.detach().double().requires_grad_()
    y = F.silu(g) * u
    dg, du = torch.autograd.grad(y, (g, u), dy.double())
    return y.detach(), dg, du


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_llama_mlp_size_matches_float64(dtype) -> None:
    shape = (8192, 14336)
    gate = randn(shape, dtype, seed=1).requires_grad_()
    up = randn(shape, dtype, seed=2).requires_grad_()
    y = swiglu(gate, up)
    dy = randn(shape, dtype, scale=1.0, seed=3)
    dgate, dup = torch.autograd.grad(y, (gate, up), dy)
    y_ref, dg_ref, du_ref = reference(gate, up, dy)
    assert_close(y, y_ref, dtype, "y")
    del y_ref
    assert_close(dgate, dg_ref, dtype, "dgate")
    del dg_ref
    assert_close(dup, du_ref, dtype, "dup")


def test_non_finite_gates_like_torch_float64_on_gpu() -> None:
    """The GPU's exp and division at the extremes: the same NaNs and infinities as float64."""
    inf, nan = float("inf"), float("nan")
    values = [-inf, inf, nan, -1e4, 1e4, -100.0, 100.0, -88.0, 88.0, 0.0, 1.0, -1.0]
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        gate = torch.tensor(values, device="cuda", dtype=torch.float64).to(dtype).requires_grad_()
        up = torch.full_like(gate, 0.75).requires_grad_()
        y = swiglu(gate, up)
        dgate, dup = torch.autograd.grad(y, (gate, up), torch.ones_like(y))
        y_ref, dg_ref, du_ref = reference(gate, up, torch.ones_like(y))
        for out, ref in ((y, y_ref), (dgate, dg_ref), (dup, du_ref)):
            torch.testing.assert_close(out.double(), ref, rtol=1e-2, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("offset", [0, 1, 3, 8])
def test_cached_launch_matches_tritons_own_on_aligned_and_misaligned_views(offset) -> None:
    """The launch cache keys on pointer alignment: a misaligned view must never reuse a
    kernel compiled for aligned pointers."""
    n = 1_000_003
    base = [randn((n + 16,), torch.bfloat16, seed=s) for s in (4, 5, 6)]
    gate, up, dy = (b[offset : offset + n] for b in base)
    y_fast = torch.empty(n, device="cuda", dtype=torch.bfloat16)
    dg_fast, du_fast = torch.empty_like(y_fast), torch.empty_like(y_fast)
    for _ in range(2):  # the second call takes the cached path
        swiglu_flat(gate, up, y_fast)
        swiglu_backward_flat(dy, gate, up, dg_fast, du_fast)
    block, bblock = sw.DEFAULT_BLOCK, sw.BACKWARD_BLOCK
    y_slow, dg_slow, du_slow = (torch.empty_like(y_fast) for _ in range(3))
    sw._FORWARD.launch_uncached((-(-n // block), 1, 1), (gate, up, y_slow, n), (block,), sw._warps(block))
    sw._BACKWARD.launch_uncached(
        (-(-n // bblock), 1, 1), (dy, gate, up, dg_slow, du_slow, n), (bblock, True, True), sw._warps(bblock)
    )
    assert torch.equal(y_fast, y_slow) and torch.equal(dg_fast, dg_slow) and torch.equal(du_fast, du_slow)
    y_ref, dg_ref, du_ref = reference(gate, up, dy)
    assert_close(y_fast, y_ref, torch.bfloat16, "y")
    assert_close(dg_fast, dg_ref, torch.bfloat16, "dgate")
    assert_close(du_fast, du_ref, torch.bfloat16, "dup")


def _compiled_count() -> int:
    return sum(len(c[0]) for k in (sw._FORWARD, sw._BACKWARD) for c in k.fn.device_caches.values())


def test_new_sizes_never_recompile() -> None:
    def step(shape: tuple[int, ...]) -> None:
        for wants in ((True, True), (True, False), (False, True)):
            gate = randn(shape, torch.bfloat16).requires_grad_(wants[0])
            up = randn(shape, torch.bfloat16, seed=1).requires_grad_(wants[1])
            y = swiglu(gate, up)
            inputs = tuple(t for t, w in zip((gate, up), wants, strict=True) if w)
            torch.autograd.grad(y, inputs, torch.ones_like(y))

    for shape in ((5, 14336), (7,)):
        step(shape)
    before = _compiled_count()
    for shape in ((1,), (2, 3), (16, 14336), (17, 14336), (129, 4097), (1000, 11008), (4096 * 3,)):
        step(shape)
    assert _compiled_count() == before


def test_torch_compile_fullgraph_matches_eager() -> None:
    """The op alone between exact neighbours (the same values and gradients up to the fp32
    sum's order), then in a bf16 MLP block beside inductor's matmuls (a whole-tensor bound:
    the two paths round the matmuls' products differently)."""

    def f(x: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return swiglu(x * 1.5, up).float().sum(dim=0)

    compiled = torch.compile(f, fullgraph=True)
    for rows in (64, 1000):
        x = randn((rows, 14336), torch.bfloat16, seed=rows).requires_grad_()
        u = randn((rows, 14336), torch.bfloat16, seed=rows + 1).requires_grad_()
        out_c, out_e = compiled(x, u), f(x, u)
        torch.testing.assert_close(out_c, out_e, rtol=1e-5, atol=1e-3)
        g = torch.randn_like(out_e)
        for a, b in zip(torch.autograd.grad(out_c, (x, u), g), torch.autograd.grad(out_e, (x, u), g), strict=True):
            torch.testing.assert_close(a, b)

    w_gate = randn((4096, 1024), torch.bfloat16, scale=0.05, seed=7).requires_grad_()
    w_up = randn((4096, 1024), torch.bfloat16, scale=0.05, seed=8).requires_grad_()

    def mlp(x: torch.Tensor) -> torch.Tensor:
        return swiglu(x @ w_gate.t(), x @ w_up.t()).float().sum(dim=-1)

    compiled_mlp = torch.compile(mlp, fullgraph=True)
    for rows in (64, 1000):
        x = randn((rows, 1024), torch.bfloat16, seed=rows).requires_grad_()
        out_c, out_e = compiled_mlp(x), mlp(x)
        assert_close(out_c.detach(), out_e.detach(), torch.bfloat16, "mlp")
        g = torch.randn_like(out_e)
        grads_c = torch.autograd.grad(out_c, (x, w_gate, w_up), g)
        grads_e = torch.autograd.grad(out_e, (x, w_gate, w_up), g)
        for a, b, name in zip(grads_c, grads_e, ("dx", "dw_gate", "dw_up"), strict=True):
            assert_close(a, b, torch.bfloat16, name)


def test_registered_ops_opcheck_on_gpu() -> None:
    g = randn((64, 14337), torch.bfloat16).requires_grad_()
    u = randn((64, 14337), torch.bfloat16, seed=1).requires_grad_()
    dy = randn((64, 14337), torch.bfloat16, seed=2)
    torch.library.opcheck(sw._swiglu_op, (g, u))
    for wants in ((True, True), (True, False), (False, True)):
        torch.library.opcheck(sw._swiglu_backward_op, (dy, g.detach(), u.detach(), *wants))


def test_tensor_on_a_second_gpu_runs_there() -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU only: run on a machine with two (the nvidia-h200-x2 kind)")
    torch.cuda.set_device(0)
    gate = randn((333, 14336), torch.bfloat16, device="cuda:1").requires_grad_()
    up = randn((333, 14336), torch.bfloat16, seed=1, device="cuda:1").requires_grad_()
    y = swiglu(gate, up)
    assert y.device == gate.device
    dy = torch.ones_like(y)
    dgate, dup = torch.autograd.grad(y, (gate, up), dy)
    assert dgate.device == dup.device == gate.device
    y_ref, dg_ref, du_ref = reference(gate, up, dy)
    assert_close(y, y_ref, torch.bfloat16, "y")
    assert_close(dgate, dg_ref, torch.bfloat16, "dgate")
    assert_close(dup, du_ref, torch.bfloat16, "dup")
    assert torch.cuda.current_device() == 0


def test_offsets_past_two_to_the_31() -> None:
    """2^31 + 2^22 + 4101 bf16 elements (4.3 GB a tensor, six of them for forward and
    backward): the elements after 2^31 (where an int32 offset wraps negative) are right."""
    n = 2**31 + 2**22 + 4101
    need = 6 * n * 2 + 2 * 2**30
    if torch.cuda.mem_get_info()[0] < need:
        pytest.skip(f"needs {need / 2**30:.0f} GiB of free GPU memory")
    gate = torch.ones(n, device="cuda", dtype=torch.bfloat16)
    up = torch.full((n,), 0.5, device="cuda", dtype=torch.bfloat16)
    dy = torch.full((n,), 2.0, device="cuda", dtype=torch.bfloat16)
    checked = [slice(0, 4096), slice(2**31 - 8192, 2**31 + 8192), slice(n - 8192, n)]
    for i, s in enumerate(checked):  # distinct values where it is checked
        length = s.stop - s.start
        gate[s] = randn((length,), torch.bfloat16, seed=10 + i)
        up[s] = randn((length,), torch.bfloat16, seed=20 + i)
        dy[s] = randn((length,), torch.bfloat16, scale=1.0, seed=30 + i)
    gate.requires_grad_()
    up.requires_grad_()
    y = swiglu(gate, up)
    dgate, dup = torch.autograd.grad(y, (gate, up), dy)
    for s in checked:
        y_ref, dg_ref, du_ref = reference(gate[s], up[s], dy[s])
        assert_close(y[s], y_ref, torch.bfloat16, f"y[{s}]")
        assert_close(dgate[s], dg_ref, torch.bfloat16, f"dgate[{s}]")
        assert_close(dup[s], du_ref, torch.bfloat16, f"dup[{s}]")
    # Between the checked windows: silu(1) * 0.5 and its gradients, the same everywhere.
    mid = slice(2**31 + 8192, 2**31 + 2**20)
    sig = 1 / (1 + torch.exp(torch.tensor(-1.0, dtype=torch.float64)))
    want_y = torch.tensor(float(sig * 0.5), dtype=torch.bfloat16, device="cuda")
    assert (y[mid] == want_y).all()
    want_dg = torch.tensor(float(2.0 * 0.5 * sig * (1 + (1 - sig))), dtype=torch.bfloat16, device="cuda")
    assert (dgate[mid] == want_dg).all()
