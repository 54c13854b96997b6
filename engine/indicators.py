"""Indicators with TA-Lib's conventions, as numba kernels.

Each function takes float64 arrays and returns a new float64 array of the same
length, NaN through the warm-up, and names the TA-Lib call it equals (the test
oracle). Inputs are validated bars: finite, positive prices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit


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
        NaN for the first ``period - 1`` bars.
    """
    n = close.shape[0]
    out = np.full(n, np.nan)
    if period < 1 or n < period:
        return out
    total = 0.0
    for t in range(period):
        total += close[t]
    out[period - 1] = total / period
    for t in range(period, n):
        total += close[t] - close[t - period]
        out[t] = total / period
    return out


@njit(cache=True)
def ema(close, period):
    """Exponential moving average; equals ``talib.EMA(close, timeperiod=period)``.

    Seeded with the simple mean of the first ``period`` values at index
    ``period - 1``, then ``alpha = 2 / (period + 1)``.

    Parameters
    ----------
    close : ndarray, shape (n_bars,), float64
    period : int, >= 1

    Returns
    -------
    ndarray, shape (n_bars,), float64
        NaN for the first ``period - 1`` bars.
    """
    n = close.shape[0]
    out = np.full(n, np.nan)
    if period < 1 or n < period:
        return out
    total = 0.0
    for t in range(period):
        total += close[t]
    value = total / period
    out[period - 1] = value
    alpha = 2.0 / (period + 1.0)
    for t in range(period, n):
        value = (close[t] - value) * alpha + value
        out[t] = value
    return out


@dataclass(frozen=True)
class IndicatorFn:
    """An indicator a strategy can hoist: the kernel and the bar columns it reads."""

    fn: Callable
    inputs: tuple[str, ...]


INDICATORS: dict[str, IndicatorFn] = {
    "sma": IndicatorFn(sma, ("close",)),
    "ema": IndicatorFn(ema, ("close",)),
}
