"""The spec's ``walk_forward`` section: window lengths in bars or durations, and the
windows they make.

:class:`WalkForwardSpec` is the section; :func:`bars_of` turns a length into bars and
:func:`window_bounds` lists the windows (docs/EXECUTION.md, "Walk-forward windows").
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from ...datasets.timeframes import timeframe_seconds
from ...errors import DataError, SpecError

__all__ = ["BOUND_NAMES", "DURATION_PATTERN", "WalkForwardSpec", "bars_of", "window_bounds"]

#: A window length given as a duration: a positive count and a unit, ``d`` (days), ``w``
#: (weeks), ``M`` (months: ``year_days / 12`` days) or ``y`` (years: ``year_days`` days).
DURATION_PATTERN = re.compile(r"^([1-9][0-9]*)(d|w|M|y)$")

#: The bounds of each window, bar indices (end exclusive) and times (first and last bar).
BOUND_NAMES = ("train_start", "train_end", "test_start", "test_end")

_LENGTH_HELP = ("a positive number of bars, or a duration: a positive count and d (days), "
                "w (weeks), M (months) or y (years), e.g. 730d, 26w, 6M, 2y")


def _check_length(value: Any) -> int | str:
    """A window length as given (int bars or duration string), or ValueError."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if value >= 1:
            return int(value)
    elif isinstance(value, str) and DURATION_PATTERN.match(value):
        return value
    raise ValueError(f"expected {_LENGTH_HELP}; got {value!r}")


def bars_of(length: int | str, timeframe: str, year_days: float, *,
            key: str = "walk_forward") -> int:
    """A window length in bars of ``timeframe``.

    An int is a number of bars. A duration ``"<n>d"``, ``"<n>w"``, ``"<n>M"`` or
    ``"<n>y"`` (n a positive integer) is ``n`` calendar days, ``7 n`` days,
    ``n * year_days / 12`` days or ``n * year_days`` days, each day being
    ``86400 / timeframe_seconds(timeframe)`` bars; the result is rounded to the nearest
    bar (halves up) and refused when below one bar.

    Parameters
    ----------
    length : int or str
    timeframe : str
        The bars' timeframe, e.g. ``"1h"`` (:func:`barsweep.datasets.timeframe_seconds`).
    year_days : float
        Days in a year (``data.year_days``): 365, or 252 for equities' trading days.
    key : str
        The spec key that starts a refusal's message (``walk_forward.train: ...``); ""
        for none (a caller that names the key itself).

    Returns
    -------
    int
        Bars, >= 1.

    Raises
    ------
    SpecError
        A length that is neither form, or less than one bar of the timeframe.

    Examples
    --------
    >>> bars_of("2y", "1d", 252), bars_of("6M", "1d", 252), bars_of("730d", "1h", 365)
    (504, 126, 17520)
    """
    where = f"{key}: " if key else ""
    try:
        length = _check_length(length)
    except ValueError as err:
        raise SpecError(f"{where}{err}") from None
    if isinstance(length, int):
        return length
    try:
        bars_per_day = 86_400 / timeframe_seconds(timeframe)
    except DataError as err:
        raise SpecError(f"{where}{err}") from None
    count, unit = DURATION_PATTERN.match(length).groups()
    days = int(count) * {"d": 1.0, "w": 7.0, "M": year_days / 12.0, "y": year_days}[unit]
    bars = math.floor(days * bars_per_day + 0.5)
    if bars < 1:
        raise SpecError(f"{where}{length!r} is {days * bars_per_day:.3g} bars of "
                        f"{timeframe} bars, less than one; give a longer duration")
    return bars


class WalkForwardSpec(BaseModel):
    """The spec's ``walk_forward`` section: window lengths and whether train is anchored.

    ``train``, ``test`` and ``step`` are each a positive number of bars or a duration
    (:func:`bars_of`); ``step`` defaults to ``test`` (test windows that tile the data).
    Window w trains on ``[s_w, s_w + train)`` and tests on ``[s_w + train, s_w + train +
    test)``, ``s_w = w * step``; ``anchored`` makes every train window start at bar 0.

    Examples
    --------
    >>> spec = WalkForwardSpec(train="2y", test="6M")
    >>> spec.step, spec.lengths("1d", 252)
    ('6M', (504, 126, 126))
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    train: int | str
    test: int | str
    step: int | str | None = None  # never None once made: test's when not given
    anchored: bool = False

    @model_validator(mode="before")
    @classmethod
    def _step_is_test(cls, value: Any) -> Any:
        if isinstance(value, dict) and value.get("step") is None and "test" in value:
            return {**value, "step": value["test"]}
        return value

    @field_validator("train", "test", "step", mode="before")
    @classmethod
    def _length(cls, value: Any) -> int | str | None:
        return None if value is None else _check_length(value)

    def lengths(self, timeframe: str, year_days: float) -> tuple[int, int, int]:
        """``(train, test, step)`` in bars (:func:`bars_of`)."""
        return tuple(bars_of(getattr(self, k), timeframe, year_days, key=f"walk_forward.{k}")
                     for k in ("train", "test", "step"))

    def bounds(self, n_bars: int, timeframe: str, year_days: float) -> np.ndarray:
        """The windows over ``n_bars`` bars (:func:`window_bounds`)."""
        return window_bounds(n_bars, *self.lengths(timeframe, year_days),
                             anchored=self.anchored)


def window_bounds(n_bars: int, train: int, test: int, step: int,
                  anchored: bool = False) -> np.ndarray:
    """Every walk-forward window that fits in ``n_bars`` bars.

    Window w trains on ``[s_w, s_w + train)`` and tests on ``[s_w + train, s_w + train +
    test)``, with ``s_w = w * step``; ``anchored``: its train window is ``[0, s_w +
    train)``. Windows are listed while their test end is ``<= n_bars``.

    Parameters
    ----------
    n_bars, train, test, step : int
        Positive counts of bars.
    anchored : bool

    Returns
    -------
    ndarray, shape (W, 4), int64
        ``[train_start, train_end, test_start, test_end]`` per window, ends exclusive.

    Raises
    ------
    SpecError
        A count that is not a positive integer, or no window fitting (one line naming
        ``walk_forward`` and the numbers).

    Examples
    --------
    >>> window_bounds(10, 4, 2, 2).tolist()
    [[0, 4, 4, 6], [2, 6, 6, 8], [4, 8, 8, 10]]
    >>> window_bounds(10, 4, 2, 2, anchored=True)[:, 0].tolist()
    [0, 0, 0]
    """
    for name, value in (("n_bars", n_bars), ("train", train), ("test", test), ("step", step)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
            raise SpecError(f"walk_forward: {name} must be a positive number of bars, "
                            f"got {value!r}")
    n_windows = (n_bars - train - test) // step + 1 if train + test <= n_bars else 0
    if n_windows < 1:
        raise SpecError(f"walk_forward: no window fits: train {train:,} + test {test:,} = "
                        f"{train + test:,} bars, the data has {n_bars:,}; shorten train or test "
                        f"or use more bars")
    start = np.arange(n_windows, dtype=np.int64) * step
    out = np.empty((n_windows, 4), dtype=np.int64)
    out[:, 0] = 0 if anchored else start
    out[:, 1] = start + train
    out[:, 2] = start + train
    out[:, 3] = start + train + test
    return out
