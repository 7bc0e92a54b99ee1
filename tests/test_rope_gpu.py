"""RoPE at real sizes, on a GPU (``pytest -m gpu``).

What the CPU suite checks through the interpreter, here on compiled kernels: a Llama-like
shape (B=1, Hq=32, Hk=8, T=4096, D=128) in bf16 and fp32 against float64, q and k as
transposed views of [B, T, H, D] projections (read in place), a tensor on a second GPU,
``torch.compile(fullgraph=True)``, no recompilation across sequence lengths, the launch
cache on misaligned views, ``opcheck``, and offsets past 2^31 elements."""

from __future__ import annotations

import importlib

import pytest
import torch
from test_rope import reference, reference_grads  # the float64 references
from tolerances import assert_close

from kernels._launch import FastKernel
from kernels.rope import apply_rotary_pos_emb, rope_into

rope = importlib.import_module("kernels.rope")  # the module (kernels.rope is the function)

pytestmark = pytest.mark.gpu
DTYPES = [torch.bfloat16, torch.float32]
B, HQ, HK, T, D = 1, 32, 8, 4096, 128


def randn(shape, dtype, seed=0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(shape, device=device, dtype=torch.float32, generator=g).to(dtype)


def hf_tables(seq, width, dtype, device="cuda", base=10000.0):
    """HF's LlamaRotaryEmbedding tables, [T, D] (equal halves)."""
    inv_freq = 1.0 / base ** (torch.arange(0, width, 2, device=device, dtype=torch.float64) / width)
    freqs = torch.arange(seq, device=device, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def inputs(dtype, layout, seq=T, seed=0, device="cuda"):
    """q [B, HQ, seq, D] and k [B, HK, seq, D]: contiguous, or transposed views of [B, seq, H, D]."""
    if layout == "bthd":
        q = randn((B, seq, HQ, D), dtype, seed, device).transpose(1, 2)
        k = randn((B, seq, HK, D), dtype, seed + 1, device).transpose(1, 2)
    else:
        q = randn((B, HQ, seq, D), dtype, seed, device)
        k = randn((B, HK, seq, D), dtype, seed + 1, device)
    return q, k


@pytest.mark.parametrize("tables", ["hf", "random-B,T,D"])
@pytest.mark.parametrize("layout", ["bhtd", "bthd"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_real_size_forward_and_backward_match_float64(dtype, layout, tables) -> None:
    q, k = inputs(dtype, layout)
    q.requires_grad_()
    k.requires_grad_()
    if tables == "hf":
        cos, sin = hf_tables(T, D, dtype)
    else:  # unequal halves: the general rotation
        cos, sin = randn((B, T, D), torch.float32, 7), randn((B, T, D), torch.float32, 8)
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    assert q_out.shape == q.shape and k_out.shape == k.shape and q_out.dtype == dtype
    q_ref, k_ref = reference(q.detach(), k.detach(), cos, sin)
    assert_close(q_out, q_ref, dtype, "q_out")
    assert_close(k_out, k_ref, dtype, "k_out")
    dq_out, dk_out = randn(q.shape, dtype, 3), randn(k.shape, dtype, 4)
    dq, dk = torch.autograd.grad((q_out, k_out), (q, k), (dq_out, dk_out))
    dq_ref, dk_ref = reference_grads(q, k, cos, sin, dq_out, dk_out)
    assert_close(dq, dq_ref, dtype, "dq")
    assert_close(dk, dk_ref, dtype, "dk")


def test_transposed_view_is_read_in_place(monkeypatch) -> None:
    q, k = inputs(torch.bfloat16, "bthd")
    cos, sin = hf_tables(T, D, torch.bfloat16)
    seen = []

    def spy(q_, k_, *args, **kwargs):
        seen.append((q_.data_ptr(), q_.stride(), k_.data_ptr(), k_.stride()))
        return rope_into(q_, k_, *args, **kwargs)

    monkeypatch.setattr(rope, "rope_into", spy)
    apply_rotary_pos_emb(q, k, cos, sin)
    assert seen == [(q.data_ptr(), q.stride(), k.data_ptr(), k.stride())]


def test_tensor_on_a_second_gpu_runs_there() -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU only: run on a machine with two (the nvidia-h200-x2 kind)")
    torch.cuda.set_device(0)
    q, k = inputs(torch.bfloat16, "bthd", seq=512, device="cuda:1")
    q.requires_grad_()
    k.requires_grad_()
    cos, sin = hf_tables(512, D, torch.bfloat16, device="cuda:1")
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    assert q_out.device == q.device and k_out.device == k.device
    q_ref, k_ref = reference(q.detach(), k.detach(), cos, sin)
    assert_close(q_out, q_ref, torch.bfloat16, "q_out")
    assert_close(k_out, k_ref, torch.bfloat16, "k_out")
    dq, dk = torch.autograd.grad((q_out, k_out), (q, k), (q_out.detach(), k_out.detach()))
    assert dq.device == q.device
    dq_ref, dk_ref = reference_grads(q, k, cos, sin, q_out.detach(), k_out.detach())
    assert_close(dq, dq_ref, torch.bfloat16, "dq")
    assert_close(dk, dk_ref, torch.bfloat16, "dk")
    assert torch.cuda.current_device() == 0


def test_torch_compile_fullgraph_matches_eager() -> None:
    cos, sin = hf_tables(T, D, torch.bfloat16)

    def f(q: torch.Tensor, k: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        q_rot, k_rot = apply_rotary_pos_emb(q * 1.5, k, c, s)
        return q_rot.float().square().sum(dim=(0, 1)) + k_rot.float().sum(dim=(0, 1))

    compiled = torch.compile(f, fullgraph=True)
    for seq in (T, 1000):  # the second length: a recompile with a dynamic T, through the fake op
        q, k = inputs(torch.bfloat16, "bthd", seq=seq, seed=seq)
        q.requires_grad_()
        k.requires_grad_()
        c, s = cos[:seq], sin[:seq]
        out_c, out_e = compiled(q, k, c, s), f(q, k, c, s)
        torch.testing.assert_close(out_c, out_e)
        w = torch.randn_like(out_e)
        for a, b in zip(torch.autograd.grad(out_c, (q, k), w), torch.autograd.grad(out_e, (q, k), w), strict=True):
            torch.testing.assert_close(a, b)


def _compiled_count() -> int:
    # Kernels Triton compiled for RoPE (the eager path's cached launches compile through the
    # same JIT cache).
    return sum(len(c[0]) for c in rope._rope_kernel.device_caches.values())


@pytest.mark.parametrize("layout", ["bhtd", "bthd"])
def test_new_sequence_lengths_never_recompile(layout) -> None:
    def step(seq: int) -> None:
        q, k = inputs(torch.bfloat16, layout, seq=seq, seed=seq)
        q.requires_grad_()
        k.requires_grad_()
        cos, sin = hf_tables(seq, D, torch.bfloat16)
        q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
        torch.autograd.grad((q_out, k_out), (q, k), (torch.ones_like(q_out), torch.ones_like(k_out)))
        torch.autograd.grad(apply_rotary_pos_emb(q, k.detach(), cos, sin)[0], q, torch.ones_like(q_out))

    for seq in (5, 7):  # forward, backward of both, backward of q alone: compiled once each
        step(seq)
    before, cached = _compiled_count(), len(rope._ROPE._cache)
    for seq in (1, 2, 3, 16, 17, 129, 1000, 4096, 4097):
        step(seq)
    assert _compiled_count() == before
    assert len(rope._ROPE._cache) == cached


@pytest.mark.parametrize("offset", [0, 1, 3, 8])
def test_cached_launch_on_aligned_and_misaligned_views(offset) -> None:
    """The launch cache keys on pointer alignment: a misaligned view must never reuse a
    kernel compiled for aligned pointers (that would fault or read the wrong elements)."""
    cos, sin = hf_tables(256, D, torch.bfloat16)
    for off in (0, offset, 0, offset):  # the later calls take the cached path
        base = randn((B * HQ * 256 * D + 16,), torch.bfloat16, off)
        q = base[off : off + B * HQ * 256 * D].view(B, HQ, 256, D)
        k = randn((B, HK, 256, D), torch.bfloat16, off + 1)
        q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
        q_ref, k_ref = reference(q, k, cos, sin)
        assert_close(q_out, q_ref, torch.bfloat16, "q_out")
        assert_close(k_out, k_ref, torch.bfloat16, "k_out")


@pytest.mark.parametrize(("q_pad", "k_pad", "t_pad"), [(3, 4, 2), (1, 0, 0), (0, 0, 1)])
def test_strides_not_multiples_of_the_vector(q_pad, k_pad, t_pad) -> None:
    """Rows padded so that strides are not multiples of 8 elements: the divisibility hint
    must shrink (a wrong one loads misaligned vectors: a fault or wrong values)."""
    seq = 1000
    q = randn((B, seq, HQ, D + q_pad), torch.bfloat16, 1)[..., :D].transpose(1, 2).requires_grad_()
    k = randn((B, seq, HK, D + k_pad), torch.bfloat16, 2)[..., :D].transpose(1, 2).requires_grad_()
    cos, sin = (
        t[:, :D] for t in (randn((seq, D + t_pad), torch.bfloat16, 3), randn((seq, D + t_pad), torch.bfloat16, 4))
    )
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    q_ref, k_ref = reference(q.detach(), k.detach(), cos, sin)
    assert_close(q_out, q_ref, torch.bfloat16, "q_out")
    assert_close(k_out, k_ref, torch.bfloat16, "k_out")
    dq_out = randn((B, seq, HQ, D + q_pad), torch.bfloat16, 5)[..., :D].transpose(1, 2)
    dk_out = randn((B, HK, seq, D), torch.bfloat16, 6)
    dq, dk = torch.autograd.grad((q_out, k_out), (q, k), (dq_out, dk_out))
    dq_ref, dk_ref = reference_grads(q, k, cos, sin, dq_out, dk_out)
    assert_close(dq, dq_ref, torch.bfloat16, "dq")
    assert_close(dk, dk_ref, torch.bfloat16, "dk")


def test_registered_ops_opcheck_on_gpu() -> None:
    q, k = inputs(torch.bfloat16, "bthd", seq=300)
    q.requires_grad_()
    k.requires_grad_()
    cos, sin = hf_tables(300, D, torch.float32)
    torch.library.opcheck(rope._rope_op, (q, k, cos, sin))
    dq_out, dk_out = randn(q.shape, torch.bfloat16, 5), randn(k.shape, torch.bfloat16, 6)
    for want_q, want_k in ((True, True), (True, False), (False, True)):
        torch.library.opcheck(rope._rope_backward_op, (dq_out, dk_out, cos, sin, want_q, want_k))


def test_eager_calls_stay_on_the_cached_launch(monkeypatch) -> None:
    """After the first call at a decode shape, eager calls launch through the cached
    launcher, never Triton's own ``kernel[grid]`` path (tens of µs of host time a call).
    Counted, not timed: the host cost itself is the dispatch study's to measure."""
    q, k = inputs(torch.bfloat16, "bthd", seq=1)
    cos, sin = hf_tables(1, D, torch.bfloat16)
    apply_rotary_pos_emb(q, k, cos, sin)
    uncached = []
    real = FastKernel.launch_uncached
    monkeypatch.setattr(FastKernel, "launch_uncached", lambda s, *a, **kw: uncached.append(1) or real(s, *a, **kw))
    for _ in range(50):
        apply_rotary_pos_emb(q, k, cos, sin)
    torch.cuda.synchronize()
    assert uncached == []


def test_offsets_past_two_to_the_31() -> None:
    seq = 2**19 + 1024  # q: 32 * seq * 128 = 2^31 + 2^22 elements: head * T * D passes int32
    n_q, n_k = B * HQ * seq * D, B * HK * seq * D
    need = 2 * 3 * (n_q + n_k) + 2 * 4 * seq * D  # bf16 q, k, outputs, gradients; fp32 tables
    if torch.cuda.mem_get_info()[0] < 1.2 * need:
        pytest.skip(f"needs {need / 2**30:.1f} GiB of free GPU memory")
    q = randn((B, HQ, seq, D), torch.bfloat16, 11).requires_grad_()
    k = randn((B, HK, seq, D), torch.bfloat16, 12).requires_grad_()
    cos, sin = hf_tables(seq, D, torch.float32)
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    dq, dk = torch.autograd.grad((q_out, k_out), (q, k), (q_out.detach(), k_out.detach()))
    for h, t in ((HQ - 1, slice(seq - 3, seq)), (HQ - 1, slice(seq // 2, seq // 2 + 3)), (0, slice(0, 3))):
        qs, ks = q.detach()[:, h : h + 1, t], k.detach()[:, -1:, t]
        q_ref, k_ref = reference(qs, ks, cos[t], sin[t])
        assert_close(q_out[:, h : h + 1, t], q_ref, torch.bfloat16, f"q_out head {h} positions {t}")
        assert_close(k_out[:, -1:, t], k_ref, torch.bfloat16, "k_out")
        dq_ref, dk_ref = reference_grads(
            qs, ks, cos[t], sin[t], q_out.detach()[:, h : h + 1, t], k_out.detach()[:, -1:, t]
        )
        assert_close(dq[:, h : h + 1, t], dq_ref, torch.bfloat16, f"dq head {h} positions {t}")
        assert_close(dk[:, -1:, t], dk_ref, torch.bfloat16, "dk")
