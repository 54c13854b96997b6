"""A slow, obvious reference of docs/EXECUTION.md "Portfolios": N symbols, one cash
account, written with loops and dicts, independent of the engine's kernels.

``signals[symbol](t, position, entry_price, entry_bar)`` gives that symbol's
``(long_entry, long_exit, short_entry, short_exit)`` at the close of bar ``t``; the
portfolio trades long only.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
from reference import ref_metrics


def ref_vol(close, t, lookback):
    """The sample standard deviation of the ``lookback`` returns ``close[s] / close[s-1]
    - 1`` for ``s`` in ``t - lookback + 1 .. t``; None before ``lookback`` bars."""
    if t < lookback:
        return None
    return statistics.stdev([close[s] / close[s - 1] - 1 for s in range(t - lookback + 1, t + 1)])


def ref_weights(bars, t, slots, lookback):
    """Each symbol's inverse-volatility target at the close of bar ``t``: ``1 / vol``
    over the sum of the ``slots`` largest ``1 / vol`` of the members (0 without a
    volatility > 0)."""
    inverse = {}
    for s in bars:
        vol = ref_vol(bars[s]["close"], t, lookback)
        inverse[s] = 1 / vol if vol else 0.0
    total = sum(sorted(inverse.values(), reverse=True)[:slots])
    return {s: v / total if v > 0 else 0.0 for s, v in inverse.items()}


def ref_priority(bars, t, priority, lookback):
    """The symbols in the order their same-bar entries are taken at the close of bar
    ``t``."""
    symbols = list(bars)
    if priority is None:
        return symbols
    if priority == "low_vol":
        vols = {s: ref_vol(bars[s]["close"], t, lookback) for s in symbols}
        return sorted(symbols, key=lambda s: (vols[s] is None, vols[s] or 0.0))
    if priority == "momentum":
        moms = {s: bars[s]["close"][t] / bars[s]["close"][t - lookback] - 1
                if t >= lookback else None for s in symbols}
        return sorted(symbols, key=lambda s: (moms[s] is None, -(moms[s] or 0.0)))
    return list(priority) + [s for s in symbols if s not in priority]


def ref_portfolio(signals, bars, *, init_cash=10_000.0, fees=0.0, fixed_fee=0.0,
                  slippage=0.0, fill="close", max_positions=None, ppy=252.0,
                  weight="equal", lookback=20, priority=None):
    """Run the portfolio; returns a dict with ``metrics`` (by name), ``equity`` (list),
    ``trades`` (list of dicts), ``per_symbol`` ({symbol: (n_trades, exposure)}),
    ``targets`` (ndarray (n_bars, N): the weight where an entry was ordered, 0 where an
    exit was, NaN elsewhere), ``call_seq`` (ndarray (n_bars, N), int: each bar's
    columns in the order their orders filled, the others after) and ``benchmark`` (the
    equal-weight buy-and-hold level)."""
    symbols = list(bars)
    n = len(bars[symbols[0]]["close"])
    slots = len(symbols) if max_positions is None else min(max_positions, len(symbols))
    account = {"cash": init_cash}
    held = {}  # symbol -> {"size", "fill", "bar", "cost"}
    trades = []
    n_trades = {s: 0 for s in symbols}
    bars_held = {s: 0 for s in symbols}
    targets = np.full((n, len(symbols)), math.nan)
    call_seq = np.tile(np.arange(len(symbols)), (n, 1))

    def book(symbol, received):
        p = held.pop(symbol)
        pnl = received - p["cost"]
        trades.append({"symbol": symbol, "pnl": pnl, "ret": pnl / (p["size"] * p["fill"])})
        n_trades[symbol] += 1

    def fill_orders(orders, column, t):
        decided = t if column == "close" else t - 1  # the close where they were decided
        prices = {s: bars[s][column][t] for s in symbols}
        value = account["cash"] + sum(p["size"] * prices[s] for s, p in held.items())
        calls = []
        for j, s in enumerate(symbols):  # every sell first
            if orders.get(s) == "exit" and s in held:
                calls.append(j)
                price = prices[s] * (1 - slippage)
                proceeds = held[s]["size"] * price
                received = proceeds - proceeds * fees - fixed_fee
                account["cash"] += received
                targets[t, j] = 0.0
                book(s, received)
        if weight == "equal":
            weights = dict.fromkeys(symbols, 1.0 / slots)
        else:
            weights = ref_weights(bars, decided, slots, lookback)
        for s in ref_priority(bars, decided, priority, lookback):  # then the buys
            j = symbols.index(s)
            if orders.get(s) == "enter" and s not in held and len(held) < slots:
                if weights[s] <= 0:  # no volatility yet: no entry
                    continue
                calls.append(j)
                targets[t, j] = weights[s]
                price = prices[s] * (1 + slippage)
                size = weights[s] * value / prices[s]
                cost = size * price + size * price * fees + fixed_fee
                if cost > account["cash"]:  # what the cash pays for
                    size = (account["cash"] - fixed_fee) / (1 + fees) / price
                    cost = account["cash"]
                if size > 0:
                    account["cash"] -= cost
                    held[s] = {"size": size, "fill": price, "bar": t, "cost": cost}
        call_seq[t] = calls + [j for j in range(len(symbols)) if j not in calls]

    equity, exposed, ruined, pending = [], 0, False, {}
    for t in range(n):
        if ruined:
            equity.append(0.0)
            continue
        if pending:
            fill_orders(pending, "open", t)
            pending = {}
        orders = {}
        for s in symbols:
            p = held.get(s)
            long_entry, long_exit, _, _ = signals[s](
                t, p["size"] if p else 0.0, p["fill"] if p else math.nan, p["bar"] if p else 0)
            if long_entry and long_exit:
                continue
            if p and long_exit:
                orders[s] = "exit"
            elif not p and long_entry:
                orders[s] = "enter"
        if orders and fill == "close":
            fill_orders(orders, "close", t)
        elif orders and t + 1 < n:
            pending = orders
        for s in held:
            bars_held[s] += 1
        exposed += bool(held)
        value = account["cash"] + sum(p["size"] * bars[s]["close"][t] for s, p in held.items())
        if value <= 0:
            for s in list(held):
                book(s, held[s]["size"] * bars[s]["close"][t])
            ruined, value = True, 0.0
        equity.append(value)
    for s in list(held):  # open at the end: marked at the last close, no fee
        book(s, held[s]["size"] * bars[s]["close"][n - 1])

    level = [sum(bars[s]["close"][t] / bars[s]["close"][0] for s in symbols) / len(symbols)
             for t in range(n)]
    metrics = ref_metrics(equity, level, trades, exposed, init_cash, ppy, ruined)
    return {"metrics": metrics, "equity": equity, "trades": trades, "targets": targets,
            "call_seq": call_seq,
            "per_symbol": {s: (n_trades[s], bars_held[s] / n) for s in symbols},
            "benchmark": level}
