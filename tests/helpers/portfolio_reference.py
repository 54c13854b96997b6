"""A slow, obvious reference of docs/EXECUTION.md "Portfolios": N symbols, one cash
account, written with loops and dicts, independent of the engine's kernels.

``signals[symbol](t, position, entry_price, entry_bar)`` gives that symbol's
``(long_entry, long_exit, short_entry, short_exit)`` at the close of bar ``t``; the
portfolio trades the sides ``direction`` allows, a position a signed number of shares.
``rebalance`` (e.g. ``"1M"``) re-targets the held positions on the first bar of each
calendar period, read from the bars' ``time`` with datetime. Stops are checked on each
held symbol's own bar after the open's fills and before the close's rules, from the
entry fill and the best price since entry (a long's highest high, a short's lowest low),
written out here rather than taken from the engine or reference.py. Funding and
borrowing are charged after the stops, a margin call is checked at the close.
"""

from __future__ import annotations

import datetime
import math
import statistics

import numpy as np

from .reference import ref_conflict, ref_metrics, takes_account


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
    """(reason, price) of the stop that bar ``t`` of ``bars`` reaches for ``position``
    (its ``fill`` and its ``best`` price since entry), or None: the tighter of stop loss
    and trailing stop (ties: stop loss) before the target, each at the open when the bar
    opens through it."""
    if position["size"] < 0:
        return short_stop_hit(position, bars, t, stop_loss, take_profit, trailing_stop)
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


def short_stop_hit(position, bars, t, stop_loss, take_profit, trailing_stop):
    """:func:`stop_hit` of a short: levels above its fill and its lowest low, the lower
    of them first (ties: stop loss), the target below."""
    o, h, lo = bars["open"][t], bars["high"][t], bars["low"][t]
    levels = []
    if stop_loss:
        levels.append((position["fill"] * (1 + stop_loss), "stop"))
    if trailing_stop:
        levels.append((position["best"] * (1 + trailing_stop), "trail"))
    if levels:
        level, reason = min(levels, key=lambda x: (x[0], x[1] != "stop"))
        if o >= level:
            return reason, o
        if h >= level:
            return reason, level
    if take_profit:
        target = position["fill"] * (1 - take_profit)
        if o <= target:
            return "target", o
        if lo <= target:
            return "target", target
    return None


def ref_units(size, size_value, value, fill_price, fees, fixed_fee, stop_loss, vol):
    """The shares an entry of ``size`` wants, the account's value ``value`` in place of a
    single-symbol run's cash (None: ``all``, the weight's target)."""
    if size == "all":
        return None
    if size in ("percent", "vol_target"):
        worth = value * (size_value if size == "percent" else size_value / vol)
        return (worth - fixed_fee) / (fill_price * (1 + fees))
    if size == "cash":
        return size_value / fill_price
    if size == "quantity":
        return size_value
    return size_value * value / (stop_loss * fill_price)  # risk


def ref_portfolio(signals, bars, *, init_cash=10_000.0, fees=0.0, fixed_fee=0.0,
                  slippage=0.0, fill="close", max_positions=None, ppy=252.0,
                  rebalance=None, weight="equal", lookback=20, priority=None,
                  stop_loss=None, take_profit=None, trailing_stop=None, conflict="opposite",
                  direction="long", funding=False, leverage=1.0, borrow_rate=0.0,
                  maintenance_margin=None, size="all", size_value=None, lot=None,
                  window=20):
    """Run the portfolio; returns a dict with ``metrics`` (by name), ``equity`` (list),
    ``trades`` (list of dicts with the exit ``reason``: signal, stop, target, trail,
    end, ruin), ``held`` (list: each bar's ``{symbol: shares}`` at the close),
    ``per_symbol`` ({symbol: (n_trades, exposure)}), ``targets`` (ndarray (n_bars, N):
    the weight where a rule's entry was ordered (or a position re-targeted), 0 where its
    exit was, NaN elsewhere; stops are not in it), ``call_seq`` (ndarray (n_bars, N),
    int: each bar's columns in the order their orders filled, the others after) and
    ``benchmark`` (the equal-weight buy-and-hold level).

    ``direction``, ``funding`` (each symbol's ``bars[s]["funding_rate"]``), ``leverage``,
    ``borrow_rate`` (a year), ``maintenance_margin``, ``size`` / ``size_value`` /
    ``lot`` and ``window`` (``vol_target``'s bars) as docs/EXECUTION.md, "Portfolios:
    shorts, leverage, funding and sizes", says: an entry targets ``w * V * leverage``,
    any other size is capped there, every entry is cut to the buying power
    ``leverage * V - gross``."""
    symbols = list(bars)
    size_type = size
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
                       "exit_bar": t, "size": abs(p["size"]),
                       "side": 1 if p["size"] > 0 else -1})
        n_trades[symbol] += 1

    def sell(s, size, price, partial=False, slip=None):
        """Cash received for ``size`` shares at ``price`` less ``slip`` (default:
        slippage); a negative ``size`` buys them back (at ``price`` plus ``slip``); a
        partial sale that its fees would eat is not made (None)."""
        side = 1 if size > 0 else -1
        fill_price = price * (1 - side * (slippage if slip is None else slip))
        proceeds = size * fill_price
        received = proceeds - abs(proceeds) * fees - fixed_fee
        if partial and received < 0:
            return None
        account["cash"] += received
        return received

    def sell_all(s, price, reason, t, slip=None):
        """Close ``s`` at ``price`` (less ``slip`` for a long, plus it for a short) at bar
        ``t`` and book the trade."""
        side = 1 if held[s]["size"] > 0 else -1
        received = sell(s, held[s]["size"], price, slip=slip)
        book(s, received, reason, t, price * (1 - side * (slippage if slip is None else slip)))

    def power(prices):
        """The buying power: ``leverage`` times the account's value less its gross
        exposure, at ``prices`` (the cash, long only at leverage 1)."""
        value = account["cash"] + sum(p["size"] * prices[s] for s, p in held.items())
        gross = sum(abs(p["size"]) * prices[s] for s, p in held.items())
        return leverage * value - gross

    def buy(size, price, prices, side=1):
        """(shares, cash spent, fill) of opening or adding ``size`` shares of ``side``
        (a short sells them), cut to what the buying power pays for (fees included),
        then to whole lots."""
        price = price * (1 + side * slippage)
        cost = size * price + size * price * fees + fixed_fee
        afford = power(prices)
        if cost > afford:
            size = (afford - fixed_fee) / (1 + fees) / price
        if lot:
            size = math.floor(size / lot) * lot
        if size <= 0:
            return 0.0, 0.0, price
        spent = side * size * price + size * price * fees + fixed_fee
        account["cash"] -= spent
        return size, spent, price

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
            if orders.get(s, (False, 0))[0] and s in held:
                calls.append(j)
                targets[t, j] = 0.0
                sell_all(s, prices[s], "signal", t)
            elif s in held and rebalancing and weights[s] > 0:
                targets[t, j] = weights[s]
                change = weights[s] * value * leverage / prices[s] - held[s]["size"]
                received = sell(s, -change, prices[s], partial=True) if change < 0 else None
                if received is not None:
                    calls.append(j)
                    held[s]["cost"] -= received
                    held[s]["size"] -= -change
                elif change > 0:
                    buys.append((weights[s] * value * leverage - held[s]["size"] * prices[s],
                                 j, change))
        for s in ref_priority(bars, decided, priority, lookback):  # entries, by priority
            side = orders.get(s, (False, 0))[1]
            if side and s not in held and weights[s] > 0:
                target = weights[s] * value * leverage
                fill_price = prices[s] * (1 + side * slippage)
                vol = None
                if size_type == "vol_target":
                    vol = ref_vol(bars[s]["close"], decided, window)
                    if not vol:
                        continue  # too few bars to measure (or none moved): no entry
                    vol *= math.sqrt(ppy)
                units = ref_units(size_type, size_value, value, fill_price, fees, fixed_fee,
                                  stop_loss, vol)
                cap = target / prices[s]
                units = cap if units is None else min(units, cap)
                buys.append((target, symbols.index(s), units, side))
        if rebalancing:  # on a rebalance bar every buy by its order value, smaller first
            buys.sort()
        for _, j, change, *side in buys:
            s = symbols[j]
            if s in held:
                size, cost, price = buy(change, prices[s], prices)
                held[s]["size"] += size
                held[s]["cost"] += cost
                held[s]["basis"] += size * price
                calls.append(j)
            elif len(held) < slots:
                calls.append(j)
                targets[t, j] = weights[s]
                size, cost, price = buy(change, prices[s], prices, side[0])
                if size > 0:
                    held[s] = {"size": side[0] * size, "fill": price, "bar": t,
                               "cost": cost, "basis": size * price, "best": price}
        calls = list(dict.fromkeys(calls))  # a reversal's symbol: at its first order
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
                if hit is None and held[s]["size"] > 0:
                    held[s]["best"] = max(held[s]["best"], bars[s]["high"][t])
                elif hit is None:
                    held[s]["best"] = min(held[s]["best"], bars[s]["low"][t])
                else:
                    reason, price = hit
                    sell_all(s, price, reason, t, 0.0 if reason == "target" else None)
                    trades[-1]["gap"] = price == bars[s]["open"][t]
        rate = borrow_rate / ppy  # funding and borrowing on what is held through the bar
        for s, p in held.items():  # a position's charges count in its trade's pnl
            if funding:
                paid = p["size"] * bars[s]["close"][t] * bars[s]["funding_rate"][t]
                account["cash"] -= paid
                p["cost"] += paid
        for s, p in held.items():
            if p["size"] < 0:
                paid = -p["size"] * bars[s]["close"][t] * rate
                account["cash"] -= paid
                p["cost"] += paid
        if held:
            account["cash"] -= max(-account["cash"], 0.0) * rate
        orders = {}  # symbol -> (exit?, side entered: 1, -1 or 0)
        # the account's value at this close, for rules that read it (no order pends)
        marked = account["cash"] + sum(held[s]["size"] * bars[s]["close"][t]
                                       for s in symbols if s in held)
        for s in symbols:
            p = held.get(s)
            pos = p["size"] if p else 0.0
            extra = (marked, 0, math.nan) if takes_account(signals[s]) else ()
            long_entry, long_exit, short_entry, short_exit = signals[s](
                t, pos, p["fill"] if p else math.nan, p["bar"] if p else 0, *extra)
            long_entry, long_exit = ref_conflict(conflict, pos, long_entry, long_exit)
            short_entry, short_exit = ref_conflict(conflict, pos, short_entry, short_exit)
            leave = (pos > 0 and long_exit) or (pos < 0 and short_exit)
            go_long = (not p or leave) and long_entry and direction != "short"
            go_short = (not p or leave) and short_entry and direction != "long"
            side = 1 if go_long and not go_short else -1 if go_short and not go_long else 0
            if leave or side:
                orders[s] = (leave, side)
        rebalance_now = rebalancing[t] and bool(held)
        if (orders or rebalance_now) and fill == "close":
            fill_orders(orders, rebalance_now, "close", t)
        elif (orders or rebalance_now) and t + 1 < n:
            pending = (orders, rebalance_now)
        for s in held:
            bars_held[s] += 1
        exposed += bool(held)
        closes = {s: bars[s]["close"][t] for s in symbols}
        value = account["cash"] + sum(p["size"] * closes[s] for s, p in held.items())
        gross = sum(abs(p["size"]) * closes[s] for s, p in held.items())
        if value > 0 and maintenance_margin and value < maintenance_margin * gross:
            for s in list(held):  # a margin call: every position closed at the close
                sell_all(s, closes[s], "margin", t)
            value = account["cash"]
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
