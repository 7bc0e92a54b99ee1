"""One RMSNorm kernel compiled four ways: what compile-time sizes buy, and what they cost.

The specialization study (``bench/studies/specialization.py``) times the same source with
its sizes passed differently:

``all_constexpr``
    rows, width and row stride are ``tl.constexpr``: the compiler knows every loop's trip
    count and every mask, and a new kernel is compiled for every new batch size.
``model_fixed``
    width and stride (fixed by the model: its hidden size) are ``tl.constexpr``; the row
    count (batch x sequence, different every call) is a runtime ``tl.int64`` excluded from
    specialization: one compilation per hidden size.  This is what ``kernels.rms_norm``
    does.
``all_runtime``
    every size is a runtime ``tl.int64`` excluded from specialization, and the row is
    walked in fixed ``RUNTIME_BLOCK`` chunks: one compilation for every shape.
``triton_default``
    every size a plain Python int, which Triton specializes on its own rules (a value of 1,
    and divisibility by 16): the sizes a user passes without annotations.

The kernel is persistent: ``min(rows, PROGRAMS_PER_SM x SMs)`` programs each walk the rows
``pid, pid + programs, ...``, so the row count is a loop bound inside the kernel and its
specialization matters.  Each row is read twice (sum of squares, then normalize): where the
width is a compile-time constant and fits one block, the compiler may keep the row in
registers between the two loops; where it is not, the second read comes from L2.  Memory
traffic: one read of ``x``, one write of ``y`` ([rows, width] each) and the weight, which
every program rereads from L2.
"""

from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

from kernels._checks import check_device, check_float, check_same_device, check_tensor
from kernels.plans import next_power_of_2

MODES = ("all_constexpr", "model_fixed", "all_runtime", "triton_default")
RUNTIME_BLOCK = 1024  # all_runtime's chunk: one compilation serves every width
MAX_BLOCK = 16384  # the widest row a constexpr-width variant holds in one block
PROGRAMS_PER_SM = 4


@triton.jit
def _rms_rows(x_ptr, w_ptr, y_ptr, rows, width, stride, eps, BLOCK: tl.constexpr):
    """The shared body: rows ``pid, pid + programs, ...``; each row in ``BLOCK`` chunks."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    for row in range(pid, rows, programs):
        base = (tl.zeros([], tl.int64) + row) * stride  # 64-bit: rows x stride may pass 2**31
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, width, BLOCK):
            k = start + cols
            x = tl.load(x_ptr + base + k, mask=k < width, other=0.0).to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt_rn(tl.sum(acc, axis=0) / width + eps)
        for start in range(0, width, BLOCK):
            k = start + cols
            mask = k < width
            x = tl.load(x_ptr + base + k, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + k, mask=mask, other=0.0).to(tl.float32)
            tl.store(y_ptr + base + k, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def all_constexpr_kernel(x_ptr, w_ptr, y_ptr, eps, ROWS: tl.constexpr, WIDTH: tl.constexpr,
                         STRIDE: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    _rms_rows(x_ptr, w_ptr, y_ptr, ROWS, WIDTH, STRIDE, eps, BLOCK)


@triton.jit(do_not_specialize=["rows"])
def model_fixed_kernel(x_ptr, w_ptr, y_ptr, rows: tl.int64, eps, WIDTH: tl.constexpr, STRIDE: tl.constexpr,
                       BLOCK: tl.constexpr):  # fmt: skip
    _rms_rows(x_ptr, w_ptr, y_ptr, rows, WIDTH, STRIDE, eps, BLOCK)


@triton.jit(do_not_specialize=["rows", "width", "stride"])
def all_runtime_kernel(x_ptr, w_ptr, y_ptr, rows: tl.int64, width: tl.int64, stride: tl.int64, eps,
                       BLOCK: tl.constexpr):  # fmt: skip
    _rms_rows(x_ptr, w_ptr, y_ptr, rows, width, stride, eps, BLOCK)


@triton.jit
def triton_default_kernel(x_ptr, w_ptr, y_ptr, rows, width, stride, eps, BLOCK: tl.constexpr):
    _rms_rows(x_ptr, w_ptr, y_ptr, rows, width, stride, eps, BLOCK)


KERNELS = {
    "all_constexpr": all_constexpr_kernel,
    "model_fixed": model_fixed_kernel,
    "all_runtime": all_runtime_kernel,
    "triton_default": triton_default_kernel,
}


def _programs(x: torch.Tensor, rows: int) -> int:
    # under the interpreter: 4 programs, so that the row loop still strides
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 1
    return max(1, min(rows, PROGRAMS_PER_SM * sms))


def launch(mode: str, x: torch.Tensor, weight: torch.Tensor, y: torch.Tensor, eps: float) -> object:
    """Launch ``mode``'s kernel on 2-D ``x`` (unit last stride) into ``y`` (same shape and
    strides); returns Triton's compiled kernel (registers, spills and code for the study;
    None under the interpreter)."""
    rows, width = x.shape
    stride = x.stride(0)
    grid = (_programs(x, rows),)
    constexpr_block = next_power_of_2(width)
    if mode == "all_constexpr":
        return all_constexpr_kernel[grid](x, weight, y, eps, rows, width, stride, constexpr_block)
    if mode == "model_fixed":
        return model_fixed_kernel[grid](x, weight, y, rows, eps, width, stride, constexpr_block)
    if mode == "all_runtime":
        return all_runtime_kernel[grid](x, weight, y, rows, width, stride, eps, RUNTIME_BLOCK)
    return triton_default_kernel[grid](x, weight, y, rows, width, stride, eps, constexpr_block)


def compilations(mode: str) -> int:
    """How many compiled variants of ``mode``'s kernel this process holds, over every device
    (Triton's in-memory cache: one entry per specialization it compiled or loaded)."""
    fn = KERNELS[mode]
    return sum(len(cache[0]) for cache in getattr(fn, "device_caches", {}).values())


def rms_norm_specialized(
    x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *, mode: str = "model_fixed"
) -> torch.Tensor:
    """``F.rms_norm(x, (width,), weight, eps)`` over the last dimension, by ``mode``'s kernel.

    Args:
        x: ``[..., width]`` float16, bfloat16 or float32 on a CUDA GPU (or the CPU under
            ``TRITON_INTERPRET=1``); copied once if it is not contiguous.
        weight: ``[width]``, same device.
        eps: added to the mean square.
        mode: one of :data:`MODES`.

    Returns: a new tensor like ``x``; computed in float32 and rounded once.  Forward only:
    this module exists to compare specializations, not to train with (``kernels.rms_norm``
    does).

    Raises:
        TypeError: not tensors, or an unsupported dtype.
        ValueError: unknown ``mode``; shapes or devices that do not match; a width above
            ``MAX_BLOCK`` for a mode whose block is the whole row.
    """
    check_tensor("rms_norm_specialized", "x", x)
    check_tensor("rms_norm_specialized", "weight", weight)
    check_float("rms_norm_specialized", "x", x)
    check_float("rms_norm_specialized", "weight", weight)
    check_device("rms_norm_specialized", "x", x)
    check_same_device("rms_norm_specialized", "weight", weight, "x", x)
    if mode not in MODES:
        raise ValueError(f"rms_norm_specialized: mode must be one of {MODES}, got {mode!r}")
    if x.dim() == 0 or weight.shape != x.shape[-1:]:
        raise ValueError(
            f"rms_norm_specialized: weight has shape {list(weight.shape)}; expected [{x.shape[-1] if x.dim() else '?'}]"
        )
    width = x.shape[-1]
    if mode != "all_runtime" and width > MAX_BLOCK:
        raise ValueError(f"rms_norm_specialized: width {width} exceeds {MAX_BLOCK} for mode {mode!r}")
    x2 = x.reshape(-1, width)
    if not x2.is_contiguous():  # the kernels take one row stride for x and y: the width
        x2 = x2.contiguous()
    y = torch.empty_like(x2)
    if x2.shape[0] and width:
        with torch.cuda.device(x.device) if x.is_cuda else contextlib.nullcontext():
            launch(mode, x2, weight.contiguous(), y, float(eps))
    return y.reshape(x.shape)
