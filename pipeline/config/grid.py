"""The parameter grid of a sweep: named axes, constraints, and their blocks.

A :class:`Grid` is the box of every combination of its axes' values (C order, the last
axis fastest), less the combos its constraints exclude. The box is never built whole:
blocks of it are selected with one slice per axis, and only a block's combos are
materialized (:meth:`Grid.combos`) and masked (:meth:`Grid.mask`).

Counting the combos the constraints keep never enumerates the box either: sub-boxes are
decided by interval bounds, kept or excluded whole, and only small mixed pieces are
masked (:mod:`barsweep.pipeline.config.count`).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
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
from .count import COUNT_BUDGET, MAX_COUNTABLE, ComboCounter
from .expr import Expr, check_names

__all__ = ["COUNT_BUDGET", "MAX_AXIS_LEN", "MAX_COUNTABLE", "Axis", "Grid", "RangeSpec",
           "axis_values", "expand"]

MAX_AXIS_LEN = 1_000_000
"""The most values one axis may hold; more is surely a mistake in a range."""

_INT_LIMIT = 2**62  # the largest integer an int axis may hold, in magnitude


@dataclass(frozen=True, eq=False)
class Grid:
    """The combos of a sweep: a box of named axes, less what constraints exclude.

    Parameters
    ----------
    axes : tuple of (str, numpy.ndarray)
        One ``(name, values)`` pair per parameter, in order; values are 1-D, int64 for
        integer parameters and float64 otherwise. They are stored read-only.
    constraints : tuple of Expr, default ()
        Conditions every valid combo meets; they may only read axis names.

    Examples
    --------
    >>> import numpy as np
    >>> from barsweep.pipeline.config.expr import parse_expr
    >>> grid = Grid((("fast", np.arange(2, 5)), ("slow", np.arange(3, 6))),
    ...             (parse_expr("fast < slow"),))
    >>> grid.shape, grid.size, grid.count_valid(), grid.classify((slice(0, 1), slice(1, 3)))
    ((3, 3), 9, 6, True)
    """

    axes: tuple[tuple[str, np.ndarray], ...]
    constraints: tuple[Expr, ...] = ()

    def __post_init__(self) -> None:
        axes = tuple((name, _frozen_axis(name, values)) for name, values in self.axes)
        names = [name for name, _ in axes]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise SpecError(f"grid axis {duplicated[0]!r} is given more than once")
        constraints = tuple(self.constraints)
        for expr in constraints:
            check_names(expr, names, what="constraint")
        object.__setattr__(self, "axes", axes)
        object.__setattr__(self, "constraints", constraints)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Grid):
            return NotImplemented
        return (
            self.names == other.names
            and all(
                a.dtype == b.dtype and np.array_equal(a, b)
                for (_, a), (_, b) in zip(self.axes, other.axes, strict=True)
            )
            and self.constraints == other.constraints
        )

    __hash__ = None

    @property
    def names(self) -> tuple[str, ...]:
        """The axis names, in order."""
        return tuple(name for name, _ in self.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        """The number of values of each axis; ``()`` when there are no parameters."""
        return tuple(len(values) for _, values in self.axes)

    @property
    def size(self) -> int:
        """The number of combos in the box, before constraints (1 with no axes)."""
        return math.prod(self.shape)

    def values(self, name: str) -> np.ndarray:
        """The values of axis `name`, shape ``(shape[i],)``."""
        for axis_name, values in self.axes:
            if axis_name == name:
                return values
        raise KeyError(f"no grid axis {name!r}; axes: {', '.join(self.names) or '(none)'}")

    def combos(self, index: tuple[slice, ...]) -> dict[str, np.ndarray]:
        """The parameter values of every combo of a sub-box, flattened in C order.

        Parameters
        ----------
        index : tuple of slice
            One slice per axis (``()`` when there are no axes).

        Returns
        -------
        dict of str to numpy.ndarray
            For each axis name, shape ``(n,)`` with ``n`` the product of the sliced
            lengths; the last axis varies fastest. Empty when there are no axes.

        Examples
        --------
        >>> import numpy as np
        >>> grid = Grid((("a", np.array([1, 2])), ("b", np.array([10, 20, 30]))))
        >>> grid.combos((slice(0, 2), slice(1, 3)))["b"]
        array([20, 30, 20, 30])
        """
        if len(index) != len(self.axes):
            raise ValueError(f"need {len(self.axes)} slices, one per axis; got {len(index)}")
        return box_combos(tuple((name, values[s]) for (name, values), s
                                in zip(self.axes, index, strict=True)))

    def mask(self, values: Mapping[str, np.ndarray]) -> np.ndarray:
        """Which combos meet every constraint.

        Parameters
        ----------
        values : mapping of str to numpy.ndarray
            Parameter values of ``n`` combos, each shape ``(n,)``, as :meth:`combos` gives.

        Returns
        -------
        numpy.ndarray of bool, shape (n,)
            All True when there are no constraints. With no values (a grid without
            axes) ``n`` is 1: the one combo of an empty box.
        """
        return constraint_mask(self.constraints, values)

    def chunks(self, block_size: int) -> tuple[int, ...]:
        """The chunk shape of blocks of at most `block_size` combos.

        Dims are filled from the last: each is taken whole while the product stays
        within `block_size`; the first that does not fit gets
        ``max(1, block_size // product)`` and all earlier dims get 1.

        Examples
        --------
        >>> import numpy as np
        >>> grid = Grid(tuple((n, np.arange(k)) for n, k in zip("abc", (7, 10, 10))))
        >>> grid.chunks(250), grid.chunks(1000), grid.chunks(50)
        ((2, 10, 10), (7, 10, 10), (1, 5, 10))
        """
        if isinstance(block_size, bool) or not isinstance(block_size, numbers.Integral):
            raise SpecError(f"block_size must be an integer, got {block_size!r}")
        if block_size < 1:
            raise SpecError(f"block_size must be > 0, got {block_size}")
        shape = self.shape
        chunks = [1] * len(shape)
        product = 1
        for dim in reversed(range(len(shape))):
            if product * shape[dim] <= block_size:
                chunks[dim] = shape[dim]
                product *= shape[dim]
            else:
                chunks[dim] = max(1, block_size // product)
                break
        return tuple(chunks)

    def n_blocks(self, chunks: Sequence[int]) -> int:
        """How many blocks of shape `chunks` tile the box."""
        return math.prod(self.blocks_per_axis(chunks))

    def blocks(self, chunks: Sequence[int]) -> Iterator[tuple[int, tuple[slice, ...]]]:
        """The blocks of shape `chunks` that tile the box, in C order.

        Yields
        ------
        block_id : int
            0, 1, ... ``n_blocks(chunks) - 1``.
        index : tuple of slice
            One slice per axis; blocks at the far edge of an axis may be shorter.

        Examples
        --------
        >>> import numpy as np
        >>> grid = Grid((("a", np.arange(3)),))
        >>> list(grid.blocks((2,)))
        [(0, (slice(0, 2, None),)), (1, (slice(2, 3, None),))]
        """
        counts = self.blocks_per_axis(chunks)
        shape = self.shape
        for block_id, position in enumerate(itertools.product(*(range(c) for c in counts))):
            yield (
                block_id,
                tuple(
                    slice(i * c, min((i + 1) * c, n))
                    for i, c, n in zip(position, chunks, shape, strict=True)
                ),
            )

    def classify(self, index: tuple[slice, ...]) -> bool | None:
        """Decide a sub-box from its axes' bounds alone, without enumerating it.

        Parameters
        ----------
        index : tuple of slice
            One slice (step 1) per axis, as :meth:`blocks` gives.

        Returns
        -------
        bool or None
            True if every combo of the sub-box meets every constraint, False if none
            does, None if the bounds cannot tell (the box is mixed, or the constraints
            are too involved to decide it this way).

        Examples
        --------
        >>> import numpy as np
        >>> from barsweep.pipeline.config.expr import parse_expr
        >>> grid = Grid((("fast", np.arange(2, 50)), ("slow", np.arange(10, 200))),
        ...             (parse_expr("fast < slow"),))
        >>> grid.classify((slice(0, 8), slice(0, 190))), grid.classify((slice(40, 48), slice(0, 5)))
        (True, False)
        """
        if len(index) != len(self.axes):
            raise ValueError(f"need {len(self.axes)} slices, one per axis; got {len(index)}")
        if not self.constraints:
            return True
        spans = [s.indices(len(v)) for (_, v), s in zip(self.axes, index, strict=True)]
        if any(step != 1 or stop <= start for start, stop, step in spans):
            raise ValueError(f"need non-empty slices of step 1, got {index}")
        counter = ComboCounter(self, budget=0)
        starts = np.array([[start for start, _, _ in spans]], dtype=np.int64)
        stops = np.array([[stop for _, stop, _ in spans]], dtype=np.int64)
        read = counter.read
        always, never = counter.decide(starts[:, read], stops[:, read])
        return True if always[0] else False if never[0] else None

    def block_counts(self, chunks: Sequence[int], *,
                     budget: int | None = COUNT_BUDGET) -> tuple[np.ndarray, np.ndarray]:
        """The combos each block of shape `chunks` keeps, exactly or as an upper bound.

        Every block is decided by its bounds (:meth:`classify`); mixed ones are refined
        (halved, then small pieces enumerated) while the work stays within `budget`.

        Parameters
        ----------
        chunks : sequence of int
            The block shape, as :meth:`chunks` gives.
        budget : int or None, default COUNT_BUDGET
            Combos to enumerate (plus a little per box decided) before the remaining
            mixed boxes count as their size; None counts exactly whatever it takes.

        Returns
        -------
        counts : numpy.ndarray of int64, shape (n_blocks,)
            In block-id order (:meth:`blocks`). 0 only when the block is proven to hold
            no valid combo.
        exact : numpy.ndarray of bool, shape (n_blocks,)
            Where ``counts`` is exact; elsewhere it is an upper bound.

        Examples
        --------
        >>> import numpy as np
        >>> from barsweep.pipeline.config.expr import parse_expr
        >>> grid = Grid((("a", np.arange(4)), ("b", np.arange(4))), (parse_expr("a < b"),))
        >>> grid.block_counts((2, 2))[0].tolist()
        [1, 4, 0, 1]
        """
        return ComboCounter(self, budget).count_blocks(tuple(chunks))

    def estimate_valid(self, *, budget: int | None = COUNT_BUDGET) -> tuple[int, bool]:
        """The number of valid combos and whether it is exact (else an upper bound),
        counted as :meth:`block_counts` counts one block: the whole box."""
        counts, exact = self.block_counts(self.shape, budget=budget)
        return int(counts[0]), bool(exact[0])

    def count_valid(self) -> int:
        """The exact number of combos that meet every constraint.

        The box is never built: see the module's description. Grids whose constraints
        interval bounds cannot decide (``a * a != 2 * b``, say) are enumerated in full,
        a piece at a time; :meth:`estimate_valid` stops early instead.
        """
        return self.estimate_valid(budget=None)[0]

    def has_valid(self, *, budget: int | None = COUNT_BUDGET) -> bool:
        """Whether any combo meets every constraint.

        False only when proven: every box excluded by its bounds or enumerated. When
        `budget` runs out first this answers True: a grid we cannot cheaply prove empty
        is let through (its blocks then find out, and are stored as NaN).
        """
        return ComboCounter(self, budget).any_valid()

    def blocks_per_axis(self, chunks: Sequence[int]) -> tuple[int, ...]:
        chunks = tuple(chunks)
        if len(chunks) != len(self.axes) or any(int(c) < 1 for c in chunks):
            raise ValueError(f"chunks must be {len(self.axes)} integers >= 1, got {chunks}")
        return tuple(-(-n // c) for n, c in zip(self.shape, chunks, strict=True))


def box_combos(axes: Sequence[tuple[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Every combo of the box spanned by ``axes`` (``(name, values)`` pairs), flattened
    in C order (the last axis fastest): what :meth:`Grid.combos` gives for a sub-box,
    and what a block's task computes from the axes slices it carries."""
    grids = np.meshgrid(*(values for _, values in axes), indexing="ij") if axes else []
    return {name: g.ravel() for (name, _), g in zip(axes, grids, strict=True)}


def constraint_mask(constraints: Sequence[Expr], values: Mapping[str, np.ndarray]) -> np.ndarray:
    """Which of the combos in ``values`` meet every constraint (see :meth:`Grid.mask`)."""
    n = len(next(iter(values.values()))) if values else 1
    keep = np.ones(n, dtype=bool)
    for expr in constraints:
        keep &= np.broadcast_to(expr.evaluate(values), (n,))
    return keep


# --------------------------------------------------------------------------- axis entries

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


def _frozen_axis(name: str, values) -> np.ndarray:
    """A read-only, 1-D, non-empty int64 or float64 copy of `values` (no copy if read-only)."""
    array = np.asarray(values)
    if array.ndim != 1 or array.size == 0:
        raise SpecError(f"grid axis {name!r} must be 1-D and non-empty, got shape {array.shape}")
    if array.dtype.kind in "iu":
        array = array.astype(np.int64, copy=False)
    elif array.dtype.kind == "f":
        array = array.astype(np.float64, copy=False)
    else:
        raise SpecError(f"grid axis {name!r} must hold numbers, got dtype {array.dtype}")
    if array.flags.writeable:
        array = array.copy()
        array.setflags(write=False)
    return array
