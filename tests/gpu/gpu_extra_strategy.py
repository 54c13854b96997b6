"""wma_band: a test strategy on indicators the GPU hoists on the host (WMA, ATR), so the
simulator tests cover that fallback too. Registered on import."""

from numba import njit

from barsweep.engine import Indicator, Param, Strategy, register
from barsweep.engine.core.simulate import cross_above, cross_below


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Long when the close crosses above WMA + ATR, short when below WMA - ATR."""
    if t == 0:
        return False, False, False, False
    close, wma, atr = bars[3], ind[rows[0]], ind[rows[1]]
    up = cross_above(close[t - 1], wma[t - 1] + atr[t - 1], close[t], wma[t] + atr[t])
    down = cross_below(close[t - 1], wma[t - 1] - atr[t - 1], close[t], wma[t] - atr[t])
    return up, down, down, up


register(Strategy(
    name="wma_band",
    params=(Param("period", "int", 2, 10_000), Param("atr_period", "int", 2, 10_000)),
    indicators=(Indicator("wma", ("period",)), Indicator("atr", ("atr_period",))),
    signal=signal,
    doc=__doc__,
))
