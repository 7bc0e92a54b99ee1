"""The eager launch paths pass the compiled kernels what the general path passes.

The bound fast paths (``_Prepared.single``, ``_Prepared.split_call``) only run on a GPU, so
the interpreter suite never reaches them.  Here the compiled launchers are replaced by
recorders and the GPU stream by a constant, and each fast path's launches are compared with
the general path's, argument by argument: the pointers and strides of every role, the grid,
the stream, the flags and the constexprs.  The only argument allowed to differ is the
scratch pointer of the chunks' statistics (each path allocates its own, and the allocator
may or may not hand the freed address back).
"""

from __future__ import annotations

import dataclasses
import importlib

import pytest
import torch

from kernels import _rowwise as rw
from kernels.plans import plan_rows
from kernels.softmax import BACKWARD, BACKWARD_POLICY, FORWARD, POLICY

HEAD = 13  # grid (3), stream, function, cooperative, pdl, two scratches, metadata, three hooks


class Recorder:
    def __init__(self, name: str) -> None:
        self.name, self.calls = name, []

    def __call__(self, *args):  # type: ignore[no-untyped-def]
        self.calls.append(args)


def _prepared(op, policy, rows: int, width: int, vec: int, align: int):  # type: ignore[no-untyped-def]
    pad = vec - 1 if align == rw.ALIGN_WINDOW else 0
    plan = plan_rows(rows, width, 2, 132, policy, "split", pad)
    steps = rw._steps(op, plan, width, vec, align, torch.bfloat16, torch.bfloat16)
    prepared = rw._Prepared(plan, steps, "cpu", False)  # scratch on the CPU: only its pointer is used
    launches = [Recorder("reduce"), Recorder("apply")]
    prepared.bound = [(launches[i], f"function{i}", f"metadata{i}", 0, i) for i in range(2)]
    prepared.pair = prepared.bind_pair()
    return plan, steps, prepared, launches


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize(("width", "stride", "align"), [(50257, 50264, rw.ALIGN_WINDOW), (65536, 65536, rw.ALIGN_ROWS)])
def test_split_fast_path_launches_what_the_general_path_launches(monkeypatch, backward, width, stride, align) -> None:
    monkeypatch.setattr(rw, "current_stream", lambda index: 12345)
    op, policy = (BACKWARD, BACKWARD_POLICY) if backward else (FORWARD, POLICY)
    rows = 3
    plan, steps, prepared, launches = _prepared(op, policy, rows, width, 8, align)
    assert plan.kind == "split" and plan.chunks > 1 and prepared.pair is not None
    a = torch.empty(rows, stride, dtype=torch.bfloat16)[:, :width]
    b = torch.empty(rows, stride + 8, dtype=torch.bfloat16)[:, :width] if backward else a
    out = torch.empty(rows, stride + 16, dtype=torch.bfloat16)[:, :width]

    pair, prepared.pair = prepared.pair, None
    prepared(a, b, out, rows)  # the general path
    general = [r.calls.pop() for r in launches]
    prepared.pair = pair
    prepared(a, b, out, rows)  # with the pair bound, the call takes split_call
    fast = [r.calls.pop() for r in launches]

    for step, g, f in zip(steps, general, fast, strict=True):
        assert len(g) == len(f) == HEAD + len(step.roles) + 1 + 5 + len(step.consts)
        stats = HEAD + step.roles.index("stats")
        differ = [i for i, (x, y) in enumerate(zip(g, f, strict=True)) if x != y]
        # each path allocates its own statistics; the allocator may hand back the same address
        assert differ in ([], [stats]), (step.roles, differ)
        assert g[0] == f[0] == rows * plan.chunks and g[3] == f[3] == 12345
    # the apply launch is the programmatic dependent one, in both
    assert general[1][6] == fast[1][6] == 1 and general[0][6] == fast[0][6] == 0
    # both launches of one call read one statistics buffer
    assert fast[0][HEAD + steps[0].roles.index("stats")] == fast[1][HEAD + steps[1].roles.index("stats")]


@pytest.mark.parametrize(("width", "stride", "align"), [(50257, 50264, rw.ALIGN_WINDOW), (65536, 65536, rw.ALIGN_ROWS)])
def test_one_launch_fast_path_launches_what_the_general_path_launches(monkeypatch, width, stride, align) -> None:
    monkeypatch.setattr(rw, "current_stream", lambda index: 12345)
    monkeypatch.setattr(rw, "INTERPRETER", False)
    rows, resident = 3, 5
    plan = dataclasses.replace(plan_rows(rows, width, 2, 132, POLICY, "split", 7 if align else 0), one_launch=True)
    steps = rw._steps(FORWARD, plan, width, 8, align, torch.bfloat16, torch.bfloat16)
    assert len(steps) == 1 and steps[0].coop
    prepared = rw._Prepared(plan, steps, "cpu", False)
    launch = Recorder("one")
    prepared.bound, prepared.resident = [(launch, "function0", "metadata0", 1, 0)], [resident]
    a = torch.empty(rows, stride, dtype=torch.bfloat16)[:, :width]
    out = torch.empty(rows, stride + 16, dtype=torch.bfloat16)[:, :width]
    prepared(a, a, out, rows)  # the general path
    general = launch.calls.pop()
    prepared.one = (prepared.bound[0], steps[0].consts, resident, plan.chunks, torch.float32)
    prepared(a, a, out, rows)  # one_launch_call
    fast = launch.calls.pop()
    assert len(general) == len(fast) == HEAD + len(steps[0].roles) + 1 + 5 + len(steps[0].consts)
    scratch = [HEAD + steps[0].roles.index(r) for r in ("stats", "sync")]
    differ = [i for i, (x, y) in enumerate(zip(general, fast, strict=True)) if x != y]
    assert set(differ) <= set(scratch), differ  # each path's scratch: fresh on the CPU
    # at most the resident programs, cooperative, not a dependent launch
    assert general[0] == fast[0] == min(rows * plan.chunks, resident) and general[5] == fast[5] == 1
    assert general[6] == fast[6] == 0 and general[3] == fast[3] == 12345


def test_no_fast_pair_for_plans_it_does_not_cover() -> None:
    for kind in ("block", "looped"):
        plan = plan_rows(64, 50257, 2, 132, POLICY, kind, 7)
        steps = rw._steps(FORWARD, plan, 50257, 8, rw.ALIGN_WINDOW, torch.bfloat16, torch.bfloat16)
        prepared = rw._Prepared(plan, steps, "cpu", False)
        prepared.bound = [("launch", "f", "m", 0, 0)] * len(steps)
        assert prepared.bind_pair() is None, kind
    _plan, _steps, half_bound, _launches = _prepared(FORWARD, POLICY, 3, 50257, 8, rw.ALIGN_WINDOW)
    half_bound.bound[1] = None
    assert half_bound.bind_pair() is None


class _OnGpu0(torch.Tensor):
    """A CPU tensor that says it lives on GPU 0, so that RowCall takes its eager fast path."""

    def get_device(self) -> int:  # type: ignore[override]
        return 0


def _gpu0(t: torch.Tensor) -> torch.Tensor:
    return t.as_subclass(_OnGpu0)


def _rmsnorm_calls():  # type: ignore[no-untyped-def]
    import sys

    from kernels import rmsnorm  # noqa: F401  (the module, for its row ops)

    rn = sys.modules["kernels.rmsnorm"]
    return rn.FORWARD, rn.BACKWARD, rn.POLICY, rn.BACKWARD_POLICY


@pytest.mark.parametrize("which", ["softmax", "rmsnorm-forward", "rmsnorm-forward-no-residual", "rmsnorm-backward"])
@pytest.mark.parametrize(("width", "stride"), [(4097, 4104), (4096, 4096)])
def test_single_launch_fast_path_launches_what_the_general_path_launches(monkeypatch, which, width, stride) -> None:
    monkeypatch.setattr(rw, "INTERPRETER", False)
    monkeypatch.setattr(rw, "current_device", lambda: 0)
    monkeypatch.setattr(rw, "current_stream", lambda index: 12345)
    rows = 5

    def rows_of(extra: int = 0) -> torch.Tensor:
        return _gpu0(torch.empty(rows, stride + extra, dtype=torch.bfloat16)[:, :width])

    a, out = rows_of(), rows_of(16)
    b, extras = None, rw.RowExtras()
    if which == "softmax":
        op, policy = FORWARD, POLICY
    else:
        fwd, bwd, fpol, bpol = _rmsnorm_calls()
        w = _gpu0(torch.empty(width, dtype=torch.bfloat16))
        if which == "rmsnorm-forward":
            op, policy, extras = fwd, fpol, rw.RowExtras(c=rows_of(8), w=w, out2=rows_of(24), arg=1e-6)
        elif which == "rmsnorm-forward-no-residual":
            op, policy, extras = fwd, fpol, rw.RowExtras(w=w, arg=1e-6)
        else:
            rstd = _gpu0(torch.empty(rows, dtype=torch.float32))
            op, policy, b = bwd, bpol, rows_of(8)
            extras = rw.RowExtras(c=rows_of(24), w=w, rstat=rstd, arg=1e-6)
    call = rw.RowCall(op, policy)
    found = call._lookup(a, b, out, None, extras)
    assert found is not None
    prepared = found[0]
    assert prepared.plan.kind == "block" and len(prepared.steps) == 1
    launch = Recorder("block")
    bound = (launch, "function", "metadata", 0, 0)
    prepared.bound = [bound]
    prepared.single = (*bound, prepared.steps[0].rows_per_program, prepared.steps[0].consts)

    call(a, b, out, None, extras)  # the fast path
    fast = launch.calls.pop()
    single, prepared.single = prepared.single, None
    prepared(a, a if b is None else b, out, rows, extras)  # the general path
    general = launch.calls.pop()
    assert fast == general
    # and the pointers are the roles' own: nothing passed as another role's
    ptrs = fast[HEAD : HEAD + 7]
    assert ptrs[0] == a.data_ptr() and ptrs[4] == out.data_ptr()
    if extras.c is not None:
        assert ptrs[2] == extras.c.data_ptr() and fast[HEAD + 7 + 3] == extras.c.stride(0)
    if extras.out2 is not None:
        assert ptrs[5] == extras.out2.data_ptr() and fast[HEAD + 7 + 5] == extras.out2.stride(0)
    if extras.rstat is not None:
        assert ptrs[6] == extras.rstat.data_ptr()
    prepared.single = single


@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize(("width", "stride", "rows"), [(4097, 4104, 5), (4096, 4096, 3000), (127, 128, 1)])
def test_lane_launches_what_the_general_path_launches(monkeypatch, backward, width, stride, rows) -> None:
    # RowCall.lane (softmax's forward and backward with the planner's plan) keeps its own dict
    # of bound launches; a call through it must launch exactly what __call__ launches, and a
    # key it has not seen (here: another alignment of the output) must go through __call__.
    monkeypatch.setattr(rw, "INTERPRETER", False)
    monkeypatch.setattr(rw, "current_device", lambda: 0)
    monkeypatch.setattr(rw, "current_stream", lambda index: 12345)

    def rows_of(extra: int = 0, offset: int = 0) -> torch.Tensor:
        return _gpu0(torch.empty(rows, stride + extra, dtype=torch.bfloat16)[:, offset : offset + width])

    a, out, out_odd = rows_of(), rows_of(16), rows_of(16, offset=1)
    b = rows_of(8) if backward else None
    call = rw.RowCall(BACKWARD, BACKWARD_POLICY) if backward else rw.RowCall(FORWARD, POLICY)
    launches = Recorder("single")
    for target in (out, out_odd):
        prepared = call.prepare(a, b, target)
        assert prepared is not None and prepared.plan.kind in ("block", "looped")
        bound = (launches, "function", "metadata", 0, 0)
        prepared.bound = [bound]
        prepared.single = (*bound, prepared.steps[0].rows_per_program, prepared.steps[0].consts)
    call(a, b, out)
    general = launches.calls.pop()
    call.lane(a, b, out)  # a miss: __call__, then the lane remembers the launch
    assert launches.calls.pop() == general and len(call._lane) == 1
    call.lane(a, b, out)  # a hit
    assert launches.calls.pop() == general
    if backward:
        assert general[HEAD + 1] == b.data_ptr() and general[HEAD + 7 + 1 + 1] == b.stride(0)
    call.lane(a, b, out_odd)  # another key: through __call__, with its own launch
    odd = launches.calls.pop()
    assert odd[HEAD + 4] == out_odd.data_ptr() and odd != general
    assert len(call._lane) == 2


def test_lane_sends_a_plan_it_cannot_bind_to_the_general_path(monkeypatch) -> None:
    # A key whose plan is neither one bound launch nor a bound split is remembered as such:
    # later calls go to __call__ without a second lookup.
    monkeypatch.setattr(rw, "INTERPRETER", False)
    monkeypatch.setattr(rw, "current_device", lambda: 0)
    a = _gpu0(torch.empty(4, 65536, dtype=torch.bfloat16))
    out = _gpu0(torch.empty(4, 65536, dtype=torch.bfloat16))
    call = rw.RowCall(FORWARD, POLICY)
    calls = []
    monkeypatch.setattr(rw.RowCall, "__call__", lambda self, *args, **kw: calls.append(args))
    call._thresholds[0] = (66.0, 1056.0, 132)
    unbound = rw._Prepared(rw.RowPlan("split", 2048, 4, chunks=32), [], 0, False)
    monkeypatch.setattr(call, "_lookup", lambda *args: (unbound, (), ()))
    call.lane(a, None, out)
    assert call._lane and all(v is rw._GENERAL for v in call._lane.values())
    monkeypatch.setattr(call, "_lookup", lambda *args: pytest.fail("a second lookup"))
    call.lane(a, None, out)
    assert len(calls) == 2


@pytest.mark.parametrize("one", [False, True], ids=["two-launches", "one-launch"])
def test_lane_takes_a_bound_split_as_call_would(monkeypatch, one) -> None:
    # A split key: the first call goes through __call__, the lane remembers the prepared
    # split, and the next calls launch the same kernels with the same arguments (but the
    # statistics' scratch) without __call__ or a second lookup.  Above one_launch_bytes, or
    # while a stream captures, the one-launch form is not taken.
    monkeypatch.setattr(rw, "INTERPRETER", False)
    monkeypatch.setattr(rw, "current_device", lambda: 0)
    monkeypatch.setattr(rw, "current_stream", lambda index: 12345)
    rows, width, stride = 3, 50257, 50264
    a = _gpu0(torch.empty(rows, stride, dtype=torch.bfloat16)[:, :width])
    out = _gpu0(torch.empty(rows, stride + 16, dtype=torch.bfloat16)[:, :width])
    plan, steps, prepared, launches = _prepared(FORWARD, POLICY, rows, width, 8, rw.ALIGN_WINDOW)
    if one:
        plan = dataclasses.replace(plan, one_launch=True)
        steps = rw._steps(FORWARD, plan, width, 8, rw.ALIGN_WINDOW, torch.bfloat16, torch.bfloat16)
        prepared = rw._Prepared(plan, steps, "cpu", False)
        launches = [Recorder("one")]
        prepared.bound, prepared.resident = [(launches[0], "function0", "metadata0", 1, 0)], [5]
        prepared.one = (prepared.bound[0], steps[0].consts, 5, plan.chunks, torch.float32)
    monkeypatch.setattr(rw, "_one_launch_scratch", lambda n, c, d, t: (torch.empty(n * c * 2), torch.zeros(n + 2)))
    call = rw.RowCall(FORWARD, POLICY if one else dataclasses.replace(POLICY, one_launch_bytes=0))
    call._thresholds[0] = (66.0, 1056.0, 132)
    lookups = []

    def lookup(a, b, out, force, extras, eager=True):  # type: ignore[no-untyped-def]
        lookups.append(1)
        pa, po, sa, so = a.data_ptr(), out.data_ptr(), a.stride(0), out.stride(0)
        return prepared, (pa, pa, pa, pa, po, po, po), (sa, sa, sa, so, so)

    monkeypatch.setattr(call, "_lookup", lookup)
    call.lane(a, None, out)  # the first: through __call__, then remembered
    first = [r.calls.pop() for r in launches]
    entry = next(iter(call._lane.values()))
    assert isinstance(entry, rw._SplitLane) and (entry.one if one else entry.pair) is prepared
    seen = len(lookups)
    call.lane(a, None, out)  # a hit: the bound split, no lookup
    assert len(lookups) == seen
    again = [r.calls.pop() for r in launches]
    for step, f, g in zip(steps, first, again, strict=True):
        differ = [i for i, (x, y) in enumerate(zip(f, g, strict=True)) if x != y]
        scratch = {HEAD + step.roles.index(r) for r in ("stats", "sync") if r in step.roles}
        assert set(differ) <= scratch, differ  # each call's own scratch, nothing else
    if one:  # while a stream captures, the one-launch form is not the one to take
        monkeypatch.setattr(rw, "capturing", lambda: True)
        calls = []
        monkeypatch.setattr(rw.RowCall, "__call__", lambda self, *args, **kw: calls.append(args))
        call.lane(a, None, out)
        assert calls and not any(r.calls for r in launches)


@pytest.mark.parametrize(
    ("cc", "threads", "regs", "warps", "shared", "expected"),
    [
        ((9, 0), 2048, 40, 2, 0, 24),  # registers by quarters: 12 warps of 1280 in each of four
        ((9, 0), 2048, 72, 8, 0, 3),
        ((9, 0), 2048, 32, 4, 0, 16),  # the 64-warp limit
        ((9, 0), 2048, 16, 1, 0, 32),  # the 32-program limit
        ((9, 0), 2048, 32, 4, 100 * 1024, 2),  # shared memory, 1 KB more a program
        ((8, 9), 1536, 32, 4, 0, 12),  # a GPU of 48 warps a multiprocessor
    ],
)
def test_resident_programs_counts_like_the_occupancy_calculator(
    monkeypatch, cc, threads, regs, warps, shared, expected
) -> None:
    from types import SimpleNamespace

    from kernels import _launch

    props = SimpleNamespace(
        major=cc[0], minor=cc[1], multi_processor_count=132, max_threads_per_multi_processor=threads,
        regs_per_multiprocessor=65536, shared_memory_per_multiprocessor=233472,
    )  # fmt: skip
    monkeypatch.setattr(_launch.torch.cuda, "get_device_properties", lambda index: props)
    compiled = SimpleNamespace(n_regs=regs, metadata=SimpleNamespace(shared=shared), _init_handles=lambda: None)
    assert _launch.resident_programs(compiled, warps, 0) == expected * 132


@pytest.mark.parametrize(("shape", "one"), [((4, 32769), True), ((32, 65536), True), ((64, 131072), False)])
def test_eager_split_takes_one_launch_only_on_small_calls(monkeypatch, shape, one) -> None:
    # One launch costs the host less, but its device time is about twice the two launches':
    # eager calls take it up to the policy's one_launch_bytes of input (8 MB), not beyond.
    monkeypatch.setattr(rw, "INTERPRETER", False)
    monkeypatch.setattr(rw, "current_device", lambda: 0)
    monkeypatch.setattr(rw, "sm_count", lambda device: 132)
    monkeypatch.setattr(rw, "capturing", lambda: False)
    ahead = []
    monkeypatch.setattr(rw, "_compile_ahead", lambda *args: ahead.append(args[1]))
    a = _gpu0(torch.empty(shape, dtype=torch.bfloat16))
    out = _gpu0(torch.empty(shape, dtype=torch.bfloat16))
    call = rw.RowCall(FORWARD, POLICY)
    found = call._lookup(a, None, out, None, rw.RowExtras())
    assert found is not None
    plan = found[0].plan
    assert plan.kind == "split" and plan.one_launch is one
    assert (shape[0] * shape[1] * 2 <= POLICY.one_launch_bytes) is one
    # the two-launch kernels a later capture needs are compiled ahead of a one-launch call
    assert [p.one_launch for p in ahead] == ([False] if one else [])


def test_calls_from_the_registered_op_never_take_the_one_launch_split(monkeypatch) -> None:
    # Compiled code calls the op; under mode="reduce-overhead" its warm-up runs would put the
    # one launch's cached scratch in the CUDA graphs' private pool (torch refuses that).
    monkeypatch.setattr(rw, "INTERPRETER", False)
    monkeypatch.setattr(rw, "current_device", lambda: 0)
    monkeypatch.setattr(rw, "sm_count", lambda device: 132)
    monkeypatch.setattr(rw, "capturing", lambda: False)
    monkeypatch.setattr(rw, "_compile_ahead", lambda *args: None)
    a = _gpu0(torch.empty((4, 32769), dtype=torch.bfloat16))
    out = _gpu0(torch.empty((4, 32769), dtype=torch.bfloat16))
    call = rw.RowCall(FORWARD, POLICY)
    assert call._lookup(a, None, out, None, rw.RowExtras())[0].plan.one_launch  # type: ignore[index]
    plan = call._lookup(a, None, out, None, rw.RowExtras(), eager=False)[0].plan  # type: ignore[index]
    assert plan.kind == "split" and not plan.one_launch


def _spy_on_lookups(monkeypatch) -> list[bool]:  # type: ignore[no-untyped-def]
    """The ``eager`` flag of every ``RowCall._lookup`` from here on, in order."""
    seen: list[bool] = []
    original = rw.RowCall._lookup

    def spy(self, a, b, out, force, extras, eager=True):  # type: ignore[no-untyped-def]
        seen.append(eager)
        return original(self, a, b, out, force, extras, eager)

    monkeypatch.setattr(rw.RowCall, "_lookup", spy)
    return seen


@pytest.mark.parametrize("backward", [False, True])
def test_the_registered_ops_call_the_row_base_as_compiled_code(monkeypatch, backward) -> None:
    sm = importlib.import_module("kernels.softmax")  # the package attribute is the function
    seen = _spy_on_lookups(monkeypatch)
    x = torch.randn(3, 40, generator=torch.Generator().manual_seed(5))
    if backward:
        y = torch.softmax(x, -1)
        sm._softmax_backward_op(y, torch.randn_like(y), None, x.dtype)
    else:
        sm._softmax_op(x, None, None)
    assert seen == [False]
    seen.clear()
    sm._forward(x, None, x.dtype)
    assert seen == [True] or not seen  # the eager lane may skip the lookup on CPU


def test_one_launch_scratch_refuses_tickets_past_32_bits() -> None:
    with pytest.raises(ValueError, match="2\\^30 chunks"):
        rw._one_launch_scratch(2**16, 2**14, "cpu", torch.float32)


class _CudaLike(torch.Tensor):
    """A CPU tensor that says it is a CUDA tensor on GPU 0 (for the planner's device checks)."""

    def get_device(self) -> int:  # type: ignore[override]
        return 0

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True


def test_staged_plan_only_where_it_can_run(monkeypatch) -> None:
    # The staged kernel is Gluon: an NVIDIA GPU of compute capability 9.x, no interpreter, a
    # one-input call of 16/32-bit tensors whose rows share their alignment.
    from kernels.softmax import BACKWARD as SOFTMAX_BACKWARD

    monkeypatch.setattr(rw, "INTERPRETER", False)
    monkeypatch.setattr(rw, "sm_count", lambda device: 132)
    capability = [(9, 0)]
    monkeypatch.setattr(rw, "_capability", lambda index: capability[0])

    def cuda_like(shape, dtype=torch.bfloat16, width=None):  # type: ignore[no-untyped-def]
        t = torch.empty(shape[0], width or shape[1], dtype=dtype)[:, : shape[1]]
        return t.as_subclass(_CudaLike)

    call = rw.RowCall(FORWARD, POLICY)
    x, y = cuda_like((4096, 50257)), cuda_like((4096, 50257))
    plan, vec, align = call.plan(x, None, y, None)
    assert plan.kind == "staged" and (vec, align) == (8, rw.ALIGN_WINDOW)
    steps = rw._steps(FORWARD, plan, 50257, vec, align, torch.bfloat16, torch.bfloat16)
    assert len(steps) == 1 and steps[0].roles == rw.ROW_ROLES
    assert steps[0].consts == (50257, 4096, 13, 8, rw.ALIGN_WINDOW, steps[0].consts[5], 8)
    assert call.plan(x, None, cuda_like((4096, 50257), torch.float32), None)[0].kind == "staged"  # dtype=
    # not staged: another GPU generation, fp64, rows whose alignment differs, the backward,
    # the interpreter
    capability[0] = (8, 0)
    assert call.plan(x, None, y, None)[0].kind == "looped"
    with pytest.raises(ValueError, match="compute capability 9"):
        call.plan(x, None, y, "staged")
    capability[0] = (9, 0)
    x64 = cuda_like((4096, 20000), torch.float64)
    assert call.plan(x64, None, cuda_like((4096, 20000), torch.float64), None)[0].kind == "looped"
    shifted = cuda_like((4096, 50257), width=50258)  # row stride 50258 against y's 50257
    assert row_align(shifted, y) == rw.ALIGN_NONE
    assert call.plan(shifted, None, y, None)[0].kind == "looped"
    bwd = rw.RowCall(SOFTMAX_BACKWARD, BACKWARD_POLICY)
    with pytest.raises(ValueError, match="plan 'staged'"):
        bwd.plan(x, x, y, "staged")
    monkeypatch.setattr(rw, "INTERPRETER", True)
    assert call.plan(x, None, y, None)[0].kind == "looped"


def row_align(*tensors: torch.Tensor) -> int:
    return rw.row_layout(tensors)[1]


def _extras_call(which: str, rows: int, width: int, stride: int):  # type: ignore[no-untyped-def]
    # (op, policy, a, b, out, extras) of an RMSNorm or row-sum call with extras, every row
    # tensor with its own row stride and the weight, h and rstat in their own buffers.
    def rows_of(extra: int) -> torch.Tensor:
        return _gpu0(torch.empty(rows, stride + extra, dtype=torch.bfloat16)[:, :width])

    fwd, bwd, fpol, bpol = _rmsnorm_calls()
    w = _gpu0(torch.empty(width, dtype=torch.bfloat16))
    if which == "rmsnorm-residual":
        return fwd, fpol, rows_of(0), None, rows_of(16), rw.RowExtras(c=rows_of(8), w=w, out2=rows_of(24), arg=1e-5)
    if which == "rmsnorm-backward":
        rstd = _gpu0(torch.empty(rows, dtype=torch.float32))
        return bwd, bpol, rows_of(0), rows_of(8), rows_of(16), rw.RowExtras(c=rows_of(24), w=w, rstat=rstd, arg=1e-5)
    from kernels.rowsum import FORWARD as SUM
    from kernels.rowsum import POLICY as SUM_POLICY

    a = rows_of(0)
    return SUM, SUM_POLICY, a, None, a, rw.RowExtras(rstat=_gpu0(torch.empty(rows, dtype=torch.bfloat16)))


@pytest.mark.parametrize("kind", ["block", "looped", "split", "one-launch"])
@pytest.mark.parametrize("which", ["rmsnorm-residual", "rmsnorm-backward", "row-sum"])
def test_bound_call_launches_what_the_general_path_launches(monkeypatch, which, kind) -> None:
    # _Prepared.bound_call serves calls with extras (RowCall.lane_ext) from the pointers and
    # strides alone: every step, every role, every stride, the grid and the flags must be
    # the general path's; only the split's scratch pointers may differ.
    monkeypatch.setattr(rw, "INTERPRETER", False)
    monkeypatch.setattr(rw, "current_stream", lambda index: 12345)
    rows, width, stride = 3, 50257, 50264
    op, policy, a, b, out, extras = _extras_call(which, rows, width, stride)
    plan = plan_rows(rows, width, 2, 132, policy, "split" if kind == "one-launch" else kind, 7)
    if kind == "one-launch":
        plan = dataclasses.replace(plan, one_launch=True)
    steps = rw._steps(op, plan, width, 8, rw.ALIGN_WINDOW, torch.bfloat16, torch.bfloat16, extras.flags(op),
                      extras.arg)  # fmt: skip
    prepared = rw._Prepared(plan, steps, "cpu", False)
    launches = [Recorder(f"step{i}") for i in range(len(steps))]
    prepared.bound = [(launches[i], f"function{i}", f"metadata{i}", int(s.coop), int(s.pdl)) for i, s in
                      enumerate(steps)]  # fmt: skip
    prepared.resident = [5 if s.coop else 0 for s in steps]
    prepared(a, a if b is None else b, out, rows, extras)  # the general path (no single bound)
    general = [r.calls.pop() for r in launches]
    prepared.fast = prepared.bind_fast()
    tensors = rw._row_tensors(a, b, out, extras)
    prepared.bound_call(tuple(tensors[r].data_ptr() for r in rw.ROW_ROLES), rw._strides(tensors), rows)
    fast = [r.calls.pop() for r in launches]
    assert len(general) == len(fast) == len(steps) == (2 if kind == "split" else 1)
    for step, g, f in zip(steps, general, fast, strict=True):
        assert len(g) == len(f) == HEAD + len(step.roles) + 1 + 5 + len(step.consts)
        scratch = {HEAD + step.roles.index(r) for r in ("stats", "sync") if r in step.roles}
        differ = [i for i, (x, y) in enumerate(zip(g, f, strict=True)) if x != y]
        assert set(differ) <= scratch, (step.roles, differ)
    if kind == "split":  # both launches of one call read one statistics buffer
        assert fast[0][HEAD + steps[0].roles.index("stats")] == fast[1][HEAD + steps[1].roles.index("stats")]
    if which == "rmsnorm-residual" and kind == "split":  # the apply reads h back through h's own stride
        assert fast[1][HEAD] == extras.out2.data_ptr()
        assert fast[1][HEAD + len(steps[1].roles) + 1] == extras.out2.stride(0) != a.stride(0)


@pytest.mark.parametrize("which", ["rmsnorm-residual", "rmsnorm-backward", "row-sum"])
def test_lane_ext_launches_what_call_launches(monkeypatch, which) -> None:
    # RowCall.lane_ext: a miss goes through __call__ and remembers the prepared launch; a hit
    # launches exactly what __call__ launched, with no RowExtras and no lookup; another eps
    # or another layout of an extra tensor is another key.
    monkeypatch.setattr(rw, "INTERPRETER", False)
    monkeypatch.setattr(rw, "current_device", lambda: 0)
    monkeypatch.setattr(rw, "current_stream", lambda index: 12345)
    monkeypatch.setattr(rw, "sm_count", lambda device: 132)
    rows, width, stride = 5, 4097, 4104
    op, policy, a, b, out, extras = _extras_call(which, rows, width, stride)
    call = rw.RowCall(op, policy)
    found = call._lookup(a, b, out, None, extras)
    assert found is not None and found[0].plan.kind == "block"
    prepared = found[0]
    launch = Recorder("block")
    bound = (launch, "function", "metadata", 0, 0)
    prepared.bound = [bound]
    prepared.single = (*bound, prepared.steps[0].rows_per_program, prepared.steps[0].consts)
    prepared.fast = prepared.bind_fast()
    call(a, b, out, None, extras)
    general = launch.calls.pop()
    args = (a, b, out, extras.c, extras.w, extras.out2, extras.rstat, extras.arg)
    call.lane_ext(*args)  # a miss: __call__, then remembered
    assert launch.calls.pop() == general and len(call._lane) == 1
    monkeypatch.setattr(call, "_lookup", lambda *a, **k: pytest.fail("a lookup on a hit"))
    monkeypatch.setattr(rw, "RowExtras", lambda *a, **k: pytest.fail("RowExtras built on a hit"))
    call.lane_ext(*args)  # a hit
    assert launch.calls.pop() == general
    for c_ptr, i in ((extras.c, 2), (extras.w, 3), (extras.out2, 5), (extras.rstat, 6)):
        if c_ptr is not None:
            assert general[HEAD + i] == c_ptr.data_ptr()
    monkeypatch.undo()
    monkeypatch.setattr(rw, "INTERPRETER", False)
    monkeypatch.setattr(rw, "current_device", lambda: 0)
    monkeypatch.setattr(rw, "current_stream", lambda index: 12345)
    monkeypatch.setattr(rw, "sm_count", lambda device: 132)
    calls: list[object] = []
    monkeypatch.setattr(rw.RowCall, "__call__", lambda self, *args, **kw: calls.append(args))
    call.lane_ext(*args[:7], 2e-5)  # another eps: another key, through __call__
    assert len(calls) == 1 and not launch.calls
    # A NaN eps is never equal to itself: a key remembered for it would never be found again,
    # and every call would add one (here the lookup hands back the bound launch, as it would).
    lanes = len(call._lane)
    monkeypatch.setattr(call, "_lookup", lambda *a, **k: (prepared, (), ()))
    for _ in range(3):
        call.lane_ext(*args[:7], float("nan"))
    assert len(calls) == 4 and len(call._lane) == lanes


def test_split_in_a_capture_takes_its_statistics_alone_and_merges_a_row_a_program(monkeypatch) -> None:
    """While a stream captures, the two-launch split takes a statistics buffer of its own and
    no zeroed counters: a ``torch.zeros`` in a capture is a fill kernel in every replay (about
    a microsecond a call for the row sum at 16 x 1048576 on the H200).  And an op with no row
    output (the row sum) merges with one program per row, reading what its reduce wrote."""
    from kernels.plans import ROW_SUM_POLICY
    from kernels.rowsum import FORWARD as ROW_SUM

    monkeypatch.setattr(rw, "current_stream", lambda index: 12345)
    monkeypatch.setattr(rw, "capturing", lambda: True)
    rows, width = 4, 1 << 20
    plan = plan_rows(rows, width, 2, 132, ROW_SUM_POLICY)
    assert plan.kind == "split" and plan.chunks > 1
    ext = rw.RowExtras(rstat=torch.empty(rows)).flags(ROW_SUM)
    steps = rw._steps(ROW_SUM, plan, width, 8, rw.ALIGN_ROWS, torch.bfloat16, torch.bfloat16, ext)
    prepared = rw._Prepared(plan, steps, "cpu", False)
    launches = [Recorder("reduce"), Recorder("merge")]
    prepared.bound = [(launches[i], f"function{i}", f"metadata{i}", 0, i) for i in range(2)]
    prepared.fast = prepared.bind_fast()
    zeros: list[object] = []
    real = torch.zeros
    monkeypatch.setattr(rw.torch, "zeros", lambda *a, **k: zeros.append(a) or real(*a, **k))
    prepared.bound_call((1, 2, 3, 4, 5, 6, 7), (width,) * 5, rows)
    assert not zeros, "counters allocated (and zeroed) in a capture"
    reduce, merge = (r.calls.pop() for r in launches)
    assert reduce[0] == rows * plan.chunks and merge[0] == rows
    assert reduce[HEAD + steps[0].roles.index("stats")] == merge[HEAD + steps[1].roles.index("stats")]


@pytest.mark.parametrize("op", ["rms_norm", "rms_norm_residual", "rms_norm_backward", "row_sum"])
def test_the_registered_ops_of_rmsnorm_and_row_sum_call_the_row_base_as_compiled_code(monkeypatch, op) -> None:
    # The bound lane of an eager call keeps the split's statistics in a buffer cached across
    # calls; a registered op (compiled code) must not reach it, or a warm-up under
    # mode="reduce-overhead" would allocate that buffer in the CUDA graphs' private pool.
    rms = importlib.import_module("kernels.rmsnorm")
    rs = importlib.import_module("kernels.rowsum")
    seen = _spy_on_lookups(monkeypatch)
    gen = torch.Generator().manual_seed(7)
    x, r = torch.randn(3, 40, generator=gen), torch.randn(3, 40, generator=gen)
    w = torch.randn(40, generator=gen)
    calls = {
        "rms_norm": (lambda: rms._rms_norm_op(x, w, 1e-6, 40, None), lambda: rms._forward(x, None, w, 1e-6, 40, None)),
        "rms_norm_residual": (lambda: rms._rms_norm_residual_op(x, r, w, 1e-6, 40, None),
                              lambda: rms._forward(x, r, w, 1e-6, 40, None)),
        "rms_norm_backward": (lambda: rms._rms_norm_backward_op(x, r, None, w, 1e-6, 40, None, False),
                              lambda: rms._backward(x, r, None, w, 1e-6, 40, None, False)),
        "row_sum": (lambda: rs._row_sum_op(x, False, None), lambda: rs._forward(x, False, None)),
    }  # fmt: skip
    registered, eager = calls[op]
    registered()
    assert seen and not any(seen), seen
    seen.clear()
    eager()
    assert seen and all(seen), seen


@pytest.mark.parametrize("which", ["rmsnorm-residual", "row-sum"])
def test_compiled_calls_of_a_split_key_never_take_the_bound_split(monkeypatch, which) -> None:
    # A split key remembered by an eager call is served by the bound split and its cached
    # statistics; the same key from compiled code (eager=False) goes to __call__ as compiled
    # code instead (the cache must not be allocated in a reduce-overhead warm-up's pool).
    monkeypatch.setattr(rw, "INTERPRETER", False)
    monkeypatch.setattr(rw, "current_device", lambda: 0)
    monkeypatch.setattr(rw, "current_stream", lambda index: 12345)
    monkeypatch.setattr(rw, "sm_count", lambda device: 132)
    monkeypatch.setattr(rw, "capturing", lambda: False)
    monkeypatch.setattr(rw, "_compile_ahead", lambda *args: None)
    rows, width, stride = 3, 1 << 21, 1 << 21  # 12 MB a row tensor: past one_launch_bytes, two launches
    op, policy, a, b, out, extras = _extras_call(which, rows, width, stride)
    call = rw.RowCall(op, policy)
    prepared = call._lookup(a, b, out, None, extras)[0]  # type: ignore[index]
    assert prepared.plan.kind == "split" and not prepared.plan.one_launch
    launches = [Recorder("reduce"), Recorder("apply")]
    prepared.bound = [(launches[i], f"function{i}", f"metadata{i}", 0, i) for i in range(2)]
    prepared.fast = prepared.bind_fast()
    cached: list[int] = []
    monkeypatch.setattr(rw, "_split_stats", lambda n, c, i, d: cached.append(n) or torch.empty(n * c * 2))
    modes: list[bool] = []
    monkeypatch.setattr(rw.RowCall, "__call__", lambda self, *args, eager=True: modes.append(eager))
    args = (a, b, out, extras.c, extras.w, extras.out2, extras.rstat, extras.arg)
    call.lane_ext(*args)  # the first eager call: through __call__, then remembered as a split lane
    assert modes == [True] and isinstance(next(iter(call._lane.values())), rw._SplitLane)
    call.lane_ext(*args)  # an eager hit: the bound split, the cached statistics
    assert modes == [True] and cached == [rows] and all(len(r.calls) == 1 for r in launches)
    call.lane_ext(*args, eager=False)  # compiled code, the same key: __call__ as compiled code
    assert modes == [True, False] and cached == [rows] and all(len(r.calls) == 1 for r in launches)
