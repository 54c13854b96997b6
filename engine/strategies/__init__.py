"""The strategy registry: one module per strategy, registered by name."""

from __future__ import annotations

from barsweep.errors import SpecError

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


def strategy_names() -> list[str]:
    return sorted(_REGISTRY)


def _register_builtins() -> None:
    from . import buy_and_hold, ema_cross

    for module in (buy_and_hold, ema_cross):
        register(module.STRATEGY)


_register_builtins()

__all__ = ["Indicator", "Param", "Strategy", "get_strategy", "register", "strategy_names"]
