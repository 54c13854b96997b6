"""Indicators with TA-Lib's conventions, as numba kernels, and the one registry that
hoists them on the CPU and on a GPU.

Each kernel takes float64 arrays and scalars and returns new float64 arrays of the
same length, NaN through the warm-up, and names the TA-Lib call it equals (the test
oracle). Like the TA-Lib Python wrapper, a kernel starts at the first bar where all
its inputs are non-NaN. Inputs are validated bars: finite, positive prices. A
period below 1 gives all NaN (kernels never raise); where TA-Lib refuses a period
of 1 (RSI, BBANDS, STDDEV, MAX/MIN, MACD's fast and slow) the kernels give the
formula's plain value (STDDEV's is 0, MAX's and MIN's the series itself).

The kernels live in :mod:`barsweep.engine.indicators.ma` (the moving averages and
what is built from them: SMA, EMA, WMA, TRIX, MACD) and
:mod:`barsweep.engine.indicators.osc` (oscillators and ranges: RSI, ROC, STOCH,
Bollinger bands, STDDEV, ATR, MAX/MIN, Donchian) and are re-exported here: import every indicator
from this module. This module holds :data:`INDICATORS`, each name's CPU kernel and
device fill (the allocation-free row function the GPU hoists it with), and
:func:`compute_indicator`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np
from numba import njit

from ...errors import SpecError
from .ma import (
    ema,
    ema_row,
    macd,
    macd_rows,
    sma,
    sma_row,
    trix,
    trix_row,
    trix_signal,
    trix_signal_row,
    wma,
)
from .osc import (
    atr,
    bbands,
    bbands_rows,
    donchian,
    donchian_rows,
    highest,
    highest_row,
    lowest,
    lowest_row,
    roc,
    rsi,
    rsi_row,
    stdev,
    stdev_row,
    stoch,
)

__all__ = [
    "INDICATORS",
    "IndicatorFn",
    "atr",
    "bbands",
    "compute_indicator",
    "donchian",
    "ema",
    "highest",
    "lowest",
    "macd",
    "roc",
    "rsi",
    "sma",
    "stdev",
    "stoch",
    "trix",
    "trix_signal",
    "wma",
]


# Device fills: ``fill(high, low, close, args, out, s1, s2)`` writes one row of an
# indicator into ``out`` with the kernel's own row function; ``args`` holds the kernel's
# arguments as float64 (periods cast back to int, as the CPU passes them); ``s1``/``s2``
# receive a multi-output kernel's other outputs.


@njit(cache=True)
def _ema_fill(high, low, close, a, out, s1, s2):
    ema_row(close, int(a[0]), out)


@njit(cache=True)
def _sma_fill(high, low, close, a, out, s1, s2):
    sma_row(close, int(a[0]), out)


@njit(cache=True)
def _rsi_fill(high, low, close, a, out, s1, s2):
    rsi_row(close, int(a[0]), out)


@njit(cache=True)
def _stdev_fill(high, low, close, a, out, s1, s2):
    stdev_row(close, int(a[0]), out)


@njit(cache=True)
def _highest_fill(high, low, close, a, out, s1, s2):
    highest_row(close, int(a[0]), out)


@njit(cache=True)
def _lowest_fill(high, low, close, a, out, s1, s2):
    lowest_row(close, int(a[0]), out)


@njit(cache=True)
def _trix_fill(high, low, close, a, out, s1, s2):
    trix_row(close, int(a[0]), out)


@njit(cache=True)
def _trix_signal_fill(high, low, close, a, out, s1, s2):
    trix_signal_row(close, int(a[0]), int(a[1]), out)


@njit(cache=True)
def _macd_line_fill(high, low, close, a, out, s1, s2):
    macd_rows(close, int(a[0]), int(a[1]), int(a[2]), out, s1, s2)


@njit(cache=True)
def _macd_signal_fill(high, low, close, a, out, s1, s2):
    macd_rows(close, int(a[0]), int(a[1]), int(a[2]), s1, out, s2)


@njit(cache=True)
def _macd_hist_fill(high, low, close, a, out, s1, s2):
    macd_rows(close, int(a[0]), int(a[1]), int(a[2]), s1, s2, out)


@njit(cache=True)
def _bb_upper_fill(high, low, close, a, out, s1, s2):
    bbands_rows(close, int(a[0]), a[1], out, s1, s2)


@njit(cache=True)
def _bb_middle_fill(high, low, close, a, out, s1, s2):
    bbands_rows(close, int(a[0]), a[1], s1, out, s2)


@njit(cache=True)
def _bb_lower_fill(high, low, close, a, out, s1, s2):
    bbands_rows(close, int(a[0]), a[1], s1, s2, out)


@njit(cache=True)
def _donchian_upper_fill(high, low, close, a, out, s1, s2):
    donchian_rows(high, low, int(a[0]), out, s1)


@njit(cache=True)
def _donchian_lower_fill(high, low, close, a, out, s1, s2):
    donchian_rows(high, low, int(a[0]), s1, out)


@dataclass(frozen=True)
class IndicatorFn:
    """An indicator a strategy can hoist: the kernel, the bar columns it reads, its
    output, and its device fill.

    ``fn(*[bars[c] for c in inputs], *args)`` computes it on the CPU; ``output``
    indexes the tuple a multi-output kernel returns, None for a single-output kernel.
    ``fill(high, low, close, args, out, s1, s2)`` computes the same row on a GPU
    (:mod:`barsweep.engine.gpu.hoist`) with the row function ``fn`` wraps; None where
    there is none (the GPU hoists such an indicator on the host).
    """

    fn: Callable
    inputs: tuple[str, ...]
    output: int | None = None
    fill: Callable | None = None

    @property
    def arg_names(self) -> tuple[str, ...]:
        """The names of the kernel's arguments after its inputs (``args``)."""
        return _arg_names(self.fn)[len(self.inputs):]

    @property
    def scratch(self) -> bool:
        """Whether the device fill writes the scratch rows ``s1``/``s2`` (the other
        outputs of a multi-output kernel)."""
        return self.output is not None


_CLOSE = ("close",)
_HLC = ("high", "low", "close")
_HL = ("high", "low")

INDICATORS: dict[str, IndicatorFn] = {
    "sma": IndicatorFn(sma, _CLOSE, fill=_sma_fill),
    "ema": IndicatorFn(ema, _CLOSE, fill=_ema_fill),
    "wma": IndicatorFn(wma, _CLOSE),
    "rsi": IndicatorFn(rsi, _CLOSE, fill=_rsi_fill),
    "trix": IndicatorFn(trix, _CLOSE, fill=_trix_fill),
    "trix_signal": IndicatorFn(trix_signal, _CLOSE, fill=_trix_signal_fill),
    "roc": IndicatorFn(roc, _CLOSE),
    "stdev": IndicatorFn(stdev, _CLOSE, fill=_stdev_fill),
    "highest": IndicatorFn(highest, _CLOSE, fill=_highest_fill),
    "lowest": IndicatorFn(lowest, _CLOSE, fill=_lowest_fill),
    "atr": IndicatorFn(atr, _HLC),
    "macd_line": IndicatorFn(macd, _CLOSE, 0, _macd_line_fill),
    "macd_signal": IndicatorFn(macd, _CLOSE, 1, _macd_signal_fill),
    "macd_hist": IndicatorFn(macd, _CLOSE, 2, _macd_hist_fill),
    "bb_upper": IndicatorFn(bbands, _CLOSE, 0, _bb_upper_fill),
    "bb_middle": IndicatorFn(bbands, _CLOSE, 1, _bb_middle_fill),
    "bb_lower": IndicatorFn(bbands, _CLOSE, 2, _bb_lower_fill),
    "stoch_k": IndicatorFn(stoch, _HLC, 0),
    "stoch_d": IndicatorFn(stoch, _HLC, 1),
    "donchian_upper": IndicatorFn(donchian, _HL, 0, _donchian_upper_fill),
    "donchian_lower": IndicatorFn(donchian, _HL, 1, _donchian_lower_fill),
}


def compute_indicator(name: str, bars: Mapping[str, np.ndarray], args: tuple) -> np.ndarray:
    """Compute one registered indicator on a symbol's bars.

    Parameters
    ----------
    name : str
        A key of :data:`INDICATORS`.
    bars : mapping of column name to ndarray, shape (n_bars,)
        Must hold the indicator's ``inputs`` columns.
    args : tuple
        The kernel's arguments after its inputs, in order: ints for periods, a
        float for ``k`` of the Bollinger bands.

    Returns
    -------
    ndarray, shape (n_bars,), float64
        The indicator, or the selected output of a multi-output kernel.

    Raises
    ------
    SpecError
        For an unknown name, a missing column or the wrong number of arguments.

    Examples
    --------
    >>> import numpy as np
    >>> close = np.linspace(1.0, 2.0, 40)
    >>> bars = {"close": close}
    >>> hist = compute_indicator("macd_hist", bars, (12, 26, 9))
    >>> hist.shape, int(np.isnan(hist).sum())
    ((40,), 33)
    """
    indicator = INDICATORS.get(name)
    if indicator is None:
        raise SpecError(f"unknown indicator {name!r}; expected one of {sorted(INDICATORS)}")
    missing = [column for column in indicator.inputs if column not in bars]
    if missing:
        raise SpecError(f"indicator {name!r} reads columns {missing} that the bars lack")
    params = indicator.arg_names
    if len(args) != len(params):
        raise SpecError(
            f"indicator {name!r} takes {len(params)} arguments {tuple(params)}, got {args!r}"
        )
    columns = [np.asarray(bars[column], dtype=np.float64) for column in indicator.inputs]
    result = indicator.fn(*columns, *args)
    return result if indicator.output is None else result[indicator.output]


@cache  # inspect.signature costs ~6 us a call, ~10% of an EMA over 26k bars: once per kernel
def _arg_names(fn: Callable) -> tuple[str, ...]:
    """The parameter names of a registered kernel, inputs first."""
    return tuple(inspect.signature(getattr(fn, "py_func", fn)).parameters)
