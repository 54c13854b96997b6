"""rsi: long when RSI(period) crosses below ``lower``, exit when it crosses above ``upper``.

Shorts mirror it: enter when RSI crosses above ``upper``, exit when it crosses below
``lower``.
"""

from numba import njit

from ..core.simulate import cross_above, cross_below
from .base import Indicator, Param, Strategy, param_position

PARAMS = (Param("period", "int", 2, 100_000), Param("lower", "float", 0.0, 100.0),
          Param("upper", "float", 0.0, 100.0))
#: Where ``fparams`` holds the levels (module constants: numba compiles them as literals).
LOWER = param_position(PARAMS, "lower")
UPPER = param_position(PARAMS, "upper")


@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    """Crosses of RSI (row ``rows[0]``) through the levels ``lower`` and ``upper``."""
    # no branch (a loop over t reads the row once): at t = 0 the bar is compared with
    # itself, which is never a cross
    row = rows[0]
    prev, now = ind[row, max(t - 1, 0)], ind[row, t]
    lower, upper = fparams[LOWER], fparams[UPPER]
    down_through_lower = cross_below(prev, lower, now, lower)
    up_through_upper = cross_above(prev, upper, now, upper)
    return down_through_lower, up_through_upper, up_through_upper, down_through_lower


STRATEGY = Strategy(
    name="rsi",
    params=PARAMS,
    indicators=(Indicator("rsi", ("period",)),),
    signal=signal,
    doc=__doc__,
    requires=(("lower", "<", "upper"),),
)
