"""A portfolio store's combo run again over a part of the bars: the account's equity
over a walk-forward window's test span (the stitched out-of-sample curve of
:func:`~.walkforward.walkforward`), and the equal-weight buy and hold over a span.

The account's equity over a span comes from the portfolio kernel itself
(:func:`barsweep.engine.sweep_portfolio` over that span, with one PBO segment
a bar: each segment's return sum is that bar's return), compounded from ``init_cash``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ...engine import METRICS, get_strategy, sweep_portfolio
from ...engine.core import execution_of
from ..config.portfolio import REBALANCE_AXES, rebalance_periods
from .rebuild import stored_bars

__all__ = ["Part", "account_part", "combo_part", "hold_part", "member_bars"]


class Part(NamedTuple):
    """An account's run over a part of the bars: its equity at each close and its
    metrics by name."""

    equity: pd.Series
    metrics: dict[str, float]

_COLUMNS = ("open", "high", "low", "close", "volume")  # what a rule may read


def member_bars(spec) -> tuple[dict[str, dict[str, np.ndarray]], pd.Index]:
    """Each member's bars (``spec.data.symbols`` of a portfolio run's stored spec) as
    the run read them, as arrays by column, and the bars' times (UTC; the bar numbers
    when the bars have none)."""
    bars, index = {}, None
    for symbol in spec.data.symbols:
        ds = stored_bars(spec, symbol)
        bars[symbol] = {k: ds[k].values.ravel() for k in _COLUMNS}
        if "funding_rate" in ds:  # what execution.funding reads
            bars[symbol]["funding_rate"] = ds["funding_rate"].values.ravel()
        if "time" in ds.coords and ds["time"].dtype.kind == "M":  # rebalancing reads it
            bars[symbol]["time"] = ds["time"].values.astype("datetime64[ns]").view("int64")
        if index is None:
            index = (pd.DatetimeIndex(ds["time"].values, name="time").tz_localize("UTC")
                     if "time" in ds.coords and ds["time"].dtype.kind == "M"
                     else pd.RangeIndex(ds.sizes["time"], name="time"))
    return bars, index


def account_part(strategy, execution, bars: dict[str, dict[str, np.ndarray]],
                 index: pd.Index, params: dict, span: tuple[int, int], ppy: float,
                 max_positions: int | None = None, **sizing) -> tuple[pd.Series, dict[str, float]]:
    """The account's equity at each close of bars ``[start, end)`` of one combo run over
    that span alone (starting flat with ``init_cash``, the indicators warmed up on the
    bars before), and its metrics.

    Parameters
    ----------
    strategy : Strategy
    execution : Execution or mapping
    bars, index : as :func:`member_bars` gives them
    params : dict
        The combo's strategy parameters by name (scalars).
    span : (int, int)
    ppy : float
    max_positions : int, optional
    **sizing
        ``rebalance``, ``weight``, ``lookback``, ``priority`` of
        :func:`~barsweep.engine.sweep_portfolio`.

    Returns
    -------
    equity : pandas.Series, indexed by ``index[start:end]``
    metrics : dict of metric name to float
    """
    start, end = span
    execution = execution_of(execution)
    sums = np.empty((1, end - start, 2))  # one segment a bar: its return
    metrics, _ = sweep_portfolio(strategy, bars, {k: np.array([v]) for k, v in params.items()},
                                 execution, ppy, max_positions=max_positions,
                                 spans=[(start, end)], seg_sums=sums, **sizing)
    equity = float(execution.init_cash) * np.cumprod(1.0 + sums[0, :, 0])
    return (pd.Series(equity, index=index[start:end], name="equity"),
            dict(zip(METRICS, metrics[0, 0].tolist(), strict=True)))


def combo_part(spec, bars: dict[str, dict[str, np.ndarray]], index: pd.Index, combo: dict,
               span: tuple[int, int], ppy: float) -> tuple[pd.Series, float]:
    """:func:`account_part` of a portfolio run's combo (its parameters by name,
    ``max_positions``, ``vol_lookback`` and a rebalance axis among them when the grid
    sweeps them), with the run's strategy, execution and sizing (``spec``, the stored
    one): the equity and ``n_trades``."""
    params = dict(combo)
    section = spec.portfolio
    kmax = params.pop("max_positions", section.max_positions)
    lookback = params.pop("vol_lookback", section.vol_lookback)
    rebalance = rebalance_periods({k: [v] for k, v in params.items()}, section.rebalance)
    params = {k: v for k, v in params.items() if k not in REBALANCE_AXES}
    equity, metrics = account_part(
        spec.strategy_def, spec.execution, bars, index, params, span, ppy, kmax,
        rebalance=rebalance[0] if isinstance(rebalance, list) else rebalance,
        weight=section.weight, lookback=lookback, priority=section.priority)
    return equity, metrics["n_trades"]


def hold_part(bars: dict[str, dict[str, np.ndarray]], index: pd.Index,
              span: tuple[int, int], ppy: float, execution) -> Part:
    """The equal-weight buy and hold of the members over bars ``[start, end)``,
    ``1 / N`` of the account bought in each at the first of them (``buy_and_hold`` on
    those bars alone) with ``execution``."""
    start, end = span
    part = {symbol: {k: v[start:end] for k, v in columns.items()}
            for symbol, columns in bars.items()}
    return Part(*account_part(get_strategy("buy_and_hold"), execution, part,
                              index[start:end], {}, (0, end - start), ppy))
