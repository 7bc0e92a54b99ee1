"""The GEMM study (bench/studies/matmul.py, issue 9) on CPU: which variants each case offers,
the counted work, and the harness checking our kernel (through the Triton interpreter) and
cuBLAS's stand-in against float64 on tiny odd shapes, every record a valid run-file entry."""

from __future__ import annotations

import pytest
import synthruns
import torch

from bench import harness
from bench.backends import HostBackend
from bench.studies import matmul as mm
from contract.schema import _Checker, _validate_meta, validate_run

STUDY = mm.STUDY


def _case(m: int, n: int, k: int, *, op: str = "mm", direction: str = "fwd", dtype: str = "bf16") -> dict:
    return {"op": op, "direction": direction, "dtype": dtype, "rows": m, "cols": n, "k": k}


def _names(case: dict) -> list[str]:
    return [v.name for v in STUDY.variants(case)]


def test_variants_each_case_offers() -> None:
    big = _names(_case(4096, 4096, 4096))
    assert big[:6] == ["triton", "triton-fixed", "triton-autotuned", "triton-persistent", "triton-warp-specialized",
                       "triton-group1"]  # fmt: skip
    assert "triton-split-k" not in big and big[-2:] == ["cublas", "compile"]
    assert {"triton-group4", "triton-group8"} <= set(big)
    decode = _names(_case(16, 4096, 14336))
    assert "triton-split-k" in decode and "triton-group1" not in decode  # grouping: 4096³ and 8192³ only
    assert "triton-group1" not in _names(_case(4096, 4096, 4096, dtype="fp16"))
    assert _names(_case(4096, 4096, 4096, direction="fwd+bwd")) == ["triton", "cublas", "compile"]
    gelu = _names(_case(8192, 8192, 8192, op="mm_bias_gelu"))
    assert gelu[-3:] == ["cublas-bias-gelu", "cublaslt-bias-gelu", "compile-bias-gelu"]
    assert "triton-split-k" not in gelu and "triton-group1" not in gelu
    # The study's cases: every size the issue names, ids unique, the registry's params held.
    cases = STUDY.cases(False)
    shapes = {(c["rows"], c["cols"], c["k"]) for c in cases if c["op"] == "mm" and c["dtype"] == "bf16"}
    assert set(mm.SHAPES) | set(mm.DECODE) <= shapes
    assert {(1, 4096, 4096), (128, 4096, 14336), (16384, 1024, 1024), (8192, 5120, 13824)} <= shapes
    assert {c["dtype"] for c in cases} == {"bf16", "fp16", "tf32", "fp32"}
    assert {c["op"] for c in cases} == {"mm", "mm_bias", "mm_bias_gelu", "mm_residual"}
    # Held-out shapes: each variant forced and cuBLAS, no torch.compile; disjoint from the studied ones.
    held = [c for c in cases if mm.held_out(c)]
    assert {(c["rows"], c["cols"], c["k"]) for c in held} == set(mm.HELD_OUT) and len(held) == len(mm.HELD_OUT)
    studied = set(mm.SHAPES) | set(mm.DECODE) | set(mm.FP16_SHAPES) | set(mm.FP32_SHAPES) | set(mm.STEP_SHAPES)
    assert not set(mm.HELD_OUT) & (studied | set(mm.TUNED_ON))
    # The first held-out set, which the rule was refitted to, still runs, as studied shapes.
    tuned = [c for c in cases if (c["rows"], c["cols"], c["k"]) in set(mm.TUNED_ON) and c["direction"] == "fwd"]
    assert len(tuned) == len(mm.TUNED_ON) and not any(mm.held_out(c) for c in tuned)
    assert _names(_case(2560, 2560, 2560)) == ["triton", "triton-fixed", "triton-autotuned", "triton-persistent",
                                               "triton-warp-specialized", "cublas"]  # fmt: skip
    assert "triton-split-k" in _names(_case(32, 4096, 14336))
    assert not mm.held_out(_case(2560, 2560, 2560, dtype="fp16")) and not mm.held_out(_case(4096, 4096, 4096))
    meta = next(v for v in STUDY.variants(_case(2560, 2560, 2560)) if v.name == "triton").meta(_case(2560, 2560, 2560))
    assert meta["held_out"] is True and meta["variant"] == "default dispatch"
    assert isinstance(meta["dispatch_rule"], str) and len(meta["dispatch_rule"]) == 10


def test_counted_work_is_the_problem() -> None:
    assert STUDY.traffic(_case(4, 5, 6)) == ((4 * 6 + 6 * 5 + 4 * 5) * 2, 2 * 4 * 5 * 6)
    assert STUDY.traffic(_case(4, 5, 6, dtype="tf32"))[0] == (4 * 6 + 6 * 5 + 4 * 5) * 4
    step = STUDY.traffic(_case(4, 5, 6, direction="fwd+bwd"))
    assert step == (2 * (4 * 6 + 6 * 5 + 4 * 5) * 2, 6 * 4 * 5 * 6)  # + dC read, dA and dB written
    assert STUDY.traffic(_case(4, 5, 6, op="mm_bias"))[0] == (4 * 6 + 6 * 5 + 4 * 5 + 5) * 2
    assert STUDY.traffic(_case(4, 5, 6, op="mm_residual"))[0] == (4 * 6 + 6 * 5 + 2 * 4 * 5) * 2
    assert STUDY.case_id(_case(1, 4096, 14336)) == "fwd/bf16/1x4096x14336"
    assert STUDY.case_id(_case(8, 8, 8, op="mm_bias_gelu")) == "mm_bias_gelu/fwd/bf16/8x8x8"


class _Cheap:
    """The study without torch.compile and cuBLASLt (GPU business)."""

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(STUDY, name)

    def variants(self, case: dict) -> list:
        return [v for v in STUDY.variants(case) if not v.name.startswith(("compile", "cublaslt"))]


@pytest.mark.parametrize(
    "case",
    [
        _case(5, 7, 9),
        _case(3, 33, 65, dtype="fp16"),
        _case(6, 5, 17, dtype="fp32"),
        _case(5, 7, 9, direction="fwd+bwd"),
        _case(5, 7, 9, op="mm_bias_gelu"),
        _case(5, 7, 9, op="mm_residual"),
    ],
    ids=lambda c: STUDY.case_id(c),
)
def test_harness_checks_ours_and_cublas_on_tiny_shapes(case) -> None:
    pytest.importorskip("kernels.matmul")
    (entry,) = harness.measure_case(_Cheap(), case, 0, HostBackend(), harness.Options(rounds=2, l2_modes=("warm",)))
    assert (entry["bytes"], entry["flops"]) == STUDY.traffic(case)
    outputs = 3 if case["direction"] == "fwd+bwd" else 1
    for name, v in entry["variants"].items():
        assert v["error"] is None, (name, v["error"])
        assert v["check"]["passed"] and len(v["check"]["rel_l2"]) == outputs, name
    ours = entry["variants"]["triton"]["meta"]
    assert ours["variant"] == "default dispatch" and ours["evidence"].startswith("no GPU")
    cublas = next(v for n, v in entry["variants"].items() if n.startswith("cublas"))["meta"]
    assert isinstance(cublas["allow_bf16_reduced_precision_reduction"], bool)
    doc = synthruns.document("matmul", "matmul-20261201T000000Z-aaaaaaa", "2026-12-01T00:00:00Z", [entry],
                             eager=True, version=4, timer="host-clock")  # fmt: skip
    validate_run(doc, "test", allow_host_timer=True)


def test_reference_is_float64_of_each_epilogue() -> None:
    gen = torch.Generator().manual_seed(0)
    case = _case(3, 4, 5, op="mm_bias_gelu")
    t = STUDY.inputs(case, torch.device("cpu"), gen)
    (ref,) = STUDY.reference(case, t)
    z = t["a"].double() @ t["b"].double() + t["bias"].double()
    assert torch.allclose(ref, torch.nn.functional.gelu(z, approximate="tanh"), rtol=1e-12, atol=1e-12)
    step = _case(3, 4, 5, direction="fwd+bwd")
    t = STUDY.inputs(step, torch.device("cpu"), gen)
    c, da, db = STUDY.reference(step, t)
    a, b, dc = (t[x].detach().double() for x in ("a", "b", "dc"))
    assert torch.allclose(da, dc @ b.T) and torch.allclose(db, a.T @ dc) and c.dtype == torch.float64


def test_evidence_that_cannot_be_read_is_recorded_beside_the_meta(monkeypatch) -> None:
    """On a machine that claims a GPU it cannot use, the meta still says what the variant is,
    with why the compiled code could not be read: a meta never stops a case."""
    pytest.importorskip("kernels.matmul")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    case = _case(64, 4096, 4096, direction="fwd+bwd")
    meta = STUDY.variants(case)[0].meta(case)
    assert meta["variant"] == "default dispatch" and "evidence_error" in meta
    assert isinstance(meta["dispatch"], str)
    _validate_meta(_Checker("test"), meta, "meta")  # what a run file accepts


def test_the_default_records_its_choice_under_each_timer(monkeypatch) -> None:
    """A decode shape's default runs one variant in a captured graph (the device time) and
    another eagerly: the meta records both, and the evidence is read from the graph's choice
    for a forward product (a training step's backward products are inspected as called)."""
    monkeypatch.setattr(mm, "_dispatch", lambda case, captured: "split_k" if captured else "autotuned")
    inspected = []
    monkeypatch.setattr(mm, "_evidence", lambda case, forced, config: inspected.append(forced) or {})
    for direction in ("fwd", "fwd+bwd"):
        case = _case(16, 4096, 4096, direction=direction)
        meta = next(v for v in STUDY.variants(case) if v.name == "triton").meta(case)
        assert meta["dispatch"] == "split_k" and meta["dispatch_eager"] == "autotuned"
        _validate_meta(_Checker("test"), meta, "meta")  # what a run file accepts
    assert inspected == ["split_k", None]
    monkeypatch.setattr(mm, "_dispatch", lambda case, captured: "autotuned")
    case = _case(16, 4096, 4096)
    next(v for v in STUDY.variants(case) if v.name == "triton").meta(case)
    assert inspected[-1] is None  # one choice: inspected as the default call makes it


def test_dispatch_is_asked_as_each_timer_runs(monkeypatch) -> None:
    # kills B7: _dispatch passes ``captured`` on to kernels.matmul.dispatch
    km = mm._km()
    asked = []
    monkeypatch.setattr(
        km,
        "dispatch",
        lambda a, b, epilogue, precision, captured=False: (
            asked.append((tuple(a.shape), tuple(b.shape), epilogue, captured))
            or ("split_k" if captured else "autotuned")
        ),
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    real_empty = torch.empty
    monkeypatch.setattr(
        torch, "empty", lambda *shape, device=None, dtype=None: real_empty(*shape, device="meta", dtype=dtype)
    )
    case = _case(16, 4096, 4096, op="mm_bias")
    assert mm._dispatch(case, captured=True) == "split_k"
    assert mm._dispatch(case, captured=False) == "autotuned"
    assert asked == [((16, 4096), (4096, 4096), "bias", True), ((16, 4096), (4096, 4096), "bias", False)]


def test_the_default_records_the_tile_its_choice_runs(monkeypatch) -> None:
    # the page counts a partial last wave in these tiles: a cooperative warp-specialized tile
    # for a plain product, ping-pong's for an epilogue (the cooperative entry takes none)
    km = mm._km()
    pp, coop = km.TileConfig(128, 128, 64, 8, 5, 4), km.TileConfig(128, 256, 32, 8, 6, 8)
    monkeypatch.setattr(km, "WS_TILES", (km.WsTile(pp, 1.0), km.WsTile(coop, 0.9, epilogues=False)))
    monkeypatch.setattr(km, "INTERPRETER", False)
    monkeypatch.setattr(km, "sm_count", lambda device: 132)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(km, "_gpu_name", lambda index: "NVIDIA H200")  # WS_TILES, as patched
    plain, bias = _case(4096, 4096, 4096), _case(4096, 4096, 4096, op="mm_bias")
    assert mm._dispatch_tile(plain, "warp_specialized") == "128x256"
    assert mm._dispatch_tile(bias, "warp_specialized") == "128x128"
    assert mm._dispatch_tile(plain, "persistent") == "128x256"
    assert mm._dispatch_tile(plain, "autotuned") is None  # it picks its own
    assert mm._dispatch_tile(plain, "unknown (RuntimeError)") is None
    # the GPU's own table (kernels.matmul.ws_tiles): the H200's ping-pong alone here
    monkeypatch.setattr(km, "ws_tiles", lambda device: (km.WsTile(pp, 1.0),))
    assert mm._dispatch_tile(plain, "warp_specialized") == "128x128"
    monkeypatch.setattr(km, "sm_count", lambda device: (_ for _ in ()).throw(RuntimeError("no SMs")))
    assert mm._dispatch_tile(plain, "persistent") == "unknown (RuntimeError)"  # recorded, not raised
    monkeypatch.setattr(mm, "_dispatch", lambda case, captured: "warp_specialized")
    monkeypatch.setattr(mm, "_dispatch_tile", lambda case, variant: f"tile of {variant}")
    monkeypatch.setattr(mm, "_evidence", lambda case, forced, config: {})
    meta = next(v for v in STUDY.variants(plain) if v.name == "triton").meta(plain)
    assert meta["dispatch_tile"] == "tile of warp_specialized"


def test_an_unreadable_captured_choice_is_not_inspected(monkeypatch) -> None:
    # kills B5: only a forced variant's name may replace the inspected call
    monkeypatch.setattr(mm, "_dispatch", lambda case, captured: "unknown (RuntimeError)" if captured else "autotuned")
    inspected = []
    monkeypatch.setattr(mm, "_evidence", lambda case, forced, config: inspected.append(forced) or {})
    case = _case(16, 4096, 4096)
    next(v for v in STUDY.variants(case) if v.name == "triton").meta(case)
    assert inspected == [None]


def test_held_out_holds_the_decode_sets_as_chosen() -> None:
    # each blind set's shapes, as written down before its run (bench/studies/matmul.py); a
    # shape dropped or mistyped would leave a set untimed, or time another shape
    eleventh = {(32, 5120, 4096), (4, 3584, 4608), (48, 6144, 5120), (80, 4096, 5120), (12, 2560, 3072)}
    twelfth = {(96, 4096, 6144), (112, 5120, 4096), (72, 2048, 4608), (128, 3072, 4096), (24, 4096, 3584),
               (32, 11008, 4096)}  # fmt: skip
    assert eleventh | twelfth <= set(mm.HELD_OUT)
    assert len(set(mm.HELD_OUT)) == len(mm.HELD_OUT)
