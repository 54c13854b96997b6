"""The whole-grid implementations of ``rank`` (with ``smooth`` and ``across``),
``pareto_front`` and ``pbo_table``: every array of the selected grid read into memory
at once. Slow and obvious references for the streamed ones
(:mod:`barsweep.pipeline.analysis.stream_more`, :mod:`.stream_fronts`).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import xarray as xr

from barsweep.engine import BEST_WHEN_IDLE, LOWER_IS_BETTER, METRICS
from barsweep.errors import SpecError
from barsweep.pipeline.analysis import robust
from barsweep.pipeline.analysis.rank import (
    COMPUTED,
    _label,
    param_dims,
    rank_order,
    select,
)
from barsweep.pipeline.analysis.stream import where_mask
from barsweep.pipeline.config.dims import NON_PARAM_DIMS
from barsweep.pipeline.run.results import open_results


def opened(results, partial=False):
    """The Dataset of ``results`` (a path or a Dataset), read whole."""
    if isinstance(results, xr.Dataset):
        return results.load()
    return open_results(results, partial=partial).load()


def with_computed(ds, need):
    """``ds`` with ``psr`` and ``dsr`` when the store holds their inputs."""
    if not (need or robust.has_dsr_inputs(ds)):
        return ds, list(METRICS)
    psr, dsr = robust.dsr_columns(ds)
    return ds.assign(psr=psr, dsr=dsr), [*METRICS, *COMPUTED]


def kept(ds, by, where, dims, names):
    """``by`` over ``dims`` as float64, NaN where ``where`` does not hold."""
    shape = tuple(ds.sizes[d] for d in dims)
    value = ds[by].astype(np.float64).transpose(*dims)
    keep = value.notnull().values
    if where:
        keep &= where_mask(ds, where, dims, shape, names).reshape(shape)
    return value.where(xr.DataArray(keep, dims=dims))


def rank_whole(results, by="sharpe", top=20, where=None, ascending=None, *, smooth=None,
               across=None, agg="median", symbol=None, sample=None, partial=False):
    """``rank`` of the whole grid in memory."""
    ds = opened(results, partial)
    if ascending is None:
        ascending = by in LOWER_IS_BETTER
    ds, names = with_computed(ds, need=by in COMPUTED)
    ds = select(ds, symbol, sample)
    dims = ("symbol", *param_dims(ds))
    value = kept(ds, by, where, dims, names)
    smoothed = robust.smooth(value, smooth) if smooth else None
    idle_wins = ascending or by in BEST_WHEN_IDLE
    if across:
        return rank_across(ds, by, value, smoothed, agg, top, ascending, idle_wins, dims)
    return rank_each(ds, by, value, smoothed, top, ascending, idle_wins, dims, names)


def flat(ds, name, index):
    """Metric ``name`` at the flat ``index`` positions (zeros for a store without it)."""
    if name not in ds.data_vars:
        return np.zeros(len(index))
    return np.asarray(ds[name].values, dtype=np.float64).ravel()[index]


def frame(ds, chosen, dims, shape, names):
    """The rows at flat positions ``chosen``: the dims' labels, then metrics ``names``."""
    index = np.unravel_index(chosen, shape)
    points = {d: xr.DataArray(ix, dims="rank") for d, ix in zip(dims, index)}
    picked = ds[list(names)].isel(points).compute()
    out = pd.DataFrame({d: ds[d].values[ix] for d, ix in zip(dims, index)})
    for name in names:
        out[name] = picked[name].values
    out.index = pd.RangeIndex(1, len(out) + 1, name="rank")
    return out


def rank_each(ds, by, value, smoothed, top, ascending, idle_wins, dims, names):
    """Rank every symbol's combos by ``by``."""
    shape = tuple(ds.sizes[d] for d in dims)
    score = np.asarray((value if smoothed is None else smoothed).values).ravel()
    candidates = np.flatnonzero(~np.isnan(score))
    order = rank_order(score[candidates], ascending, idle_wins=idle_wins,
                       ruined=flat(ds, "ruined", candidates) == 1.0,
                       traded=flat(ds, "n_trades", candidates) > 0.0)[:top]
    chosen = candidates[order]
    out = frame(ds, chosen, dims, shape, names)
    if smoothed is not None:
        out[f"{by}_smooth"] = score[chosen]
    return out


def rank_across(ds, by, value, smoothed, agg, top, ascending, idle_wins, dims):
    """Rank parameter combos by ``by`` aggregated over symbols."""
    params = dims[1:]
    shape = tuple(ds.sizes[d] for d in params)

    def aggregate(da):
        return getattr(da, agg)("symbol", skipna=False).transpose(*params)

    total = aggregate(value)
    score_da = total if smoothed is None else aggregate(smoothed)
    score = np.asarray(score_da.values).ravel()
    candidates = np.flatnonzero(~np.isnan(score))

    def over_symbols(name, reduce):
        if name not in ds.data_vars:
            return np.zeros(len(candidates))
        da = reduce(ds[name].astype(np.float64), "symbol").transpose(*params)
        return np.asarray(da.values).ravel()[candidates]

    ruined = over_symbols("ruined", lambda da, d: da.max(d)) == 1.0
    traded = over_symbols("n_trades", lambda da, d: da.sum(d)) > 0.0
    order = rank_order(score[candidates], ascending, idle_wins=idle_wins, ruined=ruined,
                       traded=traded)[:top]
    chosen = candidates[order]
    index = np.unravel_index(chosen, shape)
    out = pd.DataFrame({d: ds[d].values[ix] for d, ix in zip(params, index)})
    out[f"{by}_{agg}"] = np.asarray(total.values).ravel()[chosen]
    if smoothed is not None:
        out[f"{by}_smooth_{agg}"] = score[chosen]
    per_symbol = np.asarray(value.transpose("symbol", *params).values).reshape(
        ds.sizes["symbol"], -1)
    for k, symbol in enumerate(ds["symbol"].values):
        out[f"{by}[{symbol}]"] = per_symbol[k, chosen]
    out.index = pd.RangeIndex(1, len(out) + 1, name="rank")
    return out


def pareto_whole(results, metrics, where=None, *, symbol=None, sample=None, across=None,
                 agg="median"):
    """``pareto_front`` of the whole grid in memory."""
    ds = opened(results)
    metrics = list(metrics)
    ds, names = with_computed(ds, need=any(m in COMPUTED for m in metrics))
    ds = select(ds, symbol, sample)
    dims = ("symbol", *param_dims(ds))
    shape = tuple(ds.sizes[d] for d in dims)
    keep = np.ones(int(np.prod(shape)), dtype=bool)
    if where:
        keep &= where_mask(ds, where, dims, shape, names)
    columns = {m: np.asarray(ds[m].transpose(*dims).values, dtype=np.float64).ravel()
               for m in metrics}
    for m in metrics:
        keep &= ~np.isnan(columns[m])
    if across:
        return pareto_across(ds, metrics, columns, keep, dims, shape, agg)
    groups = [i for i, d in enumerate(dims) if d in NON_PARAM_DIMS]
    group_of = np.ravel_multi_index(
        [ix for i, ix in enumerate(np.unravel_index(np.arange(keep.size), shape))
         if i in groups], [shape[i] for i in groups])
    fronts = []
    for g in np.unique(group_of):
        rows = np.flatnonzero(keep & (group_of == g))
        front = rows[robust.pareto({m: c[rows] for m, c in columns.items()}, metrics)]
        first = columns[metrics[0]][front]
        fronts.append(front[np.lexsort((front, first if metrics[0] in LOWER_IS_BETTER
                                        else -first))])
    chosen = np.concatenate(fronts) if fronts else np.empty(0, dtype=np.int64)
    return frame(ds, chosen, dims, shape, names)


def pareto_across(ds, metrics, columns, keep, dims, shape, agg):
    """The front of parameter combos by each metric aggregated over symbols."""
    params = dims[1:]
    n_symbols = shape[0]
    per_combo = int(np.prod(shape[1:]))
    ok = keep.reshape(n_symbols, per_combo).all(axis=0)
    reduce = {"median": np.median, "mean": np.mean, "min": np.min}[agg]
    values = {m: reduce(c.reshape(n_symbols, per_combo), axis=0) for m, c in columns.items()}
    rows = np.flatnonzero(ok)
    front = rows[robust.pareto({m: v[rows] for m, v in values.items()}, metrics)]
    first = values[metrics[0]][front]
    front = front[np.lexsort((front, first if metrics[0] in LOWER_IS_BETTER else -first))]
    index = np.unravel_index(front, shape[1:])
    out = pd.DataFrame({d: ds[d].values[ix] for d, ix in zip(params, index)})
    for m in metrics:
        out[f"{m}_{agg}"] = values[m][front]
    out.index = pd.RangeIndex(1, len(out) + 1, name="rank")
    return out


def pbo_whole(results, where=None, *, max_splits=5000, seed=0):
    """``pbo_table`` of the whole grid in memory."""
    ds = opened(results)
    dims = ("symbol", *param_dims(ds))
    shape = tuple(ds.sizes[d] for d in dims)
    params = [d for d in dims if d not in NON_PARAM_DIMS]
    groups = [d for d in dims if d in NON_PARAM_DIMS]
    keep = np.isfinite(np.asarray(ds["sharpe"].transpose(*dims).values,
                                  dtype=np.float64)).ravel()
    if where:
        keep &= where_mask(ds, where, dims, shape, list(METRICS))
    keep_da = xr.DataArray(keep.reshape(shape), dims=dims)
    out = []
    for labels in itertools.product(*(range(ds.sizes[g]) for g in groups)):
        at = dict(zip(groups, labels))
        sums = ds["seg_sum_r"].isel(at).transpose(*params, "segment")
        sums2 = ds["seg_sum_r2"].isel(at).transpose(*params, "segment")
        n_seg = ds.sizes["segment"]
        mask = np.asarray(keep_da.isel(at).transpose(*params).values).ravel()
        r = np.asarray(sums.values, dtype=np.float64).reshape(-1, n_seg)[mask]
        r2 = np.asarray(sums2.values, dtype=np.float64).reshape(-1, n_seg)[mask]
        seg_n = np.asarray(ds["seg_n"].isel({g: i for g, i in at.items()
                                             if g in ds["seg_n"].dims}).values)
        name = {g: _label(ds[g].values[i]) for g, i in at.items()}
        if len(r) < 2:
            raise SpecError(f"--pbo: {name}: fewer than two combos with a finite sharpe "
                            f"to choose among")
        out.append((name, robust.pbo(r, r2, seg_n, max_splits=max_splits, seed=seed)))
    return out
