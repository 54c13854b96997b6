"""The orders of a portfolio combo: the per-symbol scratch's columns, buying and selling,
booking a closed trade, and a rebalance bar's fills (docs/EXECUTION.md, "Portfolios").

Plain functions of scalars and array elements, as :mod:`.sim`, which runs them;
they compile for the CPU and as numba.cuda device functions.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..core.fills import EXIT_SIGNAL
from ..core.metrics import acc_trade
from ..core.records import record_trade
from .weights import target_weight

# Columns of the per-symbol scratch ``state`` (shape (N, N_STATE), float64).
S_POS = 0  # shares held (0.0 when flat)
S_FILL = 1  # the open position's entry fill price, slippage included
S_BAR = 2  # the bar of that fill
S_COST = 3  # the cash the entry took: notional and fees
S_ORDER = 4  # the order of this bar's close: -1 exit, 1 enter, 0 none
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
def buy(cash, target_value, price, fee_rate, fixed_fee, slippage):
    """Enter from flat with ``target_value`` worth at ``price``, paid from ``cash``.

    The size is ``target_value / price`` (the value at the unslipped price, as
    vectorbt's ``targetpercent``); the fill moves against the trader by ``slippage``;
    the order costs ``size * fill * (1 + fee_rate) + fixed_fee``. When that is more than
    ``cash``, the size is what the cash pays for: ``(cash - fixed_fee) / (1 + fee_rate)
    / fill`` (none when that is <= 0), leaving cash 0.

    Returns
    -------
    (size, cash after, fill price, cash spent)
    """
    return buy_shares(cash, target_value / price, price, fee_rate, fixed_fee, slippage)


@njit(inline="always", cache=True)
def open_position(state, i, t, size, fill, cost):
    """Symbol ``i``'s state columns for a position of ``size`` shares bought at ``fill``
    on bar ``t`` for ``cost`` (fees included)."""
    state[i, S_POS] = size
    state[i, S_FILL] = fill
    state[i, S_BAR] = t
    state[i, S_COST] = cost
    state[i, S_BASIS] = size * fill
    state[i, S_EXTREME] = fill


@njit(cache=True)
def sell(cash, size, price, fee_rate, fixed_fee, slippage):
    """Sell all ``size`` shares at ``price``; returns ``(cash after, fill price, cash
    received net of fees)``."""
    fill = price * (1.0 - slippage)
    proceeds = size * fill
    net = proceeds - (proceeds * fee_rate + fixed_fee)
    return cash + net, fill, net


@njit(inline="always", cache=True)
def book_trade(state, i, t, exit_fill, received, reason, held, trade_acc, sym, rec):
    """Close symbol ``i``'s position at bar ``t``: its trade's pnl is ``received`` (the
    exit's net proceeds) less what its buys cost, its return that over their notional;
    the trade goes into the accumulator (returned) and the record ``rec`` (exit fill
    ``exit_fill``, reason ``reason``), and the symbol's ``sym`` counts one trade held
    ``held`` bars (marked from its entry bar to ``t - 1``, or ``t`` when marked at the
    close of ``t``)."""
    pnl = received - state[i, S_COST]
    ret = pnl / state[i, S_BASIS]
    record_trade(rec, int(trade_acc[0]), i, int(state[i, S_BAR]), t, 1, state[i, S_FILL],
                 exit_fill, state[i, S_POS], pnl, ret, reason)
    trade_acc = acc_trade(trade_acc, pnl, ret)
    sym[i, 0] += 1.0
    sym[i, 1] += held
    state[i, S_POS] = 0.0
    return trade_acc


@njit(cache=True)
def rebalance_fill(px, column, t, state, order_col, cash, n_open, max_open, sizing, lb, run,
                   trade_acc, sym, rec):
    """Fill a rebalance bar's orders (``state[:, order_col]``) at ``px[column, i, t]``:
    the exits, entries and every other held position re-targeted to its target weight
    ``w_i`` (:func:`~.weights.target_weight`, read where the orders were
    decided, as :func:`fill_orders`) of the account's value ``V`` marked at these prices
    before any of these orders.

    A held position without an order trades ``w_i * V / price - size`` shares (none when
    that is 0 or ``w_i`` is 0; no sale whose proceeds are less than its fees). The sells
    (the exits and the positions above their target, in the symbols' order) fill first;
    then the buys in ascending order of their value ``w_i * V - size * price`` (an
    entry's is ``w_i * V``), ties in the symbols' order, as vectorbt's
    ``call_seq='auto'``; the entries only while fewer than ``max_open`` are open. A
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
        state[i, S_TARGET] = target_weight(sizing, lb, i, decided, max_open) * value
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
        cash, n_open = rebalance_buy(px[column, best, t], t, state, best, cash, n_open,
                                     max_open, run)
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
        if size != 0.0 and state[i, order_col] < 0.0:
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
        elif size == 0.0 and state[i, order_col] > 0.0 and target > 0.0:
            state[i, S_RANK] = target
            n_buys += 1
    return cash, n_open, trade_acc, n_buys


@njit(cache=True)
def rebalance_buy(price, t, state, i, cash, n_open, max_open, run):
    """Symbol ``i``'s buy in :func:`rebalance_fill`: an entry worth its target value
    ``state[i, S_TARGET]`` (while fewer than ``max_open`` are open) or a held position
    topped up to it; returns ``(cash, open positions)``."""
    size = state[i, S_POS]
    target = state[i, S_TARGET]
    if size == 0.0:
        if n_open < max_open:
            bought, cash, fill, cost = buy(cash, target, price, run.fee_rate, run.fixed_fee,
                                           run.slippage)
            if bought > 0.0:
                open_position(state, i, t, bought, fill, cost)
                n_open += 1
        return cash, n_open
    bought, cash, fill, cost = buy_shares(cash, target / price - size, price, run.fee_rate,
                                          run.fixed_fee, run.slippage)
    if bought > 0.0:
        state[i, S_POS] = size + bought
        state[i, S_COST] += cost
        state[i, S_BASIS] += bought * fill
    return cash, n_open


@njit(cache=True)
def buy_shares(cash, size, price, fee_rate, fixed_fee, slippage):
    """Buy ``size`` more shares at ``price`` (slipped against the trader by
    ``slippage``), paid from ``cash`` with fees; when that costs more than ``cash``,
    what the cash pays for, as :func:`buy`.

    Returns
    -------
    (size bought, cash after, fill price, cash spent)
    """
    fill = price * (1.0 + slippage)
    notional = size * fill
    cost = notional + (notional * fee_rate + fixed_fee)
    if cost <= cash:
        return size, cash - cost, fill, cost
    size = (cash - fixed_fee) / (1.0 + fee_rate) / fill
    if size <= 0.0:
        return 0.0, cash, fill, 0.0
    return size, 0.0, fill, cash
