"""The rule shared by every two-line crossover strategy (sma_cross, ema_cross, trix):
long when line ``rows[0]`` crosses above line ``rows[1]``, flat or short when it crosses
below. One compiled kernel serves them all; each strategy only declares its lines."""

from numba import njit

from ..simulate import cross_above, cross_below


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Crosses of line ``rows[0]`` over line ``rows[1]`` at bar t."""
    if t == 0:
        return False, False, False, False
    a, b = rows[0], rows[1]
    up = cross_above(ind[a, t - 1], ind[b, t - 1], ind[a, t], ind[b, t])
    down = cross_below(ind[a, t - 1], ind[b, t - 1], ind[a, t], ind[b, t])
    return up, down, down, up
