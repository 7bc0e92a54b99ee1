"""RoPE (``kernels.rope.apply_rotary_pos_emb``) against Hugging Face's formula in float64,
through the Triton interpreter on CPU tensors.

Inputs come from generators seeded by the test's parameters (``zlib.crc32``, never
``hash()``); references are computed in float64 from the same rounded inputs with HF's
``rotate_half`` formula, and gradients with float64 autograd of it.  Tables are random
(their halves differ, so the general rotation is checked, not only HF's repeated halves)
unless a test says otherwise.  Inputs and outputs also sit inside NaN-poisoned buffers
with gaps in every dimension: a read outside a view shows as NaN in an output, a write
outside one as a changed guard."""

from __future__ import annotations

import importlib
import zlib

import pytest
import torch
from tolerances import TOL, assert_close

import kernels._checks
from kernels.rope import apply_rotary_pos_emb, rope_into

rope = importlib.import_module("kernels.rope")  # the module (kernels.rope is the function)

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
NAN = float("nan")
OUT_POISON = -1024.0  # outputs' guards: finite, exact in every dtype, so a NaN written there shows


def gen(*key: object) -> torch.Generator:
    """A generator seeded from the test's parameters: stable across processes (unlike hash())."""
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


def randn(shape, dtype, key, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(shape, generator=gen(key, tuple(shape), str(dtype)), dtype=torch.float64) * scale).to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Hugging Face's rotate_half."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def hf_apply(q, k, cos, sin):
    """Hugging Face's apply_rotary_pos_emb (unsqueeze_dim=1) for [T, D], [1, T, D] or [B, T, D]
    tables, in whatever dtype its inputs have (float64 for the references)."""
    if cos.dim() == 2:
        cos = cos[None]
    if sin.dim() == 2:
        sin = sin[None]
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def reference(q, k, cos, sin):
    """The float64 forward from the (rounded) inputs."""
    return hf_apply(q.double(), k.double(), cos.double(), sin.double())


def reference_grads(q, k, cos, sin, dq_out, dk_out):
    """(dq, dk): float64 autograd of HF's formula."""
    q64 = q.detach().double().requires_grad_()
    k64 = k.detach().double().requires_grad_()
    outs = hf_apply(q64, k64, cos.double(), sin.double())
    return torch.autograd.grad(outs, (q64, k64), (dq_out.double(), dk_out.double()))


def tables(form: str, batch: int, seq: int, width: int, dtype: torch.dtype, key) -> tuple[torch.Tensor, torch.Tensor]:
    """Random cos/sin tables (unequal halves) of the form "T,D", "1,T,D" or "B,T,D"."""
    shape = {"T,D": (seq, width), "1,T,D": (1, seq, width), "B,T,D": (batch, seq, width)}[form]
    return randn(shape, dtype, (key, "cos")), randn(shape, dtype, (key, "sin"))


def hf_tables(seq: int, width: int, dtype: torch.dtype, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """HF's LlamaRotaryEmbedding tables, [T, D]: both halves equal."""
    inv_freq = 1.0 / base ** (torch.arange(0, width, 2, dtype=torch.float64) / width)
    freqs = torch.arange(seq, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def guarded(shape, dtype, fill: float = NAN, lead: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(buffer, view, inside): a buffer filled with ``fill`` holding a view of ``shape`` with
    a gap of guard elements before and after it in every dimension (``lead`` before the last
    one, so the rows are strided and misaligned), and the boolean mask of the view's cells."""
    pads = [2] * (len(shape) - 1) + [lead + 3]
    buf = torch.full([n + p for n, p in zip(shape, pads, strict=True)], fill, dtype=dtype)
    index = (*(slice(1, 1 + n) for n in shape[:-1]), slice(lead, lead + shape[-1]))
    inside = torch.zeros(buf.shape, dtype=torch.bool)
    inside[index] = True
    return buf, buf[index], inside


def guards_intact(buf: torch.Tensor, inside: torch.Tensor, fill: float) -> bool:
    """Every element outside the view still holds ``fill``."""
    return bool((buf[~inside] == fill).all())


def transposed(batch: int, heads: int, seq: int, width: int, dtype, key) -> torch.Tensor:
    """A [B, H, T, D] transposed view of a contiguous [B, T, H, D] tensor (no copy)."""
    return randn((batch, seq, heads, width), dtype, key).transpose(1, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize(
    ("hq", "hk", "width"), [(3, 1, 6), (4, 2, 8), (5, 3, 2), (8, 4, 1024), (6, 2, 1024), (4, 3, 8)], ids=str
)
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("together", [False, True], ids=["tile-by-tile", "together"])
def test_guard_regions_never_read_or_written(hq, hk, width, dtype, backward, together) -> None:
    """(Unmasked tiles: 4 / 2 heads of 8, and 8 / 4 heads of 1024 in two and one tiles of 4
    heads; masked: a half of 3 or 1, 6 heads of 1024, whose second tile is half empty, and q's
    tiles full but k's not, 4 / 3 heads.  Both launch forms: tile by tile, and q's and k's
    loads together where each is one tile.)
    Inputs and tables as views inside NaN buffers with gaps around every dimension, the
    outputs inside buffers of OUT_POISON: no NaN may reach an output (nothing read outside
    a view) and every output guard must keep its poison (nothing written outside a view).
    The views are [B, T, H, D] buffers transposed to [B, H, T, D], with misaligned rows.  First in the file: under the
    interpreter a write past a fresh tensor's end (a mask bug) corrupts the heap and can
    abort the process in a later test; here it fails cleanly first."""
    batch, seq = 2, 3
    key = (hq, hk, width, str(dtype), backward)
    _q_buf, q_view, _ = guarded((batch, seq, hq, width), dtype, lead=1)
    _k_buf, k_view, _ = guarded((batch, seq, hk, width), dtype, lead=2)
    q_view.copy_(randn(q_view.shape, dtype, (key, "q")))
    k_view.copy_(randn(k_view.shape, dtype, (key, "k")))
    _c_buf, cos, _ = guarded((batch, seq, width), dtype, lead=3)
    _s_buf, sin, _ = guarded((seq, width), dtype, lead=1)
    cos.copy_(randn(cos.shape, dtype, (key, "c")))
    sin.copy_(randn(sin.shape, dtype, (key, "s")))
    q, k = q_view.transpose(1, 2), k_view.transpose(1, 2)
    qo_buf, qo_view, qo_inside = guarded((batch, seq, hq, width), dtype, OUT_POISON, lead=2)
    ko_buf, ko_view, ko_inside = guarded((batch, seq, hk, width), dtype, OUT_POISON, lead=1)
    q_out, k_out = qo_view.transpose(1, 2), ko_view.transpose(1, 2)
    rope_into(q, k, cos, sin, q_out, k_out, backward=backward, together=together)
    assert guards_intact(qo_buf, qo_inside, OUT_POISON) and guards_intact(ko_buf, ko_inside, OUT_POISON)
    assert not torch.isnan(q_out).any() and not torch.isnan(k_out).any()
    if backward:
        want_q, want_k = reference_grads(q, k, cos, sin, q, k)
    else:
        want_q, want_k = reference(q, k, cos, sin)
    assert_close(q_out, want_q, dtype, "q_out")
    assert_close(k_out, want_k, dtype, "k_out")
    # The public functional on the same poisoned inputs (fresh outputs, laid out like the
    # inputs where those are dense, else contiguous).
    q_pub, k_pub = apply_rotary_pos_emb(q, k, cos, sin)
    assert not torch.isnan(q_pub).any() and not torch.isnan(k_pub).any()
    for x, out in ((q, q_pub), (k, k_pub)):
        assert out.stride() == torch.empty_like(x).stride()


# (B, Hq, Hk, T, D, table form): T = 1 and 7, D = 2 and 6 (half 3: not a power of two),
# Hq = 3 / Hk = 1 (GQA, heads not a power of two), B = 2 with per-batch tables.
SHAPES = [
    (1, 1, 1, 1, 2, "T,D"),
    (2, 3, 1, 7, 6, "B,T,D"),
    (2, 4, 2, 5, 8, "1,T,D"),
    (1, 2, 2, 3, 16, "T,D"),
    (2, 5, 3, 2, 10, "B,T,D"),
]


def _shape_id(s) -> str:
    return "B{}-Hq{}-Hk{}-T{}-D{}-{}".format(*s).replace(",", "")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=_shape_id)
def test_forward_and_backward_match_hf_formula_in_float64(shape, dtype) -> None:
    batch, hq, hk, seq, width, form = shape
    key = (shape, str(dtype))
    q = randn((batch, hq, seq, width), dtype, (key, "q")).requires_grad_()
    k = randn((batch, hk, seq, width), dtype, (key, "k")).requires_grad_()
    cos, sin = tables(form, batch, seq, width, dtype, key)
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    assert q_out.shape == q.shape and k_out.shape == k.shape
    assert q_out.dtype == dtype and k_out.dtype == dtype
    q_ref, k_ref = reference(q.detach(), k.detach(), cos, sin)
    assert_close(q_out, q_ref, dtype, "q_out")
    assert_close(k_out, k_ref, dtype, "k_out")
    dq_out, dk_out = randn(q.shape, dtype, (key, "dq")), randn(k.shape, dtype, (key, "dk"))
    dq, dk = torch.autograd.grad((q_out, k_out), (q, k), (dq_out, dk_out))
    dq_ref, dk_ref = reference_grads(q, k, cos, sin, dq_out, dk_out)
    assert dq.dtype == dtype and dk.dtype == dtype
    assert_close(dq, dq_ref, dtype, "dq")
    assert_close(dk, dk_ref, dtype, "dk")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_transposed_bthd_view_is_read_in_place(dtype, monkeypatch) -> None:
    """q and k as [B, H, T, D] views of [B, T, H, D] projections: read through their strides,
    never copied (the kernel sees the view's own pointer and strides)."""
    batch, hq, hk, seq, width = 2, 4, 2, 5, 8
    q = transposed(batch, hq, seq, width, dtype, "tq").requires_grad_()
    k = transposed(batch, hk, seq, width, dtype, "tk").requires_grad_()
    cos, sin = tables("B,T,D", batch, seq, width, torch.float32, "tt")
    seen = []

    def spy(q_, k_, *args, **kwargs):
        seen.append((q_, k_))
        return rope_into(q_, k_, *args, **kwargs)

    monkeypatch.setattr(rope, "rope_into", spy)
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    assert seen[0][0].data_ptr() == q.data_ptr() and seen[0][0].stride() == q.stride()
    assert seen[0][1].data_ptr() == k.data_ptr() and seen[0][1].stride() == k.stride()
    # the results keep the projection's layout (a program writes one contiguous run, as torch's
    # elementwise formula lays its result out)
    assert q_out.stride() == q.stride() and k_out.stride() == k.stride()
    q_ref, k_ref = reference(q.detach(), k.detach(), cos, sin)
    assert_close(q_out, q_ref, dtype, "q_out")
    assert_close(k_out, k_ref, dtype, "k_out")
    # Gradients arriving as transposed views are read in place too.
    dq_out = transposed(batch, hq, seq, width, dtype, "tdq")
    dk_out = transposed(batch, hk, seq, width, dtype, "tdk")
    dq, dk = torch.autograd.grad((q_out, k_out), (q, k), (dq_out, dk_out))
    assert seen[1][0].data_ptr() == dq_out.data_ptr() and seen[1][0].stride() == dq_out.stride()
    dq_ref, dk_ref = reference_grads(q, k, cos, sin, dq_out, dk_out)
    assert_close(dq, dq_ref, dtype, "dq")
    assert_close(dk, dk_ref, dtype, "dk")


@pytest.mark.parametrize("form", ["T,D", "1,T,D", "B,T,D"])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "last-dim-strided"])
def test_table_forms_layouts_and_dtypes(form, layout) -> None:
    """Every table form, tables viewed inside bigger tensors (strided rows) or with a last
    dimension whose stride is not 1 (copied), and tables of another dtype than q's."""
    batch, hq, hk, seq, width = 3, 2, 1, 4, 6
    q = randn((batch, hq, seq, width), torch.bfloat16, (form, "q"))
    k = randn((batch, hk, seq, width), torch.bfloat16, (form, "k"))
    cos, sin = tables(form, batch, seq, width, torch.float32, form)
    if layout == "strided":
        cos = torch.cat((cos, torch.full_like(cos, NAN)), dim=-1)[..., :width]
        sin = torch.cat((torch.full_like(sin, NAN), sin), dim=-1)[..., width:]
    elif layout == "last-dim-strided":
        cos = cos.transpose(-1, -2).contiguous().transpose(-1, -2)
        sin = sin.transpose(-1, -2).contiguous().transpose(-1, -2)
        assert cos.stride(-1) != 1
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin.half())
    q_ref, k_ref = reference(q, k, cos, sin.half())
    assert_close(q_out, q_ref, torch.bfloat16, "q_out")
    assert_close(k_out, k_ref, torch.bfloat16, "k_out")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_backward_is_the_forward_with_sin_negated_on_hf_tables(dtype) -> None:
    """With HF's tables (equal halves) the backward, through the same kernel, is the forward
    with sin negated: the same bits.  And the forward matches HF's formula there."""
    batch, hq, hk, seq, width = 1, 3, 1, 7, 8
    cos, sin = hf_tables(seq, width, dtype)
    q = randn((batch, hq, seq, width), dtype, "hq").requires_grad_()
    k = randn((batch, hk, seq, width), dtype, "hk").requires_grad_()
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    q_ref, k_ref = reference(q.detach(), k.detach(), cos, sin)
    assert_close(q_out, q_ref, dtype, "q_out")
    assert_close(k_out, k_ref, dtype, "k_out")
    dq_out, dk_out = randn(q.shape, dtype, "hdq"), randn(k.shape, dtype, "hdk")
    dq, dk = torch.autograd.grad((q_out, k_out), (q, k), (dq_out, dk_out))
    fq, fk = apply_rotary_pos_emb(dq_out, dk_out, cos, -sin)
    assert torch.equal(dq, fq) and torch.equal(dk, fk)


@pytest.mark.parametrize("which", ["q", "k"])
def test_gradient_only_where_wanted(which, monkeypatch) -> None:
    """The backward computes only the gradient asked for: the other tensor is not passed to
    the kernel (its head count is 0); an output without a gradient counts as zero."""
    batch, hq, hk, seq, width = 2, 3, 1, 5, 6
    q = randn((batch, hq, seq, width), torch.float32, "wq").requires_grad_(which == "q")
    k = randn((batch, hk, seq, width), torch.float32, "wk").requires_grad_(which == "k")
    cos, sin = tables("B,T,D", batch, seq, width, torch.float32, "w")
    seen = []

    def spy(q_, k_, *args, **kwargs):
        seen.append((q_ is None, k_ is None))
        return rope_into(q_, k_, *args, **kwargs)

    monkeypatch.setattr(rope, "rope_into", spy)
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    dq_out, dk_out = randn(q.shape, torch.float32, "wdq"), randn(k.shape, torch.float32, "wdk")
    x = q if which == "q" else k
    (dx,) = torch.autograd.grad((q_out, k_out), (x,), (dq_out, dk_out))
    assert seen[1] == ((False, True) if which == "q" else (True, False))
    dq_ref, dk_ref = reference_grads(q, k, cos, sin, dq_out, dk_out)
    assert_close(dx, dq_ref if which == "q" else dk_ref, torch.float32, f"d{which}")
    # Only one output in the loss: the other's gradient is zero.
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    (dx,) = torch.autograd.grad((q_out if which == "k" else k_out).sum(), (x,))
    assert torch.equal(dx, torch.zeros_like(dx))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_non_finite_values_propagate_as_in_the_formula(dtype) -> None:
    """inf and NaN in q and k give NaN and inf where HF's formula does (inf * 0 = NaN; inf -
    inf = NaN): the same positions and signs as the float64 reference."""
    batch, hq, hk, seq, width = 1, 3, 2, 4, 8
    q = randn((batch, hq, seq, width), dtype, "nq")
    k = randn((batch, hk, seq, width), dtype, "nk")
    cos, sin = tables("T,D", batch, seq, width, dtype, "n")
    q[0, 0, 0, 1] = float("inf")  # its partner's sin is nonzero: inf in out1 and out2
    q[0, 1, 1, 5] = -float("inf")
    q[0, 2, 2, 0] = NAN
    q[0, 1, 3, 2], q[0, 1, 3, 6] = float("inf"), float("inf")  # inf - inf: NaN
    k[0, 0, 2, 3] = float("inf")
    cos[2, 3] = 0.0  # inf * 0 = NaN at k[0, 0, 2, 3]'s own position
    k[0, 1, 0, 7] = NAN
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    q_ref, k_ref = reference(q, k, cos, sin)
    for out, ref in ((q_out, q_ref), (k_out, k_ref)):
        out = out.double()
        assert torch.equal(torch.isnan(out), torch.isnan(ref))
        assert torch.equal(torch.isposinf(out), torch.isposinf(ref))
        assert torch.equal(torch.isneginf(out), torch.isneginf(ref))
        assert torch.isnan(ref).any() and torch.isinf(ref).any()
        fin = torch.isfinite(ref)
        assert_close(out[fin], ref[fin], dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_large_values(dtype) -> None:
    """Magnitudes near 1e4 (fp16 tops out at 65504): no overflow in the products."""
    batch, hq, hk, seq, width = 2, 2, 1, 3, 8
    q = randn((batch, hq, seq, width), dtype, "lq", scale=1e4)
    k = randn((batch, hk, seq, width), dtype, "lk", scale=1e4)
    cos, sin = hf_tables(seq, width, dtype, base=3.0)  # fast-turning: large rotations at T = 2
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    q_ref, k_ref = reference(q, k, cos, sin)
    assert_close(q_out, q_ref, dtype, "q_out")
    assert_close(k_out, k_ref, dtype, "k_out")


def test_empty_sizes_launch_nothing() -> None:
    for batch, hq, hk, seq in ((0, 2, 1, 3), (2, 2, 1, 0), (1, 2, 0, 3), (1, 0, 2, 3)):
        q = randn((batch, hq, seq, 4), torch.float32, "eq")
        k = randn((batch, hk, seq, 4), torch.float32, "ek")
        cos, sin = tables("T,D", batch, seq, 4, torch.float32, "e")
        q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
        assert q_out.shape == q.shape and k_out.shape == k.shape
        q_ref, k_ref = reference(q, k, cos, sin)
        assert_close(q_out, q_ref, torch.float32)
        assert_close(k_out, k_ref, torch.float32)


def _args(batch=2, hq=2, hk=1, seq=3, width=4, **over):
    args = {
        "q": torch.zeros(batch, hq, seq, width),
        "k": torch.zeros(batch, hk, seq, width),
        "cos": torch.zeros(seq, width),
        "sin": torch.zeros(seq, width),
    }
    args.update(over)
    return args


ERRORS = [
    (
        "odd-D",
        _args(width=5, cos=torch.zeros(3, 5), sin=torch.zeros(3, 5)),
        ValueError,
        r"q and k have an odd head dimension D = 5",
    ),
    ("q-3d", _args(q=torch.zeros(2, 3, 4)), ValueError, r"q must be 4-D"),
    ("k-3d", _args(k=torch.zeros(2, 3, 4)), ValueError, r"k must be 4-D"),
    ("k-batch", _args(k=torch.zeros(3, 1, 3, 4)), ValueError, r"k has batch 3 but q has 2"),
    ("k-seq", _args(k=torch.zeros(2, 1, 5, 4)), ValueError, r"k has sequence length 5 but q has 3"),
    ("k-width", _args(k=torch.zeros(2, 1, 3, 6)), ValueError, r"k has head dimension 6 but q has 4"),
    ("cos-width", _args(cos=torch.zeros(3, 6)), ValueError, r"cos has shape \[3, 6\]"),
    ("cos-seq", _args(cos=torch.zeros(1, 4, 4)), ValueError, r"cos has shape \[1, 4, 4\]"),
    ("cos-batch", _args(cos=torch.zeros(3, 3, 4)), ValueError, r"cos has shape \[3, 3, 4\]"),
    ("cos-4d", _args(cos=torch.zeros(2, 1, 3, 4)), ValueError, r"cos has shape"),
    ("sin-shape", _args(sin=torch.zeros(4)), ValueError, r"sin has shape \[4\]"),
    ("q-int", _args(q=torch.ones(2, 2, 3, 4, dtype=torch.int32)), TypeError, r"q has dtype torch.int32"),
    ("k-int", _args(k=torch.ones(2, 1, 3, 4, dtype=torch.int64)), TypeError, r"k has dtype torch.int64"),
    ("k-dtype", _args(k=torch.zeros(2, 1, 3, 4, dtype=torch.float64)), TypeError, r"k has dtype .* q's torch.float32"),
    ("cos-int", _args(cos=torch.ones(3, 4, dtype=torch.int32)), TypeError, r"cos has dtype torch.int32"),
    ("sin-complex", _args(sin=torch.ones(3, 4, dtype=torch.complex64)), TypeError, r"sin has dtype"),
    ("q-list", _args(q=[[1.0]]), TypeError, r"q must be a torch.Tensor"),
    ("sin-none", _args(sin=None), TypeError, r"sin must be a torch.Tensor"),
    ("k-device", _args(k=torch.zeros(2, 1, 3, 4, device="meta")), ValueError, r"k is on meta but q is on cpu"),
    ("cos-device", _args(cos=torch.zeros(3, 4, device="meta")), ValueError, r"cos is on meta but q is on cpu"),
]


@pytest.mark.parametrize(("args", "error", "match"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_name_the_argument(args, error, match) -> None:
    with pytest.raises(error, match=rf"^apply_rotary_pos_emb: {match}"):
        apply_rotary_pos_emb(**args)


def _to_meta(x):
    return x.to("meta") if isinstance(x, torch.Tensor) else x


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [e[1:] for e in ERRORS if "device" not in e[0]],
    ids=[e[0] for e in ERRORS if "device" not in e[0]],
)
def test_fast_check_refuses_what_the_checks_refuse(args, error, match) -> None:
    """GPU and meta tensors first meet a fast combined check (CPU tensors skip it): it must
    pass nothing the argument-by-argument checks refuse (the same errors on meta tensors)."""
    meta = {name: _to_meta(x) for name, x in args.items()}
    assert not rope._plainly_valid(**meta)
    with pytest.raises(error, match=rf"^apply_rotary_pos_emb: {match}"):
        apply_rotary_pos_emb(**meta)


def test_fast_check_passes_valid_calls() -> None:
    for cos_shape in ((3, 4), (1, 3, 4), (2, 3, 4)):
        meta = {name: _to_meta(x) for name, x in _args(cos=torch.zeros(cos_shape), sin=torch.zeros(3, 4)).items()}
        assert rope._plainly_valid(**meta)
    assert not rope._plainly_valid(**_args())  # CPU tensors: the checks, one by one


def test_cpu_tensors_refused_outside_the_interpreter(monkeypatch) -> None:
    monkeypatch.setattr(kernels._checks, "INTERPRETER", False)
    with pytest.raises(ValueError, match=r"apply_rotary_pos_emb: q is on device 'cpu'; expected a CUDA tensor"):
        apply_rotary_pos_emb(**_args())


def test_meta_tensors_take_the_fake_path() -> None:
    q = torch.empty(2, 4096, 32, 128, device="meta", dtype=torch.bfloat16).transpose(1, 2)
    k = torch.empty(2, 8, 4096, 128, device="meta", dtype=torch.bfloat16)
    cos = torch.empty(2, 4096, 128, device="meta", dtype=torch.float32)
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, cos)
    assert q_out.shape == q.shape and k_out.shape == k.shape and q_out.dtype == torch.bfloat16


def test_registered_ops_pass_opcheck() -> None:
    batch, hq, hk, seq, width = 2, 3, 1, 4, 6
    q = transposed(batch, hq, seq, width, torch.float32, "oq").requires_grad_()
    k = randn((batch, hk, seq, width), torch.float32, "ok").requires_grad_()
    cos, sin = tables("B,T,D", batch, seq, width, torch.float32, "o")
    torch.library.opcheck(rope._rope_op, (q, k, cos, sin))
    torch.library.opcheck(rope._rope_op, (q.detach().bfloat16(), k.detach().bfloat16(), cos[:1], sin[0]))
    dq_out, dk_out = randn(q.shape, torch.float32, "odq"), randn(k.shape, torch.float32, "odk")
    for want_q, want_k in ((True, True), (True, False), (False, True)):
        torch.library.opcheck(rope._rope_backward_op, (dq_out, dk_out, cos, sin, want_q, want_k))


def test_torch_compile_fullgraph_forward_and_backward_match_eager() -> None:
    batch, hq, hk, seq, width = 2, 4, 2, 5, 8
    cos, sin = tables("B,T,D", batch, seq, width, torch.float32, "c")

    def f(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        q_rot, k_rot = apply_rotary_pos_emb(q * 1.5, k, cos, sin)
        return (q_rot * q_rot).sum() + (k_rot * torch.arange(width)).sum()

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    q = transposed(batch, hq, seq, width, torch.float32, "cq").requires_grad_()
    k = randn((batch, hk, seq, width), torch.float32, "ck").requires_grad_()
    got, want = compiled(q, k), f(q, k)
    torch.testing.assert_close(got, want)
    for a, b in zip(torch.autograd.grad(got, (q, k)), torch.autograd.grad(want, (q, k)), strict=True):
        torch.testing.assert_close(a, b)
    # Against float64 too (the compiled graph runs the same kernels).
    q64, k64 = q.detach().double().requires_grad_(), k.detach().double().requires_grad_()
    q_rot, k_rot = hf_apply(q64 * 1.5, k64, cos.double(), sin.double())
    loss = (q_rot * q_rot).sum() + (k_rot * torch.arange(width)).sum()
    ref = torch.autograd.grad(loss, (q64, k64))
    tol = TOL[torch.float32]
    for a, b in zip(torch.autograd.grad(compiled(q, k), (q, k)), ref, strict=True):
        torch.testing.assert_close(a.double(), b, rtol=tol["rel"] * 10, atol=tol["atol"] * 10 * float(b.abs().max()))


# Compiles the kernel for sm_90 in a fresh process (the interpreter, which this file's other
# tests use, compiles nothing) and counts PTX global loads and stores by width.
CODEGEN_PROBE = r"""
import importlib, json, os, re, sys
from collections import Counter
os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, sys.argv[1])
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
rope = importlib.import_module("kernels.rope")  # the module (kernels.rope is the function)
INTS = ("T HQ HK q_sb q_sh q_st k_sb k_sh k_st qo_sb qo_sh qo_st ko_sb ko_sh ko_st c_sb c_st s_sb s_st").split()
PTRS = ("q_ptr", "k_ptr", "cos_ptr", "sin_ptr", "qo_ptr", "ko_ptr")
CASES = (("bf16", 8, False, True), ("bf16", 8, True, True), ("fp32", 4, False, True), ("bf16", 1, False, True),
         ("bf16", 8, False, False), ("bf16", 1, False, False))
for dt, vec, bwd, even in CASES:  # a Llama head: D = 128, Hq = 32, Hk = 8; masked tiles (even False) too
    consts = {"HALF": 64, "BLOCK_HQ": 32, "BLOCK_HK": 8, "BLOCK_D": 64, "VEC": vec, "BACKWARD": bwd, "ACC": tl.float32,
              "EVEN": even, "ONE_TILE": not bwd}
    sig = {**{p: "*" + dt for p in PTRS}, **{n: "i64" for n in INTS}, **{k: "constexpr" for k in consts}}
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(len(PTRS))}
    src = ASTSource(fn=rope._rope_kernel, signature=sig, constexprs=consts, attrs=attrs)
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8}).asm["ptx"]
    ops = Counter(re.findall(r"\b((?:ld|st)\.global[\w.:]*)", ptx))
    print(json.dumps({"dtype": dt, "vec": vec, "backward": bwd, "even": even, "ops": ops}))
"""


def test_compiled_kernel_moves_q_and_k_in_wide_vectors() -> None:
    """On sm_90 PTX (compiled here, no GPU needed): with the strides' divisibility hint the
    [32, 64] q tiles of a D = 128 head load and store as 16-byte vectors and nothing goes
    element by element; without the hint (VEC = 1, strides not multiples of 8) every bf16
    element is its own 2-byte access; both with unmasked tiles and with masked ones.  Also
    proves the kernel compiles, which the interpreter never checks."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run([sys.executable, "-c", CODEGEN_PROBE, root], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(reports) == 6
    for r in reports:
        ops = r["ops"]
        wide = sum(n for op, n in ops.items() if ".v4." in op)
        narrow = sum(n for op, n in ops.items() if op.endswith(".b16"))
        if r["vec"] > 1:
            assert wide >= 4 and narrow == 0, r  # x1, x2 loads and out1, out2 stores of q at least
            assert sum(n for op, n in ops.items() if op.startswith("st.") and ".v4." in op) >= 2, r
        else:
            assert wide == 0 and narrow > 0, r


def test_torch_compile_dynamic_sequence_length() -> None:
    """A graph compiled with a symbolic sequence length (the checks and the fake op see
    SymInts) serves several lengths."""
    batch, hq, hk, width = 1, 3, 1, 6

    def f(q, k, cos, sin):
        q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
        return q_rot.sum() + (k_rot * k_rot).sum()

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True, dynamic=True)
    for seq in (3, 5, 8):
        q = transposed(batch, hq, seq, width, torch.float32, ("dq", seq)).requires_grad_()
        k = randn((batch, hk, seq, width), torch.float32, ("dk", seq)).requires_grad_()
        cos, sin = tables("1,T,D", batch, seq, width, torch.float32, ("d", seq))
        got, want = compiled(q, k, cos, sin), f(q, k, cos, sin)
        torch.testing.assert_close(got, want)
        for a, b in zip(torch.autograd.grad(got, (q, k)), torch.autograd.grad(want, (q, k)), strict=True):
            torch.testing.assert_close(a, b)


@pytest.mark.parametrize(
    ("pad", "table_dtype", "want"),
    [(0, torch.bfloat16, 8), (4, torch.bfloat16, 4), (3, torch.bfloat16, 1), (0, torch.float32, 8), (2, None, 2)],
)
def test_vector_hint_divides_every_stride(pad, table_dtype, want, monkeypatch) -> None:
    """VEC, the divisibility promised to the compiler for every row base, is the largest
    power of two (up to 16 bytes of the narrowest dtype) dividing every stride in use: a
    larger one would make the compiled kernel load misaligned vectors (the interpreter
    ignores the hint, so this checks the number itself).  ``pad`` widens q's rows; a table
    dtype of None gives [T, D + 2] tables viewed to [T, D].  The hint counts elements: fp32
    tables with rows of 16 divide by 8 as well as bf16 ones do."""
    batch, hq, hk, seq, width = 2, 2, 1, 3, 16
    q = randn((batch, seq, hq, width + pad), torch.bfloat16, ("vq", pad))[..., :width].transpose(1, 2)
    k = randn((batch, hk, seq, width), torch.bfloat16, ("vk", pad))
    if table_dtype is None:
        cos, sin = (randn((seq, width + 2), torch.bfloat16, ("vt", i))[:, :width] for i in range(2))
    else:
        cos, sin = tables("T,D", batch, seq, width, table_dtype, ("vt", pad))
    seen = []
    real = rope._ROPE.launch

    def spy(key, index, grid, args, consts, *rest):
        seen.append(dict(zip(rope._ROPE.const_names, consts, strict=True)))
        return real(key, index, grid, args, consts, *rest)

    monkeypatch.setattr(rope._ROPE, "launch", spy)
    q_out, k_out = apply_rotary_pos_emb(q, k, cos, sin)
    assert seen[0]["VEC"] == want
    q_ref, k_ref = reference(q, k, cos, sin)
    assert_close(q_out, q_ref, torch.bfloat16)
    assert_close(k_out, k_ref, torch.bfloat16)


def test_a_second_derivative_is_refused_not_silently_wrong() -> None:
    gen = torch.Generator().manual_seed(3)
    q = torch.randn(1, 2, 3, 4, generator=gen, requires_grad=True)
    k = torch.randn(1, 1, 3, 4, generator=gen, requires_grad=True)
    cos, sin = torch.randn(3, 4, generator=gen), torch.randn(3, 4, generator=gen)
    with pytest.raises(RuntimeError, match="not twice differentiable"):
        torch.autograd.grad(kernels.rope(q, k, cos, sin)[0].sum(), q, create_graph=True)
