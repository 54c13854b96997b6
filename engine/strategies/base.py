"""What a strategy declares: its parameters, the indicators it needs, its signal rule.

A strategy module builds one :class:`Strategy` value. The sweep kernel of a
strategy is a three-line ``@njit(parallel=True, cache=True)`` function of its own
module that hands the strategy's ``signal`` to :func:`barsweep.engine.simulate.simulate`;
it must be a module-level function (not built in a closure) so numba can cache it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Param:
    """One parameter of a strategy.

    Parameters
    ----------
    name : str
        The name used in the spec's ``grid`` and as a dimension of the results.
    kind : {"int", "float"}
        Integer parameters are stored as int64 coordinates, others as float64.
    low, high : float or None
        Inclusive valid range; ``None`` means unbounded on that side.
    """

    name: str
    kind: str = "int"
    low: float | None = None
    high: float | None = None

    def check(self, value: float) -> str | None:
        """Return why ``value`` is refused, or None when it is valid."""
        if self.kind == "int" and float(value) != int(value):
            return f"{self.name} must be an integer, got {value!r}"
        if self.low is not None and value < self.low:
            return f"{self.name} must be >= {self.low:g}, got {value!r}"
        if self.high is not None and value > self.high:
            return f"{self.name} must be <= {self.high:g}, got {value!r}"
        return None


@dataclass(frozen=True)
class Indicator:
    """One indicator slot a strategy needs, hoisted per distinct parameter value.

    ``name`` is a key of :data:`barsweep.engine.indicators.INDICATORS`; ``params``
    names the strategy parameters passed to it, in order. Two slots with the same
    name and the same values share one computed row.
    """

    name: str
    params: tuple[str, ...]


@dataclass(frozen=True)
class Strategy:
    """A strategy: parameters, indicator slots, and its compiled sweep kernel.

    ``kernel(bars, ind, rows, fparams, xp, out, rec_equity, rec_trades)`` is the
    strategy's module-level ``@njit`` sweep kernel (see ``ema_cross.py``).
    """

    name: str
    params: tuple[Param, ...]
    indicators: tuple[Indicator, ...]
    kernel: Callable = field(repr=False)
    doc: str = ""

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)
