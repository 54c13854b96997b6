"""The orders of a portfolio combo: the per-symbol scratch's columns, buying and selling,
booking a closed trade, and a rebalance bar's fills (docs/EXECUTION.md, "Portfolios").

Plain functions of scalars and array elements, as :mod:`.sim`, which runs them;
they compile for the CPU and as numba.cuda device functions.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..core.fills import (
    EXIT_SIGNAL,
    SIZE_ALL,
    SIZE_CASH,
    SIZE_PERCENT,
    SIZE_QUANTITY,
    SIZE_VOL_TARGET,
)
from ..core.metrics import acc_trade
from ..core.records import record_trade
from .weights import target_weight

# Columns of the per-symbol scratch ``state`` (shape (N, N_STATE), float64).
S_POS = 0  # shares held (0.0 when flat)
S_FILL = 1  # the open position's entry fill price, slippage included
S_BAR = 2  # the bar of that fill
S_COST = 3  # the cash the entry took: notional and fees
S_ORDER = 4  # the order of this bar's close (:func:`order_code`; 0: none)
S_PENDING = 5  # the order queued for the next open (``next_open``)
S_NEXT = 6  # the first bar, from where it was searched, whose rule enters from flat
S_BASIS = 7  # the notional the position's buys took at their fill prices (no fees)
S_RANK = 8  # a rebalance fill's order value of a buy (NaN: no buy)
S_TARGET = 9  # a rebalance fill's target value of the symbol
S_EXTREME = 10  # the open position's highest high up to the previous bar, from its entry fill
N_STATE = 11

# Columns of the per-symbol results (shape (n_combos, N, N_SYMBOL_METRICS)).
SYMBOL_METRICS = ("n_trades", "exposure")
N_SYMBOL_METRICS = len(SYMBOL_METRICS)


@njit(cache=True)
def order_code(exit_now, side):
    """An order as one number (the scratch's ``S_ORDER``): the side entered (1 long, -1
    short, 0 none) plus 4 when the position is exited first (a reversal exits and
    enters)."""
    return side + (4.0 if exit_now else 0.0)


@njit(cache=True)
def order_exits(code):
    """Whether the order ``code`` (:func:`order_code`) exits the position."""
    return code > 2.0


@njit(cache=True)
def order_side(code):
    """The side the order ``code`` (:func:`order_code`) enters: 1, -1 or 0."""
    return code - 4.0 if code > 2.0 else code


@njit(cache=True)
def buying_power(px, column, t, state, cash, leverage):
    """What the account may still put into positions at ``px[column, :, t]``:
    ``leverage * value - gross exposure``, the value ``cash + sum(shares * price)`` and
    the gross exposure ``sum(|shares| * price)``; the cash itself when every position is
    long and ``leverage`` is 1 (``1.0 * size - |size|`` is exactly 0)."""
    power = leverage * cash
    for i in range(state.shape[0]):
        size = state[i, S_POS]
        if size != 0.0:
            power += (leverage * size - abs(size)) * px[column, i, t]
    return power


@njit(cache=True)
def entry_units(size_type, size_value, value, target, price, fill, fee_rate, fixed_fee,
                stop_loss, vol):
    """The shares an entry wants under ``execution.size`` (``size_type``,
    ``size_value``), as a single-symbol run sizes one with the account's value ``value``
    in place of its cash, capped at the weight's target ``target / price``
    (``target = w * V * leverage``; ``all`` is that target). ``fill``: the slipped price;
    ``vol``: the symbol's annualised volatility (``vol_target``; none when it is not a
    positive number); ``stop_loss``: ``risk``'s distance, a fraction of the fill."""
    cap = target / price
    if size_type == SIZE_ALL:
        return cap
    if size_type == SIZE_PERCENT:
        units = (value * size_value - fixed_fee) / (fill * (1.0 + fee_rate))
    elif size_type == SIZE_VOL_TARGET:
        units = ((value * (size_value / vol) - fixed_fee) / (fill * (1.0 + fee_rate))
                 if vol > 0.0 else 0.0)
    elif size_type == SIZE_CASH:
        units = size_value / fill
    elif size_type == SIZE_QUANTITY:
        units = size_value
    else:  # SIZE_RISK
        units = size_value * value / (stop_loss * fill)
    return min(units, cap)


@njit(inline="always", cache=True)
def open_position(state, i, t, size, fill, cost):
    """Symbol ``i``'s state columns for a position of ``size`` shares (signed: < 0 a
    short) filled at ``fill`` on bar ``t`` for the cash ``cost`` (fees included; a
    short's is negative: its proceeds)."""
    state[i, S_POS] = size
    state[i, S_FILL] = fill
    state[i, S_BAR] = t
    state[i, S_COST] = cost
    state[i, S_BASIS] = abs(size) * fill
    state[i, S_EXTREME] = fill


@njit(cache=True)
def sell(cash, size, price, fee_rate, fixed_fee, slippage):
    """Sell ``size`` shares at ``price`` less ``slippage`` (a negative ``size``: buy
    them back at ``price`` plus ``slippage``); returns ``(cash after, fill price, cash
    received net of fees)``, negative for a buy."""
    side = 1.0 if size > 0.0 else -1.0
    fill = price * (1.0 - side * slippage)
    proceeds = size * fill
    net = proceeds - (abs(proceeds) * fee_rate + fixed_fee)
    return cash + net, fill, net


@njit(inline="always", cache=True)
def book_trade(state, i, t, exit_fill, received, reason, held, trade_acc, sym, rec):
    """Close symbol ``i``'s position at bar ``t``: its trade's pnl is ``received`` (the
    exit's net proceeds; a short's buy-back: negative) less what its entry and buys cost
    (a short's entry: its proceeds, negative), its return that over their notional;
    the trade goes into the accumulator (returned) and the record ``rec`` (exit fill
    ``exit_fill``, reason ``reason``), and the symbol's ``sym`` counts one trade held
    ``held`` bars (marked from its entry bar to ``t - 1``, or ``t`` when marked at the
    close of ``t``)."""
    pnl = received - state[i, S_COST]
    ret = pnl / state[i, S_BASIS]
    size = state[i, S_POS]
    record_trade(rec, int(trade_acc[0]), i, int(state[i, S_BAR]), t, 1 if size > 0.0 else -1,
                 state[i, S_FILL], exit_fill, abs(size), pnl, ret, reason)
    trade_acc = acc_trade(trade_acc, pnl, ret)
    sym[i, 0] += 1.0
    sym[i, 1] += held
    state[i, S_POS] = 0.0
    return trade_acc


@njit(cache=True)
def rebalance_fill(px, column, t, state, order_col, cash, n_open, max_open, sizing, lb, run,
                   leverage, trade_acc, sym, rec):
    """Fill a rebalance bar's orders (``state[:, order_col]``) at ``px[column, i, t]``:
    the exits, entries and every other held position re-targeted to its target weight
    ``w_i`` (:func:`~.weights.target_weight`, read where the orders were
    decided, as :func:`fill_orders`) of the account's value ``V`` marked at these prices
    before any of these orders, times ``leverage`` (long only: a spec that rebalances
    trades no shorts and sizes by the weights).

    A held position without an order trades ``w_i * V / price - size`` shares (none when
    that is 0 or ``w_i`` is 0; no sale whose proceeds are less than its fees). The sells
    (the exits and the positions above their target, in the symbols' order) fill first;
    then the buys in ascending order of their value ``w_i * V - size * price`` (an
    entry's is ``w_i * V``), ties in the symbols' order, as vectorbt's
    ``call_seq='auto'``; the entries only while fewer than ``max_open`` are open; each
    buy cut to the buying power (:func:`buying_power`). A
    re-target moves the position's cost basis: a sell's net proceeds come off
    ``S_COST``; a buy's cost adds to it and its notional to ``S_BASIS``; the position
    stays one trade until it exits.

    Returns ``(cash, open positions, trade accumulator)``, as :func:`fill_orders`.
    """
    n_sym = state.shape[0]
    value = cash
    for i in range(n_sym):
        if state[i, S_POS] != 0.0:
            value += state[i, S_POS] * px[column, i, t]
    decided = t if column == 1 else t - 1
    for i in range(n_sym):
        state[i, S_TARGET] = target_weight(sizing, lb, i, decided, max_open) * value * leverage
    cash, n_open, trade_acc, n_buys = rebalance_sells(px, column, t, state, order_col,
                                                      cash, n_open, run, trade_acc, sym, rec)
    last = -1.0
    last_i = -1
    for _ in range(n_buys):  # the buys, by ascending order value (a selection sort)
        best = -1
        for i in range(n_sym):
            v = state[i, S_RANK]
            if v == v and (v > last or (v == last and i > last_i)) and (
                    best < 0 or v < state[best, S_RANK]):
                best = i
        last = state[best, S_RANK]
        last_i = best
        power = buying_power(px, column, t, state, cash, leverage)
        cash, n_open = rebalance_buy(px[column, best, t], t, state, best, cash, power,
                                     n_open, max_open, run)
    return cash, n_open, trade_acc


@njit(cache=True)
def rebalance_sells(px, column, t, state, order_col, cash, n_open, run, trade_acc, sym,
                    rec):
    """The sells of :func:`rebalance_fill` (each symbol's target value in
    ``state[:, S_TARGET]``); ranks its buys into ``state[:, S_RANK]``.

    Returns ``(cash, open positions, trade accumulator, number of buys)``.
    """
    n_buys = 0
    for i in range(state.shape[0]):
        size = state[i, S_POS]
        price = px[column, i, t]
        target = state[i, S_TARGET]
        state[i, S_RANK] = np.nan
        if size != 0.0 and order_exits(state[i, order_col]):
            cash, fill, net = sell(cash, size, price, run.fee_rate, run.fixed_fee,
                                   run.slippage)
            trade_acc = book_trade(state, i, t, fill, net, EXIT_SIGNAL, t - state[i, S_BAR],
                                   trade_acc, sym, rec)
            n_open -= 1
        elif size != 0.0 and target > 0.0:
            delta = target / price - size
            if delta < 0.0:
                after, fill, net = sell(cash, -delta, price, run.fee_rate, run.fixed_fee,
                                        run.slippage)
                if net >= 0.0:  # a sale its fees would eat is not made (as vectorbt)
                    cash = after
                    state[i, S_POS] = size - (-delta)
                    state[i, S_COST] -= net
            elif delta > 0.0:
                state[i, S_RANK] = target - size * price
                n_buys += 1
        elif size == 0.0 and order_side(state[i, order_col]) > 0.0 and target > 0.0:
            state[i, S_RANK] = target
            n_buys += 1
    return cash, n_open, trade_acc, n_buys


@njit(cache=True)
def rebalance_buy(price, t, state, i, cash, power, n_open, max_open, run):
    """Symbol ``i``'s buy in :func:`rebalance_fill`: an entry worth its target value
    ``state[i, S_TARGET]`` (while fewer than ``max_open`` are open) or a held position
    topped up to it, cut to the buying power ``power``; returns ``(cash, open
    positions)``."""
    size = state[i, S_POS]
    target = state[i, S_TARGET]
    if size == 0.0:
        if n_open < max_open:
            bought, cash, fill, cost = open_shares(cash, power, 1.0, target / price, price,
                                                   run.fee_rate, run.fixed_fee, run.slippage,
                                                   0.0)
            if bought > 0.0:
                open_position(state, i, t, bought, fill, cost)
                n_open += 1
        return cash, n_open
    bought, cash, fill, cost = open_shares(cash, power, 1.0, target / price - size, price,
                                           run.fee_rate, run.fixed_fee, run.slippage, 0.0)
    if bought > 0.0:
        state[i, S_POS] = size + bought
        state[i, S_COST] += cost
        state[i, S_BASIS] += bought * fill
    return cash, n_open


@njit(cache=True)
def open_shares(cash, power, side, size, price, fee_rate, fixed_fee, slippage, lot):
    """Open (or add to) a position of ``side`` (1 long, -1 short) with ``size`` shares
    at ``price``, slipped against the trader by ``slippage``; the order takes
    ``size * fill * (1 + fee_rate) + fixed_fee`` of the buying power ``power``
    (:func:`buying_power`; the cash, long only without leverage). When that is more than
    ``power``, the size is what the power pays for, ``(power - fixed_fee) / (1 +
    fee_rate) / fill``; ``lot`` > 0 then rounds it down to whole multiples of it; none
    when it is <= 0. A long pays ``notional + fees`` from ``cash``, a short receives
    ``notional - fees``.

    Returns
    -------
    (size bought or sold short, cash after, fill price, cash spent: a short's is
    negative)
    """
    fill = price * (1.0 + side * slippage)
    notional = size * fill
    cost = notional + (notional * fee_rate + fixed_fee)
    if cost > power:
        size = (power - fixed_fee) / (1.0 + fee_rate) / fill
        if side > 0.0 and lot == 0.0:  # the whole power is spent (no rounding residue)
            if size <= 0.0:
                return 0.0, cash, fill, 0.0
            return size, cash - power, fill, power
    if lot > 0.0:
        size = (size // lot) * lot
    if not size > 0.0:
        return 0.0, cash, fill, 0.0
    notional = size * fill
    spent = side * notional + (notional * fee_rate + fixed_fee)
    return size, cash - spent, fill, spent
