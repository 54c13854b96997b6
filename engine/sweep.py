"""Sweep one block of combos on the CPU: hoist, pack, run the strategy's kernel."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from barsweep.errors import SpecError

from .execution import STOP_PARAMS, Execution, benchmark_returns, pack_xp, stop_matrix
from .hoist import hoist, param_matrix
from .metrics import N_METRICS
from .simulate import no_record
from .strategies.base import Strategy

BAR_COLUMNS = ("open", "high", "low", "close")


def bar_tuple(bars: Mapping[str, np.ndarray], funding: bool = False) -> tuple[np.ndarray, ...]:
    """``(open, high, low, close, funding rate, benchmark returns)`` for the kernels.

    Columns are C-contiguous float64 (no copy when they already are); the funding
    column is zeros unless ``funding`` is asked for, and then it must exist.
    """
    cols = tuple(np.ascontiguousarray(bars[c], dtype=np.float64) for c in BAR_COLUMNS)
    if funding:
        if "funding_rate" not in bars:
            raise SpecError("execution.funding is on but the bars have no funding_rate column; "
                            "import bars with a funding_rate column or set funding: false")
        rate = np.ascontiguousarray(bars["funding_rate"], dtype=np.float64)
    else:
        rate = np.zeros(len(cols[3]))
    return (*cols, rate, benchmark_returns(cols[3]))


def sweep(
    strategy: Strategy,
    bars: Mapping[str, np.ndarray],
    params: Mapping[str, np.ndarray],
    execution: Execution,
    ppy: float,
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

    Returns
    -------
    ndarray, shape (n_combos, N_METRICS), float64
        Columns in ``METRICS`` order.

    Examples
    --------
    >>> import numpy as np
    >>> from barsweep.engine import Execution, get_strategy, sweep
    >>> close = 100 + np.cumsum(np.random.default_rng(0).normal(size=500))
    >>> bars = dict(open=close, high=close, low=close, close=close)
    >>> out = sweep(get_strategy("ema_cross"), bars,
    ...             dict(fast=np.array([5, 10]), slow=np.array([20, 40])), Execution(), 8760)
    >>> out.shape
    (2, 15)
    """
    columns = bar_tuple(bars, execution.funding)
    if len(columns[3]) == 0:
        raise SpecError("sweep(): the bars are empty; metrics need at least one bar")
    n_combos = combo_count(params)
    strategy_params = {k: v for k, v in params.items() if k not in STOP_PARAMS}
    ind, rows = hoist(strategy, dict(zip(BAR_COLUMNS, columns[:4])), strategy_params, n_combos)
    fparams = param_matrix(strategy, strategy_params, n_combos)
    stops = stop_matrix(execution, params, n_combos)
    xp = pack_xp(execution, ppy, columns[5])
    out = np.empty((rows.shape[0], N_METRICS))
    strategy.kernel(columns, ind, rows, fparams, stops, xp, out, *no_record())
    return out


def combo_count(params: Mapping[str, np.ndarray]) -> int:
    """Number of combos in a block: the common length of the value arrays (1 if none)."""
    lengths = {len(np.atleast_1d(v)) for v in params.values()}
    if len(lengths) > 1:
        raise SpecError(f"parameter arrays differ in length: {sorted(lengths)}")
    return lengths.pop() if lengths else 1
