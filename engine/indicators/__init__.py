"""barsweep.engine.indicators: one registry of indicators (registry), each a CPU kernel
(numba) and a GPU fill; the moving averages (ma) and the oscillators (osc)."""

from .registry import INDICATORS, IndicatorFn, compute_indicator, ema, sma

__all__ = ["INDICATORS", "IndicatorFn", "compute_indicator", "ema", "sma"]
