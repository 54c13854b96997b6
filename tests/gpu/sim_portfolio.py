"""Run every case of ``helpers/gpu_portfolio_cases.py`` through
``sweep_portfolio(..., backend="cuda")`` and save the metrics and per-symbol results.

    NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1 python tests/gpu/sim_portfolio.py OUT.npz

For numba's CUDA simulator (both variables set before numba is imported:
``tests/gpu/test_cuda_portfolio.py`` runs this in its own process); the parent runs the
same cases on the CPU kernel and compares.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # helpers

import numpy as np  # noqa: E402
from helpers.gpu_portfolio_cases import EXECUTIONS, cases, sized, strategy, universe  # noqa: E402

from barsweep.engine import Execution, sweep_portfolio  # noqa: E402
from barsweep.engine.gpu import sweep as gpu  # noqa: E402


def main(out: str) -> None:
    from numba import config

    assert config.ENABLE_CUDASIM and config.DISABLE_JIT, "run under the CUDA simulator"
    # small blocks and few of them: several blocks, and the grid-stride loop, in use
    gpu.THREADS_PER_BLOCK = 8
    gpu.MAX_BLOCKS_PER_SM = 2
    bars = universe()
    results = {}
    for case_id, name, params, execution, limit in cases():
        metrics, per_symbol = sweep_portfolio(strategy(name), bars, params,
                                              Execution(**EXECUTIONS[execution]), 8760.0,
                                              max_positions=limit, backend="cuda",
                                              **sized(case_id))
        results[f"{case_id}/metrics"] = metrics
        results[f"{case_id}/per_symbol"] = per_symbol
    np.savez(out, **results)


if __name__ == "__main__":
    main(sys.argv[1])
