"""Open stored bars as an xarray Dataset over (time, symbol), viewing the memory map."""

from __future__ import annotations

import datetime as dt
import numbers
import os
from collections.abc import Iterable
from functools import reduce

import numpy as np
import pandas as pd
import xarray as xr
from xarray.indexes import PandasIndex

from ..errors import DataError
from .store import FUNDING_RATE_FIELD, column_array, read_table
from .timeframes import timeframe_seconds, times_text

__all__ = ["PRICE_VARS", "bars_arrays", "open_bars", "to_ns"]

PRICE_VARS = ("open", "high", "low", "close", "volume")
TimeLike = str | dt.datetime | dt.date | pd.Timestamp | np.datetime64


def open_bars(
    store: str | os.PathLike,
    symbols: str | Iterable[str],
    timeframe: str,
    start: TimeLike | None = None,
    end: TimeLike | None = None,
) -> xr.Dataset:
    """Open `symbols`' bars of `timeframe` from `store` as a Dataset over (time, symbol).

    Parameters
    ----------
    store : path-like
        The bar store directory.
    symbols : str or iterable of str
        One symbol, or several (their bars are inner-joined on time).
    timeframe : str
        E.g. ``"1h"``.
    start, end : str, datetime, pandas.Timestamp or numpy.datetime64, optional
        Keep bars with ``start <= time < end``; naive times are UTC.

    Returns
    -------
    xarray.Dataset
        Dims ``(time, symbol)``; data vars ``open, high, low, close, volume`` (float64,
        shape (n_time, n_symbol), read-only) and ``funding_rate`` if every file has one;
        coords ``time`` (``datetime64[ns]``, UTC without a zone, as xarray keeps times)
        and ``symbol`` (str); attrs ``{"timeframe": timeframe}``. With one symbol every
        array, ``time`` included (the stored int64 ns read as ``datetime64[ns]``), is a
        view of the memory-mapped file: nothing is copied.

    Raises
    ------
    DataError
        If a file is missing, does not match the store's index (see
        `barsweep.datasets.index.check_file`) or cannot be read, `start`/`end` cannot be
        read, the range holds no bars, or the symbols share no bar time.

    Examples
    --------
    >>> ds = open_bars("bars", "BTCUSDT", "1h", start="2021-01-01")  # doctest: +SKIP
    >>> ds.close.sizes  # doctest: +SKIP
    Frozen({'time': 17520, 'symbol': 1})
    """
    names = _symbol_list(symbols)
    timeframe_seconds(timeframe)
    start_ns, end_ns = to_ns(start, "start"), to_ns(end, "end")
    if start_ns is not None and end_ns is not None and start_ns >= end_ns:
        raise DataError(f"start {start!r} must be before end {end!r} (end is exclusive)")
    columns = [_sliced_columns(store, s, timeframe, start, end, start_ns, end_ns) for s in names]
    var_names = list(PRICE_VARS)
    if all(FUNDING_RATE_FIELD.name in c for c in columns):
        var_names.append(FUNDING_RATE_FIELD.name)
    if len(names) == 1:
        ts_ns = columns[0]["time"]
        data = {name: columns[0][name][:, None] for name in var_names}
    else:
        ts_ns, data = _inner_join(names, columns, var_names)
    return _dataset(ts_ns, names, data, timeframe)


def bars_arrays(ds: xr.Dataset, symbol: str) -> dict[str, np.ndarray]:
    """The bar arrays of one symbol of `ds`, as 1-D views (no copy).

    Parameters
    ----------
    ds : xarray.Dataset
        As returned by `open_bars`.
    symbol : str
        One of ``ds.symbol``.

    Returns
    -------
    dict of str to numpy.ndarray
        ``open, high, low, close, volume`` (and ``funding_rate`` if present), float64,
        shape (n_time,); contiguous when `ds` holds one symbol, strided otherwise.

    Raises
    ------
    DataError
        If `symbol` is not in `ds`.

    Examples
    --------
    >>> arrays = bars_arrays(open_bars("bars", "BTCUSDT", "1h"), "BTCUSDT")  # doctest: +SKIP
    >>> arrays["close"].shape  # doctest: +SKIP
    (26280,)
    """
    available = [str(s) for s in ds["symbol"].values]
    if symbol not in available:
        raise DataError(f"symbol {symbol!r} is not in the bars; available: {available}")
    i = available.index(symbol)
    names = [*PRICE_VARS, FUNDING_RATE_FIELD.name]
    return {name: ds[name].values[:, i] for name in names if name in ds.data_vars}


def to_ns(value: TimeLike | None, name: str) -> int | None:
    """Nanoseconds since the epoch (UTC) of a time given by a user; naive times are UTC.

    Parameters
    ----------
    value : str, datetime, date, pandas.Timestamp, numpy.datetime64 or None
        The time; None passes through.
    name : str
        What the value is (``"start"``, ``"end"``), for the error message.

    Returns
    -------
    int or None

    Raises
    ------
    DataError
        If `value` is a bare number (its unit would be a guess) or cannot be read as a time.

    Examples
    --------
    >>> to_ns("1970-01-01T00:00:01", "start")
    1000000000
    """
    if value is None:
        return None
    if isinstance(value, numbers.Number):
        raise DataError(f"{name} {value!r} is a number; give a time such as '2021-01-01'")
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError) as exc:
        raise DataError(f"{name} {value!r} is not a time such as '2021-01-01': {exc}") from exc
    if ts is pd.NaT:
        raise DataError(f"{name} {value!r} is not a time such as '2021-01-01'")
    ts = ts.tz_localize("UTC") if ts.tz is None else ts.tz_convert("UTC")
    return int(ts.as_unit("ns").value)


def _symbol_list(symbols: str | Iterable[str]) -> list[str]:
    """`symbols` as a non-empty list of distinct strings."""
    names = [symbols] if isinstance(symbols, str) else list(symbols)
    if not names:
        raise DataError("no symbols given: name at least one")
    if any(not isinstance(s, str) for s in names):
        raise DataError(f"symbols must be strings, got {names!r}")
    if len(set(names)) != len(names):
        raise DataError(f"symbols must be distinct, got {names}")
    return names


def _sliced_columns(
    store: str | os.PathLike,
    symbol: str,
    timeframe: str,
    start: TimeLike | None,
    end: TimeLike | None,
    start_ns: int | None,
    end_ns: int | None,
) -> dict[str, np.ndarray]:
    """One symbol's columns restricted to [start_ns, end_ns), as views of the memory map."""
    table = read_table(store, symbol, timeframe)
    columns = {name: column_array(table, name) for name in table.column_names}
    ts_ns = columns["time"]
    lo = 0 if start_ns is None else int(np.searchsorted(ts_ns, start_ns, side="left"))
    hi = ts_ns.size if end_ns is None else int(np.searchsorted(ts_ns, end_ns, side="left"))
    if hi <= lo:
        stored = " to ".join(times_text(ts_ns[[0, -1]])) if ts_ns.size else "no bars"
        raise DataError(
            f"no {timeframe} bars for {symbol} in [start={start!r}, end={end!r}); "
            f"the store holds {stored}"
        )
    return {name: values[lo:hi] for name, values in columns.items()}


def _inner_join(
    names: list[str], columns: list[dict[str, np.ndarray]], var_names: list[str]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Keep the times every symbol has; stack each variable to shape (n_time, n_symbol)."""
    ts_ns = reduce(np.intersect1d, [c["time"] for c in columns])
    if ts_ns.size == 0:
        ranges = ", ".join(f"{name}: {' to '.join(times_text(c['time'][[0, -1]]))}"
                           for name, c in zip(names, columns, strict=True))
        raise DataError(f"symbols {names} share no bar time (inner join is empty); {ranges}")
    rows = [np.searchsorted(c["time"], ts_ns) for c in columns]
    data = {
        var: np.column_stack([c[var][r] for c, r in zip(columns, rows, strict=True)])
        for var in var_names
    }
    return ts_ns, data


def _dataset(
    ts_ns: np.ndarray, names: list[str], data: dict[str, np.ndarray], timeframe: str
) -> xr.Dataset:
    """Assemble the Dataset without copying `ts_ns` or the arrays of `data`."""
    # int64 ns read as datetime64[ns] is a view; a DatetimeIndex built with copy=False,
    # handed to xarray as a ready index, keeps it one (xarray would copy it when building
    # the index itself).
    times = pd.DatetimeIndex(ts_ns.view("datetime64[ns]"), copy=False)
    time_index = PandasIndex(times, "time")
    coords = xr.Coordinates.from_xindex(time_index)
    ds = xr.Dataset(
        {name: (("time", "symbol"), values) for name, values in data.items()},
        coords=coords,
        attrs={"timeframe": timeframe},
    )
    return ds.assign_coords(symbol=("symbol", np.array(names, dtype=str)))
