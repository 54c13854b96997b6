"""A metric reduced to the cells of one or two parameters, read slab by slab
(:mod:`.stream`): the heatmap's grid, and how much the metric moves along each
parameter (the report's choice of heatmaps).

``max`` and ``mean`` are running reductions over chunk-aligned slabs of at most
:data:`~.stream.SLAB_CELLS` cells (one block when larger); ``median`` needs every value
of a cell at once, so its slabs hold the other dims whole for a band of cells: at most
:data:`~.stream.SLAB_CELLS` cells, or one band of a block's cells along the kept dims
times the other dims' size when that is larger. Beside a slab, memory holds the output
(the kept dims' cells). No numpy warning escapes: a cell every value of which is NaN
(excluded, pending, undefined) is NaN.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import xarray as xr

from ..config.dims import NON_PARAM_DIMS
from . import stream


def marked(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with its positions marked (:func:`~.stream.mark_positions`) unless they
    already are (a selection of a marked Dataset keeps the whole store's positions)."""
    if any(str(c).startswith(stream._AT) for c in ds.coords):
        return ds
    return stream.mark_positions(ds)


def blocks_of(ds: xr.Dataset, name: str) -> tuple[tuple[str, ...], tuple[int, ...], object]:
    """The dims of variable ``name``, the store's chunk shape over them and its block
    flags (:func:`~.stream.done_grid`; None when nothing is pending or the Dataset keeps
    no flags)."""
    dims = tuple(ds[name].dims)
    chunks = stream.chunk_shape(ds, dims)
    done = stream.done_grid(ds, dims) if "done" in ds.variables else None
    return dims, chunks, done


def reduced_grid(ds: xr.Dataset, name: str, kept: Sequence[str], reduce: str) -> np.ndarray:
    """Variable ``name`` of ``ds`` over the dims ``kept`` (in that order), every other
    dim reduced by ``reduce`` (``max``, ``mean`` or ``median``, NaN-skipping, as
    ``np.nanmax``, ``np.nanmean``, ``np.nanmedian``), read slab by slab.

    Parameters
    ----------
    ds : xarray.Dataset
        A results Dataset marked by :func:`~.stream.mark_positions` before any selection
        (a selection keeps its dims, e.g. ``isel(symbol=[0])``); pending blocks are read
        as NaN.
    kept : sequence of str
        One or two dims of ``name``.

    Returns
    -------
    ndarray, float64, shape ``[ds.sizes[d] for d in kept]``

    Examples
    --------
    >>> values = np.arange(6.0).reshape(1, 2, 3)
    >>> ds = stream.mark_positions(xr.Dataset({"total_return": (("symbol", "a", "b"), values)}))
    >>> reduced_grid(ds, "total_return", ["a"], "max")
    array([2., 5.])
    """
    dims, chunks, done = blocks_of(ds, name)
    axes = [dims.index(d) for d in kept]
    others = tuple(i for i in range(len(dims)) if i not in axes)
    shape = tuple(ds.sizes[d] for d in dims)
    whole = reduce == "median"
    step = tuple(shape[i] if whole and i in others else 1 if d in NON_PARAM_DIMS else c
                 for i, (d, c) in enumerate(zip(dims, chunks)))
    out = Reduction(reduce, [shape[i] for i in axes])
    for region in stream.slabs(shape, step):
        values = stream.Slab(ds, region, dims, [name], done, chunks).values(name)
        values = np.transpose(values, (*axes, *others))  # kept dims first, in their order
        out.add(tuple(region[i] for i in axes), values.reshape(*values.shape[:len(axes)], -1))
    return out.result()


class Reduction:
    """A NaN-skipping reduction of values arriving in parts, over a grid of cells.

    Parameters
    ----------
    reduce : {"max", "mean", "median"}
        ``median`` takes each cell's values all at once (one part per cell).
    shape : sequence of int
        The cells.
    """

    def __init__(self, reduce: str, shape: Sequence[int]):
        self.reduce = reduce
        self.value = np.full(tuple(shape), np.nan)
        self.count = np.zeros(tuple(shape)) if reduce == "mean" else None
        if reduce == "mean":
            self.value[...] = 0.0

    def add(self, at: tuple[slice, ...], part: np.ndarray) -> None:
        """Fold ``part`` (float64, the cells ``at`` then one axis of their values) in."""
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN cells stay NaN
            if self.reduce == "max":
                self.value[at] = np.fmax(self.value[at], np.fmax.reduce(part, axis=-1))
            elif self.reduce == "mean":
                self.value[at] += np.nansum(part, axis=-1)
                self.count[at] += np.count_nonzero(~np.isnan(part), axis=-1)
            else:
                self.value[at] = np.nanmedian(part, axis=-1)

    def result(self) -> np.ndarray:
        """The reduced cells (NaN where no value was defined)."""
        if self.reduce != "mean":
            return self.value
        with np.errstate(all="ignore"):
            return np.where(self.count > 0, self.value / np.maximum(self.count, 1), np.nan)


def spreads(ds: xr.Dataset, name: str, params: Sequence[str]) -> dict[str, float]:
    """How much variable ``name`` moves along each of ``params``: the spread (max - min)
    of its best finite value at each of the parameter's values (0 when none is
    finite), read slab by slab in one pass.

    ``ds`` as for :func:`reduced_grid`.
    """
    dims, chunks, done = blocks_of(ds, name)
    shape = tuple(ds.sizes[d] for d in dims)
    best = {p: np.full(ds.sizes[p], np.nan) for p in params}
    step = tuple(1 if d in NON_PARAM_DIMS else c for d, c in zip(dims, chunks))
    for region in stream.slabs(shape, step):
        values = stream.Slab(ds, region, dims, [name], done, chunks).values(name)
        values = np.where(np.isfinite(values), values, np.nan)  # infinities hide spreads
        for p in params:
            axis = dims.index(p)
            rest = tuple(i for i in range(len(dims)) if i != axis)
            at = region[axis]
            best[p][at] = np.fmax(best[p][at], np.fmax.reduce(values, axis=rest))
    out = {}
    for p, b in best.items():
        finite = b[~np.isnan(b)]
        value = float(finite.max() - finite.min()) if len(finite) else math.nan
        out[p] = value if np.isfinite(value) else 0.0
    return out
