"""The per-bar simulation of one combo: fills, position, marking, metrics.

Everything here is a plain function of scalars, tuples and array elements
(no allocation, no numpy calls, no Python objects), compiled with ``njit`` for
the CPU sweep and ``backtest()``; the same functions compile as numba.cuda device
functions. Semantics are DESIGN.md's "Execution semantics":

* the signal of bar ``t`` is computed from its close; ``fill: close`` fills at
  ``close[t]``, ``fill: next_open`` at ``open[t + 1]`` (a signal on the last bar
  is never filled);
* all equity goes into a position: ``size = cash / (price * (1 + fee_rate))``;
  slippage moves the fill price against the trader;
* an entry and an exit signal on the same bar cancel (as vectorbt's default);
* a position open at the last bar is marked at the last close with no exit fee
  and counts as a trade.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .metrics import (
    DD_ACC0,
    RET_ACC0,
    TRADE_ACC0,
    acc_drawdown,
    acc_returns,
    acc_trade,
    finalize,
)

# Layout of ``xp``, the float64 vector of execution settings (see execution.py).
XP_NEXT_OPEN = 0
XP_FEE_RATE = 1
XP_SLIPPAGE = 2
XP_INIT_CASH = 3
XP_PPY = 4
XP_SUM_B = 5
XP_SUM_B2 = 6
N_XP = 7

# Columns of the trades record written by ``backtest()``.
TRADE_FIELDS = ("entry_bar", "exit_bar", "entry_price", "exit_price", "size", "pnl",
                "return", "exit_reason")
N_TRADE_FIELDS = len(TRADE_FIELDS)
EXIT_SIGNAL = 0.0
EXIT_END = 4.0
EXIT_REASONS = ("signal", "stop", "target", "trail", "end")


@njit(cache=True)
def cross_above(a_prev, b_prev, a, b):
    """True when ``a`` crosses above ``b``: ``a_prev < b_prev and a > b``, all defined."""
    return a_prev < b_prev and a > b


@njit(cache=True)
def cross_below(a_prev, b_prev, a, b):
    """True when ``a`` crosses below ``b``: ``a_prev > b_prev and a < b``, all defined."""
    return a_prev > b_prev and a < b


@njit(cache=True)
def long_action(size, entry, exit_):
    """+1 to open a long, -1 to close it, 0 to do nothing (long-only)."""
    if entry and exit_:
        return 0
    if size == 0.0 and entry:
        return 1
    if size > 0.0 and exit_:
        return -1
    return 0


@njit(cache=True)
def buy_all(cash, price, fee_rate, slippage):
    """Spend all ``cash`` on a long at ``price``; return ``(size, fill price)``."""
    fill = price * (1.0 + slippage)
    return cash / (fill * (1.0 + fee_rate)), fill


@njit(cache=True)
def sell_all(cash, size, price, fee_rate, slippage):
    """Close a long of ``size`` at ``price``; return ``(cash after, fill price)``."""
    fill = price * (1.0 - slippage)
    notional = size * fill
    return cash + notional - notional * fee_rate, fill


@njit(cache=True)
def trade_result(size, entry_fill, entry_cash, exit_value):
    """``(pnl, return)`` of a closed long; the return is on entry notional (as vectorbt)."""
    pnl = exit_value - entry_cash
    return pnl, pnl / (size * entry_fill)


@njit(cache=True)
def record_trade(rec, k, entry_bar, exit_bar, entry_fill, exit_fill, size, pnl, ret, reason):
    """Write trade ``k`` into ``rec`` (shape (n_max, N_TRADE_FIELDS)) when recording."""
    if k < rec.shape[0]:
        rec[k, 0] = entry_bar
        rec[k, 1] = exit_bar
        rec[k, 2] = entry_fill
        rec[k, 3] = exit_fill
        rec[k, 4] = size
        rec[k, 5] = pnl
        rec[k, 6] = ret
        rec[k, 7] = reason


@njit(inline="always", cache=True)
def simulate(signal, bars, ind, rows, fparams, xp, out, rec_equity, rec_trades):
    """Run one combo over every bar and write its metrics into ``out``.

    Inlined (numba IR level) into each strategy's kernel, so ``signal`` becomes a
    direct call there and the kernel stays cacheable.

    Parameters
    ----------
    signal : njit function ``(ind, rows, fparams, t) -> (long_entry, long_exit,
        short_entry, short_exit)``, the strategy's rule at bar ``t``.
    bars : tuple of 5 ndarrays, shape (n_bars,), float64
        ``(open, high, low, close, benchmark returns)``.
    ind : ndarray, shape (n_rows, n_bars), float64
        Hoisted indicator rows.
    rows : ndarray, shape (n_slots,), int64
        This combo's row of ``ind`` for each of the strategy's indicator slots.
    fparams : ndarray, shape (n_params,), float64
        This combo's parameter values, in the strategy's order.
    xp : ndarray, shape (N_XP,), float64
        Execution settings and benchmark sums (``XP_*`` indices).
    out : ndarray, shape (N_METRICS,), float64
        Written: the metrics, in ``METRICS`` order.
    rec_equity : ndarray, shape (n_bars,) or (0,), float64
        Written when non-empty: the equity at each close.
    rec_trades : ndarray, shape (n_max, N_TRADE_FIELDS) or (0, N_TRADE_FIELDS)
        Written when ``rec_equity`` is non-empty: one row per trade.
    """
    open_, high, low, close, bench = bars
    n = close.shape[0]
    next_open = xp[XP_NEXT_OPEN] != 0.0
    fee_rate = xp[XP_FEE_RATE]
    slippage = xp[XP_SLIPPAGE]
    init_cash = xp[XP_INIT_CASH]
    record = rec_equity.shape[0] > 0

    cash = init_cash
    size = 0.0
    entry_cash = 0.0
    entry_fill = 0.0
    entry_bar = 0
    pending = 0
    prev_equity = init_cash
    equity = init_cash
    n_exposed = 0
    ret_acc = RET_ACC0
    dd_acc = DD_ACC0
    trade_acc = TRADE_ACC0

    for t in range(n):
        for phase in range(2):
            # phase 0: the order pending from bar t-1 fills at this open;
            # phase 1: this bar's signal, filled at this close or queued.
            if phase == 0:
                action = pending
                price = open_[t]
                pending = 0
            else:
                long_entry, long_exit, short_entry, short_exit = signal(ind, rows, fparams, t)
                action = long_action(size, long_entry, long_exit)
                price = close[t]
                if next_open:
                    if t + 1 < n:
                        pending = action
                    action = 0
            if action > 0:
                entry_cash = cash
                size, entry_fill = buy_all(cash, price, fee_rate, slippage)
                cash = 0.0
                entry_bar = t
            elif action < 0:
                cash, exit_fill = sell_all(cash, size, price, fee_rate, slippage)
                pnl, ret = trade_result(size, entry_fill, entry_cash, cash)
                if record:
                    record_trade(rec_trades, int(trade_acc[0]), entry_bar, t, entry_fill,
                                 exit_fill, size, pnl, ret, EXIT_SIGNAL)
                trade_acc = acc_trade(trade_acc, pnl, ret)
                size = 0.0

        equity = cash + size * close[t]
        if size != 0.0:
            n_exposed += 1
        ret_acc = acc_returns(ret_acc, equity / prev_equity - 1.0, bench[t])
        dd_acc = acc_drawdown(dd_acc, equity)
        prev_equity = equity
        if record:
            rec_equity[t] = equity

    if size != 0.0:
        pnl, ret = trade_result(size, entry_fill, entry_cash, equity)
        if record:
            record_trade(rec_trades, int(trade_acc[0]), entry_bar, n - 1, entry_fill,
                         close[n - 1], size, pnl, ret, EXIT_END)
        trade_acc = acc_trade(trade_acc, pnl, ret)

    finalize(out, n, xp[XP_PPY], init_cash, equity, ret_acc, dd_acc, trade_acc, n_exposed,
             (xp[XP_SUM_B], xp[XP_SUM_B2]))


def no_record(n_bars: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Empty recording arrays: the sweep records neither equity nor trades."""
    return np.empty(0), np.empty((0, N_TRADE_FIELDS))
