"""A static picture of one backtest: price with trades, equity, and drawdown.

matplotlib (a dependency of barsweep) draws it on an Agg canvas of its own, so no pyplot
state, GUI backend or global style is touched.
"""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pandas as pd

#: Marker colors of the exit reasons of ``BacktestResult.trades``.
#: The characters a title line holds in the 12-inch figure; longer titles wrap.
TITLE_CHARS = 120

EXIT_COLORS = {
    "signal": "black",
    "stop": "tab:red",
    "target": "tab:green",
    "trail": "tab:orange",
    "end": "tab:gray",
    "ruin": "tab:purple",
}


def plot_backtest(result, path: str | os.PathLike | None = None, title: str | None = None):
    """Draw price with entries and exits, equity, and drawdown in three stacked panels.

    Parameters
    ----------
    result : BacktestResult
        From :func:`barsweep.engine.backtest.single`.
    path : str or path-like, optional
        Where to save the figure as PNG (100 dpi); nothing is written when omitted.
    title : str, optional
        Title above the panels; by default the total return, Sharpe ratio, maximum
        drawdown and number of trades.

    Returns
    -------
    matplotlib.figure.Figure
        Three axes sharing the x axis (time when the bars have times, else bar number):
        close with entries (``^`` green long, ``v`` red short) and exits (``x``, colored
        by exit reason, see :data:`EXIT_COLORS`); equity; drawdown in percent.

    Examples
    --------
    >>> import numpy as np
    >>> from barsweep.engine import backtest
    >>> close = 100 + np.cumsum(np.random.default_rng(0).normal(size=500))
    >>> res = backtest(dict(open=close, high=close, low=close, close=close), "ema_cross",
    ...                dict(fast=5, slow=20), ppy=252)
    >>> len(res.plot().axes)
    3
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure

    x = x_values(result.close.index)
    close = result.close.to_numpy()
    equity = result.equity.to_numpy()

    fig = Figure(figsize=(12, 8), layout="constrained")
    FigureCanvasAgg(fig)
    ax_price, ax_equity, ax_dd = fig.subplots(
        3, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2, 1.2]}
    )
    _price_panel(ax_price, x, close, result.trades, result.close.index)
    _equity_panel(ax_equity, x, equity, close, result.metrics["total_return"])
    _drawdown_panel(ax_dd, x, equity)
    for ax in (ax_price, ax_equity, ax_dd):
        ax.grid(True, alpha=0.3)
    if np.issubdtype(x.dtype, np.datetime64):
        locator = AutoDateLocator()
        ax_dd.xaxis.set_major_locator(locator)
        ax_dd.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    if len(x) > 1:
        ax_dd.set_xlim(x[0], x[-1])

    text = title if title is not None else _summary(result.metrics)
    fig.suptitle("\n".join(textwrap.wrap(text, TITLE_CHARS)))  # long titles on two lines
    if path is not None:
        fig.savefig(path, dpi=100, format="png")
    return fig


def _price_panel(ax, x: np.ndarray, close: np.ndarray, trades: pd.DataFrame,
                 index: pd.Index) -> None:
    """The close, with entries (by side) and exits (by reason) marked; ``index`` is the
    bars' (a span's bars when the backtest ran one: trades are found by their times)."""
    ax.plot(x, close, color="tab:blue", linewidth=0.8, label="close")
    for side, marker, color, label in ((1, "^", "tab:green", "long entry"),
                                       (-1, "v", "tab:red", "short entry")):
        entries = trades[trades["side"] == side]
        if len(entries):
            ax.scatter(x[index.get_indexer(entries["entry_time"])], entries["entry_price"],
                       marker=marker, color=color, s=40, zorder=3, label=label)
    for reason, color in EXIT_COLORS.items():
        exits = trades[trades["exit_reason"] == reason]
        if len(exits):
            ax.scatter(x[index.get_indexer(exits["exit_time"])], exits["exit_price"], marker="x",
                       color=color, s=30, zorder=3, label=f"exit: {reason}")
    ax.set_ylabel("price")
    if close.min() > 0 and close.max() > 10 * close.min():
        ax.set_yscale("log")  # a price spanning more than 10x reads on a log axis
        ax.set_ylabel("price (log)")
    ax.legend(loc="best", fontsize="small", ncols=2, framealpha=0.8)


def _equity_panel(ax, x: np.ndarray, equity: np.ndarray, close: np.ndarray,
                  total_return: float) -> None:
    """The equity, and buy-and-hold of the close from the same initial cash."""
    ax.plot(x, equity, color="tab:purple", linewidth=0.9, label="strategy")
    start = equity[-1] / (1.0 + total_return)  # the initial cash
    drawn = [equity]
    if np.isfinite(start) and close[0] > 0:
        held = start * close / close[0]
        ax.plot(x, held, color="0.55", linewidth=0.8, label="buy and hold")
        ax.legend(loc="best", fontsize="small", framealpha=0.8)
        drawn.append(held)
    equity_axis(ax, np.concatenate(drawn))


def equity_axis(ax, values: np.ndarray) -> None:
    """The equity axis of every picture of a backtest (one symbol's or a portfolio's):
    logarithmic, ticks in whole cash, when the positive ``values`` drawn on it span
    more than 10x (growth reads as growth there), linear otherwise."""
    values = values[np.isfinite(values) & (values > 0)]
    if len(values) and values.max() > 10 * values.min():
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_yscale("log")  # growth spanning more than 10x reads on a log axis
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_ylabel("equity (log)")
    else:
        ax.set_ylabel("equity")


def _drawdown_panel(ax, x: np.ndarray, equity: np.ndarray) -> None:
    """The drawdown from the running peak, in percent."""
    drawdown_pct = (equity / np.maximum.accumulate(equity) - 1.0) * 100.0
    ax.fill_between(x, drawdown_pct, 0.0, color="tab:red", alpha=0.35, linewidth=0)
    ax.plot(x, drawdown_pct, color="tab:red", linewidth=0.6)
    ax.set_ylabel("drawdown (%)")
    ax.set_xlabel("time (UTC)" if np.issubdtype(x.dtype, np.datetime64) else "bar")


def x_values(index: pd.Index) -> np.ndarray:
    """The x coordinates: naive UTC datetime64[ns] for a DatetimeIndex, else bar numbers
    (a span's own, from its first bar)."""
    if isinstance(index, pd.DatetimeIndex):
        if index.tz is not None:
            index = index.tz_convert("UTC").tz_localize(None)
        return index.to_numpy(dtype="datetime64[ns]")
    return np.asarray(index) if index.dtype.kind in "iu" else np.arange(len(index))


def _summary(metrics: dict[str, float]) -> str:
    return (f"total return {metrics['total_return']:+.1%}   sharpe {metrics['sharpe']:.2f}   "
            f"max drawdown {metrics['max_drawdown']:.1%}   trades {int(metrics['n_trades'])}")
