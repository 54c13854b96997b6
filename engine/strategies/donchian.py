"""donchian: breakout. Long when the close breaks above the highest high of the previous
``period`` bars, exit (or go short) when it breaks below the lowest low."""

from numba import njit

from .base import Indicator, Param, Strategy


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Close (``bars.close``) against the channel of bar t-1: rows upper, lower."""
    if t == 0:
        return False, False, False, False
    close = bars.close[t]
    up = close > ind[rows[0], t - 1]
    down = close < ind[rows[1], t - 1]
    return up, down, down, up


STRATEGY = Strategy(
    name="donchian",
    params=(Param("period", "int", 2, 100_000),),
    indicators=(Indicator("donchian_upper", ("period",)),
                Indicator("donchian_lower", ("period",))),
    signal=signal,
    doc=__doc__,
)
