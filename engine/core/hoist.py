"""Hoisting: compute each indicator once per distinct parameter value of a block.

``strategy`` is a :class:`~barsweep.engine.strategies.base.Strategy`, handed in:
strategies stands above core, which reads its indicators and parameters and never
imports it."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..indicators.registry import compute_indicator
from .calendar import BarColumns, hourly_times


def hoist(
    strategy,
    bars: Mapping[str, np.ndarray],
    params: Mapping[str, np.ndarray],
    n_combos: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Compute the indicator rows a block of combos needs, each distinct one once.

    Parameters
    ----------
    strategy : Strategy
    bars : mapping of column name to ndarray, shape (n_bars,), float64
    params : mapping of parameter name to ndarray, shape (n_combos,)
    n_combos : int

    Returns
    -------
    ind : ndarray, shape (n_rows, n_bars), float64
        One row per distinct (indicator, arguments); slots share identical rows.
    rows : ndarray, shape (n_combos, n_slots), int64
        For each combo and each of the strategy's indicator slots, its row of ``ind``.

    Examples
    --------
    ``ema_cross`` with fast in {5, 10} and slow in {10, 20} needs three EMA rows.
    """
    keys, rows = plan_rows(strategy, params, n_combos)
    programs = {s.name: s.program for s in strategy.indicators if s.program is not None}
    memo: dict = {}
    ind = np.empty((len(keys), len(bars["close"])))  # filled in place, row by row
    for i, (name, args) in enumerate(keys):
        ind[i] = (programs[name](bars, args, memo) if name in programs
                  else compute_indicator(name, bars, args))
    return ind, rows


def plan_rows(strategy, params: Mapping[str, np.ndarray],
              n_combos: int) -> tuple[list[tuple[str, tuple]], np.ndarray]:
    """The block's distinct indicator rows, in table order, and each combo's row per slot.

    Returns
    -------
    keys : list of (indicator name, arguments)
        Row ``i`` of the table is ``keys[i]``; arguments are ints or floats by the
        strategy's parameter kinds. A slot's new rows are consecutive.
    rows : ndarray, shape (n_combos, n_slots), int64
    """
    rows = np.empty((n_combos, len(strategy.indicators)), dtype=np.int64)
    index: dict[tuple, int] = {}
    for slot, spec in enumerate(strategy.indicators):
        if not spec.params:  # a slot of literals only (a rule's ``atr(high, low, close, 14)``)
            rows[:, slot] = index.setdefault((spec.name, ()), len(index))
            continue
        distinct, inverse = unique_rows([params[p] for p in spec.params])
        slot_rows = np.empty(len(distinct), dtype=np.int64)
        for j, values in enumerate(distinct.tolist()):
            call = tuple(_scalar(strategy, name, v) for name, v in zip(spec.params, values))
            slot_rows[j] = index.setdefault((spec.name, call), len(index))
        rows[:, slot] = slot_rows[inverse]
    return list(index), rows


def unique_rows(columns: list) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of the matrix whose columns are ``columns``, in lexicographic
    order, and the distinct row of each row: ``np.unique(np.column_stack(columns),
    axis=0, return_inverse=True)`` in linear time.

    Each column is coded by its sorted distinct values (:func:`dense_codes`), and the
    codes are combined column by column into one integer key per row, kept dense after
    each column, so the key never overflows and its order is the rows' order.

    Parameters
    ----------
    columns : list of array_like, each shape (n,)

    Returns
    -------
    distinct : ndarray, shape (n_distinct, n_columns), the columns' common dtype
    inverse : ndarray, shape (n,), int64: ``distinct[inverse]`` is the matrix.

    Examples
    --------
    >>> distinct, inverse = unique_rows([np.array([5, 2, 5]), np.array([1.5, 3.0, 1.5])])
    >>> distinct.tolist(), inverse.tolist()
    ([[2.0, 3.0], [5.0, 1.5]], [1, 0, 1])
    """
    arrays = [np.atleast_1d(np.asarray(c)) for c in columns]
    dtype = np.result_type(*arrays)
    values, codes = zip(*(dense_codes(a.astype(dtype, copy=False)) for a in arrays))
    key, table = codes[0], np.arange(len(values[0]))[:, None]
    for j in range(1, len(arrays)):
        size = len(values[j])
        kept, key = dense_codes(key * size + codes[j])
        table = np.column_stack([table[kept // size], kept % size])
    distinct = np.empty(table.shape, dtype=dtype)
    for j, column in enumerate(values):
        distinct[:, j] = column[table[:, j]]
    return distinct, key


def dense_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for a 1-D array, in linear time.

    Integers spanning a range not much wider than their count are counted in a table
    of the range; other values (floats, sparse integers) are hashed
    (:func:`pandas.factorize`), and only the distinct values sorted.

    Returns
    -------
    distinct : ndarray, shape (n_distinct,), sorted, ``values``' dtype
    codes : ndarray, shape (len(values),), int64: ``distinct[codes]`` is ``values``.

    Examples
    --------
    >>> distinct, codes = dense_codes(np.array([20, 5, 20, 9]))
    >>> distinct.tolist(), codes.tolist()
    ([5, 9, 20], [2, 0, 2, 1])
    """
    if values.dtype.kind in "iu" and len(values):
        low = values.min()
        span = int(values.max()) - int(low) + 1
        if span <= 2 * len(values) + (1 << 20):
            shifted = (values - low).astype(np.intp, copy=False)
            present = np.zeros(span, dtype=bool)
            present[shifted] = True
            rank = np.cumsum(present, dtype=np.int64) - 1
            return (np.flatnonzero(present) + low).astype(values.dtype), rank[shifted]
    import pandas as pd  # here only: a worker's blocks of integer axes never import it

    codes, distinct = pd.factorize(values, sort=True, use_na_sentinel=False)
    return np.asarray(distinct, dtype=values.dtype), codes.astype(np.int64, copy=False)


def param_matrix(strategy, params: Mapping[str, np.ndarray],
                 n_combos: int) -> np.ndarray:
    """Parameter values as float64, shape (n_combos, n_params), in the strategy's order."""
    matrix = np.empty((n_combos, len(strategy.param_names)))
    for j, name in enumerate(strategy.param_names):  # converted as written: one pass each
        matrix[:, j] = params[name]
    return matrix


def _scalar(strategy, name: str, value):
    return int(value) if strategy.param(name).kind == "int" else float(value)


def warm_up(strategy, params: Mapping[str, float], n_bars: int) -> int:
    """The bars ``strategy``'s indicators take to warm up at ``params`` (one value per
    parameter of the strategy): the most leading NaN bars of any of its indicator rows,
    computed on ``n_bars`` synthetic bars (a seeded random walk); ``n_bars`` when a row is
    NaN throughout, 0 without indicators.

    A grid's longest warm-up is at its largest values (each slot computed alone).

    >>> from barsweep.engine.strategies import get_strategy
    >>> warm_up(get_strategy("ema_cross"), {"fast": 5, "slow": 40}, 500)
    39
    """
    close = 100.0 * np.exp(np.cumsum(np.random.default_rng(0).normal(0.0, 0.01, n_bars)))
    bars = BarColumns({"open": close, "high": close * 1.001, "low": close * 0.999,
                       "close": close, "volume": np.full(n_bars, 1000.0)},
                      hourly_times(n_bars))
    ind, _ = hoist(strategy, bars, {k: np.array([v]) for k, v in params.items()}, 1)
    defined = ~np.isnan(ind)
    first = np.where(defined.any(axis=1), defined.argmax(axis=1), n_bars)
    return int(first.max(initial=0))
