"""Execution settings as a value, and their packing into the kernels' ``xp`` vector."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from barsweep.errors import SpecError

from . import simulate as sim

FILLS = ("close", "next_open")
DIRECTIONS = ("long",)


@dataclass(frozen=True)
class Execution:
    """How orders fill (DESIGN.md "Execution semantics").

    Parameters
    ----------
    fill : {"next_open", "close"}
        ``next_open`` (default, no look-ahead) fills a signal of bar t at bar t+1's open.
    fees : float
        Fraction of traded notional charged on entry and on exit.
    slippage : float
        Fraction by which each fill price moves against the trader.
    init_cash : float
        Starting equity.
    direction : {"long"}
        Only long positions in this version.
    """

    fill: str = "next_open"
    fees: float = 0.0
    slippage: float = 0.0
    init_cash: float = 10_000.0
    direction: str = "long"

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
        if not self.init_cash > 0.0:
            raise SpecError(f"execution.init_cash: expected > 0, got {self.init_cash!r}")


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
    xp[sim.XP_SLIPPAGE] = execution.slippage
    xp[sim.XP_INIT_CASH] = execution.init_cash
    xp[sim.XP_PPY] = ppy
    xp[sim.XP_SUM_B] = bench.sum()
    xp[sim.XP_SUM_B2] = (bench * bench).sum()
    return xp
