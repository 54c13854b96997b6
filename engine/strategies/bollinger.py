"""bollinger: mean reversion on Bollinger bands BBANDS(period, k).

Long when the close is below the lower band, exit when it is back at or above the
middle band; shorts mirror it (enter above the upper band, exit at or below the
middle).
"""

from numba import njit

from .base import Indicator, Param, Strategy


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Close (``bars.close``) against the bands: rows upper, middle, lower."""
    close = bars.close[t]
    upper, middle, lower = ind[rows[0], t], ind[rows[1], t], ind[rows[2], t]
    return close < lower, close >= middle, close > upper, close <= middle


STRATEGY = Strategy(
    name="bollinger",
    params=(Param("period", "int", 2, 100_000), Param("k", "float", 0.1, 10.0)),
    indicators=(Indicator("bb_upper", ("period", "k")), Indicator("bb_middle", ("period", "k")),
                Indicator("bb_lower", ("period", "k"))),
    signal=signal,
    doc=__doc__,
)
