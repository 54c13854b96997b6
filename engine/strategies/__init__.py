"""The strategy registry: one module per strategy, registered by name."""

from __future__ import annotations

from importlib import import_module

from ...errors import SpecError
from .base import Indicator, Param, Strategy

_REGISTRY: dict[str, Strategy] = {}


def register(strategy: Strategy) -> Strategy:
    """Make ``strategy`` available to specs and ``backtest()`` under its name."""
    _REGISTRY[strategy.name] = strategy
    return strategy


def get_strategy(name: str) -> Strategy:
    """Return the registered strategy called ``name`` or raise SpecError listing them."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise SpecError(f"unknown strategy {name!r}; known strategies: {known}") from None


def import_strategy_module(name: str) -> None:
    """Import a module that registers strategies; SpecError naming it when that fails."""
    try:
        import_module(name)
    except Exception as exc:  # any failure inside the user's module is reported as is
        raise SpecError(
            f"cannot import strategy module {name!r}: {type(exc).__name__}: {exc}; it must be "
            "importable (e.g. on PYTHONPATH) here and on every Dask worker"
        ) from exc


def strategy_names() -> list[str]:
    return sorted(_REGISTRY)


def _register_builtins() -> None:
    from . import bollinger, buy_and_hold, donchian, ema_cross, macd, rsi, sma_cross, trix

    for module in (buy_and_hold, sma_cross, ema_cross, rsi, trix, macd, bollinger, donchian):
        register(module.STRATEGY)


_register_builtins()

__all__ = ["Indicator", "Param", "Strategy", "get_strategy", "import_strategy_module", "register",
           "strategy_names"]
