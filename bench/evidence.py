"""What a compiled Triton kernel is, stored beside its times: registers, spills, shared
memory, and which instructions its SASS uses (the Hopper warpgroup matrix instruction
HGMMA, the older warp-level HMMA of mma.sync, TMA and cp.async copies).

:func:`count_sass` is pure text parsing (unit-tested on canned SASS); :func:`kernel_evidence`
reads Triton's ``CompiledKernel`` objects and never raises: where the disassembler
(cuobjdump, which Triton runs for ``asm["sass"]``) is missing or fails, the record says so
and the sweep goes on.  Every value is a JSON scalar or a flat list, as a variant's meta
must be (contract/schema.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# Instruction families counted in the SASS, by opcode (the text before the first dot).
FAMILIES: dict[str, tuple[str, ...]] = {
    "hgmma": ("HGMMA",),  # warpgroup MMA (wgmma.mma_async in PTX): Hopper's tensor-core path
    "hmma": ("HMMA",),  # warp-level MMA (mma.sync): the pre-Hopper tensor-core path
    "tma": ("UTMALDG", "UTMASTG", "UBLKCP", "UTMAPF"),  # tensor-memory-accelerator bulk copies
    "cp_async": ("LDGSTS",),  # Ampere-style asynchronous global -> shared copies
    "ldsm": ("LDSM",),  # shared -> register matrix loads (feed HMMA)
    "bar": ("BAR",),  # block-wide barriers
    "setmaxreg": ("USETMAXREG",),  # setmaxnreg: registers moved between warp-specialized partitions
}
# One instruction: optional control field (Triton's "--:-:-:Y:1<TAB>") or offset comment
# ("/*0090*/"), an optional predicate ("@P0", "@!UPT"), the opcode, then operands to ";".
_INSTRUCTION = re.compile(
    r"^\s*(?:[-\w]{2}:[-\w]:[-\w]:[-\w]:[0-9a-f]+\s+|/\*[0-9a-f]{4,}\*/\s*)?"
    r"(?:@!?U?P(?:T|\d+)\s+)?"
    r"(?P<op>[A-Z][A-Z0-9_]*)(?:\.[\w.]+)?(?:\s[^;]*)?;"
)
_FUNCTION = re.compile(r"^\s*(?:Function\s*:\s*|\.text\.)(?P<name>\w+)")


def count_sass(text: str) -> dict[str, int]:
    """Instruction counts of SASS text (Triton's ``asm["sass"]``, or cuobjdump/nvdisasm
    output): ``instructions`` in all, ``functions`` seen, and one count per family of
    :data:`FAMILIES` (static counts: an instruction in a loop counts once)."""
    out = {"instructions": 0, "functions": 0, **{k: 0 for k in FAMILIES}}
    family_of = {op: k for k, ops in FAMILIES.items() for op in ops}
    for line in text.splitlines():
        if _FUNCTION.match(line):
            out["functions"] += 1
            continue
        m = _INSTRUCTION.match(line)
        if m is None:
            continue
        out["instructions"] += 1
        family = family_of.get(m.group("op"))
        if family is not None:
            out[family] += 1
    return out


def matrix_path(counts: dict[str, int]) -> str:
    """Which tensor-core instructions the code uses, in words."""
    if counts.get("hgmma") and counts.get("hmma"):
        return "both"
    if counts.get("hgmma"):
        return "wgmma"
    if counts.get("hmma"):
        return "mma.sync"
    return "none"


def describe(exc: BaseException) -> str:
    """An exception in one line: its type and the first line of its message."""
    return _short(exc)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:160]}" if text else type(exc).__name__


def _attr(obj: Any, name: str) -> int | None:
    try:
        value = getattr(obj, name)
    except Exception:
        return None
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _name(kernel: Any) -> str:
    for get in (lambda k: k.name, lambda k: k.metadata.name, lambda k: k.function.__name__):
        try:
            value = get(kernel)
        except Exception:
            continue
        if isinstance(value, str) and value:
            return value
    return type(kernel).__name__


def _tile(kernel: Any) -> str | None:
    """The tile a kernel was compiled for, "BMxBNxBK, S stages, W warps", where its constexprs
    name BLOCK_M, BLOCK_N and BLOCK_K (every Triton GEMM here; the autotuner's choice is
    otherwise not recorded, and it can differ from one process to the next); else None.
    Stages are the constexpr ``S`` where the kernel has one (the Gluon warp-specialized
    kernel runs its own ring of ``S`` stages, and Triton's ``num_stages`` reads 1 there: runs
    of b5dfd30 to ee9501e recorded that 1), else the metadata's ``num_stages``; warps are
    every warp of the program, the partitions' included."""
    try:
        src = kernel.src
        names = src.fn.arg_names
        consts = {names[key[0]] if isinstance(key, tuple) else key: value for key, value in src.constants.items()}
        tile = "x".join(str(int(consts[f"BLOCK_{d}"])) for d in "MNK")
        stages = int(consts["S"]) if "S" in consts else int(kernel.metadata.num_stages)
        return f"{tile}, {stages} stages, {int(kernel.metadata.num_warps)} warps"
    except Exception:
        return None


def _sass(kernel: Any) -> tuple[str | None, str]:
    """(SASS text or None, "ok" or why there is none)."""
    try:
        asm = kernel.asm
    except Exception as exc:
        return None, f"unavailable: no asm ({_short(exc)})"
    try:
        text = asm["sass"]
    except FileNotFoundError as exc:
        return None, f"unavailable: the disassembler is not installed ({_short(exc)})"
    except Exception as exc:
        return None, f"unavailable: {_short(exc)}"
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    if not isinstance(text, str) or not text.strip():
        return None, "unavailable: empty disassembly"
    return text, "ok"


def kernel_evidence(kernels: Iterable[Any]) -> dict[str, Any]:
    """What the kernels one call launched are made of: per kernel, in launch order, its
    name, registers per thread, spilled registers, shared memory in bytes, its tile
    (:func:`_tile`, None where it names none), and its SASS
    instruction counts; and ``sass`` ("ok", or why the counts are missing).  Never raises;
    an empty list (Triton's interpreter compiles nothing) says so in ``evidence``."""
    found = list(kernels)
    if not found:
        return {"kernels": 0, "evidence": "no compiled kernel (the Triton interpreter, or nothing launched)"}
    out: dict[str, Any] = {"kernels": len(found), "kernel_names": [], "regs": [], "spills": [], "smem_bytes": [],
                           "tiles": []}  # fmt: skip
    counts = {k: [] for k in ("instructions", *FAMILIES)}
    why: list[str] = []
    for kernel in found:
        out["kernel_names"].append(_name(kernel)[:80])
        out["regs"].append(_attr(kernel, "n_regs"))
        out["spills"].append(_attr(kernel, "n_spills"))
        try:
            shared = _attr(kernel.metadata, "shared")
        except Exception:  # a kernel object without metadata
            shared = None
        out["smem_bytes"].append(shared)
        out["tiles"].append(_tile(kernel))
        text, status = _sass(kernel)
        if text is None:
            why.append(status)
            for k in counts:
                counts[k].append(None)
            continue
        c = count_sass(text)
        for k in counts:
            counts[k].append(c[k])
    out |= {f"sass_{k}": v for k, v in counts.items()}
    out["sass"] = "ok" if not why else why[0]
    hg = sum(v or 0 for v in counts["hgmma"])
    hm = sum(v or 0 for v in counts["hmma"])
    out["matrix_path"] = matrix_path({"hgmma": hg, "hmma": hm}) if not why else "unknown"
    return out


def capture(get_kernels: Any) -> dict[str, Any]:
    """:func:`kernel_evidence` of what ``get_kernels()`` returns; a failure to compile or
    launch is recorded (``evidence_error``), never raised."""
    try:
        kernels = get_kernels()
    except Exception as exc:
        return {"evidence_error": _short(exc)}
    return kernel_evidence(kernels)
