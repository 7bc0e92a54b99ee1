"""The GEMM case study (issue 9): its page declared (peers, targets, tables, charts), and what
only a matrix product has: TFLOP/s against the bf16 matrix rate measured in the same run,
every Triton variant forced beside the default dispatch with the compiled code's evidence
(registers, spills, shared memory, HGMMA against HMMA), the grouping study, the fused
epilogues, and the decode shapes read as weight traffic.  The generic machinery is
:mod:`publish.studypage`; the prose is ``templates/matmul.md.j2``.  Peers and their labels
come from the run files; every evidence number from a variant's stored meta."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from publish.claims import Claim, sentence
from publish.numbers import Num, definition
from publish.results import CaseResult, Measurement
from publish.studypage.claims import eager_flips
from publish.studypage.common import DEVICE_TIME, cases_evidence, count, l2_cell, meta_num, refusal, time_or_why
from publish.studypage.spec import (
    BANDWIDTH,
    DIRECTION_TITLES,
    DTYPE_ORDER,
    THROUGHPUT,
    AtLeast,
    Case,
    DeviceVsEager,
    Faster,
    MatrixShareAt,
    NoSlower,
    Speedups,
    SpeedupsAt,
    StudyPage,
    StudyView,
    Target,
    Throughput,
)
from publish.tables import Column, Table, Text

OURS = "triton"  # the default dispatch
FORCED = ("triton-fixed", "triton-autotuned", "triton-persistent", "triton-warp-specialized", "triton-split-k")
GROUPED = ("triton-group1", "triton-group4", "triton-group8", "triton-group16")
TRITON = (OURS, *FORCED, *GROUPED)
# Named per operator by the bench (a name means one variant, with one label, across the study).
EPILOGUE_PEERS = {
    "mm_bias": ("cublas-bias", "compile-bias"),
    "mm_bias_gelu": ("cublas-bias-gelu", "cublaslt-bias-gelu", "compile-bias-gelu"),
    "mm_residual": ("cublas-residual", "compile-residual"),
}
PEERS = ("cublas", "compile", *(p for peers in EPILOGUE_PEERS.values() for p in peers))
OPS = {"mm": "product", "mm_bias": "with bias", "mm_bias_gelu": "with bias and GELU", "mm_residual": "with residual"}
DECODE_MAX_M = 128  # a decode-like product: at most this many rows (bench/studies/matmul.py) ...
DECODE_MIN_WEIGHT = 1024 * 4096  # ... against a weight (N·K) at least this large (8 MB in bf16)
# The output tile of each kernel the dispatch can choose from a wave up (kernels.matmul's
# PERSISTENT_CONFIG and WS_CONFIG; the warp-specialized kernel's two consumers take its tiles
# one at a time, so its waves count these): what a partial last wave is counted in.
WAVE_TILES = {"persistent": (128, 256), "warp_specialized": (128, 128)}
IDLE_WAVE = 0.1  # a loss is put down to the last wave where it leaves at least this share idle


def decode(c: CaseResult) -> bool:
    """A decode-like product: a few rows against a model's weight (weight-read bound)."""
    p = c.params
    return p.get("op") == "mm" and p["rows"] <= DECODE_MAX_M and p["cols"] * p["k"] >= DECODE_MIN_WEIGHT


# Set, not measured: the targets (issue 9's performance list).
PARITY = definition(0.98, "x_set", "target: our speed at least this fraction of cuBLAS's (its time over ours)")
STEP_PARITY = definition(0.95, "x_set", "target: our training step's speed at least this fraction of PyTorch's")


def mm(direction: str, dtype: str, m: int, n: int, k: int, op: str = "mm") -> Case:
    """A case of the study: C[m, n] = A[m, k] · B[k, n] (rows, cols, k)."""
    return Case(direction, dtype, m, n, op=op, more=(("k", k),))


CUBE_4096 = {dtype: mm("fwd", dtype, 4096, 4096, 4096) for dtype in ("bf16", "fp16")}
CUBE_8192 = {dtype: mm("fwd", dtype, 8192, 8192, 8192) for dtype in ("bf16", "fp16")}
BIAS_GELU = mm("fwd", "bf16", 8192, 8192, 8192, op="mm_bias_gelu")
STEP = mm("fwd+bwd", "bf16", 4096, 4096, 4096)


def _parity(case: Case) -> Target:
    m, n, k = case.rows, case.cols, case.more[0][1]
    return Target(f"target-cublas-{case.dtype}-{m}x{n}x{k}", AtLeast("cublas", PARITY), case)


# ----------------------------------------------------------------------------- evidence from meta


def matrix_path(c: CaseResult, variant: str) -> str:
    m = c.variants.get(variant)
    return str(m.meta.get("matrix_path") or "not recorded") if m is not None else "—"


def _triton_present(cases: list[CaseResult]) -> list[str]:
    return [v for v in TRITON if any(v in c.variants for c in cases)]


def _title(c: CaseResult) -> str:
    """ "Forward, bf16, 8192×8192×8192" (then the epilogue: ", with bias and GELU")."""
    op = c.params.get("op", "mm")
    tail = "" if op == "mm" else f", {OPS.get(op, op)}"
    return f"{DIRECTION_TITLES.get(c.params['direction'], c.params['direction'])}, {c.params['dtype']}, {c.shape}{tail}"


def _short(c: CaseResult) -> str:
    """ "bf16 8192×8192×8192" (then "step" for a training step, the epilogue's name): for wide tables."""
    op = c.params.get("op", "mm")
    parts = [c.params["dtype"], c.shape] + (["step"] if c.params["direction"] == "fwd+bwd" else [])
    return " ".join(parts + ([] if op == "mm" else [op.removeprefix("mm_")]))


def _order(c: CaseResult) -> tuple[Any, ...]:
    op = c.params.get("op", "mm")
    dtype = c.params["dtype"]
    rank = DTYPE_ORDER.index(dtype) if dtype in DTYPE_ORDER else len(DTYPE_ORDER)
    return (list(OPS).index(op) if op in OPS else len(OPS), c.params["direction"], rank, c.dims, c.params["l2"])


def _tiles(c: CaseResult, variant: str) -> list[str] | None:
    """The tiles the variant's kernels were compiled for, as the sweep read them (the meta's
    ``tiles``; the autotuner's choice can differ from one run to the next), None where any
    is missing."""
    m = c.variants.get(variant)
    tiles = m.meta.get("tiles") if m is not None else None
    if not isinstance(tiles, list) or not tiles or not all(isinstance(t, str) and t for t in tiles):
        return None
    return [str(t) for t in tiles]


def evidence_table(view: StudyView) -> Table | None:
    """Every Triton variant of every cold case: its time, TFLOP/s, and what its compiled code
    is made of (read from the kernels by the sweep)."""
    cases = sorted((c for c in view.results.cases.values() if c.params["l2"] == "cold"), key=_order)
    rows = [(c, v) for c in cases for v in _triton_present([c]) if v in c.variants]
    if not rows:
        return None
    cols = [
        Column("case", "Case", numeric=False),
        Column("variant", "Variant", numeric=False),
        Column("time", "µs", f"{DEVICE_TIME}, cold L2"),
        Column("tflops", "TFLOP/s", "flops counted from the problem / median device time"),
        Column("regs", "Regs", "per thread, the largest of the call's kernels"),
        Column("spills", "Spills", "registers spilled to local memory, all kernels of the call"),
        Column("smem", "Smem (B)", "shared memory per program, the largest of the call's kernels"),
        Column("hgmma", "HGMMA", "warpgroup matrix instructions (wgmma) in the SASS: Hopper's tensor-core path"),
        Column("hmma", "HMMA", "warp-level matrix instructions (mma.sync) in the SASS: the pre-Hopper path"),
        Column("tma", "TMA", "tensor-memory-accelerator copies (UTMALDG, UTMASTG) in the SASS"),
        Column("cp_async", "cp.async", "LDGSTS copies in the SASS"),
        Column(
            "setmaxreg",
            "setmaxnreg",
            "USETMAXREG in the SASS: registers moved between the warp-specialized partitions (producer and consumer "
            "warps)",
        ),
        Column("path", "Path", "which matrix instruction the code uses", numeric=False),
    ]
    if any(_tiles(c, v) is not None for c, v in rows):  # recorded by runs from commit b5dfd30 on (bench/evidence.py)
        cols.insert(4, Column("tile", "Tile", "BLOCK_M×BLOCK_N×BLOCK_K, stages, warps, as compiled", numeric=False))
    table = Table(
        "matmul-evidence",
        "Every Triton variant: its time and what the compiled code is made of (cold L2; instruction counts are "
        "static, a loop body counts once)",
        cols,
    )
    for c, v in rows:
        m = c.get(v)
        row: dict[str, Any] = {"case": _short(c), "variant": Text(view.label(v)), "time": time_or_why(c, v)}
        if m is not None and m.flops > 0:
            t = m.tflops()
            row["tflops"] = Num(t.value, "TFLOPs_bare", t.sources, t.note)
        row |= {
            "regs": meta_num(c, v, "regs"),
            "spills": meta_num(c, v, "spills"),
            "smem": meta_num(c, v, "smem_bytes"),
            "hgmma": meta_num(c, v, "sass_hgmma"),
            "hmma": meta_num(c, v, "sass_hmma"),
            "tma": meta_num(c, v, "sass_tma"),
            "cp_async": meta_num(c, v, "sass_cp_async"),
            "setmaxreg": meta_num(c, v, "sass_setmaxreg"),
            "path": Text(matrix_path(c, v)),
        }
        if cols[4].key == "tile":
            tiles = _tiles(c, v)
            row["tile"] = (
                Text(" + ".join(tiles), "the tile each kernel of the call was compiled for")
                if tiles
                else (Text("—", "not recorded (a run before the tile was recorded, or a kernel naming no tile)"))
            )
        table.rows.append(row)
    return table


# ----------------------------------------------------------------------------- the dispatch's regret
# Set, not measured: the regret the dispatch may leave on a held-out shape.
REGRET_LINE = definition(
    1.05, "x_set", "threshold: the fastest forced variant at most this many times faster than the dispatch's choice"
)


def forced_cases(view: StudyView) -> list[CaseResult]:
    """The forward products timed with every variant forced beside the default, in page order."""
    return sorted((c for c in view.where(direction="fwd") if any(v in c.variants for v in FORCED)), key=_order)


RULE_NOTES = {
    "another": "chosen under another dispatch rule than the newest run's: the rule in force now may choose otherwise, "
    "and the regret observations do not score this case",
    "not recorded": "its run predates the record of the dispatch rule: the rule in force now may choose otherwise, "
    "and the regret observations do not score this case",
    "unreadable": "the sweep could not fingerprint the dispatch rule for this run (its meta says why): the regret "
    "observations do not score this case",
}


def held_out(c: CaseResult) -> bool:
    """A shape whose timings set nothing in the dispatch (the sweep's ``HELD_OUT``, recorded in
    the default's meta; runs from before held-out shapes say nothing, and count as not held out)."""
    ours = c.variants.get(OURS)
    return ours is not None and ours.meta.get("held_out") is True


def rule(c: CaseResult) -> str | None:
    """The fingerprint of the dispatch rule that made the case's choice as the run recorded it
    (``kernels.matmul.dispatch_rule``; "unknown (...)" where the sweep could not read it),
    None where its run predates the record."""
    ours = c.variants.get(OURS)
    found = ours.meta.get("dispatch_rule") if ours is not None else None
    return found if isinstance(found, str) else None


def _readable(fingerprint: str | None) -> bool:
    return fingerprint is not None and not fingerprint.startswith("unknown")


def newest_rule(cases: list[CaseResult]) -> tuple[str, CaseResult] | None:
    """The dispatch rule of the newest run among ``cases`` that recorded a readable one, and a
    case of that run (its source).  The newest *run*: a later re-run of an older commit makes
    its rule the one scored, and the page names the rule and the run."""
    ruled = [c for c in cases if _readable(rule(c))]
    if not ruled:
        return None
    newest = max(ruled, key=lambda c: c.run.started)
    return rule(newest), newest  # type: ignore[return-value]


def rule_status(c: CaseResult, newest: str | None) -> str | None:
    """None where the case's choice was made under ``newest``; else "another", "not recorded"
    or "unreadable" (the keys of ``RULE_NOTES``)."""
    found = rule(c)
    if found is None:
        return "not recorded"
    if not _readable(found):
        return "unreadable"
    return None if found == newest else "another"


def chosen_variant(ours: Measurement | None, eager: bool = False) -> str | None:
    """The variant the default dispatch ran under one timer, as the run recorded it: in the
    graph replays of the device time (``dispatch``) or in the eager calls (``eager``:
    ``dispatch_eager``; a decode shape's choice depends on whether the call is captured, see
    ``kernels.matmul.default_variant``).  A run before that record made one choice for both,
    and so does a device time not timed by graph replay (the harness's ``timer``)."""
    if ours is None:
        return None
    graph = ours.raw.get("timer", "cuda-graph") == "cuda-graph"
    found = ours.meta.get("dispatch_eager" if eager or not graph else "dispatch")
    if found is None:
        found = ours.meta.get("dispatch")
    return str(found) if found else None


# The dispatch's choices as the runs record them (kernels.matmul's variant names), as the page
# names them.
CHOICE_NAMES = {
    "fixed": "fixed tile",
    "autotuned": "autotuned",
    "persistent": "persistent",
    "warp_specialized": "warp-specialized",
    "split_k": "split-K",
}


def choice_name(recorded: str) -> str:
    """A recorded choice ("warp_specialized") as the page names it ("warp-specialized")."""
    return CHOICE_NAMES.get(recorded, recorded)


def dispatch_choice(c: CaseResult, eager: bool = False) -> tuple[str | None, str | None, str | None]:
    """(the variant the dispatch ran, as recorded, under the device timer or ``eager``; the
    variant whose time stands for it: its forced twin where timed, else the default itself;
    the fastest forced variant), each None where the run has no time for it."""
    chosen = chosen_variant(c.variants.get(OURS), eager)
    twin = "triton-" + str(chosen).replace("_", "-") if chosen else None
    stand = twin if twin in FORCED and c.get(twin) is not None else OURS if c.get(OURS) is not None else None
    timed = [v for v in FORCED if c.get(v) is not None]
    fastest = min(timed, key=lambda v: c.get(v).summary.median) if timed else None  # type: ignore[union-attr]
    return (str(chosen) if chosen else None), stand, fastest


def regret(c: CaseResult) -> Num | Text:
    """How many times faster the fastest forced variant ran than the dispatch's choice, by the
    one verdict (a tie where unresolved); "the fastest" where the choice was it."""
    _, stand, fastest = dispatch_choice(c)
    if stand is None or fastest is None:
        return Text("—", "no time for the dispatch's choice or for any forced variant")
    if stand == fastest:
        return Text("chose the fastest", "the dispatch's choice had the lowest median of the forced variants")
    return c.speedup(fastest, stand) or Text("—", "no ratio")


def _dispatch_cell(c: CaseResult, newest: str | None) -> Text:
    """What the dispatch chose, marked where another rule (or none recorded) chose it."""
    chosen = dispatch_choice(c)[0]
    status = rule_status(c, newest)
    if chosen is None:
        return Text("not recorded")
    eager = chosen_variant(c.variants.get(OURS), eager=True)
    shown = choice_name(chosen)
    if eager is not None and eager != chosen:  # a decode shape: split-K's second launch costs host time
        shown = f"{shown} in a CUDA graph, {choice_name(eager)} in an eager call"
    if status is None:
        return Text(shown, f"under dispatch rule {newest}, the newest run's")
    rule = "another rule" if status == "another" else f"rule {status}"
    return Text(f"{shown} ({rule})", RULE_NOTES[status])


def variants_table(view: StudyView) -> Table | None:
    """The forward products with every variant forced beside the default dispatch (and what
    it dispatched to), each variant's median, and cuBLAS's."""
    cases = forced_cases(view)
    if not cases:
        return None
    present = [v for v in (OURS, *FORCED, "cublas") if any(v in c.variants for c in cases)]
    cols = [Column("case", "Case", numeric=False), Column("l2", "L2", numeric=False)]
    cols += [Column(v, view.label(v), f"median µs, {DEVICE_TIME}") for v in present]
    cols.append(Column("dispatch", "Dispatch chose", "the variant the default dispatch ran", numeric=False))
    table = Table(
        "matmul-variants",
        f"Every variant forced, beside the default dispatch and cuBLAS (median µs, {DEVICE_TIME})",
        cols,
    )
    found = newest_rule(cases)
    for c in cases:
        row: dict[str, Any] = {"case": _title(c), "l2": l2_cell(c)}
        for v in present:
            row[v] = time_or_why(c, v)
        row["dispatch"] = _dispatch_cell(c, found[0] if found else None)
        table.rows.append(row)
    return table


def regret_table(view: StudyView) -> Table | None:
    """The dispatch scored, case by case: its choice, the fastest forced variant, the regret,
    and whether the shape is held out."""
    cases = forced_cases(view)
    if not cases:
        return None
    cols = [
        Column("case", "Case", numeric=False),
        Column("l2", "L2", numeric=False),
        Column("set", "Shape", "held out: its timings set nothing in the dispatch", numeric=False),
        Column("dispatch", "Dispatch chose", "the variant the default dispatch ran", numeric=False),
        Column("fastest", "Fastest forced", "the forced variant with the lowest median", numeric=False),
        Column("regret", "Regret", "the dispatch's choice's time / the fastest forced variant's"),
    ]
    table = Table(
        "matmul-regret", f"The dispatch's regret: its choice against the fastest variant ({DEVICE_TIME})", cols
    )
    found = newest_rule(cases)
    for c in cases:
        fastest = dispatch_choice(c)[2]
        table.rows.append(
            {
                "case": _title(c),
                "l2": l2_cell(c),
                "set": Text("held out" if held_out(c) else "studied"),
                "dispatch": _dispatch_cell(c, found[0] if found else None),
                "fastest": Text(view.label(fastest) if fastest else "—"),
                "regret": regret(c),
            }
        )
    return table


def _operands_vs_l2(c: CaseResult) -> Text:
    """A and B together against the L2 the run recorded: whether one pass of the operands fits."""
    size = {"bf16": 2, "fp16": 2}.get(c.params["dtype"], 4)
    operands = (c.params["rows"] * c.params["k"] + c.params["k"] * c.params["cols"]) * size
    l2 = int(c.run.env["gpu"]["l2_bytes"])
    mib = f"{operands / 2**20:,.0f} MiB of A and B against {l2 / 2**20:,.0f} MiB of L2"
    return Text(("exceed the L2: " if operands > l2 else "fit in the L2: ") + mib)


def grouping_table(view: StudyView) -> Table | None:
    """One tile, several tile orders: each GROUP_M's time, and each against GROUP_M 1 (the
    groups a run timed: 1, 4 and 8; 16 too since the default took it)."""
    cases = sorted((c for c in view.results.cases.values() if "triton-group1" in c.variants), key=_order)
    if not cases:
        return None
    groups = [v for v in GROUPED if any(v in c.variants for c in cases)]
    cols = [Column("case", "Case", numeric=False), Column("l2", "L2", numeric=False)]
    cols += [Column(v, view.label(v), f"median µs, {DEVICE_TIME}") for v in groups]
    for v in groups[1:]:
        g = v.removeprefix("triton-group")
        why = f"GROUP_M 1's time / GROUP_M {g}'s: above 1.00× grouping is faster"
        cols.append(Column(f"g{g}", f"GROUP_M {g} vs 1", why))
    cols.append(Column("fits", "Operands and L2", numeric=False))
    names = ", ".join(v.removeprefix("triton-group") for v in groups)
    table = Table("matmul-grouping", f"The grouping study: one tile, GROUP_M {names} (median µs, {DEVICE_TIME})", cols)
    for c in cases:
        row: dict[str, Any] = {"case": _title(c), "l2": l2_cell(c)}
        for v in groups:
            row[v] = time_or_why(c, v)
        for v in groups[1:]:
            row["g" + v.removeprefix("triton-group")] = c.speedup(v, "triton-group1") or refusal(c, v)
        row["fits"] = _operands_vs_l2(c)
        table.rows.append(row)
    return table


def epilogue_table(view: StudyView) -> Table | None:
    """The fused epilogues: ours against cuBLAS then the separate op(s), cuBLASLt's own GELU
    epilogue, and torch.compile of the composition."""
    cases = sorted((c for c in view.results.cases.values() if c.params.get("op") in EPILOGUE_PEERS), key=_order)
    if not cases:
        return None
    cols = [
        Column("case", "Case", numeric=False),
        Column("l2", "L2", numeric=False),
        Column("ours", "Ours (µs)", f"median, {DEVICE_TIME}"),
        Column("tflops", "TFLOP/s", "2·M·N·K / median device time"),
        Column(
            "separate",
            "vs cuBLAS's path",
            "its time / ours: above 1.00× ours is faster. With a bias, torch.addmm (one cuBLAS call, the bias in "
            "its epilogue); with bias + GELU, torch.addmm then GELU; with a residual, torch.mm then the add",
        ),
        Column("lt", "vs cuBLASLt GELU epilogue", "its time / ours (bias + GELU only)"),
        Column("compile", "vs torch.compile", "its time / ours"),
    ]
    table = Table(
        "matmul-epilogues", f"Fused epilogues against the separate ops and torch.compile ({DEVICE_TIME})", cols
    )
    for c in cases:
        peers = EPILOGUE_PEERS[c.params["op"]]
        ours = c.get(OURS)
        row: dict[str, Any] = {"case": _title(c), "l2": l2_cell(c), "ours": time_or_why(c, OURS)}
        if ours is not None:
            t = ours.tflops()
            row["tflops"] = Num(t.value, "TFLOPs_bare", t.sources, t.note)
        row["separate"] = c.speedup(OURS, peers[0]) or refusal(c, peers[0])
        row["lt"] = (
            (c.speedup(OURS, peers[1]) or refusal(c, peers[1])) if len(peers) == 3 else Text("—", "bias + GELU only")
        )
        row["compile"] = c.speedup(OURS, peers[-1]) or refusal(c, peers[-1])
        table.rows.append(row)
    return table


def decode_table(view: StudyView) -> Table | None:
    """Decode-like products (few rows against a weight): weight-read bound, so bandwidth and
    its share of the copy, ours and cuBLAS's."""
    cases = sorted((c for c in view.where(direction="fwd") if decode(c)), key=_order)
    if not cases:
        return None
    cols = [
        Column("case", "Case", numeric=False),
        Column("l2", "L2", numeric=False),
        Column("ours", "Ours (µs)", f"median, {DEVICE_TIME}"),
        Column("gbps", "Ours, GB/s", "bytes counted from the problem (the weight, the activations, the output)"),
        Column("pct", "Ours, % copy", "of the device copy measured in the same run"),
        Column("cublas_gbps", "cuBLAS, GB/s", "the same bytes over cuBLAS's median"),
        Column("cublas_pct", "cuBLAS, % copy", "of the device copy measured in the same run"),
        Column("vs", "vs cuBLAS", "cuBLAS's time / ours: above 1.00× ours is faster"),
        Column("split", "Split-K forced (µs)", f"median, {DEVICE_TIME}"),
    ]
    table = Table("matmul-decode", f"Decode-like products: bandwidth against the copy ({DEVICE_TIME})", cols)
    for c in cases:
        row: dict[str, Any] = {"case": _title(c), "l2": l2_cell(c), "ours": time_or_why(c, OURS)}
        for prefix, v in (("", OURS), ("cublas_", "cublas")):
            m = c.get(v)
            if m is not None:
                g = m.gbps()
                row |= {f"{prefix}gbps": Num(g.value, "GBps_bare", g.sources, g.note), f"{prefix}pct": m.pct_copy()}
        row["vs"] = c.speedup(OURS, "cublas") or refusal(c, "cublas")
        row["split"] = time_or_why(c, "triton-split-k")
        table.rows.append(row)
    return table


def settings(view: StudyView) -> list[Any]:
    """The cuBLAS settings the runs recorded (reduced-precision reductions for bf16 and fp16,
    TF32 for fp32 tensors), as stored: one line per run, setting and value."""
    out = []
    seen: set[tuple[str, str, str]] = set()
    for c in sorted(view.results.cases.values(), key=_order):
        m = c.variants.get("cublas")
        if m is None:
            continue
        dtype = c.params["dtype"]
        key = f"allow_{dtype}_reduced_precision_reduction" if dtype in ("bf16", "fp16") else "allow_tf32"
        value = m.meta.get(key)
        if value is None or (c.run.run_id, key, str(value)) in seen:
            continue
        seen.add((c.run.run_id, key, str(value)))
        out.append(
            sentence(
                "{run}: torch.backends.cuda.matmul.{key} = {value} (the setting in force for its {dtype} cases).",
                run=c.run.run_id,
                key=key,
                value=str(value),
                dtype=c.params["dtype"],
            )
        )
    return out


SMALL_FLOPS = 2 * 1024**3  # 1024³ and below: a product of a few microseconds


def small(c: CaseResult) -> bool:
    """A product small enough that launch and fixed costs, not its arithmetic, set its time."""
    return bool(c.flops) and c.flops <= SMALL_FLOPS


def unaligned_rows(c: CaseResult) -> bool:
    """Whether a row of B or C (N elements) or of A (K elements) is not a whole number of 16
    bytes: no TMA descriptor can read it as it lies."""
    size = 4 if c.params["dtype"] in ("tf32", "fp32") else 2
    return any(int(c.params[d]) * size % 16 for d in ("cols", "k"))


def odd_rows_lead(view: StudyView) -> dict[str, Num] | None:
    """How far ahead of cuBLAS (device time) the 16-bit forward products ran whose B or C rows
    (N) or A rows (K) are not a whole number of 16 bytes, decode and launch-bound shapes aside:
    the lowest and highest speedup over both L2 states, and how many products; None where none
    was timed."""
    found = []
    for c in view.where(direction="fwd"):
        if c.params["dtype"] not in ("bf16", "fp16") or decode(c) or small(c) or c.params.get("op", "mm") != "mm":
            continue
        if not unaligned_rows(c):
            continue
        x = c.speedup(OURS, "cublas")
        if isinstance(x, Num):
            found.append((x, c))
    if not found:
        return None
    nums = [x for x, _ in found]
    cases = [c for _, c in found]
    return {
        "lo": min(nums, key=lambda x: x.value),
        "hi": max(nums, key=lambda x: x.value),
        "n": count(
            len({c.shape for c in cases}), cases, "forward 16-bit products with rows TMA cannot read as they lie"
        ),
    }


def extra(view: StudyView) -> dict[str, Any]:
    return {
        "odd_rows": odd_rows_lead(view),
        "evidence_table": evidence_table(view),
        "variants_table": variants_table(view),
        "regret": regret_summary(view),
        "regret_table": regret_table(view),
        "grouping": grouping_table(view),
        "epilogues": epilogue_table(view),
        "decode": decode_table(view),
        "settings": settings(view),
    }


# ----------------------------------------------------------------------------- observations


def fast_path(view: StudyView) -> list[Claim]:
    """Why the fast one is fast: at the large bf16 products, the fastest Triton variant's
    compiled code uses Hopper's warpgroup matrix instruction (HGMMA), as the sweep read it."""
    cases = [
        c
        for case in (CUBE_4096["bf16"], CUBE_8192["bf16"])
        if (c := case.find(view.results, "cold")) is not None and any(c.get(v) for v in TRITON)
    ]
    if not cases:
        return []
    parts, holds, against = [], True, []
    for c in cases:
        timed = [v for v in TRITON if c.get(v) is not None]
        best = min(timed, key=lambda v: c.get(v).summary.median)  # type: ignore[union-attr]
        path = matrix_path(c, best)
        if path not in ("wgmma", "mma.sync", "both", "none"):
            continue  # the run could not read this kernel's SASS: nothing to say either way
        holds = holds and path == "wgmma"
        if path != "wgmma":
            against.append(c)
        parts.append(
            sentence(
                "at {shape} the fastest was {label} ({hg} HGMMA and {hm} HMMA instructions, {regs} registers, "
                "{spills} spills)",
                shape=c.shape,
                label=view.label(best),
                hg=meta_num(c, best, "sass_hgmma"),
                hm=meta_num(c, best, "sass_hmma"),
                regs=meta_num(c, best, "regs"),
                spills=meta_num(c, best, "spills"),
            )
        )
    if not parts:
        return []
    text = sentence("Device time (graph replay), cold L2, bf16 forward: ")
    text += sentence("; ").join(parts) + sentence(".")
    return [
        Claim(
            "fast-uses-wgmma",
            text,
            holds,
            hypothesis="the fastest Triton variant issues Hopper's warpgroup matrix instruction (HGMMA, wgmma in PTX), "
            "not the older warp-level HMMA (mma.sync)",
            evidence=cases_evidence("fastest not on wgmma", against),
        )
    ]


# The widest resolved gap between a grouped order and row-major order that still counts as
# "the order does not matter" (grouping_observation).
GROUPING_NEUTRAL = 1.02


def grouping_observation(view: StudyView) -> list[Claim]:
    """The tile order beyond the L2: every grouped order a run timed (GROUP_M 4, 8, 16) against
    row-major order (GROUP_M 1), one tile, where A and B together exceed the L2.

    The page first predicted that grouping pays there (claim ``grouping-pays-beyond-l2``:
    GROUP_M 8 faster, resolved, somewhere and slower nowhere).  The H200 runs contradicted it:
    in run matmul-20261204T211210Z-4293da2 every GROUP_M 8 comparison at 4096³ and 8192³ was
    within the noise.  The claim now says what those runs show, and holds while no grouped
    order is faster or slower than row-major order, resolved by the one verdict, by more than
    ``GROUPING_NEUTRAL``; a run that finds such a gap contradicts it."""
    size = {"bf16": 2, "fp16": 2}

    def exceeds(c: CaseResult) -> bool:
        operands = (c.params["rows"] + c.params["cols"]) * c.params["k"] * size.get(c.params["dtype"], 4)
        return operands > int(c.run.env["gpu"]["l2_bytes"])

    groups = [v for v in GROUPED[1:] if any(v in c.variants for c in view.results.cases.values())]
    big = sorted((c for c in view.results.cases.values() if "triton-group1" in c.variants and exceeds(c)), key=_order)
    # (case, group, verdict, GROUP_M 1's time over the group's: above 1 the grouped order faster)
    pairs = [
        (c, g, o, c.ratio("triton-group1", g).value)  # type: ignore[union-attr]
        for c in big
        for g in groups
        if (o := view.outcome(c, "triton-group1", g)) is not None
    ]
    if not pairs:
        return []
    wide = [c for c, _, o, r in pairs if o != "unresolved" and max(r, 1 / r) > GROUPING_NEUTRAL]  # either way
    c, g, _, _ = max(pairs, key=lambda p: abs(math.log(p[3])))
    resolved = sum(p[2] != "unresolved" for p in pairs)
    counts = (
        "{l} of {n} comparisons ({u} within the noise), none of the resolved ones by more than {bound}"
        if resolved
        else "{l} of {n} comparisons: every one was within the noise, so none resolved a gap beyond {bound}"
    )
    text = sentence(
        "Device time (graph replay): where A and B together exceed the L2, against row-major order (GROUP_M 1) "
        "with the same tile, GROUP_M {groups} were faster in {k} and slower in "
        + counts
        + "; the widest gap is {x} ({label} at {case}). Our first version of this claim predicted that grouping "
        "pays here; the runs say it does not, for this persistent kernel.",
        groups=", ".join(v.removeprefix("triton-group") for v in groups),
        k=Num(sum(p[2] == "win" for p in pairs), "count"),
        l=Num(sum(p[2] == "loss" for p in pairs), "count"),
        u=Num(sum(p[2] == "unresolved" for p in pairs), "count"),
        n=Num(len(pairs), "count"),
        bound=definition(GROUPING_NEUTRAL, "x_set", "the bound this observation sets (GROUPING_NEUTRAL), not measured"),
        x=c.speedup(g, "triton-group1"),
        label=view.label(g),
        case=c.case_id,
    )
    return [
        Claim(
            "grouping-order-neutral-beyond-l2",
            text,
            not wide,
            hypothesis="where A and B together exceed the L2, the order of the tiles changes little: no grouped order "
            "resolves a gap beyond the bound against row-major order",
            evidence=cases_evidence(
                "a resolved gap beyond the bound", sorted({c.case_id: c for c in wide}.values(), key=_order)
            ),
        )
    ]


@dataclass(frozen=True)
class RegretSet:
    """One set of cold forward products (held out or studied) scored under one dispatch rule."""

    held_out: bool
    scored: list[tuple[CaseResult, str, str]]  # (case, the choice's stand-in, the fastest forced variant)
    unscored: list[CaseResult]  # chosen under another rule, or one not recorded or unreadable


def regret_sets(view: StudyView) -> tuple[tuple[str, CaseResult] | None, list[RegretSet]]:
    """The newest run's dispatch rule (and a case of that run), and the cold forward products
    with a time for the dispatch's choice and for a forced variant, split into held-out and
    studied shapes, each scored where its choice was made under that rule."""
    forced = forced_cases(view)
    found = newest_rule(forced)
    newest = found[0] if found else None
    sets = []
    for held in (True, False):
        scored, unscored = [], []
        for c in forced:
            _, stand, fastest = dispatch_choice(c)
            if c.params["l2"] != "cold" or stand is None or fastest is None or held_out(c) is not held:
                continue
            if rule_status(c, newest) is None:
                scored.append((c, stand, fastest))
            else:
                unscored.append(c)
        sets.append(RegretSet(held, scored, unscored))
    return found, sets


def dispatch_regret(view: StudyView) -> list[Claim]:
    """The dispatch scored by regret (cold L2) under the newest run's dispatch rule: on the
    held-out shapes, and apart from them on the shapes that were studied while it was set;
    by device time, and again by the eager call a user makes (host included: the rule trades
    device time for host time where split-K's second launch costs more than it saves).  A
    case counts as a regret where the fastest forced variant beat the dispatch's choice by the
    one verdict; the claim holds where none of its set did by more than ``REGRET_LINE``.
    Cases chosen under another rule are counted, not scored."""
    found, sets = regret_sets(view)
    if found is None:
        return []
    claims = []
    for eager in (False, True):
        for rs in sets:
            claim = _regret_claim(view, rs, found, eager)
            if claim is not None:
                claims.append(claim)
    return claims


def _regret_claim(view: StudyView, rs: RegretSet, found: tuple[str, CaseResult], eager: bool) -> Claim | None:
    newest, source = found
    scored = []
    for c, stand, fastest in rs.scored:
        if eager:  # the same cases through their eager samples: the eager call's choice and the fastest by it
            if not c.eager_measured:
                continue
            c = c.eager()
            _, stand, fastest = dispatch_choice(c, eager=True)
            if stand is None or c.get(stand) is None or fastest is None:
                continue
        scored.append((c, stand, fastest))
    if not scored:
        return None  # the page's prose counts what no rule scored (regret_summary)
    behind = [(c, s, f) for c, s, f in scored if s != f and view.outcome(c, s, f) == "win"]
    ratios = {c.case_id: c.ratio(s, f).value for c, s, f in behind}  # type: ignore[union-attr]
    over = [c for c, _, _ in behind if ratios[c.case_id] > REGRET_LINE.value]
    where = "held-out shapes (their timings set nothing in the dispatch)" if rs.held_out else "studied shapes"
    text = sentence(
        "{timer}, cold L2, dispatch rule {rule} (run {run}), on the {where}: the dispatch's "
        "choice was the fastest forced variant or within the noise of it in {k} of {n} forward products",
        timer="Eager call (host included)" if eager else "Device time (graph replay)",
        rule=newest,
        run=source.run.run_id,
        where=where,
        k=Num(len(scored) - len(behind), "count"),
        n=Num(len(scored), "count"),
    )
    if behind:
        worst, stand, fastest = max(behind, key=lambda b: ratios[b[0].case_id])
        text += sentence(
            "; the largest regret was at {case}, where {fastest} ran {x} faster than the choice ({chosen})",
            case=worst.case_id,
            fastest=view.label(fastest),
            x=worst.speedup(fastest, stand),
            chosen=choice_name(dispatch_choice(worst, eager)[0] or "") or view.label(stand),
        )
    text += sentence("; resolved regrets over {line}: {o}", o=Num(len(over), "count"), line=REGRET_LINE)
    if rs.unscored:
        text += sentence(
            " ({u} more ran under another dispatch rule, or one not recorded, and are not scored)",
            u=Num(len(rs.unscored), "count"),
        )
    text += sentence(".")
    claim_id = "dispatch-regret-" + ("held-out" if rs.held_out else "studied") + ("-eager" if eager else "")
    return Claim(
        claim_id,
        text,
        not over,
        hypothesis="the dispatch's choice costs no resolved regret over the line against the fastest forced variant",
        evidence=cases_evidence("regret over the line", over),
    )


def regret_summary(view: StudyView) -> dict[str, Any] | None:
    """For the prose: the rule the regret observations score (None where no run recorded
    one), and how many cold products of each set no observation scores."""
    found, sets = regret_sets(view)
    cases = [c for rs in sets for c, _, _ in rs.scored] + [c for rs in sets for c in rs.unscored]
    if not cases:
        return None
    held, studied = sets
    return {
        "rule": found[0] if found else None,  # run-file text: the template's finalize escapes it
        "run": found[1].run.run_id if found else None,
        "unscored_held_out": count(len(held.unscored), held.unscored, "held-out products not scored"),
        "unscored_studied": count(len(studied.unscored), studied.unscored, "studied products not scored"),
        "scored_held_out": len(held.scored),
        # runs that recorded the eager choice apart (the rule that depends on graph capture)
        "graph_rule_runs": len({c.run.run_id for c in forced_cases(view) if _records_eager_choice(c)}),
    }


def _records_eager_choice(c: CaseResult) -> bool:
    ours = c.variants.get(OURS)
    return ours is not None and "dispatch_eager" in ours.meta


# ----------------------------------------------------------------------------- losses


def explain(c: CaseResult, peer: str) -> str | None:
    """Why ours lost a resolved device-time case, where the stored evidence says."""
    ours = c.variants.get(OURS)
    if ours is None:
        return None
    path = ours.meta.get("matrix_path")
    spills = ours.meta.get("spills")
    if isinstance(spills, list) and any(isinstance(s, int) and s > 0 for s in spills):
        return "spills"
    if decode(c) and c.params["dtype"] in ("bf16", "fp16"):  # bandwidth-bound: the instruction is not the cost
        return "decode"
    if path == "mma.sync" and c.params["dtype"] in ("bf16", "fp16", "tf32"):
        return "no-wgmma"
    if c.params["dtype"] == "tf32" and path == "wgmma":
        return "tf32-operand"
    if c.params["dtype"] == "fp32":
        return "fp32-fma"
    if decode(c):
        return "decode"
    if small(c):
        return "small"
    if unaligned_rows(c):
        return "unaligned-rows"
    if c.params["direction"] == "fwd+bwd":
        return "backward"
    if c.params.get("op") == "mm_bias_gelu":
        return "gelu-epilogue"
    idle = idle_last_wave(c)
    if idle is not None and idle >= IDLE_WAVE:
        return "partial-wave"
    return None


def idle_last_wave(c: CaseResult) -> float | None:
    """The share of the dispatch's kernel's time, at whole tiles, that its last wave leaves
    idle: 1 - waves / ceil(waves), waves = output tiles / the run's SMs; None where the
    dispatch chose neither one-program-per-SM kernel or the run recorded no SM count.  The
    tiles are the ones the run recorded for its choice (``dispatch_tile``, from runs of
    c. 2026-12-07 on; the warp-specialized kernel may pick a cooperative tile), else
    ``WAVE_TILES``'s."""
    ours = c.variants.get(OURS)
    chosen = str(chosen_variant(ours))
    tile = WAVE_TILES.get(chosen)
    if tile is None or ours is None:
        return None
    recorded = ours.meta.get("dispatch_tile")
    if ours.meta.get("dispatch") == chosen and isinstance(recorded, str):
        found = re.fullmatch(r"([1-9][0-9]*)x([1-9][0-9]*)", recorded)
        if found:
            tile = (int(found[1]), int(found[2]))
    sms = c.run.env.get("gpu", {}).get("sm_count")
    if not isinstance(sms, int) or isinstance(sms, bool) or sms <= 0:
        return None
    tiles = -(-int(c.params["rows"]) // tile[0]) * -(-int(c.params["cols"]) // tile[1])
    waves = tiles / sms
    return 1 - waves / -(-tiles // sms)


REASONS = {
    "spills": (
        "register spills",
        "Our compiled kernel spills registers to local memory (the evidence table counts them): every spilled value "
        "is a memory round trip inside the main loop.",
    ),
    "no-wgmma": (
        "older matrix instruction",
        "Our compiled kernel uses the warp-level HMMA (mma.sync) rather than Hopper's warpgroup HGMMA (the evidence "
        "table counts both): it feeds the tensor cores from registers instead of straight from shared memory.",
    ),
    "unaligned-rows": (
        "rows not 16-byte aligned",
        "A row of B or C (N elements) or of A (K elements) is not a whole number of 16 bytes here. Our kernels read "
        "such an operand through a copy with rows padded to 128 bytes (one more read and write of it; in the "
        "training step of the [M, N] output gradient too, the largest operand there), and write an output whose "
        "rows no TMA store can write through 2-byte pointer stores (the warp-specialized kernel while its other "
        "consumer multiplies). torch.compile pads N to a multiple of 8 and runs cuBLAS on the padded product, "
        "which writes whole vectors; cuBLAS on the rows as they lie falls back to an older kernel several times "
        "slower than either.",
    ),
    "decode": (
        "weight-read bound",
        "A decode-like product reads the whole weight for a few rows: the time is the weight's read, and how evenly "
        "it is spread over the SMs decides it (the decode table's % copy), not the tile's arithmetic or its matrix "
        "instruction. Split-K spreads it; an eager call takes split-K only where K is 8192 or more and its tiles "
        "fill at most half the GPU, since below that depth its second launch and workspace cost an eager call "
        "more than it saves on the device; a call captured in a CUDA graph, which pays no host time, takes it from "
        "a K of 4096 (the decode table's split-K column shows what it would give; each run file "
        "holds every forced variant's eager times).",
    ),
    "small": (
        "launch-bound",
        "A product this small finishes in a few microseconds: fixed costs (launch, prologue, the epilogue's store) "
        "outweigh the arithmetic, and cuBLAS's kernels for small shapes start faster.",
    ),
    "gelu-epilogue": (
        "GELU between the tiles",
        "Where a one-partition kernel runs this case, it applies GELU in the warps that run the product, between "
        "one tile's main loop and the next, with the tensor cores idle. Each output costs two "
        "special-function instructions, and an SM issues 16 of them a clock: that sets a floor under the pause, "
        "and the probe of notes/2026-12-02-probe-matmul-tiles-db8affa.log measured a pause close to it. The "
        "warp-specialized variant runs it in "
        "one consumer warpgroup while the other multiplies; the evidence table shows which ran here.",
    ),
    "tf32-operand": (
        "TF32 operand through registers",
        "TF32 operands are 32-bit, and Hopper's wgmma reads 32-bit operands from shared memory only K-major; a "
        "row-major B is MN-major. Our persistent kernel reads that operand from shared memory into registers at "
        "every K step (the product runs transposed, Cᵀ = Bᵀ·Aᵀ), which costs shared-memory bandwidth beside the "
        "product. Triton's own way, a K-major copy of each tile waiting for every wgmma, ran several times slower "
        "(run matmul-20261203T144707Z-e7a7746 holds it, and torch.compile's Triton templates run into the same).",
    ),
    "fp32-fma": (
        "IEEE fp32 on the FMA units",
        "No tensor-core instruction multiplies float32 at full precision: IEEE fp32 runs on the FMA units. Our "
        "kernel is Triton's generic FMA dot under the autotuner's tiles; cuBLAS ships SIMT kernels tuned for this "
        "one path.",
    ),
    "partial-wave": (
        "partial last wave",
        "The output's tiles are not close to a whole number of waves over the SMs for the kernel the dispatch chose "
        "(128×256 tiles for the persistent kernel; 128×128 for the warp-specialized one's ping-pong tiles, whose two "
        "consumers take them one at a time, or the cooperative tile the run recorded for it), so at whole tiles "
        "its last wave leaves a tenth of its time or more with SMs idle. "
        "The persistent kernel's split tail recovers part of that where the dispatch chose it, at the cost of "
        "writing and summing fp32 partial tiles. cuBLAS picks among more tiles, some not powers of two, which a "
        "Triton block cannot be: in notes/2026-12-04f-probe-sub-wave-a60cfe0.log its kernels' names show 192×192 "
        "tiles at 3072³ and at 2304×2048×6144, and 128×216 at 3000×7168×3000.",
    ),
    "backward": (
        "backward products",
        "The training step adds dA = dC·Bᵀ and dB = Aᵀ·dC, read with swapped strides; a transposed operand takes "
        "a tile order and a load layout our forward tile was not tuned for.",
    ),
}


# ----------------------------------------------------------------------------- the page

PAGE = StudyPage(
    study="matmul",
    op_words={
        "mm_bias": "bias epilogue",
        "mm_bias_gelu": "bias + GELU epilogue",
        "mm_residual": "residual epilogue",
    },
    title="GEMM on Hopper",
    summary="a Triton matrix product (fixed tile, autotuned, persistent with TMA, warp-specialized in Gluon, split-K) "
    "against cuBLAS and "
    "torch.compile, with fused bias, GELU and residual epilogues; TFLOP/s against the bf16 matrix rate, and the "
    "compiled code's evidence",
    ours=OURS,
    peers=PEERS,
    op="mm",
    rates=(THROUGHPUT, BANDWIDTH),
    charts=(
        Speedups("fwd"),
        Throughput("fwd", (OURS, "triton-warp-specialized", "triton-persistent", "cublas", "compile")),
        Throughput("fwd+bwd", (OURS, "cublas", "compile")),
        DeviceVsEager("fwd", (OURS, "cublas", "compile")),
    ),
    targets=(
        _parity(CUBE_4096["bf16"]),
        _parity(CUBE_8192["bf16"]),
        _parity(CUBE_4096["fp16"]),
        _parity(CUBE_8192["fp16"]),
        Target("target-bias-gelu-8192-separate", Faster("cublas-bias-gelu"), BIAS_GELU),
        Target("target-bias-gelu-8192-compile", NoSlower("compile-bias-gelu"), BIAS_GELU),
        Target("target-step-4096", AtLeast("cublas", STEP_PARITY), STEP),
    ),
    evidence=(
        MatrixShareAt(CUBE_8192["bf16"]),
        SpeedupsAt(CUBE_4096["bf16"], ("cublas", "compile")),
        SpeedupsAt(CUBE_8192["bf16"], ("cublas", "compile")),
        SpeedupsAt(BIAS_GELU, ("cublas-bias-gelu", "compile-bias-gelu")),
    ),
    observations=(fast_path, grouping_observation, dispatch_regret, eager_flips),
    explain=explain,
    reasons=REASONS,
    extra=extra,
)
