"""Ranking by a smoothed metric (``smooth``) or by a metric aggregated across symbols
(``across="symbol"``), read slab by slab.

A smoothed slab is read with a halo of ``radius`` cells on each parameter axis (cut at
the grid's edges), smoothed by :func:`~.robust.smooth` itself, and its centre kept: a
centre cell's box lies inside the haloed slab, and each box sum is computed over the
same values in the same order as over the whole grid. Across symbols, a slab holds every
symbol of its parameter cells. Memory is bounded by the slab size, whatever the grid's
size.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

import numpy as np
import xarray as xr

from ..config.dims import NON_PARAM_DIMS
from ..config.expr import parse_expr
from . import robust, stream
from .stream import Slab, TopK, where_mask


def group_regions(ds: xr.Dataset, dims: tuple[str, ...], chunks: tuple[int, ...],
                  done=None, whole: Sequence[str] = (), budget: int | None = None,
                  ) -> Iterator[tuple[tuple[int, ...], tuple[slice, ...]]]:
    """The slabs over the selected ``ds``, one group (the non-parameter dims' positions)
    at a time, each with its group: the dims in ``whole`` whole (their group position
    0), the other non-parameter dims one position, the parameters chunk-aligned slabs
    of at most ``budget`` cells in all (default :data:`.stream.SLAB_CELLS`). Slabs
    without a computed block (by the flags ``done``) are left out."""
    budget = stream.SLAB_CELLS if budget is None else budget
    groups = [i for i, d in enumerate(dims) if d in NON_PARAM_DIMS]
    params = [i for i, d in enumerate(dims) if d not in NON_PARAM_DIMS]
    width = math.prod(ds.sizes[dims[i]] for i in groups if dims[i] in whole)
    p_shape = [ds.sizes[dims[i]] for i in params]
    ranges = [range(1) if dims[i] in whole else range(ds.sizes[dims[i]]) for i in groups]
    for group in itertools.product(*ranges):
        for inner in stream.slabs(p_shape, [chunks[i] for i in params],
                                  max(1, budget // max(width, 1))):
            region = [None] * len(dims)
            for i, g in zip(groups, group):
                region[i] = (slice(0, ds.sizes[dims[i]]) if dims[i] in whole
                             else slice(g, g + 1))
            for i, s in zip(params, inner):
                region[i] = s
            region = tuple(region)
            if done is None or stream.any_computed(ds, region, dims, done, chunks):
                yield group, region


def haloed(region: tuple[slice, ...], dims: Sequence[str], shape: Sequence[int],
           radius: int) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
    """``region`` grown by ``radius`` cells on each parameter axis (cut at the grid's
    edges), and where the region lies inside it."""
    grown, centre = [], []
    for d, s, n in zip(dims, region, shape):
        lo, hi = (s.start, s.stop) if d in NON_PARAM_DIMS else (max(0, s.start - radius),
                                                                  min(n, s.stop + radius))
        grown.append(slice(lo, hi))
        centre.append(slice(s.start - lo, s.stop - lo))
    return tuple(grown), tuple(centre)


def reads(ds: xr.Dataset, names: Sequence[str], where: str | None) -> list[str]:
    """The stored variables a slab needs for ``names`` and ``where`` (and the inputs of
    ``psr``/``dsr`` when used), the flags ``ruined`` and ``n_trades`` last."""
    used = set(names) | (set(parse_expr(where, strings=True).names) if where else set())
    read = {n for n in used if n in ds.data_vars}
    if used & {"psr", "dsr"}:
        read |= stream.dsr_reads(ds) | {"n_bars"}
    flags = [n for n in ("ruined", "n_trades") if n in ds.data_vars]
    return [*sorted(read - set(flags)), *flags]


def add_computed(slab: Slab, used: set, sr0: np.ndarray | None) -> None:
    """Add ``psr`` and ``dsr`` to the slab when ``used`` names either (the deflated
    Sharpe's benchmarks ``sr0``)."""
    if used & {"psr", "dsr"} and "psr" not in slab.ds:
        ppy = float(slab.ds.attrs.get("periods_per_year", 0.0) or 0.0)
        stream._with_sharpe_columns(slab, ppy, sr0)


def kept_values(slab: Slab, by: str, where: str | None, names: Sequence[str],
                sr0: np.ndarray | None) -> np.ndarray:
    """``by`` over the slab as float64, NaN where pending, undefined or outside
    ``where`` (``psr``/``dsr`` computed with the benchmarks ``sr0``)."""
    used = {by} | (set(parse_expr(where, strings=True).names) if where else set())
    add_computed(slab, used, sr0)
    value = (slab.values(by) if by not in ("psr", "dsr")
             else np.asarray(slab.ds[by].values, dtype=np.float64))
    if where:
        keep = where_mask(slab.ds, where, slab.dims, slab.shape, names).reshape(slab.shape)
        value = np.where(keep, value, np.nan)
    return value


def slab_flags(slab: Slab, name: str, centre, across: bool) -> np.ndarray:
    """Metric ``name`` over the slab's centre (zeros without it); across symbols, its
    max (``ruined``) or sum (``n_trades``) over the symbols."""
    if name not in slab.ds:
        shape = [s.stop - s.start for s in centre]
        return np.zeros(shape[1:] if across else shape)
    out = np.asarray(slab.ds[name].values, dtype=np.float64)[centre]
    if not across:
        return out
    # NaN on every symbol (a combo the constraints or --where leave out) stays NaN:
    # fmax skips NaN as nanmax does, without its "All-NaN slice" warning
    return np.fmax.reduce(out, axis=0) if name == "ruined" else np.nansum(out, axis=0)


def stream_smooth_top(ds, by, top, where, ascending, idle_wins, dims, names, done,
                      smooth: int | None, across: bool, agg: str) -> tuple[TopK, object]:
    """The best ``top`` by ``by`` smoothed over radius ``smooth`` and/or aggregated over
    the symbols with ``agg`` (see :func:`~.rank.rank`), read slab by slab.

    Returns
    -------
    best : TopK
        Positions flat over ``dims`` (over ``dims[1:]`` across symbols); across
        symbols its ``extra`` holds ``total`` (the unsmoothed aggregate) and each
        symbol's ``by`` (``s0``, ``s1``, ...).
    sr0 : ndarray or None
        Each group's deflated Sharpe benchmark when ``names`` holds ``dsr``.
    """
    chunks = stream.chunk_shape(ds, dims)
    sr0 = stream.trials_sr0(ds, dims, done, chunks) if "dsr" in names else None
    shape = tuple(ds.sizes[d] for d in dims)
    read = reads(ds, [by], where)
    best = TopK(top, ascending, idle_wins)
    for _, region in group_regions(ds, dims, chunks, done, ("symbol",) if across else ()):
        grown, centre = haloed(region, dims, shape, smooth or 0)
        slab = Slab(ds, grown, dims, read, done, chunks)
        value = xr.DataArray(kept_values(slab, by, where, names, sr0), dims=dims)
        score = robust.smooth(value, smooth) if smooth else value
        extra = {}
        if across:
            total = getattr(value, agg)("symbol", skipna=False)
            score = total if not smooth else getattr(score, agg)("symbol", skipna=False)
            extra = {"total": np.asarray(total.values)[centre[1:]]}
            extra |= {f"s{k}": v for k, v in enumerate(np.asarray(value.values)[centre])}
        score = np.asarray(score.values)[centre[1:] if across else centre]
        pick = np.flatnonzero(~np.isnan(score))
        if not len(pick):
            continue
        at = tuple(slice(g.start + c.start, g.start + c.stop) for g, c in zip(grown, centre))
        axes = np.ix_(*(np.arange(s.start, s.stop) for s in at[1 if across else 0:]))
        flat = np.ravel_multi_index(np.broadcast_arrays(*axes),
                                    shape[1:] if across else shape)
        best.add(score.ravel()[pick], slab_flags(slab, "ruined", centre, across).ravel()[pick]
                 == 1.0, slab_flags(slab, "n_trades", centre, across).ravel()[pick] > 0.0,
                 flat.ravel()[pick], **{n: v.ravel()[pick] for n, v in extra.items()})
    return best, sr0
