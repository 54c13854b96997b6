"""The calendar periods of a portfolio's rebalancing: which bars are rebalance bars
(docs/EXECUTION.md, "Portfolios").

A period is written ``<count><unit>``: a count >= 1 and a unit ``D`` (days), ``W``
(weeks, from Monday), ``M`` (months), ``Q`` (quarters) or ``Y`` (years), e.g. ``1W``,
``2W``, ``1M``, ``3M``, ``1Y``. Periods are counted in UTC from the Unix epoch (days
from 1970-01-01, weeks from Monday 1970-01-05, months, quarters and years from January
1970), so ``3M`` is the calendar quarter ``1Q`` and ``12M`` the year ``1Y``. The
rebalance bars are the first bar of each new period: bar ``t >= 1`` whose period
differs from bar ``t - 1``'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ...errors import SpecError

#: The units of a rebalance period.
PERIOD_UNITS = ("D", "W", "M", "Q", "Y")

_PERIOD = re.compile(r"^\s*([0-9]+)\s*([A-Za-z])\s*$")

_NS_PER_DAY = 86_400 * 10**9
_MONDAY = 4  # 1970-01-01 was a Thursday: day 4 is Monday 1970-01-05


def parse_period(text) -> tuple[int, str]:
    """``(count, unit)`` of a period such as ``"1M"`` or ``"2W"``.

    Examples
    --------
    >>> parse_period("3M"), parse_period("1y")
    ((3, 'M'), (1, 'Y'))
    """
    match = _PERIOD.match(str(text))
    unit = match.group(2).upper() if match else None
    if match is None or unit not in PERIOD_UNITS or int(match.group(1)) < 1:
        raise SpecError(f"a rebalance period is a count >= 1 and a unit of "
                        f"{'/'.join(PERIOD_UNITS)} (e.g. 1W, 2W, 1M, 3M, 1Y), got {text!r}")
    return int(match.group(1)), unit


def period_index(time_ns: np.ndarray, period) -> np.ndarray:
    """The period of each bar: bars with equal values share a period.

    Parameters
    ----------
    time_ns : ndarray of int64, nanoseconds since the epoch (UTC)
    period : str, e.g. ``"1M"``
    """
    count, unit = parse_period(period)
    days = np.floor_divide(np.asarray(time_ns, dtype=np.int64), _NS_PER_DAY)
    if unit == "D":
        index = days
    elif unit == "W":
        index = np.floor_divide(days - _MONDAY, 7)
    else:
        months = np.asarray(days, dtype="datetime64[D]").astype("datetime64[M]").astype(np.int64)
        index = months if unit == "M" else np.floor_divide(months, 3 if unit == "Q" else 12)
    return np.floor_divide(index, count)


def rebalance_bars(time_ns: np.ndarray, period) -> np.ndarray:
    """``True`` on the first bar of each new period (never on bar 0).

    Examples
    --------
    >>> days = np.array(["2024-01-30", "2024-01-31", "2024-02-01", "2024-02-02"],
    ...                 dtype="datetime64[ns]").astype(np.int64)
    >>> rebalance_bars(days, "1M")
    array([False, False,  True, False])
    """
    index = period_index(time_ns, period)
    out = np.zeros(index.shape, dtype=np.bool_)
    out[1:] = index[1:] != index[:-1]
    return out


def rebalance_table(time_ns, rebalance, n_combos: int) -> tuple[np.ndarray, np.ndarray]:
    """The rebalance bars of each distinct period, and each combo's row in them.

    Parameters
    ----------
    time_ns : ndarray of int64 or None, the bars' timestamps (needed with a period)
    rebalance : None, a period, or a sequence of periods (or None) of length ``n_combos``
    n_combos : int

    Returns
    -------
    table : ndarray of bool, shape (max(P, 1), n_bars): row ``p`` the rebalance bars
        of the ``p``-th distinct period
    row : ndarray of int64, shape (n_combos,): each combo's row, -1 for never
    """
    values = _per_combo(rebalance, n_combos)
    distinct = sorted({parse_period(v) for v in values if v is not None})
    n_bars = 0 if time_ns is None else len(time_ns)
    if distinct and time_ns is None:
        raise SpecError("rebalancing needs the bars' timestamps (a 'time' column)")
    table = np.zeros((max(len(distinct), 1), n_bars), dtype=np.bool_)
    for p, (count, unit) in enumerate(distinct):
        table[p] = rebalance_bars(time_ns, f"{count}{unit}")
    row = np.array([-1 if v is None else distinct.index(parse_period(v)) for v in values],
                   dtype=np.int64)
    return table, row


def _per_combo(rebalance, n_combos: int) -> list:
    if rebalance is None or isinstance(rebalance, str):
        return [rebalance] * n_combos
    values = list(rebalance) if isinstance(rebalance, Sequence | np.ndarray) else [rebalance]
    if len(values) != n_combos:
        raise SpecError(f"rebalance has {len(values)} values for {n_combos} combos")
    return [None if v is None or v == "" else v for v in values]
