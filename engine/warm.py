"""Compile a strategy's kernels ahead of time, tell whether they are compiled, and check
that a strategy compiles before a run depends on it.

numba compiles a strategy's sweep kernel on its first call on a machine (seconds: type
inference of the whole simulation) and caches it on disk; later processes load it.
:func:`warm` makes that first call on a few synthetic bars, so that it happens after an
install or in a worker image rather than in someone's first sweep, and marks the kernel
compiled (:func:`barsweep.engine.cache.mark_compiled`); :func:`is_compiled` says, without
compiling, whether it is marked for the engine and the kernel's source as they are
(``barsweep run`` uses it to say that it is compiling, and that it happens once).
:func:`check` is what a run does on the driver before it makes a store or starts a
cluster: nothing when the kernel is marked, else the signal typed alone (a wrong
signal refused in a few lines naming its module and function) and the kernel compiled.
"""

from __future__ import annotations

import inspect
import re
import time

import numpy as np
from numba import typeof
from numba.core import types as nb_types
from numba.core.errors import NumbaError

from ..errors import SpecError
from .cache import is_marked, mark_compiled
from .core.calendar import hourly_times
from .core.execution import Execution
from .strategies import kernels
from .strategies.base import Strategy

__all__ = ["check", "check_portfolio", "describe", "is_compiled", "portfolio_compiled",
           "rebuild_kernels", "signal_problem", "warm", "warm_params"]

#: What a signal returns at bar t.
SIGNAL_RETURNS = ("(long_entry, long_exit, short_entry, short_exit), a tuple of 4 "
                  "booleans")


def is_compiled(strategy: Strategy) -> bool:
    """Whether :func:`warm` compiled ``strategy``'s sweep kernel into numba's on-disk
    cache for the engine's current source and the kernel's (False for a kernel that is
    not cached on disk, e.g. compiled in-process only, or for no kernel)."""
    return strategy.kernel is not None and is_marked(strategy.kernel)


def portfolio_compiled(strategy: Strategy) -> bool:
    """Whether :func:`check_portfolio` compiled ``strategy``'s portfolio kernel into
    numba's cache (True for a strategy without a signal: it has no portfolio kernel)."""
    from .portfolio.sweep import portfolio_kernel

    return strategy.signal is None or is_marked(portfolio_kernel(strategy.signal))


#: The mark of a kernel's specialisation for a recording run (one combo in full:
#: :func:`~barsweep.engine.backtest.single.backtest`,
#: :func:`~barsweep.engine.backtest.portfolio.backtest_portfolio`), a compile of its own:
#: a sweep's kernel records nothing (its record is None,
#: :mod:`~barsweep.engine.core.records`).
RECORDING = "record"


def rebuild_kernels(strategy: Strategy, portfolio: bool) -> tuple[tuple[str, object, str], ...]:
    """The kernels that rebuilding one combo of ``strategy`` in full runs, with buy and
    hold beside it (``barsweep trades``, ``plot best``, ``report``): each as the name of
    its strategy, the jitted function and the variant of its mark (:func:`~.cache.
    is_marked`). A rebuild runs the recording specialisation (:data:`RECORDING`) of the
    sweep kernel, or of the portfolio kernel for a portfolio.

    >>> from barsweep.engine import get_strategy
    >>> [(name, variant) for name, _, variant in rebuild_kernels(get_strategy("rsi"), True)]
    [('rsi', 'record'), ('buy_and_hold', 'record')]
    """
    from .portfolio.sweep import portfolio_kernel
    from .strategies import get_strategy

    kernels = {}
    for one in (strategy, get_strategy("buy_and_hold")):
        if portfolio and one.signal is not None:
            kernels[one.name] = (one.name, portfolio_kernel(one.signal), RECORDING)
        elif not portfolio and one.kernel is not None:
            kernels[one.name] = (one.name, one.kernel, RECORDING)
    return tuple(kernels.values())


def compiled_here(function, variant: str = "") -> bool:
    """Whether the jitted ``function`` holds, in this process, the specialisation its
    mark ``variant`` stands for (:func:`rebuild_kernels`): any, or for
    :data:`RECORDING` one whose last argument (the record) is not None."""
    signatures = getattr(function, "signatures", ())
    if variant != RECORDING:
        return bool(signatures)
    return any(not isinstance(args[-1], nb_types.NoneType) for args in signatures if args)


def warm_params(strategy: Strategy) -> dict[str, np.ndarray]:
    """One valid value of each parameter, increasing with its position (so that
    ``fast < slow``-style requirements hold), as the arrays of a one-combo sweep.

    >>> from barsweep.engine import get_strategy
    >>> warm_params(get_strategy("rsi"))
    {'period': array([5]), 'lower': array([50.]), 'upper': array([75.])}
    """
    n = len(strategy.params)
    values = {}
    for i, p in enumerate(strategy.params):
        low = 0.0 if p.low is None else p.low
        if p.kind == "int":
            value = int(low) + 3 + 5 * i
        elif p.high is not None:
            value = low + (p.high - low) * (i + 1) / (n + 1)
        else:
            value = low + 1.0 + i
        values[p.name] = np.array([value], dtype=np.int64 if p.kind == "int" else np.float64)
    strategy.validate({k: v[0] for k, v in values.items()})
    return values


def warm_bars(n_bars: int = 300) -> dict[str, np.ndarray]:
    """``n_bars`` synthetic hourly bars (seeded), with every column a rule may read
    (volume and the time stamps of the calendar included), what :func:`warm` runs on."""
    rng = np.random.default_rng(0)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n_bars)))
    return {"open": close, "high": close * 1.001, "low": close * 0.999, "close": close,
            "volume": 1000.0 * np.exp(rng.normal(0.0, 0.5, n_bars)),
            "time": hourly_times(n_bars)}


def warm(strategy: Strategy) -> tuple[float, bool]:
    """Run ``strategy``'s kernels once on 300 synthetic bars (compiling them into numba's
    cache if it does not hold them) and mark the kernel compiled; returns the seconds it
    took and whether it was marked before."""
    from .dispatch import sweep_block

    compiled = is_compiled(strategy)
    t0 = time.perf_counter()
    sweep_block(strategy, warm_bars(), warm_params(strategy), Execution(), 8760.0,
                seg_sums=np.empty((1, 2, 2)))
    seconds = time.perf_counter() - t0
    if not compiled:
        mark_compiled(strategy.kernel)
    return seconds, compiled


def check(strategy: Strategy, *, kernel: bool = True) -> float | None:
    """Make sure ``strategy`` compiles, before a run makes a store or starts a cluster.

    Nothing is done when its kernel is marked compiled (:func:`is_compiled`: it compiled
    for this engine and this signal's source). Otherwise its signal is typed alone on the
    argument types the kernel passes it, and its return type checked
    (:func:`signal_problem`); then, with ``kernel``, the sweep kernel is compiled into
    numba's cache (:func:`warm`), where the workers of this machine load it.

    Returns
    -------
    float or None
        The seconds spent compiling; None when the cache held the kernel.

    Raises
    ------
    SpecError
        ``strategy 'name' (module m, function signal): what is wrong``, then where, in a
        few lines: numba's own message cut to its essentials.
    """
    if is_compiled(strategy):
        return None
    t0 = time.perf_counter()
    problem = signal_problem(strategy) if strategy.signal is not None else None
    if problem is None and kernel:
        try:
            warm(strategy)
        except NumbaError as exc:
            problem = f"its sweep kernel does not compile: {essentials(exc)}"
    if problem is not None:
        raise SpecError(f"{describe(strategy)}: {problem}")
    return time.perf_counter() - t0


def check_portfolio(strategy: Strategy) -> float | None:
    """Compile ``strategy``'s portfolio kernel into numba's cache, unless it is marked
    compiled, by a run on two synthetic members, and mark it: one compiled kernel serves
    a portfolio of any number of members (:func:`barsweep.engine.portfolio.sim.
    member_bars`), so a run's blocks load it.

    Returns
    -------
    float or None
        The seconds spent compiling; None when the cache held the kernel.

    Raises
    ------
    SpecError
        As :func:`check`, when the kernel does not compile.
    """
    from .dispatch import sweep_portfolio
    from .portfolio.sweep import portfolio_kernel

    if strategy.signal is None:
        return None
    kernel = portfolio_kernel(strategy.signal)
    if is_marked(kernel):
        return None
    t0 = time.perf_counter()
    bars = warm_bars()
    members = {"A": bars, "B": {k: v[::-1].copy() for k, v in bars.items()}}
    try:
        sweep_portfolio(strategy, members, warm_params(strategy), Execution(fill="close"),
                        8760.0)
    except NumbaError as exc:
        raise SpecError(f"{describe(strategy)}: its portfolio kernel does not compile: "
                        f"{essentials(exc)}") from None
    mark_compiled(kernel)
    return time.perf_counter() - t0


def describe(strategy: Strategy) -> str:
    """``strategy 'name' (module m, function f)``: where its rule is defined.

    >>> from barsweep.engine import get_strategy
    >>> describe(get_strategy("rsi"))
    "strategy 'rsi' (module barsweep.engine.strategies.rsi, function signal)"
    """
    function = strategy.signal if strategy.signal is not None else strategy.kernel
    py_func = getattr(function, "py_func", function)
    module = getattr(py_func, "__module__", "?")
    name = getattr(py_func, "__qualname__", "?")
    return f"strategy {strategy.name!r} (module {module}, function {name})"


def signal_problem(strategy: Strategy) -> str | None:
    """Why ``strategy``'s signal cannot run in its kernel (None: it can): numba's typing
    error on the kernel's argument types, cut to its essentials, or a return value that
    is not :data:`SIGNAL_RETURNS`."""
    from .core.hoist import hoist
    from .core.inputs import prepare_inputs

    signal = strategy.signal
    if not hasattr(signal, "compile"):  # a plain function (NUMBA_DISABLE_JIT)
        return None
    inputs = prepare_inputs(strategy, warm_bars(), warm_params(strategy), Execution(), 8760.0)
    ind, rows = hoist(strategy, inputs.columns, inputs.strategy_params, inputs.n_combos)
    args = (ind, rows[0], inputs.fparams[0], inputs.bars, np.int64(1))
    arity = kernels.signal_arity(signal)
    if arity >= 8:  # the position state (and the account), as the kernel passes them
        args += (np.float64(0.0), np.float64(0.0), np.int64(0))
    if arity == 11:
        args += (np.float64(1.0), np.float64(0.0), np.float64(0.0))
    arg_types = tuple(typeof(a) for a in args)
    try:
        signal.compile(arg_types)
    except NumbaError as exc:
        problem = essentials(exc)
        return problem if "\n  at " in problem else problem + _defined_at(signal)
    returned = signal.overloads[arg_types].signature.return_type
    if (isinstance(returned, nb_types.BaseTuple) and len(returned) == 4
            and all(isinstance(t, nb_types.Boolean) for t in returned)):
        return None
    if isinstance(returned, nb_types.BaseTuple):
        got = (f"a tuple of {len(returned)}: "
               f"({', '.join(str(nb_types.unliteral(t)) for t in returned)})")
    else:
        got = str(nb_types.unliteral(returned))
    return f"signal must return {SIGNAL_RETURNS}; it returns {got}{_defined_at(signal)}"


def _defined_at(function) -> str:
    """``\\n  defined at FILE, line N`` for a function whose source is known, else ''."""
    py_func = getattr(function, "py_func", function)
    source = kernels.source_of(function)
    try:
        line = inspect.getsourcelines(py_func)[1]
    except (OSError, TypeError):
        return ""
    path = source[2] if source else inspect.getsourcefile(py_func)
    return f"\n  defined at {path}, line {line}" if path else ""


_LOCATION = re.compile(r'^File "(?P<file>.+)", line (?P<line>\d+):')
_NOISE = ("Failed in ", "During:", "There are ", " - Of which", "<source elided>")


def essentials(exc: BaseException) -> str:
    """numba's error message in a few lines: its first statement, the call it could not
    type (``>>> f(types)``) and the last source line it points at.

    >>> from numba.core.errors import TypingError
    >>> print(essentials(TypingError("Failed in nopython mode pipeline (step: x)\\n"
    ...       "NameError: name 'cross_abov' is not defined\\nDuring: Pass x")))
    NameError: name 'cross_abov' is not defined
    """
    lines = [line.rstrip() for line in str(exc).splitlines()]
    headline = next((line.strip() for line in lines if line.strip()
                     and not line.lstrip().startswith(_NOISE)), type(exc).__name__)
    out = [headline]
    call = next((line.strip()[3:].strip() for line in lines
                 if line.strip().startswith(">>>")), None)
    if call:
        out[0] = f"{headline} {call}"
    where = None
    for i, line in enumerate(lines):
        match = _LOCATION.match(line.strip())
        if match:
            code = next((lines[j].strip() for j in range(i + 1, len(lines))
                         if j + 1 < len(lines) and lines[j + 1].strip() == "^"), "")
            where = (match["file"], match["line"], code)
    if where:
        out.append(f"at {where[0]}, line {where[1]}" + (f": {where[2]}" if where[2] else ""))
    return "\n  ".join(out)
