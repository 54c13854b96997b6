"""A grid axis as a spec gives it: a list of distinct numbers or a range ``{start, stop,
step}`` (:data:`Axis`), validated, then expanded into the axis's values
(:func:`expand`), int64 for int parameters and float64 for the others.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Annotated, Any

import numpy as np
from pydantic import (
    AfterValidator,
    AllowInfNan,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    StrictFloat,
    StrictInt,
    Tag,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from ...errors import SpecError, refusals

__all__ = ["AXIS", "AXIS_TAGS", "MAX_AXIS_LEN", "Axis", "RangeSpec", "as_kind", "axis_values",
           "expand"]

MAX_AXIS_LEN = 1_000_000
"""The most values one axis may hold; more is surely a mistake in a range."""

_INT_LIMIT = 2**62  # the largest integer an int axis may hold, in magnitude

#: A number in a grid entry: an int or a finite float (bools and strings refused).
Number = StrictInt | Annotated[StrictFloat, AllowInfNan(False)]


def _range_problem(start, stop, step) -> str | None:
    """Why a range ``{start, stop, step}`` is refused, or None."""
    if step <= 0:
        return f"step must be > 0, got {step!r}"
    if start > stop:
        return f"start must be <= stop, got start={_shown(start)} > stop={_shown(stop)}"
    shown = f"start={_shown(start)}, stop={_shown(stop)}, step={_shown(step)}"
    if isinstance(stop - start, float) and not math.isfinite(stop - start):
        return f"the range {shown} is wider than float64 can hold"
    span = _span(start, stop, step)
    if not span + 1 <= MAX_AXIS_LEN:  # inf included
        count = f"{math.floor(span + 1e-9) + 1:,}" if span < 1e15 else (
            f"about {span:.3g}" if math.isfinite(span) else "too many")
        return (f"the range {shown} has {count} values; at most {MAX_AXIS_LEN:,} are "
                f"allowed (use a larger step)")
    if all(isinstance(x, int) for x in (start, stop, step)):
        return _int64_problem(start, stop)
    return None


class RangeSpec(BaseModel):
    """A grid axis given as ``{start, stop, step}``; `stop` is inclusive (within
    ``step * 1e-9`` for floats)."""

    model_config = ConfigDict(extra="forbid", frozen=True, from_attributes=True)

    start: Number
    stop: Number
    step: Number

    @model_validator(mode="after")
    def _spans(self) -> RangeSpec:
        problem = _range_problem(self.start, self.stop, self.step)
        if problem:
            raise ValueError(problem)
        return self


def _distinct(values: list) -> list:
    if not values:
        raise ValueError("the list of values is empty; give at least one value")
    if len(values) > MAX_AXIS_LEN:
        raise ValueError(f"{len(values)} values given; at most {MAX_AXIS_LEN} are allowed")
    seen = set()
    for v in values:
        if v in seen:
            raise ValueError(f"value {v!r} is given more than once")
        seen.add(v)
    problem = _int64_problem(*values) if all(isinstance(v, int) for v in values) else None
    if problem:
        raise ValueError(problem)
    return values


def _entry_tag(value: Any) -> str | None:
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping | RangeSpec) or all(
            hasattr(value, f) for f in ("start", "stop", "step")):
        return "range"
    return None


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


#: A grid entry, validated: a list of distinct numbers or a :class:`RangeSpec`.
Axis = Annotated[
    Annotated[list[Number], AfterValidator(_distinct), Tag("list")]
    | Annotated[RangeSpec, Tag("range")],
    Discriminator(
        _entry_tag,
        custom_error_type="grid_axis",
        custom_error_message="Input should be a list of numbers or a range {start, stop, step}",
    ),
    BeforeValidator(_plain),
]
#: The tags of Axis's members, which refusals leave out of keys (``grid.fast[1]``).
AXIS_TAGS = frozenset({"list", "range"})
AXIS = TypeAdapter(Axis)


def axis_values(spec_value, kind: str | None = None) -> np.ndarray:
    """Validate one grid entry of a spec (as :data:`Axis`) and expand it into the values
    of its axis (:func:`expand`).

    Raises
    ------
    SpecError
        On an empty list, duplicates, non-finite or non-numeric values, ``step <= 0``,
        ``start > stop``, non-integers for an int parameter, or more than
        :data:`MAX_AXIS_LEN` values.

    Examples
    --------
    >>> axis_values({"start": 2, "stop": 6, "step": 2})
    array([2, 4, 6])
    >>> axis_values({"start": 0.1, "stop": 0.3, "step": 0.1})
    array([0.1, 0.2, 0.3])
    """
    if kind not in ("int", "float", None):
        raise ValueError(f"kind must be 'int', 'float' or None, got {kind!r}")
    try:
        entry = AXIS.validate_python(spec_value)
    except ValidationError as err:
        raise SpecError("; ".join(refusals(err, RangeSpec, skip=AXIS_TAGS))) from None
    return expand(entry, kind)


def expand(entry: list | RangeSpec, kind: str | None = None) -> np.ndarray:
    """The values of an axis from its validated entry (:data:`Axis`).

    Parameters
    ----------
    entry : list of numbers or RangeSpec
    kind : {"int", "float", None}, default None
        The parameter's kind: int64 or float64 values. None infers int64 when every
        number given is an integer, float64 otherwise.

    Returns
    -------
    numpy.ndarray, shape (n,), int64 or float64
        Float ranges are rounded to 12 decimals (``0.1 * 3`` gives ``0.3``).

    Raises
    ------
    SpecError
        Where only the values tell: float steps too small to keep values apart, values
        that are not integers (or too large) for an int parameter.
    """
    if isinstance(entry, RangeSpec):
        values = _range_values(entry.start, entry.stop, entry.step, kind)
    elif all(isinstance(v, int) for v in entry):
        values = np.array(entry, dtype=np.int64)
    else:
        values = np.array(entry, dtype=np.float64)
    try:
        return as_kind(values, kind)
    except OverflowError:  # pragma: no cover - bounds are checked when validated
        raise SpecError("a value is too large for float64 (at most about 1.8e308)") from None


def _span(start, stop, step) -> float:
    """How many steps fit from `start` to `stop` (0 when one step is longer; inf when
    the integers are too large for a float)."""
    try:
        return 0 if step > stop - start else (stop - start) / step
    except OverflowError:
        return math.inf


def _range_values(start, stop, step, kind: str | None) -> np.ndarray:
    span = _span(start, stop, step)
    if all(isinstance(x, int) for x in (start, stop, step)) and kind != "float":
        return np.arange(start, start + 1 if span < 1 else stop + 1, min(step, 2**62),
                         dtype=np.int64)
    if span < 1:  # a step longer than the range: start alone
        return _rounded(np.array([start], dtype=np.float64))
    values = _rounded(np.arange(start, stop + step * 1e-9, step, dtype=np.float64))
    if np.any(np.diff(values) <= 0):
        raise SpecError(f"step {step!r} is too small: values collide at 12 decimals")
    return values


def _rounded(values: np.ndarray) -> np.ndarray:
    """`values` rounded to 12 decimals (``0.1 * 3`` gives ``0.3``); from 1e15 up, where
    float64 has no decimals left (and rounding would overflow), as they are."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.abs(values) < 1e15, np.round(values, 12), values)


def _int64_problem(*values: int) -> str | None:
    """Why integers are refused: beyond +-2**62, which int64 arithmetic could overflow."""
    largest = max(values, key=abs)
    if abs(largest) > _INT_LIMIT:
        return (f"values are too large for int64 (at most 2**62 in magnitude), "
                f"got {_shown(largest)}")
    return None


def _shown(value: int | float) -> str:
    """`value` for a message: integers of more than 24 digits abbreviated."""
    text = repr(value)
    if isinstance(value, numbers.Integral) and len(text) > 24:
        return f"{text[:6]}...({len(text.lstrip('-'))} digits)"
    return text


def as_kind(values: np.ndarray, kind: str | None) -> np.ndarray:
    if kind == "float":
        return values.astype(np.float64)
    if kind == "int" and values.dtype != np.int64:
        fractional = values[values != np.round(values)]
        if fractional.size:
            raise SpecError(f"values must be integers, got {fractional[0].item()!r}")
        problem = _int64_problem(*values.tolist())
        if problem:
            raise SpecError(problem)
        return values.astype(np.int64)
    return values
