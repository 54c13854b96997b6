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

import numpy as np

from ...engine.expr import Node, holds
from ...errors import SpecError
from .count import COUNT_BUDGET, MAX_COUNTABLE, ComboCounter
from .expr import Expr, check_names

__all__ = ["COUNT_BUDGET", "MAX_COUNTABLE", "Grid", "box_combos"]


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
        return holds(self.conditions, values)

    @property
    def conditions(self) -> tuple[Node, ...]:
        """The constraints' trees, which :func:`barsweep.engine.expr.holds` evaluates
        (what a block's task carries)."""
        return tuple(expr.node for expr in self.constraints)

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
