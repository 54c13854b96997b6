"""The rule shared by every two-line crossover strategy (sma_cross, ema_cross, trix):
long when line ``rows[0]`` crosses above line ``rows[1]``, flat or short when it crosses
below. One compiled kernel serves them all; each strategy only declares its lines."""

from numba import njit, prange

from ..simulate import cross_above, cross_below, scan_flat, simulate


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Crosses of line ``rows[0]`` over line ``rows[1]`` at bar t."""
    if t == 0:
        return False, False, False, False
    a, b = rows[0], rows[1]
    up = cross_above(ind[a, t - 1], ind[b, t - 1], ind[a, t], ind[b, t])
    down = cross_below(ind[a, t - 1], ind[b, t - 1], ind[a, t], ind[b, t])
    return up, down, down, up


@njit(cache=True)
def scan(ind, rows, fparams, bars, t, n, allow_long, allow_short):
    return scan_flat(signal, ind, rows, fparams, bars, t, n, allow_long, allow_short)


@njit(parallel=True, cache=True)
def kernel(bars, ind, rows, fparams, stops, xp, out, rec_equity, rec_trades):
    for c in prange(rows.shape[0]):
        simulate(signal, scan, bars, ind, rows[c], fparams[c], stops[c], xp, out[c],
                 rec_equity, rec_trades)
