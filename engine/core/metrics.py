"""The metric table (docs/RESULTS.md): names, ranking direction and the accumulators.

The accumulators are plain functions on scalars and tuples, compiled with numba
for the CPU and, by :mod:`barsweep.engine.gpu.sweep`, as numba.cuda device functions: one
arithmetic source.
Per-bar returns are ``r_t = equity_t / equity_(t-1) - 1`` with
``equity_(-1) = init_cash``; ``b_t`` are the buy-and-hold returns of the same bars.
"""

from __future__ import annotations

import math

from numba import njit

METRICS: tuple[str, ...] = (
    "total_return",
    "cagr",
    "volatility",
    "sharpe",
    "sortino",
    "max_drawdown",
    "calmar",
    "ulcer_index",
    "n_trades",
    "win_rate",
    "profit_factor",
    "avg_trade_return",
    "exposure",
    "alpha",
    "beta",
    "skew",
    "kurtosis",
    "ruined",
)

#: What each metric is, for people and tools (the results' variable attributes):
#: ``(long_name, units)``; units are None for pure numbers.
METRIC_INFO = {
    "total_return": ("total return: final equity / initial cash - 1", "fraction"),
    "cagr": ("compound annual growth rate", "fraction per year"),
    "volatility": ("annualised standard deviation of the bar returns", "fraction"),
    "sharpe": ("annualised Sharpe ratio of the bar returns (risk-free 0)", None),
    "sortino": ("annualised Sortino ratio of the bar returns", None),
    "max_drawdown": ("deepest fall of equity from its running peak (<= 0)", "fraction"),
    "calmar": ("cagr / |max_drawdown|", None),
    "ulcer_index": ("root mean square drawdown", "percent"),
    "n_trades": ("round trips, an open one at the end included", "trades"),
    "win_rate": ("winning trades / n_trades", "fraction"),
    "profit_factor": ("gross profit / gross loss", None),
    "avg_trade_return": ("mean return of a trade on its entry notional", "fraction"),
    "exposure": ("bars with a position open / bars", "fraction"),
    "alpha": ("annualised CAPM alpha against buy-and-hold of the same bars", "fraction per year"),
    "beta": ("CAPM beta against buy-and-hold of the same bars", None),
    "skew": ("skewness of the bar returns (population)", None),
    "kurtosis": ("raw kurtosis of the bar returns (normal = 3)", None),
    "ruined": ("1 if equity reached zero, else 0", None),
}
N_METRICS = len(METRICS)
METRIC_INDEX = {name: i for i, name in enumerate(METRICS)}

# Each metric's column in ``out``: module-level ints, so numba compiles them as constants.
M_TOTAL_RETURN = METRIC_INDEX["total_return"]
M_CAGR = METRIC_INDEX["cagr"]
M_VOLATILITY = METRIC_INDEX["volatility"]
M_SHARPE = METRIC_INDEX["sharpe"]
M_SORTINO = METRIC_INDEX["sortino"]
M_MAX_DRAWDOWN = METRIC_INDEX["max_drawdown"]
M_CALMAR = METRIC_INDEX["calmar"]
M_ULCER_INDEX = METRIC_INDEX["ulcer_index"]
M_N_TRADES = METRIC_INDEX["n_trades"]
M_WIN_RATE = METRIC_INDEX["win_rate"]
M_PROFIT_FACTOR = METRIC_INDEX["profit_factor"]
M_AVG_TRADE_RETURN = METRIC_INDEX["avg_trade_return"]
M_EXPOSURE = METRIC_INDEX["exposure"]
M_ALPHA = METRIC_INDEX["alpha"]
M_BETA = METRIC_INDEX["beta"]
M_RUINED = METRIC_INDEX["ruined"]
M_SKEW = METRIC_INDEX["skew"]
M_KURTOSIS = METRIC_INDEX["kurtosis"]

#: Metrics where a smaller value ranks first. Every other metric ranks descending
#: (max_drawdown is <= 0, so descending puts the shallowest drawdown first).
LOWER_IS_BETTER = frozenset({"volatility", "ulcer_index", "ruined"})

#: Metrics whose best value a combo that never trades gets for nothing (a flat equity
#: curve has no volatility, no drawdown, no ruin): rankings by them put such combos last.
BEST_WHEN_IDLE = frozenset({"volatility", "ulcer_index", "max_drawdown", "ruined"})

RET_ACC0 = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
DD_ACC0 = (-math.inf, 0.0, 0.0, 0.0, 0.0)
TRADE_ACC0 = (0.0, 0.0, 0.0, 0.0, 0.0)


@njit(cache=True)
def acc_returns(acc, r, b):
    """Add bar return ``r`` (benchmark ``b``) to ``(sum r, sum r², sum min(r,0)², sum r·b,
    sum r³, sum r⁴)``."""
    s_r, s_r2, s_neg2, s_rb, s_r3, s_r4 = acc
    neg = r if r < 0.0 else 0.0
    r2 = r * r
    return (s_r + r, s_r2 + r2, s_neg2 + neg * neg, s_rb + r * b, s_r3 + r2 * r,
            s_r4 + r2 * r2)


@njit(cache=True)
def acc_returns_held(acc, b):
    """``acc_returns(acc, b, b)``: a bar held all-in long returns the benchmark's ``b``."""
    s_r, s_r2, s_neg2, s_rb, s_r3, s_r4 = acc
    neg = b if b < 0.0 else 0.0
    b2 = b * b
    return (s_r + b, s_r2 + b2, s_neg2 + neg * neg, s_rb + b2, s_r3 + b2 * b, s_r4 + b2 * b2)


@njit(cache=True)
def acc_drawdown(acc, equity):
    """Add one marked equity to the drawdown accumulator.

    ``acc = (peak, trough, sum (equity - peak)² since the peak, min drawdown, sum of
    drawdown²)``. Under one peak ``P`` the drawdown of a bar is ``equity / P - 1``, so
    its square is summed as ``(equity - P)²`` and divided by ``P²`` once, when a new
    peak (or the end, :func:`flush_drawdown`) closes the stretch: no division per bar.
    """
    peak, trough, s_u2, min_dd, s_dd2 = acc
    if equity > peak:
        s_dd2, min_dd = _close_stretch(peak, trough, s_u2, min_dd, s_dd2)
        return (equity, equity, 0.0, min_dd, s_dd2)
    d = equity - peak
    if equity < trough:
        trough = equity
    return (peak, trough, s_u2 + d * d, min_dd, s_dd2)


@njit(cache=True)
def acc_drawdown_flat(acc, equity, k):
    """:func:`acc_drawdown` of the same ``equity`` on ``k`` >= 1 bars (a flat stretch)."""
    acc = acc_drawdown(acc, equity)
    peak, trough, s_u2, min_dd, s_dd2 = acc
    d = equity - peak
    return (peak, trough, s_u2 + (k - 1) * (d * d), min_dd, s_dd2)


@njit(cache=True)
def flush_drawdown(acc, n_bars):
    """``(min drawdown, sum of drawdown²)`` once the last of ``n_bars`` equities has
    been added.

    A peak of 0 means every equity was 0: the run was ruined on its first bar (a
    walk-forward window's, say), and its drawdown is -100% on each bar, as any ruined
    run's is from its ruin bar on (against the initial cash, the only value it held).
    """
    peak, trough, s_u2, min_dd, s_dd2 = acc
    if peak == 0.0:
        return -1.0, float(n_bars)
    s_dd2, min_dd = _close_stretch(peak, trough, s_u2, min_dd, s_dd2)
    return min_dd, s_dd2


@njit(cache=True)
def _close_stretch(peak, trough, s_u2, min_dd, s_dd2):
    if peak > -math.inf:
        s_dd2 += s_u2 / (peak * peak)
        dd = trough / peak - 1.0
        if dd < min_dd:
            min_dd = dd
    return s_dd2, min_dd


@njit(cache=True)
def acc_trade(acc, pnl, ret):
    """Add one closed trade to ``(n, n winning, gross profit, gross loss, sum of returns)``."""
    n, n_win, gross_win, gross_loss, s_ret = acc
    if pnl > 0.0:
        n_win += 1.0
        gross_win += pnl
    elif pnl < 0.0:
        gross_loss -= pnl
    return (n + 1.0, n_win, gross_win, gross_loss, s_ret + ret)


@njit(cache=True)
def finalize(out, n_bars, ppy, init_cash, final_equity, ret_acc, dd_acc, trade_acc,
             n_exposed, bench, ruined):
    """Write the metrics of one backtest into ``out`` (shape (N_METRICS,), in METRICS order).

    ``bench`` is ``(sum b, sum b²)`` of the benchmark returns; ``ruined`` whether equity
    reached zero. Undefined values (no trades, zero variance, one bar) are NaN.

    A ruined combo needs no case of its own: its equity is 0 from the ruin bar on, so
    its returns are -1 on that bar and 0 after (``acc_returns`` sees no more), and the
    formulas give total_return = cagr = max_drawdown = calmar = -1 and finite ratios
    (a run ruined on its first bar has no positive peak: :func:`flush_drawdown` gives
    its drawdown as -100% on every bar).
    """
    nan = math.nan
    s_r, s_r2, s_neg2, s_rb, s_r3, s_r4 = ret_acc
    min_dd, s_dd2 = flush_drawdown(dd_acc, n_bars)
    n_tr, n_win, gross_win, gross_loss, s_tret = trade_acc
    s_b, s_b2 = bench
    n = float(n_bars)
    growth = final_equity / init_cash
    out[M_TOTAL_RETURN] = growth - 1.0
    cagr = growth ** (ppy / n) - 1.0 if growth >= 0.0 else nan
    out[M_CAGR] = cagr
    mean_r = s_r / n
    var_r = (s_r2 - s_r * mean_r) / (n - 1.0) if n_bars > 1 else nan
    if var_r > 0.0:
        std_r = math.sqrt(var_r)
        out[M_VOLATILITY] = std_r * math.sqrt(ppy)
        out[M_SHARPE] = mean_r / std_r * math.sqrt(ppy)
    else:
        out[M_VOLATILITY] = 0.0 if n_bars > 1 else nan
        out[M_SHARPE] = nan
    out[M_SORTINO] = mean_r / math.sqrt(s_neg2 / n) * math.sqrt(ppy) if s_neg2 > 0.0 else nan
    out[M_MAX_DRAWDOWN] = min_dd
    out[M_CALMAR] = cagr / -min_dd if min_dd < 0.0 else nan
    out[M_ULCER_INDEX] = 100.0 * math.sqrt(s_dd2 / n)
    out[M_N_TRADES] = n_tr
    if n_tr > 0.0:
        out[M_WIN_RATE] = n_win / n_tr
        out[M_AVG_TRADE_RETURN] = s_tret / n_tr
    else:
        out[M_WIN_RATE] = nan
        out[M_AVG_TRADE_RETURN] = nan
    out[M_PROFIT_FACTOR] = gross_win / gross_loss if gross_loss > 0.0 else nan
    out[M_EXPOSURE] = n_exposed / n
    mean_b = s_b / n
    var_b = s_b2 - s_b * mean_b
    if var_b > 0.0 and n_bars > 1:
        beta = (s_rb - s_r * mean_b) / var_b
        out[M_ALPHA] = (mean_r - beta * mean_b + 1.0) ** ppy - 1.0
        out[M_BETA] = beta
    else:
        out[M_ALPHA] = nan
        out[M_BETA] = nan
    out[M_RUINED] = 1.0 if ruined else 0.0
    # the returns' population skewness and raw kurtosis (scipy's defaults), from the
    # central moments expanded in the raw sums
    m2 = s_r2 / n - mean_r * mean_r
    if m2 > 0.0:
        m3 = s_r3 / n - mean_r * (3.0 * s_r2 / n - 2.0 * mean_r * mean_r)
        m4 = s_r4 / n - mean_r * (4.0 * s_r3 / n - mean_r * (6.0 * s_r2 / n
                                                            - 3.0 * mean_r * mean_r))
        out[M_SKEW] = m3 / (m2 * math.sqrt(m2))
        out[M_KURTOSIS] = m4 / (m2 * m2)
    else:
        out[M_SKEW] = nan
        out[M_KURTOSIS] = nan
