"""What a strategy declares: its parameters, the indicators it needs, its signal rule.

A strategy module builds one :class:`Strategy` value. Its ``signal`` is compiled into
two few-line module-level functions of its own: ``scan`` (the flat-stretch search,
:func:`barsweep.engine.simulate.scan_flat`) and the sweep ``kernel``, an
``@njit(parallel=True, cache=True)`` loop over combos calling
:func:`barsweep.engine.simulate.simulate`. They must be module-level functions (not
built in a closure) so numba can cache them.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ...errors import SpecError

_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


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

    ``kernel(bars, ind, rows, fparams, stops, xp, out, rec_equity, rec_trades)`` is
    the strategy's module-level ``@njit`` sweep kernel (see ``bollinger.py``; the
    crossover strategies share ``crossover.py``'s); ``signal`` and ``scan`` are the
    functions it passes to ``simulate``, from which the GPU backend builds its CUDA
    kernel (a strategy without them runs on the CPU only).
    ``requires`` holds comparisons between two parameters that every combo must
    meet, e.g. ``("lower", "<", "upper")``: a spec adds them to its constraints and
    ``backtest()`` refuses a combo that breaks one.
    """

    name: str
    params: tuple[Param, ...]
    indicators: tuple[Indicator, ...]
    kernel: Callable = field(repr=False)
    doc: str = ""
    requires: tuple[tuple[str, str, str], ...] = ()
    signal: Callable | None = field(default=None, repr=False)
    scan: Callable | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        names = set(self.param_names)
        for left, op, right in self.requires:
            if op not in _COMPARE or left not in names or right not in names:
                raise ValueError(f"{self.name}: bad requirement {left} {op} {right}")
        for ind in self.indicators:
            unknown = set(ind.params) - names
            if unknown:
                raise ValueError(f"{self.name}: indicator {ind.name} uses unknown {unknown}")

    @property
    def requirement_texts(self) -> tuple[str, ...]:
        """The requirements as constraint expressions, e.g. ``"lower < upper"``."""
        return tuple(f"{a} {op} {b}" for a, op, b in self.requires)

    def validate(self, params: Mapping[str, float]) -> None:
        """Refuse one combo's parameters with a SpecError naming the parameter."""
        unknown = sorted(set(params) - set(self.param_names))
        missing = sorted(set(self.param_names) - set(params))
        if unknown or missing:
            raise SpecError(
                f"{self.name}: unknown parameters {unknown}, missing parameters {missing}; "
                f"expected {list(self.param_names)}"
            )
        for name, value in params.items():
            problem = self.param(name).check(value)
            if problem:
                raise SpecError(f"{self.name}: {problem}")
        for left, op, right in self.requires:
            if not _COMPARE[op](params[left], params[right]):
                raise SpecError(f"{self.name}: parameters must satisfy {left} {op} {right}, got "
                                f"{left}={params[left]!r}, {right}={params[right]!r}")

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)
