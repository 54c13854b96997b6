"""What a run records when one combo is rebuilt in full, written by the sweep's own kernels.

:func:`~barsweep.engine.core.simulate.simulate` takes a :class:`Record` and
:func:`~barsweep.engine.portfolio.sim.simulate_portfolio` a :class:`PortfolioRecord` when
one combo is rebuilt in full (:func:`~barsweep.engine.backtest.single.backtest`,
:func:`~barsweep.engine.backtest.portfolio.backtest_portfolio`), None in a sweep. The
``record_*`` functions write array elements from scalars; the simulations call them where
their values are final, so a record holds the very numbers the metrics were accumulated
from. Both record their round trips the same way: one row of :data:`trade_dt` each
(:func:`record_trade`), written by field name.

Compiled, each ``record_*`` function is overloaded on its record's type: the writes for a
record, nothing at all for None. A sweep's kernel then holds no trace of the recording: a
store in its per-bar loop, even one never reached, keeps the compiler from holding the
loop's values in registers (measured on the portfolio kernel: 1.5x slower). A rebuild
runs the kernel's own specialisation for its record, compiled once and cached as the
sweep's (:data:`barsweep.engine.warm.RECORDING`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import types
from numba.extending import overload

#: One round trip, as both kernels record it (the model: vectorbt's ``trade_dt``).
#:
#: ``symbol``: the member's index in a portfolio, 0 in a single-symbol run; ``entry_bar``,
#: ``exit_bar``: the bars of the entry fill and of the exit (or of the last close, for a
#: trade marked there); ``side``: +1 long, -1 short; ``entry_price``, ``exit_price``:
#: the fills, slippage included; ``size``: the quantity, > 0; ``pnl``: the change of
#: equity over the trade, fees (and funding) included; ``return``: ``pnl`` over the entry
#: notional; ``exit_reason``: an index of :data:`barsweep.engine.core.fills.EXIT_REASONS`.
trade_dt = np.dtype([
    ("symbol", np.int64),
    ("entry_bar", np.int64),
    ("exit_bar", np.int64),
    ("side", np.int64),
    ("entry_price", np.float64),
    ("exit_price", np.float64),
    ("size", np.float64),
    ("pnl", np.float64),
    ("return", np.float64),
    ("exit_reason", np.int64),
], align=True)


def no_trades(n_max: int) -> np.ndarray:
    """Room for ``n_max`` trades, shape (n_max,), :data:`trade_dt`: unwritten (the
    kernels write every field of the rows they record and nothing else is read, so the
    room is never paged in)."""
    return np.empty(n_max, dtype=trade_dt)


class Record(NamedTuple):
    """The per-bar and per-trade record of one single-symbol combo.

    Attributes
    ----------
    equity : ndarray, shape (n_bars,), float64
        The equity at each close of the bars run (others are not written).
    trades : ndarray, shape (n_max,), :data:`trade_dt`
        One row per round trip in the order they closed, trades ``0 .. n_trades - 1``
        written (none past ``n_max``).
    """

    equity: np.ndarray
    trades: np.ndarray


def symbol_record(n_bars: int) -> Record:
    """A :class:`Record` for one combo over ``n_bars`` bars, with room for every trade
    the run can make (one a bar, and one marked at the end)."""
    return Record(np.empty(n_bars), no_trades(n_bars + 1))


class PortfolioRecord(NamedTuple):
    """The per-bar and per-trade record of one portfolio combo.

    Attributes
    ----------
    equity : ndarray, shape (n_bars,), float64
        The account's value at each close.
    cash : ndarray, shape (n_bars,), float64
        The cash at each close.
    shares : ndarray, shape (N, n_bars), float64
        Each symbol's shares held at each close (0.0 when flat).
    trades : ndarray, shape (n_max,), :data:`trade_dt`
        One row per closed or marked round trip, in the order they closed; rows past
        ``n_trades`` are not written.
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
                           no_trades(n_symbols * n_bars + n_symbols))


def record_trade(rec, k, symbol, entry_bar, exit_bar, side, entry_price, exit_price, size,
                 pnl, ret, reason):
    """Write trade ``k`` into ``rec.trades`` (a :class:`Record` or
    :class:`PortfolioRecord`) when it has room; nothing when ``rec`` is None."""
    if rec is not None:
        _trade(rec, k, symbol, entry_bar, exit_bar, side, entry_price, exit_price, size, pnl,
               ret, reason)


def record_equity(rec, t, equity):
    """Record the equity at the close of bar ``t`` (a :class:`Record`); nothing when
    ``rec`` is None."""
    if rec is not None:
        rec.equity[t] = equity


def record_constant(rec, start, end, equity):
    """Record the equity ``equity`` at the closes of bars ``[start, end)`` (a
    :class:`Record`: flat, or ruined); nothing when ``rec`` is None."""
    if rec is not None:
        _constant(rec, start, end, equity)


def record_held(rec, start, end, position, close):
    """Record the equity ``position * close[t]`` at the closes of bars ``[start, end)``
    (a :class:`Record`: all in, no cash); nothing when ``rec`` is None."""
    if rec is not None:
        _held(rec, start, end, position, close)


def record_bar(rec, t, cash, equity, state, pos_col):
    """Record bar ``t``'s close (a :class:`PortfolioRecord`): the equity, the cash and
    each symbol's shares (column ``pos_col`` of the per-symbol ``state``); nothing when
    ``rec`` is None."""
    if rec is not None:
        _bar(rec, t, cash, equity, state, pos_col)


def record_flat(rec, start, end, equity):
    """Record bars ``[start, end)`` of a stretch with every symbol flat (a
    :class:`PortfolioRecord`): the equity, all of it cash; nothing when ``rec`` is None."""
    if rec is not None:
        _flat(rec, start, end, equity)


def _trade(rec, k, symbol, entry_bar, exit_bar, side, entry_price, exit_price, size, pnl,
           ret, reason):
    trades = rec.trades
    if k < trades.shape[0]:
        row = trades[k]
        row.symbol = symbol
        row.entry_bar = entry_bar
        row.exit_bar = exit_bar
        row.side = side
        row.entry_price = entry_price
        row.exit_price = exit_price
        row.size = size
        row.pnl = pnl
        row["return"] = ret
        row.exit_reason = reason


def _equity(rec, t, equity):
    rec.equity[t] = equity


def _constant(rec, start, end, equity):
    for t in range(start, end):
        rec.equity[t] = equity


def _held(rec, start, end, position, close):
    for t in range(start, end):
        rec.equity[t] = position * close[t]


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


# Each record_* function compiles by the type of its record: the writes for a record,
# nothing at all for None (inlined either way).


@overload(record_trade, inline="always")
def _record_trade(rec, k, symbol, entry_bar, exit_bar, side, entry_price, exit_price, size,
                  pnl, ret, reason):
    if isinstance(rec, types.NoneType):
        return lambda rec, k, symbol, entry_bar, exit_bar, side, entry_price, exit_price, \
            size, pnl, ret, reason: None
    return _trade


@overload(record_equity, inline="always")
def _record_equity(rec, t, equity):
    if isinstance(rec, types.NoneType):
        return lambda rec, t, equity: None
    return _equity


@overload(record_constant, inline="always")
def _record_constant(rec, start, end, equity):
    if isinstance(rec, types.NoneType):
        return lambda rec, start, end, equity: None
    return _constant


@overload(record_held, inline="always")
def _record_held(rec, start, end, position, close):
    if isinstance(rec, types.NoneType):
        return lambda rec, start, end, position, close: None
    return _held


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
