"""Launching compiled Triton kernels for the price of the launch itself.

``kernel[grid](...)`` costs tens of µs of host time per call in Triton 3.x: it binds the
arguments, computes a specialization key from every argument, hashes it and checks the
kernel's globals before it reaches the driver.  An eager softmax that moves a few KB runs
in less time than that.  :class:`FastKernel` pays this once per *launch key* and afterwards
calls the compiled kernel's launcher directly (``CompiledKernel.run``: the C function that
calls ``cuLaunchKernel``), which costs a few µs.

The key must determine the compiled kernel exactly, or a call would run code specialized
for other arguments.  Our kernels make that easy to guarantee: every integer argument is
annotated ``tl.int64`` and excluded from specialization (``do_not_specialize``), so Triton
specializes a kernel only on its constexprs, its pointer dtypes and whether each pointer is
16-byte aligned; the callers put exactly those in the key.  The GPU tests check the cache
against Triton's own choice (``tests/test_softmax_gpu.py``).

The fast path is skipped (Triton's own launch is used) under the interpreter, where there
is no compiled kernel, and while a launch hook is installed (profilers such as Proton
expect Triton's launch metadata).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import Any

import torch
import triton
from triton import knobs

# Read once at import: a constant for torch.compile's tracer rather than an environment lookup.
INTERPRETER = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

if torch.cuda.is_available() and not INTERPRETER:
    # The raw handle of the current CUDA stream of a device index (what Triton launches on).
    current_stream = torch._C._cuda_getCurrentRawStream
else:  # pragma: no cover - CPU machines never take the fast path

    def current_stream(index: int) -> int:
        raise RuntimeError("no CUDA device")


# Whether the current CUDA stream is capturing a graph (False without CUDA):
# torch.cuda.is_current_stream_capturing without its Python wrapper, as current_device below.
capturing = (
    getattr(torch._C, "_cuda_isCurrentStreamCapturing", torch.cuda.is_current_stream_capturing)
    if torch.cuda.is_available()
    else (lambda: False)
)

# The current CUDA device's index, as torch.cuda.current_device() returns it, without its
# Python wrapper (about 1 µs a call); -1 without CUDA.
current_device = getattr(torch._C, "_cuda_getDevice", lambda: -1)


class FastKernel:
    """A Triton kernel with a per-key cache of compiled launchers.

    ``launch(key, grid, args, consts, num_warps)`` runs ``fn[grid](*args, **consts)``.  ``args``
    are the runtime arguments and ``consts`` the constexprs, both in the kernel's signature
    order (every constexpr after every runtime argument).  ``key`` must hold everything the
    compiled code depends on besides ``consts`` and ``num_warps``: the device index, the
    pointer dtypes and the 16-byte alignment of each pointer.
    """

    def __init__(self, fn: triton.runtime.JITFunction) -> None:
        self.fn = fn
        params = list(inspect.signature(fn.fn).parameters.values())  # JITFunction and the interpreter's
        constexpr = ["constexpr" in str(p.annotation) for p in params]
        first = constexpr.index(True) if True in constexpr else len(params)
        if not all(constexpr[first:]):
            raise TypeError(f"{fn.__name__}: constexpr parameters must come after every runtime parameter")
        for p in getattr(fn, "params", [])[:first]:
            if p.annotation_type in ("i32", "i64") and not p.do_not_specialize:
                raise TypeError(f"{fn.__name__}: integer parameter {p.name} must be in do_not_specialize")
        self.const_names = tuple(p.name for p in params[first:])
        self._cache: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}
        self._resident: dict[tuple[Any, ...], int] = {}

    def launch(
        self,
        key: tuple[Any, ...],
        device_index: int,
        grid: tuple[int, int, int],
        args: Sequence[Any],
        consts: tuple[Any, ...],
        num_warps: int,
        num_stages: int = 3,
        pdl: bool = False,
        coop: bool = False,
    ) -> None:
        full_key = (key, consts, num_warps, num_stages, pdl, coop)
        hit = self._cache.get(full_key)
        if hit is not None and not knobs.runtime.launch_enter_hook.calls:
            # The C launcher itself, past the Python wrapper around it.  A kernel that makes
            # TMA descriptors on the device needs global scratch (128 bytes a program, where
            # it writes them): a fresh buffer from torch's caching allocator, as Triton's own
            # wrapper would take from triton.set_allocator (stream-ordered, and from the
            # graph's pool under a CUDA-graph capture).
            launch, function, metadata, coop_flag, pdl_flag, scratch_bytes = hit
            scratch = None
            if scratch_bytes:
                scratch = torch.empty(grid[0] * grid[1] * grid[2] * scratch_bytes, dtype=torch.int8,
                                      device=torch.device("cuda", device_index))  # fmt: skip
            launch(grid[0], grid[1], grid[2], current_stream(device_index), function, coop_flag, pdl_flag,
                   scratch, None, metadata, None, None, None, *args, *consts)  # fmt: skip
            return
        compiled = self.launch_uncached(grid, args, consts, num_warps, num_stages, pdl, coop)
        if not INTERPRETER and compiled is not None and hasattr(compiled, "function"):
            launcher = compiled.run
            # torch's allocations are 512-byte aligned: any scratch alignment Triton asks up to that.
            if launcher.profile_scratch_size == 0 and launcher.global_scratch_align <= 512:
                scratch_bytes = launcher.global_scratch_size * launcher.num_ctas
                self._cache[full_key] = (
                    launcher.launch, compiled.function, compiled.packed_metadata,
                    launcher.launch_cooperative_grid, launcher.launch_pdl, scratch_bytes,
                )  # fmt: skip

    def launch_uncached(
        self,
        grid: tuple[int, int, int],
        args: Sequence[Any],
        consts: tuple[Any, ...],
        num_warps: int,
        num_stages: int = 3,
        pdl: bool = False,
        coop: bool = False,
    ) -> Any:
        """Triton's own launch path, every time (the dispatch study times what the cache saves);
        returns Triton's compiled kernel.  ``pdl``: launch as a programmatic dependent of the
        kernel before it on the stream (the kernel must call ``gdc_wait`` before reading what
        that kernel writes); ``coop``: a cooperative launch (every program resident at once, or
        the driver refuses it; see :meth:`resident`).  Both ignored under the interpreter."""
        return self.fn[grid](
            *args, **dict(zip(self.const_names, consts, strict=True)), num_warps=num_warps, num_stages=num_stages,
            **launch_options(pdl, coop),
        )  # fmt: skip

    def resident(
        self, key: tuple[Any, ...], args: Sequence[Any], consts: tuple[Any, ...], num_warps: int, device_index: int,
        num_stages: int = 3,
    ) -> int:  # fmt: skip
        """How many programs of the cooperative launch of this kernel fit at once on GPU
        ``device_index`` (:func:`resident_programs`).  Compiles the kernel (without launching
        it) the first time a key is asked; under the interpreter, 5 programs (run one after
        another there anyway)."""
        full_key = (key, consts, num_warps, num_stages, device_index)
        found = self._resident.get(full_key)
        if found is not None:
            return found
        if INTERPRETER:
            return 5
        compiled = self.fn.warmup(
            *args, grid=(1,), **dict(zip(self.const_names, consts, strict=True)), num_warps=num_warps,
            num_stages=num_stages, **launch_options(False, True),
        )  # fmt: skip
        self._resident[full_key] = found = resident_programs(compiled, num_warps, device_index)
        return found


# Programs a multiprocessor holds at most, by compute capability (CUDA's occupancy tables);
# 16 for a capability not listed.
_MAX_PROGRAMS_PER_SM = {(7, 0): 32, (7, 5): 16, (8, 0): 32, (8, 6): 16, (8, 7): 16, (8, 9): 24, (9, 0): 32}


def resident_programs(compiled: Any, num_warps: int, device_index: int) -> int:
    """Programs of a compiled kernel (loaded here if it is not yet) that GPU ``device_index``
    holds at once, by its registers, shared memory, warps and programs per multiprocessor as
    CUDA's occupancy calculator counts them: registers are allotted per warp in 256s from
    each of a multiprocessor's four quarters (65,536 / 4 on the H100 and H200), shared memory
    takes 1 KB more a program.  A cooperative launch of more is refused by the driver."""
    compiled._init_handles()
    props = torch.cuda.get_device_properties(device_index)
    warp_regs = -(-max(compiled.n_regs, 1) * 32 // 256) * 256
    warps_by_regs = 4 * ((getattr(props, "regs_per_multiprocessor", 65536) // 4) // warp_regs)
    per_sm = min(
        _MAX_PROGRAMS_PER_SM.get((props.major, props.minor), 16),
        props.max_threads_per_multi_processor // 32 // num_warps,
        warps_by_regs // num_warps,
        props.shared_memory_per_multiprocessor // (compiled.metadata.shared + 1024),
    )
    return max(1, per_sm) * props.multi_processor_count


def launch_options(pdl: bool, coop: bool) -> dict[str, bool]:
    """Triton's launch options for a programmatic dependent and for a cooperative launch."""
    if INTERPRETER:
        return {}
    return {**({"launch_pdl": True} if pdl else {}), **({"launch_cooperative_grid": True} if coop else {})}
