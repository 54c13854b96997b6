"""Sweep one block of combos: hoist, pack, run the strategy's kernel, on the CPU or
(``backend="cuda"``) the GPU."""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

from ...errors import SpecError
from ..strategies.base import Strategy
from .block import locality_order, prepare_block
from .execution import Execution
from .hoist import hoist
from .metrics import N_METRICS
from .simulate import Outputs, no_segments


def sweep_block(
    strategy: Strategy,
    bars: Mapping[str, np.ndarray],
    params: Mapping[str, np.ndarray],
    execution: Execution,
    ppy: float,
    *,
    backend: str = "cpu",
    bars_key: Hashable | None = None,
    spans: Sequence[tuple[int, int]] | None = None,
    seg_sums: np.ndarray | None = None,
    timings: dict[str, float] | None = None,
) -> np.ndarray:
    """Metrics of every combo of a block, never materializing combos x bars.

    Parameters
    ----------
    strategy : Strategy
    bars : mapping with ``open``, ``high``, ``low``, ``close`` ndarrays, shape (n_bars,)
    params : mapping of parameter name to ndarray, shape (n_combos,)
        One value per combo for each of the strategy's parameters, and for any of
        ``stop_loss``, ``take_profit``, ``trailing_stop`` swept as grid axes.
    execution : Execution
    ppy : float
        Bars per year, for annualized metrics.
    backend : {"cpu", "cuda"}, default "cpu"
        ``cuda`` runs :func:`barsweep.engine.gpu.sweep.sweep_cuda` (same arithmetic, same
        result), keeping the bars on the device under ``bars_key`` for later calls in
        this process (None: copied each call).
    spans : sequence of (start, end), optional
        Runs over bars ``[start, end)`` only, one per span (walk-forward windows): each
        starts flat with ``init_cash`` at its first bar, the indicators warmed up on every
        bar before it (``simulate``). None: one run over every bar.
    seg_sums : ndarray, shape (n_combos, S, 2), optional
        Written (without ``spans``): the sums of each combo's bar returns and of their
        squares over S equal segments of the bars (``simulate``'s ``segs``).
    timings : dict, optional
        Receives the seconds spent hoisting the indicators (``indicators``) and in the
        kernel (``kernel``); on ``cuda`` the device stages (``sweep_cuda``).

    Returns
    -------
    ndarray, shape (n_combos, N_METRICS), float64
        Columns in ``METRICS`` order; with ``spans``, shape (n_spans, n_combos,
        N_METRICS).

    Examples
    --------
    >>> import numpy as np
    >>> from barsweep.engine import Execution, get_strategy, sweep_block
    >>> close = 100 + np.cumsum(np.random.default_rng(0).normal(size=500))
    >>> bars = dict(open=close, high=close, low=close, close=close)
    >>> out = sweep_block(get_strategy("ema_cross"), bars,
    ...             dict(fast=np.array([5, 10]), slow=np.array([20, 40])), Execution(), 8760)
    >>> out.shape
    (2, 18)
    """
    if seg_sums is not None and spans is not None:
        raise ValueError("seg_sums are summed over one run of every bar: not with spans")
    if backend == "cuda":
        from ..gpu.sweep import sweep_cuda  # imports numba.cuda: only where it is asked for

        return sweep_cuda(strategy, bars, params, execution, ppy, bars_key, timings,
                          spans=spans, seg_sums=seg_sums)
    if backend != "cpu":
        raise SpecError(f"backend must be 'cpu' or 'cuda', got {backend!r}")
    return sweep_cpu(strategy, bars, params, execution, ppy, spans, seg_sums, timings)


def sweep_cpu(strategy, bars, params, execution, ppy, spans=None, seg_sums=None, timings=None,
              kernel=None) -> np.ndarray:
    """:func:`sweep_block` on this process's CPU threads (:func:`run_kernel`), with the
    strategy's sweep kernel or ``kernel`` (the same arguments: e.g. its
    ``lockstep_kernel``, :mod:`~barsweep.engine.strategies.kernels`)."""
    t0 = time.perf_counter()
    block = prepare_block(strategy, bars, params, execution, ppy)
    ind, rows = hoist(strategy, block.columns, block.strategy_params, block.n_combos)
    order = locality_order(rows)
    combos = block.combos(rows, order)
    t1 = time.perf_counter()
    runs = block.runs(spans)
    swept = np.empty((len(runs), block.n_combos, N_METRICS))
    segs = (no_segments(block.n_combos) if seg_sums is None
            else np.empty((block.n_combos, *seg_sums.shape[1:])))
    for k, run in enumerate(runs):
        run_kernel(kernel or strategy.kernel, block.bars, ind, combos, run,
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
