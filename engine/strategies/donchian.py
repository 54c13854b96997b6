"""donchian: breakout. Long when the close breaks above the highest high of the previous
``period`` bars, exit (or go short) when it breaks below the lowest low."""

from numba import njit, prange

from ..simulate import scan_flat, simulate
from .base import Indicator, Param, Strategy


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Close (``bars[3]``) against the channel of bar t-1: rows upper, lower."""
    if t == 0:
        return False, False, False, False
    close = bars[3][t]
    up = close > ind[rows[0], t - 1]
    down = close < ind[rows[1], t - 1]
    return up, down, down, up


@njit(cache=True)
def scan(ind, rows, fparams, bars, t, n, allow_long, allow_short):
    return scan_flat(signal, ind, rows, fparams, bars, t, n, allow_long, allow_short)


@njit(parallel=True, cache=True)
def kernel(bars, ind, rows, fparams, stops, xp, out, rec_equity, rec_trades):
    for c in prange(rows.shape[0]):
        simulate(signal, scan, bars, ind, rows[c], fparams[c], stops[c], xp, out[c],
                 rec_equity, rec_trades)


STRATEGY = Strategy(
    name="donchian",
    params=(Param("period", "int", 2, 100_000),),
    indicators=(Indicator("donchian_upper", ("period",)),
                Indicator("donchian_lower", ("period",))),
    kernel=kernel,
    signal=signal,
    scan=scan,
    doc=__doc__,
)
