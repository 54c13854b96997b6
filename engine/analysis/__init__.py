"""barsweep.engine.analysis: the compiled kernels of the analyses of a results store
(numba): cscv (the probability of backtest overfitting), fronts (Pareto fronts), sharpe
(the normal CDF of PSR and DSR), curves (the metrics of walk-forward's stitched curve)."""

from .cscv import cscv_below_cpu, cscv_best_cpu, cscv_combo_cpu
from .curves import curve_metrics_cpu
from .fronts import front_cpu
from .sharpe import normal_cdf_cpu

__all__ = ["cscv_below_cpu", "cscv_best_cpu", "cscv_combo_cpu", "curve_metrics_cpu",
           "front_cpu", "normal_cdf_cpu"]
