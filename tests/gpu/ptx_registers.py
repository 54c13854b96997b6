"""Assemble strategies' CUDA sweep kernels for sm_90 with ptxas and print their registers.

    python tests/gpu/ptx_registers.py [STRATEGY ...]     # default: ema_cross

No GPU needed: numba.cuda lowers the kernel to PTX for compute capability 9.0 (an H200),
with the launch bounds its dispatcher is built with (``barsweep.engine.gpu.sweep``), as
``ptx_compile.py`` does; then ``ptxas -v --gpu-name sm_90`` of the toolkit wheel
(``nvidia-cuda-nvcc-cu12``, which also brings NVVM) assembles it and reports, per
function, its registers, stack frame and spilled bytes. Prints one JSON line: per
strategy, ``registers`` of the kernel and, summed over the kernel and the functions it
calls, ``spill_stores``, ``spill_loads`` and ``stack`` (bytes).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # helpers

import numpy as np  # noqa: E402
from helpers.ptx import CC, Device, parse, ptxas  # noqa: E402
from numba import cuda, typeof  # noqa: E402

from barsweep.engine import N_METRICS, Execution, get_strategy  # noqa: E402
from barsweep.engine.core.execution import run_settings  # noqa: E402
from barsweep.engine.core.inputs import Bars, Combos  # noqa: E402
from barsweep.engine.core.simulate import Outputs  # noqa: E402
from barsweep.engine.gpu import sweep as gpu  # noqa: E402


def kernel_ptx(name: str) -> str:
    """The PTX of strategy ``name``'s sweep kernel for sm_90, typed as ``ptx_compile.py``
    types it, with the dispatcher's launch bounds."""
    n = 8
    strategy = get_strategy(name)
    combos = Combos(np.zeros((n, 2), dtype=np.int64), np.zeros((n, len(strategy.params))),
                    *[np.zeros(n)] * 6, np.zeros(n, dtype=np.int64))
    args = (typeof(Bars(*[np.zeros(n)] * 6)), typeof(np.asfortranarray(np.zeros((2, n)))),
            typeof(combos), typeof(run_settings(Execution(), 8760.0, np.zeros(n))),
            typeof(Outputs(np.zeros((n, N_METRICS)), np.zeros((n, 2, 2)))))
    kernel = gpu.sweep_kernel(strategy)
    ptx, _ = cuda.compile_ptx(kernel.py_func, args, cc=CC,
                              launch_bounds=kernel.targetoptions.get("launch_bounds"))
    return ptx


def assemble(ptx: str) -> dict[str, int]:
    """``ptxas -v --gpu-name sm_90`` of ``ptx``: :func:`parse` of its report."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "kernel.ptx"
        source.write_text(ptx)
        proc = subprocess.run([ptxas(), "-v", "--gpu-name", "sm_90", str(source), "-o",
                               str(Path(tmp) / "kernel.cubin")], capture_output=True, text=True,
                              timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"ptxas failed: {proc.stderr[-3000:]}")
    return parse(proc.stdout + proc.stderr)


def main(names: list[str]) -> None:
    import numba.cuda.dispatcher as dispatcher

    dispatcher.get_current_device = Device  # the only question asked of a device
    report = {name: assemble(kernel_ptx(name)) for name in names}
    print("REGISTERS " + json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:] or ["ema_cross"])
