"""Pareto fronts and the probability of backtest overfitting of a results store, read
slab by slab (the slabs of :func:`.stream_more.group_regions`).

A front is kept per group (symbol, window, sample): each slab's candidates are merged
with the group's running front and the union re-fronted (a combo dominated in the whole
grid is dominated by a combo of its front, so the running front of the slabs seen is
the front of their union). The CSCV of :func:`~.robust.pbo` runs its two passes over
the slabs: the best in-sample Sharpe ratio per half (ties to the lowest position), then
the combos below each split's winner out of sample; its trials x segments matrix is
never whole.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import xarray as xr

from ...engine import LOWER_IS_BETTER, METRICS
from ...errors import DataError, SpecError
from ..config.dims import NON_PARAM_DIMS
from ..config.expr import parse_expr
from . import robust, stream
from .robust import cscv
from .stream import Slab, where_mask
from .stream_more import add_computed, group_regions, kept_values, reads


def _flat(region: tuple[slice, ...], shape: Sequence[int]) -> np.ndarray:
    """The flat positions (over ``shape``) of a region's cells, in its C order."""
    axes = np.ix_(*(np.arange(s.start, s.stop) for s in region))
    return np.ravel_multi_index(np.broadcast_arrays(*axes), shape).ravel()


class Fronts:
    """The running Pareto front of each group: positions and metric values."""

    def __init__(self, metrics: Sequence[str]):
        self.metrics = list(metrics)
        self.groups: dict[tuple, tuple[np.ndarray, dict[str, np.ndarray]]] = {}

    def add(self, group: tuple, position: np.ndarray, values: dict[str, np.ndarray]):
        """Merge candidates (positions and each metric's values) into ``group``'s front."""
        old_pos, old = self.groups.get(group, (np.empty(0, dtype=np.int64), {}))
        pos = np.concatenate([old_pos, position])
        vals = {m: np.concatenate([old.get(m, np.empty(0)), values[m]])
                for m in self.metrics}
        front = robust.pareto(vals, self.metrics)
        self.groups[group] = pos[front], {m: v[front] for m, v in vals.items()}

    def ordered(self) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """Each group's front (groups in order), best first by the first metric, ties
        by position."""
        out = []
        first = self.metrics[0]
        for group in sorted(self.groups):
            pos, vals = self.groups[group]
            key = vals[first] if first in LOWER_IS_BETTER else -vals[first]
            order = np.lexsort((pos, key))
            out.append((pos[order], {m: v[order] for m, v in vals.items()}))
        return out


def stream_pareto(ds: xr.Dataset, metrics: Sequence[str], where: str | None,
                  dims: tuple[str, ...], names: Sequence[str], done, across: bool,
                  agg: str) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray | None]:
    """The Pareto fronts of :func:`~.rank.pareto_front`, read slab by slab.

    Returns
    -------
    chosen : ndarray of int64
        Flat positions over ``dims`` (over ``dims[1:]`` across symbols), front after
        front, each best first.
    values : dict of str to ndarray
        Each metric at ``chosen`` (aggregated over the symbols across them).
    sr0 : ndarray or None
        The deflated Sharpe's benchmarks when ``names`` holds ``dsr``.
    """
    chunks = stream.chunk_shape(ds, dims)
    sr0 = stream.trials_sr0(ds, dims, done, chunks) if "dsr" in names else None
    shape = tuple(ds.sizes[d] for d in dims)
    read = reads(ds, metrics, where)
    used = set(metrics) | (set(parse_expr(where, strings=True).names) if where else set())
    reduce = {"median": np.median, "mean": np.mean, "min": np.min}[agg]
    fronts = Fronts(metrics)
    for group, region in group_regions(ds, dims, chunks, done,
                                       ("symbol",) if across else ()):
        slab = Slab(ds, region, dims, read, done, chunks)
        add_computed(slab, used, sr0)
        keep = np.ones(slab.shape, dtype=bool)
        if where:
            keep &= where_mask(slab.ds, where, dims, slab.shape, names).reshape(slab.shape)
        columns = {m: kept_values(slab, m, None, names, sr0) for m in metrics}
        for column in columns.values():
            keep &= ~np.isnan(column)
        if across:
            n_symbols = slab.shape[0]
            keep = keep.reshape(n_symbols, -1).all(axis=0)
            columns = {m: reduce(c.reshape(n_symbols, -1), axis=0) for m, c in columns.items()}
            position = _flat(region[1:], shape[1:])
        else:
            columns = {m: c.ravel() for m, c in columns.items()}
            position = _flat(region, shape)
            keep = keep.ravel()
        rows = np.flatnonzero(keep)
        if len(rows):
            fronts.add(() if across else group, position[rows],   # across: one front
                       {m: c[rows] for m, c in columns.items()})
    parts = fronts.ordered()
    chosen = (np.concatenate([p for p, _ in parts]) if parts
              else np.empty(0, dtype=np.int64))
    values = {m: np.concatenate([v[m] for _, v in parts]) if parts else np.empty(0)
              for m in metrics}
    return chosen, values, sr0


def stream_pbo(ds: xr.Dataset, where: str | None, dims: tuple[str, ...], done,
               max_splits: int, seed: int) -> list[tuple[tuple[int, ...], robust.PBOResult]]:
    """The PBO of each group of the selected ``ds`` (see :func:`~.rank.pbo_table`), its
    CSCV's two passes read slab by slab: per group, its positions and result."""
    chunks = stream.chunk_shape(ds, dims)
    n_seg = ds.sizes["segment"]
    budget = max(1, stream.SLAB_CELLS // max(n_seg, 1))
    groups = [i for i, d in enumerate(dims) if d in NON_PARAM_DIMS]
    read = [*reads(ds, ["sharpe"], where), "seg_sum_r", "seg_sum_r2"]
    out = []
    for group in np.ndindex(*(ds.sizes[dims[i]] for i in groups)):
        at = {dims[i]: g for i, g in zip(groups, group)}
        seg_n = np.asarray(ds["seg_n"].isel({d: g for d, g in at.items()
                                             if d in ds["seg_n"].dims}).values,
                           dtype=np.float64)
        if n_seg < 2 or n_seg % 2:
            raise DataError(f"pbo: the number of segments must be even and at least 2, "
                            f"got {n_seg}")
        plan = cscv.cscv_plan(seg_n, max_splits, seed)

        one = ds.isel({d: [g] for d, g in at.items()})
        trials = functools.partial(_group_trials, ds, one, group, groups, dims, read, where,
                                   done, chunks, budget)
        out.append((group, _pbo_of(plan, trials, at, ds)))
    return out


def _group_trials(ds, one, group, groups, dims, read, where, done, chunks, budget):
    """The trials of each slab of one group (``one``: ``ds`` at the group)."""
    for _, region in group_regions(one, dims, chunks, None, budget=budget):
        yield _trial_rows(ds, region, group, groups, dims, read, where, done, chunks)


def _trial_rows(ds, region, group, groups, dims, read, where, done, chunks):
    """A slab's trials (finite ``sharpe``, ``where`` holding): their flat positions over
    the parameters, and the segment sums of those whose sums are all finite with their
    positions."""
    whole = tuple(slice(g, g + 1) if i in groups else s
                  for i, (s, g) in enumerate(zip(region, _spread(group, groups, len(dims)))))
    if done is not None and not stream.any_computed(ds, whole, dims, done, chunks):
        return np.empty(0, dtype=np.int64), np.empty((0, ds.sizes["segment"])), \
            np.empty((0, ds.sizes["segment"])), np.empty(0, dtype=np.int64)
    slab = Slab(ds, whole, dims, read, done, chunks)
    keep = np.isfinite(slab.values("sharpe"))
    if where:
        keep &= where_mask(slab.ds, where, dims, slab.shape, list(METRICS)).reshape(slab.shape)
    params = [i for i in range(len(dims)) if i not in groups]
    p_shape = [ds.sizes[dims[i]] for i in params]
    position = _flat(tuple(whole[i] for i in params), p_shape)
    keep = keep.ravel()
    r, r2 = (np.asarray(slab.ds[n].values, dtype=np.float64).reshape(len(keep), -1)[keep]
             for n in ("seg_sum_r", "seg_sum_r2"))
    trial = position[keep]
    finite = np.isfinite(r).all(axis=1) & np.isfinite(r2).all(axis=1)
    return trial, r[finite], r2[finite], trial[finite]


def _spread(group, groups, n):
    """``group``'s positions at the axes ``groups`` of ``n`` (0 elsewhere)."""
    out = [0] * n
    for i, g in zip(groups, group):
        out[i] = g
    return out


def _pbo_of(plan, trials, at, ds) -> robust.PBOResult:
    """One group's PBO from its slabs' trials (``trials()`` yields them anew)."""
    n_halves = 2 * len(plan.canon)
    best = np.full(n_halves, -np.inf)
    best_at = np.full(n_halves, np.iinfo(np.int64).max)
    best_r = np.zeros((n_halves, ds.sizes["segment"]))
    best_r2 = np.zeros_like(best_r)
    n_trials = n_combos = 0
    for trial, r, r2, position in trials():
        n_trials += len(trial)
        n_combos += len(r)
        if not len(r):
            continue
        value, arg = cscv.half_best(plan, r, r2)
        pos = position[np.maximum(arg, 0)]
        better = (arg >= 0) & ((value > best) | ((value == best) & (pos < best_at)))
        best, best_at = np.where(better, value, best), np.where(better, pos, best_at)
        best_r[better], best_r2[better] = r[arg[better]], r2[arg[better]]
    if n_trials < 2:
        name = {d: _label(ds[d].values[g]) for d, g in at.items()}
        raise SpecError(f"--pbo: {name}: fewer than two combos with a finite sharpe "
                        f"to choose among")
    if n_combos < 2:
        raise DataError(f"pbo: needs at least two combos with finite segment sums, got "
                        f"{n_combos}")
    won = best_at[plan.is_half]
    unique, which = np.unique(won, return_inverse=True)
    sharpe_oos = cscv.half_sharpes(plan, best_r, best_r2, plan.is_half)  # winners' rows
    threshold = np.full(n_halves, np.nan)
    threshold[plan.oos_half] = sharpe_oos
    below = np.zeros(n_halves, dtype=np.int64)
    before = np.zeros(len(unique), dtype=np.int64)
    for trial, r, r2, _ in trials():
        before += np.searchsorted(np.sort(trial), unique)
        if len(r):
            below += cscv.count_below(plan, r, r2, threshold)
    return cscv.cscv_result(plan, before[which], best[plan.is_half], sharpe_oos,
                            below[plan.oos_half], n_combos)


def _label(value):
    """A coordinate value as a plain Python scalar."""
    return value.item() if isinstance(value, np.generic) else value

