"""ema_cross: long when EMA(fast) crosses above EMA(slow), flat (or short) when below."""

from .base import Indicator, Param, Strategy
from .crossover import signal

STRATEGY = Strategy(
    name="ema_cross",
    params=(Param("fast", "int", 2, 100_000), Param("slow", "int", 2, 100_000)),
    indicators=(Indicator("ema", ("fast",)), Indicator("ema", ("slow",))),
    signal=signal,
    doc=__doc__,
)
