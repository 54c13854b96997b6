"""A static picture of one portfolio combo: the account's equity beside the equal-weight
buy and hold, each symbol's holding beneath it, and the drawdown, on one shared x axis.

matplotlib draws it on an Agg canvas of its own (no pyplot state, GUI backend or global
style is touched), as :mod:`barsweep.engine.backtest.plot`.
"""

from __future__ import annotations

import os
import textwrap

import numpy as np

from .plot import TITLE_CHARS, equity_axis, x_values

#: The most members drawn in a panel each; more share one stacked panel.
MAX_PANELS = 8


def plot_portfolio(result, path: str | os.PathLike | None = None, title: str | None = None,
                   hold=None):
    """Draw a portfolio backtest in stacked panels sharing the x axis.

    Parameters
    ----------
    result : PortfolioResult
        From :func:`barsweep.engine.backtest.portfolio.backtest_portfolio`.
    path : str or path-like, optional
        Where to save the figure as PNG (100 dpi); nothing is written when omitted.
    title : str, optional
        By default the total return, Sharpe ratio, maximum drawdown and trades.
    hold : PortfolioResult, optional
        The equal-weight buy and hold drawn beside the equity (``result.buy_and_hold()``).

    Returns
    -------
    matplotlib.figure.Figure
        The equity (and ``hold``'s); each symbol's holding (shares x close, filled where
        held), a panel each for up to :data:`MAX_PANELS` symbols, else their shares of the
        account stacked in one panel; the drawdowns in percent.

    Examples
    --------
    >>> import numpy as np
    >>> from barsweep.engine.backtest.portfolio import backtest_portfolio
    >>> rng = np.random.default_rng(0)
    >>> bars = {s: dict(open=c, high=c, low=c, close=c) for s, c in
    ...         (("A", 100 + np.cumsum(rng.normal(size=300))),
    ...          ("B", 100 + np.cumsum(rng.normal(size=300))))}
    >>> res = backtest_portfolio(bars, "ema_cross", dict(fast=5, slow=20), ppy=252)
    >>> len(plot_portfolio(res).axes)  # equity, A, B, drawdown
    4
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure

    x = x_values(result.equity.index)
    symbols = list(result.shares.columns)
    panels = len(symbols) if len(symbols) <= MAX_PANELS else 1
    ratios = [3.0] + [0.9 if panels > 1 else 2.0] * panels + [1.2]
    fig = Figure(figsize=(12, 3.6 + 0.75 * sum(ratios)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(ratios), 1, sharex=True, gridspec_kw={"height_ratios": ratios})
    _equity_panel(axes[0], x, result, hold)
    colours = [f"C{k % 10}" for k in range(len(symbols))]
    if len(symbols) <= MAX_PANELS:
        for ax, symbol, colour in zip(axes[1:-1], symbols, colours, strict=True):
            _holding_panel(ax, x, result, symbol, colour)
    else:
        _stacked_panel(axes[1], x, result, colours)
    _drawdown_panel(axes[-1], x, result, hold)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    if np.issubdtype(x.dtype, np.datetime64):
        locator = AutoDateLocator()
        axes[-1].xaxis.set_major_locator(locator)
        axes[-1].xaxis.set_major_formatter(ConciseDateFormatter(locator))
    if len(x) > 1:
        axes[-1].set_xlim(x[0], x[-1])
    text = title if title is not None else _summary(result.metrics)
    fig.suptitle("\n".join(textwrap.wrap(text, TITLE_CHARS)))
    if path is not None:
        fig.savefig(path, dpi=100, format="png")
    return fig


def _equity_panel(ax, x: np.ndarray, result, hold) -> None:
    """The account's equity, and the hold's."""
    equity = result.equity.to_numpy()
    ax.plot(x, equity, color="tab:purple", linewidth=1.0, label="portfolio (the strategy)")
    if hold is not None:
        ax.plot(x, hold.equity.to_numpy(), color="0.5", linewidth=0.9,
                label="equal-weight buy and hold")
    equity_axis(ax, equity if hold is None else
                np.concatenate([equity, hold.equity.to_numpy()]))
    ax.legend(loc="upper left", fontsize="small", framealpha=0.8)


def _holding_panel(ax, x: np.ndarray, result, symbol: str, colour: str) -> None:
    """One symbol's holding marked at each close, filled where held (a short's below
    zero)."""
    value = (result.shares[symbol] * result.close[symbol]).to_numpy()
    ax.fill_between(x, value, 0.0, color=colour, alpha=0.45, linewidth=0, step="post")
    ax.plot(x, value, color=colour, linewidth=0.6, drawstyle="steps-post")
    n_trades, exposure = result.members.loc[symbol, ["n_trades", "exposure"]]
    ax.set_ylabel(symbol, rotation=0, ha="right", va="center")
    shorts = bool((value < 0.0).any())
    ax.text(0.005, 0.92, f"value held{' (shorts below 0)' if shorts else ''}: "
            f"{int(n_trades)} trades, {exposure:.0%} of bars",
            transform=ax.transAxes, va="top", fontsize="small",
            bbox={"facecolor": "white", "alpha": 0.7, "linewidth": 0})
    if shorts:
        ax.axhline(0.0, color="0.4", linewidth=0.6)
    else:
        ax.set_ylim(bottom=0.0)


def _stacked_panel(ax, x: np.ndarray, result, colours: list[str]) -> None:
    """Every symbol's share of the account at each close (a short's by its value),
    stacked: cash is the rest up to 100%, leverage takes it above."""
    equity = result.equity.to_numpy()
    shares = np.abs((result.shares * result.close).to_numpy().T)
    with np.errstate(divide="ignore", invalid="ignore"):
        part = np.where(equity > 0, shares / equity, 0.0) * 100.0
    ax.stackplot(x, part, colors=colours, labels=list(result.shares.columns), alpha=0.7,
                 step="post")
    shorts = bool((result.shares.to_numpy() < 0.0).any())
    ax.set_ylabel("held, gross (% of account)" if shorts else "held (% of account)")
    ax.set_ylim(0.0, max(100.0, float(part.sum(axis=0).max()) * 1.05))
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="x-small",
              ncols=1 + len(colours) // 12)  # beside the panel, off the areas


def _drawdown_panel(ax, x: np.ndarray, result, hold) -> None:
    """The account's drawdown from its running peak, in percent (and the hold's)."""
    for series, colour, label in ((result.equity, "tab:red", "portfolio"),
                                  (None if hold is None else hold.equity, "0.5", "hold")):
        if series is None:
            continue
        equity = series.to_numpy()
        drawdown = (equity / np.maximum.accumulate(equity) - 1.0) * 100.0
        if label == "portfolio":
            ax.fill_between(x, drawdown, 0.0, color=colour, alpha=0.3, linewidth=0)
        ax.plot(x, drawdown, color=colour, linewidth=0.7, label=label)
    ax.set_ylabel("drawdown (%)")
    ax.set_xlabel("time (UTC)" if np.issubdtype(x.dtype, np.datetime64) else "bar")
    if hold is not None:
        ax.legend(loc="lower left", fontsize="small", framealpha=0.8)


def _summary(metrics: dict[str, float]) -> str:
    return (f"portfolio: total return {metrics['total_return']:+.1%}   sharpe "
            f"{metrics['sharpe']:.2f}   max drawdown {metrics['max_drawdown']:.1%}   "
            f"trades {int(metrics['n_trades'])}")
