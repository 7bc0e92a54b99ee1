"""Which variant of the GEMM study faults under the harness (H200)?  The first matmul sweep
(18b11a7) hit an illegal memory access in its first case, after every check had passed, and
the sticky fault ended every later case.  Each variant of one case runs here in a process of
its own, the way the harness runs it: the check, cleanup (``empty_cache``), then both timers
(graph capture and replay, warm and cold sets), under ``CUDA_LAUNCH_BLOCKING=1``.

    python notes/probe_matmul_graph.py [CASE_INDEX ...]     # prints 'FAULT <variant>' lines
"""

from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, ".")


def one(index: int, name: str) -> None:
    import torch

    from bench.backends import CudaBackend
    from bench.studies.matmul import MatmulStudy

    study = MatmulStudy()
    case = study.cases(True)[index]
    variant = next(v for v in study.variants(case) if v.name == name)
    dev = torch.device("cuda", 0)
    backend = CudaBackend(dev)
    gen = torch.Generator(device=dev).manual_seed(index)
    step = variant.build(case)
    inputs = study.inputs(case, dev, gen)
    step(inputs)
    torch.cuda.synchronize()
    print(" stage check ok", flush=True)
    try:
        variant.meta(case)
    except Exception as exc:
        print(" meta raised", type(exc).__name__, str(exc)[:200])
    torch.cuda.synchronize()
    print(" stage meta ok", flush=True)
    backend.cleanup()
    traffic, _ = study.traffic(case)
    for l2 in ("warm", "cold"):
        sets = backend.sets_for(l2, traffic)
        timed = [study.inputs(case, dev, gen) for _ in range(sets)]
        device_timer, eager_timer = backend.make_timer(lambda i, timed=timed: step(timed[i]), sets, 1.0)
        t, e = device_timer.sample_us(), eager_timer.sample_us()
        torch.cuda.synchronize()
        print(f" stage {l2} ok: {device_timer.timer} {t:.1f} us, eager {e:.1f} us", flush=True)
        device_timer.release()
        backend.cleanup()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        index, name = sys.argv[2].split(":")
        one(int(index), name)
        sys.exit(0)
    from bench.studies.matmul import MatmulStudy

    study = MatmulStudy()
    env = {**os.environ, "CUDA_LAUNCH_BLOCKING": "1"}
    for index in [int(a) for a in sys.argv[1:]] or [0]:
        case = study.cases(True)[index]
        for v in study.variants(case):
            r = subprocess.run([sys.executable, __file__, "--one", f"{index}:{v.name}"], env=env,
                               capture_output=True, text=True, timeout=240)  # fmt: skip
            tail = (r.stdout + r.stderr).strip().splitlines()
            ok = r.returncode == 0
            print(f"{'ok   ' if ok else 'FAULT'} {v.name} case {study.case_id(case)}")
            if not ok:
                print("\n".join("    " + line for line in tail[-12:]))
                if v.name.startswith("compile"):  # the same kernels without Inductor's own CUDA graphs
                    mode = {**env, "LAB_MATMUL_COMPILE_MODE": "max-autotune-no-cudagraphs"}
                    r = subprocess.run([sys.executable, __file__, "--one", f"{index}:{v.name}"], env=mode,
                                       capture_output=True, text=True, timeout=240)  # fmt: skip
                    print(f"{'ok   ' if r.returncode == 0 else 'FAULT'} {v.name}[no-cudagraphs]")
            else:
                print("\n".join("    " + line for line in tail if line.startswith(" stage")))
