"""Slow, obvious reference implementations that every fast kernel is held to.

Plain Python loops over lists, written straight from docs/EXECUTION.md, with no attempt
at speed and no code shared with barsweep.
"""

from __future__ import annotations

import inspect
import math
import statistics


def takes_account(signal) -> bool:
    """Whether a reference signal takes ``equity, pending, pending_price`` after the
    position state (7 arguments)."""
    return len(inspect.signature(signal).parameters) == 7


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


def ref_simulate(open_, close, long_entries=None, long_exits=None, short_entries=None,
                 short_exits=None, *, high=None, low=None, funding_rate=None, fill="next_open",
                 fees=0.0, fixed_fee=0.0, slippage=0.0, init_cash=10_000.0, ppy=365.0,
                 direction="long", stop_loss=None, take_profit=None, trailing_stop=None,
                 funding=False, conflict="opposite", signal=None, size="all", size_value=None,
                 lot=None, window=20, leverage=1.0, borrow_rate=0.0, maintenance_margin=None,
                 entry_order="market", entry_offset=0.0, valid_bars=None, offset_unit="close",
                 risk_atr=None, atr=None):
    """Backtest signals bar by bar; return (metrics dict, equity list, trades list).

    Written from docs/EXECUTION.md's semantics: queued orders fill at the open,
    then stops inside the bar, then funding, then the close's signals.

    The signals are the four lists, or ``signal(t, position, entry_price, entry_bar) ->
    (long_entry, long_exit, short_entry, short_exit)``, asked at the close of bar t with
    the position as this simulation holds it then (after the bar's fills, stops and
    funding): its signed size (0.0 when flat), its entry fill price and entry bar (None
    when flat). A signal of 7 arguments is also given ``equity, pending, pending_price``
    (:func:`takes_account`): the account's value ``cash + position * close[t]`` and the
    entry order that would still work in bar t + 1 if this close did nothing (its side,
    0 when none, and its level, NaN when none).

    ``conflict``: what an entry and an exit of one side true on one bar do, as vectorbt's
    ``ConflictMode`` (``ignore``: neither; ``entry``/``exit``: that one; ``adjacent``/
    ``opposite``: the entry/the exit while a position of either side is open, neither
    while flat).

    Ruin (docs/EXECUTION.md): equity never goes below zero. The price at which the
    position's equity ``cash + pos * price`` is zero is checked inside each bar like a
    stop (a stop strictly before it on the bar's way wins, a target never does); funding
    that leaves equity <= 0 at the close liquidates there, before the close's signals;
    an exit that cannot pay its costs leaves cash 0. Then equity stays 0 and nothing
    more is traded.

    ``size`` (docs/EXECUTION.md, "Sizing"): ``all`` the cash, ``percent`` (the fraction
    ``size_value`` of the cash), ``cash`` (a position worth ``size_value`` at its fill)
    or ``quantity`` (``size_value`` units), ``risk`` (the units that lose ``size_value``
    of the cash at the stop loss) or ``vol_target`` (the fraction ``size_value / vol``
    of the cash, at most all of it, ``vol`` the sample deviation of the ``window`` bar
    returns up to the signal's bar times ``sqrt(ppy)``), never more than the cash pays
    for with its fees; ``lot``: sizes rounded down to whole multiples of it.

    ``leverage`` multiplies what the cash pays for (``all``'s budget, every other size's
    cap; a leveraged long borrows, its cash below zero); ``borrow_rate`` (a year) is
    charged at every close on a long's borrowed cash and on a short's value, after
    funding; ``maintenance_margin``: a position whose equity falls below that fraction
    of its value inside a bar is closed at that price (or the open, on a gap) as a
    market order, exit reason ``margin``, before the ruin price unless the bar opens
    beyond zero equity, after a stop the bar reaches strictly before it.

    ``entry_order`` ``limit`` or ``stop``: an entry signal at a close places an order at
    ``entry_offset`` of the close (a long limit and a short stop below it, the others
    above), waiting ``valid_bars`` bars (None: no limit) from the next; it fills at the
    first bar that reaches the level (at its open when the bar opens through it), a
    limit without slippage; the entry's size sees the volatility up to the bar before.
    That bar's stops are checked from the fill price on (as the bar's open). A new entry
    signal replaces the order; the exit signal of its side, or its last bar's close
    without a fill, cancels it. ``offset_unit`` ``atr``: the offset is that many
    ``atr[t]`` (the ATR series, a list) from the close instead (NaN: never filled).

    ``risk_atr``: a ``risk`` size's stop distance is that many ATRs (``atr`` as of the
    signal's bar) instead of ``stop_loss``; no entry while it is NaN.
    """
    n = len(close)
    high = high if high is not None else close
    low = low if low is not None else close
    short_entries = short_entries if short_entries is not None else [False] * n
    short_exits = short_exits if short_exits is not None else [False] * n
    can_long = direction in ("long", "both")
    can_short = direction in ("short", "both")
    state = dict(cash=init_cash, pos=0.0, entry=None, ruined=False)
    trades, equity = [], []
    queued_exit, queued_side = False, 0
    order = None  # a pending entry order: dict(side, level, last)
    exposed = 0

    def enter(t, side, price, slip=slippage, vol_last=None):
        fill_px = price * (1 + slip) if side > 0 else price * (1 - slip)
        last = t - 1 if fill == "next_open" else t  # the signal's bar
        last = last if vol_last is None else vol_last
        distance = risk_atr * atr[last] if risk_atr else (stop_loss or 0.0) * fill_px
        if size == "risk" and not distance > 0:  # the ATR's warm-up (NaN), or 0
            return
        budget = state["cash"] * (size_value if size == "percent" else leverage)
        if size == "vol_target":
            if last - window + 1 < 1:
                return  # too few bars to measure: no entry
            returns = [close[i] / close[i - 1] - 1 for i in range(last - window + 1, last + 1)]
            vol = statistics.stdev(returns) * math.sqrt(ppy)
            budget = state["cash"] * min(size_value / vol, leverage) if vol > 0 else 0.0
        affordable = (budget - fixed_fee) / (fill_px * (1 + fees))
        wanted = {"cash": (size_value or 0.0) / fill_px, "quantity": size_value,
                  "risk": (size_value or 0.0) * state["cash"] / distance
                  if size == "risk" else None}.get(size)
        units = affordable if wanted is None else min(wanted, affordable)
        if lot:
            units = math.floor(units / lot) * lot
        if not units > 0:  # NaN too
            return
        before = state["cash"]
        if side > 0:
            state["cash"] -= units * fill_px + units * fill_px * fees + fixed_fee
        else:
            state["cash"] += units * fill_px - units * fill_px * fees - fixed_fee
        state["pos"] = side * units
        state["entry"] = dict(bar=t, price=fill_px, equity=before, size=units, side=side,
                              best=fill_px)

    def leave(t, price, reason):
        e = state["entry"]
        slip = 0.0 if reason == "target" else slippage  # a target is a limit order
        if e["side"] > 0:
            fill_px = price * (1 - slip)
            state["cash"] += e["size"] * fill_px - e["size"] * fill_px * fees - fixed_fee
        else:
            fill_px = price * (1 + slip)
            state["cash"] -= e["size"] * fill_px + e["size"] * fill_px * fees + fixed_fee
        if state["cash"] <= 0:  # the exit's costs exceed what is left: ruin
            state["cash"], state["ruined"], reason = 0.0, True, "ruin"
        pnl = state["cash"] - e["equity"]
        trades.append(dict(entry_bar=e["bar"], exit_bar=t, side=e["side"], pnl=pnl,
                           ret=pnl / (e["size"] * e["price"]), reason=reason,
                           entry_price=e["price"], exit_price=fill_px))
        state["pos"], state["entry"] = 0.0, None

    def liquidate(t, price):
        """Ruin: the position is closed where its equity is zero, no fee; cash is 0."""
        e = state["entry"]
        pnl = 0.0 - e["equity"]
        trades.append(dict(entry_bar=e["bar"], exit_bar=t, side=e["side"], pnl=pnl,
                           ret=pnl / (e["size"] * e["price"]), reason="ruin",
                           entry_price=e["price"], exit_price=price))
        state["cash"], state["pos"], state["entry"], state["ruined"] = 0.0, 0.0, None, True

    def ruin_hit(t, o):
        """The price where the equity ``cash + pos * price`` reaches zero inside bar t, or
        None: a long's equity at the low, a short's at the high, is <= 0; the price is the
        open if the equity is <= 0 there already, else where it is zero."""
        cash, pos = state["cash"], state["pos"]
        worst = low[t] if pos > 0 else high[t]
        if cash + pos * worst > 0:
            return None
        if cash + pos * o <= 0:
            return o
        return -cash / pos

    def margin_level():
        """The price where the position's equity is ``maintenance_margin`` of its value."""
        cash, pos = state["cash"], state["pos"]
        if pos > 0:
            return -cash / (pos * (1 - maintenance_margin))
        return cash / (-pos * (1 + maintenance_margin))

    def stop_level():
        """The tighter of the stop loss and trailing levels (the first the price meets)."""
        e = state["entry"]
        levels = [e["price"] * (1 - e["side"] * stop_loss)] if stop_loss else []
        if trailing_stop:
            levels.append(e["best"] * (1 - e["side"] * trailing_stop))
        return max(levels) if e["side"] > 0 else min(levels)

    def margin_hit(t, o):
        """The price where bar t calls the position's margin (its equity below
        ``maintenance_margin`` of its value), or None."""
        if not maintenance_margin:
            return None
        cash, pos = state["cash"], state["pos"]
        if pos > 0:
            level = -cash / (pos * (1 - maintenance_margin))
            return o if o <= level else level if low[t] <= level else None
        level = cash / (-pos * (1 + maintenance_margin))
        return o if o >= level else level if high[t] >= level else None

    def stop_hit(t, o):
        """(reason, price) of a stop inside bar t (from the price ``o`` on), or None."""
        e = state["entry"]
        h, lo = high[t], low[t]
        if e["side"] > 0:
            levels = []
            if stop_loss:
                levels.append((e["price"] * (1 - stop_loss), "stop"))
            if trailing_stop:
                levels.append((e["best"] * (1 - trailing_stop), "trail"))
            if levels:
                level, reason = max(levels, key=lambda x: (x[0], x[1] == "stop"))
                if o <= level:
                    return reason, o
                if lo <= level:
                    return reason, level
            if take_profit:
                target = e["price"] * (1 + take_profit)
                if o >= target:
                    return "target", o
                if h >= target:
                    return "target", target
        else:
            levels = []
            if stop_loss:
                levels.append((e["price"] * (1 + stop_loss), "stop"))
            if trailing_stop:
                levels.append((e["best"] * (1 + trailing_stop), "trail"))
            if levels:
                level, reason = min(levels, key=lambda x: (x[0], x[1] != "stop"))
                if o >= level:
                    return reason, o
                if h >= level:
                    return reason, level
            if take_profit:
                target = e["price"] * (1 - take_profit)
                if o <= target:
                    return "target", o
                if lo <= target:
                    return "target", target
        return None

    for t in range(n):
        if state["ruined"]:  # equity stays 0, nothing more is traded
            equity.append(0.0)
            continue
        # 1. orders queued at the previous close fill at this open
        if queued_exit and state["pos"] != 0:
            leave(t, open_[t], "signal")
        if queued_side and state["pos"] == 0 and not state["ruined"]:
            enter(t, queued_side, open_[t])
        queued_exit, queued_side = False, 0
        # 1b. a pending entry order fills where the bar reaches its level
        bar_open = open_[t]
        if order is not None and state["pos"] == 0 and not state["ruined"]:
            below = (entry_order == "limit") == (order["side"] > 0)
            level = order["level"]
            if below:
                price = bar_open if bar_open <= level else level if low[t] <= level else None
            else:
                price = bar_open if bar_open >= level else level if high[t] >= level else None
            if price is not None:
                enter(t, order["side"], price, 0.0 if entry_order == "limit" else slippage,
                      vol_last=t - 1)
                bar_open, order = price, None
        # 2. stops and ruin inside the bar: the adverse price first
        if state["pos"] != 0:
            use_stops = stop_loss or take_profit or trailing_stop
            hit = stop_hit(t, bar_open) if use_stops else None
            ruin = ruin_hit(t, bar_open)
            side = state["entry"]["side"]
            margin = margin_hit(t, bar_open)
            gapped = ruin is not None and state["cash"] + state["pos"] * bar_open <= 0
            # which level the price reaches first (not where they fill: a bar that opens
            # through both fills both at its open); a tie goes to the margin call
            stop_first = (hit is not None and hit[0] in ("stop", "trail")
                          and margin is not None
                          and ((stop_level() > margin_level()) if side > 0
                               else (stop_level() < margin_level())))
            if margin is not None and not gapped and not stop_first:
                ruin, hit = None, ("margin", margin)
            if ruin is not None and hit is not None and hit[0] in ("stop", "trail"):
                # a stop the bar reaches strictly before the ruin price fills instead
                if (hit[1] > ruin) if side > 0 else (hit[1] < ruin):
                    ruin = None
            if ruin is not None:
                liquidate(t, ruin)
            elif hit:
                leave(t, hit[1], hit[0])
            elif use_stops and side > 0:
                state["entry"]["best"] = max(state["entry"]["best"], high[t])
            elif use_stops:
                state["entry"]["best"] = min(state["entry"]["best"], low[t])
        # 3. funding and borrowing on the position held through the bar
        if (funding or borrow_rate) and state["pos"] != 0:
            if funding:
                state["cash"] -= state["pos"] * close[t] * funding_rate[t]
            if state["pos"] > 0:  # interest on the borrowed cash
                state["cash"] -= max(-state["cash"], 0.0) * borrow_rate / ppy
            else:  # a fee on the short's value
                state["cash"] -= -state["pos"] * close[t] * borrow_rate / ppy
            if state["cash"] + state["pos"] * close[t] <= 0:  # nothing left: ruin
                liquidate(t, close[t])
        # 4. the close's signals
        if signal is not None:
            e = state["entry"]
            account = ()
            if takes_account(signal):
                working = order if order is not None and t < order["last"] else None
                account = (state["cash"] + state["pos"] * close[t],
                           working["side"] if working else 0,
                           working["level"] if working else math.nan)
            le, lx, se, sx = signal(t, state["pos"], e and e["price"], e and e["bar"],
                                    *account)
        else:
            le, lx = long_entries[t], long_exits[t]
            se, sx = short_entries[t], short_exits[t]
        pos = state["pos"]
        raw_lx, raw_sx = lx, sx
        le, lx = ref_conflict(conflict, pos, le, lx)
        se, sx = ref_conflict(conflict, pos, se, sx)
        do_exit = (pos > 0 and lx) or (pos < 0 and sx)
        side = 0
        if pos == 0 or do_exit:
            want_long, want_short = le and can_long, se and can_short
            side = 1 if want_long and not want_short else -1 if want_short and not want_long else 0
        if entry_order != "market":
            if side:  # placed, or replaced, at this close
                below = (entry_order == "limit") == (side > 0)
                if offset_unit == "atr":
                    level = (close[t] - entry_offset * atr[t] if below
                             else close[t] + entry_offset * atr[t])
                else:
                    level = (close[t] * (1 - entry_offset) if below
                             else close[t] * (1 + entry_offset))
                order = dict(side=side, level=level,
                             last=t + valid_bars if valid_bars else math.inf)
                side = 0
            elif order is not None and (t >= order["last"]
                                        or (raw_lx if order["side"] > 0 else raw_sx)):
                order = None  # expired, or cancelled by its side's exit signal
        if fill == "close":
            if do_exit:
                leave(t, close[t], "signal")
            if side and not state["ruined"]:
                enter(t, side, close[t])
        elif t + 1 < n:
            queued_exit, queued_side = do_exit, side
        value = state["cash"] + state["pos"] * close[t]
        if state["pos"] != 0 and value <= 0:  # entered under water (slippage >= 50%)
            liquidate(t, close[t])
        if state["ruined"]:
            value = 0.0
        equity.append(value)
        exposed += state["pos"] != 0
    if state["pos"] != 0:
        e = state["entry"]
        pnl = equity[-1] - e["equity"]
        trades.append(dict(entry_bar=e["bar"], exit_bar=n - 1, side=e["side"], pnl=pnl,
                           ret=pnl / (e["size"] * e["price"]), reason="end",
                           entry_price=e["price"], exit_price=close[-1]))
    metrics = ref_metrics(equity, close, trades, exposed, init_cash, ppy, state["ruined"])
    return metrics, equity, trades


def ref_conflict(mode, pos, entry, exit_):
    """One side's ``(entry, exit)`` after the conflict mode ``mode`` resolved them."""
    if not (entry and exit_):
        return entry, exit_
    keep = {"ignore": (False, False), "entry": (True, False), "exit": (False, True),
            "adjacent": (pos != 0, False), "opposite": (False, pos != 0)}
    return keep[mode]


def ref_metrics(equity, close, trades, exposed, init_cash, ppy, ruined=False):
    n = len(equity)
    prev = [init_cash] + equity[:-1]
    # after ruin equity stays 0: "no change" is a return of 0
    r = [e / p - 1 if p > 0 else 0.0 for e, p in zip(equity, prev)]
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
        # ruined on the first bar: no positive peak, -100% against the initial cash
        dds.append(e / peak - 1 if peak > 0 else -1.0)
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
    m["ruined"] = 1.0 if ruined else 0.0
    # population moments about the mean, as scipy.stats.skew / kurtosis(fisher=False)
    m2 = statistics.fmean((x - mean) ** 2 for x in r)
    if m2 > 0:
        m["skew"] = statistics.fmean((x - mean) ** 3 for x in r) / m2 ** 1.5
        m["kurtosis"] = statistics.fmean((x - mean) ** 4 for x in r) / m2 ** 2
    else:
        m["skew"] = m["kurtosis"] = nan
    return m


def ref_wma(close, period):
    weights = range(1, period + 1)
    out = [math.nan] * len(close)
    for t in range(period - 1, len(close)):
        window = close[t - period + 1 : t + 1]
        out[t] = sum(w * x for w, x in zip(weights, window)) / sum(weights)
    return out


def ref_rsi(close, period):
    """Wilder's RSI: simple means of the first ``period`` gains and losses, then smoothed."""
    out = [math.nan] * len(close)
    if len(close) <= period:
        return out
    changes = [close[t] - close[t - 1] for t in range(1, len(close))]
    gain = sum(max(c, 0.0) for c in changes[:period]) / period
    loss = sum(max(-c, 0.0) for c in changes[:period]) / period
    for t in range(period, len(close)):
        if t > period:
            c = changes[t - 1]
            gain = (gain * (period - 1) + max(c, 0.0)) / period
            loss = (loss * (period - 1) + max(-c, 0.0)) / period
        out[t] = 100 * gain / (gain + loss) if gain + loss > 0 else 0.0
    return out


def ref_roc(close, period):
    out = [math.nan] * len(close)
    for t in range(period, len(close)):
        out[t] = (close[t] / close[t - period] - 1) * 100
    return out


def ref_trix(close, period):
    """One-bar ROC in percent of EMA(EMA(EMA(close))), each EMA started at its first value."""
    line = close
    skip = 0
    for _ in range(3):
        line = [math.nan] * skip + ref_ema(line[skip:], period)
        skip += period - 1
    out = [math.nan] * len(close)
    for t in range(skip + 1, len(close)):
        out[t] = (line[t] / line[t - 1] - 1) * 100
    return out


def ref_macd(close, fast, slow, signal):
    """MACD as TA-Lib: both EMAs start at bar slow-1 (the fast one seeded there)."""
    fast, slow = min(fast, slow), max(fast, slow)
    n = len(close)
    start = slow - 1
    slow_line = ref_ema(close, slow)
    fast_line = [math.nan] * n
    value = sum(close[start - fast + 1 : start + 1]) / fast
    fast_line[start] = value
    for t in range(start + 1, n):
        value = 2 / (fast + 1) * close[t] + (1 - 2 / (fast + 1)) * value
        fast_line[t] = value
    line = [math.nan] * start + [fast_line[t] - slow_line[t] for t in range(start, n)]
    sig = [math.nan] * start + ref_ema(line[start:], signal)
    first = start + signal - 1
    nan = [math.nan] * first
    return (nan + line[first:], nan + sig[first:],
            nan + [a - b for a, b in zip(line[first:], sig[first:])])


def ref_bbands(close, period, k):
    """SMA plus and minus k population standard deviations."""
    n = len(close)
    upper, middle, lower = [math.nan] * n, [math.nan] * n, [math.nan] * n
    for t in range(period - 1, n):
        window = close[t - period + 1 : t + 1]
        mean = statistics.fmean(window)
        sd = statistics.pstdev(window)
        upper[t], middle[t], lower[t] = mean + k * sd, mean, mean - k * sd
    return upper, middle, lower


def ref_stdev(close, period):
    """Population standard deviation of the last ``period`` values."""
    out = [math.nan] * len(close)
    for t in range(period - 1, len(close)):
        out[t] = statistics.pstdev(close[t - period + 1 : t + 1])
    return out


def ref_atr(high, low, close, period):
    """Wilder's average of the true range, first the plain mean of bars 1..period."""
    n = len(close)
    out = [math.nan] * n
    tr = [math.nan] + [max(high[t], close[t - 1]) - min(low[t], close[t - 1]) for t in range(1, n)]
    if n <= period:
        return out
    value = sum(tr[1 : period + 1]) / period
    out[period] = value
    for t in range(period + 1, n):
        value = (value * (period - 1) + tr[t]) / period
        out[t] = value
    return out


def ref_donchian(high, low, period):
    n = len(high)
    upper, lower = [math.nan] * n, [math.nan] * n
    for t in range(period - 1, n):
        upper[t] = max(high[t - period + 1 : t + 1])
        lower[t] = min(low[t - period + 1 : t + 1])
    return upper, lower


def ref_stoch(high, low, close, k_period, k_smooth, d_period):
    """Slow stochastic: %K = SMA(fast %K, k_smooth), %D = SMA(%K, d_period)."""
    n = len(close)
    fast_k = [math.nan] * n
    for t in range(k_period - 1, n):
        hh = max(high[t - k_period + 1 : t + 1])
        ll = min(low[t - k_period + 1 : t + 1])
        fast_k[t] = 100 * (close[t] - ll) / (hh - ll) if hh > ll else 0.0
    skip = k_period - 1
    k = [math.nan] * skip + ref_sma(fast_k[skip:], k_smooth)
    skip += k_smooth - 1
    d = [math.nan] * skip + ref_sma(k[skip:], d_period)
    first = skip + d_period - 1
    return [math.nan] * first + k[first:], d
