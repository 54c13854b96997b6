"""Counting a grid's valid combos without enumerating its box.

Each sub-box of the grid is first decided by interval arithmetic over its axes' least
and greatest values (:meth:`barsweep.pipeline.config.expr.Expr.truth`): kept whole, excluded
whole, or mixed. Mixed boxes are halved along their longest constrained axis, and only
small mixed boxes (at most :data:`LEAF_COMBOS` combos of the constrained axes) are
enumerated and masked. For the usual constraints (``fast < slow``, ``a + b <= c``) the
mixed boxes hug the boundary, so a 10^9-combo grid is counted by enumerating a few
million combos. A ``budget`` caps the work where a caller can do with an upper bound.
Boxes are decided many at a time with numpy and refined depth first, so memory stays
bounded whatever the grid's size.

:class:`ComboCounter` serves :class:`~barsweep.pipeline.config.grid.Grid`'s counting methods
(``classify``, ``block_counts``, ``estimate_valid``, ``count_valid``, ``has_valid``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from ...errors import SpecError
from .expr import Expr

__all__ = ["COUNT_BUDGET", "LEAF_COMBOS", "MAX_COUNTABLE", "ComboCounter", "CountedGrid"]

MAX_COUNTABLE = 2**62
"""Grids of more combos than this cannot be counted (int64 counts)."""

COUNT_BUDGET = 1 << 24
"""Work allowed to counting that may stop early with an upper bound: combos enumerated,
plus :data:`_BOX_WORK` per box decided; about a second here."""

LEAF_COMBOS = 256
"""Mixed boxes of at most this many combos (of the constrained axes) are enumerated."""

_BOX_WORK = 8  # a box decided by bounds costs about as much as this many combos masked
_BATCH = 4096  # boxes decided at once
_ENUMERATE = 1 << 18  # combos enumerated at once
_TABLE_MAX = 1 << 16  # longest unsorted axis given a min/max table (else reduceat)


class _Budget(Exception):
    """The counting budget ran out."""


class CountedGrid(Protocol):
    """What counting reads of a grid (:class:`~barsweep.pipeline.config.grid.Grid` is one)."""

    axes: tuple[tuple[str, np.ndarray], ...]
    constraints: tuple[Expr, ...]

    @property
    def names(self) -> tuple[str, ...]: ...

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def size(self) -> int: ...

    def mask(self, values: Mapping[str, np.ndarray]) -> np.ndarray: ...

    def blocks_per_axis(self, chunks: Sequence[int]) -> tuple[int, ...]: ...


class ComboCounter:
    """Counts a grid's valid combos box by box, within `budget` (None: no limit).

    Boxes are index ranges ``[start, stop)`` over the axes the constraints read, as
    int64 arrays of shape ``(k, n_read)``; the other axes only multiply (a box's
    ``weight``). Owners are the blocks the boxes belong to.
    """

    def __init__(self, grid: CountedGrid, budget: int | None) -> None:
        if grid.size > MAX_COUNTABLE:
            raise SpecError(f"the grid has {grid.size:,} combos, more than can be counted "
                            f"({MAX_COUNTABLE:,}); shrink it")
        self.grid = grid
        names = frozenset().union(*(e.names for e in grid.constraints))
        self.read = [i for i, name in enumerate(grid.names) if name in names]
        self.free = [i for i, name in enumerate(grid.names) if name not in names]
        self.bounds = [_AxisBounds(grid.axes[i][1]) for i in self.read]
        self.budget = budget
        self.work = 0

    def spend(self, work: int) -> None:
        self.work += work
        if self.budget is not None and self.work > self.budget:
            raise _Budget

    def decide(self, starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(always, never)`` of every constraint together over boxes ``(k, n_read)``."""
        k = len(starts)
        bounds = {self.grid.names[i]: b.of(starts[:, j], stops[:, j])
                  for j, (i, b) in enumerate(zip(self.read, self.bounds, strict=True))}
        always, never = np.ones(k, dtype=bool), np.zeros(k, dtype=bool)
        for expr in self.grid.constraints:
            a, n = expr.truth(bounds)
            always &= np.broadcast_to(a, (k,))
            never |= np.broadcast_to(n, (k,))
        return always, never

    def enumerate(self, starts: np.ndarray, stops: np.ndarray) -> np.ndarray:
        """Valid combos of each (small) box ``(k, n_read)``, by masking its combos."""
        lens = stops - starts
        sizes = np.prod(lens, axis=1)
        out = np.empty(len(starts), dtype=np.int64)
        first = 0
        while first < len(starts):  # groups of at most _ENUMERATE combos
            last = first + max(1, int(np.searchsorted(
                np.cumsum(sizes[first:]), _ENUMERATE, side="right")))
            group = slice(first, last)
            n = sizes[group]
            self.spend(int(n.sum()))
            box = np.repeat(np.arange(len(n)), n)
            local = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
            values = {}
            for j in reversed(range(len(self.read))):
                length = lens[group, j][box]
                index = starts[group, j][box] + local % length
                local //= length
                name, axis = self.grid.axes[self.read[j]]
                values[name] = axis[index]
            keep = self.grid.mask(values) if values else np.broadcast_to(
                self.grid.mask({}), box.shape)  # constraints of constants only
            keep = keep.astype(np.int64)
            out[group] = np.add.reduceat(keep, np.cumsum(n) - n)
            first = last
        return out

    def refine(self, starts, stops, weights, owners, counts, exact) -> None:
        """Add the valid combos of mixed boxes ``(k, n_read)``, times their weights, to
        ``counts[owners]``: small boxes are enumerated, others halved and their halves
        decided, depth first. When the budget runs out, every box still on the stack
        counts as its size and its owner is marked inexact."""
        stack = [(starts, stops, weights, owners, True)]  # the last item: known mixed
        try:
            while stack:
                starts, stops, weights, owners, mixed = stack[-1]  # popped once handled
                if not mixed:
                    self.spend(_BOX_WORK * len(starts))
                    always, never = self.decide(starts, stops)
                    stack.pop()
                    sizes = np.prod(stops - starts, axis=1)
                    np.add.at(counts, owners[always], sizes[always] * weights[always])
                    unknown = ~(always | never)
                    if unknown.any():
                        stack.append((starts[unknown], stops[unknown], weights[unknown],
                                      owners[unknown], True))
                    continue
                small = np.prod(stops - starts, axis=1) <= LEAF_COMBOS
                found = self.enumerate(starts[small], stops[small]) if small.any() else None
                stack.pop()
                if found is not None:
                    np.add.at(counts, owners[small], found * weights[small])
                big = ~small
                if big.any():
                    stack.extend((*half, False) for half in
                                 _halves(starts[big], stops[big], weights[big], owners[big]))
        except _Budget:
            for starts, stops, weights, owners, _ in stack:
                sizes = np.prod(stops - starts, axis=1)
                np.add.at(counts, owners, sizes * weights)
                exact[owners] = False

    def count_blocks(self, chunks: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        grid = self.grid
        per_axis = grid.blocks_per_axis(chunks)
        n_blocks = math.prod(per_axis)
        exact = np.ones(n_blocks, dtype=bool)
        if not grid.constraints:
            return self.box_sizes(np.arange(n_blocks), per_axis, chunks), exact
        counts = np.zeros(n_blocks, dtype=np.int64)
        shape = np.array(grid.shape, dtype=np.int64)
        chunk = np.array(chunks, dtype=np.int64)
        for first in range(0, n_blocks, _BATCH):  # every block decided by its bounds
            ids = np.arange(first, min(first + _BATCH, n_blocks))
            position = np.stack(np.unravel_index(ids, per_axis), axis=1) if chunks else (
                np.zeros((len(ids), 0), dtype=np.int64))
            starts = position * chunk
            stops = np.minimum(starts + chunk, shape)
            weights = np.prod((stops - starts)[:, self.free], axis=1)
            starts, stops = starts[:, self.read], stops[:, self.read]
            always, never = self.decide(starts, stops)
            sizes = np.prod(stops - starts, axis=1) * weights
            counts[ids[always]] = sizes[always]
            mixed = ~(always | never)
            if not mixed.any():
                continue
            if self.budget is not None and self.work >= self.budget:
                counts[ids[mixed]] = sizes[mixed]
                exact[ids[mixed]] = False
                continue
            self.refine(starts[mixed], stops[mixed], weights[mixed], ids[mixed], counts, exact)
        return counts, exact

    def box_sizes(self, ids, per_axis, chunks) -> np.ndarray:
        """The sizes of blocks `ids` (their edge blocks may be shorter)."""
        sizes = np.ones(len(ids), dtype=np.int64)
        if not chunks:
            return sizes
        position = np.unravel_index(ids, per_axis)
        for p, c, n in zip(position, chunks, self.grid.shape, strict=True):
            sizes *= np.minimum((p + 1) * c, n) - p * c
        return sizes

    def any_valid(self) -> bool:
        """Whether a valid combo exists; True also when the budget runs out first."""
        if not self.grid.constraints:
            return True
        start = np.zeros((1, len(self.read)), dtype=np.int64)
        stop = np.array([[self.grid.shape[i] for i in self.read]], dtype=np.int64)
        stack = [(start, stop)]
        try:
            while stack:
                starts, stops = stack.pop()
                self.spend(_BOX_WORK * len(starts))
                always, never = self.decide(starts, stops)
                if always.any():
                    return True
                mixed = ~never
                small = mixed & (np.prod(stops - starts, axis=1) <= LEAF_COMBOS)
                if small.any() and self.enumerate(starts[small], stops[small]).any():
                    return True
                big = mixed & ~small
                if big.any():
                    ones = np.ones(int(big.sum()), dtype=np.int64)
                    stack.extend((s, e) for s, e, _, _ in
                                 _halves(starts[big], stops[big], ones, ones))
        except _Budget:
            return True
        return False


def _halves(starts, stops, weights, owners) -> list[tuple]:
    """Each box cut in two across its longest axis, as batches of at most _BATCH boxes."""
    lens = stops - starts
    axis = np.argmax(lens, axis=1)
    rows = np.arange(len(starts))
    middle = starts[rows, axis] + lens[rows, axis] // 2
    low_stops, high_starts = stops.copy(), starts.copy()
    low_stops[rows, axis] = middle
    high_starts[rows, axis] = middle
    starts = np.concatenate([starts, high_starts])
    stops = np.concatenate([low_stops, stops])
    weights = np.concatenate([weights, weights])
    owners = np.concatenate([owners, owners])
    return [(starts[i:i + _BATCH], stops[i:i + _BATCH], weights[i:i + _BATCH],
             owners[i:i + _BATCH]) for i in range(0, len(starts), _BATCH)]


class _AxisBounds:
    """The least and greatest value of an axis over index ranges ``[start, stop)``.

    Sorted axes (every range) read their ends; others use a sparse table of minima
    and maxima (``log2(n)`` rows) when short, else ``reduceat`` over the ranges.
    """

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        steps = np.diff(values)
        self.order = 1 if (steps > 0).all() else -1 if (steps < 0).all() else 0
        self.table = None
        if self.order == 0 and len(values) <= _TABLE_MAX:
            lows, highs = [values], [values]
            width = 1
            while 2 * width <= len(values):
                lows.append(np.minimum(lows[-1][:-width], lows[-1][width:]))
                highs.append(np.maximum(highs[-1][:-width], highs[-1][width:]))
                width *= 2
            self.table = (lows, highs)

    def of(self, start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        values = self.values
        if self.order == 1:
            return values[start], values[stop - 1]
        if self.order == -1:
            return values[stop - 1], values[start]
        if self.table is not None:
            level = np.floor(np.log2(stop - start)).astype(np.int64)
            width = np.left_shift(1, level)
            lows, highs = self.table
            lo = np.empty(len(start), dtype=values.dtype)
            hi = np.empty(len(start), dtype=values.dtype)
            for k in np.unique(level):
                at = level == k
                a, b = start[at], stop[at] - width[at]
                lo[at] = np.minimum(lows[k][a], lows[k][b])
                hi[at] = np.maximum(highs[k][a], highs[k][b])
            return lo, hi
        return _reduce_ranges(values, start, stop)


def _reduce_ranges(values, start, stop) -> tuple[np.ndarray, np.ndarray]:
    """Min and max of ``values[start[i]:stop[i]]`` by reduceat, ranges taken in order of
    their start so that the gaps between them add up to at most ``len(values)``."""
    order = np.argsort(start, kind="stable")
    index = np.empty(2 * len(start), dtype=np.int64)
    index[0::2], index[1::2] = start[order], stop[order]
    extended = np.append(values, values[-1])  # stop may be len(values)
    lo = np.empty(len(start), dtype=values.dtype)
    hi = np.empty(len(start), dtype=values.dtype)
    lo[order] = np.minimum.reduceat(extended, index)[0::2]
    hi[order] = np.maximum.reduceat(extended, index)[0::2]
    return lo, hi
