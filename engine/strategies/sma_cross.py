"""sma_cross: long when SMA(fast) crosses above SMA(slow), flat (or short) when below."""

from .base import Indicator, Param, Strategy
from .crossover import signal

STRATEGY = Strategy(
    name="sma_cross",
    params=(Param("fast", "int", 2, 100_000), Param("slow", "int", 2, 100_000)),
    indicators=(Indicator("sma", ("fast",)), Indicator("sma", ("slow",))),
    signal=signal,
    doc=__doc__,
)
