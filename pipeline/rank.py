"""Ranking: the best combos of a results store by one metric, NaN never first."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import xarray as xr

from barsweep.engine import LOWER_IS_BETTER, METRICS
from barsweep.errors import SpecError

from .expr import check_names, parse_expr
from .results import open_results


def param_dims(ds: xr.Dataset) -> tuple[str, ...]:
    """The parameter dims of a results store, in order (every dim after ``symbol``)."""
    return tuple(d for d in ds[METRICS[0]].dims if d != "symbol")


def rank(
    results: str | xr.Dataset,
    by: str = "sharpe",
    top: int = 20,
    where: str | None = None,
    ascending: bool | None = None,
) -> pd.DataFrame:
    """The ``top`` combos by metric ``by``.

    Parameters
    ----------
    results : path of a results store, or the Dataset opened from it
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
        Combos whose ``by`` is NaN (excluded, undefined) are never ranked.
    """
    ds = open_results(results) if isinstance(results, str) else results
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
    signed = score[candidates] if ascending else -score[candidates]
    order = np.lexsort((candidates, signed))[:top]  # ties: lower flat index first
    chosen = candidates[order]
    index = np.unravel_index(chosen, shape)
    points = {d: xr.DataArray(ix, dims="rank") for d, ix in zip(dims, index)}
    picked = ds[list(METRICS)].isel(points).compute()
    frame = pd.DataFrame({d: ds[d].values[ix] for d, ix in zip(dims, index)})
    for name in METRICS:
        frame[name] = picked[name].values
    frame.index = pd.RangeIndex(1, len(frame) + 1, name="rank")
    return frame


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
