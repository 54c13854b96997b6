"""Moving averages and what is built from them (TRIX, MACD), with TA-Lib's conventions.

The public kernels (:func:`sma`, :func:`ema`, :func:`wma`, :func:`trix`,
:func:`trix_signal`, :func:`macd`) take float64 arrays and return new float64
arrays of the same length, NaN through the warm-up. Like the TA-Lib Python
wrapper they start at the first non-NaN value, so leading NaNs (the warm-up of
another indicator) shift the warm-up rather than poison the output.

The ``*_into`` kernels write into an ``out`` array the caller allocated and take
``first``, the index of the first value to write; everything before it is set to
NaN. They let composite indicators (TRIX, MACD, STOCH) chain steps through their
own output arrays without allocating. :mod:`barsweep.engine.indicators.registry` uses them
too and re-exports the public kernels; import indicators from there.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# WMA rebuilds its running sums from the window every this many periods (TA-Lib's).
_REANCHOR_BARS = 8


@njit(cache=True)
def first_valid(x):
    """Index of the first non-NaN value of ``x``, or ``len(x)`` when there is none.

    This is the ``begidx`` of the TA-Lib Python wrapper: it hands TA-Lib the array
    from there on.
    """
    for t in range(x.shape[0]):
        if not math.isnan(x[t]):
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
        out[t] = math.nan


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
    sma_row(close, period, out)
    return out


@njit(cache=True)
def sma_row(close, period, out):
    """:func:`sma` written into ``out`` (allocation-free: also a CUDA device function)."""
    sma_into(close, period, first_valid(close) + period - 1, out)


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
    ema_row(close, period, out)
    return out


@njit(cache=True)
def ema_row(close, period, out):
    """:func:`ema` written into ``out`` (allocation-free: also a CUDA device function)."""
    ema_into(close, period, first_valid(close) + period - 1, out)


@njit(cache=True)
def wma(close, period):
    """Linearly weighted moving average; equals ``talib.WMA(close, timeperiod=period)``.

    The newest value weighs ``period``, the oldest 1, divided by
    ``period * (period + 1) / 2``; TA-Lib's running sums, rebuilt from the window
    every ``8 * period`` bars so rounding does not pile up on long series.

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
    divider = period * (period + 1.0) / 2.0
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
    to_reanchor = _REANCHOR_BARS * period
    for t in range(first, n):
        value = close[t]
        period_sub += value
        period_sub -= trailing_value
        period_sum += value * period
        to_reanchor -= 1
        if to_reanchor <= 0:  # rebuild both sums from the window, as TA-Lib >= 0.6
            to_reanchor = _REANCHOR_BARS * period
            period_sub = 0.0
            period_sum = 0.0
            weight = 1
            for i in range(t - period + 1, t + 1):
                period_sub += close[i]
                period_sum += close[i] * weight
                weight += 1
        trailing_value = close[trailing]
        trailing += 1
        out[t] = period_sum / divider
        period_sum -= period_sub
    return out


@njit(cache=True)
def trix(close, period):
    """TRIX; equals ``talib.TRIX(close, timeperiod=period)``.

    The one-bar rate of change, in percent, of a triple EMA (each EMA seeded with
    the mean of its first ``period`` inputs).

    Parameters
    ----------
    close : ndarray, shape (n_bars,), float64
    period : int, >= 1

    Returns
    -------
    ndarray, shape (n_bars,), float64
        NaN for the first ``3 * (period - 1) + 1`` bars.
    """
    out = np.empty(close.shape[0])
    trix_row(close, period, out)
    return out


@njit(cache=True)
def trix_row(close, period, out):
    """:func:`trix` written into ``out`` (allocation-free: also a CUDA device function)."""
    if period < 1:
        fill_nan(out, close.shape[0])
        return
    first = first_valid(close) + period - 1
    ema_into(close, period, first, out)
    ema_into(out, period, first + period - 1, out)
    ema_into(out, period, first + 2 * (period - 1), out)
    roc_into(out, 1, first + 2 * (period - 1) + 1, out)


@njit(cache=True)
def trix_signal(close, period, signal):
    """TRIX signal line; equals ``talib.EMA(talib.TRIX(close, period), signal)``.

    Parameters
    ----------
    close : ndarray, shape (n_bars,), float64
    period : int, >= 1
        TRIX period.
    signal : int, >= 1
        Period of the EMA of TRIX.

    Returns
    -------
    ndarray, shape (n_bars,), float64
        NaN for the first ``3 * (period - 1) + 1 + signal - 1`` bars.
    """
    out = np.empty(close.shape[0])
    trix_signal_row(close, period, signal, out)
    return out


@njit(cache=True)
def trix_signal_row(close, period, signal, out):
    """:func:`trix_signal` written into ``out`` (allocation-free)."""
    trix_row(close, period, out)
    ema_into(out, signal, first_valid(out) + signal - 1, out)


@njit(cache=True)
def macd(close, fast, slow, signal):
    """MACD; equals ``talib.MACD(close, fastperiod=fast, slowperiod=slow, signalperiod=signal)``.

    ``macd = EMA(fast) - EMA(slow)``, ``signal = EMA(macd, signal)``,
    ``hist = macd - signal``. As TA-Lib: ``fast`` and ``slow`` are swapped when
    ``slow < fast``; both EMAs start at bar ``slow - 1``, so the fast EMA is seeded
    with the mean of the ``fast`` closes ending there (later than a stand-alone
    EMA); all three outputs start where the signal line does.

    Parameters
    ----------
    close : ndarray, shape (n_bars,), float64
    fast, slow, signal : int, >= 1

    Returns
    -------
    macd, signal, hist : ndarray, shape (n_bars,), float64
        NaN for the first ``max(fast, slow) - 1 + signal - 1`` bars.
    """
    n = close.shape[0]
    out_macd = np.empty(n)
    out_signal = np.empty(n)
    out_hist = np.empty(n)
    macd_rows(close, fast, slow, signal, out_macd, out_signal, out_hist)
    return out_macd, out_signal, out_hist


@njit(cache=True)
def macd_rows(close, fast, slow, signal, out_macd, out_signal, out_hist):
    """:func:`macd` written into its three outputs (allocation-free)."""
    if slow < fast:
        fast, slow = slow, fast
    n = close.shape[0]
    start = first_valid(close) + slow - 1
    first = start + signal - 1
    if fast < 1 or signal < 1 or first >= n:
        fill_nan(out_macd, n)
        fill_nan(out_signal, n)
        fill_nan(out_hist, n)
        return
    # The slow and fast EMAs go through the signal and hist outputs.
    ema_into(close, slow, start, out_signal)
    ema_into(close, fast, start, out_hist)
    for t in range(start, n):
        out_macd[t] = out_hist[t] - out_signal[t]
    ema_into(out_macd, signal, first, out_signal)
    for t in range(first, n):
        out_hist[t] = out_macd[t] - out_signal[t]
    fill_nan(out_macd, first)
    fill_nan(out_hist, first)
