"""Trace ``simulate`` run as plain Python (``NUMBA_DISABLE_JIT=1``): which bar each
iteration of its loop starts at and how many bars each call of the strategy's flat
``scan`` may look at, in lockstep and not, for one ema_cross combo.

    NUMBA_DISABLE_JIT=1 python tests/engine/lockstep_trace.py '{"fill": "close"}'

Prints one JSON line (read by ``test_lockstep.py``).
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from helpers.bars import random_bars  # noqa: E402

from barsweep.engine import N_METRICS, Execution, get_strategy  # noqa: E402
from barsweep.engine.core import simulate as sim  # noqa: E402
from barsweep.engine.core.hoist import hoist  # noqa: E402
from barsweep.engine.core.inputs import prepare_inputs  # noqa: E402
from barsweep.engine.core.simulate import Outputs, no_segments  # noqa: E402
from barsweep.engine.strategies import kernels  # noqa: E402

N_BARS = 600


def traced(lockstep: bool, execution: Execution) -> dict:
    strategy = get_strategy("ema_cross")
    inputs = prepare_inputs(strategy, random_bars(N_BARS, 3),
                          dict(fast=np.array([4]), slow=np.array([15])), execution, 8760.0)
    ind, rows = hoist(strategy, inputs.columns, inputs.strategy_params, inputs.n_combos)
    compiled = kernels.compiled(strategy.signal)
    widths, starts = [], []

    def scan(ind, rows, fparams, bars, t, limit, allow_long, allow_short, cash):
        widths.append(limit - t)
        return compiled.scan(ind, rows, fparams, bars, t, limit, allow_long, allow_short,
                             cash)

    book = sim.book_segments

    def book_segments(segs, t, *args):
        if t < N_BARS and (not starts or starts[-1] != t):
            starts.append(t)  # the loop's top (and again after a scan: the same bar)
        return book(segs, t, *args)

    sim.book_segments = book_segments
    try:
        out = Outputs(np.zeros((1, N_METRICS)), no_segments(1))
        sim.simulate(compiled.step, scan, inputs.bars, ind, inputs.combos(rows), 0,
                     inputs.runs(None)[0], out, lockstep, None)
    finally:
        sim.book_segments = book
    metrics = out.metrics[0]
    return {"scan_widths": sorted(set(widths)), "iteration_bars": starts,
            "iterations": len(starts), "metrics": [repr(float(v)) for v in metrics],
            "n_trades": float(metrics[8])}


if __name__ == "__main__":
    execution = Execution(**json.loads(sys.argv[1]))
    print(json.dumps({"n_bars": N_BARS, "lockstep": traced(True, execution),
                      "whole": traced(False, execution)}))
