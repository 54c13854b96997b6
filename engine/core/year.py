"""Bars per year, measured from the bars' own times.

Annualised metrics (CAGR, volatility, Sharpe, Sortino, alpha) scale by the bars a year
holds. A market that trades around the clock (crypto) has ``365 days x bars per day``;
one that trades on weekdays only has far fewer (daily stocks: about 252, not 365), and
using the calendar for it inflates CAGR and Sharpe. :func:`bars_per_year` tells the two
apart from the times alone.
"""

from __future__ import annotations

import numpy as np

NS_PER_DAY = 86_400 * 10**9

#: Bars cover at least this share of the time line at their spacing: a market open
#: around the clock (a few missing bars allowed). Weekday-only daily bars cover ~69 %.
CONTINUOUS_COVERAGE = 0.9


def bars_in_year(step_ns: float, year_days: float = 365.0) -> float:
    """Bars in a year of ``year_days`` days at one bar every ``step_ns`` nanoseconds:
    ``year_days * 1 day / step_ns``, the calendar's year of bars.

    >>> bars_in_year(3_600 * 10**9), bars_in_year(86_400 * 10**9, 252)
    (8760.0, 252.0)
    """
    return year_days * NS_PER_DAY / float(step_ns)


def bars_per_year(time_ns: np.ndarray, step_ns: float) -> tuple[float, str]:
    """Bars a year for annualising metrics, and how it was found.

    Bars that cover the time line (``(n - 1) * step_ns >= 0.9 * (last - first)``: a
    market open every day) get the calendar: ``365 * 1 day / step_ns``. Others (weekday
    markets, trading hours) count their bars: the median number of bars per calendar
    year over the years strictly between the first bar's year and the last bar's (whole
    years), or, with no whole year, ``(n - 1)`` bars per their span scaled to 365.25
    days, rounded to a whole bar.

    Parameters
    ----------
    time_ns : ndarray of int64 or datetime64[ns], shape (n_bars,)
        The bars' times, increasing.
    step_ns : float
        The bars' spacing in nanoseconds (the timeframe, or the median spacing).

    Returns
    -------
    ppy : float
        Bars per year.
    how : str
        How ``ppy`` was found, in words (for the run's output and the store).

    Examples
    --------
    >>> import numpy as np
    >>> hours = np.arange(0, 3 * 365 * 24, dtype=np.int64) * 3_600 * 10**9
    >>> bars_per_year(hours, 3_600 * 10**9)[0]
    8760.0
    >>> days = np.arange("2001-01-01", "2004-01-01", dtype="datetime64[D]")
    >>> weekdays = days[np.is_busday(days)].astype("datetime64[ns]")
    >>> bars_per_year(weekdays, 86_400 * 10**9)
    (261.0, 'the median of 1 whole calendar year, 2002')
    """
    calendar = bars_in_year(step_ns, 365.0)
    time_ns = np.asarray(time_ns).view(np.int64)
    n = len(time_ns)
    span = float(time_ns[-1] - time_ns[0]) if n > 1 else 0.0
    if n < 3 or span <= 0.0:
        return calendar, "too few bars to measure: 365 days of bars"
    if (n - 1) * float(step_ns) >= CONTINUOUS_COVERAGE * span:
        return calendar, "bars on every day: 365 days of bars"
    years = time_ns.view("datetime64[ns]").astype("datetime64[Y]").astype(np.int64) + 1970
    first, last = int(years[0]), int(years[-1])
    whole = np.arange(first + 1, last)
    if len(whole):
        counts = np.bincount(years - first)[1:-1]
        ppy = float(np.median(counts))
        named = f"{whole[0]}" if len(whole) == 1 else f"{whole[0]}-{whole[-1]}"
        plural = "year" if len(whole) == 1 else "years"
        return ppy, f"the median of {len(whole)} whole calendar {plural}, {named}"
    ppy = float(round((n - 1) * 365.25 * NS_PER_DAY / span))
    return ppy, f"{n:,} bars in {span / NS_PER_DAY:,.0f} days, scaled to 365.25 days"
