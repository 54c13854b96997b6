"""What this process can run kernels on: its CPU threads, and whether a CUDA GPU is here.

The pipeline asks these questions of every Dask worker; the answers depend only on the
process (numba's threads, the NVIDIA driver, ``CUDA_VISIBLE_DEVICES``), so they live
with the kernels.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

#: Where an NVIDIA driver leaves a trace: Linux's driver and control device, WSL2's GPU.
DRIVER_TRACES = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/dxg")


def limit_threads(n: int) -> None:
    """Let the CPU kernels use at most ``n`` threads in this process."""
    import numba

    numba.set_num_threads(max(1, min(n, numba.config.NUMBA_NUM_THREADS)))


def cuda_problem_here() -> str | None:
    """Why CUDA kernels cannot run in this process, or None if they can.

    Without the simulator and without any trace of an NVIDIA driver this answers without
    importing numba.cuda (which costs a CPU worker ~0.2-0.4 s).
    """
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0") and not any(
            Path(p).exists() for p in DRIVER_TRACES):
        return f"no NVIDIA driver on this machine (none of {', '.join(DRIVER_TRACES)})"
    from .gpu.sweep import cuda_problem

    return cuda_problem()


def process_gpu() -> dict:
    """``{"problem": why CUDA kernels cannot run here or None, "gpu": the GPU this
    process would use, as "host:device"}`` (the first of ``CUDA_VISIBLE_DEVICES``, which
    dask-cuda sets per worker). Never raises: a broken CUDA install is a problem."""
    try:
        problem = cuda_problem_here()
    except Exception as exc:  # a broken CUDA install: the CPU still works
        problem = f"checking CUDA failed ({type(exc).__name__}: {exc})"
    device = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
    return {"problem": problem, "gpu": f"{socket.gethostname()}:{device}"}
