"""Bar timeframes: strings such as ``"1m"``, ``"4h"`` or ``"1d"`` and what they mean in time."""

from __future__ import annotations

import math
import numbers
import re

import numpy as np

from ..errors import DataError

__all__ = ["TIMEFRAME_PATTERN", "periods_per_year", "time_text", "times_text",
           "timeframe_seconds"]

TIMEFRAME_PATTERN = re.compile(r"^(\d+)(s|m|h|d|w)$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}


def timeframe_seconds(tf: str) -> int:
    """Length of one bar of timeframe `tf`, in seconds.

    Parameters
    ----------
    tf : str
        A count and a unit: ``s`` (seconds), ``m`` (minutes), ``h`` (hours), ``d`` (days)
        or ``w`` (weeks), e.g. ``"1s"``, ``"15m"``, ``"4h"``, ``"1d"``, ``"1w"``.

    Returns
    -------
    int
        Seconds per bar, > 0.

    Raises
    ------
    DataError
        If `tf` is not a string of that form, or its count is 0.

    Examples
    --------
    >>> timeframe_seconds("15m")
    900
    """
    match = TIMEFRAME_PATTERN.match(tf) if isinstance(tf, str) else None
    if match is None:
        raise DataError(
            f"timeframe {tf!r} is not understood: use a count and a unit among s, m, h, d, w "
            "(e.g. '1m', '15m', '1h', '4h', '1d')"
        )
    count = int(match.group(1))
    if count == 0:
        raise DataError(f"timeframe {tf!r} has a zero length: use a positive count, e.g. '1h'")
    return count * _UNIT_SECONDS[match.group(2)]


def periods_per_year(tf: str, year_days: float = 365.0) -> float:
    """Number of bars of timeframe `tf` in a year of `year_days` days.

    Parameters
    ----------
    tf : str
        A timeframe, see `timeframe_seconds`.
    year_days : float, default 365.0
        Days in a year: 365 for markets that trade every day, 252 for equities.

    Returns
    -------
    float
        ``year_days * 86400 / timeframe_seconds(tf)``: the rule of
        ``barsweep.engine.core.year.bars_in_year`` (bars given by their spacing), for a
        timeframe, in seconds (the pipeline's runs and the synthetic bars use this one).

    Raises
    ------
    DataError
        If `tf` is not a timeframe or `year_days` is not a positive number.

    Examples
    --------
    >>> periods_per_year("1d", 252)
    252.0
    >>> periods_per_year("1h")
    8760.0
    """
    seconds = timeframe_seconds(tf)
    valid = isinstance(year_days, numbers.Real) and not isinstance(year_days, bool)
    if not valid or not math.isfinite(year_days) or year_days <= 0:
        raise DataError(f"year_days must be a positive number of days, got {year_days!r}")
    return float(year_days) * 86_400.0 / seconds


_NS_PER_DAY = 86_400 * 10**9


def times_text(ts_ns, to_minute: bool = False) -> list[str]:
    """Times (int64 ns since the epoch, UTC, or datetime64) for people, as one column
    shows them: dates when every one is at midnight (daily bars), else to the minute,
    to the second where one is not on a whole minute (unless ``to_minute``).

    >>> times_text([1577923200 * 10**9, 1578009600 * 10**9])
    ['2020-01-02', '2020-01-03']
    >>> times_text([1577923200 * 10**9, 1577925000 * 10**9])
    ['2020-01-02 00:00', '2020-01-02 00:30']
    """
    ns = np.asarray(ts_ns).astype("datetime64[ns]").astype(np.int64)
    unit = ("D" if not (ns % _NS_PER_DAY).any() else
            "m" if to_minute or not (ns % (60 * 10**9)).any() else "s")
    return [t.replace("T", " ") for t in
            np.datetime_as_string(ns.astype("datetime64[ns]"), unit=unit).tolist()]


def time_text(ts_ns) -> str:
    """One time for a message, as :func:`times_text` shows it: ``2020-01-02`` at
    midnight, else ``2020-01-02 09:30`` (or to the second).

    >>> time_text(1577923200 * 10**9), time_text(np.datetime64("2020-01-02T09:30:15"))
    ('2020-01-02', '2020-01-02 09:30:15')
    """
    return times_text([ts_ns])[0]
