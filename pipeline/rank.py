"""Ranking: the best combos of a results store by one metric.

Never first: NaN (never ranked at all), an infinite value, a ruined combo, and, by a
metric that doing nothing wins (volatility, ulcer_index, max_drawdown, ruined, or any
ranked ascending), a combo that never traded.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import xarray as xr

from ..engine import BEST_WHEN_IDLE, LOWER_IS_BETTER, METRICS
from ..errors import SpecError
from .expr import check_names, parse_expr
from .results import open_results


def param_dims(ds: xr.Dataset) -> tuple[str, ...]:
    """The parameter dims of a results store, in order (every dim after ``symbol``)."""
    return tuple(d for d in ds[METRICS[0]].dims if d != "symbol")


def rank(
    results: str | os.PathLike | xr.Dataset,
    by: str = "sharpe",
    top: int = 20,
    where: str | None = None,
    ascending: bool | None = None,
) -> pd.DataFrame:
    """The ``top`` combos by metric ``by``.

    Parameters
    ----------
    results : str, os.PathLike or xarray.Dataset
        The path of a results store, or the Dataset opened from it.
    by : str
        A metric name; descending unless lower is better (volatility, ulcer_index).
    top : int
    where : str, optional
        A filter over metric and parameter names, e.g. ``"n_trades >= 10"``.
    ascending : bool, optional
        Override the metric's natural direction.

    Returns
    -------
    pandas.DataFrame
        One row per combo, best first: ``symbol``, the parameters, every metric.
        Combos whose ``by`` is NaN (excluded, undefined) are never ranked. The order
        (:func:`rank_order`): ruined combos after every other; then, by a metric that
        doing nothing wins, combos that never traded after those that did; then
        infinite values after finite ones; then by ``by``; ties by position.
    """
    ds = results if isinstance(results, xr.Dataset) else open_results(results)
    if by not in METRICS:
        raise SpecError(f"--by: unknown metric {by!r}; metrics: {', '.join(METRICS)}")
    if top < 1:
        raise SpecError(f"--top: expected a positive count, got {top}")
    dims = ("symbol", *param_dims(ds))
    shape = tuple(ds.sizes[d] for d in dims)
    score = np.asarray(ds[by].values, dtype=np.float64).ravel()
    keep = ~np.isnan(score)
    if where:
        keep &= _where_mask(ds, where, dims, shape)
    candidates = np.flatnonzero(keep)
    if ascending is None:
        ascending = by in LOWER_IS_BETTER
    order = rank_order(score[candidates], ascending,
                       idle_wins=ascending or by in BEST_WHEN_IDLE,
                       ruined=_flat(ds, "ruined", candidates) == 1.0,
                       traded=_flat(ds, "n_trades", candidates) > 0.0)[:top]
    chosen = candidates[order]
    index = np.unravel_index(chosen, shape)
    points = {d: xr.DataArray(ix, dims="rank") for d, ix in zip(dims, index)}
    picked = ds[list(METRICS)].isel(points).compute()
    frame = pd.DataFrame({d: ds[d].values[ix] for d, ix in zip(dims, index)})
    for name in METRICS:
        frame[name] = picked[name].values
    frame.index = pd.RangeIndex(1, len(frame) + 1, name="rank")
    return frame


def rank_order(score: np.ndarray, ascending: bool, idle_wins: bool, ruined: np.ndarray,
               traded: np.ndarray) -> np.ndarray:
    """The order of candidates, best first (a permutation of their positions).

    Parameters
    ----------
    score : ndarray, shape (n,), float64, no NaN
        The ranked metric of each candidate.
    ascending : bool
        Whether a smaller score ranks first.
    idle_wins : bool
        Whether a combo that never traded would win by doing nothing (volatility 0, ...):
        such combos then rank after every combo that traded.
    ruined, traded : ndarray, shape (n,), bool

    Ruined combos rank after every other, infinite scores after every finite one
    (within those groups); ties keep the candidates' order.
    """
    signed = score if ascending else -score
    idle = ~traded if idle_wins else np.zeros(len(score), dtype=bool)
    # np.lexsort: the last key is the primary one
    return np.lexsort((np.arange(len(score)), signed, np.isinf(score), idle, ruined))


def _flat(ds: xr.Dataset, name: str, index: np.ndarray) -> np.ndarray:
    """Metric ``name`` at the flat ``index`` positions (zeros for a store without it)."""
    if name not in ds.data_vars:
        return np.zeros(len(index))
    return np.asarray(ds[name].values, dtype=np.float64).ravel()[index]


def _where_mask(ds: xr.Dataset, where: str, dims: tuple[str, ...],
                shape: tuple[int, ...]) -> np.ndarray:
    expr = parse_expr(where)
    check_names(expr, set(METRICS) | set(dims[1:]), what="--where")
    env = {}
    for name in expr.names:
        if name in METRICS:
            env[name] = np.asarray(ds[name].values, dtype=np.float64).ravel()
        else:
            axis = dims.index(name)
            view = ds[name].values.reshape([-1 if i == axis else 1 for i in range(len(dims))])
            env[name] = np.broadcast_to(view, shape).ravel()
    return np.asarray(expr.evaluate(env), dtype=bool)


def to_records(frame: pd.DataFrame) -> list[dict]:
    """JSON-ready rows: Python scalars; NaN and infinities as None (valid JSON)."""
    records = []
    for row in frame.to_dict(orient="records"):
        clean = {}
        for key, value in row.items():
            if isinstance(value, np.generic):
                value = value.item()
            if isinstance(value, float) and not math.isfinite(value):
                value = None
            clean[key] = value
        records.append(clean)
    return records
