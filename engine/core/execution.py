"""Execution settings: one validated value (the spec's ``execution`` section and
``backtest()``'s keywords alike), and the typed record the kernels read it from.

Adding a setting touches this module (a field of :class:`Execution`, a field of
:class:`RunSettings` and its line in :func:`run_settings`), the arithmetic in
``simulate`` that reads ``run.<name>``, and the reference (``tests/helpers/reference.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal, NamedTuple

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ...errors import SpecError, refusals
from .fills import CONFLICT_MODES, ORDER_TYPES, SIZE_TYPES

#: The stops, execution settings that may also be grid axes (swept like strategy
#: parameters).
STOP_PARAMS = ("stop_loss", "take_profit", "trailing_stop")
#: The entry order's settings that may be grid axes: its offset and its validity
#: (``execution.entry_order.offset``, ``.valid_bars``).
ORDER_AXES = ("entry_offset", "valid_bars")
#: Every execution setting that may be a grid axis: the stops, the size's value
#: (``execution.size.value``), the leverage and the entry order's, one value per combo.
EXECUTION_AXES = (*STOP_PARAMS, "size_value", "leverage", *ORDER_AXES)
#: The execution axes of whole numbers (the others are floats).
WHOLE_AXES = ("valid_bars",)
#: ``valid_bars`` of an order valid until it fills, is cancelled or replaced.
UNTIL_CANCELLED = 1 << 62


def check_stop(name: str, value: float, direction: str = "both") -> str | None:
    """Why a stop fraction is refused, or None when it is valid.

    ``stop_loss`` and ``trailing_stop`` are fractions in (0, 1); ``take_profit``
    is > 0, and < 1 when only shorts are traded (a short cannot gain 100%).
    """
    value = float(value)
    if not np.isfinite(value) or value <= 0.0:
        return f"{name} must be a fraction > 0 of the entry price, got {value!r}"
    if name != "take_profit" and value >= 1.0:
        return f"{name} must be < 1 (a fraction of the entry price), got {value!r}"
    if name == "take_profit" and direction == "short" and value >= 1.0:
        return f"take_profit must be < 1 for shorts, got {value!r}"
    return None


def _number(default, **bounds):
    return Field(default, strict=True, allow_inf_nan=False, **bounds)


def check_size(kind: str, value: float, leverage: float = 1.0) -> str | None:
    """Why a size's ``value`` is refused for its ``kind`` (``execution.size.type``), or
    None when it is valid: none for ``all``, a fraction of the cash in (0, 1] for
    ``risk`` and in (0, ``leverage``] for ``percent``, a finite number > 0 otherwise.

    >>> check_size("percent", 1.5)
    'type percent takes a fraction of the cash in (0, 1], got 1.5'
    >>> check_size("percent", 1.5, leverage=2.0) is None
    True
    """
    value = float(value)
    if kind == "all":
        return "type all takes no value (it puts all the cash in)"
    if not np.isfinite(value) or value <= 0.0:
        return f"type {kind} takes a value > 0, got {value!r}"
    most = leverage if kind == "percent" else 1.0
    if kind in ("percent", "risk") and value > most:
        more = "" if most == 1.0 else f" (leverage {most:g})"
        return f"type {kind} takes a fraction of the cash in (0, {most:g}]{more}, got {value!r}"
    return None


class Size(BaseModel):
    """How an entry is sized (docs/EXECUTION.md, "Sizing and costs"): ``all`` the cash
    (default), a ``percent`` of it (``value`` in (0, 1]), a ``cash`` amount (the
    position's value at the fill, fees on top), a ``quantity`` of units, the ``risk``
    of losing the fraction ``value`` of the cash at the stop (``stop_loss``, or ``atr``
    ATRs from the fill: the distance in the ATR of ``execution.atr_window`` bars), or
    a ``vol_target``: the fraction ``value / volatility`` of the cash, the volatility
    annualised from the ``window`` bar returns before the entry; each at most what the
    cash pays for. ``value`` may instead be the grid axis ``size_value`` (one per
    combo): a size without either is refused where its columns are made
    (:func:`execution_columns`), or by the spec."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["all", "percent", "cash", "quantity", "risk", "vol_target"] = "all"
    value: float | None = _number(None, gt=0)
    window: int | None = Field(None, strict=True, ge=2)
    atr: float | None = _number(None, gt=0)

    @model_validator(mode="after")
    def _fits_type(self) -> Size:
        problem = (check_size(self.type, self.value, math.inf) if self.value is not None
                   else None)  # a percent within the leverage: checked by Execution
        if problem:
            raise ValueError(problem)
        if self.window is not None and self.type != "vol_target":
            raise ValueError(f"type {self.type} takes no window (vol_target's)")
        if self.atr is not None and self.type != "risk":
            raise ValueError(f"type {self.type} takes no atr (risk's stop distance)")
        return self

    @property
    def vol_window(self) -> int:
        """The bars ``vol_target`` measures the volatility over (20 unless set); 0 for
        every other type."""
        return (self.window or 20) if self.type == "vol_target" else 0


def check_order(name: str, value: float, unit: str = "close") -> str | None:
    """Why an entry order's ``entry_offset`` (in ``unit``: a fraction of the close, or
    ATRs) or ``valid_bars`` is refused, or None.

    >>> check_order("entry_offset", -0.01)
    'entry_offset must be a fraction of the close in [0, 1), got -0.01'
    >>> check_order("entry_offset", 2.5, unit="atr") is None
    True
    """
    value = float(value)
    if name == "entry_offset" and unit == "atr" and not 0.0 <= value < math.inf:
        return f"entry_offset must be a number of ATRs >= 0, got {value!r}"
    if name == "entry_offset" and unit == "close" and not 0.0 <= value < 1.0:
        return f"entry_offset must be a fraction of the close in [0, 1), got {value!r}"
    if name == "valid_bars" and not (value >= 1 and value == int(value)):
        return f"valid_bars must be a whole number of bars >= 1, got {value!r}"
    return None


class EntryOrder(BaseModel):
    """How an entry signal enters (docs/EXECUTION.md, "Entry orders"): at ``market``
    (default: the close, or the next open, as ``fill`` says), or with a ``limit`` or
    ``stop`` order placed at the signal's close at ``offset`` (``unit`` ``close``: a
    fraction of the close; ``atr``: ATRs of ``execution.atr_window`` bars at that close;
    below it for a long limit, above for a long stop, mirrored for shorts), waiting
    ``valid_bars`` bars (None: until it fills, is cancelled or replaced). Either may
    instead be a grid axis, ``entry_offset`` or ``valid_bars``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["market", "limit", "stop"] = "market"
    offset: float | None = _number(None, ge=0)
    valid_bars: int | None = Field(None, strict=True, ge=1)
    unit: Literal["close", "atr"] = "close"

    @model_validator(mode="after")
    def _fits_type(self) -> EntryOrder:
        if self.type == "market" and (self.offset is not None or self.valid_bars is not None):
            raise ValueError("type market fills at once: it takes no offset or valid_bars "
                             "(set type limit or stop)")
        problem = (check_order("entry_offset", self.offset, self.unit)
                   if self.offset is not None else None)
        if problem:
            raise ValueError(problem.replace("entry_offset", "offset", 1))
        return self


class Execution(BaseModel):
    """How orders fill (docs/EXECUTION.md); validated when made (a
    pydantic ``ValidationError``, or :func:`execution_of`'s SpecError).

    Parameters
    ----------
    fill : {"next_open", "close"}
        ``next_open`` (default, no look-ahead) fills a signal of bar t at bar t+1's open.
    fees : float
        Fraction of traded notional charged on entry and on exit, in [0, 1).
    fixed_fee : float
        Cash charged per order (entry and exit), in units of ``init_cash``.
    slippage : float
        Fraction by which each fill price moves against the trader, in [0, 1).
    init_cash : float
        Starting equity, > 0 and > ``fixed_fee``.
    direction : {"long", "short", "both"}
        ``both``: a long exit and a short entry on one bar reverse the position.
    stop_loss, take_profit, trailing_stop : float or None
        Fractions of the entry price (trailing: of the best price since entry),
        checked inside each bar on high/low; None for none. The same names may be
        grid axes instead, one value per combo.
    funding : bool
        Pay ``position * close * funding_rate`` at each bar (the bars must carry a
        ``funding_rate`` column).
    size : Size
        How an entry is sized: ``{type: all}`` (default, all the cash), ``percent``,
        ``cash``, ``quantity``, ``risk`` or ``vol_target`` with a ``value``.
    leverage : float
        The most the positions may be worth over the equity at entry, >= 1 (default 1):
        it multiplies what every size may buy; a long then borrows cash.
    borrow_rate : float
        A year's interest on borrowed cash (a leveraged long's) and fee on a short's
        value, charged at every bar's close, >= 0.
    maintenance_margin : float or None
        A position whose equity falls below this fraction of its value inside a bar is
        closed there (a margin call, exit reason ``margin``); None: only at zero equity
        (ruin).
    entry_order : EntryOrder
        How entry signals enter: ``{type: market}`` (default), or a ``limit`` or ``stop``
        order with an ``offset`` and ``valid_bars``.
    atr_window : int
        The bars of the ATR (TA-Lib's ``ATR``) that settings in ATRs read: a risk size's
        ``atr``, an entry order's offset in ``unit: atr``; 14 unless set.
    lot : float or None
        Sizes are rounded down to whole multiples of this quantity; None: any size.
    conflict : {"opposite", "ignore", "entry", "exit", "adjacent"}
        What an entry and an exit of one side true on the same bar do (vectorbt's
        conflict modes): ``opposite`` (default) the exit while a position is open,
        ``adjacent`` the entry then; both drop both while flat. ``ignore`` drops both,
        ``entry`` keeps the entry, ``exit`` the exit, always.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    fill: Literal["close", "next_open"] = "next_open"
    fees: float = _number(0.0, ge=0, lt=1)
    fixed_fee: float = _number(0.0, ge=0)
    slippage: float = _number(0.0, ge=0, lt=1)
    init_cash: float = _number(10_000.0, gt=0)
    direction: Literal["long", "short", "both"] = "long"
    stop_loss: float | None = _number(None)
    take_profit: float | None = _number(None)
    trailing_stop: float | None = _number(None)
    funding: bool = Field(False, strict=True)
    size: Size = Size()
    lot: float | None = _number(None, gt=0)
    leverage: float = _number(1.0, ge=1)
    borrow_rate: float = _number(0.0, ge=0)
    maintenance_margin: float | None = _number(None, gt=0, lt=1)
    entry_order: EntryOrder = EntryOrder()
    atr_window: int = Field(14, strict=True, ge=1)
    conflict: Literal["opposite", "ignore", "entry", "exit", "adjacent"] = "opposite"

    @field_validator("init_cash")
    @classmethod
    def _above_fixed_fee(cls, value: float, info: ValidationInfo) -> float:
        fixed_fee = info.data.get("fixed_fee", 0.0)
        if value <= fixed_fee:
            raise ValueError(f"init_cash must be > fixed_fee ({fixed_fee!r}), got {value!r}")
        return value

    @model_validator(mode="after")
    def _size_within_leverage(self) -> Execution:
        if self.size.value is not None:
            problem = check_size(self.size.type, self.size.value, self.leverage)
            if problem:
                raise ValueError(f"size: {problem}")
        return self

    @property
    def atr_bars(self) -> int:
        """The ATR's window when a setting reads the ATR, else 0 (no ATR computed)."""
        used = self.size.atr is not None or (self.entry_order.type != "market"
                                             and self.entry_order.unit == "atr")
        return self.atr_window if used else 0

    @field_validator(*STOP_PARAMS)
    @classmethod
    def _stop_fraction(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None:
            problem = check_stop(info.field_name, value, info.data.get("direction", "both"))
            if problem:
                raise ValueError(problem)
        return value


#: Why a ``risk`` size is refused without a stop loss.
RISK_WITHOUT_STOP = ("type risk sizes by the loss at the stop: set execution.size.atr "
                     "(the stop distance in ATRs) or execution.stop_loss "
                     "(or sweep it as a grid axis)")


def execution_of(settings: Mapping) -> Execution:
    """``Execution(**settings)``, refused values raising one :class:`SpecError` that names
    each key (``execution.fees: Input should be ...``)."""
    if isinstance(settings, Execution):
        return settings
    try:
        return Execution(**settings)
    except ValidationError as err:
        raise SpecError("; ".join(refusals(err, Execution, "execution"))) from None


def hold_execution(execution: Execution) -> Execution:
    """The execution of a run's buy-and-hold benchmark (``stats()``, the buy-and-hold row
    of ``rank``, ``report`` and ``trades``): the run's fill, costs, initial cash, funding
    and conflict mode; long, all-in, unlevered, entered at market, without stops.

    >>> hold_execution(Execution(direction="both", leverage=2.0, stop_loss=0.02)).leverage
    1.0
    """
    return execution.model_copy(update=dict(
        direction="long", stop_loss=None, take_profit=None, trailing_stop=None, size=Size(),
        lot=None, leverage=1.0, borrow_rate=0.0, maintenance_margin=None,
        entry_order=EntryOrder()))


def benchmark_returns(close: np.ndarray) -> np.ndarray:
    """Buy-and-hold returns of ``close``: ``b_0 = 0``, ``b_t = close_t / close_(t-1) - 1``."""
    out = np.zeros(close.shape[0])
    out[1:] = close[1:] / close[:-1] - 1.0
    return out


class RunSettings(NamedTuple):
    """What ``simulate`` reads of one run besides its bars and combos: the execution
    settings, the bars run, bars per year and the benchmark's sums over those bars.

    A numba named tuple of scalars (ints, floats and bools as themselves) and tuples,
    made by :func:`run_settings` and narrowed to a window by :func:`over_span`.
    ``shorts`` is ``()`` when the run trades long only, ``borrowing`` when the run neither
    borrows nor meets margin calls, ``entry_order`` when it enters at market and ``atr``
    when no setting reads the ATR: their types then compile that code away
    (:func:`fills.directions`, :func:`fills.borrowing_terms`, :func:`fills.order_type_of`,
    :func:`fills.atr_at`).
    """

    start: int  # the first bar simulated (a window's; 0 for a whole run)
    end: int  # one past the last bar simulated
    next_open: bool  # fill: next_open (False: close)
    fee_rate: float
    fixed_fee: float
    slippage: float
    init_cash: float
    allow_long: bool
    allow_short: bool
    # () when the run trades long only, else (1 if it trades long too else 0,): the
    # portfolio kernel's short side compiles away for () (:func:`fills.directions`)
    shorts: tuple
    funding: bool
    conflict: int  # the conflict mode's code (``fills.CONFLICT_MODES``)
    size_type: int  # the sizing's code (``fills.SIZE_TYPES``)
    lot: float  # sizes in whole multiples of this (0.0: any size); the value: per combo
    vol_window: int  # bars of ``vol_target``'s volatility (0: another sizing)
    # () or (borrow_rate / ppy, maintenance_margin or 0.0): see above (the leverage is
    # per combo, read at entries: ``Combos.leverage``)
    borrowing: tuple
    # () for market entries, or (the entry order's code, ``fills.ORDER_TYPES``, 1 when its
    # offset is in ATRs else 0): as above
    entry_order: tuple
    risk_atr: float  # a risk size's stop distance in ATRs (0.0: its stop_loss)
    # () when no setting reads the ATR, else (the ATR column, shape (n_bars,),): as above
    atr: tuple
    ppy: float  # bars per year
    sum_b: float  # sum of the benchmark returns of bars (start, end)
    sum_b2: float  # and of their squares


def run_settings(execution: Execution, ppy: float, bench: np.ndarray,
                 atr: np.ndarray | None = None) -> RunSettings:
    """The settings the kernels read, for a run over every bar of ``bench`` (the
    benchmark returns, :func:`benchmark_returns`) and, when a setting reads it, the ATR
    column ``atr`` (``execution.atr_bars``); :func:`over_span` narrows it."""
    return over_span(RunSettings(
        start=0,
        end=len(bench),
        next_open=execution.fill == "next_open",
        fee_rate=float(execution.fees),
        fixed_fee=float(execution.fixed_fee),
        slippage=float(execution.slippage),
        init_cash=float(execution.init_cash),
        allow_long=execution.direction in ("long", "both"),
        allow_short=execution.direction in ("short", "both"),
        shorts=() if execution.direction == "long" else (int(execution.direction == "both"),),
        funding=bool(execution.funding),
        conflict=CONFLICT_MODES.index(execution.conflict),
        size_type=SIZE_TYPES.index(execution.size.type),
        lot=float(execution.lot or 0.0),
        vol_window=int(execution.size.vol_window),
        borrowing=borrowing(execution, ppy),
        entry_order=(() if execution.entry_order.type == "market"
                     else (ORDER_TYPES.index(execution.entry_order.type),
                           int(execution.entry_order.unit == "atr"))),
        risk_atr=float(execution.size.atr or 0.0),
        atr=() if atr is None else (atr,),
        ppy=float(ppy),
        sum_b=0.0,
        sum_b2=0.0,
    ), bench, 0, len(bench))


def borrowing(execution: Execution, ppy: float) -> tuple:
    """:class:`RunSettings`' ``borrowing``: ``(borrow_rate / ppy, maintenance_margin or
    0.0)``, or ``()`` when they are 0 and None.

    >>> borrowing(Execution(), 8760.0)
    ()
    >>> borrowing(Execution(leverage=2.0, maintenance_margin=0.25), 8760.0)
    (0.0, 0.25)
    """
    terms = (float(execution.borrow_rate) / float(ppy),
             float(execution.maintenance_margin or 0.0))
    return () if terms == (0.0, 0.0) else terms


def over_span(settings: RunSettings, bench: np.ndarray, start: int, end: int) -> RunSettings:
    """``settings`` for a run over bars ``[start, end)`` only: the bounds and the
    benchmark sums of those bars, whose first return counts as 0 (as the first bar of a
    run: there is no close before it in the run)."""
    if not 0 <= start < end <= len(bench):
        raise ValueError(f"need 0 <= start < end <= {len(bench)}, got [{start}, {end})")
    held = bench[start + 1:end]
    return settings._replace(start=int(start), end=int(end), sum_b=float(held.sum()),
                             sum_b2=float((held * held).sum()))


def split_combo(combo: Mapping) -> tuple[dict, dict]:
    """``(strategy parameters, execution axes)`` of a combo's (or a block's) values by
    name: those of :data:`EXECUTION_AXES` swept as grid axes, and the strategy's.

    >>> split_combo({"fast": 5, "slow": 20, "stop_loss": 0.05, "size_value": 0.5})
    ({'fast': 5, 'slow': 20}, {'stop_loss': 0.05, 'size_value': 0.5})
    """
    params = {k: v for k, v in combo.items() if k not in EXECUTION_AXES}
    swept = {k: v for k, v in combo.items() if k in EXECUTION_AXES}
    return params, swept


def execution_columns(execution: Execution, swept: Mapping[str, np.ndarray],
                      n_combos: int) -> dict[str, np.ndarray]:
    """Per-combo execution values by name (each of :data:`EXECUTION_AXES`), shape
    (n_combos,), float64 (``valid_bars``: int64): the stops (0 where there is none), the
    size's value (1.0 for ``all``) and the entry order's (:func:`order_columns`).

    A value given in ``swept`` (a grid axis) takes one value per combo; otherwise the
    execution's scalar applies to every combo. Both at once is refused, as is a size
    that needs a value and has none, or a risk size without a stop loss.
    """
    out = {}
    for name in STOP_PARAMS:
        scalar = getattr(execution, name)
        column = np.zeros(n_combos)
        if name in swept:
            if scalar is not None:
                raise SpecError(f"{name} is both an execution setting and a grid axis; "
                                f"keep one")
            values = np.asarray(swept[name], dtype=np.float64)
            for value in np.unique(values):
                problem = check_stop(name, value, execution.direction)
                if problem:
                    raise SpecError(f"grid.{problem}")
            column[:] = values
        elif scalar is not None:
            column[:] = scalar
        out[name] = column
    out["leverage"] = leverage_column(execution, swept.get("leverage"), n_combos)
    out["size_value"] = size_column(execution.size, swept.get("size_value"), n_combos,
                                    float(out["leverage"].max(initial=1.0)))
    if execution.size.type == "percent" and "leverage" in swept:
        over = out["size_value"] > out["leverage"]
        if over.any():
            k = int(np.argmax(over))
            raise SpecError(f"grid.size_value: type percent takes a fraction of the cash up "
                            f"to the combo's leverage; a combo has size_value "
                            f"{out['size_value'][k]:g} with leverage {out['leverage'][k]:g}")
    out.update(order_columns(execution.entry_order, swept, n_combos))
    if (execution.size.type == "risk" and execution.size.atr is None
            and not (out["stop_loss"] > 0.0).all()):
        raise SpecError(f"execution.size: {RISK_WITHOUT_STOP}")
    return out


def leverage_column(execution: Execution, swept: np.ndarray | None,
                    n_combos: int) -> np.ndarray:
    """Each combo's leverage: the grid axis ``leverage`` (``swept``), else the
    execution's; SpecError naming the key when refused (a value below 1, or the axis
    beside an ``execution.leverage`` other than its default 1: a stored spec, which
    writes every key, says ``leverage: 1.0``)."""
    if swept is None:
        return np.full(n_combos, float(execution.leverage))
    if execution.leverage != 1.0:
        raise SpecError("execution.leverage: it is also a grid axis (leverage); keep one")
    values = np.asarray(swept, dtype=np.float64)
    bad = values[~(np.isfinite(values) & (values >= 1.0))]
    if bad.size:
        raise SpecError(f"grid.leverage: leverage must be >= 1 (what a size may buy over "
                        f"the cash), got {float(bad[0])!r}")
    return values.copy()


def size_column(size: Size, swept: np.ndarray | None, n_combos: int,
                leverage: float = 1.0) -> np.ndarray:
    """Each combo's size value: the grid axis ``size_value`` (``swept``), else the
    size's own value (1.0 for ``all``); SpecError naming the key when refused."""
    if swept is None:
        if size.type != "all" and size.value is None:
            raise SpecError(f"execution.size: type {size.type} needs a value "
                            f"(execution.size.value, or a grid axis size_value)")
        return np.full(n_combos, size.value or 1.0)
    if size.value is not None:
        raise SpecError("execution.size: its value is also a grid axis (size_value); keep one")
    values = np.asarray(swept, dtype=np.float64)
    for value in np.unique(values):
        problem = check_size(size.type, value, leverage)
        if problem:
            raise SpecError(f"grid.size_value: {problem}")
    return values.copy()


def order_columns(order: EntryOrder, swept: Mapping[str, np.ndarray],
                  n_combos: int) -> dict[str, np.ndarray]:
    """Each combo's ``entry_offset`` (float64; 0.0 at market) and ``valid_bars`` (int64;
    :data:`UNTIL_CANCELLED` without a limit): the grid axes (``swept``), else the order's
    own values; SpecError naming the key when refused."""
    out = {}
    for name, field in zip(ORDER_AXES, ("offset", "valid_bars")):
        scalar = getattr(order, field)
        if name in swept:
            if order.type == "market":
                raise SpecError(f"grid.{name}: the entry order is type market (it fills at "
                                f"once): set execution.entry_order.type to limit or stop")
            if scalar is not None:
                raise SpecError(f"execution.entry_order: its {field} is also a grid axis "
                                f"({name}); keep one")
            values = np.asarray(swept[name], dtype=np.float64)
            problem = next(filter(None, (check_order(name, v, order.unit)
                                         for v in np.unique(values))), None)
            if problem:
                raise SpecError(f"grid.{name}: {problem}")
        elif name == "entry_offset" and scalar is None and order.type != "market":
            raise SpecError(f"execution.entry_order: type {order.type} needs an offset "
                            f"(execution.entry_order.offset, or a grid axis entry_offset)")
        else:
            default = 0.0 if name == "entry_offset" else UNTIL_CANCELLED
            values = np.full(n_combos, default if scalar is None else scalar)
        out[name] = values.astype(np.int64 if name in WHOLE_AXES else np.float64)
    return out
