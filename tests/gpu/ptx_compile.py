"""Compile every strategy's CUDA sweep kernel and the device hoisting kernels to PTX.

    python tests/gpu/ptx_compile.py

No GPU needed: numba.cuda types the kernels and lowers them through NVVM (libnvvm from
the ``nvidia-cuda-nvcc-cu12`` wheel) to PTX for compute capability 9.0 (an H200), so
this proves the one-source device code compiles for real, which the simulator cannot.
numba asks the current device for its compute capability when it compiles a device
function; there is none here, so that one question is answered with 9.0. Prints one
JSON line: per kernel, the PTX size and its fused multiply-adds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # helpers

import numpy as np  # noqa: E402
from helpers.gpu_cases import import_modules  # noqa: E402
from helpers.ptx import CC, Device  # noqa: E402
from numba import cuda, typeof  # noqa: E402

from barsweep.engine import N_METRICS, Execution, get_strategy, strategy_names  # noqa: E402
from barsweep.engine.core.execution import run_settings  # noqa: E402
from barsweep.engine.core.inputs import Bars, Combos  # noqa: E402
from barsweep.engine.core.simulate import Outputs  # noqa: E402
from barsweep.engine.gpu import sweep as gpu  # noqa: E402
from barsweep.engine.gpu.hoist import DEVICE_INDICATORS, hoist_kernel  # noqa: E402


def main() -> None:
    import numba.cuda.dispatcher as dispatcher

    dispatcher.get_current_device = Device  # the only question asked of a device
    import_modules()
    n = 8
    bar = typeof(np.zeros(n))
    ind = typeof(np.asfortranarray(np.zeros((2, n))))
    report = {}
    bars = typeof(Bars(*[np.zeros(n)] * 6))
    run = typeof(run_settings(Execution(), 8760.0, np.zeros(n)))
    out = typeof(Outputs(np.zeros((n, N_METRICS)), np.zeros((n, 2, 2))))
    for name in strategy_names():
        strategy = get_strategy(name)
        combos = Combos(np.zeros((n, 2), dtype=np.int64), np.zeros((n, len(strategy.params))),
                        *[np.zeros(n)] * 6, np.zeros(n, dtype=np.int64))
        args = (bars, ind, typeof(combos), run, out)
        ptx, _ = cuda.compile_ptx(gpu.sweep_kernel(strategy).py_func, args, cc=CC)
        report[name] = {"ptx_chars": len(ptx), "fma": ptx.count("fma.rn.f64")}
    table = typeof(np.asfortranarray(np.zeros((4, n))))
    for row_name in DEVICE_INDICATORS:
        args = (bar, bar, bar, typeof(np.zeros((n, 3))), typeof(0), table, table)
        ptx, _ = cuda.compile_ptx(hoist_kernel(row_name).py_func, args, cc=CC)
        report[f"hoist_{row_name}"] = {"ptx_chars": len(ptx), "fma": ptx.count("fma.rn.f64")}
    print("PTX " + json.dumps(report))


if __name__ == "__main__":
    main()
