"""ema_cross: long when EMA(fast) crosses above EMA(slow), flat when it crosses below."""

from numba import njit, prange

from ..simulate import cross_above, cross_below, scan_flat, simulate
from .base import Indicator, Param, Strategy


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Crosses of the fast EMA (row ``rows[0]``) over the slow one (``rows[1]``) at bar t."""
    if t == 0:
        return False, False, False, False
    fast, slow = rows[0], rows[1]
    up = cross_above(ind[fast, t - 1], ind[slow, t - 1], ind[fast, t], ind[slow, t])
    down = cross_below(ind[fast, t - 1], ind[slow, t - 1], ind[fast, t], ind[slow, t])
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
    name="ema_cross",
    params=(Param("fast", "int", 2, 100_000), Param("slow", "int", 2, 100_000)),
    indicators=(Indicator("ema", ("fast",)), Indicator("ema", ("slow",))),
    kernel=kernel,
    doc=__doc__,
)
