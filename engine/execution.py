"""Execution settings: one validated value (the spec's ``execution`` section and
``backtest()``'s keywords alike), and its packing into the kernels' float64 arrays.

Adding a setting touches three places: a field of :class:`Execution`, a slot of ``xp``
(the ``XP_*`` layout below, filled by :func:`pack_xp`), and the arithmetic in
``simulate`` that reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from ..errors import SpecError, refusals

#: Execution settings that may also be grid axes (swept like strategy parameters).
STOP_PARAMS = ("stop_loss", "take_profit", "trailing_stop")

# Layout of ``xp``, the float64 vector of execution settings the kernels read.
XP_NEXT_OPEN = 0
XP_FEE_RATE = 1
XP_SLIPPAGE = 2
XP_INIT_CASH = 3
XP_PPY = 4
XP_SUM_B = 5
XP_SUM_B2 = 6
XP_ALLOW_LONG = 7
XP_ALLOW_SHORT = 8
XP_FIXED_FEE = 9
XP_FUNDING = 10
XP_START = 11  # the first bar simulated (a window's; 0 for a whole run)
XP_END = 12  # one past the last bar simulated
N_XP = 13

# Columns of ``stops``: per-combo fractions of STOP_PARAMS, 0 = no such stop.
STOP_LOSS = 0
TAKE_PROFIT = 1
TRAILING_STOP = 2
N_STOPS = 3


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


class Execution(BaseModel):
    """How orders fill (DESIGN.md "Execution semantics"); validated when made (a
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

    @field_validator("init_cash")
    @classmethod
    def _above_fixed_fee(cls, value: float, info: ValidationInfo) -> float:
        fixed_fee = info.data.get("fixed_fee", 0.0)
        if value <= fixed_fee:
            raise ValueError(f"init_cash must be > fixed_fee ({fixed_fee!r}), got {value!r}")
        return value

    @field_validator(*STOP_PARAMS)
    @classmethod
    def _stop_fraction(cls, value: float | None, info: ValidationInfo) -> float | None:
        if value is not None:
            problem = check_stop(info.field_name, value, info.data.get("direction", "both"))
            if problem:
                raise ValueError(problem)
        return value


def execution_of(settings: Mapping) -> Execution:
    """``Execution(**settings)``, refused values raising one :class:`SpecError` that names
    each key (``execution.fees: Input should be ...``)."""
    if isinstance(settings, Execution):
        return settings
    try:
        return Execution(**settings)
    except ValidationError as err:
        raise SpecError("; ".join(refusals(err, Execution, "execution"))) from None


def benchmark_returns(close: np.ndarray) -> np.ndarray:
    """Buy-and-hold returns of ``close``: ``b_0 = 0``, ``b_t = close_t / close_(t-1) - 1``."""
    out = np.zeros(close.shape[0])
    out[1:] = close[1:] / close[:-1] - 1.0
    return out


def pack_xp(execution: Execution, ppy: float, bench: np.ndarray) -> np.ndarray:
    """The ``xp`` vector (shape (N_XP,), float64) the kernels read their settings from,
    for a run over every bar (:func:`span_xp` narrows it to a window)."""
    xp = np.empty(N_XP)
    xp[XP_NEXT_OPEN] = 1.0 if execution.fill == "next_open" else 0.0
    xp[XP_FEE_RATE] = execution.fees
    xp[XP_FIXED_FEE] = execution.fixed_fee
    xp[XP_SLIPPAGE] = execution.slippage
    xp[XP_INIT_CASH] = execution.init_cash
    xp[XP_PPY] = ppy
    xp[XP_SUM_B] = bench.sum()
    xp[XP_SUM_B2] = (bench * bench).sum()
    xp[XP_ALLOW_LONG] = 1.0 if execution.direction in ("long", "both") else 0.0
    xp[XP_ALLOW_SHORT] = 1.0 if execution.direction in ("short", "both") else 0.0
    xp[XP_FUNDING] = 1.0 if execution.funding else 0.0
    return span_xp(xp, bench, 0, len(bench))


def span_xp(xp: np.ndarray, bench: np.ndarray, start: int, end: int) -> np.ndarray:
    """``xp`` for a run over bars ``[start, end)`` only: a copy with the bounds and the
    benchmark sums of those bars, whose first return counts as 0 (as the first bar of a
    run: there is no close before it in the run)."""
    if not 0 <= start < end <= len(bench):
        raise ValueError(f"need 0 <= start < end <= {len(bench)}, got [{start}, {end})")
    xp = xp.copy()
    held = bench[start + 1:end]
    xp[XP_START] = start
    xp[XP_END] = end
    xp[XP_SUM_B] = held.sum()
    xp[XP_SUM_B2] = (held * held).sum()
    return xp


def stop_matrix(execution: Execution, params: Mapping[str, np.ndarray],
                n_combos: int) -> np.ndarray:
    """Per-combo stops, shape (n_combos, N_STOPS), float64; 0 where there is none.

    A stop given in ``params`` (a grid axis) takes one value per combo; otherwise
    the execution's scalar applies to every combo. Both at once is refused.
    """
    out = np.zeros((n_combos, N_STOPS))
    for column, name in enumerate(STOP_PARAMS):
        scalar = getattr(execution, name)
        if name in params:
            if scalar is not None:
                raise SpecError(f"{name} is both an execution setting and a grid axis; "
                                f"keep one")
            values = np.asarray(params[name], dtype=np.float64)
            for value in np.unique(values):
                problem = check_stop(name, value, execution.direction)
                if problem:
                    raise SpecError(f"grid.{problem}")
            out[:, column] = values
        elif scalar is not None:
            out[:, column] = scalar
    return out
