"""``sweep_cuda`` on grids out of the kernel's order, in numba's CUDA simulator.

    NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1 python tests/gpu/sim_order.py OUT.npz

The combos of these grids are gathered into locality order on the device and their
metrics put back in the grid's order there (``tests/gpu/test_cuda_order.py`` compares
them with the CPU kernel). Also prints one JSON line of checks on the row-permuting
kernels and the reused device arrays.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # helpers

import numpy as np  # noqa: E402
from helpers.bars import random_bars  # noqa: E402
from helpers.gpu_cases import BARS_SEED, N_BARS, ORDER_CASES, SPANS  # noqa: E402

from barsweep.engine import Execution, get_strategy  # noqa: E402
from barsweep.engine.gpu import sweep as gpu  # noqa: E402


def row_checks() -> dict:
    """The row-permuting kernels against numpy; the reused device arrays."""
    rng = np.random.default_rng(5)
    src, order = rng.random((37, 3)), rng.permutation(37)
    taken = gpu.cuda.device_array(src.shape)
    gpu._launch(gpu._take_rows, gpu.cuda.to_device(src), gpu.cuda.to_device(order), taken)
    put = gpu.cuda.device_array(src.shape)
    gpu._launch(gpu._put_rows, gpu.cuda.to_device(src), gpu.cuda.to_device(order), put)
    back = np.empty_like(src)
    back[order] = src
    first = gpu.reused_array("probe", (4, 2))
    return {
        "take_rows": bool(np.array_equal(taken.copy_to_host(), src[order])),
        "put_rows": bool(np.array_equal(put.copy_to_host(), back)),
        "reused_same_shape": gpu.reused_array("probe", (4, 2)) is first,
        "new_for_other_shape": gpu.reused_array("probe", (5, 2)) is not first,
    }


def main(out: str) -> None:
    from numba import config

    assert config.ENABLE_CUDASIM and config.DISABLE_JIT, "run under the CUDA simulator"
    gpu.THREADS_PER_BLOCK = 8  # several blocks and the grid-stride loop in use
    gpu.MAX_BLOCKS_PER_SM = 2
    bars = random_bars(N_BARS, BARS_SEED)
    results = {}
    for case_id, strategy, params, execution in ORDER_CASES:
        grid = {k: np.array(v) for k, v in params.items()}
        results[case_id] = gpu.sweep_cuda(get_strategy(strategy), bars, grid,
                                          Execution(**execution), 8760.0)
        results[case_id + "-spans"] = gpu.sweep_cuda(get_strategy(strategy), bars, grid,
                                                     Execution(**execution), 8760.0,
                                                     spans=SPANS)
    np.savez(out, **results)
    print("CHECKS " + json.dumps(row_checks()))


if __name__ == "__main__":
    main(sys.argv[1])
