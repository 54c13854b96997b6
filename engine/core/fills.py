"""Fills: opening a position sized as the spec asks, closing it, and the intrabar
stop check.

Plain functions of scalars (no allocation, no numpy calls), compiled with
``njit`` here and usable as numba.cuda device functions: one arithmetic source.
``side`` is +1 for long and -1 for short; a position is a signed size.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# Exit reasons, as recorded in the trades table (EXIT_REASONS[code]).
EXIT_SIGNAL = 0
EXIT_STOP = 1
EXIT_TARGET = 2
EXIT_TRAIL = 3
EXIT_END = 4
EXIT_RUIN = 5
EXIT_MARGIN = 6
EXIT_REASONS = ("signal", "stop", "target", "trail", "end", "ruin", "margin")

# What an entry and an exit of one side, true on the same bar, do (``execution.conflict``;
# vectorbt's ``ConflictMode``, its codes): CONFLICT_MODES[code].
CONFLICT_IGNORE = 0
CONFLICT_ENTRY = 1
CONFLICT_EXIT = 2
CONFLICT_ADJACENT = 3
CONFLICT_OPPOSITE = 4
CONFLICT_MODES = ("ignore", "entry", "exit", "adjacent", "opposite")


# How an entry is sized (``execution.size.type``): SIZE_TYPES[code].
SIZE_ALL = 0
SIZE_PERCENT = 1
SIZE_CASH = 2
SIZE_QUANTITY = 3
SIZE_RISK = 4
SIZE_VOL_TARGET = 5
SIZE_TYPES = ("all", "percent", "cash", "quantity", "risk", "vol_target")

# How an entry signal enters (``execution.entry_order.type``): ORDER_TYPES[code]. A limit
# or stop order waits at a level for later bars to reach it (docs/EXECUTION.md).
ORDER_MARKET = 0
ORDER_LIMIT = 1
ORDER_STOP = 2
ORDER_TYPES = ("market", "limit", "stop")


@njit(cache=True)
def open_position(cash, side, price, fee_rate, fixed_fee, slippage, size_type, size_value,
                  lot, stop_loss, vol, leverage, atr_stop):
    """Open a position of ``side`` at ``price`` with the cash ``cash``, sized by
    ``size_type`` and ``size_value`` (docs/EXECUTION.md, "Sizing and costs").

    ``leverage`` (>= 1) multiplies what the cash pays for: the budget of ``all``, and the
    cap of every other size (a long then borrows, its cash below zero).

    The fill moves against the trader by ``slippage``. ``all`` puts all the cash in:
    ``(cash - fixed_fee) / (fill * (1 + fee_rate))`` as vectorbt's ``size=inf``;
    ``percent`` the fraction ``size_value`` of it (vectorbt's ``percent``, fees
    included), ``vol_target`` the fraction ``size_value / vol`` (``vol``: the annualised
    volatility of the bars before the entry, :func:`realized_vol`; none when it is not
    a positive number), at most all of it. ``cash`` buys a position worth
    ``size_value`` at the fill (fees on top), ``quantity`` ``size_value`` units and
    ``risk`` the units whose loss at the stop (``atr_stop``, a price distance, when it
    is not 0.0; else ``stop_loss``, a fraction of the fill) is the fraction
    ``size_value`` of the cash (none while ``atr_stop`` is NaN), each at most what the
    cash pays for, fees included (vectorbt's ``allow_partial``). ``lot`` > 0 rounds the
    size down to whole multiples of it (vectorbt's ``size_granularity``). The cash a
    size leaves stays in the account.

    Returns
    -------
    (signed size, cash after, fill price); size 0 when the cash cannot pay the fixed fee
    or the size rounds down to nothing.
    """
    fill = price * (1.0 + side * slippage)
    budget = cash * leverage
    if size_type == SIZE_PERCENT:
        budget = cash * size_value
    elif size_type == SIZE_VOL_TARGET:
        budget = cash * min(size_value / vol, leverage) if vol > 0.0 else 0.0
    size = (budget - fixed_fee) / (fill * (1.0 + fee_rate))
    if size_type == SIZE_CASH:
        size = min(size, size_value / fill)
    elif size_type == SIZE_QUANTITY:
        size = min(size, size_value)
    elif size_type == SIZE_RISK:
        distance = atr_stop if atr_stop != 0.0 else stop_loss * fill
        # none while the ATR is NaN (its warm-up) or 0
        size = min(size, size_value * cash / distance) if distance > 0.0 else 0.0
    if lot > 0.0:
        size = (size // lot) * lot
    if not size > 0.0:  # NaN too
        return 0.0, cash, fill
    notional = size * fill
    if side > 0.0:
        if size_type == SIZE_ALL and lot == 0.0 and leverage == 1.0:
            return size, 0.0, fill  # all of the cash is spent (no rounding residue)
        return size, cash - notional - notional * fee_rate - fixed_fee, fill
    return -size, cash + notional - notional * fee_rate - fixed_fee, fill


@njit(cache=True)
def atr_at(atr, t):
    """The ATR at bar ``t`` of a run's ``atr`` (:class:`~barsweep.engine.core.execution.
    RunSettings`: ``(column,)``); the constant 0.0 for ``()``, which compiles the code of
    the settings in ATRs away (as :func:`borrowing_terms`)."""
    if len(atr) == 0:
        return 0.0
    return atr[0][t]


@njit(cache=True)
def atr_stop(risk_atr, atr, t):
    """:func:`open_position`'s ``atr_stop``: a risk size's stop distance, ``risk_atr``
    ATRs as of bar ``t`` (NaN in the ATR's warm-up), or 0.0 when ``risk_atr`` is 0 (the
    stop loss measures it). ``atr``: the run's (:func:`atr_at`)."""
    return risk_atr * atr_at(atr, t) if risk_atr > 0.0 else 0.0


@njit(cache=True)
def realized_vol(close, last, window, ppy):
    """The annualised volatility of the ``window`` bar returns ending at bar ``last``
    (``close[i] / close[i-1] - 1``, sample standard deviation times ``sqrt(ppy)``); NaN
    when the bars before ``last`` are fewer than ``window`` or ``window`` < 2."""
    first = last - window + 1  # the first return's bar
    if window < 2 or first < 1:
        return np.nan
    mean = 0.0
    for i in range(first, last + 1):
        mean += close[i] / close[i - 1] - 1.0
    mean /= window
    ss = 0.0
    for i in range(first, last + 1):
        d = close[i] / close[i - 1] - 1.0 - mean
        ss += d * d
    return math.sqrt(ss / (window - 1) * ppy)


@njit(cache=True)
def close_position(cash, position, price, fee_rate, fixed_fee, slippage):
    """Close ``position`` (signed size) at ``price``; return ``(cash after, fill price)``."""
    side = 1.0 if position > 0.0 else -1.0
    fill = price * (1.0 - side * slippage)
    notional = abs(position) * fill
    return cash + side * notional - notional * fee_rate - fixed_fee, fill


@njit(cache=True)
def ruin_reached(cash, position, high, low):
    """Whether a bar takes a position's equity, ``cash + position * price``, to zero.

    A long's equity is lowest at the bar's low, a short's at its high; the bar ruins the
    position when the equity there is <= 0 (a long bought with all the cash, ``cash ==
    0``, never is: prices are positive). False when flat. Branch-light: the sweep calls
    it on every bar a position is held.
    """
    worst = low if position > 0.0 else high
    return cash + position * worst <= 0.0 and position != 0.0


@njit(cache=True)
def borrowing_terms(borrowing):
    """``(borrow, maintenance)`` of a run's ``borrowing``
    (:class:`~barsweep.engine.core.execution.RunSettings`): ``(0.0, 0.0)`` for ``()``,
    constants that compile the borrowing and margin code away (numba reads the length of
    a tuple argument from its type and prunes the other branch)."""
    if len(borrowing) == 0:
        return 0.0, 0.0
    return borrowing[0], borrowing[1]


@njit(cache=True)
def directions(shorts):
    """``(allow_long, allow_short)`` of a run's ``shorts``
    (:class:`~barsweep.engine.core.execution.RunSettings`): the constants ``(True,
    False)`` for ``()`` (long only), which compile the short side away (as
    :func:`borrowing_terms`)."""
    if len(shorts) == 0:
        return True, False
    return shorts[0] != 0, True


@njit(cache=True)
def order_type_of(entry_order):
    """``(code, in_atr)`` of a run's ``entry_order``
    (:class:`~barsweep.engine.core.execution.RunSettings`): its code (``ORDER_TYPES``)
    and whether its offset is in ATRs; ``(ORDER_MARKET, False)`` for ``()``, constants
    that compile the pending orders' code away (as :func:`borrowing_terms`)."""
    if len(entry_order) == 0:
        return ORDER_MARKET, False
    return entry_order[0], entry_order[1] != 0


@njit(cache=True)
def order_level(order_type, side, close, offset, atr, in_atr):
    """The level of a pending entry order of ``side`` placed at ``close``: ``offset`` (a
    fraction in [0, 1) of the close, or, ``in_atr``, that many ``atr``) below the close
    for a long limit and a short stop (they fill when the price falls to it), above it
    for a long stop and a short limit. NaN while the ATR is (its warm-up): never filled."""
    below = (order_type == ORDER_LIMIT) == (side > 0)
    if in_atr:
        return close - offset * atr if below else close + offset * atr
    if below:
        return close * (1.0 - offset)
    return close * (1.0 + offset)


@njit(cache=True)
def order_fill(order_type, side, level, open_, high, low):
    """Where a pending entry order at ``level`` fills in a bar, or -1.0 when the bar does
    not reach it. A bar that opens through the level fills at its open (a limit at a
    better price, a stop at a worse one); one whose range reaches it, at the level."""
    if (order_type == ORDER_LIMIT) == (side > 0):  # fills at or below the level
        if open_ <= level:
            return open_
        return level if low <= level else -1.0
    if open_ >= level:
        return open_
    return level if high >= level else -1.0


@njit(cache=True)
def margin_level(cash, position, maintenance):
    """The price where a position's equity ``cash + position * price`` falls to the
    maintenance fraction of its value, ``maintenance * |position| * price``: below it a
    long, above it a short, is called (:func:`stop_exit`'s ``margin``)."""
    if position > 0.0:
        return -cash / (position * (1.0 - maintenance))
    return cash / (-position * (1.0 + maintenance))


@njit(cache=True)
def ruin_fill(cash, position, open_):
    """Where a position that a bar ruins (:func:`ruin_reached`) is liquidated: the price
    where its equity is zero, ``-cash / position``, or the open when the equity is
    already <= 0 there (a gap; the equity is then clamped to zero)."""
    if cash + position * open_ <= 0.0:
        return open_
    return -cash / position


@njit(cache=True)
def stop_exit(side, open_, high, low, entry_fill, extreme, stop_loss, take_profit,
              trailing_stop, margin):
    """Whether a bar's range hits a stop or a margin call, and where it fills.

    Levels are fractions of the entry fill price (stop, target) or of the best
    price since entry, ``extreme`` (trailing: the highest high of a long, the
    lowest low of a short, up to the previous bar). A bar that opens through a
    level fills at its open; a stop (fixed or trailing) is checked before the
    target, so when both are inside one bar the stop fills (conservative). A
    fraction of 0 disables that level. ``margin`` > 0 is the price of a margin call
    (:func:`margin_level`), an adverse level like the stops': the first of them the bar
    reaches fills (the margin call on a tie); 0 (or a long's level <= 0) never calls.

    Returns
    -------
    (reason, price): reason ``EXIT_STOP``, ``EXIT_TRAIL``, ``EXIT_MARGIN`` or
    ``EXIT_TARGET``, or -1 (and 0.0) when nothing is hit.
    """
    reason = -1
    level = 0.0
    if side > 0.0:
        if stop_loss > 0.0:
            level = entry_fill * (1.0 - stop_loss)
            reason = EXIT_STOP
        if trailing_stop > 0.0:
            trail = extreme * (1.0 - trailing_stop)
            if reason < 0 or trail > level:
                level = trail
                reason = EXIT_TRAIL
        if margin > 0.0 and (reason < 0 or margin >= level):
            level = margin
            reason = EXIT_MARGIN
        if reason >= 0:
            if open_ <= level:
                return reason, open_
            if low <= level:
                return reason, level
        if take_profit > 0.0:
            target = entry_fill * (1.0 + take_profit)
            if open_ >= target:
                return EXIT_TARGET, open_
            if high >= target:
                return EXIT_TARGET, target
    else:
        if stop_loss > 0.0:
            level = entry_fill * (1.0 + stop_loss)
            reason = EXIT_STOP
        if trailing_stop > 0.0:
            trail = extreme * (1.0 + trailing_stop)
            if reason < 0 or trail < level:
                level = trail
                reason = EXIT_TRAIL
        if margin > 0.0 and (reason < 0 or margin <= level):
            level = margin
            reason = EXIT_MARGIN
        if reason >= 0:
            if open_ >= level:
                return reason, open_
            if high >= level:
                return reason, level
        if take_profit > 0.0:
            target = entry_fill * (1.0 - take_profit)
            if open_ <= target:
                return EXIT_TARGET, open_
            if low <= target:
                return EXIT_TARGET, target
    return -1, 0.0


@njit(inline="always", cache=True)
def resolve_conflict(position, entry, exit_, conflict):
    """An entry and an exit of one side that hold together on a bar, resolved by the
    conflict mode (vectorbt's ``resolve_signal_conflict_nb`` for one side): ``(entry,
    exit)`` as they then act. Unchanged when they do not both hold.

    ``ignore`` drops both; ``entry`` keeps the entry, ``exit`` the exit; ``adjacent``
    keeps the entry and ``opposite`` the exit while a position (of either side) is open,
    and both drop both while flat.
    """
    if entry and exit_:
        if conflict == CONFLICT_ENTRY:
            return True, False
        if conflict == CONFLICT_EXIT:
            return False, True
        held = position != 0.0
        if conflict == CONFLICT_ADJACENT:
            return held, False
        if conflict == CONFLICT_OPPOSITE:
            return False, held
        return False, False
    return entry, exit_


@njit(inline="always", cache=True)
def opens_from_flat(entry, exit_, entry_wins):
    """Whether a side's signals open it from flat: its entry, unless its exit holds too
    and the conflict mode is not ``entry`` (``entry_wins``; every other mode drops an
    entry and exit together while flat)."""
    return entry and (entry_wins or not exit_)


@njit(inline="always", cache=True)
def exits_held(entry, exit_, exit_wins):
    """Whether an open position's own signals close it: its exit, unless its entry holds
    too and the conflict mode is not ``exit`` or ``opposite`` (``exit_wins``)."""
    return exit_ and (exit_wins or not entry)


@njit(inline="always", cache=True)
def resolve_signals(position, allow_long, allow_short, conflict, long_entry, long_exit,
                    short_entry, short_exit):
    """What the close of a bar does: ``(exit the position?, side to enter or 0)``.

    An entry and an exit of the same side on one bar are resolved by ``conflict``
    (:func:`resolve_conflict`); a position is closed only by its own exit; an entry
    opens only from flat (after this bar's exit, which makes a reversal); long and
    short entries together cancel.
    """
    long_entry, long_exit = resolve_conflict(position, long_entry, long_exit, conflict)
    short_entry, short_exit = resolve_conflict(position, short_entry, short_exit, conflict)
    exit_now = (position > 0.0 and long_exit) or (position < 0.0 and short_exit)
    flat_after = position == 0.0 or exit_now
    go_long = flat_after and long_entry and allow_long
    go_short = flat_after and short_entry and allow_short
    if go_long and not go_short:
        return exit_now, 1
    if go_short and not go_long:
        return exit_now, -1
    return exit_now, 0
