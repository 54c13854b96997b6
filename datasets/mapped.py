"""The light path to bars: numpy views of the memory-mapped store, no xarray, no pandas.

What a Dask task needs to sweep a block: the price columns of one symbol, sliced by
time, as read-only views of the memory map (nothing is copied).
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import DataError
from .store import column_array, read_table
from .timeframes import time_text

COLUMNS = ("open", "high", "low", "close", "volume", "funding_rate")


def mapped_arrays(store: str | os.PathLike, symbol: str, timeframe: str,
                  start_ns: int | None = None, end_ns: int | None = None
                  ) -> dict[str, np.ndarray]:
    """One symbol's columns (and ``time`` as int64 ns) for ``start_ns <= time < end_ns``.

    Parameters
    ----------
    store, symbol, timeframe
        See :func:`barsweep.datasets.store.bar_path`.
    start_ns, end_ns : int, optional
        Nanoseconds since the epoch (UTC); the start is inclusive, the end exclusive.

    Returns
    -------
    dict of str to ndarray, shape (n_bars,)
        Read-only views of the memory map: ``time`` (int64), ``open``, ``high``, ``low``,
        ``close``, ``volume`` (float64) and ``funding_rate`` when stored.

    Raises
    ------
    DataError
        If the file is missing, does not match the store's index (checked once per
        process while its size and mtime stay the same, see
        `barsweep.datasets.index.check_file`), cannot be read, or has no bars in range.
    """
    table = read_table(store, symbol, timeframe)
    time = column_array(table, "time")
    lo = 0 if start_ns is None else int(np.searchsorted(time, start_ns, side="left"))
    hi = len(time) if end_ns is None else int(np.searchsorted(time, end_ns, side="left"))
    if hi <= lo:
        asked = " and ".join(f"{word} {time_text(ns)}" for word, ns in
                             (("from", start_ns), ("before", end_ns)) if ns is not None)
        held = f"{time_text(time[0])} to {time_text(time[-1])}" if len(time) else "none"
        raise DataError(f"{symbol} {timeframe} in {store}: no bars {asked} (it holds {held})")
    out = {"time": time[lo:hi]}
    for name in COLUMNS:
        if name in table.column_names:
            out[name] = column_array(table, name)[lo:hi]
    return out
