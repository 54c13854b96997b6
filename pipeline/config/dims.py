"""The dims of a run's results: labels first, then the grid's parameters.

A metric variable of a results store is over ``(symbol, *params)``, or over
``(symbol, window, sample, *params)`` in a walk-forward run; the per-segment return
sums (``seg_sum_r``, ``seg_sum_r2``) are over ``(symbol, segment, *params)``; a
portfolio's ``member_n_trades`` and ``member_exposure`` over ``(member, *params)``. The
parameters are the grid's axes, in the spec's order.
"""

from __future__ import annotations

__all__ = ["NON_PARAM_DIMS", "SAMPLES"]

#: Dims of a results store that are not parameters, in the order they lead: they label
#: rows, and are never ranked over, smoothed along or taken for a grid axis.
NON_PARAM_DIMS = ("symbol", "window", "sample", "segment", "member")

#: The samples of a walk-forward run, along its ``sample`` dim.
SAMPLES = ("train", "test")
