"""A round trip booked: its result, its row in the record (:func:`~.records.record_trade`,
when one combo is rebuilt in full), and the trade metrics
(:func:`~barsweep.engine.core.metrics.acc_trade`). Plain functions of scalars, compiled for
the CPU and, through :func:`~barsweep.engine.core.simulate.simulate`, as numba.cuda device
functions.
"""

from __future__ import annotations

from numba import njit

from .fills import EXIT_RUIN, close_position
from .metrics import acc_trade
from .records import record_trade


@njit(cache=True)
def trade_result(position, entry_fill, entry_equity, exit_equity):
    """``(pnl, return)`` of a round trip; the return is on entry notional (as vectorbt).

    ``pnl`` is the change of equity over the trade: fees and funding included.
    """
    pnl = exit_equity - entry_equity
    return pnl, pnl / (abs(position) * entry_fill)


@njit(cache=True)
def book_trade(trade_acc, rec, entry_bar, exit_bar, position, entry_fill, entry_equity,
               exit_fill, exit_equity, reason):
    """Account one round trip: its row in the record ``rec`` (a
    :class:`~.records.Record`, or None) and the trade metrics."""
    pnl, ret = trade_result(position, entry_fill, entry_equity, exit_equity)
    record_trade(rec, int(trade_acc[0]), 0, entry_bar, exit_bar, 1 if position > 0.0 else -1,
                 entry_fill, exit_fill, abs(position), pnl, ret, reason)
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
