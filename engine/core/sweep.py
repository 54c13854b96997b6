"""Sweep one block of combos on this process's CPU threads: hoist, pack, run the
strategy's kernel (:func:`barsweep.engine.dispatch.sweep_block` picks this or the GPU's
:func:`~barsweep.engine.gpu.sweep.sweep_cuda`)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from .hoist import hoist
from .inputs import locality_order, prepare_inputs
from .metrics import N_METRICS
from .simulate import Outputs, no_segments


def sweep_cpu(strategy, bars, params, execution, ppy, spans=None, seg_sums=None, timings=None,
              kernel=None) -> np.ndarray:
    """:func:`~barsweep.engine.dispatch.sweep_block` on this process's CPU threads
    (:func:`run_kernel`), with the strategy's sweep kernel or ``kernel`` (the same
    arguments: e.g. its ``lockstep_kernel``, :mod:`~barsweep.engine.strategies.kernels`)."""
    t0 = time.perf_counter()
    inputs = prepare_inputs(strategy, bars, params, execution, ppy)
    ind, rows = hoist(strategy, inputs.columns, inputs.strategy_params, inputs.n_combos)
    order = locality_order(rows)
    combos = inputs.combos(rows, order)
    t1 = time.perf_counter()
    runs = inputs.runs(spans)
    swept = np.empty((len(runs), inputs.n_combos, N_METRICS))
    segs = (no_segments(inputs.n_combos) if seg_sums is None
            else np.empty((inputs.n_combos, *seg_sums.shape[1:])))
    for k, run in enumerate(runs):
        run_kernel(kernel or strategy.kernel, inputs.bars, ind, combos, run,
                   Outputs(swept[k], segs))
    if seg_sums is not None:
        seg_sums[order] = segs
    if timings is not None:
        timings["indicators"] = t1 - t0
        timings["kernel"] = time.perf_counter() - t1
    out = np.empty_like(swept)
    out[:, order] = swept
    return out[0] if spans is None else out


#: Combos per piece when a sweep is split over threads: pieces this size keep the
#: threads busy to the end without costing anything measurable per call.
PIECE_COMBOS = 64


def run_kernel(kernel, bars, ind, combos, run, out) -> None:
    """Run a strategy's sweep ``kernel`` over ``combos`` (writing ``out``'s metrics and
    segment rows, recording nothing: its record is None), on ``numba.get_num_threads()``
    threads of this process.

    The kernel is serial and releases the GIL (``nogil``): threads run it on contiguous
    pieces of the combos, which write disjoint rows of ``out``. A Dask task limits this
    to one thread (``engine.backend.limit_threads``); a serial kernel compiles in half
    the time of a ``prange`` one (measured in benchmarks/NOTES.md).
    """
    n = combos.rows.shape[0]
    n_threads = min(numba.get_num_threads(), -(-n // PIECE_COMBOS))
    if n_threads <= 1:
        kernel(bars, ind, combos, run, out, None)
        return
    edges = np.linspace(0, n, min(n, 4 * n_threads) + 1).astype(np.int64)

    def piece(k: int) -> None:
        part = slice(edges[k], edges[k + 1])
        kernel(bars, ind, combos.take(part), run, out.take(part), None)

    with ThreadPoolExecutor(n_threads, thread_name_prefix="barsweep-kernel") as pool:
        list(pool.map(piece, range(edges.size - 1)))
