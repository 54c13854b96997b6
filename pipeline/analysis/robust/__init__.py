"""Ranking that resists overfitting: probabilistic and deflated Sharpe ratios
(:mod:`.sharpe`), the probability of backtest overfitting by CSCV (:mod:`.cscv`),
parameter plateaus (:mod:`.plateau`) and Pareto fronts (:mod:`.fronts`).

Plain numpy and xarray over a results store's arrays: nothing here reads a store or
prints. The formulas, their sources and the conventions chosen are in docs/ROBUST.md.
"""

from .cscv import PBOResult, pbo
from .fronts import pareto
from .plateau import smooth
from .sharpe import (
    EULER_GAMMA,
    deflated_sharpe,
    dsr_columns,
    expected_max_sharpe,
    has_dsr_inputs,
    normal_cdf,
    probabilistic_sharpe,
)

__all__ = ["EULER_GAMMA", "PBOResult", "deflated_sharpe", "dsr_columns",
           "expected_max_sharpe", "has_dsr_inputs", "normal_cdf", "pareto", "pbo",
           "probabilistic_sharpe", "smooth"]
