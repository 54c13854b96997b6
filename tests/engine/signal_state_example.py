"""sma_hold: from flat, long above SMA(period) and short below it; a position is closed
after ``hold`` bars, or at a close that has moved ``k`` against its entry price."""

from numba import njit

from barsweep.engine import Indicator, Param, Strategy, register


@njit(cache=True)
def signal(ind, rows, fparams, bars, t, position, entry_price, entry_bar):
    """``(long_entry, long_exit, short_entry, short_exit)`` at the close of bar t, given
    the position then (``entry_price`` and ``entry_bar`` only mean something when
    ``position != 0.0``)."""
    close, sma = bars[3][t], ind[rows[0], t]
    hold, k = fparams[1], fparams[2]
    flat = position == 0.0
    aged = not flat and t - entry_bar >= hold
    long_exit = position > 0.0 and (aged or close < entry_price * (1.0 - k))
    short_exit = position < 0.0 and (aged or close > entry_price * (1.0 + k))
    return flat and close > sma, long_exit, flat and close < sma, short_exit


STRATEGY = Strategy(
    name="sma_hold",
    params=(Param("period", "int", 2, 100_000), Param("hold", "int", 1, 100_000),
            Param("k", "float", 0.0, 1.0)),
    indicators=(Indicator("sma", ("period",)),),
    signal=signal,
    doc=__doc__,
)
register(STRATEGY)
