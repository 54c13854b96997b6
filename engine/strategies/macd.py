"""macd: long when the MACD histogram turns positive, flat (or short) when it turns
negative (TA-Lib MACD(fast, slow, signal))."""

from numba import njit, prange

from ..simulate import cross_above, cross_below, scan_flat, simulate
from .base import Indicator, Param, Strategy


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Sign crosses of the histogram (row ``rows[0]``) through 0 at bar t."""
    if t == 0:
        return False, False, False, False
    prev, now = ind[rows[0], t - 1], ind[rows[0], t]
    up = cross_above(prev, 0.0, now, 0.0)
    down = cross_below(prev, 0.0, now, 0.0)
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
    name="macd",
    params=(Param("fast", "int", 2, 100_000), Param("slow", "int", 2, 100_000),
            Param("signal", "int", 1, 100_000)),
    indicators=(Indicator("macd_hist", ("fast", "slow", "signal")),),
    kernel=kernel,
    signal=signal,
    scan=scan,
    doc=__doc__,
    requires=(("fast", "<", "slow"),),
)
