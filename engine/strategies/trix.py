"""trix: long when TRIX(period) crosses above its signal line EMA(TRIX, signal), flat
(or short) when it crosses below."""

from numba import njit, prange

from ..simulate import cross_above, cross_below, scan_flat, simulate
from .base import Indicator, Param, Strategy


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Crosses of TRIX (row ``rows[0]``) over its signal line (``rows[1]``) at bar t."""
    if t == 0:
        return False, False, False, False
    line, sig = rows[0], rows[1]
    up = cross_above(ind[line, t - 1], ind[sig, t - 1], ind[line, t], ind[sig, t])
    down = cross_below(ind[line, t - 1], ind[sig, t - 1], ind[line, t], ind[sig, t])
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
    name="trix",
    params=(Param("period", "int", 1, 100_000), Param("signal", "int", 2, 100_000)),
    indicators=(Indicator("trix", ("period",)), Indicator("trix_signal", ("period", "signal"))),
    kernel=kernel,
    doc=__doc__,
)
