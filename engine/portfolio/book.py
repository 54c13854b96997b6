"""What each portfolio combo's account reads besides its strategy's rows: its settings
(one value per combo) and the tables they index (hoisted once per run), as one numba
named tuple passed through every portfolio kernel."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .weights import Sizing


class Book(NamedTuple):
    """A portfolio run's per-combo settings and the tables they index.

    Attributes
    ----------
    max_positions : ndarray, shape (n_combos,), int64
        At most this many positions open at once; 0 for no limit.
    lookback : ndarray, shape (n_combos,), int64
        The combo's index into the lookbacks of ``sizing``.
    rebalance : ndarray, shape (n_combos,), int64
        The combo's row of ``rebalance_bars``; -1 for never.
    sizing : Sizing
        The entries' weights and order (:mod:`barsweep.engine.portfolio.weights`).
    rebalance_bars : ndarray of bool, shape (n_periods, n_bars)
        The rebalance bars of each period (:mod:`barsweep.engine.portfolio.periods`).
    """

    max_positions: np.ndarray
    lookback: np.ndarray
    rebalance: np.ndarray
    sizing: Sizing
    rebalance_bars: np.ndarray

    def take(self, index) -> Book:
        """The book of the combos ``index`` (a slice or an index array) of this one."""
        return self._replace(max_positions=self.max_positions[index],
                             lookback=self.lookback[index], rebalance=self.rebalance[index])
