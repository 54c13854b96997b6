"""sma_trend: long when the close crosses above SMA(period), short when it crosses below."""

from numba import njit

from barsweep.engine import Indicator, Param, Strategy, register
from barsweep.engine.core.simulate import cross_above, cross_below


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """``(long_entry, long_exit, short_entry, short_exit)`` at the close of bar t."""
    if t == 0:
        return False, False, False, False
    close, sma = bars[3], ind[rows[0]]
    up = cross_above(close[t - 1], sma[t - 1], close[t], sma[t])
    down = cross_below(close[t - 1], sma[t - 1], close[t], sma[t])
    return up, down, down, up


STRATEGY = Strategy(
    name="sma_trend",
    params=(Param("period", "int", 2, 100_000),),
    indicators=(Indicator("sma", ("period",)),),
    signal=signal,
    doc=__doc__,
)
register(STRATEGY)
