"""Oscillators and ranges with TA-Lib's conventions: RSI, ROC, STOCH, Bollinger bands,
standard deviation, ATR, rolling highest and lowest, Donchian channels.

Each public kernel takes float64 arrays and scalars and returns new float64 arrays of
the same length, NaN through the warm-up, and names the TA-Lib call it equals; the
``*_row``/``*_rows`` kernels write the same values into arrays the caller allocated
(allocation-free: also CUDA device functions). :mod:`barsweep.engine.indicators.registry`
re-exports them with the registry; import indicators from there.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .ma import fill_nan, first_valid, first_valid3, roc_into, sma_into

# Rolling variance (stdev, bbands): re-centre the shifted sums on the window mean when
# the variance falls below _CANCELLING of the mean squared deviation, when a departing
# bar outweighs _DOMINANT times what is left, and every _RECENTRE_BARS periods; a
# re-centred variance below _NEGLIGIBLE of it is 0 (TA-Lib's var.c thresholds).
_CANCELLING = 1e-6
_DOMINANT = 1e6
_RECENTRE_BARS = 32
_NEGLIGIBLE = 1e-12


@njit(cache=True)
def rsi(close, period):
    """Relative strength index; equals ``talib.RSI(close, timeperiod=period)``.

    Average gain and loss over the first ``period`` changes are simple means, then
    Wilder's smoothing ``avg = (avg * (period - 1) + this_bar) / period``;
    ``100 * gain / (gain + loss)``, 0 when both are 0 (a flat stretch).

    Parameters
    ----------
    close : ndarray, shape (n_bars,), float64
    period : int, >= 1

    Returns
    -------
    ndarray, shape (n_bars,), float64
        In [0, 100]; NaN for the first ``period`` bars.
    """
    out = np.empty(close.shape[0])
    rsi_row(close, period, out)
    return out


@njit(cache=True)
def rsi_row(close, period, out):
    """:func:`rsi` written into ``out`` (allocation-free: also a CUDA device function)."""
    n = close.shape[0]
    begin = first_valid(close)
    first = begin + period
    if period < 1 or first >= n:
        fill_nan(out, n)
        return
    fill_nan(out, first)
    gain = 0.0
    loss = 0.0
    prev = close[begin]
    for t in range(begin + 1, n):
        change = close[t] - prev
        prev = close[t]
        if t > first:
            gain *= period - 1
            loss *= period - 1
        if change < 0:
            loss -= change
        else:
            gain += change
        if t >= first:
            gain /= period
            loss /= period
            total = gain + loss
            out[t] = 100.0 * (gain / total) if total != 0.0 else 0.0


@njit(cache=True)
def roc(close, period):
    """Rate of change in percent; equals ``talib.ROC(close, timeperiod=period)``.

    ``(close[t] / close[t - period] - 1) * 100``.

    Parameters
    ----------
    close : ndarray, shape (n_bars,), float64
    period : int, >= 1

    Returns
    -------
    ndarray, shape (n_bars,), float64
        NaN for the first ``period`` bars.
    """
    out = np.empty(close.shape[0])
    roc_into(close, period, first_valid(close) + period, out)
    return out


@njit(cache=True)
def bbands(close, period, k):
    """Bollinger bands; equals ``talib.BBANDS(close, period, k, k, 0)``.

    That is ``timeperiod=period, nbdevup=k, nbdevdn=k, matype=0``: the SMA plus and
    minus ``k`` population standard deviations. As TA-Lib >= 0.6 the variance is
    taken from running sums of deviations from a shift (a recent window mean),
    re-centred on the window when the sums start to cancel, so it stays accurate on
    finely quoted, low-volatility series. Its rounding steps are not quite TA-Lib's
    (it divides by ``period`` where TA-Lib multiplies by ``1 / period``, and
    re-centres a bar later after a dominant bar), which :func:`stdev` follows
    exactly: the width equals TA-Lib's, and ``k * stdev(close, period)``, to
    rounding (1e-7 relative at worst, on short periods), not bit for bit.

    Parameters
    ----------
    close : ndarray, shape (n_bars,), float64
    period : int, >= 1
    k : float
        Width in standard deviations.

    Returns
    -------
    upper, middle, lower : ndarray, shape (n_bars,), float64
        NaN for the first ``period - 1`` bars.
    """
    n = close.shape[0]
    upper = np.empty(n)
    middle = np.empty(n)
    lower = np.empty(n)
    bbands_rows(close, period, k, upper, middle, lower)
    return upper, middle, lower


@njit(cache=True)
def bbands_rows(close, period, k, upper, middle, lower):
    """:func:`bbands` written into its three outputs (allocation-free)."""
    n = close.shape[0]
    first = first_valid(close) + period - 1
    sma_into(close, period, first, middle)
    if period < 1 or first >= n:
        fill_nan(upper, n)
        fill_nan(lower, n)
        return
    fill_nan(upper, first)
    fill_nan(lower, first)
    shift = close[first - period + 1]
    total1 = 0.0
    total2 = 0.0
    for t in range(first - period + 1, first):
        dev = close[t] - shift
        total1 += dev
        total2 += dev * dev
    to_recentre = _RECENTRE_BARS * period
    for t in range(first, n):
        dev = close[t] - shift
        total1 += dev
        total2 += dev * dev
        mean = total1 / period
        var = total2 / period - mean * mean
        to_recentre -= 1
        if var < _CANCELLING * (total2 / period) or to_recentre <= 0:
            shift, total1, total2 = _centred_sums(close, t - period + 1, t + 1)
            mean = total1 / period
            var = total2 / period - mean * mean
            if var < _NEGLIGIBLE * (total2 / period):
                var = 0.0
            to_recentre = _RECENTRE_BARS * period
        width = math.sqrt(var) * k
        upper[t] = middle[t] + width
        lower[t] = middle[t] - width
        dev = close[t - period + 1] - shift
        total1 -= dev
        total2 -= dev * dev
        if dev * dev > _DOMINANT * total2:
            to_recentre = 0  # the bar that left dominated the sums: re-centre next bar


@njit(cache=True)
def stdev(close, period):
    """Population standard deviation; equals ``talib.STDDEV(close, timeperiod=period, nbdev=1)``.

    Over the ``period`` bars ending at each bar, this one included, with TA-Lib's
    arithmetic step for step (bit for bit). A period of 1 (which TA-Lib refuses)
    gives 0.

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
    stdev_row(close, period, out)
    return out


@njit(cache=True)
def stdev_row(close, period, out):
    """:func:`stdev` written into ``out`` (allocation-free: also a CUDA device function)."""
    stdev_into(close, period, first_valid(close) + period - 1, out)


@njit(cache=True)
def stdev_into(x, period, first, out):
    """Population standard deviation of ``x`` over ``period`` bars into ``out[first:]``.

    The square root of TA-Lib's ``VAR`` (>= 0.6), step for step: running sums of
    deviations from a shift, and a fresh two-pass over the window (the shift moved to
    its mean) when the variance falls below ``_CANCELLING`` of the mean squared
    deviation, when the departing bar outweighs ``_DOMINANT`` times what is left, and
    every ``_RECENTRE_BARS`` periods. NaN before ``first``. ``out`` must not be ``x``.
    Needs ``first >= period - 1``; writes only NaN when ``period < 1``.
    """
    n = x.shape[0]
    if period < 1 or first >= n:
        fill_nan(out, n)
        return
    fill_nan(out, first)
    inv_period = 1.0 / period
    shift = x[first - period + 1]
    total1 = 0.0
    total2 = 0.0
    for t in range(first - period + 1, first):
        dev = x[t] - shift
        total1 += dev
        total2 += dev * dev
    to_reseed = _RECENTRE_BARS * period
    for t in range(first, n):
        dev = x[t] - shift
        total1 += dev
        total2 += dev * dev
        mean = total1 * inv_period
        var = total2 * inv_period - mean * mean
        dev = x[t - period + 1] - shift
        total1 -= dev
        total2 -= dev * dev
        to_reseed -= 1
        if (var < _CANCELLING * (total2 * inv_period) or dev * dev > _DOMINANT * total2
                or to_reseed <= 0):
            var, shift, total1, total2 = _reseeded(x, t - period + 1, t + 1, inv_period)
            to_reseed = _RECENTRE_BARS * period
        out[t] = math.sqrt(var)


@njit(cache=True)
def _reseeded(x, start, stop, inv_period):
    """TA-Lib ``VAR``'s two-pass over the window ``x[start:stop]``: its variance (0
    below ``_NEGLIGIBLE`` of the mean squared deviation), the new shift (the window
    mean), and the running sums without the window's first bar."""
    total = 0.0
    for t in range(start, stop):
        total += x[t]
    shift = total * inv_period
    total1 = 0.0
    total2 = 0.0
    for t in range(start, stop):
        dev = x[t] - shift
        total1 += dev
        total2 += dev * dev
    mean = total1 * inv_period
    var = total2 * inv_period - mean * mean
    if var < _NEGLIGIBLE * (total2 * inv_period):
        var = 0.0
    dev = x[start] - shift
    return var, shift, total1 - dev, total2 - dev * dev


@njit(cache=True)
def _centred_sums(x, start, stop):
    """``(mean, sum(x - mean), sum((x - mean)**2))`` over ``x[start:stop]``."""
    total = 0.0
    for t in range(start, stop):
        total += x[t]
    shift = total / (stop - start)
    total1 = 0.0
    total2 = 0.0
    for t in range(start, stop):
        dev = x[t] - shift
        total1 += dev
        total2 += dev * dev
    return shift, total1, total2


@njit(cache=True)
def atr(high, low, close, period):
    """Average true range; equals ``talib.ATR(high, low, close, timeperiod=period)``.

    The true range ``max(high, prev_close) - min(low, prev_close)`` from bar 1; its
    simple mean over bars ``1..period``, then Wilder's smoothing.

    Parameters
    ----------
    high, low, close : ndarray, shape (n_bars,), float64
    period : int, >= 1

    Returns
    -------
    ndarray, shape (n_bars,), float64
        NaN for the first ``period`` bars.
    """
    n = close.shape[0]
    out = np.empty(n)
    begin = first_valid3(high, low, close)
    first = begin + period
    if period < 1 or first >= n:
        fill_nan(out, n)
        return out
    fill_nan(out, first)
    value = 0.0
    for t in range(begin + 1, n):
        true_range = high[t] - low[t]
        true_range = max(true_range, abs(close[t - 1] - high[t]))
        true_range = max(true_range, abs(close[t - 1] - low[t]))
        if t < first:
            value += true_range
        elif t == first:
            value = (value + true_range) / period
            out[t] = value
        else:
            value = (value * (period - 1) + true_range) / period
            out[t] = value
    return out


#: The ``sign`` of :func:`_rolling_extreme_into` for a rolling max, and for a rolling min.
_HIGHEST = 1.0
_LOWEST = -1.0


@njit(inline="always", cache=True)
def _rolling_extreme_into(x, period, first, sign, out):
    """Max (``sign`` 1.0) or min (``sign`` -1.0) of ``x`` over the ``period`` bars ending
    at each bar, into ``out[first:]``.

    TA-Lib's ``MAX``/``MIN``: keep the index of the extreme, rescan when it leaves the
    window. Values are compared as ``sign * x`` and copied from ``x``: negation is exact
    and NaN compares false either way, so the min is found exactly as the max of ``-x``.
    Inlined, so a call's constant ``sign`` folds into a plain comparison (no multiply in
    the loop). ``out`` may be ``x``'s sibling but not ``x``.
    """
    n = x.shape[0]
    if period < 1 or first >= n:
        fill_nan(out, n)
        return
    fill_nan(out, first)
    best_idx = -1
    best = 0.0
    for t in range(first, n):
        trailing = t - period + 1
        if best_idx < trailing:
            best_idx = trailing
            best = x[trailing]
            for i in range(trailing + 1, t + 1):
                if sign * x[i] > sign * best:
                    best_idx = i
                    best = x[i]
        elif sign * x[t] >= sign * best:
            best_idx = t
            best = x[t]
        out[t] = best


@njit(cache=True)
def donchian(high, low, period):
    """Donchian channel; equals ``(talib.MAX(high, period), talib.MIN(low, period))``.

    Parameters
    ----------
    high, low : ndarray, shape (n_bars,), float64
    period : int, >= 1

    Returns
    -------
    upper, lower : ndarray, shape (n_bars,), float64
        Highest high and lowest low of the last ``period`` bars, this one included;
        NaN for the first ``period - 1`` bars.
    """
    upper = np.empty(high.shape[0])
    lower = np.empty(low.shape[0])
    donchian_rows(high, low, period, upper, lower)
    return upper, lower


@njit(cache=True)
def donchian_rows(high, low, period, upper, lower):
    """:func:`donchian` written into its two outputs (allocation-free)."""
    highest_row(high, period, upper)
    lowest_row(low, period, lower)


@njit(cache=True)
def highest(close, period):
    """Rolling maximum; equals ``talib.MAX(close, timeperiod=period)``.

    The highest value of the last ``period`` bars, this one included, of any
    series; a period of 1 (which TA-Lib refuses) gives the series itself.

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
    highest_row(close, period, out)
    return out


@njit(cache=True)
def highest_row(close, period, out):
    """:func:`highest` written into ``out`` (allocation-free: also a CUDA device function)."""
    _rolling_extreme_into(close, period, first_valid(close) + period - 1, _HIGHEST, out)


@njit(cache=True)
def lowest(close, period):
    """Rolling minimum; equals ``talib.MIN(close, timeperiod=period)``.

    The lowest value of the last ``period`` bars, this one included, of any
    series; a period of 1 (which TA-Lib refuses) gives the series itself.

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
    lowest_row(close, period, out)
    return out


@njit(cache=True)
def lowest_row(close, period, out):
    """:func:`lowest` written into ``out`` (allocation-free: also a CUDA device function)."""
    _rolling_extreme_into(close, period, first_valid(close) + period - 1, _LOWEST, out)


@njit(cache=True)
def stoch(high, low, close, k_period, k_smooth, d_period):
    """Slow stochastic; equals ``talib.STOCH(high, low, close, k_period, k_smooth, 0, d_period)``.

    The TA-Lib call in full: ``talib.STOCH(high, low, close, fastk_period=k_period,
    slowk_period=k_smooth, slowk_matype=0, slowd_period=d_period, slowd_matype=0)``.
    Fast %K is
    ``(close - lowest low) / ((highest high - lowest low) / 100)`` over ``k_period``
    bars (0 on a flat range); %K is its SMA over ``k_smooth`` bars, %D the SMA of
    %K over ``d_period`` bars. Both start where %D does.

    Parameters
    ----------
    high, low, close : ndarray, shape (n_bars,), float64
    k_period, k_smooth, d_period : int, >= 1

    Returns
    -------
    k, d : ndarray, shape (n_bars,), float64
        NaN for the first ``k_period + k_smooth + d_period - 3`` bars.
    """
    n = close.shape[0]
    buf_a = np.empty(n)
    buf_b = np.empty(n)
    start = first_valid3(high, low, close) + k_period - 1
    first = start + k_smooth - 1 + d_period - 1
    if k_period < 1 or k_smooth < 1 or d_period < 1 or first >= n:
        fill_nan(buf_a, n)
        fill_nan(buf_b, n)
        return buf_a, buf_b
    _rolling_extreme_into(high, k_period, start, _HIGHEST, buf_a)
    _rolling_extreme_into(low, k_period, start, _LOWEST, buf_b)
    for t in range(start, n):
        diff = (buf_a[t] - buf_b[t]) / 100.0
        buf_a[t] = (close[t] - buf_b[t]) / diff if diff != 0.0 else 0.0
    sma_into(buf_a, k_smooth, start + k_smooth - 1, buf_b)  # %K into buf_b
    sma_into(buf_b, d_period, first, buf_a)  # %D into buf_a
    fill_nan(buf_b, first)
    return buf_b, buf_a
