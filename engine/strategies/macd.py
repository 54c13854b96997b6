"""macd: long when the MACD histogram turns positive, flat (or short) when it turns
negative (TA-Lib MACD(fast, slow, signal))."""

from numba import njit

from ..core.simulate import cross_above, cross_below
from .base import Indicator, Param, Strategy


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Sign crosses of the histogram (row ``rows[0]``) through 0 at bar t."""
    # no branch (a loop over t reads the row once): at t = 0 the bar is compared with
    # itself, which is never a cross
    row = rows[0]
    prev, now = ind[row, max(t - 1, 0)], ind[row, t]
    up = cross_above(prev, 0.0, now, 0.0)
    down = cross_below(prev, 0.0, now, 0.0)
    return up, down, down, up


STRATEGY = Strategy(
    name="macd",
    params=(Param("fast", "int", 2, 100_000), Param("slow", "int", 2, 100_000),
            Param("signal", "int", 1, 100_000)),
    indicators=(Indicator("macd_hist", ("fast", "slow", "signal")),),
    signal=signal,
    doc=__doc__,
    requires=(("fast", "<", "slow"),),
)
