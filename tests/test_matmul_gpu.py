"""The GEMM checks at real sizes, on a GPU (``pytest -m gpu``).

Everything the CPU suite checks through the interpreter, here on compiled kernels: every
variant at the study's shapes (powers of two, model shapes that are not, decode shapes),
transposed operands read in place through TMA, every epilogue and the training step against
float64, TF32 against IEEE, no recompilation across M values of one bucket, torch.compile
(fullgraph, Inductor) against eager, the Hopper evidence a compiled kernel carries, offsets
past 2^31, a tensor on a second GPU and the eager call's host cost."""

from __future__ import annotations

import importlib

import pytest
import torch
import torch.nn.functional as F
from tolerances import TOL, assert_close

from kernels._launch import FastKernel
from kernels.matmul import (
    PERSISTENT_CONFIG,
    VARIANTS,
    TileConfig,
    compiled_kernels,
    default_variant,
    m_bucket,
    matmul,
)

pytestmark = pytest.mark.gpu
mm_module = importlib.import_module("kernels.matmul")
DTYPES = [torch.bfloat16, torch.float16]


def randn(shape, dtype, seed=0, scale=1.0, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(shape, device=device, dtype=torch.float32, generator=g) * scale).to(dtype)


def reference(a, b, epilogue=None, bias=None, residual=None) -> torch.Tensor:
    z = a.double() @ b.double()
    if epilogue in ("bias", "bias_gelu"):
        z = z + bias.double()
    if epilogue == "bias_gelu":
        z = F.gelu(z, approximate="tanh")
    if epilogue == "residual":
        z = z + residual.double()
    return z


def compiles(fn) -> int:
    """Compiled kernels a JIT function holds, over every device."""
    return sum(len(caches[0]) for caches in fn.device_caches.values())


def is_hopper() -> bool:
    return torch.cuda.get_device_capability()[0] == 9


# (M, N, K): the study's shapes, from odd to 8192³, model shapes and decode shapes.
SHAPES = [
    (127, 255, 65),
    (512, 512, 512),
    (1024, 1024, 1024),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (16384, 1024, 1024),
    (4096, 14336, 4096),
    (8192, 5120, 13824),
    (1, 4096, 14336),
    (16, 14336, 4096),
    (128, 4096, 14336),
]


# Compiles dominate this file's time (tests-new in bench/gpu_session.sh gives it and two other
# files 300 s): the pointer and TMA kernels compile once per layout and dtype, but the
# autotuned one once per config for every (M bucket, N, K).  So every test here tunes over
# two configs, except the one that tunes over all of them, and the autotuned variant runs on
# a few of the shapes; fp16 repeats bf16 at the shapes with targets.
TWO_CONFIGS = {(128, 128, 64, 4, 4), (32, 64, 128, 4, 4)}  # (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps)
TUNED_SHAPES = {(127, 255, 65), (4096, 4096, 4096), (16, 14336, 4096), (8192, 5120, 13824)}
CASES = [
    (dtype, shape, variant)
    for shape in SHAPES
    for dtype in DTYPES
    for variant in [*VARIANTS, None]
    if (dtype == torch.bfloat16 or shape in {(127, 255, 65), (4096, 4096, 4096), (8192, 8192, 8192)})
    and (variant != "autotuned" or (shape in TUNED_SHAPES and dtype == torch.bfloat16))
]


@pytest.fixture(autouse=True)
def two_tuned_configs(request, monkeypatch) -> None:
    if request.node.name.startswith("test_full_autotune"):
        return
    tuner = mm_module._mm_tuned_kernel
    keep = [c for c in tuner.configs if (*(c.kwargs[b] for b in ("BLOCK_M", "BLOCK_N", "BLOCK_K")),
                                           c.num_stages, c.num_warps) in TWO_CONFIGS]  # fmt: skip
    assert len(keep) == 2
    monkeypatch.setattr(tuner, "configs", keep)
    monkeypatch.setattr(tuner, "cache", {})


def test_full_autotune_at_4096_cubed() -> None:
    """Every config of the autotuner compiles (or is refused for its resources) and the pick
    is correct, at the shape with a target."""
    a = randn((4096, 4096), torch.bfloat16, 90)
    b = randn((4096, 4096), torch.bfloat16, 91)
    assert_close(matmul(a, b, variant="autotuned"), reference(a, b), torch.bfloat16)
    assert mm_module._mm_tuned_kernel.best_config is not None


@pytest.mark.parametrize(("dtype", "shape", "variant"), CASES, ids=str)
def test_real_sizes_every_variant(dtype, shape, variant) -> None:
    m, n, k = shape
    a = randn((m, k), dtype, 1)
    b = randn((k, n), dtype, 2)
    c = matmul(a, b, variant=variant)
    assert c.shape == (m, n) and c.dtype == dtype
    assert_close(c, reference(a, b), dtype, f"{variant} {shape}")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("which", ["a.T", "b.T", "both"])
def test_transposed_operands_at_real_size(which, variant) -> None:
    m, n, k = 2048, 4096, 1024
    a = randn((k, m), torch.bfloat16, 3).T if which in ("a.T", "both") else randn((m, k), torch.bfloat16, 3)
    b = randn((n, k), torch.bfloat16, 4).T if which in ("b.T", "both") else randn((k, n), torch.bfloat16, 4)
    assert_close(matmul(a, b, variant=variant), reference(a, b), torch.bfloat16, f"{which} {variant}")


STEP_CASES = [
    *[(e, v) for e in ("bias", "bias_gelu", "residual") for v in ("fixed", "persistent", "warp_specialized")],
    ("bias_gelu", "split_k"),
    ("bias_gelu", "autotuned"),
]


@pytest.mark.parametrize(("epilogue", "variant"), STEP_CASES)
def test_epilogues_and_training_step_at_real_size(epilogue, variant) -> None:
    m, n, k = (64, 4096, 8192) if variant == "split_k" else (2048, 3072, 1024)
    dtype = torch.bfloat16
    a = randn((m, k), dtype, 5).requires_grad_()
    w = randn((n, k), dtype, 6, scale=0.05).requires_grad_()  # nn.Linear's weight: b = w.T
    extra = {"bias": randn((n,), dtype, 7).requires_grad_()} if epilogue != "residual" else {}
    if epilogue == "residual":
        extra = {"residual": randn((m, n), dtype, 8).requires_grad_()}
    c = matmul(a, w.T, variant=variant, epilogue=epilogue, **extra)
    assert_close(c, reference(a.detach(), w.detach().T, epilogue, **{k: v.detach() for k, v in extra.items()}),
                 dtype, "out")  # fmt: skip
    g = randn((m, n), dtype, 9)
    have = torch.autograd.grad(c, [a, w, *extra.values()], g)
    leaves = [t.detach().double().requires_grad_() for t in (a, w, *extra.values())]
    ref = reference(leaves[0], leaves[1].T, epilogue, **dict(zip(extra, leaves[2:], strict=True)))
    want = torch.autograd.grad(ref, leaves, g.double())
    for name, h, wnt in zip(["da", "dw", *extra], have, want, strict=True):
        tol = TOL[dtype]
        err = torch.linalg.vector_norm(h.double() - wnt) / torch.linalg.vector_norm(wnt)
        assert err <= 2 * tol["rel"], f"{name}: relative error {err:.3g}"


@pytest.mark.parametrize("variant", VARIANTS)
def test_fp32_tf32_and_ieee(variant) -> None:
    m, n, k = (32, 4096, 8192) if variant == "split_k" else (1024, 1024, 2048)
    a = randn((m, k), torch.float32, 10)
    b = randn((k, n), torch.float32, 11)
    ref = reference(a, b)
    ieee = matmul(a, b, variant=variant, precision="ieee").double()
    # IEEE fp32 sums of K products round at every step: at K = 2048 the largest element error
    # is a few 1e-6 of the largest output, above the elementwise fp32 tolerance.  The bound is
    # cuBLAS's own IEEE fp32 error on the same operands (a few times it), and the relative L2
    # error stays within the fp32 table's.
    allow = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        cublas = (a @ b).double()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allow
    err, err_cublas = float((ieee - ref).abs().max()), float((cublas - ref).abs().max())
    assert err <= 4 * err_cublas, f"ieee: max abs error {err:.3g}, cuBLAS's IEEE fp32 {err_cublas:.3g}"
    rel_ieee = float(torch.linalg.vector_norm(ieee - ref) / torch.linalg.vector_norm(ref))
    assert rel_ieee <= 1e-5, f"ieee relative error {rel_ieee:.3g}"
    tf32 = matmul(a, b, variant=variant, precision="tf32").double()
    rel = float(torch.linalg.vector_norm(tf32 - ref) / torch.linalg.vector_norm(ref))
    assert rel <= 2e-3, f"tf32 relative error {rel:.3g}"
    assert rel > 1e-6, "precision='tf32' must use TF32 (its error is far above IEEE's)"


@pytest.mark.parametrize("layout", ["a b", "a bT", "aT bT", "aT b"])
def test_tf32_persistent_layouts_at_real_size(layout) -> None:
    """TF32 through TMA in every operand layout: row-major operands run the transposed product
    with bᵀ in registers, a MN-major a with a K-major b reads a into registers (REG_OPERAND,
    kernels/matmul.py); edges in M, N and K, and TF32's error (above IEEE's, within 2e-3)."""
    m, n, k = 1000, 1032, 1028  # no dimension a multiple of the tile; every row 16-byte aligned
    a = randn((m, k), torch.float32, 60) if layout.startswith("a ") else randn((k, m), torch.float32, 61).T
    b = randn((k, n), torch.float32, 62) if layout.endswith(" b") else randn((n, k), torch.float32, 63).T
    bias = randn((n,), torch.float32, 64)
    ref = reference(a, b)
    for epilogue in (None, "bias"):
        c = matmul(a, b, variant="persistent", precision="tf32", epilogue=epilogue,
                   bias=bias if epilogue else None).double()  # fmt: skip
        want = ref + bias.double() if epilogue else ref
        rel = float(torch.linalg.vector_norm(c - want) / torch.linalg.vector_norm(want))
        assert 1e-6 < rel <= 2e-3, f"{layout} {epilogue}: tf32 relative error {rel:.3g}"


@pytest.mark.parametrize("variant", ["fixed", "autotuned", "persistent", "warp_specialized", "split_k"])
def test_no_recompilation_across_m_in_one_bucket(variant) -> None:
    n, k = 4096, (14336 if variant == "split_k" else 4096)
    b = randn((k, n), torch.bfloat16, 12)
    kernels_of = {
        "fixed": [mm_module._mm_fixed_kernel],
        "autotuned": [mm_module._mm_tuned_body],
        "persistent": [mm_module._mm_persistent_kernel],
        "warp_specialized": [mm_module.ws_matmul_kernel],
        "split_k": [mm_module._mm_split_kernel],
    }[variant]
    ms = [65, 100, 127, 128]
    assert len({m_bucket(m) for m in ms}) == 1
    a0 = randn((ms[0], k), torch.bfloat16, 13)
    assert_close(matmul(a0, b, variant=variant), reference(a0, b), torch.bfloat16)
    before = [compiles(f) for f in kernels_of]
    tuned_keys = len(mm_module._mm_tuned_kernel.cache)
    # Triton's own launch path for the other M values (the launch cache would hide a compile:
    # it never asks Triton), so that Triton's specialization decides.
    mm_module._recording = []
    try:
        for i, m in enumerate(ms[1:]):
            a = randn((m, k), torch.bfloat16, 14 + i)
            assert_close(matmul(a, b, variant=variant), reference(a, b), torch.bfloat16, f"M={m}")
    finally:
        mm_module._recording = None
    assert [compiles(f) for f in kernels_of] == before, "a new M in the bucket compiled a new kernel"
    assert len(mm_module._mm_tuned_kernel.cache) == tuned_keys, "a new M in the bucket was tuned again"


def test_torch_compile_fullgraph_matches_eager() -> None:
    m, n, k = 1024, 2048, 1024
    a = randn((m, k), torch.bfloat16, 20).requires_grad_()
    w = randn((n, k), torch.bfloat16, 21, scale=0.05).requires_grad_()
    bias = randn((n,), torch.bfloat16, 22).requires_grad_()

    def step(a, w, bias):
        return matmul(a, w.T, epilogue="bias_gelu", bias=bias, variant="persistent")

    torch._dynamo.reset()
    compiled = torch.compile(step, fullgraph=True)
    g = randn((m, n), torch.bfloat16, 23)
    out_c = compiled(a, w, bias)
    grads_c = torch.autograd.grad(out_c, [a, w, bias], g)
    out_e = step(a, w, bias)
    grads_e = torch.autograd.grad(out_e, [a, w, bias], g)
    assert torch.equal(out_c, out_e)
    for gc, ge in zip(grads_c, grads_e, strict=True):
        torch.testing.assert_close(gc, ge, rtol=0, atol=0)


@pytest.mark.skipif(not torch.cuda.is_available() or not is_hopper(), reason="Hopper evidence")
def test_persistent_kernel_uses_tma_and_wgmma_without_spills() -> None:
    a = randn((4096, 4096), torch.bfloat16, 30)
    b = randn((4096, 4096), torch.bfloat16, 31)
    (kernel,) = compiled_kernels(a, b, variant="persistent", config=PERSISTENT_CONFIG)
    ptx = kernel.asm["ptx"]
    assert "wgmma" in ptx, "no Hopper matrix instructions in the persistent kernel"
    assert "cp.async.bulk.tensor" in ptx, "the persistent kernel does not load through TMA"
    assert kernel.n_spills == 0
    assert kernel.metadata.shared > 0
    kinds = compiled_kernels(a[:16], b, variant="split_k")
    assert len(kinds) == 1  # one launch: the last program of a tile sums the partials in split order


def test_default_dispatch_on_this_gpu() -> None:
    dev = torch.device("cuda")
    assert default_variant(1, 4096, 14336, dev) == "split_k"
    big = "warp_specialized" if is_hopper() else "autotuned"  # from four waves of its tiles
    assert default_variant(8192, 8192, 8192, dev) == big
    # with an epilogue ping-pong alone: level with the persistent kernel on the H200, 1.06x
    # its time on an H100 SXM (ws_tiles)
    h100 = "H100 80GB HBM3" in torch.cuda.get_device_name(dev)
    epilogue = "persistent" if h100 else big
    assert default_variant(8192, 8192, 8192, dev, torch.bfloat16, "bias_gelu") == epilogue
    # 200 tiles of 128x256: 2 waves, level with ping-pong's 400 (the H200) or with the H100's
    # cooperative tile, and under WS_MIN_WAVES of them
    assert default_variant(2560, 2560, 2560, dev) == ("persistent" if is_hopper() else "autotuned")
    assert default_variant(1, 11008, 8192, dev) == "autotuned"  # 86 split-K tiles: over half a wave
    # an odd N: no TMA store (not warp-specialized), the weight copied for the persistent kernel
    assert default_variant(8192, 50257, 768, dev, tma=False) == ("persistent" if is_hopper() else "autotuned")
    assert default_variant(512, 512, 512, dev) == "autotuned"


def test_split_k_is_deterministic_at_real_size() -> None:
    a = randn((8, 14336), torch.bfloat16, 40)
    b = randn((14336, 4096), torch.bfloat16, 41)
    first = matmul(a, b, variant="split_k")
    for _ in range(5):
        assert torch.equal(matmul(a, b, variant="split_k"), first)


@pytest.mark.parametrize("variant", ["fixed", "persistent"])
def test_offsets_past_2_31(variant) -> None:
    k = 4096
    m = (1 << 31) // k + 64  # a holds more than 2^31 elements
    a = randn((m, k), torch.bfloat16, 50)
    b = randn((k, 64), torch.bfloat16, 51)
    c = matmul(a, b, variant=variant, config=TileConfig(128, 64, 64, 8, 3, 4))
    tail = slice(m - 300, m)
    assert_close(c[tail], reference(a[tail], b), torch.bfloat16, "rows past 2^31 elements")
    assert_close(c[:300], reference(a[:300], b), torch.bfloat16, "first rows")


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("variant", VARIANTS)
def test_tensors_on_a_second_gpu(variant) -> None:
    torch.cuda.set_device(0)
    a = randn((256, 4096), torch.bfloat16, 60, device="cuda:1").requires_grad_()
    b = randn((4096, 512), torch.bfloat16, 61, device="cuda:1").requires_grad_()
    c = matmul(a, b, variant=variant)
    assert c.device == a.device
    assert_close(c, reference(a.detach(), b.detach()), torch.bfloat16)
    c.sum().backward()
    assert a.grad.device == a.device and b.grad.device == a.device


def test_cached_launch_matches_tritons_own_launch() -> None:
    a = randn((300, 1000), torch.float16, 70)
    b = randn((1000, 520), torch.float16, 71)
    for variant in ("fixed", "persistent", "warp_specialized", "split_k"):
        cached = matmul(a, b, variant=variant)
        cached = matmul(a, b, variant=variant)  # the second call takes the launch cache
        mm_module._recording = []
        try:
            own = matmul(a, b, variant=variant)
        finally:
            mm_module._recording = None
        assert torch.equal(cached, own), variant


@pytest.mark.parametrize("variant", ["fixed", "persistent", "warp_specialized"])
def test_eager_calls_stay_on_the_cached_launch(variant, monkeypatch) -> None:
    """After the first call, eager calls launch through the cached launcher, never Triton's
    own ``kernel[grid]`` path (tens of µs of host time a call; the issue's target for the
    whole call is 20 µs), also for the kernels that make TMA descriptors on the device (their
    global scratch comes from torch's allocator).  Counted, not timed: the host cost itself is
    the study's."""
    a = randn((64, 256), torch.bfloat16, 80)
    b = randn((256, 256), torch.bfloat16, 81)
    first = matmul(a, b, variant=variant)
    uncached = []
    real = FastKernel.launch_uncached
    monkeypatch.setattr(FastKernel, "launch_uncached", lambda s, *a, **kw: uncached.append(1) or real(s, *a, **kw))
    for _ in range(50):
        again = matmul(a, b, variant=variant)
    torch.cuda.synchronize()
    assert uncached == []
    assert torch.equal(again, first)


hopper_only = pytest.mark.skipif(not torch.cuda.is_available() or not is_hopper(), reason="Hopper kernel")
WS_CONFIGS = {
    "ping-pong": None,
    "ping-pong 4 stages": TileConfig(128, 128, 64, 8, 4, 4),
    "cooperative 256x128": TileConfig(256, 128, 64, 8, 3, 8),
    "cooperative 128x256": TileConfig(128, 256, 64, 8, 3, 8),
    # a stage more than whole output tiles leave room for: stored as two half-width boxes (SPLIT)
    "ping-pong 6 stages half-width": TileConfig(128, 128, 64, 8, 6, 4),
    "cooperative 256x128 4 stages half-width": TileConfig(256, 128, 64, 8, 4, 8),
    "cooperative 128x256 4 stages half-width": TileConfig(128, 256, 64, 8, 4, 8),
    # 32-deep steps in 6 stages: the same bytes in flight as 3 of 64, whole output tiles beside them
    "cooperative 128x256x32 6 stages": TileConfig(128, 256, 32, 8, 6, 8),
}
# (M, N, K): edges in every dimension (TMA zero-fills the loads and clips the stores), a K
# tail of 8, one row, fewer tiles than programs, and more tiles than two waves; an odd N
# (output rows not 16-byte aligned: pointer stores, masked at the edges).
WS_SHAPES = [(300, 520, 72), (1, 4096, 4096), (1000, 1048, 1032), (2304, 2560, 1024), (304, 520, 72),
             (300, 521, 72), (1000, 1049, 1032), (2304, 2555, 1024)]  # fmt: skip


@hopper_only
@pytest.mark.parametrize("name", WS_CONFIGS)
@pytest.mark.parametrize("shape", WS_SHAPES, ids=str)
def test_ws_kernel_edges_layouts_and_schedules(name, shape) -> None:
    m, n, k = shape
    config = WS_CONFIGS[name]
    assert mm_module.ws_epilogue_split(config or mm_module.WS_CONFIG) == name.endswith("half-width")
    for i, (a_t, b_t) in enumerate(((False, False), (True, False), (False, True), (True, True))):
        dtype = torch.float16 if i % 2 else torch.bfloat16
        a = randn((k, m), dtype, 100 + i).T if a_t else randn((m, k), dtype, 100 + i)
        b = randn((n, k), dtype, 110 + i).T if b_t else randn((k, n), dtype, 110 + i)
        # a.T's memory [K, M] has a row stride of M elements: at an odd M it is read from a copy
        assert mm_module.ws_eligible(a, b)
        (kernel,) = compiled_kernels(a, b, variant="warp_specialized", config=config)
        assert "setmaxnreg" in kernel.asm["ptx"], "not the warp-specialized kernel"
        c = matmul(a, b, variant="warp_specialized", config=config)
        assert_close(c, reference(a, b), dtype, f"{name} {shape} a.T={a_t} b.T={b_t}")


@hopper_only
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_default_runs_the_gpu_s_own_ws_tile(dtype) -> None:
    # kernels.matmul.ws_tiles: on an H100 SXM a plain 4096³ product runs the cooperative
    # 128x256x32 tile and one with a bias ping-pong (where the warp-specialized kernel is
    # forced: the dispatch runs the persistent kernel there); on any other Hopper GPU
    # ping-pong both.
    # The kernel the choice compiles is the one the tile forced compiles (its hash).
    m = n = k = 4096
    a, b = randn((m, k), dtype, 140), randn((k, n), dtype, 141, scale=k**-0.5)
    bias = randn((n,), dtype, 142)
    h100 = "H100 80GB HBM3" in torch.cuda.get_device_name(a.device)
    assert (mm_module.ws_tiles(a.device) is mm_module.WS_TILES) != h100
    want = mm_module.COOP_CONFIG if h100 else mm_module.WS_CONFIG
    assert default_variant(m, n, k, a.device, dtype) == "warp_specialized"
    ws = "warp_specialized"
    (chosen,) = compiled_kernels(a, b, variant=ws)
    (forced,) = compiled_kernels(a, b, variant=ws, config=want)
    (ping_pong,) = compiled_kernels(a, b, variant=ws, config=mm_module.WS_CONFIG)
    assert chosen.hash == forced.hash and (chosen.hash != ping_pong.hash) == h100
    (with_bias,) = compiled_kernels(a, b, variant=ws, epilogue="bias", bias=bias)
    (bias_pp,) = compiled_kernels(a, b, variant=ws, epilogue="bias", bias=bias, config=mm_module.WS_CONFIG)
    assert with_bias.hash == bias_pp.hash
    c = matmul(a, b)
    assert torch.equal(c, matmul(a, b, variant=ws, config=want))
    assert_close(c, reference(a, b), dtype, f"default {dtype}")


@hopper_only
@pytest.mark.parametrize("n", [1048, 1049])
@pytest.mark.parametrize(
    "name",
    [
        "ping-pong",
        "cooperative 256x128",
        "ping-pong 6 stages half-width",
        "cooperative 128x256 4 stages half-width",
        "cooperative 128x256x32 6 stages",
    ],
)
@pytest.mark.parametrize("epilogue", ["bias", "bias_gelu", "residual"])
def test_ws_epilogues_at_edges(name, epilogue, n) -> None:
    m, k = 1000, 1032
    dtype = torch.bfloat16
    a, b = randn((m, k), dtype, 120), randn((k, n), dtype, 121, scale=k**-0.5)
    kw = {"bias": randn((n,), dtype, 122)} if epilogue != "residual" else {"residual": randn((n, m), dtype, 123).T}
    c = matmul(a, b, variant="warp_specialized", epilogue=epilogue, config=WS_CONFIGS[name], **kw)
    assert_close(c, reference(a, b, epilogue, **kw), dtype, f"{name} {epilogue} N={n}")
    if epilogue == "bias_gelu":  # the pre-activation the backward reads, through the same store path
        a_, b_ = a.detach().requires_grad_(), b.detach().requires_grad_()
        out = matmul(a_, b_, variant="warp_specialized", epilogue=epilogue, config=WS_CONFIGS[name], **kw)
        dy = randn((m, n), dtype, 124)
        da, db = torch.autograd.grad(out, (a_, b_), dy)
        a64, b64 = a.double().requires_grad_(), b.double().requires_grad_()
        ref = reference(a64, b64, epilogue, **kw)
        ref_da, ref_db = torch.autograd.grad(ref, (a64, b64), dy.double())
        assert_close(da, ref_da, dtype, f"{name} dA N={n}")
        assert_close(db, ref_db, dtype, f"{name} dB N={n}")


@hopper_only
def test_ws_kernel_evidence_and_fallback() -> None:
    a = randn((4096, 4096), torch.bfloat16, 130)
    b = randn((4096, 4096), torch.bfloat16, 131)
    (kernel,) = compiled_kernels(a, b, variant="warp_specialized")
    ptx = kernel.asm["ptx"]
    assert "wgmma" in ptx and "setmaxnreg" in ptx and "cp.async.bulk.tensor" in ptx
    assert kernel.n_spills == 0
    skew = randn((4096, 4097), torch.bfloat16, 132)[:, :4096]  # a row stride TMA cannot read: copied for it
    (copied,) = compiled_kernels(skew, b, variant="warp_specialized")
    assert "setmaxnreg" in copied.asm["ptx"], "an operand TMA cannot read is copied, not refused"
    assert_close(matmul(skew, b, variant="warp_specialized"), reference(skew, b), torch.bfloat16, "copied a")
    odd = randn((4096, 4095), torch.bfloat16, 133)  # the output's rows 8190 bytes: no TMA store
    (pointers,) = compiled_kernels(b, odd, variant="warp_specialized")
    ptx = pointers.asm["ptx"]
    assert "setmaxnreg" in ptx and "cp.async.bulk.tensor.2d.shared" in ptx, "an odd N keeps the TMA loads"
    assert "cp.async.bulk.tensor.2d.global" not in ptx and "st.global.b16" in ptx, "and stores through pointers"
    assert pointers.n_spills == 0
    assert_close(matmul(b, odd, variant="warp_specialized"), reference(b, odd), torch.bfloat16, "odd N")


@hopper_only
def test_ws_in_a_cuda_graph() -> None:
    """A captured call replays the same product (the descriptors' scratch comes from the graph's pool)."""
    a = randn((1000, 1032), torch.bfloat16, 140)
    b = randn((1032, 1048), torch.bfloat16, 141)
    want = matmul(a, b, variant="warp_specialized")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        matmul(a, b, variant="warp_specialized")
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = matmul(a, b, variant="warp_specialized")
    a.copy_(randn((1000, 1032), torch.bfloat16, 142))
    graph.replay()
    torch.cuda.synchronize()
    assert_close(got, reference(a, b), torch.bfloat16, "replay with new a")
    assert not torch.equal(got, want)


@pytest.mark.parametrize("m", [16, 112])  # 112: past the 64 rows of the rule's first form
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_decode_captured_after_one_eager_warm_up(dtype, m) -> None:
    """A decode shape runs split-K when captured and the autotuned kernel eagerly; one eager
    call before the capture (the usual warm-up, on a side stream) must leave split-K's
    kernels loaded, or the capture fails (no module may load while a stream captures).  The
    replay computes the product with the new operands, through split-K's launches."""
    n, k = 4096, 4096
    assert default_variant(m, n, k, torch.device("cuda"), dtype, captured=True) == "split_k"
    assert default_variant(m, n, k, torch.device("cuda"), dtype) == "autotuned"
    a, b = randn((m, k), dtype, 160), randn((k, n), dtype, 161, scale=0.05)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        eager = matmul(a, b)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    assert_close(eager, reference(a, b), dtype, "eager")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = matmul(a, b)
    a.copy_(randn((m, k), dtype, 162))
    graph.replay()
    torch.cuda.synchronize()
    assert_close(got, reference(a, b), dtype, "replay with new a")
    captured = [hit for key, hit in mm_module._PREPARED.items() if key[1] is None and key[5] == (m, k) and key[14]]
    assert captured and all(hit[0] is mm_module._SPLIT for hit in captured)


# Operands TMA cannot read as they lie: a vocabulary projection's odd N, a K that is not a
# multiple of 8, every dimension odd (kernels.matmul.tma_copy).
UNALIGNED = [(1000, 50257, 768), (2048, 4096, 4100), (3001, 4001, 5001)]


@pytest.mark.parametrize("variant", ["persistent", "warp_specialized", None])
@pytest.mark.parametrize("shape", UNALIGNED, ids=str)
def test_operands_tma_cannot_read_at_real_size(shape, variant) -> None:
    m, n, k = shape
    a = randn((m, k), torch.bfloat16, 150)
    b = randn((k, n), torch.bfloat16, 151)
    assert_close(matmul(a, b, variant=variant), reference(a, b), torch.bfloat16, f"{variant} {shape}")
    w = randn((n, k), torch.bfloat16, 152)  # a linear layer's weight, read as w.T
    assert_close(matmul(a, w.T, variant=variant), reference(a, w.T), torch.bfloat16, f"{variant} {shape} w.T")


@pytest.mark.skipif(not torch.cuda.is_available() or not is_hopper(), reason="Hopper evidence")
def test_odd_vocabulary_runs_tma_and_wgmma_without_spills() -> None:
    """At 8192x50257x768 (the study's odd-N case) the default call's kernel loads through TMA
    and multiplies with wgmma: the pointer path there compiled to no matrix instruction."""
    a = randn((8192, 768), torch.bfloat16, 153)
    b = randn((768, 50257), torch.bfloat16, 154)
    (kernel,) = compiled_kernels(a, b, variant=None)
    ptx = kernel.asm["ptx"]
    assert "wgmma" in ptx and "cp.async.bulk.tensor" in ptx
    assert kernel.n_spills == 0


@pytest.mark.parametrize("variant", ["persistent", None])
def test_training_step_with_an_odd_vocabulary(variant) -> None:
    """An LM head's step: dZ (odd row stride) reaches both backward products through copies."""
    m, n, k = 1000, 50257, 768
    a = randn((m, k), torch.bfloat16, 155).requires_grad_()
    w = randn((n, k), torch.bfloat16, 156, scale=0.05).requires_grad_()
    dc = randn((m, n), torch.bfloat16, 157)
    c = matmul(a, w.T, variant=variant)
    da, dw = torch.autograd.grad(c, (a, w), dc)
    a64, w64 = a.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    ref = a64 @ w64.T
    ref_da, ref_dw = torch.autograd.grad(ref, (a64, w64), dc.double())
    assert_close(c, ref, torch.bfloat16, "forward")
    assert_close(da, ref_da, torch.bfloat16, "dA")
    assert_close(dw, ref_dw, torch.bfloat16, "dW")


@hopper_only
def test_tma_copy_in_a_cuda_graph() -> None:
    """A captured call with an operand TMA cannot read replays the product of the operand's
    values at replay time (the copy is captured with it)."""
    a = randn((1000, 768), torch.bfloat16, 158)
    b = randn((768, 50257), torch.bfloat16, 159)
    matmul(a, b)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        matmul(a, b)
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        got = matmul(a, b)
    b.copy_(randn((768, 50257), torch.bfloat16, 160))
    graph.replay()
    torch.cuda.synchronize()
    assert_close(got, reference(a, b), torch.bfloat16, "replayed with new values")


@pytest.mark.parametrize("variant", ["persistent", "warp_specialized"])
def test_odd_n_output_past_2_31_elements(variant) -> None:
    """An odd N with an output of more than 2^31 elements: the output offsets stay 64-bit
    (the host promises 32-bit ones only below that) and the last rows land where they belong."""
    n, k = 4097, 64
    m = (1 << 31) // n + 300
    a = randn((m, k), torch.bfloat16, 161)
    b = randn((k, n), torch.bfloat16, 162)
    c = matmul(a, b, variant=variant)
    for rows in (slice(0, 300), slice(m - 300, m)):
        assert_close(c[rows], reference(a[rows], b), torch.bfloat16, f"{variant} rows {rows}")


@pytest.mark.parametrize("which", ["odd rows", "w.T", "general", "misaligned base"])
def test_tma_copy_at_real_size(which) -> None:
    """The pad copy's values, bit for bit, at a vocabulary projection's size."""
    base = randn((2 * 768 + 1, 2 * 50257 + 1), torch.bfloat16, 163)
    src = {
        "odd rows": base[:768, :50257],
        "w.T": base[: 50257 // 64, :768].T,
        "general": base[: 2 * 768 : 2, : 2 * 50257 : 2],
        "misaligned base": base[1:769, 1:50258],
    }[which]
    got = mm_module.tma_copy(src)
    assert torch.equal(got, src) and got.data_ptr() % 16 == 0
    assert (got.stride(0) if got.stride(1) == 1 else got.stride(1)) * 2 % 16 == 0


def tail_plans() -> list:
    """The split-tail plans (None: whole tiles) of the persistent launches prepared since
    ``_PREPARED`` was last emptied."""
    return [entry[-1] for entry in mm_module._PREPARED.values() if entry[0] is mm_module._PERSISTENT]


# The persistent kernel's partial last wave split along K (kernels.matmul.tail_split): 12 tail
# tiles in 11 ranges, 28 in 4, an odd N (36 in 3), a K tail (129 steps in 11 ranges), five
# waves (7 tail tiles in 8 ranges), and four waves with M, N and K tails (24 tiles in 5).
TAIL_SHAPES = [(3072, 1536, 8192), (2560, 2048, 8192), (3072, 1545, 8192), (3072, 1536, 8200), (3712, 5888, 4096),
               (3001, 5880, 4100)]  # fmt: skip


@pytest.mark.skipif(not torch.cuda.is_available() or not is_hopper(), reason="the split tail's plan is for 132 SMs")
@pytest.mark.parametrize("layout", ["a b", "a bT", "aT b"])
@pytest.mark.parametrize("epilogue", [None, "bias_gelu", "residual"])
@pytest.mark.parametrize("shape", TAIL_SHAPES, ids=str)
def test_split_tail_at_real_size(shape, epilogue, layout, monkeypatch) -> None:
    """Against float64, in every epilogue and with transposed operands, and the same bits on
    every call (the partials are summed in range order by whichever programs sum them).  At
    the odd N with an epilogue the tiles run whole (the split tail's sum would need more
    shared memory than a program has: kernels.matmul._prepare)."""
    m, n, k = shape
    sms = mm_module.sm_count(torch.device("cuda"))
    tail, splits = mm_module.tail_split(-(-m // 128) * -(-n // 256), -(-k // 64), sms)
    assert tail and splits >= 2
    a = randn((k, m), torch.bfloat16, 160).T if layout.startswith("aT") else randn((m, k), torch.bfloat16, 160)
    b = randn((n, k), torch.bfloat16, 161).T if layout.endswith("bT") else randn((k, n), torch.bfloat16, 161)
    kw = {"bias": randn((n,), torch.bfloat16, 162)} if epilogue == "bias_gelu" else {}
    kw = {"residual": randn((m, n), torch.bfloat16, 163)} if epilogue == "residual" else kw
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    c = matmul(a, b, variant="persistent", epilogue=epilogue, **kw)
    whole = n % 8 != 0 and epilogue is not None
    assert tail_plans() == [None if whole else (tail * splits * 128 * 256, tail)]
    assert_close(c, reference(a, b, epilogue, **kw), torch.bfloat16, (shape, epilogue, layout))
    for _ in range(3):
        assert torch.equal(matmul(a, b, variant="persistent", epilogue=epilogue, **kw), c)


@pytest.mark.skipif(not torch.cuda.is_available() or not is_hopper(), reason="the split tail's plan is for 132 SMs")
def test_split_tail_by_default_in_training_step(monkeypatch) -> None:
    """The default runs the split tail in the forward of 3072x1536x8192 (144 tiles: 12 in 11
    ranges; its dA and dB have four waves of the warp-specialized kernel's tiles) and the
    training step's three products agree with float64."""
    m, n, k = 3072, 1536, 8192
    assert default_variant(m, n, k, torch.device("cuda")) == "persistent"
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    a = randn((m, k), torch.bfloat16, 170, 0.5).requires_grad_()
    b = randn((k, n), torch.bfloat16, 171, 0.5).requires_grad_()
    bias = randn((n,), torch.bfloat16, 172).requires_grad_()
    out = matmul(a, b, epilogue="bias_gelu", bias=bias)
    assert tail_plans() == [(12 * 11 * 128 * 256, 12)]
    dy = randn((m, n), torch.bfloat16, 173)
    out.backward(dy)
    a64, b64, bias64 = (t.detach().double().requires_grad_() for t in (a, b, bias))
    ref = F.gelu(a64 @ b64 + bias64, approximate="tanh")
    ref.backward(dy.double())
    assert_close(out, ref, torch.bfloat16, "forward")
    assert_close(a.grad, a64.grad, torch.bfloat16, "dA")
    assert_close(b.grad, b64.grad, torch.bfloat16, "dB")


@pytest.mark.skipif(not torch.cuda.is_available() or not is_hopper(), reason="the split tail's plan is for 132 SMs")
def test_split_tail_in_a_cuda_graph_and_on_two_streams() -> None:
    """A captured call replays the product (its tile counters a zeroed tensor of the graph's
    own), and calls on two streams at once, each with its own counters, both match one call."""
    a = randn((3072, 8192), torch.bfloat16, 180)
    b = randn((8192, 1536), torch.bfloat16, 181)
    want = matmul(a, b, variant="persistent")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        matmul(a, b, variant="persistent")
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    cached = set(mm_module._COUNTERS)
    with torch.cuda.graph(graph):
        got = matmul(a, b, variant="persistent")
    assert set(mm_module._COUNTERS) == cached, "a capture must not cache counters its graph owns"
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(got, want)
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
    outs: list[list[torch.Tensor]] = [[], []]
    for _ in range(8):
        for i, s in enumerate(streams):
            with torch.cuda.stream(s):
                outs[i].append(matmul(a, b, variant="persistent"))
    torch.cuda.synchronize()
    assert all(torch.equal(o, want) for group in outs for o in group)
    index = torch.cuda.current_device()
    for s in streams:  # each stream its own counters, every one back at zero
        assert not mm_module._COUNTERS[(index, s.cuda_stream)].any()


@pytest.mark.skipif(not torch.cuda.is_available() or not is_hopper(), reason="the split tail's plan is for 132 SMs")
@pytest.mark.parametrize("precision", ["tf32", "ieee"])
@pytest.mark.parametrize("layout", ["a b", "a bT"])
def test_split_tail_in_fp32(precision, layout, monkeypatch) -> None:
    """float32 through the persistent kernel with a split tail: TF32's 256x128 tiles (144 at
    3072x1536: 12 in 11 ranges; the accumulator transposed where b is read into registers)
    and IEEE's 128x128 (288: 24 in 5 ranges), against float64."""
    m, n, k = 3072, 1536, 8192
    a = randn((m, k), torch.float32, 190)
    b = randn((n, k), torch.float32, 191).T if layout.endswith("bT") else randn((k, n), torch.float32, 191)
    monkeypatch.setattr(mm_module, "_PREPARED", {})
    c = matmul(a, b, variant="persistent", precision=precision)
    assert tail_plans() == ([(12 * 11 * 256 * 128, 12)] if precision == "tf32" else [(24 * 5 * 128 * 128, 24)])
    ref = reference(a, b)
    rel = float(torch.linalg.vector_norm(c.double() - ref) / torch.linalg.vector_norm(ref))
    # test_fp32_tf32_and_ieee's bounds: TF32 within 2e-3 and above IEEE's error, IEEE within 1e-5
    assert (1e-6 < rel <= 2e-3) if precision == "tf32" else rel <= 1e-5, (precision, layout, rel)
    assert torch.equal(matmul(a, b, variant="persistent", precision=precision), c)
