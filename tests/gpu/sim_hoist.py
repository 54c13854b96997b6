"""Hoist every device indicator with its CUDA kernel and save the rows.

    NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1 python tests/gpu/sim_hoist.py OUT.npz

Meant for numba's CUDA simulator, like ``sim_run.py``: each device fill
(``INDICATORS[name].fill``) runs as plain Python in the simulated threads, two threads a
block; ``test_cuda_sim.py`` compares the rows with the CPU kernels.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # helpers

import numpy as np  # noqa: E402
from helpers.bars import random_bars  # noqa: E402
from helpers.gpu_cases import BARS_SEED, HOIST_ARGS, HOIST_BARS  # noqa: E402
from numba import cuda  # noqa: E402

from barsweep.engine.gpu.hoist import DEVICE_INDICATORS, hoist_kernel  # noqa: E402
from barsweep.engine.indicators.registry import INDICATORS  # noqa: E402

THREADS = 2


def main(out: str) -> None:
    from numba import config

    assert config.ENABLE_CUDASIM and config.DISABLE_JIT, "run under the CUDA simulator"
    bars = random_bars(HOIST_BARS, BARS_SEED)
    high, low, close = (cuda.to_device(bars[k]) for k in ("high", "low", "close"))
    rows = {}
    for name in DEVICE_INDICATORS:
        args = np.array(HOIST_ARGS[INDICATORS[name].arg_names], dtype=np.float64)
        n = len(args)
        table = cuda.device_array((n, HOIST_BARS), order="F")
        scratch = cuda.device_array((2 * n, HOIST_BARS), order="F")
        hoist_kernel(name)[math.ceil(n / THREADS), THREADS](high, low, close,
                                                            cuda.to_device(args), 0, table,
                                                            scratch)
        rows[name] = table.copy_to_host()
    np.savez(out, **rows)


if __name__ == "__main__":
    main(sys.argv[1])
