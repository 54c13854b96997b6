"""Kernels compiled to PTX for compute capability 9.0 (an H200) without a GPU, and
assembled by the toolkit wheel's ``ptxas``: what the scripts of tests/gpu share."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

CC = (9, 0)
USED = re.compile(r"Used (\d+) registers")
PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


class Device:
    """numba's one question to a device, answered with :data:`CC`: set as
    ``numba.cuda.dispatcher.get_current_device``."""

    compute_capability = CC


def ptxas() -> str:
    """The path of the toolkit wheel's ``ptxas`` (else one on PATH)."""
    try:
        import nvidia.cuda_nvcc as nvcc

        for folder in nvcc.__path__:
            path = Path(folder) / "bin" / "ptxas"
            if path.exists():
                return str(path)
    except ImportError:
        pass
    found = shutil.which("ptxas")
    if found is None:
        raise SystemExit("no ptxas: install the nvidia-cuda-nvcc-cu12 wheel ([test] extra)")
    return found


def parse(log: str) -> dict[str, int]:
    """The kernel's registers (the entry function's) and the stack and spill bytes of
    every function in ``ptxas -v``'s ``log``."""
    entry = log[log.index("Compiling entry function"):]
    props = [tuple(map(int, m)) for m in PROPS.findall(log)]
    return {"registers": int(USED.search(entry).group(1)),
            "stack": sum(p[0] for p in props), "spill_stores": sum(p[1] for p in props),
            "spill_loads": sum(p[2] for p in props), "functions": len(props)}
