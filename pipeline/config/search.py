"""Search over a grid too big to enumerate: which combos a search evaluates, on how
many bars, pure.

A search draws distinct combos of the lazy grid (:func:`draw`: uniformly at random, or
along a scrambled Sobol sequence), respecting its constraints and never enumerating
its box: memory and time in proportion to the draw, whatever the box's size. The draw
depends only on the grid, the count and the seed.

Successive halving (:func:`rung_sizes`, :func:`rung_span`) runs its draw in rungs: rung
0 on the most recent ``1/eta**(rungs-1)`` of the bars, each later rung the best
``1/eta`` of the one before on ``eta`` times as many bars, the last on every bar. Each
rung then costs about the same combo-bars, so ``budget`` (combos evaluated in all, each
rung's counted by the share of the bars it runs) buys a first rung of ``budget *
eta**(rungs-1) / rungs`` combos.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, model_validator

from ...errors import SpecError
from .grid import Grid
from .sections import SECTION_CONFIG

__all__ = ["METHODS", "SearchSpec", "check_drawable", "draw", "rung_sizes", "rung_span",
           "rung_spans", "search_work", "too_big_search", "short_rung_problem",
           "unused_key_problem"]

#: Search methods beyond ``grid`` (every combo).
METHODS = ("random", "sobol", "halving")
#: The ``search`` keys each method reads besides ``method``; ``by`` also ranks the
#: dashboard's best combos of any run.
METHOD_KEYS = {"grid": ("by",), "random": ("budget", "seed", "by"),
               "sobol": ("budget", "seed", "by"),
               "halving": ("budget", "seed", "by", "eta", "rungs")}
#: The largest box a search draws from: flat positions are int64.
MAX_BOX = 1 << 62
#: Draw at most this many times the combos asked before giving up on the constraints.
MAX_DRAW_FACTOR = 64


class SearchSpec(BaseModel):
    """The spec's ``search`` section.

    ``method``: ``grid`` (default: every combo), ``random`` or ``sobol`` (``budget``
    distinct combos drawn from the grid), ``halving`` (successive halving over a random
    draw). ``by``: the metric halving promotes by (rank's ``--by`` choices, e.g.
    ``sharpe``, ``dsr`` not included: it needs every trial first). ``eta`` and
    ``rungs``: see the module.
    """

    model_config = SECTION_CONFIG

    method: Literal["grid", "random", "sobol", "halving"] = "grid"
    budget: int | None = Field(None, gt=0, strict=True)
    seed: int = Field(0, ge=0, strict=True)
    by: str = "sharpe"
    eta: int = Field(3, ge=2, strict=True)
    rungs: int = Field(4, ge=1, le=12, strict=True)

    @model_validator(mode="after")
    def _budget_given(self) -> SearchSpec:
        from ...engine import METRICS

        if self.method != "grid" and self.budget is None:
            raise ValueError(f"method {self.method} needs a budget: the combos it evaluates")
        if self.by not in METRICS:
            raise ValueError(f"by: unknown metric {self.by!r}; metrics: {', '.join(METRICS)}")
        return self

    def unused_key(self) -> str | None:
        """The first key given a value that ``method`` does not read (a default value, as
        a spec written out in full carries, is no such value), or None."""
        for name in ("budget", "seed", "eta", "rungs"):
            if (name not in METHOD_KEYS[self.method]
                    and getattr(self, name) != type(self).model_fields[name].default):
                return name
        return None

    @property
    def n_rungs(self) -> int:
        """The rungs this search runs: ``rungs`` for halving, else one."""
        return self.rungs if self.method == "halving" else 1

    def first_rung(self) -> int:
        """The combos drawn: ``budget``, or halving's first rung (see the module)."""
        if self.method != "halving":
            return int(self.budget)
        return max(1, math.floor(self.budget * self.eta ** (self.rungs - 1) / self.rungs))


def unused_key_problem(search: SearchSpec, grid: Grid) -> tuple[str, str] | None:
    """The key of ``search`` its method does not read and why it is refused, or None.

    >>> grid = Grid((("n", np.arange(5)),), ())
    >>> print(unused_key_problem(SearchSpec(method="grid", budget=100), grid)[1])
    method grid does not use it: it runs every combo (5 here); remove it, or choose
    method random, sobol or halving
    """
    key = search.unused_key()
    if key is None:
        return None
    users = [m for m, keys in METHOD_KEYS.items() if key in keys]
    what = (f"it runs every combo ({grid.size:,} here)" if search.method == "grid"
            else f"only {', '.join(users)} does")
    choices = ", ".join(users[:-1]) + f" or {users[-1]}" if len(users) > 1 else users[0]
    return (f"search.{key}", f"method {search.method} does not use it: {what}; remove it, "
                             f"or choose method {choices}")


def too_big_search(grid: Grid, search: SearchSpec, n_symbols: int,
                    max_combos: int) -> str | None:
    """Why a search of ``grid`` over ``n_symbols`` symbols is too large (its box, or
    the combos it draws past ``max_combos``), or None."""
    if grid.size > MAX_BOX:
        return (f"{grid.size:.3g} combos: over the {MAX_BOX:.3g} a search draws from; use "
                f"fewer values")
    total = search.first_rung() * n_symbols
    if total > max_combos:
        return (f"search: {total:,} combos drawn exceed run.max_combos ({max_combos:,}); "
                f"lower search.budget or raise run.max_combos")
    return None


#: The fewest bars a rung runs: a Sharpe needs two bar returns.
MIN_RUNG_BARS = 2


def short_rung_problem(search: SearchSpec, n_bars: int, warm: int) -> str | None:
    """Why a halving ``search`` over ``n_bars`` bars is refused: its rung 0 runs fewer
    bars than ``warm``, the bars the strategy's indicators take to warm up at the grid's
    largest values (at least :data:`MIN_RUNG_BARS`); None when it is not, or when the
    search runs no rungs on part of the bars.

    >>> print(short_rung_problem(SearchSpec(method="halving", budget=10, eta=2, rungs=12),
    ...                          2000, 40))
    rung 0 of 12 (eta 2) runs 1 bar of the 2,000, fewer than the 40 bars the indicators
    take to warm up; at eta 2, 6 rungs at most give it that many (rung 0 then runs 63
    bars): lower search.rungs or search.eta
    """
    rungs = search.n_rungs
    need = max(warm, MIN_RUNG_BARS)
    first = rung_span(n_bars, 0, search.eta, rungs)
    if first is None or first[1] - first[0] >= need:
        return None
    bars = first[1] - first[0]
    why = (f"the {need:,} bars the indicators take to warm up" if warm >= MIN_RUNG_BARS
           else f"the {need} bars a Sharpe needs")
    fits = [r for r in range(rungs - 1, 1, -1)
            if -(-n_bars // search.eta ** (r - 1)) >= need]
    if fits:
        hint = (f"at eta {search.eta}, {fits[0]} rungs at most give it that many (rung 0 "
                f"then runs {-(-n_bars // search.eta ** (fits[0] - 1)):,} bars)")
    elif n_bars >= need:
        hint = f"at eta {search.eta} no halving does (rungs 1 runs every bar)"
    else:
        hint = "the bars are fewer than that"
    return (f"rung 0 of {rungs} (eta {search.eta}) runs {bars:,} bar{'s' if bars > 1 else ''} "
            f"of the {n_bars:,}, fewer than {why}; {hint}: lower search.rungs or search.eta")


def rung_sizes(n_first: int, eta: int, rungs: int) -> tuple[int, ...]:
    """The combos each rung runs: ``n_first``, then ``ceil(n / eta)`` of the rung before.

    >>> rung_sizes(100, 3, 4)
    (100, 34, 12, 4)
    """
    sizes = [n_first]
    for _ in range(rungs - 1):
        sizes.append(-(-sizes[-1] // eta))
    return tuple(sizes)


def rung_span(n_bars: int, rung: int, eta: int, rungs: int) -> tuple[int, int] | None:
    """The bars rung ``rung`` runs: the most recent ``n_bars / eta**(rungs-1-rung)``
    (at least one), ``(start, n_bars)``; None for the last rung (every bar, as a grid
    run).

    >>> rung_span(900, 0, 3, 3), rung_span(900, 1, 3, 3), rung_span(900, 2, 3, 3)
    ((800, 900), (600, 900), None)
    """
    if rung >= rungs - 1:
        return None
    share = max(1, -(-n_bars // eta ** (rungs - 1 - rung)))
    return (n_bars - share, n_bars)


def rung_spans(search: SearchSpec, n_bars: int) -> tuple[tuple[int, int] | None, ...]:
    """The bars each rung of ``search`` runs on ``n_bars`` bars (:func:`rung_span`).

    >>> rung_spans(SearchSpec(method="halving", budget=10, eta=3, rungs=3), 900)
    ((800, 900), (600, 900), None)
    """
    return tuple(rung_span(n_bars, r, search.eta, search.n_rungs)
                 for r in range(search.n_rungs))


def search_work(search: SearchSpec, symbol_bars: Sequence[int]) -> tuple[tuple[int, ...], int]:
    """What ``search`` evaluates on symbols of ``symbol_bars`` bars: the combos each rung
    runs per symbol (the draw's :meth:`~SearchSpec.first_rung`, then
    :func:`rung_sizes`), and the combo-bars of every rung on every symbol. It depends
    on the spec alone: the draw's count, not which combos it draws.

    >>> search_work(SearchSpec(method="halving", budget=100, eta=3, rungs=3), (900,))
    ((300, 100, 34), 90600)
    >>> search_work(SearchSpec(method="random", budget=100), (900, 500))
    ((100,), 140000)
    """
    sizes = rung_sizes(search.first_rung(), search.eta, search.n_rungs)
    combo_bars = sum(n * ((span[1] - span[0]) if span else bars)
                     for bars in symbol_bars
                     for n, span in zip(sizes, rung_spans(search, bars), strict=True))
    return sizes, int(combo_bars)


def check_drawable(grid: Grid, n: int) -> None:
    """Refuse (SpecError, one line) drawing ``n`` combos from ``grid``: its box is over
    :data:`MAX_BOX`, or it holds fewer than ``n`` valid combos (counted exactly where
    the box is small enough to count)."""
    if grid.size > MAX_BOX:
        raise SpecError(f"search: the grid's {grid.size:.3g} combos are over the {MAX_BOX:.3g} "
                        f"a search draws from; use fewer values")
    valid, exact = grid.estimate_valid() if grid.size <= MAX_DRAW_FACTOR * n else (0, False)
    if exact and valid < n:
        raise SpecError(f"search: the grid holds {valid:,} valid combos, fewer than the "
                        f"{n:,} the search draws; run it as a grid (search.method: grid)")


def draw(grid: Grid, n: int, seed: int, method: str = "random") -> np.ndarray:
    """``n`` distinct combos of ``grid`` that meet its constraints, as flat positions
    in its box (C order), ascending.

    ``random``: uniform over the valid combos; ``sobol``: the cells of a scrambled
    Sobol sequence (``scipy.stats.qmc.Sobol``) over the box, first ones first. Combos
    are drawn in batches, the constraints checked on each: memory and time in
    proportion to ``n`` (times the share of the box the constraints exclude).

    Raises
    ------
    SpecError
        The box is over :data:`MAX_BOX`, or the grid holds fewer than ``n`` valid combos
        (or so few that drawing them fails): run it as a grid.
    """
    check_drawable(grid, n)
    source = _Sobol(grid, seed) if method == "sobol" else _Uniform(grid, seed)
    found = np.empty(0, dtype=np.int64)
    drawn = 0
    while len(found) < n:
        if drawn > MAX_DRAW_FACTOR * n + (1 << 16):
            raise SpecError(f"search: after {drawn:,} draws only {len(found):,} of {n:,} "
                            f"combos met the constraints; run it as a grid or loosen them")
        batch = source.next(max(1024, 2 * (n - len(found))))
        drawn += len(batch)
        batch = batch[grid.mask(_values(grid, batch))]
        found = _first_distinct(np.concatenate([found, batch]))[:n]
    return np.sort(found)


def combo_values(grid: Grid, positions: np.ndarray) -> dict[str, np.ndarray]:
    """Each parameter's value at flat box ``positions`` (as :meth:`Grid.combos`)."""
    return _values(grid, positions)


def _values(grid: Grid, positions: np.ndarray) -> dict[str, np.ndarray]:
    index = np.unravel_index(positions, grid.shape) if grid.axes else ()
    return {name: values[i] for (name, values), i in zip(grid.axes, index, strict=True)}


def _first_distinct(positions: np.ndarray) -> np.ndarray:
    """``positions`` without repeats, each kept where it first appears."""
    _, first = np.unique(positions, return_index=True)
    return positions[np.sort(first)]


class _Uniform:
    """Flat positions uniform over the box, from one generator seeded once."""

    def __init__(self, grid: Grid, seed: int) -> None:
        self.size = grid.size
        self.rng = np.random.default_rng([seed, 0x5EA4C4])

    def next(self, k: int) -> np.ndarray:
        return self.rng.integers(0, self.size, size=k, dtype=np.int64)


class _Sobol:
    """The box cells of a scrambled Sobol sequence, continued batch after batch."""

    def __init__(self, grid: Grid, seed: int) -> None:
        from scipy.stats import qmc

        self.shape = np.asarray(grid.shape, dtype=np.int64)
        self.sobol = qmc.Sobol(d=max(1, len(self.shape)), scramble=True,
                               rng=np.random.default_rng([seed, 0x50B01]))

    def next(self, k: int) -> np.ndarray:
        points = self.sobol.random(1 << max(0, math.ceil(math.log2(k))))  # balanced: 2^m
        if not len(self.shape):
            return np.zeros(len(points), dtype=np.int64)
        cells = np.minimum((points * self.shape).astype(np.int64), self.shape - 1)
        return np.ravel_multi_index(cells.T, tuple(self.shape)).astype(np.int64)
