"""A slow, obvious reference of docs/EXECUTION.md "Portfolios": N symbols, one cash
account, written with loops and dicts, independent of the engine's kernels.

``signals[symbol](t, position, entry_price, entry_bar)`` gives that symbol's
``(long_entry, long_exit, short_entry, short_exit)`` at the close of bar ``t``; the
portfolio trades long only. ``rebalance`` (e.g. ``"1M"``) re-targets the held positions
on the first bar of each calendar period, read from the bars' ``time`` with datetime.
portfolio trades long only. Stops are checked on each held symbol's own bar after the
open's fills and before the close's rules, from the entry fill and the highest high
since entry, written out here rather than taken from the engine or reference.py.
"""

from __future__ import annotations

import datetime
import math
import statistics

import numpy as np

from .reference import ref_conflict, ref_metrics


def ref_rebalance_bars(time_ns, period):
    """Whether each bar opens a new period of ``period`` (count and unit D, W, M, Q, Y;
    periods counted from the epoch, weeks from Monday 1970-01-05): bar 0 never does."""
    count, unit = int(period[:-1]), period[-1].upper()
    keys = []
    for ns in time_ns:
        day = datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=int(ns) // 1000)
        days = (day.date() - datetime.date(1970, 1, 1)).days
        months = (day.year - 1970) * 12 + day.month - 1
        key = {"D": days, "W": (days - 4) // 7, "M": months, "Q": months // 3,
               "Y": day.year - 1970}[unit]
        keys.append(key // count)
    return [t > 0 and keys[t] != keys[t - 1] for t in range(len(keys))]


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


def stop_hit(position, bars, t, stop_loss, take_profit, trailing_stop):
    """(reason, price) of the stop that bar ``t`` of ``bars`` reaches for a long
    ``position`` (its ``fill`` and its ``best`` high since entry), or None: the tighter of
    stop loss and trailing stop (ties: stop loss) before the target, each at the open
    when the bar opens through it."""
    o, h, lo = bars["open"][t], bars["high"][t], bars["low"][t]
    levels = []
    if stop_loss:
        levels.append((position["fill"] * (1 - stop_loss), "stop"))
    if trailing_stop:
        levels.append((position["best"] * (1 - trailing_stop), "trail"))
    if levels:
        level, reason = max(levels, key=lambda x: (x[0], x[1] == "stop"))
        if o <= level:
            return reason, o
        if lo <= level:
            return reason, level
    if take_profit:
        target = position["fill"] * (1 + take_profit)
        if o >= target:
            return "target", o
        if h >= target:
            return "target", target
    return None


def ref_portfolio(signals, bars, *, init_cash=10_000.0, fees=0.0, fixed_fee=0.0,
                  slippage=0.0, fill="close", max_positions=None, ppy=252.0,
                  rebalance=None, weight="equal", lookback=20, priority=None,
                  stop_loss=None, take_profit=None, trailing_stop=None, conflict="opposite"):
    """Run the portfolio; returns a dict with ``metrics`` (by name), ``equity`` (list),
    ``trades`` (list of dicts with the exit ``reason``: signal, stop, target, trail,
    end, ruin), ``held`` (list: each bar's ``{symbol: shares}`` at the close),
    ``per_symbol`` ({symbol: (n_trades, exposure)}), ``targets`` (ndarray (n_bars, N):
    the weight where a rule's entry was ordered (or a position re-targeted), 0 where its
    exit was, NaN elsewhere; stops are not in it), ``call_seq`` (ndarray (n_bars, N),
    int: each bar's columns in the order their orders filled, the others after) and
    ``benchmark`` (the equal-weight buy-and-hold level)."""
    symbols = list(bars)
    n = len(bars[symbols[0]]["close"])
    slots = len(symbols) if max_positions is None else min(max_positions, len(symbols))
    account = {"cash": init_cash}
    held = {}  # symbol -> {"size", "fill", "bar", "cost", "best"}
    trades = []
    n_trades = {s: 0 for s in symbols}
    bars_held = {s: 0 for s in symbols}
    targets = np.full((n, len(symbols)), math.nan)
    rebalancing = (ref_rebalance_bars(bars[symbols[0]]["time"], rebalance) if rebalance
                   else [False] * n)
    call_seq = np.tile(np.arange(len(symbols)), (n, 1))

    def book(symbol, received, reason, t, price=math.nan):
        p = held.pop(symbol)
        pnl = received - p["cost"]  # every sell's net proceeds less every buy's cost
        trades.append({"symbol": symbol, "pnl": pnl, "ret": pnl / p["basis"],
                       "reason": reason, "price": price, "entry_bar": p["bar"],
                       "exit_bar": t, "size": p["size"]})
        n_trades[symbol] += 1

    def sell(s, size, price, partial=False, slip=None):
        """Cash received for ``size`` shares at ``price`` less ``slip`` (default:
        slippage); a partial sale that its fees would eat is not made (None)."""
        fill_price = price * (1 - (slippage if slip is None else slip))
        proceeds = size * fill_price
        received = proceeds - proceeds * fees - fixed_fee
        if partial and received < 0:
            return None
        account["cash"] += received
        return received

    def sell_all(s, price, reason, t, slip=None):
        """Close ``s`` at ``price`` less ``slip`` at bar ``t`` and book the trade."""
        received = sell(s, held[s]["size"], price, slip=slip)
        book(s, received, reason, t, price * (1 - (slippage if slip is None else slip)))

    def buy(size, price):
        """(shares, cost, fill) of buying ``size`` shares, or what the cash pays for."""
        price = price * (1 + slippage)
        cost = size * price + size * price * fees + fixed_fee
        if cost > account["cash"]:
            size = (account["cash"] - fixed_fee) / (1 + fees) / price
            cost = account["cash"]
        if size <= 0:
            return 0.0, 0.0, price
        account["cash"] -= cost
        return size, cost, price

    def fill_orders(orders, rebalancing, column, t):
        decided = t if column == "close" else t - 1  # the close where they were decided
        prices = {s: bars[s][column][t] for s in symbols}
        value = account["cash"] + sum(p["size"] * prices[s] for s, p in held.items())
        if weight == "equal":
            weights = dict.fromkeys(symbols, 1.0 / slots)
        else:
            weights = ref_weights(bars, decided, slots, lookback)
        calls, buys = [], []  # buys: (order value, symbol's index, shares to buy)
        for j, s in enumerate(symbols):  # every sell first
            if orders.get(s) == "exit" and s in held:
                calls.append(j)
                targets[t, j] = 0.0
                sell_all(s, prices[s], "signal", t)
            elif s in held and rebalancing and weights[s] > 0:
                targets[t, j] = weights[s]
                change = weights[s] * value / prices[s] - held[s]["size"]
                received = sell(s, -change, prices[s], partial=True) if change < 0 else None
                if received is not None:
                    calls.append(j)
                    held[s]["cost"] -= received
                    held[s]["size"] -= -change
                elif change > 0:
                    buys.append((weights[s] * value - held[s]["size"] * prices[s], j, change))
        for s in ref_priority(bars, decided, priority, lookback):  # entries, by priority
            if orders.get(s) == "enter" and s not in held and weights[s] > 0:
                buys.append((weights[s] * value, symbols.index(s),
                             weights[s] * value / prices[s]))
        if rebalancing:  # on a rebalance bar every buy by its order value, smaller first
            buys.sort()
        for _, j, change in buys:
            s = symbols[j]
            if s in held:
                size, cost, price = buy(change, prices[s])
                held[s]["size"] += size
                held[s]["cost"] += cost
                held[s]["basis"] += size * price
                calls.append(j)
            elif len(held) < slots:
                calls.append(j)
                targets[t, j] = weights[s]
                size, cost, price = buy(change, prices[s])
                if size > 0:
                    held[s] = {"size": size, "fill": price, "bar": t, "cost": cost,
                               "basis": size * price, "best": price}
        call_seq[t] = calls + [j for j in range(len(symbols)) if j not in calls]

    equity, exposed, ruined, pending, shares = [], 0, False, (), []
    for t in range(n):
        if ruined:
            equity.append(0.0)
            shares.append({})
            continue
        if pending:
            fill_orders(*pending, "open", t)
            pending = ()
        for s in symbols:  # stops inside the bar, on each held symbol's own bar
            if s in held:
                hit = stop_hit(held[s], bars[s], t, stop_loss, take_profit, trailing_stop)
                if hit is None:
                    held[s]["best"] = max(held[s]["best"], bars[s]["high"][t])
                else:
                    reason, price = hit
                    sell_all(s, price, reason, t, 0.0 if reason == "target" else None)
                    trades[-1]["gap"] = price == bars[s]["open"][t]
        orders = {}
        for s in symbols:
            p = held.get(s)
            long_entry, long_exit, _, _ = signals[s](
                t, p["size"] if p else 0.0, p["fill"] if p else math.nan, p["bar"] if p else 0)
            long_entry, long_exit = ref_conflict(conflict, p["size"] if p else 0.0,
                                                 long_entry, long_exit)
            if p and long_exit:
                orders[s] = "exit"
            elif not p and long_entry:
                orders[s] = "enter"
        rebalance_now = rebalancing[t] and bool(held)
        if (orders or rebalance_now) and fill == "close":
            fill_orders(orders, rebalance_now, "close", t)
        elif (orders or rebalance_now) and t + 1 < n:
            pending = (orders, rebalance_now)
        for s in held:
            bars_held[s] += 1
        exposed += bool(held)
        value = account["cash"] + sum(p["size"] * bars[s]["close"][t] for s, p in held.items())
        if value <= 0:
            for s in list(held):
                book(s, held[s]["size"] * bars[s]["close"][t], "ruin", t)
            ruined, value = True, 0.0
        equity.append(value)
        shares.append({s: p["size"] for s, p in held.items()})
    for s in list(held):  # open at the end: marked at the last close, no fee
        book(s, held[s]["size"] * bars[s]["close"][n - 1], "end", n - 1)

    level = [sum(bars[s]["close"][t] / bars[s]["close"][0] for s in symbols) / len(symbols)
             for t in range(n)]
    metrics = ref_metrics(equity, level, trades, exposed, init_cash, ppy, ruined)
    return {"metrics": metrics, "equity": equity, "trades": trades, "targets": targets,
            "call_seq": call_seq,
            "held": shares,
            "per_symbol": {s: (n_trades[s], bars_held[s] / n) for s in symbols},
            "benchmark": level}
