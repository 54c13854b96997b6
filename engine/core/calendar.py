"""The calendar of the bars' time stamps as series a rule reads: ``hour``, ``minute``,
``weekday`` (Monday 0, as Python's), ``day`` (of the month, from 1) and ``month`` (from
1), in UTC (the store's time zone: bars are stored in UTC), one value per bar.

They are computed from the time stamps (int64 nanoseconds since the epoch) when a rule
first reads one, by :class:`BarColumns`, the mapping of columns the indicators and a
rule's slots read (:attr:`barsweep.engine.core.inputs.KernelInputs.columns`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np

from ...errors import SpecError

#: The calendar's series, by the name a rule reads.
CALENDAR = ("hour", "minute", "weekday", "day", "month")

_MINUTE_NS = 60_000_000_000
_DAY_MINUTES = 1_440
_EPOCH_WEEKDAY = 3  # 1970-01-01 was a Thursday


def calendar_field(time_ns: np.ndarray, name: str) -> np.ndarray:
    """One calendar series of ``time_ns`` (int64 ns since the epoch, UTC), float64.

    >>> t = np.array(["2024-02-29T13:45", "1969-12-31T23:59"], dtype="datetime64[ns]")
    >>> [calendar_field(t.view(np.int64), n).tolist() for n in CALENDAR]
    [[13.0, 23.0], [45.0, 59.0], [3.0, 2.0], [29.0, 31.0], [2.0, 12.0]]
    """
    time_ns = np.asarray(time_ns, dtype=np.int64)
    minutes = time_ns // _MINUTE_NS  # floor: times before the epoch too
    if name in ("hour", "minute"):
        of_day = minutes % _DAY_MINUTES
        return (of_day // 60 if name == "hour" else of_day % 60).astype(np.float64)
    days = minutes // _DAY_MINUTES
    if name == "weekday":
        return ((days + _EPOCH_WEEKDAY) % 7).astype(np.float64)
    dates = days.astype("datetime64[D]")
    months = dates.astype("datetime64[M]")
    if name == "day":
        return ((dates - months).astype(np.int64) + 1).astype(np.float64)
    if name == "month":
        return (months.astype(np.int64) % 12 + 1).astype(np.float64)
    raise KeyError(name)


class BarColumns(Mapping):
    """The bar columns by name (``base``) and, when the bars have time stamps, the
    calendar's series, each computed once, when first read (read-only)."""

    def __init__(self, base: Mapping[str, np.ndarray], time_ns: np.ndarray | None):
        self._base = dict(base)
        self._time = time_ns
        self._calendar: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self._base:
            return self._base[name]
        if name in CALENDAR and self._time is not None:
            if name not in self._calendar:
                values = calendar_field(self._time, name)
                values.flags.writeable = False
                self._calendar[name] = values
            return self._calendar[name]
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        yield from self._base
        if self._time is not None:
            yield from CALENDAR

    def __len__(self) -> int:
        return len(self._base) + (len(CALENDAR) if self._time is not None else 0)


def time_stamps(bars: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """The bars' ``time`` as int64 ns since the epoch (datetime64 converted; integers
    taken as such), or None when they have none or other times (floats, strings): the
    calendar is then not there to read (:func:`missing`)."""
    if "time" not in bars:
        return None
    time = np.asarray(bars["time"])
    if np.issubdtype(time.dtype, np.datetime64):
        return time.astype("datetime64[ns]").view(np.int64)
    if time.dtype.kind in "iu":
        return time.astype(np.int64, copy=False)
    return None


def missing(name: str) -> SpecError:
    """The refusal of a rule reading calendar series ``name`` of bars without time
    stamps."""
    return SpecError(f"the rule reads {name}, but the bars have no time stamps to read it "
                     f"from (give them a time column or a DatetimeIndex, as date-times)")


def hourly_times(n_bars: int) -> np.ndarray:
    """``n_bars`` hourly time stamps from 2020-01-01 00:00 UTC, int64 ns: synthetic bars'
    (a rule's warm-up and compile checks read the calendar from them)."""
    return np.arange(n_bars, dtype=np.int64) * 3_600_000_000_000 + 1_577_836_800_000_000_000
