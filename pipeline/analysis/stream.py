"""Ranking that reads a results store slab by slab: chunk-aligned regions of a few
blocks each, never the whole grid.

:func:`stream_top` keeps a running top ``k`` (by :func:`~.rank.rank_order`'s keys,
the flat position breaking ties), evaluating ``where`` and hiding pending blocks per
slab; the deflated Sharpe's trials (their count and the variance of their Sharpe
ratios, per symbol, window and sample; in a search store the variance per rung too) are
gathered in a first pass of running sums.
Memory is bounded by the slab size (:data:`SLAB_CELLS`, or one block when larger),
whatever the grid's size.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator, Sequence

import numpy as np
import xarray as xr

from ...engine import METRICS
from ..config.dims import NON_PARAM_DIMS
from ..config.expr import check_names, parse_expr
from ..run.results import COMPUTED, PENDING, check_store
from .robust import expected_max_sharpe, probabilistic_sharpe

#: The grid cells a slab holds at most (whole blocks: one block when a block is larger).
SLAB_CELLS = 1 << 20

#: The coordinate that keeps each non-parameter dim's position in the whole store.
_AT = "_at_"


def open_store(path: str | os.PathLike, *, partial: bool = False) -> xr.Dataset:
    """A results store opened lazily (no dask, nothing read but coordinates).

    Refuses as :func:`~barsweep.pipeline.run.results.open_results` does; pending blocks
    are not hidden here: :func:`stream_top` hides them slab by slab.
    """
    path = os.fspath(path)
    check_store(path, partial)
    ds = xr.open_zarr(path, consolidated=False, chunks=None)
    ds = ds[[*(m for m in METRICS if m in ds), *(v for v in ds.data_vars if v not in METRICS)]]
    return mark_positions(ds)


def mark_positions(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with each non-parameter dim's positions as coordinates (their attribute
    ``size`` the dim's whole length), kept through a selection so that a slab finds its
    blocks' flags."""
    dims = ds[METRICS[0]].dims
    return ds.assign_coords({f"{_AT}{d}": xr.Variable(d, np.arange(ds.sizes[d]),
                                                      attrs={"size": ds.sizes[d]})
                             for d in dims if d in NON_PARAM_DIMS})


def chunk_shape(ds: xr.Dataset, dims: Sequence[str]) -> tuple[int, ...]:
    """The store's chunk shape over ``dims`` (the dask chunks, or the whole dims, of a
    Dataset that no longer knows it)."""
    var = ds[METRICS[0]]
    stored = var.encoding.get("chunks")
    if stored and len(stored) == len(dims):
        return tuple(int(c) for c in stored)
    if var.chunks:
        return tuple(int(c[0]) for c in var.chunks)
    return tuple(ds.sizes[d] for d in dims)


def done_grid(ds: xr.Dataset, dims: Sequence[str]) -> np.ndarray | None:
    """The ``done`` flags of a store opened by :func:`open_store`, shaped as its whole
    block grid (None when no block is pending)."""
    flags = np.asarray(ds["done"].values)
    sizes = [ds[f"{_AT}{d}"].attrs["size"] if f"{_AT}{d}" in ds.coords else ds.sizes[d]
             for d in dims]
    counts = [-(-n // c) for n, c in zip(sizes, chunk_shape(ds, dims))]
    flags = flags[:math.prod(counts)]  # a search's later rungs: cells hold rung 0 on
    if not np.any(flags == PENDING):
        return None
    return flags.reshape(counts)


def slabs(shape: Sequence[int], chunks: Sequence[int],
          budget: int | None = None) -> Iterator[tuple[slice, ...]]:
    """Chunk-aligned regions covering ``shape``: whole chunks, grown along the trailing
    axes first up to ``budget`` cells (default :data:`SLAB_CELLS`; at least one chunk)."""
    budget = SLAB_CELLS if budget is None else budget
    slab = list(chunks)
    cells = math.prod(chunks)
    for axis in reversed(range(len(shape))):
        most = -(-shape[axis] // chunks[axis])
        times = max(1, min(most, budget // max(cells, 1)))
        slab[axis] = chunks[axis] * times
        cells *= times
    counts = [-(-n // s) for n, s in zip(shape, slab)]
    for corner in itertools.product(*(range(c) for c in counts)):
        yield tuple(slice(i * s, min((i + 1) * s, n)) for i, s, n in zip(corner, slab, shape))


class Slab:
    """One region of a selected results Dataset, read into memory.

    Parameters
    ----------
    ds : xarray.Dataset
        The selected Dataset (:func:`mark_positions`'d before the selection).
    region : tuple of slice
        Over ``dims``.
    dims : tuple of str
    names : sequence of str
        The variables to read.
    done : ndarray of int8 or None
        The store's block flags over its whole block grid (None: none pending).
    chunks : tuple of int
        The store's chunk shape over ``dims``.
    """

    def __init__(self, ds, region, dims, names, done, chunks):
        self.region = region
        self.dims = dims
        at = dict(zip(dims, region))
        # loaded before the transpose: a lazily transposed array is read point by point
        self.ds = ds[list(names)].isel(at).load().transpose(*dims, ...)
        self.shape = tuple(s.stop - s.start for s in region)
        self.computed = None if done is None else self._computed(done, chunks)

    def _computed(self, done, chunks) -> np.ndarray:
        """Whether each cell lies in a computed block, shape ``self.shape``."""
        block = np.zeros((), dtype=np.int64)
        for axis, (d, s, c) in enumerate(zip(self.dims, self.region, chunks)):
            key = f"{_AT}{d}"
            pos = (np.asarray(self.ds[key].values) if key in self.ds.coords
                   else np.arange(s.start, s.stop))
            shape = [1] * len(self.dims)
            shape[axis] = -1
            block = block * done.shape[axis] + (pos // c).reshape(shape)
        return done.ravel()[block] == COMPUTED

    def flat(self, full_shape: Sequence[int]) -> np.ndarray:
        """The cells' flat positions in the selected Dataset, shape ``self.shape``."""
        axes = np.ix_(*(np.arange(s.start, s.stop) for s in self.region))
        return np.ravel_multi_index(np.broadcast_arrays(*axes), full_shape)

    def values(self, name: str) -> np.ndarray:
        """Variable ``name`` as float64 (NaN in pending blocks), shape ``self.shape``."""
        out = np.asarray(self.ds[name].values, dtype=np.float64)
        if self.computed is not None:
            out = np.where(self.computed, out, np.nan)
        return out


def _regions(ds: xr.Dataset, dims: tuple[str, ...], chunks: tuple[int, ...], done=None):
    """The slabs over the selected Dataset ``ds``: its non-parameter dims one position
    at a time (they may be a selection), the parameters chunk-aligned; those with no
    computed block (by the flags ``done``) left out."""
    shape = tuple(ds.sizes[d] for d in dims)
    step = tuple(1 if d in NON_PARAM_DIMS else c for d, c in zip(dims, chunks))
    regions = slabs(shape, step)
    if done is not None:
        regions = (r for r in regions if any_computed(ds, r, dims, done, chunks))
    return shape, regions


def any_computed(ds: xr.Dataset, region: tuple[slice, ...], dims: Sequence[str],
                 done: np.ndarray, chunks: Sequence[int]) -> bool:
    """Whether a region of the selected ``ds`` meets a computed block (by the flags
    ``done`` over the store's block grid), read from the flags alone."""
    at = []
    for d, s, c in zip(dims, region, chunks):
        key = f"{_AT}{d}"
        if key in ds.coords:
            at.append(np.unique(np.asarray(ds[key].values[s]) // c))
        else:
            at.append(np.arange(s.start // c, -(-s.stop // c)))
    return bool(np.any(done[np.ix_(*at)] == COMPUTED))


#: A search store's variables behind its combos' ``psr`` and ``dsr``: the rung whose bars
#: each combo's metrics were measured on, and how many bars that was.
SEARCH_INPUTS = ("rung", "bars_run")


def dsr_reads(ds: xr.Dataset) -> set[str]:
    """The stored variables ``psr`` and ``dsr`` are computed from (``n_bars`` is a
    coordinate and rides along)."""
    return {"sharpe", "skew", "kurtosis", *(n for n in SEARCH_INPUTS if n in ds.data_vars)}


def n_rungs(ds: xr.Dataset) -> int:
    """The rungs whose combos are separate trial sets for the variance of the deflated
    Sharpe: a search store's (``search_rungs``), one otherwise."""
    from .kinds import kind_of

    return max(1, kind_of(ds).rungs)


def _rung_of(slab: Slab) -> np.ndarray:
    """Each cell's rung as an index (0 where pending, or in a store without rungs)."""
    if "rung" not in slab.ds:
        return np.zeros(slab.shape, dtype=np.int64)
    rung = slab.values("rung")
    return np.where(np.isfinite(rung), rung, 0.0).astype(np.int64)


def _sharpe_per_bar(slab: Slab, ppy: float) -> np.ndarray:
    """The per-bar Sharpe ratio of a slab's cells, NaN where not finite (as
    :func:`~.robust.dsr_columns` computes it)."""
    sr = slab.values("sharpe") / math.sqrt(ppy)
    return np.where(np.isfinite(sr), sr, np.nan)


def trials_sr0(ds: xr.Dataset, dims: tuple[str, ...], done, chunks) -> np.ndarray:
    """SR*, the deflated Sharpe's benchmark, of each group (symbol, window, sample) and
    rung: N is the count of the group's combos with a finite per-bar Sharpe ratio (in
    a search store, of every combo it evaluated, any rung, its Sharpe ratio defined or
    not: none is excluded there), V the variance (ddof 1) of the finite Sharpe ratios
    of those measured on the same bars, the rung's (a grid store has one rung);
    gathered slab by slab with running moments (Chan et al.'s pairwise update).

    Returns
    -------
    ndarray, float64, shape of ``ds``'s non-parameter dims (the parameters as 1), then
    the rungs (:func:`n_rungs`)
    """
    ppy = float(ds.attrs["periods_per_year"])
    rungs = n_rungs(ds)
    params = tuple(i for i, d in enumerate(dims) if d not in NON_PARAM_DIMS)
    group_shape = tuple(1 if i in params else ds.sizes[d] for i, d in enumerate(dims))
    n = np.zeros((*group_shape, rungs))
    mean = np.zeros((*group_shape, rungs))
    m2 = np.zeros((*group_shape, rungs))
    search = "rung" in ds.data_vars
    evaluated = np.zeros((*group_shape, 1))
    read = ["sharpe", *(["rung", "n_trades"] if search else [])]
    _, regions = _regions(ds, dims, chunks, done)
    for region in regions:
        slab = Slab(ds, region, dims, read, done, chunks)
        sr = _sharpe_per_bar(slab, ppy)
        rung = _rung_of(slab)
        at = tuple(slice(0, 1) if i in params else s for i, s in enumerate(region))
        for r in range(rungs):
            _add_moments(np.where(rung == r, sr, np.nan), params, n[at + (r,)],
                         mean[at + (r,)], m2[at + (r,)])
        if search:
            evaluated[at + (0,)] += np.sum(~np.isnan(slab.values("n_trades")), axis=params,
                                           keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.where(n > 1, m2 / (n - 1), np.nan)
    return expected_max_sharpe(evaluated if search else n.sum(axis=-1, keepdims=True), var)


def _add_moments(sr: np.ndarray, params: tuple[int, ...], n: np.ndarray, mean: np.ndarray,
                 m2: np.ndarray) -> None:
    """Merge the count, mean and sum of squared deviations of the finite values of
    ``sr`` over the axes ``params`` into ``n``, ``mean``, ``m2`` (written, shaped as
    ``sr`` with those axes 1)."""
    n_b = np.sum(~np.isnan(sr), axis=params, keepdims=True).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_b = np.where(n_b > 0, np.nansum(sr, axis=params, keepdims=True) / n_b, 0.0)
        m2_b = np.nansum((sr - mean_b) ** 2, axis=params, keepdims=True)
        total = n + n_b
        delta = mean_b - mean
        share = np.where(total > 0, n_b / total, 0.0)
        m2 += m2_b + delta * delta * n * share
        mean += delta * share
        n[...] = total


def cell_sr0(sr0: np.ndarray, at: tuple, rung: np.ndarray) -> np.ndarray:
    """The benchmark of each cell: ``sr0`` (:func:`trials_sr0`) at the group positions
    ``at`` (slices or index arrays over the dims) and the cell's ``rung`` (an index
    array broadcastable with them)."""
    picked = sr0[at]
    shape = np.broadcast_shapes(picked.shape[:-1], np.shape(rung))
    full = np.broadcast_to(picked, (*shape, picked.shape[-1]))
    index = np.broadcast_to(np.asarray(rung, dtype=np.int64), shape)[..., None]
    return np.take_along_axis(full, index, axis=-1)[..., 0]


def _with_sharpe_columns(slab: Slab, ppy: float, sr0: np.ndarray | None) -> None:
    """Add ``psr`` and ``dsr`` to the slab (as :func:`~.robust.dsr_columns`); ``dsr``
    NaN without the benchmarks ``sr0``."""
    sr = _sharpe_per_bar(slab, ppy)
    if "bars_run" in slab.ds:  # a search: the bars of the rung each combo last ran
        n_obs = slab.values("bars_run")
    else:
        n_obs = np.asarray(slab.ds["n_bars"].broadcast_like(slab.ds["sharpe"])
                           .transpose(*slab.dims).values, dtype=np.float64)
    skew, kurt = (np.asarray(slab.ds[n].values, dtype=np.float64)
                  for n in ("skew", "kurtosis"))
    at = tuple(slice(0, 1) if d not in NON_PARAM_DIMS else s
               for d, s in zip(slab.dims, slab.region))
    bench = np.nan if sr0 is None else cell_sr0(sr0, at, _rung_of(slab))
    psr = probabilistic_sharpe(sr, n_obs, skew, kurt)
    dsr = probabilistic_sharpe(sr, n_obs, skew, kurt, bench)
    slab.ds = slab.ds.assign(psr=(slab.dims, psr), dsr=(slab.dims, dsr))


class TopK:
    """The best ``k`` candidates seen so far, by :func:`~.rank.rank_order`'s keys (the
    flat position breaking ties)."""

    def __init__(self, k: int, ascending: bool, idle_wins: bool):
        self.k, self.ascending, self.idle_wins = k, ascending, idle_wins
        self.score = np.empty(0)
        self.ruined = np.empty(0, dtype=bool)
        self.traded = np.empty(0, dtype=bool)
        self.position = np.empty(0, dtype=np.int64)
        self.extra: dict[str, np.ndarray] = {}

    def add(self, score, ruined, traded, position, **extra) -> None:
        """Merge candidates (1-D arrays of one length) into the best ``k``; ``extra``
        arrays ride along with them (the same names at every call)."""
        score = np.concatenate([self.score, score])
        ruined = np.concatenate([self.ruined, ruined])
        traded = np.concatenate([self.traded, traded])
        position = np.concatenate([self.position, position])
        signed = score if self.ascending else -score
        idle = ~traded if self.idle_wins else np.zeros(len(score), dtype=bool)
        order = np.lexsort((position, signed, np.isinf(score), idle, ruined))[:self.k]
        self.score, self.ruined = score[order], ruined[order]
        self.traded, self.position = traded[order], position[order]
        self.extra = {n: np.concatenate([self.extra.get(n, np.empty(0)), v])[order]
                      for n, v in extra.items()}


def stream_top(ds: xr.Dataset, by: str, top: int, where: str | None, ascending: bool,
               idle_wins: bool, dims: tuple[str, ...], names: Sequence[str],
               done=None) -> tuple[np.ndarray, np.ndarray | None]:
    """The flat positions (over ``dims`` of the selected ``ds``) of the ``top`` combos
    by ``by``, best first, as :func:`~.rank.rank` orders them, read slab by slab.

    Parameters
    ----------
    ds : xarray.Dataset
        A results Dataset after :func:`mark_positions` and the selection.
    names : sequence of str
        The names ``where`` may use (metrics, and ``psr``/``dsr`` when computed).
    done : ndarray or None
        The block flags (:func:`done_grid`) to hide pending blocks with.

    Returns
    -------
    chosen : ndarray of int64
    sr0 : ndarray or None
        Each group's deflated Sharpe benchmark (:func:`trials_sr0`) when ``names``
        holds ``dsr``.
    """
    from ..config.expr import parse_expr

    chunks = chunk_shape(ds, dims)
    computed = "dsr" in names
    sr0 = trials_sr0(ds, dims, done, chunks) if computed else None
    ppy = float(ds.attrs.get("periods_per_year", 0.0) or 0.0)
    used = set(parse_expr(where, strings=True).names) if where else set()
    used.add(by)
    read = {n for n in used if n in ds.data_vars}
    if used & {"psr", "dsr"}:
        read |= dsr_reads(ds)
    flags = [n for n in ("ruined", "n_trades") if n in ds.data_vars]
    read = [*read, *(f for f in flags if f not in read)]
    best = TopK(top, ascending, idle_wins)
    shape, regions = _regions(ds, dims, chunks, done)
    for region in regions:
        slab = Slab(ds, region, dims, read, done, chunks)
        if used & {"psr", "dsr"}:
            _with_sharpe_columns(slab, ppy, sr0)
        score = (slab.values(by) if by in ds.data_vars
                 else np.asarray(slab.ds[by].values, dtype=np.float64)).ravel()
        keep = ~np.isnan(score)
        if where:
            keep &= where_mask(slab.ds, where, dims, slab.shape, names)
        pick = np.flatnonzero(keep)
        if not len(pick):
            continue

        best.add(score[pick], _flag(slab, "ruined", pick) == 1.0,
                 _flag(slab, "n_trades", pick) > 0.0, slab.flat(shape).ravel()[pick])
    return best.position, sr0


def _flag(slab: Slab, name: str, pick: np.ndarray) -> np.ndarray:
    """Metric ``name`` of the slab's cells ``pick`` (zeros for a store without it)."""
    if name not in slab.ds:
        return np.zeros(len(pick))
    return np.asarray(slab.ds[name].values, dtype=np.float64).ravel()[pick]


def frame_columns(ds: xr.Dataset, chosen: np.ndarray, dims: tuple[str, ...],
                  names: Sequence[str], sr0: np.ndarray | None) -> dict[str, np.ndarray]:
    """Metrics ``names`` at the flat positions ``chosen`` (``psr`` and ``dsr`` computed
    there as :func:`~.robust.dsr_columns` computes them)."""
    shape = tuple(ds.sizes[d] for d in dims)
    index = np.unravel_index(chosen, shape)
    points = {d: xr.DataArray(ix, dims="rank") for d, ix in zip(dims, index)}
    stored = [n for n in names if n in ds.data_vars]
    inputs = sorted(dsr_reads(ds) - set(stored)) if sr0 is not None else []
    picked = ds[stored + inputs].isel(points).compute()
    out = {n: np.asarray(picked[n].values) for n in stored}
    if sr0 is not None:
        ppy = float(ds.attrs["periods_per_year"])
        sr = np.asarray(picked["sharpe"].values, dtype=np.float64) / math.sqrt(ppy)
        sr = np.where(np.isfinite(sr), sr, np.nan)
        n_obs = np.asarray(picked["bars_run" if "bars_run" in picked else "n_bars"].values,
                           dtype=np.float64)
        skew, kurt = (np.asarray(picked[n].values, dtype=np.float64)
                      for n in ("skew", "kurtosis"))
        group = tuple(np.zeros_like(ix) if d not in NON_PARAM_DIMS else ix
                      for d, ix in zip(dims, index))
        rung = (np.nan_to_num(np.asarray(picked["rung"].values, dtype=np.float64))
                .astype(np.int64) if "rung" in picked else np.zeros(len(chosen), np.int64))
        out["psr"] = probabilistic_sharpe(sr, n_obs, skew, kurt)
        out["dsr"] = probabilistic_sharpe(sr, n_obs, skew, kurt, cell_sr0(sr0, group, rung))
    return out


def count_computed(ds: xr.Dataset) -> int:
    """How many combos of a store opened by :func:`open_store` have ``n_trades`` in a
    computed block, read slab by slab."""
    dims = ds[METRICS[0]].dims
    chunks, done = chunk_shape(ds, dims), done_grid(ds, dims)
    _, regions = _regions(ds, dims, chunks, done)
    return sum(int(np.count_nonzero(~np.isnan(Slab(ds, r, dims, ["n_trades"], done,
                                                   chunks).values("n_trades"))))
               for r in regions)


def where_mask(ds: xr.Dataset, where: str, dims: tuple[str, ...],
                shape: tuple[int, ...], names: Sequence[str] = METRICS) -> np.ndarray:
    """``where`` over metrics ``names`` and the dims (``symbol``, ``sample`` and other
    text compared with strings), flat over ``dims``."""
    expr = parse_expr(where, strings=True)
    text = [d for d in dims if ds[d].dtype.kind in "OUST"]
    check_names(expr, set(names) | set(dims), what="--where", text=text)
    env = {}
    for name in expr.names:
        if name in names:
            env[name] = np.asarray(ds[name].transpose(*dims).values,
                                   dtype=np.float64).ravel()
        else:
            axis = dims.index(name)
            view = ds[name].values.reshape([-1 if i == axis else 1 for i in range(len(dims))])
            env[name] = np.broadcast_to(view, shape).ravel()
    return np.asarray(expr.evaluate(env), dtype=bool)
