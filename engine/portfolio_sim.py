"""The per-bar simulation of one portfolio combo: N symbols, one cash account.

Everything here is a plain function of scalars, tuples and array elements (no
allocation, no numpy calls, no Python objects), compiled with ``njit`` for the CPU
and as numba.cuda device functions by :mod:`barsweep.engine.gpu_portfolio` (the
per-symbol scratch ``state`` is an argument: a thread's slice of a device array there).
The contract is docs/EXECUTION.md, "Portfolios". The order of events inside bar ``t``:

1. orders queued at bar ``t-1``'s close (``fill: next_open``) fill at ``open[t]``
   (:func:`fill_orders`): every exit first, then the entries in the symbols' order,
   each sized from the account's value marked at that open before any of its orders;
2. each symbol's rule is evaluated at the close with its own position state
   (``step``, the strategy's signal in its 8-argument form) and resolved as a long-only
   single-symbol run resolves it (``fills.resolve_signals``): exit, enter from flat,
   or nothing; the orders fill at ``close[t]`` (``fill: close``, again through
   :func:`fill_orders`) or are queued for ``open[t+1]`` (never from the last bar);
3. the account's equity ``cash + sum(position_i * close_i[t])`` is marked and the
   metric accumulators advance on ``r_t = equity_t / equity_(t-1) - 1``, against the
   benchmark's return ``bench[t]`` (the equal-weight buy-and-hold of the symbols).
"""

from __future__ import annotations

from numba import njit

from .fills import resolve_signals
from .metrics import (
    DD_ACC0,
    RET_ACC0,
    TRADE_ACC0,
    acc_drawdown,
    acc_drawdown_flat,
    acc_returns,
    acc_trade,
    finalize,
)

# Columns of the per-symbol scratch ``state`` (shape (N, N_STATE), float64).
S_POS = 0  # shares held (0.0 when flat)
S_FILL = 1  # the open position's entry fill price, slippage included
S_BAR = 2  # the bar of that fill
S_COST = 3  # the cash the entry took: notional and fees
S_ORDER = 4  # the order of this bar's close: -1 exit, 1 enter, 0 none
S_PENDING = 5  # the order queued for the next open (``next_open``)
S_NEXT = 6  # the first bar, from where it was searched, whose rule enters from flat
N_STATE = 7

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
    fill = price * (1.0 + slippage)
    size = target_value / price
    notional = size * fill
    cost = notional + (notional * fee_rate + fixed_fee)
    if cost <= cash:
        return size, cash - cost, fill, cost
    size = (cash - fixed_fee) / (1.0 + fee_rate) / fill
    if size <= 0.0:
        return 0.0, cash, fill, 0.0
    return size, 0.0, fill, cash


@njit(cache=True)
def sell(cash, size, price, fee_rate, fixed_fee, slippage):
    """Sell all ``size`` shares at ``price``; returns ``(cash after, fill price, cash
    received net of fees)``."""
    fill = price * (1.0 - slippage)
    proceeds = size * fill
    net = proceeds - (proceeds * fee_rate + fixed_fee)
    return cash + net, fill, net


@njit(inline="always", cache=True)
def fill_orders(px, column, t, state, order_col, cash, n_open, max_open, weight, run,
                trade_acc, sym):
    """Fill the orders in ``state[:, order_col]`` at ``px[column, i, t]`` (the open
    or the close): every exit, then the entries in the symbols' order while fewer than
    ``max_open`` positions are open, each with ``weight`` of the account's value marked
    at these prices before any of these orders.

    Returns ``(cash, open positions, trade accumulator)``; ``sym[i, 0]`` counts
    symbol ``i``'s closed trades and ``sym[i, 1]`` the bars they were held (marked).
    """
    n_sym = state.shape[0]
    value = cash
    for i in range(n_sym):
        if state[i, S_POS] != 0.0:
            value += state[i, S_POS] * px[column, i, t]
    for i in range(n_sym):
        if state[i, order_col] < 0.0 and state[i, S_POS] != 0.0:
            size = state[i, S_POS]
            cash, fill, net = sell(cash, size, px[column, i, t], run.fee_rate,
                                   run.fixed_fee, run.slippage)
            pnl = net - state[i, S_COST]
            trade_acc = acc_trade(trade_acc, pnl, pnl / (size * state[i, S_FILL]))
            sym[i, 0] += 1.0
            sym[i, 1] += t - state[i, S_BAR]  # marked held from its entry bar to t - 1
            state[i, S_POS] = 0.0
            n_open -= 1
    for i in range(n_sym):
        if state[i, order_col] > 0.0 and state[i, S_POS] == 0.0 and n_open < max_open:
            size, cash, fill, cost = buy(cash, weight * value, px[column, i, t],
                                         run.fee_rate, run.fixed_fee, run.slippage)
            if size > 0.0:
                state[i, S_POS] = size
                state[i, S_FILL] = fill
                state[i, S_BAR] = t
                state[i, S_COST] = cost
                n_open += 1
    return cash, n_open, trade_acc


@njit(inline="always", cache=True)
def close_orders(step, sbars, px, ind, rows, fparams, t, state):
    """Each symbol's order at the close of bar ``t`` into ``state[:, S_ORDER]`` (-1 exit,
    1 enter from flat, 0 none), each rule evaluated with its symbol's position state.

    Returns ``(how many symbols have an order, the positions' value at the close before
    any order)``.

    The loop has no branch on the position: the value adds ``0.0 * close`` for a flat
    symbol. A branch there (or a flat symbol's rule skipped until its next entry) made
    the compiled kernel 10 to 20 times slower (measured with ``benchmarks/portfolio.py``).
    """
    n_orders = 0
    held = 0.0
    for i in range(state.shape[0]):
        position = state[i, S_POS]
        long_entry, long_exit, short_entry, short_exit = step(
            ind[i], rows, fparams, sbars[i], t, position, state[i, S_FILL],
            int(state[i, S_BAR]))
        exit_now, side = resolve_signals(position, True, False, long_entry, long_exit,
                                         short_entry, short_exit)
        order = -1.0 if exit_now else (1.0 if side > 0 else 0.0)
        state[i, S_ORDER] = order
        if order != 0.0:
            n_orders += 1
        held += position * px[1, i, t]  # 0.0 when flat
    return n_orders, held


@njit(inline="always", cache=True)
def next_entry(scan, sbars, ind, rows, fparams, t, n, state):
    """The first bar >= ``t`` at which a symbol enters, all being flat; ``n`` when none
    does.

    A flat symbol's rule is a function of the bar alone (position 0), so the strategy's
    ``scan`` finds its next entry, kept in ``state[i, S_NEXT]`` and searched again only
    once passed: a stretch where every symbol is flat costs each symbol its scan.
    """
    first = n
    for i in range(state.shape[0]):
        if state[i, S_NEXT] < t:
            state[i, S_NEXT] = scan(ind[i], rows, fparams, sbars[i], t, n, True, False)
        if state[i, S_NEXT] < first:
            first = int(state[i, S_NEXT])
    return first


@njit(inline="always", cache=True)
def simulate_portfolio(step, scan, sbars, px, ind, combos, max_positions, c, run, bench,
                       state, out, per_symbol):
    """Run portfolio combo ``c`` over bars ``[run.start, run.end)`` and write its metrics
    into ``out[c]`` and its per-symbol ``n_trades`` and ``exposure`` into
    ``per_symbol[c]``.

    Parameters
    ----------
    step : njit function, the strategy's signal in its 8-argument form
    scan : njit function, the strategy's flat-stretch search
        (:func:`barsweep.engine.simulate.scan_flat`)
    sbars : tuple of Bars, one per symbol (aligned, same length), as the signals read them
    px : ndarray, shape (2, N, n_bars): each symbol's open (``px[0]``) and close (``px[1]``)
    ind : ndarray, shape (N, n_rows, n_bars): each symbol's hoisted indicator rows (on
        the GPU a tuple of N such tables, column-major)
    combos : Combos (rows and fparams are read; stops are not supported)
    max_positions : ndarray, shape (n_combos,), int64: at most this many open at once,
        each ``1 / min(K, N)`` of the value; 0 for no limit (each ``1 / N``)
    c : int
    run : RunSettings (``sum_b``, ``sum_b2`` those of ``bench``)
    bench : ndarray, shape (n_bars,): the benchmark's returns
    state : ndarray, shape (N, N_STATE): scratch, overwritten
    out : ndarray, shape (n_combos, N_METRICS)
    per_symbol : ndarray, shape (n_combos, N, N_SYMBOL_METRICS)
    """
    rows = combos.rows[c]
    fparams = combos.fparams[c]
    sym = per_symbol[c]
    n_sym = state.shape[0]
    t0 = run.start
    n = run.end
    k = max_positions[c]
    max_open = n_sym if k <= 0 or k > n_sym else k
    weight = 1.0 / max_open
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
    t = t0
    while t < n:
        if n_open == 0 and n_pending == 0:  # all flat: equity constant to the next entry
            start = t
            t = next_entry(scan, sbars, ind, rows, fparams, t, n, state)
            if t > start:
                dd_acc = acc_drawdown_flat(dd_acc, equity, t - start)
            if t >= n:
                break
        if n_pending > 0:  # 1. queued orders fill at this open
            cash, n_open, trade_acc = fill_orders(px, 0, t, state, S_PENDING, cash, n_open,
                                                  max_open, weight, run, trade_acc, sym)
            n_pending = 0
        # 2. each symbol's rule at the close
        n_orders, held = close_orders(step, sbars, px, ind, rows, fparams, t, state)
        if n_orders > 0:
            if not run.next_open:
                cash, n_open, trade_acc = fill_orders(px, 1, t, state, S_ORDER, cash,
                                                      n_open, max_open, weight, run,
                                                      trade_acc, sym)
            elif t + 1 < n:
                for i in range(n_sym):
                    state[i, S_PENDING] = state[i, S_ORDER]
                n_pending = 1
        # 3. mark the account at the close (the value summed with the rules when no
        # order filled at this close)
        if n_orders > 0 and not run.next_open:
            held = 0.0
            for i in range(n_sym):
                if state[i, S_POS] != 0.0:
                    held += state[i, S_POS] * px[1, i, t]
        equity = cash + held
        if n_open > 0:
            n_exposed += 1
        if equity <= 0.0:  # ruin: liquidated at this close, nothing more is traded
            trade_acc = liquidate(px, t, state, trade_acc, sym)
            n_open = 0
            equity = 0.0
            ruined = True
        ret_acc = acc_returns(ret_acc, equity / prev_equity - 1.0, bench[t] if t > t0 else 0.0)
        dd_acc = acc_drawdown(dd_acc, equity)
        prev_equity = equity
        t += 1
        if ruined:
            break
    if ruined and t < n:  # equity stays 0: returns 0, drawdown -100%
        dd_acc = acc_drawdown_flat(dd_acc, 0.0, n - t)
    trade_acc = liquidate(px, n - 1, state, trade_acc, sym)  # open at the end: marked
    for i in range(n_sym):
        sym[i, 1] /= n - t0
    finalize(out[c], n - t0, run.ppy, run.init_cash, equity, ret_acc, dd_acc, trade_acc,
             n_exposed, (run.sum_b, run.sum_b2), ruined)


@njit(inline="always", cache=True)
def liquidate(px, t, state, trade_acc, sym):
    """Book every open position as a trade marked at ``close[t]`` without fee, and close
    it; returns the trade accumulator."""
    for i in range(state.shape[0]):
        size = state[i, S_POS]
        if size != 0.0:
            pnl = size * px[1, i, t] - state[i, S_COST]
            trade_acc = acc_trade(trade_acc, pnl, pnl / (size * state[i, S_FILL]))
            sym[i, 0] += 1.0
            sym[i, 1] += t + 1 - state[i, S_BAR]  # marked held from its entry bar to t
            state[i, S_POS] = 0.0
    return trade_acc
