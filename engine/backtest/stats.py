"""The stats summary of one backtest (``BacktestResult.stats()``): every metric, and what
backtesting.py's and vectorbt's ``stats()`` show beside them (start, end, duration,
final and peak equity, the drawdown's duration, best and worst trade, trade durations,
fees paid), computed from the equity curve and the trades table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.metrics import METRIC_INFO

#: What each entry of ``stats()`` that is not a metric is: ``(description, units)``.
#: Units "time" and "duration" are pandas Timestamps and Timedeltas when the bars carry
#: times, bar numbers and counts of bars otherwise.
STATS_INFO = {
    "start": ("first bar", "time"),
    "end": ("last bar", "time"),
    "duration": ("end - start", "duration"),
    "n_bars": ("bars simulated", "bars"),
    "init_cash": ("initial cash", "cash"),
    "equity_final": ("equity at the last close", "cash"),
    "equity_peak": ("highest equity at a close", "cash"),
    "buy_and_hold_return": ("total return of buy_and_hold over the same bars and "
                            "execution settings (long, no stops)", "fraction"),
    "max_drawdown_duration": ("longest time from a peak of equity to its recovery (or "
                              "to the last bar)", "duration"),
    "n_open_trades": ("trades still open at the last bar (exit reason end)", "trades"),
    "best_trade": ("highest trade return", "fraction"),
    "worst_trade": ("lowest trade return", "fraction"),
    "avg_winning_trade": ("mean return of the trades with pnl > 0", "fraction"),
    "avg_losing_trade": ("mean return of the trades with pnl < 0", "fraction"),
    "avg_trade_duration": ("mean of exit time - entry time", "duration"),
    "max_trade_duration": ("longest exit time - entry time", "duration"),
    "sqn": ("system quality number: sqrt(trades) x mean pnl / std pnl", None),
    "fees_paid": ("fees over the trades: each trade's size x price move less its pnl "
                  "(NaN with funding, which the pnl then holds too)", "cash"),
}

#: The order of ``stats()``'s entries: every metric of METRICS and every STATS_INFO key.
STATS = (
    "start", "end", "duration", "n_bars", "exposure",
    "init_cash", "equity_final", "equity_peak",
    "total_return", "buy_and_hold_return", "cagr", "volatility",
    "sharpe", "sortino", "calmar",
    "max_drawdown", "max_drawdown_duration", "ulcer_index",
    "n_trades", "n_open_trades", "win_rate", "best_trade", "worst_trade",
    "avg_trade_return", "avg_winning_trade", "avg_losing_trade",
    "avg_trade_duration", "max_trade_duration", "profit_factor", "sqn", "fees_paid",
    "alpha", "beta", "skew", "kurtosis", "ruined",
)


def stat_units(name: str) -> str | None:
    """The units of entry ``name`` of ``stats()`` (see :data:`STATS_INFO`, METRIC_INFO)."""
    return (STATS_INFO.get(name) or METRIC_INFO[name])[1]


def backtest_stats(metrics: dict[str, float], equity: pd.Series, trades: pd.DataFrame,
                   init_cash: float, funding: bool,
                   buy_and_hold_return: float | None = None) -> pd.Series:
    """The stats summary of one backtest.

    Parameters
    ----------
    metrics : dict of str to float
        Every metric of METRICS (``BacktestResult.metrics``).
    equity : pandas.Series, float64, shape (n_bars,)
        Equity at each close; a DatetimeIndex, or bar numbers.
    trades : pandas.DataFrame
        ``BacktestResult.trades``.
    init_cash : float
    funding : bool
        Whether funding was paid (``fees_paid`` is then NaN).
    buy_and_hold_return : float, optional
        Left out of the Series when None.

    Returns
    -------
    pandas.Series, dtype object, indexed by :data:`STATS` (less ``buy_and_hold_return``
    when it is None).
    """
    x = _positions(equity.index)
    values = equity.to_numpy()
    returns = trades["return"]
    pnl = trades["pnl"]
    held = _durations(trades)
    gross = trades["side"] * trades["size"] * (trades["exit_price"] - trades["entry_price"])
    out = {
        "start": equity.index[0],
        "end": equity.index[-1],
        "duration": equity.index[-1] - equity.index[0],
        "n_bars": len(equity),
        "init_cash": float(init_cash),
        "equity_final": float(values[-1]),
        "equity_peak": float(values.max()),
        "buy_and_hold_return": buy_and_hold_return,
        "max_drawdown_duration": _max_drawdown_duration(values, x),
        "n_open_trades": int((trades["exit_reason"] == "end").sum()),
        "best_trade": _or_nan(returns.max()),
        "worst_trade": _or_nan(returns.min()),
        "avg_winning_trade": _or_nan(returns[pnl > 0].mean()),
        "avg_losing_trade": _or_nan(returns[pnl < 0].mean()),
        "avg_trade_duration": held.mean() if len(held) else np.nan,
        "max_trade_duration": held.max() if len(held) else np.nan,
        "sqn": _sqn(pnl.to_numpy()),
        "fees_paid": np.nan if funding else float((gross - pnl).sum()),
        **metrics,
    }
    if np.isfinite(out["n_trades"]):
        out["n_trades"] = int(out["n_trades"])
    names = [n for n in STATS if not (n == "buy_and_hold_return" and buy_and_hold_return is None)]
    return pd.Series([out[n] for n in names], index=names, dtype=object, name="stats")


def _positions(index) -> np.ndarray:
    """The bars' times as datetime64 (a DatetimeIndex) or their numbers."""
    if isinstance(index, pd.DatetimeIndex):
        return index.tz_localize(None).to_numpy() if index.tz is not None else index.to_numpy()
    return np.asarray(index)


def _durations(trades: pd.DataFrame) -> pd.Series:
    """Each trade's exit time - entry time (Timedeltas, or bar counts without times)."""
    return trades["exit_time"] - trades["entry_time"]


def _max_drawdown_duration(values: np.ndarray, x: np.ndarray):
    """The longest stretch from a peak of ``values`` to the first bar back at it (or the
    last bar): ``x[recovery] - x[peak]``; zero when equity never falls below its peak."""
    under = values < np.maximum.accumulate(values)
    zero = x[0] - x[0]
    if not under.any():
        return pd.Timedelta(zero) if np.issubdtype(x.dtype, np.datetime64) else int(zero)
    edges = np.diff(np.concatenate([[0], under.astype(np.int8), [0]]))
    first_under = np.flatnonzero(edges == 1)  # >= 1: bar 0 is its own peak
    back = np.minimum(np.flatnonzero(edges == -1), len(values) - 1)
    longest = (x[back] - x[first_under - 1]).max()
    return pd.Timedelta(longest) if np.issubdtype(x.dtype, np.datetime64) else int(longest)


def _sqn(pnl: np.ndarray) -> float:
    if len(pnl) < 2:
        return np.nan
    std = pnl.std(ddof=1)
    return float(np.sqrt(len(pnl)) * pnl.mean() / std) if std > 0 else np.nan


def _or_nan(value) -> float:
    return float(value) if pd.notna(value) else np.nan
