"""A round trip booked: its result, its row in ``backtest()``'s trades record, and the
trade metrics (:func:`~barsweep.engine.core.metrics.acc_trade`). Plain functions of scalars,
compiled for the CPU and, through :func:`~barsweep.engine.core.simulate.simulate`, as
numba.cuda device functions.
"""

from __future__ import annotations

from numba import njit

from .fills import EXIT_RUIN, close_position
from .metrics import acc_trade


@njit(cache=True)
def trade_result(position, entry_fill, entry_equity, exit_equity):
    """``(pnl, return)`` of a round trip; the return is on entry notional (as vectorbt).

    ``pnl`` is the change of equity over the trade: fees and funding included.
    """
    pnl = exit_equity - entry_equity
    return pnl, pnl / (abs(position) * entry_fill)


@njit(cache=True)
def record_trade(rec, k, entry_bar, exit_bar, position, entry_fill, exit_fill, pnl, ret,
                 reason):
    """Write trade ``k`` into ``rec`` (shape (n_max, N_TRADE_FIELDS)) if there is room
    (the sweep passes an empty ``rec``: nothing is written)."""
    if k < rec.shape[0]:
        rec[k, 0] = entry_bar
        rec[k, 1] = exit_bar
        rec[k, 2] = 1.0 if position > 0.0 else -1.0
        rec[k, 3] = entry_fill
        rec[k, 4] = exit_fill
        rec[k, 5] = abs(position)
        rec[k, 6] = pnl
        rec[k, 7] = ret
        rec[k, 8] = reason


@njit(cache=True)
def book_trade(trade_acc, rec, entry_bar, exit_bar, position, entry_fill, entry_equity,
               exit_fill, exit_equity, reason):
    """Account one round trip: its record (when recording) and the trade metrics."""
    pnl, ret = trade_result(position, entry_fill, entry_equity, exit_equity)
    record_trade(rec, int(trade_acc[0]), entry_bar, exit_bar, position, entry_fill,
                 exit_fill, pnl, ret, reason)
    return acc_trade(trade_acc, pnl, ret)


@njit(cache=True)
def exit_trade(cash, position, price, slippage, fee_rate, fixed_fee, entry_fill, entry_equity,
               entry_bar, t, reason, trade_acc, rec):
    """Close ``position`` at ``price`` on bar ``t`` and book the trade.

    An exit whose costs exceed what is left (a fixed fee, or a short bought back above
    its ruin price) leaves cash 0, not less: the trade's reason becomes ``EXIT_RUIN``.

    Returns ``(cash after, trade accumulator)``.
    """
    cash, fill = close_position(cash, position, price, fee_rate, fixed_fee, slippage)
    if cash <= 0.0:
        cash = 0.0
        reason = EXIT_RUIN
    return cash, book_trade(trade_acc, rec, entry_bar, t, position, entry_fill, entry_equity,
                            fill, cash, reason)
