"""Sweep one block of combos on the CPU: hoist, pack, run the strategy's kernel."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from barsweep.errors import SpecError

from .execution import Execution, benchmark_returns, pack_xp
from .hoist import hoist, param_matrix
from .metrics import N_METRICS
from .simulate import no_record
from .strategies.base import Strategy

BAR_COLUMNS = ("open", "high", "low", "close")


def bar_tuple(bars: Mapping[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """``(open, high, low, close, benchmark returns)`` as C-contiguous float64 (no copy
    when the columns already are)."""
    cols = tuple(np.ascontiguousarray(bars[c], dtype=np.float64) for c in BAR_COLUMNS)
    return (*cols, benchmark_returns(cols[3]))


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
        One value per combo for each of the strategy's parameters.
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
    columns = bar_tuple(bars)
    if len(columns[3]) == 0:
        raise SpecError("sweep(): the bars are empty; metrics need at least one bar")
    ind, rows = hoist(strategy, {"close": columns[3], "open": columns[0],
                                 "high": columns[1], "low": columns[2]}, params)
    fparams = param_matrix(strategy, params)
    xp = pack_xp(execution, ppy, columns[4])
    out = np.empty((rows.shape[0], N_METRICS))
    strategy.kernel(columns, ind, rows, fparams, xp, out, *no_record())
    return out
