"""Pareto fronts: the combos no other combo beats in every metric at once."""

from __future__ import annotations

import numpy as np

from ....engine import LOWER_IS_BETTER
from ....engine.analysis import front_cpu

__all__ = ["pareto"]


def pareto(data, metrics) -> np.ndarray:
    """The non-dominated rows: no other row is at least as good in every metric and
    strictly better in one. Each metric counts in its own better direction (lower for
    those in ``barsweep.engine.LOWER_IS_BETTER``, higher otherwise; max_drawdown is <= 0,
    so higher is better).

    Parameters
    ----------
    data : pandas.DataFrame or mapping of str to array_like, shape (n,)
    metrics : sequence of str

    Returns
    -------
    ndarray, shape (k,), int
        Positions of the non-dominated rows, ascending. Rows with a NaN metric take no
        part; duplicate rows are all kept.

    >>> pareto({"sharpe": [1.0, 2.0, 1.5], "max_drawdown": [-0.1, -0.3, -0.4]},
    ...        ["sharpe", "max_drawdown"]).tolist()
    [0, 1]
    """
    cols = []
    for name in metrics:
        values = np.asarray(data[name], dtype=np.float64)
        cols.append(-values if name in LOWER_IS_BETTER else values)  # higher is better
    points = np.column_stack(cols)
    candidates = np.flatnonzero(~np.isnan(points).any(axis=1))
    pts = points[candidates]
    # best first, lexicographically: a row is dominated only by rows before it
    order = np.lexsort(tuple(-pts[:, j] for j in range(pts.shape[1] - 1, -1, -1)))
    if pts.shape[1] == 2:
        return np.sort(candidates[order[_front_2d(pts[order])]])
    front = np.empty(len(order), dtype=np.int64)
    n_front = front_cpu(np.ascontiguousarray(pts[order]), front)
    front = order[front[:n_front]]
    return np.sort(candidates[front])


def _front_2d(pts: np.ndarray) -> np.ndarray:
    """Positions of the non-dominated rows of ``pts`` (shape (n, 2), higher is better,
    sorted best first lexicographically): a row is dominated by an earlier row with a
    larger first value and a second value at least its own, or by an earlier row with
    the same first value and a larger second value (the first of its group)."""
    a, b = pts[:, 0], pts[:, 1]
    if not len(a):
        return np.zeros(0, dtype=np.int64)
    new_group = np.r_[True, a[1:] != a[:-1]]
    group = np.cumsum(new_group) - 1
    first = np.flatnonzero(new_group)
    head_b = b[first]                                  # each group's best second value
    best_before = np.r_[-np.inf, np.maximum.accumulate(head_b)[:-1]]
    dominated = (best_before[group] >= b) | (head_b[group] > b)
    return np.flatnonzero(~dominated)
