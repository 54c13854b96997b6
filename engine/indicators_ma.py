"""Moving averages with TA-Lib's conventions, and the fill kernels other indicators share.

The public kernels (:func:`sma`, :func:`ema`, :func:`wma`) take float64 arrays and
return a new float64 array of the same length, NaN through the warm-up. Like the
TA-Lib Python wrapper they start at the first non-NaN value, so leading NaNs (the
warm-up of another indicator) shift the warm-up rather than poison the output.

The ``_*_into`` kernels write into an ``out`` array the caller allocated, and take
``first``, the index of the first value to write; everything before it is set to
NaN. They let composite indicators (TRIX, MACD, STOCH) chain steps through their
own output arrays without allocating. :mod:`barsweep.engine.indicators` re-exports
the public kernels; import them from there.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def first_valid(x):
    """Index of the first non-NaN value of ``x``, or ``len(x)`` when there is none.

    This is the ``begidx`` of the TA-Lib Python wrapper: it hands TA-Lib the array
    from there on.
    """
    for t in range(x.shape[0]):
        if not np.isnan(x[t]):
            return t
    return x.shape[0]


@njit(cache=True)
def first_valid3(a, b, c):
    """Index of the first bar where ``a``, ``b`` and ``c`` are all non-NaN, else ``len(a)``."""
    for t in range(a.shape[0]):
        if not (np.isnan(a[t]) or np.isnan(b[t]) or np.isnan(c[t])):
            return t
    return a.shape[0]


@njit(cache=True)
def fill_nan(out, stop):
    """Write NaN into ``out[:stop]`` (clipped to the array)."""
    for t in range(min(stop, out.shape[0])):
        out[t] = np.nan


@njit(cache=True)
def sma_into(x, period, first, out):
    """Simple moving average of ``x`` into ``out[first:]``; NaN before ``first``.

    TA-Lib's running sum (add the new value, divide, drop the oldest). ``out`` must
    not be ``x``. Needs ``first >= period - 1``; writes only NaN when ``period < 1``.
    """
    n = x.shape[0]
    if period < 1 or first >= n:
        fill_nan(out, n)
        return
    total = 0.0
    for t in range(first - period + 1, first):
        total += x[t]
    for t in range(first, n):
        total += x[t]
        out[t] = total / period
        total -= x[t - period + 1]
    fill_nan(out, first)


@njit(cache=True)
def ema_into(x, period, first, out):
    """Exponential moving average of ``x`` into ``out[first:]``; NaN before ``first``.

    Seeded at ``first`` with the simple mean of the ``period`` values ending there,
    then ``alpha = 2 / (period + 1)``: TA-Lib's ``INT_EMA`` asked to start at
    ``first``. ``out`` may be ``x`` (computed in place). Needs
    ``first >= period - 1``; writes only NaN when ``period < 1``.
    """
    n = x.shape[0]
    if period < 1 or first >= n:
        fill_nan(out, n)
        return
    total = 0.0
    for t in range(first - period + 1, first + 1):
        total += x[t]
    value = total / period
    fill_nan(out, first)
    out[first] = value
    alpha = 2.0 / (period + 1.0)
    for t in range(first + 1, n):
        value = (x[t] - value) * alpha + value
        out[t] = value


@njit(cache=True)
def roc_into(x, period, first, out):
    """Rate of change in percent, ``(x[t] / x[t - period] - 1) * 100``, into ``out[first:]``.

    0 where ``x[t - period]`` is 0, as TA-Lib. ``out`` may be ``x`` (it runs
    backwards). Needs ``first >= period``; writes only NaN when ``period < 1``.
    """
    n = x.shape[0]
    if period < 1 or first >= n:
        fill_nan(out, n)
        return
    for t in range(n - 1, first - 1, -1):
        before = x[t - period]
        out[t] = (x[t] / before - 1.0) * 100.0 if before != 0.0 else 0.0
    fill_nan(out, first)


@njit(cache=True)
def sma(close, period):
    """Simple moving average; equals ``talib.SMA(close, timeperiod=period)``.

    Parameters
    ----------
    close : ndarray, shape (n_bars,), float64
    period : int, >= 1

    Returns
    -------
    ndarray, shape (n_bars,), float64
        NaN for the first ``period - 1`` bars after the leading NaNs of ``close``.
    """
    out = np.empty(close.shape[0])
    sma_into(close, period, first_valid(close) + period - 1, out)
    return out


@njit(cache=True)
def ema(close, period):
    """Exponential moving average; equals ``talib.EMA(close, timeperiod=period)``.

    Seeded with the simple mean of the first ``period`` values at index
    ``period - 1``, then ``alpha = 2 / (period + 1)``. Leading NaNs are skipped as
    the TA-Lib wrapper does, so ``ema(talib.TRIX(x, 9), 5)`` equals
    ``talib.EMA(talib.TRIX(x, 9), 5)``.

    Parameters
    ----------
    close : ndarray, shape (n_bars,), float64
    period : int, >= 1

    Returns
    -------
    ndarray, shape (n_bars,), float64
        NaN for the first ``period - 1`` bars after the leading NaNs of ``close``.
    """
    out = np.empty(close.shape[0])
    ema_into(close, period, first_valid(close) + period - 1, out)
    return out


@njit(cache=True)
def wma(close, period):
    """Linearly weighted moving average; equals ``talib.WMA(close, timeperiod=period)``.

    The newest value weighs ``period``, the oldest 1, divided by
    ``period * (period + 1) / 2``; TA-Lib's running sums.

    Parameters
    ----------
    close : ndarray, shape (n_bars,), float64
    period : int, >= 1

    Returns
    -------
    ndarray, shape (n_bars,), float64
        NaN for the first ``period - 1`` bars after the leading NaNs of ``close``.
    """
    n = close.shape[0]
    out = np.empty(n)
    first = first_valid(close) + period - 1
    if period < 1 or first >= n:
        fill_nan(out, n)
        return out
    fill_nan(out, first)
    if period == 1:
        for t in range(first, n):
            out[t] = close[t]
        return out
    divider = (period * (period + 1)) >> 1
    trailing = first - period + 1
    period_sum = 0.0
    period_sub = 0.0
    weight = 1
    for t in range(trailing, first):
        value = close[t]
        period_sub += value
        period_sum += value * weight
        weight += 1
    trailing_value = 0.0
    for t in range(first, n):
        value = close[t]
        period_sub += value
        period_sub -= trailing_value
        period_sum += value * period
        trailing_value = close[trailing]
        trailing += 1
        out[t] = period_sum / divider
        period_sum -= period_sub
    return out
