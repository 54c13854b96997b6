"""What a generated rule signal calls at each bar: small ``@njit`` functions, inlined.

A value before the first bar is NaN, and a NaN compares false (``ne`` included), so a
rule reading the past of its first bars, or an indicator in its warm-up, does not fire.
"""

from __future__ import annotations

from math import nan

from numba import njit

from ..core.simulate import cross_above, cross_below

__all__ = ["at", "at_row", "cross_above", "cross_below", "fmax", "fmin", "held", "ne", "price",
           "side"]


@njit(inline="always", cache=True)
def at(series, i):
    """``series[i]``, NaN before the first bar (``i < 0``)."""
    return series[i] if i >= 0 else nan


@njit(inline="always", cache=True)
def at_row(table, row, i):
    """``table[row, i]``, NaN before the first bar (``i < 0``)."""
    return table[row, i] if i >= 0 else nan


@njit(inline="always", cache=True)
def fmin(a, b):
    """The smaller of two numbers, NaN when either is NaN (as ``numpy.minimum``)."""
    return a if a <= b else (b if b < a else nan)


@njit(inline="always", cache=True)
def fmax(a, b):
    """The larger of two numbers, NaN when either is NaN (as ``numpy.maximum``)."""
    return a if a >= b else (b if b > a else nan)


@njit(inline="always", cache=True)
def ne(a, b):
    """``a != b``, false when either is NaN."""
    return a < b or a > b


@njit(inline="always", cache=True)
def side(position):
    """The position as 1.0 (long), -1.0 (short) or 0.0 (flat)."""
    return 1.0 if position > 0.0 else (-1.0 if position < 0.0 else 0.0)


@njit(inline="always", cache=True)
def held(position, t, entry_bar):
    """Bars since the open position's fill (0 when flat)."""
    return t - entry_bar if position != 0.0 else 0


@njit(inline="always", cache=True)
def price(position, entry_price):
    """The open position's entry fill price, NaN when flat."""
    return entry_price if position != 0.0 else nan
