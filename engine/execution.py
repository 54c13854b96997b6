"""Execution settings as a value, and their packing into the kernels' arrays."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import SpecError
from . import simulate as sim

FILLS = ("close", "next_open")
DIRECTIONS = ("long", "short", "both")
#: Execution settings that may also be grid axes (swept like strategy parameters).
STOP_PARAMS = ("stop_loss", "take_profit", "trailing_stop")


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


@dataclass(frozen=True)
class Execution:
    """How orders fill (DESIGN.md "Execution semantics").

    Parameters
    ----------
    fill : {"next_open", "close"}
        ``next_open`` (default, no look-ahead) fills a signal of bar t at bar t+1's open.
    fees : float
        Fraction of traded notional charged on entry and on exit.
    fixed_fee : float
        Cash charged per order (entry and exit), in units of ``init_cash``.
    slippage : float
        Fraction by which each fill price moves against the trader.
    init_cash : float
        Starting equity.
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

    fill: str = "next_open"
    fees: float = 0.0
    fixed_fee: float = 0.0
    slippage: float = 0.0
    init_cash: float = 10_000.0
    direction: str = "long"
    stop_loss: float | None = None
    take_profit: float | None = None
    trailing_stop: float | None = None
    funding: bool = False

    def __post_init__(self) -> None:
        if self.fill not in FILLS:
            raise SpecError(f"execution.fill: expected one of {FILLS}, got {self.fill!r}")
        if self.direction not in DIRECTIONS:
            raise SpecError(
                f"execution.direction: expected one of {DIRECTIONS}, got {self.direction!r}"
            )
        for key in ("fees", "slippage"):
            value = getattr(self, key)
            if not 0.0 <= value < 1.0:
                raise SpecError(f"execution.{key}: expected 0 <= {key} < 1, got {value!r}")
        if not self.fixed_fee >= 0.0:
            raise SpecError(f"execution.fixed_fee: expected >= 0, got {self.fixed_fee!r}")
        if not self.init_cash > self.fixed_fee:
            raise SpecError(
                f"execution.init_cash: expected > 0 and > fixed_fee, got {self.init_cash!r}"
            )
        for key in STOP_PARAMS:
            value = getattr(self, key)
            if value is not None:
                problem = check_stop(key, value, self.direction)
                if problem:
                    raise SpecError(f"execution.{problem}")


def benchmark_returns(close: np.ndarray) -> np.ndarray:
    """Buy-and-hold returns of ``close``: ``b_0 = 0``, ``b_t = close_t / close_(t-1) - 1``."""
    out = np.zeros(close.shape[0])
    out[1:] = close[1:] / close[:-1] - 1.0
    return out


def pack_xp(execution: Execution, ppy: float, bench: np.ndarray) -> np.ndarray:
    """The ``xp`` vector (shape (N_XP,), float64) the kernels read their settings from."""
    xp = np.empty(sim.N_XP)
    xp[sim.XP_NEXT_OPEN] = 1.0 if execution.fill == "next_open" else 0.0
    xp[sim.XP_FEE_RATE] = execution.fees
    xp[sim.XP_FIXED_FEE] = execution.fixed_fee
    xp[sim.XP_SLIPPAGE] = execution.slippage
    xp[sim.XP_INIT_CASH] = execution.init_cash
    xp[sim.XP_PPY] = ppy
    xp[sim.XP_SUM_B] = bench.sum()
    xp[sim.XP_SUM_B2] = (bench * bench).sum()
    xp[sim.XP_ALLOW_LONG] = 1.0 if execution.direction in ("long", "both") else 0.0
    xp[sim.XP_ALLOW_SHORT] = 1.0 if execution.direction in ("short", "both") else 0.0
    xp[sim.XP_FUNDING] = 1.0 if execution.funding else 0.0
    return xp


def stop_matrix(execution: Execution, params: Mapping[str, np.ndarray],
                n_combos: int) -> np.ndarray:
    """Per-combo stops, shape (n_combos, N_STOPS), float64; 0 where there is none.

    A stop given in ``params`` (a grid axis) takes one value per combo; otherwise
    the execution's scalar applies to every combo. Both at once is refused.
    """
    out = np.zeros((n_combos, sim.N_STOPS))
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
