"""SwiGLU (``silu(gate) * up``) against float64 references, through the Triton interpreter on
CPU tensors: every dtype, odd sizes and block boundaries, non-finite values, poisoned guard
regions around inputs and outputs, non-contiguous inputs, what autograd saves and how many
launches run, errors, and the registered ops under ``opcheck`` and ``torch.compile``.
Inputs come from generators seeded by the test's parameters (crc32, never ``hash()``)."""

from __future__ import annotations

import importlib
import zlib

import pytest
import torch
import torch.nn.functional as F
from tolerances import assert_close

import kernels._checks
from kernels.swiglu import DEFAULT_BLOCK, swiglu, swiglu_backward_flat, swiglu_flat

# The module (kernels.swiglu the attribute may be the function, once the package exports it).
sw = importlib.import_module("kernels.swiglu")

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
OUT_POISON = 1234.0  # outputs' guards: a finite value no call here computes (a NaN would hide a stray NaN)


def gen(*key: object) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


def randn(shape, dtype, key, scale: float = 3.0) -> torch.Tensor:
    return (torch.randn(shape, generator=gen(key, shape, str(dtype)), dtype=torch.float64) * scale).to(dtype)


def reference(gate: torch.Tensor, up: torch.Tensor, dy: torch.Tensor | None = None):
    """float64 ``F.silu(gate) * up`` from the same (rounded) inputs, and with ``dy`` its
    gradients from float64 autograd."""
    g = gate.detach().double().requires_grad_()
    u = up.detach().double().requires_grad_()
    y = F.silu(g) * u
    if dy is None:
        return y.detach()
    dg, du = torch.autograd.grad(y, (g, u), dy.double())
    return y.detach(), dg, du


# Elementwise bounds for the non-finite test: every value is rounded once from fp32 (fp64),
# so each element is within about half a unit of its dtype's last place, or, among the
# subnormals (silu(-20) = -4e-8 is one in fp16), within the smallest normal number.
ELEMENT_RTOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 2**-10, torch.bfloat16: 2**-7}


def assert_like_float64(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, what: str) -> None:
    """NaN where the float64 reference is NaN, the same infinities, finite values close."""
    out = out.double()
    assert torch.equal(torch.isnan(out), torch.isnan(ref)), f"{what}: NaN positions differ: {out} vs {ref}"
    inf = torch.isinf(ref)
    assert torch.equal(out[inf], ref[inf]), f"{what}: infinities differ: {out[inf]} vs {ref[inf]}"
    fin = torch.isfinite(ref)
    assert torch.isfinite(out[fin]).all(), f"{what}: non-finite where float64 is finite: {out} vs {ref}"
    torch.testing.assert_close(out[fin], ref[fin], rtol=ELEMENT_RTOL[dtype], atol=torch.finfo(dtype).tiny, msg=what)


# ----------------------------------------------------------------------- values


SHAPES = [(1,), (7,), (4097,), (3, 5, 129), (0,), (4, 0, 3), (2 * DEFAULT_BLOCK,), ()]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_forward_and_backward_match_float64(shape, dtype) -> None:
    """Sizes 1, 7, block + 1 (a masked last block), a 3-D shape, empty tensors, exactly two
    whole blocks (no masked block at all) and a 0-d tensor."""
    gate = randn(shape, dtype, "g").requires_grad_()
    up = randn(shape, dtype, "u").requires_grad_()
    y = swiglu(gate, up)
    assert y.shape == gate.shape and y.dtype == dtype and y.is_contiguous()
    dy = randn(shape, dtype, "dy", scale=1.0)
    y_ref, dg_ref, du_ref = reference(gate, up, dy)
    assert_close(y, y_ref, dtype, "y")
    dgate, dup = torch.autograd.grad(y, (gate, up), dy)
    assert dgate.shape == shape and dup.shape == shape and dgate.dtype == dup.dtype == dtype
    assert_close(dgate, dg_ref, dtype, "dgate")
    assert_close(dup, du_ref, dtype, "dup")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_non_finite_and_huge_gates_like_torch_float64(dtype) -> None:
    """±inf, NaN and ±1e4 (where exp(-g) overflows) in gate, inf in up: the same NaNs and
    infinities as ``F.silu(gate) * up`` in float64, and finite wherever that is."""
    inf, nan = float("inf"), float("nan")
    values = [-inf, inf, nan, -1e4, 1e4, -100.0, 100.0, -20.0, 20.0, 0.0, -0.0, 1.0, -1.0, 3.0, -9.0, 0.5]
    gate = torch.tensor(values * 2, dtype=torch.float64).to(dtype)
    up = randn((len(values) * 2,), dtype, "nfu", scale=1.0)
    n = len(values)
    for i in (n + 0, n + 1, n + 3, n + 4, n + 9, n + 11, n + 14):  # up = ±inf against -inf, inf, ±1e4, 0, 1, -9
        up[i] = inf if i % 2 else -inf
    up[n + 2] = nan
    gate.requires_grad_()
    up.requires_grad_()
    y = swiglu(gate, up)
    dy = randn(gate.shape, dtype, "nfdy", scale=1.0)
    y_ref, dg_ref, du_ref = reference(gate, up, dy)
    assert_like_float64(y, y_ref, dtype, "y")
    assert torch.isfinite(y[3:n][torch.isfinite(y_ref[3:n])]).all()
    dgate, dup = torch.autograd.grad(y, (gate, up), dy)
    assert_like_float64(dgate, dg_ref, dtype, "dgate")
    assert_like_float64(dup, du_ref, dtype, "dup")


# ----------------------------------------------------------------------- guards and blocks


def _inputs_in_nan_buffer(tensors: list[torch.Tensor], lead: int) -> list[torch.Tensor]:
    """Each tensor copied into the middle of a NaN-filled buffer (``lead`` elements before it,
    a block's worth after): a kernel that reads past its elements reads a NaN."""
    views = []
    for t in tensors:
        buf = torch.full((lead + t.numel() + 64,), float("nan"), dtype=t.dtype)
        view = buf[lead : lead + t.numel()]
        view.copy_(t)
        views.append(view)
    return views


def _poisoned_out(n: int, dtype: torch.dtype, lead: int) -> tuple[torch.Tensor, torch.Tensor]:
    buf = torch.full((lead + n + 64,), OUT_POISON, dtype=dtype)
    return buf, buf[lead : lead + n]


def _guards_intact(buf: torch.Tensor, n: int, lead: int) -> bool:
    return bool((buf[:lead] == OUT_POISON).all() and (buf[lead + n :] == OUT_POISON).all())


BLOCK_CASES = [(1, 16), (15, 16), (16, 16), (17, 16), (48, 16), (65, 64), (4097, DEFAULT_BLOCK), (2049, 1024)]


@pytest.mark.parametrize("lead", [8, 9], ids=["aligned", "misaligned"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize(("n", "block"), BLOCK_CASES, ids=str)
def test_reads_and_writes_only_its_elements(n, block, dtype, lead) -> None:
    """Inputs inside NaN guards, outputs inside OUT_POISON guards, views that start on a
    16-byte boundary (bf16 lead 8; fp32 lead 8) or off one (lead 9): the whole output is
    written, nothing around it is, and no guard's NaN gets in."""
    gate, up, dy = (randn((n,), dtype, (k, n, block)) for k in ("gg", "gu", "gdy"))
    g, u, d = _inputs_in_nan_buffer([gate, up, dy], lead)
    y_ref, dg_ref, du_ref = reference(gate, up, dy)

    ybuf, y = _poisoned_out(n, dtype, lead)
    swiglu_flat(g, u, y, block)
    assert _guards_intact(ybuf, n, lead), "forward wrote outside its output"
    assert not (y == OUT_POISON).any(), "an output element was never written"
    assert_close(y, y_ref, dtype, "y")

    gbuf, dg = _poisoned_out(n, dtype, lead)
    ubuf, du = _poisoned_out(n, dtype, lead)
    swiglu_backward_flat(d, g, u, dg, du, block)
    assert _guards_intact(gbuf, n, lead) and _guards_intact(ubuf, n, lead), "backward wrote outside its outputs"
    assert not (dg == OUT_POISON).any() and not (du == OUT_POISON).any(), "a gradient element was never written"
    assert_close(dg, dg_ref, dtype, "dgate")
    assert_close(du, du_ref, dtype, "dup")


@pytest.mark.parametrize("which", ["dgate", "dup"])
def test_backward_writes_only_the_wanted_gradient(which) -> None:
    """One gradient wanted: only its store runs; for ``dup`` alone, ``up`` is never read (a
    NaN ``up`` leaves it finite)."""
    n, dtype = 300, torch.float32
    gate, up, dy = (randn((n,), dtype, (k, which)) for k in ("wg", "wu", "wdy"))
    _, dg_ref, du_ref = reference(gate, up, dy)
    out_buf, out = _poisoned_out(n, dtype, 8)
    if which == "dgate":
        swiglu_backward_flat(dy, gate, up, out, None, 64)
        assert_close(out, dg_ref, dtype, "dgate")
    else:
        swiglu_backward_flat(dy, gate, torch.full_like(up, float("nan")), None, out, 64)
        assert_close(out, du_ref, dtype, "dup")
    assert _guards_intact(out_buf, n, 8)


# ----------------------------------------------------------------------- layouts and autograd


def test_non_contiguous_inputs_are_copied_and_match() -> None:
    """A chunk of one fused projection (row stride twice the width), a transpose, a stepped
    slice and an expanded (stride 0) tensor: the same values and gradients as contiguous."""
    dtype = torch.float32
    x = randn((6, 2 * 37), dtype, "chunk").requires_grad_()
    gate, up = x.chunk(2, dim=-1)
    assert not gate.is_contiguous()
    y = swiglu(gate, up)
    dy = randn((6, 37), dtype, "chunkdy", scale=1.0)
    y_ref, dg_ref, du_ref = reference(gate, up, dy)
    assert_close(y, y_ref, dtype, "y")
    (dx,) = torch.autograd.grad(y, x, dy)
    assert_close(dx, torch.cat([dg_ref, du_ref], dim=-1), dtype, "dx")

    t = randn((37, 6), dtype, "t").t()
    s = randn((6, 74), dtype, "s")[:, ::2]
    e = randn((6, 1), dtype, "e").expand(6, 37)
    for a, b in ((t, s), (s, e), (e, t)):
        assert_close(swiglu(a, b), reference(a, b), dtype, "strided")


def test_same_tensor_for_both_inputs() -> None:
    x = randn((129,), torch.float32, "same").requires_grad_()
    y = swiglu(x, x)
    x64 = x.detach().double().requires_grad_()
    y64 = F.silu(x64) * x64
    assert_close(y, y64.detach(), torch.float32)
    dy = randn((129,), torch.float32, "samedy", scale=1.0)
    assert_close(torch.autograd.grad(y, x, dy)[0], torch.autograd.grad(y64, x64, dy.double())[0], torch.float32)


@pytest.mark.parametrize("layout", ["contiguous", "chunk"])
def test_saves_only_the_inputs_and_never_writes_them(layout) -> None:
    """The forward saves gate and up, the caller's tensors themselves (not the activation,
    not a contiguous copy); the backward leaves them unchanged."""
    if layout == "contiguous":
        gate = randn((5, 33), torch.float32, "sg").requires_grad_()
        up = randn((5, 33), torch.float32, "su").requires_grad_()
        leaves = (gate, up)
    else:
        x = randn((5, 66), torch.float32, "sx").requires_grad_()
        gate, up = x.chunk(2, dim=-1)
        leaves = (x,)
    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = swiglu(gate, up)
    assert len(saved) == 2, f"saved {len(saved)} tensors"
    for s, t in zip(saved, (gate, up), strict=True):
        assert s.data_ptr() == t.data_ptr() and s.shape == t.shape and s.stride() == t.stride()
    before = [t.detach().clone() for t in (gate, up)]
    torch.autograd.grad(y, leaves, torch.ones_like(y))
    for b, t in zip(before, (gate, up), strict=True):
        assert torch.equal(b, t.detach()), "the backward wrote into an input"


class _Counter:
    def __init__(self, kernel: object, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[object, ...]] = []
        original = kernel.launch  # type: ignore[attr-defined]

        def launch(key, index, grid, args, consts, num_warps, *rest, **kw):  # type: ignore[no-untyped-def]
            self.calls.append(consts)
            return original(key, index, grid, args, consts, num_warps, *rest, **kw)

        monkeypatch.setattr(kernel, "launch", launch)


@pytest.mark.parametrize("wants", [(True, True), (True, False), (False, True)], ids=str)
def test_one_launch_each_way_and_only_the_needed_gradients(wants, monkeypatch) -> None:
    fwd = _Counter(sw._FORWARD, monkeypatch)
    bwd = _Counter(sw._BACKWARD, monkeypatch)
    gate = randn((3, 100), torch.bfloat16, "lg").requires_grad_(wants[0])
    up = randn((3, 100), torch.bfloat16, "lu").requires_grad_(wants[1])
    y = swiglu(gate, up)
    assert len(fwd.calls) == 1
    inputs = tuple(t for t, w in zip((gate, up), wants, strict=True) if w)
    dy = randn((3, 100), torch.bfloat16, "ldy", scale=1.0)
    grads = torch.autograd.grad(y, inputs, dy)
    assert bwd.calls == [(sw.BACKWARD_BLOCK, *wants)], "one backward launch, storing only the wanted gradients"
    _, dg_ref, du_ref = reference(gate, up, dy)
    for g, ref in zip(grads, [r for r, w in zip((dg_ref, du_ref), wants, strict=True) if w], strict=True):
        assert_close(g, ref, torch.bfloat16, "grad")
    dgate, dup = sw._backward(dy, gate.detach(), up.detach(), *wants)
    assert (dgate is not None) == wants[0] and (dup is not None) == wants[1]


def test_no_grad_needed_runs_only_the_forward(monkeypatch) -> None:
    bwd = _Counter(sw._BACKWARD, monkeypatch)
    gate = randn((40,), torch.float16, "ng").requires_grad_()
    with torch.no_grad():
        y = swiglu(gate, randn((40,), torch.float16, "nu"))
    assert y.grad_fn is None and not bwd.calls


# ----------------------------------------------------------------------- errors


def _t(dtype=torch.float32, shape=(4, 8), device="cpu") -> torch.Tensor:
    return torch.ones(shape, dtype=dtype, device=device)


ERRORS = [
    ("gate not a tensor", lambda: swiglu([1.0], _t()), TypeError, "swiglu: gate must be a torch.Tensor"),
    ("up not a tensor", lambda: swiglu(_t(), 2.0), TypeError, "swiglu: up must be a torch.Tensor"),
    ("integer gate", lambda: swiglu(_t(torch.int32), _t()), TypeError, "swiglu: gate has dtype torch.int32"),
    ("bool up", lambda: swiglu(_t(), _t(torch.bool)), TypeError, "swiglu: up has dtype torch.bool"),
    ("complex gate", lambda: swiglu(_t(torch.complex64), _t()), TypeError, "swiglu: gate has dtype"),
    ("dtypes differ", lambda: swiglu(_t(), _t(torch.bfloat16)), TypeError,
     "swiglu: up has dtype torch.bfloat16; expected gate's torch.float32"),
    ("shapes differ", lambda: swiglu(_t(), _t(shape=(4, 9))), ValueError,
     r"swiglu: up has shape \[4, 9\]; expected gate's \[4, 8\]"),
    ("no broadcasting", lambda: swiglu(_t(), _t(shape=(8,))), ValueError, "swiglu: up has shape"),
    ("devices differ", lambda: swiglu(_t(), _t(device="meta")), ValueError, "swiglu: up is on meta but gate is on cpu"),
    ("bad block", lambda: swiglu_flat(_t(), _t(), _t(), 100), ValueError, "swiglu: block must be a power of two"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "match"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_bad_input_names_the_argument(call, error, match) -> None:
    with pytest.raises(error, match=match):
        call()


def test_cpu_tensors_outside_the_interpreter_are_refused(monkeypatch) -> None:
    monkeypatch.setattr(kernels._checks, "INTERPRETER", False)
    with pytest.raises(ValueError, match="swiglu: gate is on device 'cpu'; expected a CUDA tensor"):
        swiglu(_t(), _t())


# ----------------------------------------------------------------------- registered ops


def test_registered_ops_pass_opcheck_and_meta() -> None:
    for dtype in (torch.float32, torch.bfloat16):
        g = randn((3, 17), dtype, "opg").requires_grad_()
        u = randn((3, 17), dtype, "opu").requires_grad_()
        torch.library.opcheck(sw._swiglu_op, (g, u))
        dy = randn((3, 17), dtype, "opdy")
        for wants in ((True, True), (True, False), (False, True)):
            torch.library.opcheck(sw._swiglu_backward_op, (dy, g.detach(), u.detach(), *wants))
    meta = torch.empty(4, 10, device="meta", dtype=torch.bfloat16)
    y = swiglu(meta, meta)
    assert y.shape == (4, 10) and y.dtype == torch.bfloat16 and y.is_meta


@pytest.mark.filterwarnings("ignore:Your compiler for AOTAutograd is returning a function:UserWarning")
def test_torch_compile_traces_forward_and_backward_ops() -> None:
    """``fullgraph=True`` (no graph break) with ``aot_eager``: the same values and gradients
    as eager, one ``labnotes::swiglu`` node in the forward graph and one
    ``labnotes::swiglu_backward`` node in the backward graph."""
    from torch._dynamo.testing import AotEagerAndRecordGraphs

    def f(x: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        gate = x * 1.5
        return swiglu(gate, up).sum(dim=0)

    backend = AotEagerAndRecordGraphs()
    compiled = torch.compile(f, backend=backend, fullgraph=True)
    x = randn((5, 33), torch.float32, "cx").requires_grad_()
    u = randn((5, 33), torch.float32, "cu").requires_grad_()
    got, want = compiled(x, u), f(x, u)
    torch.testing.assert_close(got, want)
    g = randn((33,), torch.float32, "cg", scale=1.0)
    for a, b in zip(torch.autograd.grad(got, (x, u), g), torch.autograd.grad(want, (x, u), g), strict=True):
        torch.testing.assert_close(a, b)
    fw = "\n".join(gm.code for gm in backend.fw_graphs)
    bw = "\n".join(gm.code for gm in backend.bw_graphs)
    assert fw.count("labnotes.swiglu.default") == 1, fw
    assert bw.count("labnotes.swiglu_backward.default") == 1, bw
    assert "labnotes.swiglu.default" not in bw, "the backward recomputed the forward op"

    # Only up needs a gradient: the compiled backward asks for dup alone.
    x2 = x.detach()
    got2 = compiled(x2, u)
    (du,) = torch.autograd.grad(got2, u, g)
    torch.testing.assert_close(du, torch.autograd.grad(f(x2, u), u, g)[0])


def test_a_second_derivative_is_refused_not_silently_wrong() -> None:
    g, u = (torch.randn(3, 7, generator=torch.Generator().manual_seed(3), requires_grad=True) for _ in range(2))
    with pytest.raises(RuntimeError, match="not twice differentiable"):
        torch.autograd.grad(kernels.swiglu(g, u).sum(), (g, u), create_graph=True)
