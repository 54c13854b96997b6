"""Synthetic bars: seeded random walks with volatility regimes and always-valid OHLC."""

from __future__ import annotations

import math
import numbers
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..errors import DataError
from .bars import to_ns
from .store import BAR_SCHEMA
from .timeframes import periods_per_year, timeframe_seconds
from .writer import write_bars

__all__ = ["REGIME_VOLS", "synth_bars", "write_synth"]

REGIME_VOLS = (0.30, 0.60, 1.20)  # annualized volatility of the calm, normal, wild regimes
ANNUAL_DRIFT = 0.05
REGIME_DAYS = 30.0  # mean length of a regime
GAP_VOL = 0.1  # open-to-previous-close gap, as a fraction of the bar's volatility
RANGE_VOL = 0.5  # mean high/low excursion beyond the body, in bar volatilities
MIN_RANGE_VOL = 0.05  # smallest excursion, so that high > max(open, close) strictly
VOLUME_MEDIAN = 1_000.0


def synth_bars(
    n_bars: int,
    seed: int,
    timeframe: str = "1h",
    start: str = "2020-01-01",
    price0: float = 100.0,
) -> pa.Table:
    """Bars of a random walk whose volatility switches between regimes.

    Log returns are Gaussian with a small drift; the annualized volatility follows a
    3-state Markov chain over `REGIME_VOLS` (regimes last `REGIME_DAYS` days on average),
    scaled to the timeframe with `periods_per_year`. Each open is the previous close
    times a tiny gap; high and low lie beyond max/min(open, close) by a positive random
    amount, so prices are positive and OHLC always valid. Volume is lognormal, higher in
    wilder regimes. All draws come from ``np.random.default_rng(seed)``.

    Parameters
    ----------
    n_bars : int
        Number of bars, >= 1.
    seed : int
        Seed; the same seed gives the same bars, bit for bit.
    timeframe : str, default "1h"
        Bar length, e.g. ``"1m"``, ``"1d"``.
    start : str, default "2020-01-01"
        Time of the first bar (naive = UTC).
    price0 : float, default 100.0
        Open of the first bar, > 0.

    Returns
    -------
    pyarrow.Table
        n_bars rows with the columns of the store's schema (time, open, high, low, close,
        volume).

    Raises
    ------
    DataError
        If an argument is out of range.

    Examples
    --------
    >>> table = synth_bars(24, seed=7)
    >>> table.num_rows, table.column_names[:2]
    (24, ['time', 'open'])
    """
    _check_args(n_bars, seed, price0)
    step_ns = timeframe_seconds(timeframe) * 1_000_000_000
    start_ns = to_ns(start, "start")
    rng = np.random.default_rng(seed)
    bar_vol = np.asarray(REGIME_VOLS)[_regimes(rng, n_bars, timeframe)] / math.sqrt(
        periods_per_year(timeframe)
    )
    drift = ANNUAL_DRIFT / periods_per_year(timeframe) - 0.5 * bar_vol**2
    body = drift + bar_vol * rng.standard_normal(n_bars)
    gap = GAP_VOL * bar_vol * rng.standard_normal(n_bars)
    gap[0] = 0.0
    log_open = np.cumsum(gap + np.concatenate(([0.0], body[:-1])))  # relative to price0
    log_close = log_open + body
    up = bar_vol * (MIN_RANGE_VOL + rng.exponential(RANGE_VOL, n_bars))
    down = bar_vol * (MIN_RANGE_VOL + rng.exponential(RANGE_VOL, n_bars))
    volume = rng.lognormal(math.log(VOLUME_MEDIAN), 0.5, n_bars) * (bar_vol / bar_vol.min())
    ts_ns = start_ns + step_ns * np.arange(n_bars, dtype=np.int64)
    columns = {
        "time": pa.array(ts_ns, type=pa.int64()).view(BAR_SCHEMA.field("time").type),
        "open": price0 * np.exp(log_open),
        "high": price0 * np.exp(np.maximum(log_open, log_close) + up),
        "low": price0 * np.exp(np.minimum(log_open, log_close) - down),
        "close": price0 * np.exp(log_close),
        "volume": volume,
    }
    return pa.Table.from_pydict(columns, schema=BAR_SCHEMA)


def write_synth(
    store: str | os.PathLike,
    symbol: str,
    timeframe: str,
    n_bars: int,
    seed: int,
    *,
    start: str = "2020-01-01",
    price0: float = 100.0,
) -> Path:
    """Write `synth_bars` as `symbol`'s bars of `timeframe` in `store`.

    Parameters
    ----------
    store : path-like
        The store directory.
    symbol, timeframe : str
        Where the bars go, see `bar_path`.
    n_bars, seed, start, price0
        See `synth_bars`.

    Returns
    -------
    Path
        The file written; same arguments, same bytes.

    Examples
    --------
    >>> write_synth(tmp_store, "BTCUSDT", "1h", n_bars=26_280, seed=7)  # doctest: +SKIP
    PosixPath('.../1h/BTCUSDT.arrow')
    """
    table = synth_bars(n_bars, seed, timeframe=timeframe, start=start, price0=price0)
    return write_bars(store, symbol, timeframe, table)


def _check_args(n_bars: int, seed: int, price0: float) -> None:
    """Refuse a non-positive bar count, a non-integer seed or a non-positive first price."""
    if isinstance(n_bars, bool) or not isinstance(n_bars, numbers.Integral) or n_bars < 1:
        raise DataError(f"n_bars must be an integer >= 1, got {n_bars!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise DataError(f"seed must be an integer >= 0, got {seed!r}")
    valid = isinstance(price0, numbers.Real) and not isinstance(price0, bool)
    if not valid or not math.isfinite(price0) or price0 <= 0:
        raise DataError(f"price0 must be a positive number, got {price0!r}")


def _regimes(rng: np.random.Generator, n_bars: int, timeframe: str) -> np.ndarray:
    """Regime of each bar: a 3-state Markov chain that never stays put when it switches.

    Returns
    -------
    numpy.ndarray
        int64, shape (n_bars,), values in {0, 1, 2}.
    """
    mean_bars = max(2.0, REGIME_DAYS * 86_400 / timeframe_seconds(timeframe))
    lengths: list[np.ndarray] = []
    total = 0
    while total < n_bars:
        batch = rng.geometric(1.0 / mean_bars, size=max(8, int(2 * n_bars / mean_bars)))
        lengths.append(batch)
        total += int(batch.sum())
    durations = np.concatenate(lengths)
    first = rng.integers(0, 3)
    steps = rng.integers(1, 3, size=durations.size)
    steps[0] = 0
    states = (first + np.cumsum(steps)) % 3
    return np.repeat(states, durations)[:n_bars]
