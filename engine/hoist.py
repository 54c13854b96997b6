"""Hoisting: compute each indicator once per distinct parameter value of a block."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .indicators import compute_indicator
from .strategies.base import Strategy


def hoist(
    strategy: Strategy,
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


def plan_rows(strategy: Strategy, params: Mapping[str, np.ndarray],
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
        args = np.column_stack([np.asarray(params[p]) for p in spec.params])
        distinct, inverse = np.unique(args, axis=0, return_inverse=True)
        slot_rows = np.empty(len(distinct), dtype=np.int64)
        for j, values in enumerate(distinct):
            call = tuple(_scalar(strategy, name, v) for name, v in zip(spec.params, values))
            slot_rows[j] = index.setdefault((spec.name, call), len(index))
        rows[:, slot] = slot_rows[inverse.reshape(-1)]
    return list(index), rows


def param_matrix(strategy: Strategy, params: Mapping[str, np.ndarray],
                 n_combos: int) -> np.ndarray:
    """Parameter values as float64, shape (n_combos, n_params), in the strategy's order."""
    if not strategy.params:
        return np.empty((n_combos, 0))
    return np.column_stack([np.asarray(params[p], dtype=np.float64) for p in strategy.param_names])


def _scalar(strategy: Strategy, name: str, value):
    return int(value) if strategy.param(name).kind == "int" else float(value)
