"""The softmax checks at real sizes, on a GPU (``pytest -m gpu``).

Everything the CPU suite checks through the interpreter, here on compiled kernels: every
plan at widths that are not powers of two (the 16-byte windows and their edges), non-finite
rows against ``torch.softmax`` on the same GPU, grids beyond CUDA's limits, offsets past
2^31, tensors on a second GPU, and the launch cache against Triton's own launch path."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tolerances import assert_close

import kernels
from kernels import _rowwise
from kernels._rowwise import LAUNCHERS, RowPlan, run_rows
from kernels.softmax import FORWARD, backward_rows, forward_rows, plan_for

pytestmark = pytest.mark.gpu
DTYPES = [torch.bfloat16, torch.float16, torch.float32]


def ref_softmax(x: torch.Tensor) -> torch.Tensor:
    xd = x.double()
    y = torch.softmax(xd, dim=-1)
    return torch.where(torch.isneginf(xd).all(-1, keepdim=True), torch.zeros_like(y), y)


def randn(shape, dtype, scale=4.0, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(shape, device="cuda", dtype=torch.float32, generator=g) * scale).to(dtype)


SHAPES = [
    ((16384, 4096), None),
    ((8192, 32768), None),
    ((4, 32769), None),
    ((4, 32769), "looped"),
    ((64, 131072), None),
    ((64, 131072), "looped"),
    ((8, 1048576), None),
    ((1, 1048576), "split"),
    ((300, 12289), "split"),
    ((2048, 16384), "block"),
    ((1000, 50257), None),
    ((1000, 50257), "split"),
    ((257, 50257), "looped"),
    ((96, 151936), None),
    ((129, 4097), "block"),
    ((4096, 50257), None),  # staged (bf16, fp16); looped in fp32
    ((257, 50257), "staged"),
    ((333, 50264), "staged"),  # rows on the 16-byte grid: no window
    ((65, 1531), "staged"),
    ((33, 1531), None),
    ((1, 1), None),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("shape", "plan"), SHAPES, ids=str)
def test_real_sizes_every_plan(shape, plan, dtype) -> None:
    x = randn(shape, dtype).requires_grad_()
    y = kernels.softmax(x, plan=plan)
    assert_close(y, ref_softmax(x.detach()), dtype, "y")
    dy = randn(shape, dtype, 1.0, seed=1)
    (dx,) = torch.autograd.grad(y, x, dy)
    yd, dyd = y.detach().double(), dy.double()
    assert_close(dx, yd * (dyd - (yd * dyd).sum(-1, keepdim=True)), dtype, "dx")


@pytest.mark.parametrize("plan", ["block", "looped", "split", "staged"])
@pytest.mark.parametrize("width", [1531, 4096, 32769, 50257])
def test_every_row_of_a_poisoned_output_is_written_and_nothing_else(plan, width) -> None:
    """Outputs in a buffer with guard rows of NaN around them: every row written, no guard touched.
    Eight guard rows each side keep y's rows on x's 16-byte alignment, which the staged plan
    needs (one row of guard shifts y's rows by an odd width: the staged plan is refused there,
    tests/test_softmax_gpu.py::test_staged_rows_whose_alignment_differs_take_another_plan)."""
    if plan == "block" and width > 32768:
        pytest.skip("a single block does not hold this row")
    rows = 37
    x = randn((rows, width), torch.bfloat16)
    buf = torch.full((rows + 16, width), float("nan"), device="cuda", dtype=torch.bfloat16)
    y = buf[8:-8]
    forward_rows(x, y, plan)
    assert torch.isnan(buf[:8]).all() and torch.isnan(buf[-8:]).all(), "a kernel wrote past its rows"
    assert_close(y, ref_softmax(x), torch.bfloat16)


@pytest.mark.parametrize("plan", ["block", "looped", "split", "staged"])
@pytest.mark.parametrize("width", [4096, 32769, 50257, 131072])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_non_finite_rows_match_torch_softmax(plan, width, dtype) -> None:
    if plan == "block" and width > 32768:
        pytest.skip("a single block does not hold this row")
    if plan == "staged" and width == 131072:
        pytest.skip("shared memory does not hold this row")
    x = randn((10, width), dtype)
    x[0, : width // 2] = float("-inf")  # masked prefix: valid probabilities
    x[1] = float("-inf")  # fully masked: zeros (torch: NaN)
    x[2, 5] = float("nan")
    x[3, -1] = float("inf")
    x[4, 0], x[4, 1] = float("inf"), float("-inf")
    x[5, 1:] = float("-inf")
    x[6, 3] = float("nan")
    x[6, 4] = float("inf")
    x[7] += 1000  # large logits: only the max subtraction keeps exp finite
    x = x.requires_grad_()
    y = kernels.softmax(x, plan=plan)
    expect = torch.softmax(x.detach(), dim=-1)
    nan_rows = [2, 3, 4, 6]
    assert torch.isnan(y[nan_rows]).all(), "rows with NaN or +inf must be all NaN, as in torch.softmax"
    assert torch.equal(torch.isnan(expect[nan_rows]), torch.isnan(y[nan_rows]))
    assert (y[1] == 0).all(), "an all -inf row gives zeros"
    live = [0, 5, 7, 8, 9]
    assert_close(y[live], ref_softmax(x.detach()[live]), dtype, "finite rows")
    dy = randn((10, width), dtype, 1.0, seed=2)
    (dx,) = torch.autograd.grad(y, x, dy)
    assert torch.isnan(dx[nan_rows]).all() and (dx[1] == 0).all()
    yd, dyd = y.detach()[live].double(), dy[live].double()
    assert_close(dx[live], yd * (dyd - (yd * dyd).sum(-1, keepdim=True)), dtype, "dx")


def test_grid_beyond_65535_programs_per_row() -> None:
    # One row of 268 million elements: the split plan's programs sit on grid axis 0.
    width = 65535 * 4096 + 1000
    x = randn((1, width), torch.bfloat16)
    y = kernels.softmax(x)
    plan = plan_for(x, y)[0]
    assert plan.kind == "split" and plan.chunks <= 1024 and plan.span > 1
    lse = torch.logsumexp(x.float(), dim=-1, keepdim=True)
    idx = torch.randint(0, width, (100_000,), device="cuda")
    expect = torch.exp(x[0, idx].float() - lse[0])
    torch.testing.assert_close(y[0, idx].float(), expect, rtol=1e-2, atol=1e-9)
    assert abs(float(y.float().sum()) - 1.0) < 1e-2


def test_more_rows_than_one_launch_holds(monkeypatch) -> None:
    # Batches of rows: the launcher's limit lowered so that the batching path runs at a sane size.
    monkeypatch.setattr(_rowwise, "MAX_GRID_X", 1000)
    for plan in ("block", "looped", "split"):
        x = randn((2500, 5000), torch.bfloat16)
        y = torch.full_like(x, float("nan"))
        forward_rows(x, y, plan)
        assert_close(y, ref_softmax(x), torch.bfloat16)


def test_offsets_past_two_to_the_31() -> None:
    rows, width = 65600, 32768  # 2.15e9 elements: row * stride overflows int32
    x = torch.randn((rows, width), device="cuda", dtype=torch.bfloat16)
    y = kernels.softmax(x)
    tail = slice(rows - 3, rows)
    assert_close(y[tail], ref_softmax(x[tail]), torch.bfloat16)


@pytest.mark.parametrize("offset", [0, 1, 3, 8])
@pytest.mark.parametrize("plan", ["block", "looped", "split"])
def test_cached_launch_matches_tritons_own_on_aligned_and_misaligned_views(offset, plan) -> None:
    """The launch cache keys on pointer alignment: an unaligned view must never reuse a
    kernel compiled for aligned pointers (that would fault or read the wrong elements)."""
    base = randn((64, 12000 + 16), torch.bfloat16)
    x = base[:, offset : offset + 12000]
    y_fast = torch.empty((64, 12000), device="cuda", dtype=torch.bfloat16)
    y_slow = torch.empty_like(y_fast)
    for _ in range(2):  # the second call takes the cached path
        forward_rows(x, y_fast, plan)
    planned, vec, align = plan_for(x, y_slow, plan)
    for launcher in LAUNCHERS:
        launcher.uncached = True
    try:
        run_rows(FORWARD, planned, x, None, y_slow, align, vec)
    finally:
        for launcher in LAUNCHERS:
            launcher.uncached = False
    assert torch.equal(y_fast, y_slow)
    assert_close(y_fast, ref_softmax(x), torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_dtype_argument_matches_torch(dtype) -> None:
    x = randn((100, 50257), torch.bfloat16).requires_grad_()
    y = kernels.softmax(x, dtype=dtype)
    expect = torch.nn.functional.softmax(x.detach(), -1, dtype=dtype)
    assert y.dtype == expect.dtype
    torch.testing.assert_close(y, expect, rtol=2e-2, atol=1e-5)
    (dx,) = torch.autograd.grad(y.float().sum() + (y.float() ** 2).sum(), x)
    assert dx.dtype == torch.bfloat16


def test_any_dim_and_noncontiguous_inputs() -> None:
    x = randn((6, 50, 33), torch.float32)
    for dim in (0, 1, -1):
        torch.testing.assert_close(kernels.softmax(x, dim), torch.softmax(x, dim))
    xt = randn((4097, 64), torch.float32).t()  # last-dim stride 64
    torch.testing.assert_close(kernels.softmax(xt), torch.softmax(xt, -1))


def _compiled_count() -> int:
    # Kernels Triton compiled for our launchers (the eager path's prepared launches compile
    # through the same JIT caches).
    return sum(len(c[0]) for launcher in LAUNCHERS for c in launcher.kernel.fn.device_caches.values())


@pytest.mark.parametrize(
    ("width", "plan"), [(4096, "block"), (127, "block"), (40000, "looped"), (40000, "split"), (50257, None)]
)
def test_new_row_counts_never_recompile(width, plan) -> None:
    def step(rows: int) -> None:
        x = randn((rows, width), torch.bfloat16).requires_grad_()
        torch.autograd.grad(kernels.softmax(x, plan=plan), x, torch.ones_like(x))

    # Compiles this width's kernels (packed and unpacked block plans aside).  With the planner
    # (plan=None) a width can take the split plan for few rows and the looped plan for many:
    # each kind compiles once, the first time the row count reaches it (5 and 1001 rows
    # reach both), and no row count after that compiles anything.
    for rows in (5, 7, 1001):
        step(rows)
    before = _compiled_count()
    for rows in (2, 3, 16, 17, 129, 1000):
        step(rows)
    assert _compiled_count() == before


def test_torch_compile_fullgraph_matches_eager() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return kernels.softmax(x * 1.5, plan=None).sum(dim=0)

    compiled = torch.compile(f, fullgraph=True)
    for rows in (64, 1000):
        x = randn((rows, 4096), torch.bfloat16, seed=rows).requires_grad_()
        out_c, out_e = compiled(x), f(x)
        torch.testing.assert_close(out_c, out_e)
        g = torch.randn_like(out_e)
        (gc,) = torch.autograd.grad(out_c, x, g)
        (ge,) = torch.autograd.grad(out_e, x, g)
        torch.testing.assert_close(gc, ge)


@pytest.mark.parametrize("shape", [(4, 32769), (64, 131072), (32, 127)])
def test_reduce_overhead_compile_forward_and_step(shape) -> None:
    # torch.compile's CUDA graphs (mode="reduce-overhead") run their warm-ups eagerly in a
    # private memory pool: the op must leave no cached scratch there.  The dispatch runs
    # recorded torch refusing 4 x 32769 ("tensors in the cudagraph pool not tracked as
    # outputs") while the op took the one-launch split.
    torch._dynamo.reset()

    def f(x: torch.Tensor) -> torch.Tensor:
        return kernels.softmax(x * 2.0)

    compiled = torch.compile(f, mode="reduce-overhead")
    x = randn(shape, torch.bfloat16, seed=shape[1]).requires_grad_()
    g = randn(shape, torch.bfloat16, seed=shape[1] + 1)
    for _ in range(4):  # warm-up, recording, replays
        y = compiled(x)
        (dx,) = torch.autograd.grad(y, x, g)
        y, dx = y.detach().clone(), dx.clone()
    torch.cuda.synchronize()
    ye = f(x)
    (dxe,) = torch.autograd.grad(ye, x, g)
    assert_close(y, ref_softmax(x.detach() * 2.0), torch.bfloat16)
    torch.testing.assert_close(y, ye.detach(), atol=4e-3, rtol=1.6e-2)  # one bf16 step at most
    torch.testing.assert_close(dx, dxe)


def test_registered_op_opcheck_on_gpu() -> None:
    from kernels.softmax import _softmax_op

    for plan in (None, "looped", "split"):
        torch.library.opcheck(_softmax_op, (randn((33, 5000), torch.float32).requires_grad_(), plan, None))
    torch.library.opcheck(_softmax_op, (randn((33, 5001), torch.bfloat16).requires_grad_(), None, torch.float32))


@pytest.mark.parametrize("one_launch", [True, False])
@pytest.mark.parametrize("shape", [(4, 32769), (64, 131072), (8, 1048576), (130, 20000), (7, 50257)])
def test_split_one_and_two_launches_agree_and_repeat(shape, one_launch) -> None:
    x = randn(shape, torch.bfloat16)
    x[0, : shape[1] // 2] = float("-inf")
    x[-1] = float("-inf")
    plan = dataclasses.replace(plan_for(x, x, "split")[0], one_launch=one_launch)
    y = torch.full_like(x, float("nan"))
    forward_rows(x, y, plan)
    assert_close(y, ref_softmax(x), torch.bfloat16)
    dy = randn(shape, torch.bfloat16, 1.0, seed=3)
    dx = torch.full_like(x, float("nan"))
    bplan = dataclasses.replace(plan_for(y, dx, "split", dy2d=dy)[0], one_launch=one_launch)
    backward_rows(y, dy, dx, bplan)
    yd, dyd = y.double(), dy.double()
    assert_close(dx, yd * (dyd - (yd * dyd).sum(-1, keepdim=True)), torch.bfloat16, "dx")
    # A race between the row's programs would show as a result that changes between calls.
    for _ in range(30):
        y2, dx2 = torch.empty_like(y), torch.empty_like(dx)
        forward_rows(x, y2, plan)
        backward_rows(y, dy, dx2, bplan)
        assert torch.equal(y2, y) and torch.equal(dx2, dx)


def test_one_launch_split_walks_more_chunks_than_the_gpu_holds() -> None:
    # 2 x 2048 chunks of 2048 elements: many tickets a program; the counters are left at zero,
    # so calls after it run too.
    x = randn((2, 4 * 1048576), torch.bfloat16)
    plan = RowPlan("split", 2048, 4, chunks=2048, one_launch=True)
    for _ in range(3):
        y = torch.full_like(x, float("nan"))
        forward_rows(x, y, plan)
        assert_close(y, ref_softmax(x), torch.bfloat16)
    _stats, sync = _rowwise._one_launch_scratch(2, 2048, x.device, torch.float32)
    assert not sync.any().item()


def test_one_launch_split_in_a_cuda_graph() -> None:
    # A capture takes scratch of its own (the stream's cached counters would be shared with
    # eager calls on that stream): replays must neither hang nor race.
    x = randn((64, 131072), torch.bfloat16)
    plan = RowPlan("split", 4096, 8, chunks=32, one_launch=True)
    y = torch.empty_like(x)
    forward_rows(x, y, plan)  # compiles outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        forward_rows(x, y, plan)
    for _ in range(5):
        y.fill_(float("nan"))
        graph.replay()
        forward_rows(x, torch.empty_like(x), plan)  # an eager call between replays
    torch.cuda.synchronize()
    assert_close(y, ref_softmax(x), torch.bfloat16)


def test_tensor_on_a_second_gpu_runs_there() -> None:
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU only: run on a machine with two (the nvidia-h200-x2 kind)")
    torch.cuda.set_device(0)
    for plan in (None, "looped", "split"):
        x = randn((64, 50257), torch.bfloat16).to("cuda:1").requires_grad_()
        y = kernels.softmax(x, plan=plan)
        assert y.device == x.device
        assert_close(y, ref_softmax(x.detach()), torch.bfloat16)
        (dx,) = torch.autograd.grad(y, x, torch.ones_like(y))
        assert dx.device == x.device
    assert torch.cuda.current_device() == 0


def test_capture_after_an_eager_warm_up_of_a_split_shape() -> None:
    # Eager calls of this shape take the one-launch split and a capture the two-launch one:
    # the eager call must leave the capture's kernels compiled and loaded (a module cannot
    # be loaded while the stream captures).  A width no other test uses, so that nothing
    # else compiled them first.
    x = randn((3, 40961), torch.bfloat16)
    eager = kernels.softmax(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = kernels.softmax(x)
    graph.replay()
    torch.cuda.synchronize()
    assert_close(captured, ref_softmax(x), torch.bfloat16)
    assert torch.equal(captured, eager) or torch.allclose(captured.float(), eager.float(), atol=1e-3)


def test_the_planner_stages_the_vocabulary_rows() -> None:
    # 4096 x 50257 bf16: the looped plan read the row twice (76% of copy); staged once.
    x = randn((4096, 50257), torch.bfloat16)
    y = torch.empty_like(x)
    plan = plan_for(x, y)[0]
    assert plan.kind == "staged" and plan.chunks == 13
    assert plan_for(x.float(), y.float())[0].kind == "looped"  # 208 KB: one program an SM
    forward_rows(x, y)
    assert_close(y, ref_softmax(x), torch.bfloat16)
    # dtype=: bf16 read, float32 written, through the same window
    assert_close(kernels.softmax(x[:300], dtype=torch.float32, plan="staged"), ref_softmax(x[:300].float()),
                 torch.float32)  # fmt: skip


def test_staged_rows_whose_alignment_differs_take_another_plan() -> None:
    # x's rows 50272 apart (on the 16-byte grid) beside y's 50257: one window cannot serve
    # both, so the planner loops and a forced staged plan is refused.
    x = randn((300, 50272), torch.bfloat16)[:, :50257]
    y = torch.empty(300, 50257, device="cuda", dtype=torch.bfloat16)
    assert plan_for(x, y)[0].kind == "looped"
    assert_close(kernels.softmax(x), ref_softmax(x), torch.bfloat16)
    with pytest.raises(ValueError, match="plan 'staged' needs"):
        forward_rows(x, y, "staged")


def test_staged_repeats_bit_for_bit() -> None:
    x = randn((1000, 50257), torch.bfloat16)
    first = kernels.softmax(x, plan="staged")
    for _ in range(10):
        assert torch.equal(kernels.softmax(x, plan="staged"), first)
