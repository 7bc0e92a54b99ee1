"""bench/evidence.py: the SASS instruction counts on canned disassembly (Triton's own format
and cuobjdump's), and a capture that records, never raises, when the disassembler is missing
or a kernel lacks an attribute."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import evidence
from contract.schema import _Checker, _validate_meta

# Triton's asm["sass"] (triton.tools.disasm): "Function:<name>", then control<TAB>instruction.
TRITON_SASS = """Function:matmul_kernel
--:-:-:Y:1\tMOV R1, c[0x0][0x28] ;
--:-:-:-:2\t@!PT LDS RZ, [RZ] ;
01:-:-:Y:4\tUTMALDG.2D [UR8], [UR4] ;
--:-:-:Y:1\tUSETMAXREG.DEALLOC.CTAPOOL 0x28 ;
--:-:-:Y:1\tWARPGROUP.ARRIVE ;
--:-:-:Y:1\tHGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24, gsb0 ;
--:-:-:Y:1\tHGMMA.64x256x16.F32.BF16 R24, gdesc[UR16], R24, gsb0 ;
LBB0:
--:-:-:Y:1\t@P0 BRA LBB0;
--:-:-:Y:1\tBAR.SYNC.DEFER_BLOCKING 0x0 ;
--:-:-:Y:1\tEXIT;

"""
# cuobjdump -sass: offsets and encodings in comments, an older kernel on mma.sync.
CUOBJDUMP_SASS = """
\tcode for sm_90a
\t\tFunction : old_kernel
\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90"
        /*0000*/                   MOV R1, c[0x0][0x28] ;                       /* 0x00000a00ff017624 */
                                                                                /* 0x000fc40000000f00 */
        /*0010*/                   LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR4][R4.64] ;  /* 0x0000000004037fae */
                                                                                /* 0x000fe2000b901d44 */
        /*0020*/                   LDSM.16.M88.4 R8, [R3] ;                      /* 0x000000000308783b */
                                                                                /* 0x000e240000000200 */
        /*0030*/               @P1 HMMA.16816.F32.BF16 R12, R8, R16, R12 ;      /* 0x000000100c0c723c */
                                                                                /* 0x001ff00000041808 */
        /*0040*/                   HMMA.16816.F32.BF16 R20, R8, R18, R20 ;      /* 0x00000012081c723c */
                                                                                /* 0x000ff00000041814 */
        /*0050*/                   EXIT ;                                       /* 0x000000000000794d */
"""


def test_counts_triton_sass() -> None:
    c = evidence.count_sass(TRITON_SASS)
    assert c["functions"] == 1
    assert c["hgmma"] == 2 and c["hmma"] == 0
    assert c["tma"] == 1 and c["bar"] == 1 and c["cp_async"] == 0 and c["setmaxreg"] == 1
    assert c["instructions"] == 10  # the label line is not an instruction
    assert evidence.matrix_path(c) == "wgmma"


def test_counts_cuobjdump_sass() -> None:
    c = evidence.count_sass(CUOBJDUMP_SASS)
    assert c["functions"] == 1
    assert c["hmma"] == 2 and c["hgmma"] == 0  # a predicated one counts too
    assert c["cp_async"] == 1 and c["ldsm"] == 1 and c["tma"] == 0 and c["setmaxreg"] == 0
    assert c["instructions"] == 6  # the encoding-only lines and the headers are not instructions
    assert evidence.matrix_path(c) == "mma.sync"
    assert evidence.matrix_path(evidence.count_sass("")) == "none"


class _Asm(dict):
    def __init__(self, text: str | None, exc: Exception | None = None) -> None:
        super().__init__()
        self.text, self.exc = text, exc

    def __missing__(self, key: str) -> str:
        if self.exc is not None:
            raise self.exc
        assert self.text is not None
        return self.text


def _kernel(name: str, asm: _Asm, regs: int = 168, spills: int = 0, shared: int = 196608) -> SimpleNamespace:
    return SimpleNamespace(name=name, asm=asm, n_regs=regs, n_spills=spills, metadata=SimpleNamespace(shared=shared))


def _valid_meta(meta: dict) -> None:
    """What the run-file contract accepts as a variant's meta (JSON, flat enough)."""
    json.dumps(meta, allow_nan=False)
    _validate_meta(_Checker("test"), meta, "meta")


def test_kernel_evidence_per_kernel_in_launch_order() -> None:
    main = _kernel("mm_split", _Asm(TRITON_SASS))
    reduce = _kernel("mm_reduce", _Asm("Function:r\n--:-:-:Y:1\tEXIT;\n"), regs=32, shared=0)
    ev = evidence.kernel_evidence([main, reduce])
    assert ev["kernels"] == 2 and ev["kernel_names"] == ["mm_split", "mm_reduce"]
    assert ev["regs"] == [168, 32] and ev["spills"] == [0, 0] and ev["smem_bytes"] == [196608, 0]
    assert ev["sass_hgmma"] == [2, 0] and ev["sass_hmma"] == [0, 0]
    assert ev["sass"] == "ok" and ev["matrix_path"] == "wgmma"
    assert ev["tiles"] == [None, None]  # these name no tile
    _valid_meta(ev)


def test_the_tile_a_kernel_was_compiled_for() -> None:
    # Triton's compiled kernel keeps its source: the constexprs by argument position (as the
    # JIT passes them) or by name, and the metadata's stages and warps.
    fn = SimpleNamespace(arg_names=["a_ptr", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"])
    kernel = _kernel("_mm_tuned_body", _Asm(TRITON_SASS))
    kernel.src = SimpleNamespace(fn=fn, constants={(1,): 16, (2,): 64, (3,): 128, (4,): 8})
    kernel.metadata = SimpleNamespace(shared=61440, num_stages=4, num_warps=4)
    named = _kernel("k", _Asm(TRITON_SASS))
    named.src = SimpleNamespace(fn=fn, constants={"BLOCK_M": 128, "BLOCK_K": 64, "BLOCK_N": 256})
    named.metadata = SimpleNamespace(shared=0, num_stages=3, num_warps=8)
    partial = _kernel("k", _Asm(TRITON_SASS))
    partial.src = SimpleNamespace(fn=fn, constants={(1,): 16, (2,): 64})  # no BLOCK_K
    # a Gluon kernel with its own ring: Triton's num_stages reads 1, the ring is S deep
    ws_fn = SimpleNamespace(arg_names=["a_ptr", "BLOCK_M", "BLOCK_N", "BLOCK_K", "S"])
    ring = _kernel("ws_matmul_kernel", _Asm(TRITON_SASS))
    ring.src = SimpleNamespace(fn=ws_fn, constants={(1,): 128, (2,): 256, (3,): 32, (4,): 6})
    ring.metadata = SimpleNamespace(shared=0, num_stages=1, num_warps=12)
    ev = evidence.kernel_evidence([kernel, named, partial, ring])
    assert ev["tiles"] == [
        "16x64x128, 4 stages, 4 warps",
        "128x256x64, 3 stages, 8 warps",
        None,
        "128x256x32, 6 stages, 12 warps",
    ]
    _valid_meta(ev)


def test_missing_disassembler_is_recorded_not_raised() -> None:
    gone = _kernel("k", _Asm(None, FileNotFoundError(2, "No such file or directory: 'cuobjdump'")))
    ev = evidence.kernel_evidence([gone])
    assert ev["sass"].startswith("unavailable: the disassembler is not installed")
    assert ev["regs"] == [168] and ev["sass_hgmma"] == [None] and ev["matrix_path"] == "unknown"
    _valid_meta(ev)
    broken = _kernel("k", _Asm(None, RuntimeError("cuobjdump exited 1")))
    assert evidence.kernel_evidence([broken])["sass"] == "unavailable: RuntimeError: cuobjdump exited 1"
    bare = SimpleNamespace()  # no attributes at all
    ev = evidence.kernel_evidence([bare])
    assert ev["regs"] == [None] and ev["smem_bytes"] == [None] and ev["sass"].startswith("unavailable")
    _valid_meta(ev)


def test_no_kernels_and_a_failing_compile() -> None:
    assert evidence.kernel_evidence([])["kernels"] == 0  # the interpreter compiles nothing

    def fails() -> list:
        raise ValueError("mat1 and mat2 shapes cannot be multiplied\nmore")

    ev = evidence.capture(fails)
    assert ev == {"evidence_error": "ValueError: mat1 and mat2 shapes cannot be multiplied"}
    _valid_meta(ev)


def test_real_triton_sass_for_hopper_and_ampere() -> None:
    """A real kernel compiled for sm_90 (no GPU needed): Triton's cuobjdump disassembles it,
    and the counts say Hopper's warpgroup HGMMA; the same kernel for sm_80 says HMMA.  With no
    GPU to load the kernel on, the register counts are recorded as unknown, not raised."""
    probe = Path(__file__).with_name("evidence_probe.py")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, timeout=300, env=env)
    if result.returncode != 0 and "cuobjdump" in result.stderr + result.stdout:
        pytest.skip("Triton's cuobjdump is not available here")
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    hopper, ampere = found["90"], found["80"]
    assert hopper["sass"] == "ok" and hopper["matrix_path"] == "wgmma" and hopper["sass_hgmma"][0] > 0
    assert hopper["sass_hmma"] == [0] and hopper["smem_bytes"][0] > 0
    assert ampere["matrix_path"] == "mma.sync" and ampere["sass_hmma"][0] > 0 and ampere["sass_hgmma"] == [0]
    assert ampere["sass_ldsm"][0] > 0  # mma.sync's operands come through registers
    assert hopper["tiles"] == ampere["tiles"] == ["64x32x16, 3 stages, 4 warps"]  # Triton's default stages
    _valid_meta(hopper)
