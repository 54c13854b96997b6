"""The rule shared by every two-line crossover strategy (sma_cross, ema_cross, trix):
long when line ``rows[0]`` crosses above line ``rows[1]``, flat or short when it crosses
below. One compiled kernel serves them all; each strategy only declares its lines."""

from numba import njit

from ..core.simulate import cross_above, cross_below


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Crosses of line ``rows[0]`` over line ``rows[1]`` at bar t."""
    a, b = rows[0], rows[1]
    # no branch (a loop over t reads the rows once): at t = 0 the bar is compared with
    # itself, which is never a cross
    p = max(t - 1, 0)
    up = cross_above(ind[a, p], ind[b, p], ind[a, t], ind[b, t])
    down = cross_below(ind[a, p], ind[b, p], ind[a, t], ind[b, t])
    return up, down, down, up
