"""The strategy registry: one module per strategy, registered by name."""

from __future__ import annotations

import os
import sys
from importlib import import_module

from ...errors import SpecError
from .base import Indicator, Param, Strategy

_REGISTRY: dict[str, Strategy] = {}
_ORIGINS: dict[str, str] = {}  # name -> "module (file:line)" that registered it


def register(strategy: Strategy, *, replace: bool = False) -> Strategy:
    """Make ``strategy`` available to specs and ``backtest()`` under its name.

    A name already taken by another strategy is refused (SpecError naming where that one
    was registered) unless ``replace=True``. Registering the same strategy again is
    harmless and keeps the first: the same value, or the same definition (its module
    imported twice, e.g. under two names: the same fields, and a signal of the same
    source at the same place).

    Examples
    --------
    >>> from barsweep.engine import get_strategy, register
    >>> register(get_strategy("ema_cross")) is get_strategy("ema_cross")
    True
    """
    caller = sys._getframe(1)
    origin = (f"{caller.f_globals.get('__name__', '?')} "
              f"({os.path.realpath(caller.f_code.co_filename)}:{caller.f_lineno})")
    return _add(strategy, origin, replace)


def _add(strategy: Strategy, origin: str, replace: bool) -> Strategy:
    name = strategy.name
    existing = _REGISTRY.get(name)
    if existing is not None and not replace:
        if existing is strategy or existing == strategy or (
                _definition(existing) == _definition(strategy)):
            return existing
        raise SpecError(f"a strategy named {name!r} is already registered, by {_ORIGINS[name]}; "
                        "give yours another name, or replace that one with "
                        "register(strategy, replace=True)")
    _REGISTRY[name] = strategy
    _ORIGINS[name] = origin
    return strategy


def _definition(strategy: Strategy) -> tuple:
    """A strategy's fields with its functions as their source (file, line, bytecode):
    equal for the Strategy of a module imported twice."""
    functions = ((strategy.signal,) if strategy.signal is not None
                 else (strategy.kernel, strategy.scan))
    return (strategy.name, strategy.params, strategy.indicators, strategy.requires,
            strategy.doc, tuple(_source(f) for f in functions))


def _source(function) -> tuple | None:
    code = getattr(getattr(function, "py_func", function), "__code__", None)
    if code is None:
        return None
    return os.path.realpath(code.co_filename), code.co_firstlineno, code.co_code


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
        _add(module.STRATEGY, f"{module.__name__} ({os.path.realpath(module.__file__)})", False)


_register_builtins()

__all__ = ["Indicator", "Param", "Strategy", "get_strategy", "import_strategy_module", "register",
           "strategy_names"]
