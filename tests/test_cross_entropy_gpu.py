"""The cross-entropy checks at real sizes, on a GPU (``pytest -m gpu``).

What the CPU suite checks through the interpreter, here on compiled kernels at LLM sizes:
8192 x 128256 bf16 (Llama 3's vocabulary) in every plan the planner picks and the forced
ones, the in-place gradient with peak memory no more than the logits plus O(N), 8192 x
262144 (exactly 2^31 elements: rows past the 32-bit offset range), non-finite rows against
torch on the same GPU, torch.compile with Inductor, and a tensor on a second GPU.  References
are float64 ``F.cross_entropy`` and its autograd, computed a slice of rows at a time."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tolerances import TOL

import kernels

pytestmark = pytest.mark.gpu

CE_TOL = {**TOL, torch.float32: {"rel": 1e-5, "atol": 4e-6}}  # as tests/test_cross_entropy.py


def check(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    out, ref = out.detach().double(), ref.detach().double()
    special = ~torch.isfinite(ref)
    assert torch.equal(special, ~torch.isfinite(out)), f"{what}: non-finite values in other places than torch's"
    o, r = out[~special], ref[~special]
    if not o.numel():
        return
    tol = CE_TOL[dtype]
    bound = tol["atol"] * max(1.0, float(r.abs().max()))
    err = float((o - r).abs().max())
    assert err <= bound, f"{what}: max abs error {err:.3g} > {bound:.3g} ({dtype})"
    rel = float(torch.linalg.vector_norm(o - r) / torch.linalg.vector_norm(r).clamp_min(1e-30))
    assert rel <= tol["rel"], f"{what}: relative L2 error {rel:.3g} > {tol['rel']} ({dtype})"


def randn(shape, dtype, scale=4.0, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(shape, device=device, dtype=torch.float32, generator=g) * scale).to(dtype)


def targets(rows, width, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed + 1)
    t = torch.randint(0, width, (rows,), device=device, generator=g)
    t[1::7] = -100
    return t


def reference_rows(x, t, rows, *, label_smoothing=0.0, softcap=None, row_grad=None):
    """(per-row loss, gradient) in float64 for ``rows`` (a slice) of ``x``: the gradient of
    ``sum_i row_grad[i] * loss_i`` (``None``: no gradient)."""
    x64 = x[rows].double().requires_grad_(row_grad is not None)
    z = x64 if softcap is None else softcap * torch.tanh(x64 / softcap)
    loss = F.cross_entropy(z, t[rows], reduction="none", label_smoothing=label_smoothing)
    if row_grad is None:
        return loss.detach(), None
    (g,) = torch.autograd.grad(loss, x64, row_grad[rows].double())
    return loss.detach(), g


def check_slices(x0, t, loss_rows, grad, dtype, row_grad, slices, **kw):
    for rows in slices:
        ref_loss, ref_grad = reference_rows(x0, t, rows, row_grad=row_grad, **kw)
        valid = t[rows] != -100
        if loss_rows is not None:
            check(loss_rows[rows][valid], ref_loss[valid], dtype, f"loss rows {rows}")
        if grad is not None:
            check(grad[rows], ref_grad, dtype, f"grad rows {rows}")


@pytest.mark.parametrize("plan", [None, "looped", "split"])
@pytest.mark.parametrize("inplace", [False, True])
def test_llama3_vocabulary_bf16(plan, inplace) -> None:
    """8192 x 128256 bf16, mean over the rows not ignored, smoothing and no cap; in place the
    peak memory is the logits plus O(N)."""
    n, v, dtype = 8192, 128256, torch.bfloat16
    x0 = randn((n, v), dtype)
    t = targets(n, v)
    logits = x0.clone().requires_grad_()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    loss = kernels.cross_entropy(logits, t, label_smoothing=0.1, inplace_backward=inplace, plan=plan)
    (grad,) = torch.autograd.grad(loss, logits)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    # O(N) beyond the logits: 512 bytes a row, plus the split plan's per-chunk (max, sum)
    # statistics, 8 bytes for each chunk of a row (32 to 64 chunks at this width).
    from kernels.cross_entropy import POLICY
    from kernels.plans import plan_rows

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    chunks = plan_rows(n, v, 2, sms, POLICY, force=plan, pad=7).chunks if plan == "split" else 0
    per_row = 512 + 8 * chunks
    if inplace:
        assert grad.data_ptr() == logits.data_ptr()
        assert extra < per_row * n, f"in place, {extra} bytes beyond the logits"
    else:
        assert extra <= n * v * 2 + per_row * n
    n_valid = int((t != -100).sum())
    ref = torch.stack([reference_rows(x0, t, slice(i, i + 1024), label_smoothing=0.1)[0] for i in range(0, n, 1024)])
    ref_loss = ref.flatten()[t != -100].sum() / n_valid
    check(loss, ref_loss, dtype, "loss")
    row_grad = torch.full((n,), 1.0 / n_valid, device="cuda", dtype=torch.float64)
    check_slices(x0, t, None, grad, dtype, row_grad, [slice(0, 512), slice(n - 512, n)], label_smoothing=0.1)


def test_exactly_2_31_elements_in_place() -> None:
    """8192 x 262144 bf16: the last rows start past 2^31 elements (64-bit row offsets)."""
    n, v, dtype = 8192, 262144, torch.bfloat16
    assert n * v == 2**31
    x0 = randn((n, v), dtype, seed=3)
    t = targets(n, v, seed=3)
    logits = x0.clone().requires_grad_()
    loss = kernels.cross_entropy(logits, t, reduction="none", softcap=30.0, inplace_backward=True)
    g_rows = randn((n,), torch.float32, 1.0, seed=4)
    (grad,) = torch.autograd.grad(loss, logits, g_rows.to(dtype))
    assert grad.data_ptr() == logits.data_ptr()
    slices = [slice(0, 16), slice(4096, 4112), slice(n - 16, n)]
    for rows in slices:
        ref_loss, _ = reference_rows(x0, t, rows, softcap=30.0)
        check(loss[rows].float(), ref_loss, dtype, f"loss rows {rows}")
    check_slices(x0, t, None, grad, dtype, g_rows.to(dtype).double(), slices, softcap=30.0)


SHAPES = [((4096, 32000), None), ((8, 262144), None), ((300, 50257), "split"), ((257, 50257), "looped"),
          ((129, 4097), "block"), ((33, 1531), None)]  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize(("shape", "plan"), SHAPES, ids=str)
def test_shapes_and_plans(shape, plan, dtype) -> None:
    n, v = shape
    x0 = randn(shape, dtype, seed=5)
    t = targets(n, v, seed=5)
    logits = x0.clone().requires_grad_()
    loss = kernels.cross_entropy(logits, t, reduction="none", label_smoothing=0.05, softcap=20.0, plan=plan)
    g_rows = randn((n,), dtype, 1.0, seed=6)
    (grad,) = torch.autograd.grad(loss, logits, g_rows)
    rows = slice(0, min(n, 256))
    ref_loss, ref_grad = reference_rows(x0, t, rows, label_smoothing=0.05, softcap=20.0, row_grad=g_rows.double())
    valid = t[rows] != -100
    check(loss[rows][valid], ref_loss[valid], dtype, "loss")
    check(grad[rows], ref_grad, dtype, "grad")


def test_non_finite_rows_match_torch_on_the_gpu() -> None:
    x = randn((6, 50257), torch.float32, seed=7)
    x[0, 5] = float("nan")
    x[1, 6] = float("inf")
    x[2, 7] = float("-inf")
    x[3, 8] = float("-inf")
    t = torch.tensor([1, 2, 7, 1, -100, 4], device="cuda")
    for eps in (0.0, 0.2):
        xx = x.clone().requires_grad_()
        loss = kernels.cross_entropy(xx, t, reduction="none", label_smoothing=eps)
        loss.sum().backward()
        x64 = x.double().requires_grad_()
        ref = F.cross_entropy(x64, t, reduction="none", label_smoothing=eps)
        ref.sum().backward()
        check(loss, ref, torch.float32, "loss")
        check(xx.grad, x64.grad, torch.float32, "grad")


def test_torch_compile_inductor_fullgraph() -> None:
    x0 = randn((512, 32000), torch.bfloat16, seed=8)
    t = targets(512, 32000, seed=8)

    def f(lg, tt):
        return kernels.cross_entropy(lg, tt, label_smoothing=0.1, softcap=30.0) * 2.0

    out = []
    for fn in (f, torch.compile(f, fullgraph=True)):
        lg = x0.clone().requires_grad_()
        loss = fn(lg, t)
        loss.backward()
        assert loss.dtype == torch.bfloat16 and lg.grad.dtype == torch.bfloat16
        out.append((loss.detach(), lg.grad))
    torch.testing.assert_close(out[1][0], out[0][0])
    torch.testing.assert_close(out[1][1], out[0][1])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs a second GPU")
def test_tensor_on_the_second_gpu() -> None:
    x0 = randn((64, 50257), torch.bfloat16, seed=9, device="cuda:1")
    t = targets(64, 50257, seed=9, device="cuda:1")
    lg = x0.clone().requires_grad_()
    loss = kernels.cross_entropy(lg, t, reduction="none", inplace_backward=True)
    (grad,) = torch.autograd.grad(loss.sum(), lg)
    assert loss.device == x0.device and grad.data_ptr() == lg.data_ptr()
    ones = torch.ones(64, device="cuda:1", dtype=torch.float64)
    ref, ref_grad = reference_rows(x0, t, slice(0, 64), row_grad=ones)
    valid = t != -100
    check(loss[valid], ref[valid], torch.bfloat16, "loss on cuda:1")
    check(grad, ref_grad, torch.bfloat16, "grad on cuda:1")
