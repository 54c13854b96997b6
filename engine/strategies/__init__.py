"""The strategy registry: one module per strategy, registered by name."""

from __future__ import annotations

import inspect
import os
import sys
from importlib import import_module

from ...errors import SpecError
from .base import Indicator, Param, Strategy
from .sources import module_location, module_sources, not_a_module, serve

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
    caller = inspect.currentframe().f_back
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


def resolve(strategy: str | Strategy) -> Strategy:
    """``strategy`` itself, or the registered strategy of that name (SpecError if none)."""
    return strategy if isinstance(strategy, Strategy) else get_strategy(strategy)


def import_strategy_module(name: str, root: str | os.PathLike | None = None) -> None:
    """Import a module that registers strategies; SpecError naming it when that fails.

    With ``root``, a folder (a spec's ``module_dir``): when it holds the module's
    top-level package (``root/top/`` with ``__init__.py``) or module (``root/top.py``),
    that one is imported from there (:func:`~.sources.serve`: no other name is imported
    from ``root``), once its files are checked (:func:`~.sources.module_sources`); else
    from ``sys.path``. SpecError too when ``root/top`` is a folder but not a package, when
    ``top`` is a standard library module's name, and when ``top`` is already imported
    from another place.
    """
    top = name.partition(".")[0]
    location = None
    if root is not None:
        problem = not_a_module(name, root)
        if problem is not None:
            raise SpecError(f"cannot import strategy module {name!r}: {problem}")
        location = module_location(name, root)
    if location is not None:
        module_sources(root, [top])
        serve(top, root)
    try:
        import_module(name)
    except Exception as exc:  # any failure inside the user's module is reported as is
        where = (f"looked for {top}/ and {top}.py in {os.path.abspath(root)}, then on "
                 f"sys.path" if root is not None else "looked on sys.path")
        raise SpecError(
            f"cannot import strategy module {name!r}: {type(exc).__name__}: {exc}; {where} "
            f"(put it beside the spec, name its folder in module_dir, or install it)"
        ) from exc
    loaded = _loaded_from(sys.modules.get(top))
    if location is not None and loaded is not None and not (
            loaded == location or loaded.startswith(location + os.sep)):
        raise SpecError(f"cannot import strategy module {name!r} from {location}: {top} is "
                        f"already imported from {loaded} in this process")


def imported_from(name: str, root: str | os.PathLike | None) -> bool:
    """Whether module ``name`` is imported in this process, from ``root`` when ``root``
    holds it (:func:`module_location`)."""
    if name not in sys.modules:
        return False
    location = module_location(name, root) if root is not None else None
    loaded = _loaded_from(sys.modules.get(name.partition(".")[0]))
    return location is None or loaded is not None and (
        loaded == location or loaded.startswith(location + os.sep))


def _loaded_from(module) -> str | None:
    """The real path of an imported package's folder or a module's file (None: unknown)."""
    if module is None:
        return None
    paths = list(getattr(module, "__path__", None) or [])
    path = paths[0] if paths else getattr(module, "__file__", None)
    return os.path.realpath(path) if path else None


def forget_modules(top: str) -> tuple[str, ...]:
    """Unregister the strategies that the package or module ``top`` (or one of its
    submodules) registered, so that importing a new version of it registers its new
    definitions; returns their names."""
    names = tuple(name for name, origin in _ORIGINS.items()
                  if origin.partition(" ")[0].partition(".")[0] == top)
    for name in names:
        del _REGISTRY[name], _ORIGINS[name]
    return names


def strategy_names() -> list[str]:
    return sorted(_REGISTRY)


def _register_builtins() -> None:
    from . import bollinger, buy_and_hold, donchian, ema_cross, macd, rsi, sma_cross, trix

    for module in (buy_and_hold, sma_cross, ema_cross, rsi, trix, macd, bollinger, donchian):
        _add(module.STRATEGY, f"{module.__name__} ({os.path.realpath(module.__file__)})", False)


_register_builtins()

__all__ = ["Indicator", "Param", "Strategy", "forget_modules", "get_strategy",
           "import_strategy_module", "imported_from", "module_location", "register", "resolve",
           "strategy_names"]
