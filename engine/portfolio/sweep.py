"""Sweep a strategy over a portfolio: N aligned symbols traded from one cash account.

The per-bar arithmetic is :mod:`barsweep.engine.portfolio.sim`; the contract is
docs/EXECUTION.md, "Portfolios". As for single-symbol sweeps
(:mod:`barsweep.engine.strategies.kernels`), each signal's portfolio kernel is written
once as a small module of its own that imports the signal by name (:data:`KIND`, written
by :func:`~barsweep.engine.strategies.kernels.write_kernels`), so numba caches it across
processes. :func:`sweep_portfolio_with` runs each run's kernel by the runner it is given:
:func:`run_portfolio_cpu` here, or the GPU's
(:func:`barsweep.engine.gpu.portfolio.run_portfolio_cuda`), which
:func:`barsweep.engine.dispatch.sweep_portfolio` picks by ``backend``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import TYPE_CHECKING

import numba
import numpy as np

from ...errors import SpecError
from ..core.execution import (
    ORDER_AXES,
    Execution,
    RunSettings,
    execution_of,
    over_span,
    run_settings,
)
from ..core.hoist import hoist
from ..core.inputs import Bars, locality_order, prepare_inputs, read_only
from ..core.metrics import N_METRICS
from ..strategies import kernels
from .book import Book
from .periods import rebalance_table
from .sim import N_SYMBOL_METRICS
from .weights import hoist_sizing, lookback_column

if TYPE_CHECKING:
    from ..strategies.base import Strategy

#: The portfolio's kernel module: ``step``, ``scan`` and ``portfolio_kernel``.
KIND = kernels.KernelKind("portfolio kernel", "The portfolio kernel", """\
import numpy as np
from numba import njit

from {engine}.portfolio.sim import N_STATE, member_bars, simulate_portfolio
from {engine}.core.simulate import scan_flat
""", """

@njit(nogil=True, cache={cache})
def portfolio_kernel(stacked, px, ind, combos, book, run, bench, out, per_symbol, segs, rec):
    sbars = member_bars(stacked)
    state = np.zeros((ind.shape[0], N_STATE))
    for c in range(combos.rows.shape[0]):
        simulate_portfolio(step, scan, ACCOUNT, sbars, px, ind, combos, book, c, run,
                           bench, state, out, per_symbol, segs, rec)
""", prefix="portfolio_")

_COMPILED: dict[object, ModuleType] = {}


def portfolio_kernel(signal):
    """The compiled portfolio kernel of ``signal`` (a module-level ``@njit`` signal of 5, 8 or
    11 arguments), written and imported once per process.

    It is called ``portfolio_kernel(stacked, px, ind, combos, book, run, bench, out,
    per_symbol, segs, rec)`` (:func:`barsweep.engine.portfolio.sim.simulate_portfolio`),
    ``stacked`` the members' bars as :func:`stack_bars` gives them: its types, and so its
    one compiled specialisation, do not depend on the number of members.
    """
    module = _COMPILED.get(signal)
    if module is None:
        module = _COMPILED[signal] = kernels.write_kernels(signal, KIND)
    return module.portfolio_kernel


def stack_bars(members: Sequence[Bars], px: np.ndarray) -> Bars:
    """The members' :class:`~barsweep.engine.core.inputs.Bars` as one Bars whose fields are
    read-only C-contiguous arrays, shape (N, n_bars), its prices views of ``px`` (shape
    (4, N, n_bars): open, close, high, low): what the CPU portfolio kernel takes
    (:func:`barsweep.engine.portfolio.sim.member_bars` gives each member's back).

    >>> from barsweep.engine.core.inputs import bar_tuple
    >>> one = bar_tuple(dict(open=np.ones(3), high=np.ones(3), low=np.ones(3),
    ...                      close=np.arange(1.0, 4.0)))
    >>> px = np.stack([[one[k], one[k]] for k in (0, 3, 1, 2)])
    >>> stack_bars([one, one], px).close[1]
    array([1., 2., 3.])
    """
    funding, bench = (np.stack([getattr(b, name) for b in members])
                      for name in ("funding", "bench"))
    return Bars(*(read_only(a) for a in (px[0], px[2], px[3], px[1], funding, bench)))


def equal_weight_benchmark(closes: np.ndarray) -> np.ndarray:
    """The bar returns of buying ``1 / N`` of the account in each symbol at the first
    close and holding: ``B_t = mean_i(close_i[t] / close_i[0])``, ``b_0 = 0``,
    ``b_t = B_t / B_(t-1) - 1``.

    Parameters
    ----------
    closes : ndarray, shape (N, n_bars)

    Returns
    -------
    ndarray, shape (n_bars,)

    Examples
    --------
    >>> equal_weight_benchmark(np.array([[1.0, 2.0], [1.0, 1.0]]))
    array([0. , 0.5])
    """
    level = (closes / closes[:, :1]).mean(axis=0)
    out = np.zeros(closes.shape[1])
    out[1:] = level[1:] / level[:-1] - 1.0
    return out


def check_portfolio_execution(execution: Execution, rebalances: bool = False) -> None:
    """Refuse what portfolios do not model: pending entry orders, ATR distances (each
    member would have its own ATR), and, when the spec rebalances (``rebalances``),
    shorts and sizes other than the weights' (a rebalance re-targets every position to
    its weight)."""
    if execution.entry_order.type != "market":
        raise SpecError("a portfolio enters at market only: remove execution.entry_order")
    if execution.size.atr is not None:
        raise SpecError("a portfolio's risk size measures its stop by stop_loss: remove "
                        "execution.size.atr")
    if rebalances and execution.direction != "long":
        raise SpecError("a rebalanced portfolio trades long only: set execution.direction: "
                        "long or remove portfolio.rebalance")
    if rebalances and (execution.size.type != "all" or execution.lot is not None):
        raise SpecError("a rebalance re-targets each position to its portfolio.weight: "
                        "remove execution.size and execution.lot or portfolio.rebalance")


def max_positions_column(max_positions, n_combos: int, n_symbols: int) -> np.ndarray:
    """``max_positions`` (None, an int, or one int per combo) as int64 per combo; 0 is
    no limit. Values must be integers >= 1."""
    if max_positions is None:
        return np.zeros(n_combos, dtype=np.int64)
    values = np.broadcast_to(np.asarray(max_positions), (n_combos,))
    if not np.all(np.isfinite(values)) or np.any(values < 1) or np.any(values != np.round(values)):
        raise SpecError(f"max_positions must be integers >= 1, got {np.unique(values)}")
    return np.minimum(values.astype(np.int64), n_symbols)


def sweep_portfolio_with(
    runner: Callable,
    strategy: Strategy,
    bars: Mapping[str, Mapping[str, np.ndarray]],
    params: Mapping[str, np.ndarray],
    execution: Execution | Mapping,
    ppy: float,
    *,
    max_positions=None,
    rebalance=None,
    weight: str = "equal",
    lookback=None,
    priority=None,
    spans: Sequence[tuple[int, int]] | None = None,
    seg_sums: np.ndarray | None = None,
    timings: dict[str, float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`barsweep.engine.dispatch.sweep_portfolio` (the same arguments but
    ``backend`` and ``record``) with each run's kernel run by ``runner``: called
    ``runner(signal, sbars, px, ind, combos, book, run, bench, metrics, per_symbol,
    segs)`` as :func:`run_portfolio_cpu` (``record`` bound) or
    :func:`~barsweep.engine.gpu.portfolio.run_portfolio_cuda`, writing ``metrics``,
    ``per_symbol`` and ``segs``."""
    t0 = time.perf_counter()
    if seg_sums is not None and spans is not None and len(spans) != 1:
        raise ValueError("seg_sums are summed over one run: give one span at most")
    execution = execution_of(execution)
    check_portfolio_execution(execution, rebalance is not None and any(
        r is not None for r in np.atleast_1d(np.asarray(rebalance, dtype=object))))
    for name in ORDER_AXES:
        if name in params:
            raise SpecError(f"a portfolio enters at market only: remove the grid axis "
                            f"{name}")
    if strategy.signal is None:
        raise SpecError(f"{strategy.name} has no signal: a portfolio needs one")
    if not bars:
        raise SpecError("a portfolio needs at least one symbol")
    inputs = [prepare_inputs(strategy, b, params, execution, ppy) for b in bars.values()]
    lengths = {len(b.bars.close) for b in inputs}
    if len(lengths) > 1:
        raise SpecError(f"the symbols' bars differ in length {sorted(lengths)}: align them")
    first = inputs[0]
    tables = [hoist(strategy, b.columns, b.strategy_params, b.n_combos) for b in inputs]
    rows = tables[0][1]
    ind = np.stack([table[0] for table in tables])
    order = locality_order(rows)
    combos = first.combos(rows, order)
    sbars = tuple(b.bars for b in inputs)
    px = np.stack([[b.bars[k] for b in inputs] for k in (0, 3, 1, 2)])  # open close high low
    runs = portfolio_runs(execution, ppy, px[1], spans)
    kmax = max_positions_column(max_positions, first.n_combos, len(inputs))[order]
    rebalance_bars, rebal = rebalance_table(next(iter(bars.values())).get("time"),
                                            rebalance, first.n_combos)
    lookbacks, lb_index = lookback_column(lookback, first.n_combos)
    sizing = hoist_sizing(px[1], lookbacks, weight, priority, list(bars))
    book = Book(kmax, lb_index[order], rebal[order], sizing, rebalance_bars)
    metrics = np.empty((len(runs), first.n_combos, N_METRICS))
    per_symbol = np.empty((len(runs), first.n_combos, len(inputs), N_SYMBOL_METRICS))
    segs = np.empty((first.n_combos, 0 if seg_sums is None else seg_sums.shape[1], 2))
    t1 = time.perf_counter()
    for k, (run, bench) in enumerate(runs):
        runner(strategy.signal, sbars, px, ind, combos, book, run, bench, metrics[k],
               per_symbol[k], segs)
    if timings is not None:
        timings["indicators"] = t1 - t0
        timings["kernel"] = time.perf_counter() - t1
    out, out_sym = np.empty_like(metrics), np.empty_like(per_symbol)
    out[:, order] = metrics
    out_sym[:, order] = per_symbol
    if seg_sums is not None:
        seg_sums[order] = segs
    return (out[0], out_sym[0]) if spans is None else (out, out_sym)


def portfolio_runs(execution: Execution, ppy: float, closes: np.ndarray,
                   spans: Sequence[tuple[int, int]] | None,
                   ) -> list[tuple[RunSettings, np.ndarray]]:
    """The settings and benchmark returns of each run of a portfolio sweep: one over
    every bar, or one per span ``(start, end)``, whose benchmark is the equal-weight
    buy-and-hold bought at its first bar (:func:`equal_weight_benchmark` of the span's
    closes; 0 outside the span).

    Parameters
    ----------
    closes : ndarray, shape (N, n_bars)

    Examples
    --------
    >>> closes = np.array([[1.0, 2.0, 4.0], [1.0, 1.0, 1.0]])
    >>> [bench.tolist() for _, bench in portfolio_runs(Execution(), 252, closes, [(1, 3)])]
    [[0.0, 0.0, 0.5]]
    """
    if spans is None:
        bench = equal_weight_benchmark(closes)
        return [(run_settings(execution, ppy, bench), bench)]
    runs = []
    for start, end in spans:
        if not 0 <= start < end <= closes.shape[1]:
            raise ValueError(f"need 0 <= start < end <= {closes.shape[1]}, got "
                             f"[{start}, {end})")
        bench = np.zeros(closes.shape[1])
        bench[start:end] = equal_weight_benchmark(closes[:, start:end])
        runs.append((over_span(run_settings(execution, ppy, bench), bench, start, end), bench))
    return runs


#: Combos per piece when a portfolio sweep is split over threads.
PIECE_COMBOS = 16


def run_portfolio_cpu(signal, sbars, px, ind, combos, book, run, bench, metrics, per_symbol,
                      segs, record=None) -> None:
    """One run of ``signal``'s portfolio kernel (:func:`portfolio_kernel`) on this
    process's CPU threads (:func:`run_portfolio_kernel`): ``sbars`` a tuple of each
    member's :class:`~barsweep.engine.core.inputs.Bars`, stacked here
    (:func:`stack_bars`); ``metrics``, ``per_symbol``, ``segs`` and ``record`` written."""
    run_portfolio_kernel(portfolio_kernel(signal), stack_bars(sbars, px), px, ind, combos,
                         book, run, bench, metrics, per_symbol, segs, record)


def run_portfolio_kernel(kernel, stacked, px, ind, combos, book, run, bench, metrics,
                         per_symbol, segs, record=None) -> None:
    """Run ``kernel`` (:func:`portfolio_kernel`; ``stacked`` the members' bars,
    :func:`stack_bars`) over ``combos`` on ``numba.get_num_threads()`` threads, each on a
    contiguous piece of the combos (disjoint rows of ``metrics``, ``per_symbol`` and
    ``segs``); ``record`` (a PortfolioRecord, one combo only) receives that combo's
    record; None (a sweep) compiles the kernel without any recording."""
    n = combos.rows.shape[0]
    n_threads = min(numba.get_num_threads(), -(-n // PIECE_COMBOS))
    if record is not None and n != 1:
        raise ValueError(f"a record is of one combo, got {n}")
    if n_threads <= 1:
        kernel(stacked, px, ind, combos, book, run, bench, metrics, per_symbol, segs, record)
        return
    edges = np.linspace(0, n, min(n, 4 * n_threads) + 1).astype(np.int64)

    def piece(k: int) -> None:
        part = slice(edges[k], edges[k + 1])
        kernel(stacked, px, ind, combos.take(part), book.take(part), run, bench,
               metrics[part], per_symbol[part], segs[part], None)

    with ThreadPoolExecutor(n_threads, thread_name_prefix="barsweep-portfolio") as pool:
        list(pool.map(piece, range(edges.size - 1)))
