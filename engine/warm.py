"""Compile a strategy's kernels ahead of time, and tell whether they are compiled.

numba compiles a strategy's sweep kernel on its first call on a machine (seconds: type
inference of the whole simulation) and caches it on disk; later processes load it.
:func:`warm` makes that first call on a few synthetic bars, so that it happens after an
install or in a worker image rather than in someone's first sweep; :func:`is_compiled`
says, without compiling, whether this machine's cache holds the kernel for the engine as
it is (``barsweep run`` uses it to say that it is compiling, and that it happens once).
"""

from __future__ import annotations

import time

import numpy as np

from .execution import Execution
from .strategies.base import Strategy

__all__ = ["is_compiled", "warm", "warm_params"]


def is_compiled(strategy: Strategy) -> bool:
    """Whether numba's on-disk cache holds ``strategy``'s sweep kernel for the engine's
    current source (False when it cannot tell, e.g. a kernel compiled in-process only)."""
    try:
        return bool(strategy.kernel._cache._cache_file._load_index())
    except Exception:  # numba's private layout changed, or no cache: assume not
        return False


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


def warm(strategy: Strategy) -> tuple[float, bool]:
    """Run ``strategy``'s kernels once on 300 synthetic bars (compiling them into numba's
    cache if it does not hold them); returns the seconds it took and whether they were
    compiled before."""
    from .sweep import sweep

    compiled = is_compiled(strategy)
    close = 100.0 * np.exp(np.cumsum(np.random.default_rng(0).normal(0.0, 0.01, 300)))
    bars = {"open": close, "high": close * 1.001, "low": close * 0.999, "close": close}
    t0 = time.perf_counter()
    sweep(strategy, bars, warm_params(strategy), Execution(), 8760.0,
          seg_sums=np.empty((1, 2, 2)))
    return time.perf_counter() - t0, compiled
