"""What one portfolio combo's run records, written by the sweep kernel itself.

:func:`barsweep.engine.portfolio.sim.simulate_portfolio` takes a :class:`PortfolioRecord`
when one combo is rebuilt in full
(:func:`barsweep.engine.backtest.portfolio.backtest_portfolio`), None in a sweep. The
``record_*`` functions write array elements from scalars; the simulation calls them where
its values are final, so the record holds the very numbers the metrics were accumulated
from. Compiled, each is overloaded on its record's type: with None (a sweep) it is
nothing at all.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import types
from numba.extending import overload

# Columns of the portfolio's trades record.
PORTFOLIO_TRADE_FIELDS = ("symbol", "entry_bar", "exit_bar", "entry_price", "exit_price",
                          "size", "pnl", "return", "exit_reason")
N_PORTFOLIO_TRADE_FIELDS = len(PORTFOLIO_TRADE_FIELDS)


class PortfolioRecord(NamedTuple):
    """The per-bar and per-trade record of one portfolio combo (float64 arrays).

    Attributes
    ----------
    equity : ndarray, shape (n_bars,)
        The account's value at each close.
    cash : ndarray, shape (n_bars,)
        The cash at each close.
    shares : ndarray, shape (N, n_bars)
        Each symbol's shares held at each close (0.0 when flat).
    trades : ndarray, shape (n_max, N_PORTFOLIO_TRADE_FIELDS)
        One row per closed or marked round trip, :data:`PORTFOLIO_TRADE_FIELDS`, in the
        order they closed; rows past ``n_trades`` are not written.
    """

    equity: np.ndarray
    cash: np.ndarray
    shares: np.ndarray
    trades: np.ndarray


def portfolio_record(n_symbols: int, n_bars: int) -> PortfolioRecord:
    """Arrays for one combo over ``n_bars`` bars (NaN where a run does not reach), with
    room for every trade the run can make (one entry a symbol a bar)."""
    return PortfolioRecord(np.full(n_bars, np.nan), np.full(n_bars, np.nan),
                           np.full((n_symbols, n_bars), np.nan),
                           np.empty((n_symbols * n_bars + n_symbols,
                                     N_PORTFOLIO_TRADE_FIELDS)))


def record_trade(rec, k, symbol, entry_bar, exit_bar, entry_fill, exit_fill, size, pnl,
                 ret, reason):
    """Write trade ``k`` into ``rec.trades`` when it has room; nothing when ``rec`` is
    None."""
    if rec is not None:
        _trade(rec, k, symbol, entry_bar, exit_bar, entry_fill, exit_fill, size, pnl, ret,
               reason)


def record_bar(rec, t, cash, equity, state, pos_col):
    """Record bar ``t``'s close: the equity, the cash and each symbol's shares (column
    ``pos_col`` of the per-symbol ``state``); nothing when ``rec`` is None."""
    if rec is not None:
        _bar(rec, t, cash, equity, state, pos_col)


def record_flat(rec, start, end, equity):
    """Record bars ``[start, end)`` of a stretch with every symbol flat: the equity, all
    of it cash; nothing when ``rec`` is None."""
    if rec is not None:
        _flat(rec, start, end, equity)


def _trade(rec, k, symbol, entry_bar, exit_bar, entry_fill, exit_fill, size, pnl, ret,
           reason):
    trades = rec.trades
    if k < trades.shape[0]:
        trades[k, 0] = symbol
        trades[k, 1] = entry_bar
        trades[k, 2] = exit_bar
        trades[k, 3] = entry_fill
        trades[k, 4] = exit_fill
        trades[k, 5] = size
        trades[k, 6] = pnl
        trades[k, 7] = ret
        trades[k, 8] = reason


def _bar(rec, t, cash, equity, state, pos_col):
    rec.equity[t] = equity
    rec.cash[t] = cash
    for i in range(state.shape[0]):
        rec.shares[i, t] = state[i, pos_col]


def _flat(rec, start, end, equity):
    for t in range(start, end):
        rec.equity[t] = equity
        rec.cash[t] = equity
        for i in range(rec.shares.shape[0]):
            rec.shares[i, t] = 0.0


# Each record_* function compiles by the type of its record: the writes for a
# PortfolioRecord, nothing at all for None. A sweep's kernel then holds no trace of the
# recording: a store in its per-bar loop, even one never reached, keeps the compiler
# from holding the loop's values in registers (measured: 1.5x slower).


@overload(record_trade, inline="always")
def _record_trade(rec, k, symbol, entry_bar, exit_bar, entry_fill, exit_fill, size, pnl,
                  ret, reason):
    if isinstance(rec, types.NoneType):
        return lambda rec, k, symbol, entry_bar, exit_bar, entry_fill, exit_fill, size, \
            pnl, ret, reason: None
    return _trade


@overload(record_bar, inline="always")
def _record_bar(rec, t, cash, equity, state, pos_col):
    if isinstance(rec, types.NoneType):
        return lambda rec, t, cash, equity, state, pos_col: None
    return _bar


@overload(record_flat, inline="always")
def _record_flat(rec, start, end, equity):
    if isinstance(rec, types.NoneType):
        return lambda rec, start, end, equity: None
    return _flat
