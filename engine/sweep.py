"""Sweep one block of combos: hoist, pack, run the strategy's kernel, on the CPU or
(``backend="cuda"``) the GPU."""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np

from ..errors import SpecError
from .block import locality_order, prepare_block
from .execution import Execution
from .hoist import hoist
from .metrics import N_METRICS
from .simulate import no_record
from .strategies.base import Strategy


def sweep(
    strategy: Strategy,
    bars: Mapping[str, np.ndarray],
    params: Mapping[str, np.ndarray],
    execution: Execution,
    ppy: float,
    *,
    backend: str = "cpu",
    bars_key: Hashable | None = None,
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
        ``cuda`` runs :func:`barsweep.engine.gpu.sweep_cuda` (same arithmetic, same
        result), keeping the bars on the device under ``bars_key`` for later calls in
        this process (None: copied each call).

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
    (2, 16)
    """
    if backend == "cuda":
        from .gpu import sweep_cuda  # imports numba.cuda: only where it is asked for

        return sweep_cuda(strategy, bars, params, execution, ppy, bars_key)
    if backend != "cpu":
        raise SpecError(f"backend must be 'cpu' or 'cuda', got {backend!r}")
    block = prepare_block(strategy, bars, params, execution, ppy)
    ind, rows = hoist(strategy, block.ohlc, block.strategy_params, block.n_combos)
    order = locality_order(rows)
    swept = np.empty((block.n_combos, N_METRICS))
    strategy.kernel(block.columns, ind, rows[order], block.fparams[order], block.stops[order],
                    block.xp, swept, *no_record())
    out = np.empty_like(swept)
    out[order] = swept
    return out
