"""The metrics of an equity curve, by the engine's accumulators and ``metrics.finalize``
(walk-forward's stitched out-of-sample curve:
:func:`barsweep.pipeline.analysis.walkforward.walkforward`)."""

from __future__ import annotations

from numba import njit

from ..core.metrics import DD_ACC0, RET_ACC0, TRADE_ACC0, acc_drawdown, acc_returns, finalize


@njit(cache=True)
def curve_metrics_cpu(growth, ppy, out):
    """Write the metrics of the equity curve ``growth`` (float64, shape (n,), n >= 1, in
    units of the starting cash) into ``out`` (shape (N_METRICS,)), as a backtest's are
    made: bar returns against the previous bar (the first against 1), 0 after a ruin;
    the drawdown against the running peak. No trades, no benchmark (their metrics NaN)."""
    ret_acc = RET_ACC0
    dd_acc = DD_ACC0
    prev = 1.0
    for value in growth:
        ret_acc = acc_returns(ret_acc, value / prev - 1.0 if prev > 0.0 else 0.0, 0.0)
        dd_acc = acc_drawdown(dd_acc, value)
        prev = value
    finalize(out, len(growth), ppy, 1.0, prev, ret_acc, dd_acc, TRADE_ACC0, 0,
             (0.0, 0.0), prev <= 0.0)
