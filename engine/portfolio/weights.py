"""How a portfolio sizes and orders its entries: equal or inverse-volatility weights, and
the priority of same-bar entries (docs/EXECUTION.md, "Portfolios").

Everything a combo reads is hoisted here once per symbol and distinct lookback, never
per combo: each symbol's volatility over its last ``L`` close-to-close returns, the
weights' normalizers and, for a data-driven priority, the symbols' order at each bar.
The kernel reads them through :func:`target_weight` and :func:`entry_symbol`, plain
functions of array elements that compile for the CPU (and as device functions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from numba import njit

from ...errors import SpecError

#: The values of ``weight``.
WEIGHTS = ("equal", "inverse_vol")
#: The data-driven values of ``priority`` (a list of symbols is the explicit one).
PRIORITIES = ("low_vol", "momentum")
#: The lookback (bars) of the volatility and momentum when none is given.
DEFAULT_LOOKBACK = 20


class Sizing(NamedTuple):
    """What a portfolio kernel reads to size and order entries (a numba named tuple).

    Attributes
    ----------
    inverse_vol : bool
        True: :func:`target_weight` is the inverse-volatility weight; False: ``1 / K``.
    inv_vol : ndarray, shape (n_lookbacks, N, n_bars), float64
        ``1 / vol`` of symbol ``i`` at the close of bar ``t`` over lookback ``l``
        (:func:`rolling_vol`); 0 where the volatility is undefined (``t < L``) or 0.
        Shape (0, N, 0) with equal weights.
    top_sum : ndarray, shape like ``inv_vol``, float64
        ``top_sum[l, k, t]``: the sum of the ``k + 1`` largest ``inv_vol[l, :, t]``.
    order : ndarray, shape (n_lookbacks, N, n_bars) or (1, N, 1), int64
        ``order[l, r, t]``: the symbol of entry rank ``r`` at bar ``t``; one order for
        every bar and lookback when its last dim is 1.
    """

    inverse_vol: bool
    inv_vol: np.ndarray
    top_sum: np.ndarray
    order: np.ndarray


@njit(cache=True)
def rolling_vol(close, lookback):
    """The standard deviation (``ddof=1``) of the last ``lookback`` close-to-close
    returns ``close[s] / close[s-1] - 1``, ``s`` in ``(t - lookback, t]``, at each bar
    ``t``; NaN for ``t < lookback``. Equals
    ``pd.Series(close).pct_change().rolling(lookback).std()``.

    Parameters
    ----------
    close : ndarray, shape (n_bars,), float64
    lookback : int, >= 2

    Returns
    -------
    ndarray, shape (n_bars,), float64

    Examples
    --------
    >>> rolling_vol(np.array([1.0, 2.0, 1.0, 1.0]), 2)
    array([       nan,        nan, 1.06066017, 0.35355339])
    """
    n = close.shape[0]
    out = np.full(n, np.nan)
    for t in range(lookback, n):
        mean = 0.0
        for s in range(t - lookback + 1, t + 1):
            mean += close[s] / close[s - 1] - 1.0
        mean /= lookback
        ss = 0.0
        for s in range(t - lookback + 1, t + 1):
            d = close[s] / close[s - 1] - 1.0 - mean
            ss += d * d
        out[t] = np.sqrt(ss / (lookback - 1))
    return out


def momentum(close: np.ndarray, lookback: int) -> np.ndarray:
    """The ``lookback``-bar return ``close[t] / close[t - lookback] - 1``; NaN for
    ``t < lookback``.

    Examples
    --------
    >>> momentum(np.array([1.0, 2.0, 3.0]), 1)
    array([nan, 1. , 0.5])
    """
    out = np.full(close.shape, np.nan)
    out[lookback:] = close[lookback:] / close[:-lookback] - 1.0
    return out


def lookback_column(lookback, n_combos: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct lookbacks of ``lookback`` (None, an int, or one int per combo) and
    each combo's index into them (int64, shape (n_combos,)). Values must be integers
    >= 2; None is :data:`DEFAULT_LOOKBACK`."""
    if lookback is None:
        lookback = DEFAULT_LOOKBACK
    values = np.broadcast_to(np.asarray(lookback), (n_combos,))
    if not np.all(np.isfinite(values)) or np.any(values < 2) or np.any(values != np.round(values)):
        raise SpecError(f"lookback must be integers >= 2 (bars), got {np.unique(values)}")
    distinct, index = np.unique(values.astype(np.int64), return_inverse=True)
    return distinct, index.astype(np.int64)


def sizing_rows(weight: str, priority, n_lookbacks: int) -> int:
    """The rows of ``n_bars`` values per symbol that :func:`hoist_sizing` keeps (for
    memory estimates): 2 per lookback for ``inverse_vol`` and 1 for a data-driven
    priority (the volatility or momentum computed on the way is freed)."""
    return ((2 if weight == "inverse_vol" else 0) + (priority in PRIORITIES)) * n_lookbacks


def _ranked(key: np.ndarray) -> np.ndarray:
    """Symbols ranked by ``key`` (shape (N, n_bars)) ascending at each bar, NaN last,
    ties in the symbols' order: shape (N, n_bars), int64."""
    return np.argsort(np.where(np.isnan(key), np.inf, key), axis=0, kind="stable")


def fixed_order(priority: Sequence[str] | None, symbols: Sequence[str]) -> np.ndarray:
    """The entry order of an explicit ``priority`` (symbols listed first, in that order,
    then the others in the symbols' order): shape (N,), int64."""
    symbols = list(symbols)
    listed = list(priority or ())
    unknown = [s for s in listed if s not in symbols]
    if unknown or len(set(listed)) < len(listed):
        raise SpecError(f"priority must list distinct symbols of the portfolio {symbols}, "
                        f"got {listed}")
    order = [symbols.index(s) for s in listed]
    order += [i for i in range(len(symbols)) if i not in order]
    return np.array(order, dtype=np.int64)


def hoist_sizing(closes: np.ndarray, lookbacks: np.ndarray, weight: str = "equal",
                 priority: str | Sequence[str] | None = None,
                 symbols: Sequence[str] | None = None) -> Sizing:
    """The :class:`Sizing` of a portfolio of ``closes``, once per symbol and lookback.

    Parameters
    ----------
    closes : ndarray, shape (N, n_bars)
    lookbacks : ndarray, shape (n_lookbacks,), int64
        The distinct lookbacks (:func:`lookback_column`).
    weight : {"equal", "inverse_vol"}
    priority : None, "low_vol", "momentum", or a sequence of symbols
        None: the symbols' order; ``low_vol``: the lowest volatility first; ``momentum``:
        the highest ``lookback``-bar return first (undefined values last, ties in the
        symbols' order); a list: :func:`fixed_order`.
    symbols : sequence of str, the members' names (for a list ``priority``)

    Examples
    --------
    >>> closes = np.array([[1.0, 1.1, 1.0, 1.1], [1.0, 1.01, 1.0, 1.01]])
    >>> s = hoist_sizing(closes, np.array([2]), "inverse_vol", "low_vol")
    >>> float(target_weight(s, 0, 1, 3, 2)), s.order[0, :, 3].tolist()
    (0.9055..., [1, 0])
    """
    if weight not in WEIGHTS:
        raise SpecError(f"weight must be one of {WEIGHTS}, got {weight!r}")
    n_sym, n_bars = closes.shape
    inverse_vol = weight == "inverse_vol"
    if inverse_vol or priority in PRIORITIES:
        vol = np.stack([[rolling_vol(c, int(k)) for c in closes] for k in lookbacks])
    if inverse_vol:
        with np.errstate(divide="ignore"):
            inv_vol = np.where(vol > 0.0, 1.0 / vol, 0.0)
        top_sum = np.cumsum(-np.sort(-inv_vol, axis=1), axis=1)
    else:
        inv_vol = top_sum = np.zeros((0, n_sym, 0))
    if priority == "low_vol":
        order = np.stack([_ranked(v) for v in vol])
    elif priority == "momentum":
        order = np.stack([_ranked(-np.stack([momentum(c, int(k)) for c in closes]))
                          for k in lookbacks])
    elif isinstance(priority, str):
        raise SpecError(f"priority must be a list of symbols or one of {PRIORITIES}, "
                        f"got {priority!r}")
    else:
        order = fixed_order(priority, symbols or range(n_sym)).reshape(1, n_sym, 1)
    return Sizing(inverse_vol, np.ascontiguousarray(inv_vol), np.ascontiguousarray(top_sum),
                  np.ascontiguousarray(order, dtype=np.int64))


@njit(inline="always", cache=True)
def target_weight(sizing, lb, i, t, max_open):
    """The share of the account's value that symbol ``i`` targets at the close of bar
    ``t`` (lookback index ``lb``, at most ``max_open`` positions open).

    Equal weights: ``1 / max_open``. Inverse volatility: ``(1 / vol_i) / S_K`` where
    ``S_K`` is the sum of the ``K = max_open`` largest ``1 / vol_j`` over the members at
    ``t`` (all N without ``max_positions``: the weights sum to 1); any K positions
    entered at ``t`` target at most 1 together, and equal volatilities give ``1 / K``.
    0 where symbol ``i``'s volatility is undefined (``t < L``) or 0: no entry.
    """
    if sizing.inverse_vol:
        w = sizing.inv_vol[lb, i, t]
        return w / sizing.top_sum[lb, max_open - 1, t] if w > 0.0 else 0.0
    return 1.0 / max_open


@njit(inline="always", cache=True)
def entry_symbol(sizing, lb, r, t):
    """The symbol of entry rank ``r`` (0 first) at the close of bar ``t``, lookback index
    ``lb``."""
    order = sizing.order
    if order.shape[2] == 1:
        return order[0, r, 0]
    return order[lb, r, t]
