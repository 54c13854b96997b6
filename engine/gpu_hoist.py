"""Indicator hoisting on the GPU: one thread per distinct indicator row.

Each indicator a strategy can name has a device *fill* here: a two-line adapter with one
signature, ``fill(high, low, close, args, out, s1, s2)``, that calls the CPU's own
allocation-free row function (``ema_row``, ``bbands_rows``, ...) with the row's
arguments (``args``, float64; periods cast back to int as the CPU passes them) and writes
the wanted output into ``out``; ``s1``/``s2`` receive a multi-output indicator's other
outputs. Nothing is computed twice in different code: the row functions are the ones
``barsweep.engine.indicators`` wraps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from numba import cuda, njit

from ..errors import SpecError
from .hoist import hoist, plan_rows
from .indicators import INDICATORS, _arg_names, bbands_rows, donchian_rows, rsi_row
from .indicators_ma import ema_row, macd_rows, sma_row, trix_row, trix_signal_row
from .strategies.base import Strategy

THREADS_PER_BLOCK = 128


@njit(cache=True)
def _ema(high, low, close, a, out, s1, s2):
    ema_row(close, int(a[0]), out)


@njit(cache=True)
def _sma(high, low, close, a, out, s1, s2):
    sma_row(close, int(a[0]), out)


@njit(cache=True)
def _rsi(high, low, close, a, out, s1, s2):
    rsi_row(close, int(a[0]), out)


@njit(cache=True)
def _trix(high, low, close, a, out, s1, s2):
    trix_row(close, int(a[0]), out)


@njit(cache=True)
def _trix_signal(high, low, close, a, out, s1, s2):
    trix_signal_row(close, int(a[0]), int(a[1]), out)


@njit(cache=True)
def _macd_line(high, low, close, a, out, s1, s2):
    macd_rows(close, int(a[0]), int(a[1]), int(a[2]), out, s1, s2)


@njit(cache=True)
def _macd_signal(high, low, close, a, out, s1, s2):
    macd_rows(close, int(a[0]), int(a[1]), int(a[2]), s1, out, s2)


@njit(cache=True)
def _macd_hist(high, low, close, a, out, s1, s2):
    macd_rows(close, int(a[0]), int(a[1]), int(a[2]), s1, s2, out)


@njit(cache=True)
def _bb_upper(high, low, close, a, out, s1, s2):
    bbands_rows(close, int(a[0]), a[1], out, s1, s2)


@njit(cache=True)
def _bb_middle(high, low, close, a, out, s1, s2):
    bbands_rows(close, int(a[0]), a[1], s1, out, s2)


@njit(cache=True)
def _bb_lower(high, low, close, a, out, s1, s2):
    bbands_rows(close, int(a[0]), a[1], s1, s2, out)


@njit(cache=True)
def _donchian_upper(high, low, close, a, out, s1, s2):
    donchian_rows(high, low, int(a[0]), out, s1)


@njit(cache=True)
def _donchian_lower(high, low, close, a, out, s1, s2):
    donchian_rows(high, low, int(a[0]), s1, out)


#: name -> (device fill, whether it writes scratch rows)
DEVICE_INDICATORS = {
    "ema": (_ema, False), "sma": (_sma, False), "rsi": (_rsi, False),
    "trix": (_trix, False), "trix_signal": (_trix_signal, False),
    "macd_line": (_macd_line, True), "macd_signal": (_macd_signal, True),
    "macd_hist": (_macd_hist, True),
    "bb_upper": (_bb_upper, True), "bb_middle": (_bb_middle, True),
    "bb_lower": (_bb_lower, True),
    "donchian_upper": (_donchian_upper, True), "donchian_lower": (_donchian_lower, True),
}

_KERNELS: dict[str, object] = {}


def hoist_kernel(name: str):
    """The CUDA kernel filling one row of indicator ``name`` per thread."""
    if name not in _KERNELS:
        fill = DEVICE_INDICATORS[name][0]

        @cuda.jit
        def kernel(high, low, close, args, first_row, table, scratch):
            i = cuda.grid(1)
            if i < args.shape[0]:
                j = 2 * i if scratch.shape[0] >= 2 * args.shape[0] else 0
                fill(high, low, close, args[i], table[first_row + i], scratch[j],
                     scratch[j + 1])

        _KERNELS[name] = kernel
    return _KERNELS[name]


def device_indicators(strategy: Strategy, bars: Mapping[str, np.ndarray],
                      params: Mapping[str, np.ndarray], n_combos: int, d_bars: tuple) -> tuple:
    """Hoist the block's indicator rows into a column-major device table.

    Every distinct ``(indicator, arguments)`` of the block is one row, computed by one
    thread; the table is column-major (at a bar, neighbouring rows are neighbours in
    memory: the sweep's warps read them coalesced). A strategy using an indicator
    without a device fill (``atr``, ``roc``, ``wma``, ``stoch``) is hoisted on the host
    instead and its table copied.

    Parameters
    ----------
    d_bars : tuple of device arrays
        ``(open, high, low, close, funding, benchmark)`` on the device.

    Returns
    -------
    (device table, shape (max(2, n_rows), n_bars); rows, shape (n_combos, n_slots) int64)
    """
    n_bars = len(bars["close"])
    if not all(s.name in DEVICE_INDICATORS for s in strategy.indicators):
        ind, rows = hoist(strategy, bars, params, n_combos)
        table = np.zeros((max(2, len(ind)), n_bars), order="F")
        table[: len(ind)] = ind
        return cuda.to_device(table), rows
    for spec in strategy.indicators:
        expected = _arg_names(INDICATORS[spec.name].fn)[len(INDICATORS[spec.name].inputs):]
        if len(spec.params) != len(expected):
            raise SpecError(f"strategy {strategy.name!r}: indicator {spec.name!r} takes "
                            f"{len(expected)} arguments {expected}, given {spec.params}")
    keys, rows = plan_rows(strategy, params, n_combos)
    launches = []  # (indicator name, argument rows, first table row): runs of one indicator
    for i, (name, args) in enumerate(keys):
        if launches and launches[-1][0] == name:
            launches[-1][1].append(args)
        else:
            launches.append((name, [args], i))
    # at least two rows: a one-row table would be typed C-contiguous, another kernel variant
    table = cuda.device_array((max(2, len(keys)), n_bars), order="F")
    for name, arg_rows, first in launches:
        args = np.array(arg_rows, dtype=np.float64)
        n = len(args)
        scratch = cuda.device_array((2 * n if DEVICE_INDICATORS[name][1] else 2, n_bars),
                                    order="F")
        blocks = max(1, math.ceil(n / THREADS_PER_BLOCK))
        hoist_kernel(name)[blocks, THREADS_PER_BLOCK](d_bars[1], d_bars[2], d_bars[3],
                                                      cuda.to_device(args), first, table,
                                                      scratch)
    return table, rows
