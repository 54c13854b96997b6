"""Indicator hoisting on the GPU: one thread per distinct indicator row.

Each indicator that :data:`barsweep.engine.indicators.registry.INDICATORS` gives a device
*fill* (one signature, ``fill(high, low, close, args, out, s1, s2)``, calling the CPU's
own allocation-free row function: ``ema_row``, ``bbands_rows``, ...) is hoisted here, a
kernel per indicator; the others are hoisted on the host and their table copied. Nothing
is computed twice in different code: the row functions are the ones the CPU kernels
wrap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from numba import cuda

from ...errors import SpecError
from ..core.hoist import hoist, plan_rows
from ..core.inputs import Bars
from ..indicators.registry import INDICATORS
from ..strategies.base import Strategy

THREADS_PER_BLOCK = 128


#: The indicators the GPU hoists itself: those of INDICATORS with a device fill.
DEVICE_INDICATORS = tuple(name for name, ind in INDICATORS.items() if ind.fill is not None)


#: Cache: the CUDA hoisting kernel of each indicator, compiled once per process (seconds
#: each) rather than once per block.
_KERNELS: dict[str, object] = {}


def hoist_kernel(name: str):
    """The CUDA kernel filling one row of indicator ``name`` per thread."""
    if name not in _KERNELS:
        fill = INDICATORS[name].fill

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
                      params: Mapping[str, np.ndarray], n_combos: int, d_bars: Bars) -> tuple:
    """Hoist the block's indicator rows into a column-major device table.

    Every distinct ``(indicator, arguments)`` of the block is one row, computed by one
    thread; the table is column-major (at a bar, neighbouring rows are neighbours in
    memory: the sweep's warps read them coalesced). A strategy using an indicator
    without a device fill (``atr``, ``roc``, ``wma``, ``stoch``) is hoisted on the host
    instead and its table copied.

    Parameters
    ----------
    d_bars : Bars
        The bars on the device (:func:`barsweep.engine.gpu.sweep.device_bars`).

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
        expected = INDICATORS[spec.name].arg_names
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
        scratch = cuda.device_array((2 * n if INDICATORS[name].scratch else 2, n_bars),
                                    order="F")
        blocks = max(1, math.ceil(n / THREADS_PER_BLOCK))
        hoist_kernel(name)[blocks, THREADS_PER_BLOCK](d_bars.high, d_bars.low, d_bars.close,
                                                      cuda.to_device(args), first, table,
                                                      scratch)
    return table, rows
