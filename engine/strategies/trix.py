"""trix: long when TRIX(period) crosses above its signal line EMA(TRIX, signal), flat
(or short) when it crosses below."""

from .base import Indicator, Param, Strategy
from .crossover import signal

STRATEGY = Strategy(
    name="trix",
    params=(Param("period", "int", 1, 100_000), Param("signal", "int", 2, 100_000)),
    indicators=(Indicator("trix", ("period",)), Indicator("trix_signal", ("period", "signal"))),
    signal=signal,
    doc=__doc__,
)
