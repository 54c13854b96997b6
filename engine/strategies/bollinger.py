"""bollinger: mean reversion on Bollinger bands BBANDS(period, k).

Long when the close is below the lower band, exit when it is back at or above the
middle band; shorts mirror it (enter above the upper band, exit at or below the
middle).
"""

from numba import njit, prange

from ..simulate import scan_flat, simulate
from .base import Indicator, Param, Strategy


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Close (``bars[3]``) against the bands: rows upper, middle, lower."""
    close = bars[3][t]
    upper, middle, lower = ind[rows[0], t], ind[rows[1], t], ind[rows[2], t]
    return close < lower, close >= middle, close > upper, close <= middle


@njit(cache=True)
def scan(ind, rows, fparams, bars, t, n, allow_long, allow_short):
    return scan_flat(signal, ind, rows, fparams, bars, t, n, allow_long, allow_short)


@njit(parallel=True, cache=True)
def kernel(bars, ind, rows, fparams, stops, xp, out, rec_equity, rec_trades):
    for c in prange(rows.shape[0]):
        simulate(signal, scan, bars, ind, rows[c], fparams[c], stops[c], xp, out[c],
                 rec_equity, rec_trades)


STRATEGY = Strategy(
    name="bollinger",
    params=(Param("period", "int", 2, 100_000), Param("k", "float", 0.1, 10.0)),
    indicators=(Indicator("bb_upper", ("period", "k")), Indicator("bb_middle", ("period", "k")),
                Indicator("bb_lower", ("period", "k"))),
    kernel=kernel,
    signal=signal,
    scan=scan,
    doc=__doc__,
)
