"""barsweep.engine.backtest: one combo in full. single (backtest: one symbol), portfolio
(backtest_portfolio), stats (the statistics table), plot and portfolio_plot (the
figures); stats and the plots import pandas and matplotlib, so they and the portfolio's
are imported when a name of theirs is first asked for."""

from importlib import import_module

from .single import BacktestResult, backtest

_LAZY = {"PortfolioResult": "portfolio", "backtest_portfolio": "portfolio",
         "STATS": "stats", "backtest_stats": "stats", "stat_units": "stats",
         "plot_backtest": "plot", "plot_portfolio": "portfolio_plot"}

__all__ = ["BacktestResult", "backtest", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
