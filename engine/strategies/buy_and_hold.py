"""buy_and_hold: enter on the first bar's signal, hold to the end."""

from numba import njit

from .base import Strategy


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Enter at bar 0 (filled at its close, or at bar 1's open); never exit."""
    return t == 0, False, False, False


STRATEGY = Strategy(name="buy_and_hold", params=(), indicators=(), signal=signal, doc=__doc__)
