"""The per-bar simulation of one portfolio combo: N symbols, one cash account.

Everything here is a plain function of scalars, tuples and array elements (no
allocation, no numpy calls, no Python objects), compiled with ``njit`` for the CPU
and as numba.cuda device functions by :mod:`barsweep.engine.gpu.portfolio` (the
per-symbol scratch ``state`` is an argument: a thread's slice of a device array there).
The contract is docs/EXECUTION.md, "Portfolios". The order of events inside bar ``t``:

1. orders queued at bar ``t-1``'s close (``fill: next_open``) fill at ``open[t]``
   (:func:`fill_orders`): every exit first, then the entries in the order of
   ``priority``, each sized from the account's value marked at that open before any of
   its orders, its weight read at the close of bar ``t-1`` (where it was decided);
2. each open position's stops are checked on its symbol's bar (:func:`stop_positions`,
   ``fills.stop_exit``, as a single-symbol run checks them, a short's mirrored; with
   ``next_open`` this includes a position entered at this very open); a stopped position
   is closed at the level (the open on a gap) and its symbol is flat for the close's
   rule; then the positions held through the bar pay their funding and borrowing
   (:func:`charge_positions`);
3. each symbol's rule is evaluated at the close with its own position state and the
   account's equity at that close (``step``, the strategy's signal in its 11-argument
   form; no entry order is ever pending in a portfolio) and resolved as a
   single-symbol run resolves it (``fills.resolve_signals``, ``execution.direction``
   and ``execution.conflict``): exit, enter from flat, both (a reversal), or nothing;
   the orders fill at ``close[t]`` (``fill: close``, again through :func:`fill_orders`)
   or are queued for ``open[t+1]`` (never from the last bar); on a rebalance bar with a
   position open, through :func:`rebalance_fill`, which also re-targets the held
   positions;
4. the account's equity ``cash + sum(position_i * close_i[t])`` is marked (a margin
   call, :func:`margin_call`, or a ruin closes every position there) and the metric
   accumulators advance on ``r_t = equity_t / equity_(t-1) - 1``, against the
   benchmark's return ``bench[t]`` (the equal-weight buy-and-hold of the symbols).
"""

from __future__ import annotations

from numba import njit

from ..core.fills import (
    CONFLICT_ENTRY,
    EXIT_END,
    EXIT_MARGIN,
    EXIT_RUIN,
    EXIT_SIGNAL,
    EXIT_TARGET,
    borrowing_terms,
    directions,
    realized_vol,
    resolve_signals,
    stop_exit,
)
from ..core.inputs import Bars
from ..core.metrics import (
    DD_ACC0,
    RET_ACC0,
    TRADE_ACC0,
    acc_drawdown,
    acc_drawdown_flat,
    acc_returns,
    finalize,
)
from ..core.records import record_bar, record_flat
from ..core.simulate import book_segments, segment_end
from .orders import (
    N_STATE,
    N_SYMBOL_METRICS,
    S_BAR,
    S_COST,
    S_EXTREME,
    S_FILL,
    S_NEXT,
    S_ORDER,
    S_PENDING,
    S_POS,
    book_trade,
    buying_power,
    entry_units,
    open_position,
    open_shares,
    order_code,
    order_exits,
    order_side,
    rebalance_fill,
    sell,
)
from .weights import entry_symbol, target_weight


@njit(cache=True)
def member_bars(stacked):
    """Each member's :class:`~barsweep.engine.core.inputs.Bars`, a list indexed by member, from
    the members' bars stacked (:func:`barsweep.engine.portfolio.sweep.stack_bars`: each field
    shape (N, n_bars)): row views, no copy.

    The kernel takes the members' bars stacked, so that one compiled kernel serves any
    number of members (a tuple of N Bars is another type for every N, whose compile
    grows with N); each member's Bars is of the type the single-symbol signals read.
    """
    return [Bars(stacked.open[i], stacked.high[i], stacked.low[i], stacked.close[i],
                 stacked.funding[i], stacked.bench[i]) for i in range(stacked.close.shape[0])]


@njit(cache=True)
def fill_orders(px, column, t, state, order_col, cash, n_open, max_open, sizing, lb, run,
                sizes, trade_acc, sym, rec):
    """Fill the orders in ``state[:, order_col]`` at ``px[column, i, t]`` (the open
    or the close): every exit, then the entries in the order of ``sizing`` while fewer
    than ``max_open`` positions are open, each with its target weight
    (:func:`~.weights.target_weight`, lookback index ``lb``; none when 0) of
    the account's value marked at these prices before any of these orders (times the
    leverage), sized as ``sizes`` says (:func:`enter_orders`). The order and the weights
    are read at the close where the orders were decided: ``t`` (close) or ``t - 1``
    (open).

    Returns ``(cash, open positions, trade accumulator)``; ``sym[i, 0]`` counts
    symbol ``i``'s closed trades and ``sym[i, 1]`` the bars they were held (marked);
    each closed trade goes into the record ``rec`` (:mod:`..core.records`).
    """
    n_sym = state.shape[0]
    value = cash
    for i in range(n_sym):
        if state[i, S_POS] != 0.0:
            value += state[i, S_POS] * px[column, i, t]
    for i in range(n_sym):
        if order_exits(state[i, order_col]) and state[i, S_POS] != 0.0:
            cash, fill, net = sell(cash, state[i, S_POS], px[column, i, t], run.fee_rate,
                                   run.fixed_fee, run.slippage)
            trade_acc = book_trade(state, i, t, fill, net, EXIT_SIGNAL, t - state[i, S_BAR],
                                   trade_acc, sym, rec)
            n_open -= 1
    cash, n_open = enter_orders(px, column, t, state, order_col, cash, n_open, max_open,
                                value, sizing, lb, run, sizes)
    return cash, n_open, trade_acc


@njit(inline="always", cache=True)
def enter_orders(px, column, t, state, order_col, cash, n_open, max_open, value, sizing, lb,
                 run, sizes):
    """The entries of :func:`fill_orders`, in the order of ``sizing``, each targeting
    its weight of ``value`` times the leverage (none when the weight is 0), read at the
    close where they were decided (``t`` for the close, ``t - 1`` for the open), sized
    by ``execution.size`` within that target (:func:`~.orders.entry_units`) and cut to
    the buying power (:func:`~.orders.buying_power`, :func:`~.orders.open_shares`);
    returns ``(cash, open positions)``. ``sizes``: the combo's ``(leverage, size value,
    stop loss)``.

    Inlined into :func:`fill_orders`, which is not inlined into the per-bar loop: the
    orders' code inlined there made the loop of the compiled kernel 1.3 to 1.8 times
    slower (measured kernel-only, ema_cross on 4 symbols x 26,280 bars); orders fill on
    few bars, the call costs little there. :func:`liquidate` likewise.
    """
    decided = t if column == 1 else t - 1
    leverage, size_value, stop_loss = sizes
    for r in range(state.shape[0]):
        i = entry_symbol(sizing, lb, r, decided)
        side = order_side(state[i, order_col])
        if side != 0.0 and state[i, S_POS] == 0.0 and n_open < max_open:
            weight = target_weight(sizing, lb, i, decided, max_open)
            if weight <= 0.0:
                continue
            price = px[column, i, t]
            vol = (realized_vol(px[1, i], decided, run.vol_window, run.ppy)
                   if run.vol_window else 0.0)
            units = entry_units(run.size_type, size_value, value, weight * value * leverage,
                                price, price * (1.0 + side * run.slippage), run.fee_rate,
                                run.fixed_fee, stop_loss, vol)
            # long only and unlevered, the buying power is the cash (no loop over members)
            power = (cash if leverage == 1.0 and len(run.shorts) == 0
                     else buying_power(px, column, t, state, cash, leverage))
            size, cash, fill, cost = open_shares(cash, power, side, units, price, run.fee_rate,
                                                 run.fixed_fee, run.slippage, run.lot)
            if size > 0.0:
                open_position(state, i, t, side * size, fill, cost)
                n_open += 1
    return cash, n_open


@njit(inline="always", cache=True)
def close_orders(step, account, sbars, px, ind, rows, fparams, t, state, run, cash):
    """Each symbol's order at the close of bar ``t`` into ``state[:, S_ORDER]``
    (:func:`~.orders.order_code`: exit, enter from flat or both; 0 none), each rule
    evaluated with its symbol's position state and resolved with the run's directions and
    conflict mode (``fills.resolve_signals``). When ``account`` (a constant: the rule
    reads the account) the rules see the account's equity at this close, ``cash`` plus
    the positions' value, marked first; otherwise that pass compiles away.

    Returns ``(how many symbols have an order, the positions' value at the close before
    any order)``.

    The loop has no branch on the position: the value adds ``0.0 * close`` for a flat
    symbol. A branch there (or a flat symbol's rule skipped until its next entry) made
    the compiled kernel 10 to 20 times slower (measured with ``benchmarks/portfolio.py``).
    """
    n_orders = 0
    held = 0.0
    # constants (True, False) long only: the short side compiles away (the loop was 1.2
    # times slower with the directions read from the run)
    allow_long, allow_short = directions(run.shorts)
    equity = cash
    if account:
        value = 0.0
        for i in range(state.shape[0]):
            value += state[i, S_POS] * px[1, i, t]
        equity = cash + value
    for i in range(state.shape[0]):
        position = state[i, S_POS]
        long_entry, long_exit, short_entry, short_exit = step(
            ind[i], rows, fparams, sbars[i], t, position, state[i, S_FILL],
            int(state[i, S_BAR]), equity, 0.0, 0.0)
        exit_now, side = resolve_signals(position, allow_long, allow_short, run.conflict,
                                         long_entry, long_exit, short_entry, short_exit)
        order = order_code(exit_now, float(side))
        state[i, S_ORDER] = order
        if order != 0.0:
            n_orders += 1
        held += position * px[1, i, t]  # 0.0 when flat
    return n_orders, held


@njit(inline="always", cache=True)
def next_entry(scan, account, sbars, ind, rows, fparams, t, n, state, shorts, cash):
    """The first bar >= ``t`` at which a symbol enters, all being flat (the account's
    equity ``cash``); ``n`` when none does.

    A flat symbol's rule is a function of the bar alone (position 0), so the strategy's
    ``scan`` finds its next entry, kept in ``state[i, S_NEXT]`` and searched again only
    once passed: a stretch where every symbol is flat costs each symbol its scan. A
    rule that reads the account (``account``, a constant) also depends on the equity,
    which trades since change: it is searched again at each call.
    """
    first = n
    allow_long, allow_short = directions(shorts)  # constants long only
    for i in range(state.shape[0]):
        if account or state[i, S_NEXT] < t:
            state[i, S_NEXT] = scan(ind[i], rows, fparams, sbars[i], t, n, allow_long,
                                    allow_short, cash)
        if state[i, S_NEXT] < first:
            first = int(state[i, S_NEXT])
    return first


@njit(inline="always", cache=True)
def stop_positions(px, t, state, stops, cash, n_open, run, trade_acc, sym, rec):
    """Check every open position's stops inside bar ``t`` and sell those hit, in the
    symbols' order.

    ``stops`` is ``(stop_loss, take_profit, trailing_stop)``, fractions (0: none); the
    levels, gaps and which fills first are ``fills.stop_exit``'s, from the position's
    entry fill and its best price ``state[i, S_EXTREME]`` (a long's highest high, a
    short's lowest low), as in a single-symbol run. A stop or trailing exit closes at its
    price less ``slippage`` (a short: plus), a target at its price; fees as any exit. A
    position not stopped moves its best price to this bar's.

    Returns ``(cash, open positions, trade accumulator)``; ``sym`` as
    :func:`fill_orders` counts.
    """
    for i in range(state.shape[0]):
        size = state[i, S_POS]
        if size != 0.0:
            side = 1.0 if size > 0.0 else -1.0
            high = px[2, i, t]
            low = px[3, i, t]
            reason, price = stop_exit(side, px[0, i, t], high, low, state[i, S_FILL],
                                      state[i, S_EXTREME], stops[0], stops[1], stops[2], 0.0)
            if reason >= 0:
                slip = 0.0 if reason == EXIT_TARGET else run.slippage
                cash, fill, net = sell(cash, size, price, run.fee_rate, run.fixed_fee, slip)
                trade_acc = book_trade(state, i, t, fill, net, reason, t - state[i, S_BAR],
                                       trade_acc, sym, rec)
                n_open -= 1
            elif side > 0.0 and high > state[i, S_EXTREME]:
                state[i, S_EXTREME] = high
            elif side < 0.0 and low < state[i, S_EXTREME]:
                state[i, S_EXTREME] = low
    return cash, n_open, trade_acc


@njit(cache=True)
def charge_positions(sbars, px, t, state, cash, funding, borrow):
    """The cash after bar ``t``'s charges on the positions held through it: with
    ``funding``, each position pays ``shares * close * funding_rate[t]`` (its symbol's;
    a short receives a positive rate); each short pays ``borrow`` (a bar's rate) on its
    value, then negative cash pays ``borrow`` on what it owes. A position's funding and
    borrow fee count in its trade (its ``S_COST``); the interest on the account's
    borrowed cash does not."""
    for i in range(state.shape[0]):
        size = state[i, S_POS]
        if size != 0.0 and funding:
            paid = size * px[1, i, t] * sbars[i].funding[t]
            cash -= paid
            state[i, S_COST] += paid
    for i in range(state.shape[0]):
        size = state[i, S_POS]
        if size < 0.0:
            paid = -size * px[1, i, t] * borrow
            cash -= paid
            state[i, S_COST] += paid
    return cash - max(-cash, 0.0) * borrow


@njit(cache=True)
def margin_call(px, t, state, cash, n_open, maintenance, run, trade_acc, sym, rec):
    """Close every position at ``close[t]`` (as signal exits: slippage, fees; exit reason
    ``margin``) when the account's equity there is below ``maintenance`` times its gross
    exposure ``sum(|shares| * close)`` (and above 0: :func:`liquidate` takes a ruin).

    Returns ``(cash, open positions, trade accumulator)``.
    """
    equity = cash
    gross = 0.0
    for i in range(state.shape[0]):
        size = state[i, S_POS]
        if size != 0.0:
            equity += size * px[1, i, t]
            gross += abs(size) * px[1, i, t]
    if equity <= 0.0 or equity >= maintenance * gross:
        return cash, n_open, trade_acc
    for i in range(state.shape[0]):
        size = state[i, S_POS]
        if size != 0.0:
            cash, fill, net = sell(cash, size, px[1, i, t], run.fee_rate, run.fixed_fee,
                                   run.slippage)
            trade_acc = book_trade(state, i, t, fill, net, EXIT_MARGIN, t + 1 - state[i, S_BAR],
                                   trade_acc, sym, rec)
    return cash, 0, trade_acc


@njit(inline="always", cache=True)
def simulate_portfolio(step, scan, account, sbars, px, ind, combos, book, c, run, bench, state, out,
                       per_symbol, segs, rec):
    """Run portfolio combo ``c`` over bars ``[run.start, run.end)`` and write its metrics
    into ``out[c]``, its per-symbol ``n_trades`` and ``exposure`` into
    ``per_symbol[c]`` and the sums of the account's bar returns per segment into
    ``segs[c]``; with a record ``rec`` (not None), its equity, cash and shares at
    each close and its trades too.

    Parameters
    ----------
    step : njit function, the strategy's signal in its 11-argument form
    scan : njit function, the strategy's flat-stretch search
        (:func:`barsweep.engine.core.simulate.scan_flat`)
    account : bool, a constant of the kernel
        Whether the signal reads the account (its module's ``ACCOUNT``): its equity is
        then marked before the rules (:func:`close_orders`, :func:`next_entry`).
    sbars : list (CPU) or tuple (GPU) of Bars, one per symbol (aligned, same length), as
        the signals read them (:func:`member_bars`)
    px : ndarray, shape (4, N, n_bars): each symbol's open (``px[0]``), close (``px[1]``),
        high (``px[2]``) and low (``px[3]``)
    ind : ndarray, shape (N, n_rows, n_bars): each symbol's hoisted indicator rows (on
        the GPU a tuple of N such tables, column-major)
    combos : Combos (rows, fparams and the stops are read)
    book : Book (:mod:`barsweep.engine.portfolio.book`): the combo's ``max_positions``
        (each entry then ``1 / min(K, N)`` of the value with equal weights), lookback
        and rebalance period, and the tables they index
    c : int
    run : RunSettings (``sum_b``, ``sum_b2`` those of ``bench``)
    bench : ndarray, shape (n_bars,): the benchmark's returns
    state : ndarray, shape (N, N_STATE): scratch, overwritten
    out : ndarray, shape (n_combos, N_METRICS)
    per_symbol : ndarray, shape (n_combos, N, N_SYMBOL_METRICS)
    segs : ndarray, shape (n_combos, S, 2) or (n_combos, 0, 2)
        When S > 0: the sums of the account's bar returns and of their squares over S
        equal segments of the bars run, as ``simulate`` writes them
        (:func:`barsweep.engine.core.simulate.segment_bounds`).
    rec : PortfolioRecord (:mod:`barsweep.engine.core.records`), or None: nothing is recorded
    """
    rows = combos.rows[c]
    fparams = combos.fparams[c]
    sym = per_symbol[c]
    n_sym = state.shape[0]
    t0 = run.start
    n = run.end
    k = book.max_positions[c]
    max_open = n_sym if k <= 0 or k > n_sym else k
    lb = book.lookback[c]
    r = book.rebalance[c]
    sizing = book.sizing
    stops = (combos.stop_loss[c], combos.take_profit[c], combos.trailing_stop[c])
    use_stops = stops[0] > 0.0 or stops[1] > 0.0 or stops[2] > 0.0
    sizes = (combos.leverage[c], combos.size_value[c], stops[0])
    # constants (0.0, 0.0) when the run does not borrow: that code compiles away
    borrow, maintenance = borrowing_terms(run.borrowing)
    charged = run.funding or borrow > 0.0
    for i in range(n_sym):
        for j in range(N_STATE):
            state[i, j] = 0.0
        state[i, S_NEXT] = -1.0
        for j in range(N_SYMBOL_METRICS):
            sym[i, j] = 0.0
    cash = run.init_cash
    equity = cash
    prev_equity = cash
    n_open = 0
    n_pending = 0
    n_exposed = 0
    ruined = False
    ret_acc = RET_ACC0
    dd_acc = DD_ACC0
    trade_acc = TRADE_ACC0
    seg_c = segs[c]
    seg, seg_end = 0, segment_end(t0, n, seg_c.shape[0], 0)
    seg_r, seg_r2 = 0.0, 0.0  # the return sums when the current segment began
    t = t0
    while t < n:
        # all flat: equity constant to the next entry (``scan``'s; under the conflict mode
        # ``entry`` an entry and an exit together enter too: every bar is stepped)
        if n_open == 0 and n_pending == 0 and run.conflict != CONFLICT_ENTRY:
            start = t
            t = next_entry(scan, account, sbars, ind, rows, fparams, t, n, state,
                           run.shorts, cash)
            if t > start:
                dd_acc = acc_drawdown_flat(dd_acc, equity, t - start)
                record_flat(rec, start, t, equity)
            if t >= n:
                break
        if t >= seg_end:  # a segment ended (never without segments: seg_end is n)
            seg, seg_end, seg_r, seg_r2 = book_segments(seg_c, t, seg, seg_end, seg_r,
                                                        seg_r2, ret_acc, t0, n)
        if n_pending > 1:  # 1. queued orders fill at this open (2: with a rebalance)
            cash, n_open, trade_acc = rebalance_fill(px, 0, t, state, S_PENDING, cash,
                                                     n_open, max_open, sizing, lb, run,
                                                     sizes[0], trade_acc, sym, rec)
            n_pending = 0
        elif n_pending > 0:
            cash, n_open, trade_acc = fill_orders(px, 0, t, state, S_PENDING, cash, n_open,
                                                  max_open, sizing, lb, run, sizes, trade_acc,
                                                  sym, rec)
            n_pending = 0
        if use_stops and n_open > 0:  # 2. each position's stops inside the bar
            cash, n_open, trade_acc = stop_positions(px, t, state, stops, cash, n_open, run,
                                                     trade_acc, sym, rec)
        if charged and n_open > 0:  # 2b. funding and borrowing on what is held
            cash = charge_positions(sbars, px, t, state, cash, run.funding, borrow)
        # 3. each symbol's rule at the close
        n_orders, held = close_orders(step, account, sbars, px, ind, rows, fparams, t,
                                      state, run, cash)
        rebal = r >= 0 and n_open > 0 and book.rebalance_bars[r, t]
        if n_orders > 0 or rebal:
            if not run.next_open:
                if rebal:
                    cash, n_open, trade_acc = rebalance_fill(px, 1, t, state, S_ORDER, cash,
                                                             n_open, max_open, sizing, lb,
                                                             run, sizes[0], trade_acc, sym,
                                                             rec)
                else:
                    cash, n_open, trade_acc = fill_orders(px, 1, t, state, S_ORDER, cash,
                                                          n_open, max_open, sizing, lb,
                                                          run, sizes, trade_acc, sym, rec)
            elif t + 1 < n:
                for i in range(n_sym):
                    state[i, S_PENDING] = state[i, S_ORDER]
                n_pending = 2 if rebal else 1
        # 4. mark the account at the close (the value summed with the rules when no
        # order filled at this close)
        if (n_orders > 0 or rebal) and not run.next_open:
            held = 0.0
            for i in range(n_sym):
                if state[i, S_POS] != 0.0:
                    held += state[i, S_POS] * px[1, i, t]
        equity = cash + held
        if n_open > 0:
            n_exposed += 1
        if maintenance > 0.0 and n_open > 0:  # a margin call closes every position
            cash, n_open, trade_acc = margin_call(px, t, state, cash, n_open, maintenance,
                                                  run, trade_acc, sym, rec)
            if n_open == 0:
                equity = cash
        if equity <= 0.0:  # ruin: liquidated at this close, nothing more is traded
            trade_acc = liquidate(px, t, state, trade_acc, sym, rec, EXIT_RUIN)
            n_open = 0
            cash = 0.0
            equity = 0.0
            ruined = True
        record_bar(rec, t, cash, equity, state, S_POS)
        ret_acc = acc_returns(ret_acc, equity / prev_equity - 1.0, bench[t] if t > t0 else 0.0)
        dd_acc = acc_drawdown(dd_acc, equity)
        prev_equity = equity
        t += 1
        if ruined:
            break
    if ruined and t < n:  # equity stays 0: returns 0, drawdown -100%
        dd_acc = acc_drawdown_flat(dd_acc, 0.0, n - t)
        record_flat(rec, t, n, 0.0)
    book_segments(seg_c, n, seg, seg_end, seg_r, seg_r2, ret_acc, t0, n)  # those left
    trade_acc = liquidate(px, n - 1, state, trade_acc, sym, rec,
                          EXIT_END)  # open at the end: marked
    for i in range(n_sym):
        sym[i, 1] /= n - t0
    finalize(out[c], n - t0, run.ppy, run.init_cash, equity, ret_acc, dd_acc, trade_acc,
             n_exposed, (run.sum_b, run.sum_b2), ruined)


@njit(cache=True)
def liquidate(px, t, state, trade_acc, sym, rec, reason):
    """Book every open position as a trade marked at ``close[t]`` without fee (exit
    reason ``reason`` in the record ``rec``), and close it; returns the trade
    accumulator."""
    for i in range(state.shape[0]):
        size = state[i, S_POS]
        if size != 0.0:  # marked held from its entry bar to t
            trade_acc = book_trade(state, i, t, px[1, i, t], size * px[1, i, t], reason,
                                   t + 1 - state[i, S_BAR], trade_acc, sym, rec)
    return trade_acc
