"""buy_and_hold: enter on the first bar's signal, hold to the end."""

from numba import njit, prange

from ..simulate import scan_flat, simulate
from .base import Strategy


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Enter at bar 0 (filled at its close, or at bar 1's open); never exit."""
    return t == 0, False, False, False


@njit(cache=True)
def scan(ind, rows, fparams, bars, t, n, allow_long, allow_short):
    return scan_flat(signal, ind, rows, fparams, bars, t, n, allow_long, allow_short)


@njit(parallel=True, cache=True)
def kernel(bars, ind, rows, fparams, stops, xp, out, rec_equity, rec_trades):
    for c in prange(rows.shape[0]):
        simulate(signal, scan, bars, ind, rows[c], fparams[c], stops[c], xp, out[c],
                 rec_equity, rec_trades)


STRATEGY = Strategy(name="buy_and_hold", params=(), indicators=(), kernel=kernel, doc=__doc__,
                    signal=signal, scan=scan)
