"""sma_trend: long when the close crosses above SMA(period), short when it crosses below."""

from numba import njit, prange

from barsweep.engine import Indicator, Param, Strategy, register
from barsweep.engine.simulate import cross_above, cross_below, scan_flat, simulate


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """``(long_entry, long_exit, short_entry, short_exit)`` at the close of bar t."""
    if t == 0:
        return False, False, False, False
    close, sma = bars[3], ind[rows[0]]
    up = cross_above(close[t - 1], sma[t - 1], close[t], sma[t])
    down = cross_below(close[t - 1], sma[t - 1], close[t], sma[t])
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
    name="sma_trend",
    params=(Param("period", "int", 2, 100_000),),
    indicators=(Indicator("sma", ("period",)),),
    kernel=kernel,
    signal=signal,
    scan=scan,
    doc=__doc__,
)
register(STRATEGY)
