"""barsweep.engine: pure compute. Indicators, strategies, the per-bar simulation,
metrics; numba kernels that take arrays and scalars only."""

from . import cache  # noqa: F401  (first: numba caches in a folder per engine source)
from .backtest import BacktestResult, backtest
from .core import (
    BEST_WHEN_IDLE,
    LOWER_IS_BETTER,
    METRICS,
    N_METRICS,
    Execution,
    benchmark_returns,
)
from .dispatch import sweep_block, sweep_portfolio
from .indicators import INDICATORS, ema, sma
from .strategies import Indicator, Param, Strategy, get_strategy, register, strategy_names

__all__ = [
    "BEST_WHEN_IDLE",
    "INDICATORS",
    "LOWER_IS_BETTER",
    "METRICS",
    "N_METRICS",
    "BacktestResult",
    "Execution",
    "Indicator",
    "Param",
    "Strategy",
    "backtest",
    "benchmark_returns",
    "ema",
    "get_strategy",
    "register",
    "sma",
    "strategy_names",
    "sweep_block",
    "sweep_portfolio",
]
