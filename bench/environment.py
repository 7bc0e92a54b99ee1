"""What a run ran on: the GPU, its state just before the run, the software, and the two
ceilings (copy bandwidth, bf16 matrix rate) measured in the same run."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib import metadata
from typing import Any

import torch

from bench.timing import event_time_ms


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _nvidia_smi(fields: str) -> list[str] | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [v.strip() for v in out.strip().splitlines()[0].split(",")]


def _number(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:  # "[N/A]"
        return None


def gpu_state() -> dict[str, float | None]:
    """SM clock, memory clock, utilisation, temperature and power, read now."""
    fields = "clocks.sm,clocks.mem,utilization.gpu,temperature.gpu,power.draw"
    values = _nvidia_smi(fields) or [None] * 5
    keys = ["sm_clock_mhz", "mem_clock_mhz", "utilization_pct", "temperature_c", "power_w"]
    return {k: _number(v) for k, v in zip(keys, values, strict=True)}


def describe(device: torch.device) -> dict[str, Any]:
    props = torch.cuda.get_device_properties(device)
    driver = _nvidia_smi("driver_version")
    return {
        "gpu": {
            "name": props.name,
            "sm_count": props.multi_processor_count,
            "l2_bytes": int(getattr(props, "L2_cache_size", 0)),
            "memory_bytes": int(props.total_memory),
            "compute_capability": f"{props.major}.{props.minor}",
        },
        "driver": driver[0] if driver else None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": _version("triton"),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in ("liger-kernel", "numpy")},
        "platform": platform.platform(),
        "argv0": sys.executable,
    }


def measure_peaks(device: torch.device, repeat: int = 20) -> dict[str, Any]:
    """Device-to-device copy (bytes read + written) and cuBLAS bf16 matrix products on
    random data (zeros run faster and would flatter the ceiling)."""
    n = 1 << 30  # 1 GiB each way: far beyond L2
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    copy_ms = sorted(event_time_ms(lambda: dst.copy_(src)) for _ in range(repeat))[repeat // 2]
    src = dst = torch.empty(0)
    mm: dict[str, float] = {}
    for size in (4096, 8192):
        a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
        b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
        for _ in range(3):
            torch.mm(a, b)
        ms = sorted(event_time_ms(lambda a=a, b=b: torch.mm(a, b)) for _ in range(repeat))[repeat // 2]
        mm[str(size)] = 2 * size**3 / (ms * 1e-3) / 1e12
        del a, b
    torch.cuda.empty_cache()
    return {
        "copy_GBps": 2 * n / (copy_ms * 1e-3) / 1e9,
        "copy_bytes_each_way": n,
        "mm_bf16_TFLOPs": max(mm.values()),
        "mm_bf16_TFLOPs_by_size": mm,
        "statistic": f"median of {repeat} event-timed calls",
    }
