"""What a strategy declares: its parameters, the indicators it needs, its signal rule.

A strategy module defines its ``signal``, a module-level ``@njit(cache=True)`` function,
and builds one :class:`Strategy` value naming it. The Strategy compiles the signal into
the shared simulation: ``scan`` (the flat-stretch search,
:func:`barsweep.engine.core.simulate.scan_flat`) and the sweep ``kernel``, an
``@njit(nogil=True, cache=True)`` loop over combos calling
:func:`barsweep.engine.core.simulate.simulate`, both written once per signal by
:mod:`barsweep.engine.strategies.kernels` so that numba caches them across processes,
when one of them is first read (defining a strategy writes nothing).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field, fields
from importlib import import_module

from ...errors import SpecError
from . import kernels

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
            return f"{self.name} must be >= {_number(self.low)}, got {value!r}"
        if self.high is not None and value > self.high:
            return f"{self.name} must be <= {_number(self.high)}, got {value!r}"
        return None


def param_position(params: tuple[Param, ...], name: str) -> int:
    """Where a signal finds parameter ``name`` in ``fparams``: its position in ``params``
    (the strategy's order).

    A strategy module keeps it as a module constant (``LOWER = param_position(PARAMS,
    "lower")``, read as ``fparams[LOWER]``): numba compiles a module's constant as a
    literal, the same code as ``fparams[1]``.

    >>> param_position((Param("period"), Param("lower", "float")), "lower")
    1
    """
    for position, param in enumerate(params):
        if param.name == name:
            return position
    raise ValueError(f"no parameter {name!r} among {[p.name for p in params]}")


def _number(x: float) -> str:
    """``x`` for people: a whole number with thousands separators, else ``:g``."""
    return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"


@dataclass(frozen=True)
class Indicator:
    """One indicator slot a strategy needs, hoisted per distinct parameter value.

    ``name`` is a key of :data:`barsweep.engine.indicators.registry.INDICATORS`; ``params``
    names the strategy parameters passed to it, in order. Two slots with the same
    name and the same values share one computed row. A slot of a rule names its
    expression instead (``ema(rsi(close, n), m)``) and computes it with ``program(columns,
    args, memo)`` (:func:`barsweep.engine.rules.build.compile_rule`): ``columns`` the bar
    columns by name, ``args`` the values of ``params``, ``memo`` the rows computed so far
    in the block, shared by its slots.
    """

    name: str
    params: tuple[str, ...]
    program: Callable | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Strategy:
    """A strategy: parameters, indicator slots, its signal rule and the compiled kernel.

    ``signal(ind, rows, fparams, bars, t) -> (long_entry, long_exit, short_entry,
    short_exit)`` is the rule, a module-level ``@njit`` function (see ``bollinger.py``;
    the crossover strategies share ``crossover.py``'s). It may take the position state
    too, ``signal(ind, rows, fparams, bars, t, position, entry_price, entry_bar)``, and
    the account and its pending entry order, ``(..., entry_bar, equity, pending,
    pending_price)`` (:func:`barsweep.engine.core.simulate.simulate` says what they
    hold); any other number of
    arguments is refused here (:func:`~.kernels.signal_arity`). From it the Strategy takes
    ``scan`` and ``kernel(bars, ind, combos, run, out, rec)``, the sweep kernel that
    ``sweep_block()`` (``rec`` None) and ``backtest()`` (a record) run
    (:func:`barsweep.engine.strategies.kernels.compiled`, built when first read: see
    :class:`FromSignal`); the GPU backend builds its
    CUDA kernel from ``signal`` and ``scan``. A strategy may pass both ``kernel`` and
    ``scan`` itself instead (without ``signal`` it runs on the CPU only).
    ``requires`` holds comparisons between two parameters that every combo must
    meet, e.g. ``("lower", "<", "upper")``: a spec adds them to its constraints and
    ``backtest()`` refuses a combo that breaks one.

    ``rule`` is ``(rule, kinds)`` for a strategy compiled from a rule
    (:class:`barsweep.engine.rules.Rule` and its parameters' kinds): it pickles as that
    and is compiled again where it is unpickled.

    Everything after ``indicators`` is passed by keyword.
    """

    name: str
    params: tuple[Param, ...]
    indicators: tuple[Indicator, ...]
    _: KW_ONLY
    signal: Callable | None = field(default=None, repr=False)
    doc: str = ""
    requires: tuple[tuple[str, str, str], ...] = ()
    kernel: Callable | None = field(default=None, repr=False)
    scan: Callable | None = field(default=None, repr=False)
    rule: tuple | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        names = set(self.param_names)
        for left, op, right in self.requires:
            if op not in _COMPARE or left not in names or right not in names:
                raise ValueError(f"{self.name}: bad requirement {left} {op} {right}")
        for ind in self.indicators:
            unknown = set(ind.params) - names
            if unknown:
                raise ValueError(f"{self.name}: indicator {ind.name} uses unknown {unknown}")
        kernel, scan = _given(self, "kernel"), _given(self, "scan")
        if self.signal is not None:
            kernels.signal_arity(self.signal)  # 5, 8 or 11 arguments, else a SpecError
        if self.signal is None or (kernel is not None and scan is not None):
            return
        if kernel is not None or scan is not None:
            raise ValueError(f"{self.name}: pass both kernel and scan, or neither (they are "
                             "then compiled from the signal)")
        if kernels.source_of(self.signal) is None:  # said now (a warning), not at first use
            kernels.compiled(self.signal)

    def __reduce__(self):
        """Pickled without the kernel and scan compiled from the signal (their module is
        this process's): they are built again where it is unpickled, from the signal
        imported by name when it can be (numba pickles a function by value, and a copy
        could not load its kernel from the cache)."""
        if self.rule is not None:
            return _from_rule, self.rule
        values = {f.name: getattr(self, f.name) for f in fields(self)
                  if f.name not in ("kernel", "scan")}
        values.update(kernel=_given(self, "kernel"), scan=_given(self, "scan"))
        if self.signal is not None and values["kernel"] in (
                None, getattr(kernels.built(self.signal), "kernel", None)):
            values["kernel"] = values["scan"] = None
            source = kernels.source_of(self.signal)
            if source is not None and source[0] != "__main__":
                values["signal"] = source[:2]
        return _strategy, (values,)

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


class FromSignal:
    """A :class:`Strategy`'s ``kernel`` or ``scan``: the function it was given, else the
    one compiled from its signal (:func:`kernels.compiled`), whose module is written when
    first read; None for a strategy with neither.

    A data descriptor on the frozen dataclass: the dataclass's ``__init__`` stores the
    value given (``__set__``), reading it goes through ``__get__``.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, strategy, owner=None):
        if strategy is None:
            return self
        given = strategy.__dict__.get(self.name)
        if given is None and strategy.signal is not None:
            return getattr(kernels.compiled(strategy.signal), self.name)
        return given

    def __set__(self, strategy, value) -> None:
        strategy.__dict__[self.name] = value


def _given(strategy: Strategy, name: str) -> Callable | None:
    """The ``kernel`` or ``scan`` passed to ``strategy`` (None: compiled from its signal,
    or none), read without building anything."""
    return strategy.__dict__.get(name)


# After the dataclass is made: its __init__ keeps None as the default of both fields.
Strategy.kernel = FromSignal("kernel")
Strategy.scan = FromSignal("scan")


def _strategy(values: dict) -> Strategy:
    """A Strategy from its fields (unpickling); a ``(module, name)`` signal is imported."""
    if isinstance(values["signal"], tuple):
        module, name = values["signal"]
        values = {**values, "signal": getattr(import_module(module), name)}
    return Strategy(**values)


def _from_rule(rule, kinds: dict) -> Strategy:
    """The Strategy compiled from ``rule`` (unpickling; cached per process)."""
    return rule.compile(kinds)
