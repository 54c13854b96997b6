"""Reference signal rules of every strategy, written from their descriptions with
TA-Lib computing the indicators: ``(long_entry, long_exit, short_entry, short_exit)``
lists, independent of barsweep's kernels."""

from __future__ import annotations

import numpy as np
import talib


def _crosses(a, b):
    n = len(a)
    up, down = [False] * n, [False] * n
    for t in range(1, n):
        up[t] = bool(a[t - 1] < b[t - 1] and a[t] > b[t])
        down[t] = bool(a[t - 1] > b[t - 1] and a[t] < b[t])
    return up, down


def _events(up, down):
    """Trend-following: long on up, short on down."""
    return up, down, down, up


def ref_signals(name, bars, params):
    close = np.asarray(bars["close"], dtype=float)
    high = np.asarray(bars["high"], dtype=float)
    low = np.asarray(bars["low"], dtype=float)
    n = len(close)
    if name == "buy_and_hold":
        return [t == 0 for t in range(n)], [False] * n, [False] * n, [False] * n
    if name in ("ema_cross", "sma_cross"):
        fn = talib.EMA if name == "ema_cross" else talib.SMA
        return _events(*_crosses(fn(close, params["fast"]), fn(close, params["slow"])))
    if name == "rsi":
        r = talib.RSI(close, params["period"])
        lower = np.full(n, params["lower"])
        upper = np.full(n, params["upper"])
        _, below_lower = _crosses(r, lower)
        above_upper, _ = _crosses(r, upper)
        return below_lower, above_upper, above_upper, below_lower
    if name == "trix":
        line = talib.TRIX(close, params["period"])
        return _events(*_crosses(line, talib.EMA(line, params["signal"])))
    if name == "macd":
        _, _, hist = talib.MACD(close, params["fast"], params["slow"], params["signal"])
        return _events(*_crosses(hist, np.zeros(n)))
    if name == "bollinger":
        upper, middle, lower = talib.BBANDS(close, params["period"], params["k"], params["k"], 0)
        return ([bool(c < lo) for c, lo in zip(close, lower)],
                [bool(c >= m) for c, m in zip(close, middle)],
                [bool(c > u) for c, u in zip(close, upper)],
                [bool(c <= m) for c, m in zip(close, middle)])
    if name == "donchian":
        upper, lower = talib.MAX(high, params["period"]), talib.MIN(low, params["period"])
        up = [False] + [bool(close[t] > upper[t - 1]) for t in range(1, n)]
        down = [False] + [bool(close[t] < lower[t - 1]) for t in range(1, n)]
        return _events(up, down)
    raise KeyError(name)


#: A few parameter sets of every strategy, for tests.
EXAMPLES = {
    "buy_and_hold": [{}],
    "sma_cross": [dict(fast=5, slow=20), dict(fast=10, slow=50)],
    "ema_cross": [dict(fast=3, slow=15), dict(fast=12, slow=40)],
    "rsi": [dict(period=14, lower=30.0, upper=70.0), dict(period=5, lower=20.0, upper=60.0)],
    "trix": [dict(period=5, signal=3), dict(period=12, signal=9)],
    "macd": [dict(fast=12, slow=26, signal=9), dict(fast=5, slow=13, signal=4)],
    "bollinger": [dict(period=20, k=2.0), dict(period=10, k=1.5)],
    "donchian": [dict(period=20), dict(period=7)],
}
