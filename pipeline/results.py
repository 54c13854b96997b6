"""The results store: one Zarr v3 group per run (DESIGN.md "Results store").

Dims ``symbol`` and one per grid parameter; one float64 variable per metric,
chunked exactly as the blocks, so each Dask task writes its own chunks; a
``done`` flag per block (0 pending, 1 computed, 2 excluded by the constraints).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import zarr

from barsweep.engine import METRICS
from barsweep.errors import BarsweepError

PENDING, COMPUTED, EXCLUDED = 0, 1, 2


def create_store(
    path: str,
    symbols: Sequence[str],
    axes: Sequence[tuple[str, np.ndarray]],
    chunks: Sequence[int],
    n_blocks: int,
    attrs: Mapping[str, str],
) -> None:
    """Write the store's metadata and coordinates; no metric chunk is written.

    Parameters
    ----------
    path : str
        Directory of the Zarr group (replaced if it exists).
    symbols : sequence of str
    axes : sequence of (name, values)
        Parameter dims in order; values int64 or float64.
    chunks : sequence of int
        Chunk length of each parameter dim (the block shape).
    n_blocks : int
        Number of blocks over all symbols (length of ``done``).
    attrs : mapping of str to str
        Group attributes (the spec as YAML, version, fingerprint as JSON...).
    """
    import dask.array as da
    import xarray as xr

    dims = ("symbol", *[name for name, _ in axes])
    shape = (len(symbols), *[len(values) for _, values in axes])
    block = (1, *chunks)
    coords = {"symbol": np.asarray(symbols, dtype=object)}
    coords.update({name: values for name, values in axes})
    data_vars = {
        name: (dims, da.full(shape, np.nan, chunks=block, dtype=np.float64)) for name in METRICS
    }
    data_vars["done"] = (("block",), da.zeros(n_blocks, chunks=1, dtype=np.int8))
    ds = xr.Dataset(data_vars, coords=coords, attrs=dict(attrs))
    ds["done"].attrs["flag_values"] = [PENDING, COMPUTED, EXCLUDED]
    ds["done"].attrs["flag_meanings"] = "pending computed excluded"
    encoding = {name: {"chunks": block, "fill_value": np.nan} for name in METRICS}
    encoding["done"] = {"chunks": (1,), "fill_value": PENDING}
    encoding["symbol"] = {"chunks": (len(symbols),)}
    for name, values in axes:
        encoding[name] = {"chunks": (len(values),)}
    ds.to_zarr(path, mode="w", compute=False, consolidated=False, zarr_format=3,
               encoding=encoding)


def write_block(path: str, region: tuple[slice, ...], metrics: np.ndarray, block_id: int) -> None:
    """Write one block's metrics, then mark it done.

    Parameters
    ----------
    region : tuple of slice
        ``(symbol, *params)`` slices; must cover whole chunks.
    metrics : ndarray, shape (N_METRICS, *block shape), float64
        NaN where a combo is excluded.
    """
    group = zarr.open_group(path, mode="r+")
    for k, name in enumerate(METRICS):
        group[name][region] = metrics[k]
    group["done"][block_id] = COMPUTED


def mark_excluded(path: str, block_ids: Sequence[int]) -> None:
    """Flag blocks that the constraints exclude entirely (never computed)."""
    if len(block_ids):
        done = zarr.open_group(path, mode="r+")["done"]
        ids = np.asarray(block_ids)
        flags = done[:]
        flags[ids] = EXCLUDED
        done[:] = flags


def check_done(path: str) -> None:
    """Raise when a block of the store is still pending after a run."""
    flags = zarr.open_group(path, mode="r")["done"][:]
    pending = np.flatnonzero(flags == PENDING)
    if len(pending):
        raise BarsweepError(
            f"{path}: {len(pending)} block(s) were not written (first ids: "
            f"{pending[:5].tolist()}); the run did not complete"
        )


def update_attrs(path: str, attrs: Mapping[str, object]) -> None:
    """Add attributes (e.g. timings) to the store's group after the run."""
    zarr.open_group(path, mode="r+").attrs.update(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in attrs.items()}
    )


def open_results(path: str):
    """Open a results store lazily with xarray (an ``xarray.Dataset``)."""
    import xarray as xr

    return xr.open_zarr(path, consolidated=False)
