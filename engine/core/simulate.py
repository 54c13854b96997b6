"""The per-bar simulation of one combo: fills, stops, funding, marking, metrics.

Everything here is a plain function of scalars, tuples and array elements (no
allocation, no numpy calls, no Python objects), compiled with ``njit`` for the
CPU sweep and ``backtest()``; the same functions compile as numba.cuda device
functions. The order of events inside bar ``t`` (docs/EXECUTION.md "Order of events inside bar t"):

1. orders queued at bar ``t-1``'s close (``fill: next_open``) fill at ``open[t]``:
   the exit first, then the entry;
2. the open position's stops and its ruin are checked on the bar's range
   (``fills.stop_exit``, ``fills.ruin_reached``); with ``next_open`` this includes a
   position entered at this very open. Stop and trailing exits are market orders
   (slippage applies); a target is a limit order and fills at its level, or at a
   better open, without slippage. The adverse levels come first: the ruin price
   liquidates unless a stop (fixed or trailing) lies strictly before it on the
   bar's way from the open; a target never beats it;
3. funding: ``position * close[t] * funding_rate[t]`` is paid by the position
   held through the bar (longs pay a positive rate, shorts receive it); funding that
   leaves the equity <= 0 liquidates the position at ``close[t]``;
4. the strategy's signal at the close (``fills.resolve_signals``, an entry and an exit
   of one side together resolved by ``execution.conflict``) exits and/or enters: at
   ``close[t]`` (``fill: close``) or queued for ``open[t+1]`` (a signal on the last bar
   is never filled). It sees the position state as steps 1-3 left it
   (position, entry fill, entry bar): a position stopped out in this bar is flat;
5. equity is marked at ``close[t]`` and the metric accumulators advance.

Ruin (docs/EXECUTION.md): equity never goes below zero. A position is liquidated,
without fee, where its equity reaches zero: inside the bar (step 2, at the open on a
gap), at the close when funding took it there (step 3), or at the close when an entry
there is already under water (step 5); an exit whose costs exceed what is left (step 1,
2 or 4) leaves cash 0, not less. Either way the trade's exit reason is ``ruin``,
equity stays 0 to the end (returns 0, drawdown -100%) and the combo trades no more; its
metric ``ruined`` is 1. The cost where no ruin happens: one multiply-add and compare per
bar held outside the fast stretches (the held-long stretch, ``cash == 0``, cannot be
ruined: prices are positive).

A position still open after the last bar is marked at the last close with no
exit fee and counts as a trade (exit reason ``end``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .fills import (
    CONFLICT_ENTRY,
    CONFLICT_EXIT,
    CONFLICT_OPPOSITE,
    EXIT_END,
    EXIT_MARGIN,
    EXIT_RUIN,
    EXIT_SIGNAL,
    EXIT_STOP,
    EXIT_TARGET,
    EXIT_TRAIL,
    ORDER_LIMIT,
    ORDER_MARKET,
    atr_at,
    atr_stop,
    borrowing_terms,
    exits_held,
    margin_level,
    open_position,
    order_fill,
    order_level,
    order_type_of,
    realized_vol,
    resolve_signals,
    ruin_fill,
    ruin_reached,
    stop_exit,
)
from .metrics import (
    DD_ACC0,
    RET_ACC0,
    TRADE_ACC0,
    acc_drawdown,
    acc_drawdown_flat,
    acc_returns,
    acc_returns_held,
    finalize,
)
from .records import record_constant, record_equity, record_held
from .round_trips import book_trade, exit_trade


class Outputs(NamedTuple):
    """What a kernel writes for every combo (a numba named tuple of ndarrays, float64).

    Attributes
    ----------
    metrics : ndarray, shape (n_combos, N_METRICS)
        Each combo's metrics, in ``METRICS`` order.
    segs : ndarray, shape (n_combos, S, 2) or (n_combos, 0, 2)
        When S > 0: the sums of each combo's bar returns and of their squares over S
        equal segments of the bars run (:func:`segment_bounds`).
    """

    metrics: np.ndarray
    segs: np.ndarray

    def take(self, index) -> Outputs:
        """The outputs of the combos ``index`` (a slice): their metrics and segment rows."""
        return Outputs(self.metrics[index], self.segs[index])


@njit(cache=True)
def cross_above(a_prev, b_prev, a, b):
    """True when ``a`` crosses above ``b``: ``a_prev < b_prev and a > b``, all defined
    (both compared, ``&``: no branch, on a GPU no divergence)."""
    return (a_prev < b_prev) & (a > b)


@njit(cache=True)
def cross_below(a_prev, b_prev, a, b):
    """True when ``a`` crosses below ``b``: ``a_prev > b_prev and a < b``, all defined
    (both comparisons made, as :func:`cross_above`)."""
    return (a_prev > b_prev) & (a < b)


@njit(inline="always", cache=True)
def scan_flat(step, ind, rows, fparams, bars, t, n, allow_long, allow_short, cash):
    """The first bar >= t whose signal opens a position from flat, or ``n``.

    ``step`` is the strategy's signal in its 11-argument form (:func:`simulate`), called
    with the flat state: position 0.0 (its entry price and bar are then meaningless),
    equity ``cash`` and no pending order.

    Every strategy compiles this loop into a small function of its own (``scan`` in its
    module): apart from the rest of the simulation, it keeps the registers to itself,
    which makes flat stretches cost little more than the signal (benchmarks/NOTES.md).
    """
    while t < n:
        long_entry, long_exit, short_entry, short_exit = step(ind, rows, fparams, bars, t,
                                                              0.0, 0.0, t, cash, 0.0, 0.0)
        if (allow_long and long_entry and not long_exit) or (
                allow_short and short_entry and not short_exit):
            return t
        t += 1
    return n


@njit(inline="always", cache=True)
def simulate(signal, scan, bars, ind, combos, c, run, out, lockstep, rec):
    """Run combo ``c`` over the bars ``[run.start, run.end)`` and write its metrics into
    ``out.metrics[c]`` (and its returns' sums per segment into ``out.segs[c]``); with a
    record ``rec`` (not None), its equity at each close and its trades too.

    The run starts flat with ``init_cash`` at its first bar and reads the indicators as
    they are there (computed from the first bar of the series: warmed up); its metrics
    are those of a run over exactly its bars. A walk-forward window is such a run.

    Inlined (numba IR level) into each strategy's kernel, so ``signal`` becomes a
    direct call there and the kernel stays cacheable.

    Parameters
    ----------
    signal : njit function ``(ind, rows, fparams, bars, t, position, entry_price,
        entry_bar, equity, pending, pending_price) -> (long_entry, long_exit,
        short_entry, short_exit)``
        The strategy's rule at the close of bar ``t`` in its 11-argument form (the
        ``step`` of its kernel module, :mod:`barsweep.engine.strategies.kernels`), given
        the state as it is then: after the bar's queued fills, stops, ruin and
        funding (a position stopped out in the bar is flat). ``position`` (float64) is
        the signed quantity held, 0.0 when flat, > 0 long, < 0 short; ``entry_price``
        (float64) the open position's entry fill, slippage included; ``entry_bar``
        (int64) the bar of that fill. The last two are meaningless when ``position`` is
        0.0. ``equity`` (float64) is the account's value at this close, ``cash +
        position * close[t]``. ``pending`` (float64) is the side of the entry order that
        would still work in the next bar if this close did nothing (1.0 a long limit or
        stop entry, -1.0 a short one, 0.0 none: an order whose validity ends at this
        bar is not pending), ``pending_price`` its level (meaningless when ``pending``
        is 0.0). In flat stretches (``scan``) it is called with position 0.0, equity
        ``cash`` and no pending order.
    scan : njit function ``(ind, rows, fparams, bars, t, n, allow_long, allow_short,
        cash) -> t``, the strategy's :func:`scan_flat` (the first bar from ``t`` that
        opens from flat).
    bars : Bars
        :class:`barsweep.engine.core.inputs.Bars`: open, high, low, close, funding rate and
        benchmark returns, shape (n_bars,), float64.
    ind : ndarray, shape (n_rows, n_bars), float64
        Hoisted indicator rows.
    combos : Combos
        :class:`barsweep.engine.core.inputs.Combos`: each combo's indicator rows, strategy
        parameters and stops; combo ``c`` is run.
    c : int
    run : RunSettings
        :class:`barsweep.engine.core.execution.RunSettings`: the execution settings, the
        bars simulated and their benchmark sums.
    out : Outputs
        Written: ``metrics[c]``, ``segs[c]`` when S > 0, with segment ``k`` holding
        bars ``[start + k * L // S, start + (k + 1) * L // S)``, ``L = end - start``
        (:func:`segment_bounds`).
    lockstep : bool (a constant of the kernel)
        False (the CPU's kernels): a flat stretch is scanned to its end and a held one
        stepped to its end in inner loops. True (the GPU's): each iteration of the loop
        covers exactly one bar, so the threads of a warp, which start on the same bar,
        stay on the same bar (warp-synchronous); a flat bar is tested with
        :func:`scan_flat`'s test of ``signal`` (``scan`` is not called) and a flat
        stretch is still booked as a whole when it ends. Compiled alike, the two give the
        same results bit for bit (tests/engine/test_lockstep.py).
    rec : Record (:mod:`barsweep.engine.core.records`), or None: nothing is recorded
        Written (one combo: ``backtest()``): ``rec.equity`` at the closes of the bars
        run and ``rec.trades``, one row per trade.
    """
    open_, high, low, close, funding, bench = bars
    rows = combos.rows[c]
    fparams = combos.fparams[c]
    segs = out.segs[c]
    t0 = run.start
    n = run.end  # one past the last bar of the run
    next_open = run.next_open
    fee_rate = run.fee_rate
    fixed_fee = run.fixed_fee
    slippage = run.slippage
    init_cash = run.init_cash
    allow_long = run.allow_long
    allow_short = run.allow_short
    use_funding = run.funding
    conflict = run.conflict
    # ``entry``: an entry and an exit together open from flat, which ``scan`` (the flat
    # test of every other mode) does not see, so flat bars take the general step
    entry_wins = conflict == CONFLICT_ENTRY
    exit_wins = conflict == CONFLICT_EXIT or conflict == CONFLICT_OPPOSITE  # when held
    stop_loss = combos.stop_loss[c]
    take_profit = combos.take_profit[c]
    trailing_stop = combos.trailing_stop[c]
    # constants (0.0, 0.0) when the run does not borrow: that code compiles away
    borrow, maintenance = borrowing_terms(run.borrowing)
    # a constant ORDER_MARKET at market: the pending orders' code compiles away
    order_type, order_in_atr = order_type_of(run.entry_order)
    # a margin call is checked as the stops are
    use_stops = (stop_loss > 0.0 or take_profit > 0.0 or trailing_stop > 0.0
                 or maintenance > 0.0)

    cash = init_cash
    position = 0.0
    entry_fill = 0.0
    entry_equity = 0.0
    # integers handed to helpers are typed int64 from the start (``int()``): a literal 0
    # would compile each helper once more for ``Literal[int](0)`` (cold compile time)
    entry_bar = 0
    ruined = False
    pending_exit = False
    pending_side = 0
    # a pending limit or stop entry order: its side (0: none), level and last valid bar
    order_side = 0
    order_at = 0.0
    order_end = 0
    prev_equity = init_cash
    equity = init_cash
    n_exposed = 0
    ret_acc = RET_ACC0
    dd_acc = DD_ACC0
    trade_acc = TRADE_ACC0

    simple = not use_stops and not use_funding
    n_segs = segs.shape[0]
    seg = 0
    seg_end = segment_end(t0, n, n_segs, seg)
    seg_r = 0.0  # the return sums when the current segment began
    seg_r2 = 0.0
    t = t0
    # In lockstep, while flat, ``extreme`` (the open position's best price for a trailing
    # stop, meaningless then, set again at each entry) holds the bar the flat stretch
    # began: one register less on the GPU, where the kernel fits 128 without spilling.
    extreme = float(t0)
    end = n  # one past the last bar simulated: a ruin ends the run there
    while t < end:
        seg, seg_end, seg_r, seg_r2 = book_segments(segs, t, seg, seg_end, seg_r, seg_r2,
                                                    ret_acc, t0, n)
        # Fast stretches, where only the signal can change anything: flat with nothing
        # queued (equity constant: no return, a constant drawdown), and held all-in long
        # without stops or funding (the return is the benchmark's). They end at the first
        # bar whose signal acts, which the general step below then handles. In lockstep
        # an iteration covers one bar of a stretch (a flat stretch is booked at its end,
        # as a whole: the same sums).
        if (not pending_exit and pending_side == 0 and order_side == 0 and position == 0.0
                and not entry_wins):
            if lockstep:  # ``scan_flat``'s test, on this bar only
                long_entry, long_exit, short_entry, short_exit = signal(
                    ind, rows, fparams, bars, t, 0.0, 0.0, t, cash, 0.0, 0.0)
                if not ((allow_long and long_entry and not long_exit) or (
                        allow_short and short_entry and not short_exit)):
                    t += 1
                    if t < n:
                        continue  # the stretch goes on
                flat_from = int(extreme)
            else:
                flat_from = t
                t = scan(ind, rows, fparams, bars, t, n, allow_long, allow_short, cash)
            if t > flat_from:
                dd_acc = acc_drawdown_flat(dd_acc, equity, t - flat_from)
                record_constant(rec, flat_from, t, equity)
            if t >= n:
                break
            # flat bars add no return: the segments passed end with the sums as they are
            seg, seg_end, seg_r, seg_r2 = book_segments(segs, t, seg, seg_end, seg_r,
                                                        seg_r2, ret_acc, t0, n)
        elif not pending_exit and pending_side == 0 and order_side == 0 and (
                simple and position > 0.0 and cash == 0.0):
            start = t
            held_end = t + 1 if lockstep else seg_end  # (seg_end > t)
            while t < held_end:
                price = close[t]  # loaded before the signal's branch
                long_entry, long_exit, short_entry, short_exit = signal(
                    ind, rows, fparams, bars, t, position, entry_fill, entry_bar,
                    position * price, 0.0, 0.0)
                # a long acts only on its own exit, as the conflict mode resolves it
                # with its entry (``resolve_signals``: nothing enters while held)
                if exits_held(long_entry, long_exit, exit_wins):
                    break
                equity = position * price
                ret_acc = acc_returns_held(ret_acc, bench[t])
                dd_acc = acc_drawdown(dd_acc, equity)
                t += 1
            if t > start:
                n_exposed += t - start
                prev_equity = equity
                # here, not in the loop: a store there could alias ``rows``
                record_held(rec, start, t, position, close)
            if t >= held_end:
                continue

        filled = False
        # 1. orders queued at the previous close fill at this open
        if pending_exit or pending_side != 0:
            if pending_exit and position != 0.0:
                cash, trade_acc = exit_trade(cash, position, open_[t], slippage, fee_rate,
                                             fixed_fee, entry_fill, entry_equity, entry_bar, t,
                                             int(EXIT_SIGNAL), trade_acc, rec)
                position = 0.0
                filled = True
            if pending_side != 0 and position == 0.0:
                entry_equity = cash
                # sizes read at entries only (fewer live values in the held loops)
                vol = (realized_vol(close, t - 1, run.vol_window, run.ppy)
                       if run.vol_window else 0.0)
                position, cash, entry_fill = open_position(
                    cash, pending_side, open_[t], fee_rate, fixed_fee, slippage, run.size_type,
                    combos.size_value[c], run.lot, stop_loss, vol, combos.leverage[c],
                    atr_stop(run.risk_atr, run.atr, t - 1))
                entry_bar = t
                extreme = entry_fill
                filled = True
            pending_exit = False
            pending_side = 0
        # 1b. a pending entry order fills where the bar reaches its level; the bar's
        # stops then see the bar from that price on (``bar_open``)
        bar_open = open_[t]
        if order_type != ORDER_MARKET and order_side != 0 and position == 0.0:
            price = order_fill(order_type, order_side, order_at, open_[t], high[t], low[t])
            if price > 0.0:
                entry_equity = cash
                vol = (realized_vol(close, t - 1, run.vol_window, run.ppy)
                       if run.vol_window else 0.0)
                # a limit fills at its price (or a better open): no slippage
                slip = 0.0 if order_type == ORDER_LIMIT else slippage
                position, cash, entry_fill = open_position(
                    cash, order_side, price, fee_rate, fixed_fee, slip, run.size_type,
                    combos.size_value[c], run.lot, stop_loss, vol, combos.leverage[c],
                    atr_stop(run.risk_atr, run.atr, t - 1))
                entry_bar = t
                extreme = entry_fill
                filled = True
                bar_open = price
                order_side = 0
        # 2. stops, margin calls and ruin inside the bar
        ruin = ruin_reached(cash, position, high[t], low[t])
        if ruin or (use_stops and position != 0.0):
            side = 1.0 if position > 0.0 else -1.0
            reason = -1
            price = 0.0
            if use_stops:
                margin = (margin_level(cash, position, maintenance)
                          if maintenance > 0.0 else 0.0)
                reason, price = stop_exit(side, bar_open, high[t], low[t], entry_fill, extreme,
                                          stop_loss, take_profit, trailing_stop, margin)
            ruin_px = ruin_fill(cash, position, bar_open) if ruin else 0.0
            # the adverse price first: a stop (or a margin call, whose level lies before
            # the ruin price) strictly before the ruin price fills instead
            if ruin and not ((reason == EXIT_STOP or reason == EXIT_TRAIL
                              or reason == EXIT_MARGIN) and side * (price - ruin_px) > 0.0):
                # liquidated where equity reaches zero; nothing is left to pay a fee
                trade_acc = book_trade(trade_acc, rec, entry_bar, t, position,
                                       entry_fill, entry_equity, ruin_px, 0.0, int(EXIT_RUIN))
                cash = 0.0
                position = 0.0
                filled = True
            elif reason >= 0:
                # a target is a limit order: it fills at its price (or a better open)
                slip = 0.0 if reason == EXIT_TARGET else slippage
                cash, trade_acc = exit_trade(cash, position, price, slip, fee_rate, fixed_fee,
                                             entry_fill, entry_equity, entry_bar, t, reason,
                                             trade_acc, rec)
                position = 0.0
                filled = True
            elif side > 0.0:
                extreme = max(extreme, high[t])
            else:
                extreme = min(extreme, low[t])
        # 3. funding and borrowing on the position held through the bar (interest on a
        # long's borrowed cash, a fee on a short's value); charges that take the equity
        # to zero liquidate the position at this close (ruin)
        charged = position != 0.0 and (use_funding or borrow > 0.0)
        if charged:
            if use_funding:
                cash -= position * close[t] * funding[t]
            if position > 0.0:
                cash -= max(-cash, 0.0) * borrow
            else:
                cash += position * close[t] * borrow
            if cash + position * close[t] <= 0.0:
                trade_acc = book_trade(trade_acc, rec, entry_bar, t, position,
                                       entry_fill, entry_equity, close[t], 0.0, int(EXIT_RUIN))
                cash = 0.0
                position = 0.0
                filled = True
        # 4. the close's signal: filled at this close, or queued for the next open (it
        # sees the entry order that would work in the next bar)
        long_entry, long_exit, short_entry, short_exit = signal(
            ind, rows, fparams, bars, t, position, entry_fill, entry_bar,
            cash + position * close[t], float(order_side) if t < order_end else 0.0,
            order_at)
        exit_now, enter_side = resolve_signals(position, allow_long, allow_short, conflict,
                                               long_entry, long_exit, short_entry, short_exit)
        if order_type != ORDER_MARKET:
            if enter_side != 0:  # placed (or replaced) at this close; fills from bar t + 1
                order_side = enter_side
                order_at = order_level(order_type, enter_side, close[t],
                                       combos.entry_offset[c], atr_at(run.atr, t),
                                       order_in_atr)
                order_end = t + combos.valid_bars[c]
                enter_side = 0
            elif order_side != 0 and (t >= order_end or (
                    long_exit if order_side > 0 else short_exit)):
                order_side = 0  # expired, or cancelled by its side's exit signal
        if next_open:
            if t + 1 < n:
                pending_exit = exit_now
                pending_side = enter_side
        elif exit_now or enter_side != 0:
            if exit_now:
                cash, trade_acc = exit_trade(cash, position, close[t], slippage, fee_rate,
                                             fixed_fee, entry_fill, entry_equity, entry_bar, t,
                                             int(EXIT_SIGNAL), trade_acc, rec)
                position = 0.0
                filled = True
            if enter_side != 0 and position == 0.0:
                entry_equity = cash
                vol = realized_vol(close, t, run.vol_window, run.ppy) if run.vol_window else 0.0
                position, cash, entry_fill = open_position(
                    cash, enter_side, close[t], fee_rate, fixed_fee, slippage, run.size_type,
                    combos.size_value[c], run.lot, stop_loss, vol, combos.leverage[c],
                    atr_stop(run.risk_atr, run.atr, t))
                entry_bar = t
                extreme = entry_fill
                filled = True

        # 5. mark to the close; returns are 0 while flat (nothing to add) and the
        # benchmark's own return while held all-in long (no division). Ruin comes only
        # with an order filled or a position closed on this bar (``filled``): a
        # liquidation or an exit that left nothing, or an entry at this close already
        # under water (a short slipped by 50% or more), which is liquidated here.
        equity = cash + position * close[t]
        b = bench[t] if t > t0 else 0.0  # the run's first bar has no close before it
        if filled:
            if equity <= 0.0:
                if position != 0.0:
                    trade_acc = book_trade(trade_acc, rec, entry_bar, t, position,
                                           entry_fill, entry_equity, close[t], 0.0, int(EXIT_RUIN))
                    position = 0.0
                cash = 0.0
                equity = 0.0
                ruined = True
                end = t + 1  # the last bar simulated: equity stays 0, nothing is traded
            ret_acc = acc_returns(ret_acc, equity / prev_equity - 1.0, b)
        elif position != 0.0 and (position < 0.0 or cash != 0.0):
            ret_acc = acc_returns(ret_acc, equity / prev_equity - 1.0, b)
        elif position != 0.0:
            ret_acc = acc_returns_held(ret_acc, b)
        if position != 0.0:
            n_exposed += 1
        dd_acc = acc_drawdown(dd_acc, equity)
        prev_equity = equity
        record_equity(rec, t, equity)
        t += 1
        if lockstep and position == 0.0:
            extreme = float(t)  # a flat stretch may begin at the next bar

    if ruined and t < n:  # equity stays 0: returns 0, drawdown -100%, no more trades
        dd_acc = acc_drawdown_flat(dd_acc, 0.0, n - t)
        record_constant(rec, t, n, 0.0)
    # the last segment, and those after a ruin or a flat end (no returns)
    book_segments(segs, n, seg, seg_end, seg_r, seg_r2, ret_acc, t0, n)
    if position != 0.0:  # marked at the last close, no exit fee
        trade_acc = book_trade(trade_acc, rec, entry_bar, n - 1, position, entry_fill,
                               entry_equity, close[n - 1], equity, int(EXIT_END))

    finalize(out.metrics[c], n - t0, run.ppy, init_cash, equity, ret_acc, dd_acc, trade_acc,
             n_exposed, (run.sum_b, run.sum_b2), ruined)


@njit(inline="always", cache=True)
def book_segments(segs, t, seg, seg_end, seg_r, seg_r2, ret_acc, start, end):
    """Write the sums of every segment that ends at or before bar ``t``: the growth of
    the return accumulators since the segment began. Returns the segment now running,
    its end, and the sums at its start."""
    n_segs = segs.shape[0]
    while t >= seg_end and seg < n_segs:
        segs[seg, 0] = ret_acc[0] - seg_r
        segs[seg, 1] = ret_acc[1] - seg_r2
        seg_r = ret_acc[0]
        seg_r2 = ret_acc[1]
        seg += 1
        seg_end = segment_end(start, end, n_segs, seg)
    return seg, seg_end, seg_r, seg_r2


@njit(cache=True)
def segment_end(start, end, n_segs, k):
    """One past the last bar of segment ``k`` of ``n_segs`` equal segments of the bars
    ``[start, end)``; ``end`` when there are none."""
    if n_segs == 0:
        return end
    return start + (k + 1) * (end - start) // n_segs


def segment_bounds(start: int, end: int, n_segs: int) -> np.ndarray:
    """The ``(first, one past last)`` bar of each segment, shape (n_segs, 2), int64."""
    k = np.arange(n_segs + 1, dtype=np.int64)
    edges = start + k * (end - start) // max(n_segs, 1)
    return np.stack([edges[:-1], edges[1:]], axis=1)


def no_segments(n_combos: int = 0) -> np.ndarray:
    """No segment sums: shape (n_combos, 0, 2)."""
    return np.empty((n_combos, 0, 2))

