"""A kernel's inputs: the combos of a sweep made ready for a kernel, whichever runs it
(``sweep_cpu``, ``sweep_cuda`` on a GPU, ``backtest`` for one combo): the bars as the
kernels' read-only
:class:`Bars` record, the combos' parameters and stops as a :class:`Combos` record, the
execution settings as a :class:`~barsweep.engine.core.execution.RunSettings`, and the order
of the combos that keeps indicator rows in cache. ``strategy`` is a
:class:`~barsweep.engine.strategies.base.Strategy`, handed in (strategies stands above
core)."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ...errors import SpecError
from ..indicators.osc import atr
from .calendar import BarColumns, time_stamps
from .execution import (
    Execution,
    RunSettings,
    benchmark_returns,
    execution_columns,
    over_span,
    run_settings,
    split_combo,
)
from .hoist import param_matrix

BAR_COLUMNS = ("open", "high", "low", "close")


class Bars(NamedTuple):
    """The bars as the kernels and signals read them: ndarrays, shape (n_bars,),
    float64, read-only (a numba named tuple: ``bars.close`` or ``bars[3]``)."""

    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    funding: np.ndarray  # the funding rate of each bar (zeros without funding)
    bench: np.ndarray  # the benchmark (buy-and-hold) returns: 0, then close / prev close - 1


class Combos(NamedTuple):
    """What each combo of a block runs with, one row (or value) per combo: a numba named
    tuple of ndarrays, in the kernel's combo order.

    Attributes
    ----------
    rows : ndarray, shape (n_combos, n_slots), int64
        The combo's row of the indicator table for each of the strategy's slots.
    fparams : ndarray, shape (n_combos, n_params), float64
        The strategy's parameters, in the strategy's order.
    stop_loss, take_profit, trailing_stop : ndarray, shape (n_combos,), float64
        Fractions of the entry price (trailing: of the best price since); 0 = none.
    size_value : ndarray, shape (n_combos,), float64
        The value of the entry's size (``execution.size``; 1.0 for ``all``).
    leverage : ndarray, shape (n_combos,), float64
        What a size may buy over the cash, >= 1 (``execution.leverage``).
    entry_offset : ndarray, shape (n_combos,), float64
        The entry order's offset, a fraction of the close (0.0 at market).
    valid_bars : ndarray, shape (n_combos,), int64
        The bars a pending entry order waits (``execution.UNTIL_CANCELLED``: no limit).
    """

    rows: np.ndarray
    fparams: np.ndarray
    stop_loss: np.ndarray
    take_profit: np.ndarray
    trailing_stop: np.ndarray
    size_value: np.ndarray
    leverage: np.ndarray
    entry_offset: np.ndarray
    valid_bars: np.ndarray

    def take(self, index) -> Combos:
        """The combos ``index`` (an order, a slice) of this block, as a Combos."""
        return Combos(*(field[index] for field in self))


def bar_tuple(bars: Mapping[str, np.ndarray], funding: bool = False) -> Bars:
    """:class:`Bars` for the kernels: open, high, low, close, funding rate, benchmark
    returns.

    Columns are C-contiguous float64 (no copy when they already are) and read-only
    (a memory map's columns are; others are handed over as read-only views), so that
    every caller meets the one compiled specialisation of a kernel. The funding column
    is zeros unless ``funding`` is asked for, and then it must exist.
    """
    cols = tuple(np.ascontiguousarray(bars[c], dtype=np.float64) for c in BAR_COLUMNS)
    if funding:
        if "funding_rate" not in bars:
            raise SpecError("execution.funding is on but the bars have no funding_rate column; "
                            "import bars with a funding_rate column or set funding: false")
        rate = np.ascontiguousarray(bars["funding_rate"], dtype=np.float64)
    else:
        rate = np.zeros(len(cols[3]))
    return Bars(*(read_only(c) for c in (*cols, rate, benchmark_returns(cols[3]))))


@dataclass(frozen=True)
class KernelInputs:
    """What every backend's kernel takes besides the indicators, for a set of combos.

    ``bars`` is :func:`bar_tuple`'s; ``strategy_params`` the strategy's own parameter
    arrays (the execution axes removed); ``fparams`` (n_combos, n_params) and
    ``per_combo`` (each of EXECUTION_AXES, shape (n_combos,)) are float64 (``valid_bars``
    int64), in the
    combos' given order; ``settings`` what ``simulate`` reads of a run over every bar;
    ``volume`` the bars' volume column (None without one), for indicators that read it;
    ``time`` their time stamps, int64 ns since the epoch (None without), for the calendar.
    """

    bars: Bars
    n_combos: int
    strategy_params: dict[str, np.ndarray]
    fparams: np.ndarray
    per_combo: dict[str, np.ndarray]
    settings: RunSettings
    volume: np.ndarray | None = None
    time: np.ndarray | None = None

    @functools.cached_property
    def columns(self) -> BarColumns:
        """The bar columns by name, as indicators read them: the prices, the volume
        when the bars have one, and the calendar (``hour``, ``weekday``...,
        :mod:`~.calendar`) when they have time stamps, computed once when first read."""
        columns = dict(zip(BAR_COLUMNS, self.bars[:4]))
        if self.volume is not None:
            columns["volume"] = self.volume
        return BarColumns(columns, self.time)

    def combos(self, rows: np.ndarray, order: np.ndarray | None = None) -> Combos:
        """The kernel's :class:`Combos`, with their indicator ``rows`` (shape (n_combos,
        n_slots)): in the combos' given order, or in ``order`` (its own arrays,
        not copies, when that is the same order)."""
        combos = Combos(rows, self.fparams, **self.per_combo)
        return combos if order is None or is_identity(order) else combos.take(order)

    def runs(self, spans: Sequence[tuple[int, int]] | None) -> list[RunSettings]:
        """The settings of each run: one per span ``(start, end)`` of the bars (a
        walk-forward window), or one over every bar when ``spans`` is None."""
        if spans is None:
            return [self.settings]
        return [over_span(self.settings, self.bars.bench, start, end) for start, end in spans]


def atr_column(bars: Bars, window: int) -> np.ndarray | None:
    """TA-Lib's ATR of ``window`` bars, read-only, for the settings in ATRs; None for a
    ``window`` of 0 (no setting reads it: nothing computed)."""
    return read_only(atr(bars.high, bars.low, bars.close, window)) if window else None


def prepare_inputs(strategy, bars: Mapping[str, np.ndarray],
                  params: Mapping[str, np.ndarray], execution: Execution,
                  ppy: float) -> KernelInputs:
    """Validate and pack the bars, the combos' parameters and the execution settings as
    a kernel takes them (see :func:`~barsweep.engine.dispatch.sweep_block`)."""
    kernel_bars = bar_tuple(bars, execution.funding)
    if len(kernel_bars.close) == 0:
        raise SpecError("the bars are empty; metrics need at least one bar")
    n_combos = combo_count(params)
    strategy_params, swept = split_combo(params)
    return KernelInputs(kernel_bars, n_combos, strategy_params,
                 param_matrix(strategy, strategy_params, n_combos),
                 execution_columns(execution, swept, n_combos),
                 run_settings(execution, ppy, kernel_bars.bench, atr_column(kernel_bars,
                                                                            execution.atr_bars)),
                 None if "volume" not in bars else read_only(
                     np.ascontiguousarray(bars["volume"], dtype=np.float64)),
                 time_stamps(bars))


def locality_order(rows: np.ndarray) -> np.ndarray:
    """An order of the combos in which consecutive ones share indicator rows.

    Sorted by the slot with the most distinct rows first (then the others), so a run of
    combos streams one row of that slot from memory while the other slots' few rows stay
    in cache. For ema_cross blocks of 62 fast x 2,000 slow periods this keeps the
    kernel's working set in L2/L3 instead of streaming 210 kB per combo.

    Parameters
    ----------
    rows : ndarray, shape (n_combos, n_slots), int64

    Returns
    -------
    ndarray, shape (n_combos,), int64: a permutation of the combos.
    """
    return slot_order(rows, most_distinct_first=True)


def lane_order(rows: np.ndarray) -> np.ndarray:
    """The combos' order for a GPU's warps: the slot with the most distinct rows varies
    fastest, so the 32 lanes of a warp hold neighbouring values of the finest axis (the
    slow periods of an ema_cross grid, whose neighbours signal at nearly the same bars:
    the lanes branch alike) and share the other slots' rows (one broadcast load); at a
    bar their reads of the column-major indicator table are neighbouring addresses.
    ``benchmarks/warp_model.py`` costs it against :func:`locality_order`.

    Parameters
    ----------
    rows : ndarray, shape (n_combos, n_slots), int64

    Returns
    -------
    ndarray, shape (n_combos,), int64: a permutation of the combos.
    """
    return slot_order(rows, most_distinct_first=False)


def slot_order(rows: np.ndarray, most_distinct_first: bool) -> np.ndarray:
    """The combos sorted by their rows, slot by slot: the slots ordered by their number of
    distinct rows (most first, or fewest first), ties by slot; a stable sort."""
    n = rows.shape[0]
    if rows.shape[1] == 0 or n < 2:
        return np.arange(n)
    distinct = [np.count_nonzero(np.bincount(rows[:, k])) for k in range(rows.shape[1])]
    sign = -1 if most_distinct_first else 1
    keys = sorted(range(rows.shape[1]), key=lambda k: sign * distinct[k])
    key, width = np.zeros(n, dtype=np.int64), 1
    for k in keys:  # one integer per combo, ordered as the rows are: the slots' mixed radix
        size = int(rows[:, k].max()) + 1
        width *= size
        if width * n >= 1 << 62:
            return np.lexsort(tuple(rows[:, k] for k in reversed(keys)))
        key = key * size + rows[:, k]
    if np.all(key[1:] >= key[:-1]):  # a grid in this order already
        return np.arange(n)
    shift = int(n - 1).bit_length()  # key and position in one integer: sorts stably
    return np.sort((key << shift) | np.arange(n)) & ((1 << shift) - 1)


def is_identity(order: np.ndarray) -> bool:
    """Whether the permutation ``order`` leaves every combo in its place."""
    n = len(order)
    return n == 0 or (order[0] == 0 and order[-1] == n - 1
                      and bool(np.all(order[1:] > order[:-1])))


def combo_count(params: Mapping[str, np.ndarray]) -> int:
    """Number of combos in a block: the common length of the value arrays (1 if none)."""
    lengths = {len(np.atleast_1d(v)) for v in params.values()}
    if len(lengths) > 1:
        raise SpecError(f"parameter arrays differ in length: {sorted(lengths)}")
    return lengths.pop() if lengths else 1


def read_only(array: np.ndarray) -> np.ndarray:
    """``array`` itself when it is read-only, else a read-only view of it."""
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array
