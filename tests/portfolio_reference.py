"""A slow, obvious reference of docs/EXECUTION.md "Portfolios": N symbols, one cash
account, written with loops and dicts, independent of the engine's kernels.

``signals[symbol](t, position, entry_price, entry_bar)`` gives that symbol's
``(long_entry, long_exit, short_entry, short_exit)`` at the close of bar ``t``; the
portfolio trades long only.
"""

from __future__ import annotations

import math

import numpy as np
from reference import ref_metrics


def ref_portfolio(signals, bars, *, init_cash=10_000.0, fees=0.0, fixed_fee=0.0,
                  slippage=0.0, fill="close", max_positions=None, ppy=252.0):
    """Run the portfolio; returns a dict with ``metrics`` (by name), ``equity`` (list),
    ``trades`` (list of dicts), ``held`` (list: each bar's ``{symbol: shares}`` at the
    close), ``per_symbol`` ({symbol: (n_trades, exposure)}),
    ``targets`` (ndarray (n_bars, N): the weight where an entry was ordered, 0 where an
    exit was, NaN elsewhere) and ``benchmark`` (the equal-weight buy-and-hold level)."""
    symbols = list(bars)
    n = len(bars[symbols[0]]["close"])
    slots = len(symbols) if max_positions is None else min(max_positions, len(symbols))
    weight = 1.0 / slots
    account = {"cash": init_cash}
    held = {}  # symbol -> {"size", "fill", "bar", "cost"}
    trades = []
    n_trades = {s: 0 for s in symbols}
    bars_held = {s: 0 for s in symbols}
    targets = np.full((n, len(symbols)), math.nan)

    def book(symbol, received, t):
        p = held.pop(symbol)
        pnl = received - p["cost"]
        trades.append({"symbol": symbol, "pnl": pnl, "ret": pnl / (p["size"] * p["fill"]),
                       "entry_bar": p["bar"], "exit_bar": t, "size": p["size"]})
        n_trades[symbol] += 1

    def fill_orders(orders, column, t):
        prices = {s: bars[s][column][t] for s in symbols}
        value = account["cash"] + sum(p["size"] * prices[s] for s, p in held.items())
        for j, s in enumerate(symbols):  # every sell first
            if orders.get(s) == "exit" and s in held:
                price = prices[s] * (1 - slippage)
                proceeds = held[s]["size"] * price
                received = proceeds - proceeds * fees - fixed_fee
                account["cash"] += received
                targets[t, j] = 0.0
                book(s, received, t)
        for j, s in enumerate(symbols):  # then the buys, in the symbols' order
            if orders.get(s) == "enter" and s not in held and len(held) < slots:
                targets[t, j] = weight
                price = prices[s] * (1 + slippage)
                size = weight * value / prices[s]
                cost = size * price + size * price * fees + fixed_fee
                if cost > account["cash"]:  # what the cash pays for
                    size = (account["cash"] - fixed_fee) / (1 + fees) / price
                    cost = account["cash"]
                if size > 0:
                    account["cash"] -= cost
                    held[s] = {"size": size, "fill": price, "bar": t, "cost": cost}

    equity, exposed, ruined, pending, shares = [], 0, False, {}, []
    for t in range(n):
        if ruined:
            equity.append(0.0)
            shares.append({})
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
                book(s, held[s]["size"] * bars[s]["close"][t], t)
            ruined, value = True, 0.0
        equity.append(value)
        shares.append({s: p["size"] for s, p in held.items()})
    for s in list(held):  # open at the end: marked at the last close, no fee
        book(s, held[s]["size"] * bars[s]["close"][n - 1], n - 1)

    level = [sum(bars[s]["close"][t] / bars[s]["close"][0] for s in symbols) / len(symbols)
             for t in range(n)]
    metrics = ref_metrics(equity, level, trades, exposed, init_cash, ppy, ruined)
    return {"metrics": metrics, "equity": equity, "trades": trades, "targets": targets,
            "held": shares,
            "per_symbol": {s: (n_trades[s], bars_held[s] / n) for s in symbols},
            "benchmark": level}
