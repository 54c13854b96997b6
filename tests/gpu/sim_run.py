"""Run every case of ``tests/helpers/gpu_cases.py`` through ``sweep_cuda`` and save the metrics.

    NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1 python tests/gpu/sim_run.py OUT.npz

Meant for numba's CUDA simulator (both variables must be set before numba is imported,
so ``tests/gpu/test_cuda_sim.py`` runs this in its own process): the device functions
then run as the plain Python they are written in, and the parent compares the results
with the compiled CPU kernel. Also prints one JSON line of checks on the device bar cache.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent)]  # helpers

import numpy as np  # noqa: E402
from helpers.bars import random_bars  # noqa: E402
from helpers.gpu_cases import (  # noqa: E402
    BARS_SEED,
    N_BARS,
    N_SEGMENTS,
    RUIN_BARS,
    SPANS,
    cases,
    import_modules,
    ruin_bars,
    ruin_cases,
)

from barsweep.engine import Execution, get_strategy  # noqa: E402
from barsweep.engine.core.inputs import bar_tuple  # noqa: E402
from barsweep.engine.gpu import hoist as gpu_hoist  # noqa: E402
from barsweep.engine.gpu import sweep as gpu  # noqa: E402


def main(out: str) -> None:
    from numba import config

    assert config.ENABLE_CUDASIM and config.DISABLE_JIT, "run under the CUDA simulator"
    import_modules()
    # small blocks and few of them: several blocks, and the grid-stride loop, in use
    gpu.THREADS_PER_BLOCK = gpu_hoist.THREADS_PER_BLOCK = 8
    gpu.MAX_BLOCKS_PER_SM = 2
    bars = random_bars(N_BARS, BARS_SEED)
    results = {}
    for case_id, strategy, _, params, execution in cases():
        results[case_id] = gpu.sweep_cuda(get_strategy(strategy), bars, params,
                                          Execution(**execution), 8760.0)
    wild = ruin_bars(**RUIN_BARS)
    for case_id, strategy, _, params, execution in ruin_cases():
        results[case_id] = gpu.sweep_cuda(get_strategy(strategy), wild, params,
                                          Execution(**execution), 8760.0)
    np.savez(out, **results)
    # walk-forward spans and PBO segment sums, on the first case with a grid
    case_id, strategy, _, params, execution = next(c for c in cases() if c[3])
    spans = gpu.sweep_cuda(get_strategy(strategy), bars, params, Execution(**execution),
                           8760.0, spans=SPANS)
    segs = np.empty((len(next(iter(params.values()))), N_SEGMENTS, 2))
    segmented = gpu.sweep_cuda(get_strategy(strategy), bars, params, Execution(**execution),
                               8760.0, seg_sums=segs)
    np.savez(spans_file(out), spans=spans, segmented=segmented, seg_sums=segs)
    # the bars stay on the device under their key, and a later call reuses them
    first = gpu.device_bars(bar_tuple(bars), ("bars", 1))
    again = gpu.device_bars(bar_tuple(bars), ("bars", 1))
    other = gpu.device_bars(bar_tuple(bars), ("bars", 2))
    checks = {
        "reused": all(a is b for a, b in zip(first, again)),
        "distinct_key_copied": all(a is not b for a, b in zip(first, other)),
        "cached_keys": len(gpu._BARS),
    }
    for k in range(gpu.MAX_CACHED_BARS):  # the least recently used set goes first
        gpu.device_bars(bar_tuple(bars), ("more", k))
    checks["evicted_oldest"] = ("bars", 1) not in gpu._BARS
    checks["kept"] = len(gpu._BARS)
    print("CHECKS " + json.dumps(checks))


def spans_file(out: str | Path) -> Path:
    """Where the spans and segment sums are saved, beside ``out``."""
    return Path(out).with_suffix(".spans.npz")


if __name__ == "__main__":
    main(sys.argv[1])
