"""Slow, obvious reference implementations that every fast kernel is held to.

Plain Python loops over lists, written straight from DESIGN.md, with no attempt
at speed and no code shared with barsweep.
"""

from __future__ import annotations

import math
import statistics


def ref_sma(close, period):
    out = [math.nan] * len(close)
    for t in range(period - 1, len(close)):
        out[t] = sum(close[t - period + 1 : t + 1]) / period
    return out


def ref_ema(close, period):
    out = [math.nan] * len(close)
    if len(close) < period:
        return out
    value = sum(close[:period]) / period
    out[period - 1] = value
    alpha = 2.0 / (period + 1)
    for t in range(period, len(close)):
        value = alpha * close[t] + (1 - alpha) * value
        out[t] = value
    return out


def ref_cross_signals(fast_line, slow_line):
    """Long entries where fast crosses above slow, exits where it crosses below."""
    n = len(fast_line)
    entries, exits = [False] * n, [False] * n
    for t in range(1, n):
        a0, b0, a1, b1 = fast_line[t - 1], slow_line[t - 1], fast_line[t], slow_line[t]
        entries[t] = a0 < b0 and a1 > b1
        exits[t] = a0 > b0 and a1 < b1
    return entries, exits


def ref_ema_cross_signals(close, fast, slow):
    return ref_cross_signals(ref_ema(close, fast), ref_ema(close, slow))


def ref_buy_and_hold_signals(close):
    n = len(close)
    return [t == 0 for t in range(n)], [False] * n


def ref_simulate(open_, close, entries, exits, *, fill="next_open", fees=0.0, slippage=0.0,
                 init_cash=10_000.0, ppy=365.0):
    """Backtest long-only signals; return (metrics dict, equity list, trades list)."""
    n = len(close)
    cash, size = init_cash, 0.0
    entry = None
    trades = []
    equity = []
    pending = None  # ("buy" | "sell") to fill at the next open
    exposed = 0

    def buy(t, price):
        nonlocal cash, size, entry
        fill_px = price * (1 + slippage)
        size = cash / (fill_px * (1 + fees))
        entry = dict(bar=t, price=fill_px, cash=cash, size=size)
        cash = 0.0

    def sell(t, price):
        nonlocal cash, size, entry
        fill_px = price * (1 - slippage)
        cash = cash + size * fill_px - size * fill_px * fees
        pnl = cash - entry["cash"]
        trades.append(dict(entry_bar=entry["bar"], exit_bar=t, pnl=pnl,
                           ret=pnl / (entry["size"] * entry["price"]), reason="signal"))
        size, entry = 0.0, None

    for t in range(n):
        if pending == "buy":
            buy(t, open_[t])
        elif pending == "sell":
            sell(t, open_[t])
        pending = None
        want = None
        if entries[t] and not exits[t] and size == 0:
            want = "buy"
        elif exits[t] and not entries[t] and size > 0:
            want = "sell"
        if want is not None:
            if fill == "close":
                (buy if want == "buy" else sell)(t, close[t])
            elif t + 1 < n:
                pending = want
        equity.append(cash + size * close[t])
        exposed += size > 0
    if size > 0:
        pnl = equity[-1] - entry["cash"]
        trades.append(dict(entry_bar=entry["bar"], exit_bar=n - 1, pnl=pnl,
                           ret=pnl / (entry["size"] * entry["price"]), reason="end"))
    return ref_metrics(equity, close, trades, exposed, init_cash, ppy), equity, trades


def ref_metrics(equity, close, trades, exposed, init_cash, ppy):
    n = len(equity)
    prev = [init_cash] + equity[:-1]
    r = [e / p - 1 for e, p in zip(equity, prev)]
    b = [0.0] + [close[t] / close[t - 1] - 1 for t in range(1, n)]
    nan = math.nan
    m = {}
    growth = equity[-1] / init_cash
    m["total_return"] = growth - 1
    m["cagr"] = growth ** (ppy / n) - 1
    sd = statistics.stdev(r) if n > 1 else nan
    mean = statistics.fmean(r)
    m["volatility"] = sd * math.sqrt(ppy)
    m["sharpe"] = mean / sd * math.sqrt(ppy) if sd > 0 else nan
    downside = math.sqrt(sum(min(x, 0.0) ** 2 for x in r) / n)
    m["sortino"] = mean / downside * math.sqrt(ppy) if downside > 0 else nan
    peak, dds = -math.inf, []
    for e in equity:
        peak = max(peak, e)
        dds.append(e / peak - 1)
    m["max_drawdown"] = min(dds)
    m["calmar"] = m["cagr"] / abs(m["max_drawdown"]) if m["max_drawdown"] < 0 else nan
    m["ulcer_index"] = math.sqrt(sum((100 * d) ** 2 for d in dds) / n)
    m["n_trades"] = float(len(trades))
    wins = [t["pnl"] for t in trades if t["pnl"] > 0]
    losses = [-t["pnl"] for t in trades if t["pnl"] < 0]
    m["win_rate"] = len(wins) / len(trades) if trades else nan
    m["profit_factor"] = sum(wins) / sum(losses) if losses else nan
    m["avg_trade_return"] = statistics.fmean(t["ret"] for t in trades) if trades else nan
    m["exposure"] = exposed / n
    mean_b = statistics.fmean(b)
    var_b = sum((x - mean_b) ** 2 for x in b)
    if var_b > 0 and n > 1:
        beta = sum((x - mean) * (y - mean_b) for x, y in zip(r, b)) / var_b
        m["alpha"] = (statistics.fmean(x - beta * y for x, y in zip(r, b)) + 1) ** ppy - 1
        m["beta"] = beta
    else:
        m["alpha"] = m["beta"] = nan
    return m
