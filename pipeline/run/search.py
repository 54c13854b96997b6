"""A search run: drawn combos along one ``combo`` dim, run rung by rung.

The store of a search has dims ``(symbol, combo)``: the drawn combos in the order of
their flat position in the grid's box, each parameter a coordinate along ``combo``.
With walk-forward it has ``(symbol, window, sample, combo)``: the same drawn combos
searched in each window's train sample, as a grid's walk-forward store holds its box.

A *lane* is what a search ranks on its own: a symbol, or a symbol's window (lane ``s *
n_windows + w``). A block is one lane and one chunk of ``combo``; rung ``r``'s blocks
(flags ``done[(r * n_lanes + lane) * n_chunks + c]``, rung 0's first, as a grid
store's) run the combos of their chunk that reached rung ``r`` in that lane (``reach``,
written by the driver when it promotes), on the rung's span of the lane's bars (the most
recent bars of the symbol, or of the window's train sample), and overwrite those cells
with the rung's metrics, ``rung`` and ``bars_run``. Each cell thus ends with the
metrics of the last rung its combo ran; the last rung runs every bar of the lane, as a
grid run does, and in a window also its test sample (the combos that reach it: those a
walk-forward chooses among).

Promotion (:func:`promote`) keeps, per lane, the best ``1/eta`` of the combos that
ran a rung, ordered as ``rank`` orders them; it is written (``reach``, then the
``promoted`` attribute) before the next rung's blocks start, so that a killed search
resumes to the same store.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import zarr

from ...engine import BEST_WHEN_IDLE, LOWER_IS_BETTER
from ..config.model import Spec
from ..config.search import combo_values, draw, rung_sizes, rung_spans
from .blocks import BlockTask
from .kinds import accounts_of, spans_of
from .memory import block_bytes, fit_chunks, table_rows
from .order import rank_order
from .plan import auto_block_size, bars_refs
from .results import COMPUTED, EXCLUDED, PENDING, done_flags, update_attrs

#: The variables a search store holds beyond the metrics.
SEARCH_VARS = ("rung", "bars_run", "reach")


@dataclass(frozen=True)
class SearchPlan:
    """The combos a search evaluates and how its rungs cut them.

    ``positions``: the drawn combos' flat positions in the grid's box, ascending;
    ``values``: each parameter's value per combo; ``chunk``: combos per block;
    ``sizes``: the combos each rung runs per lane; ``spans[lane][r]``: the bars rung
    ``r`` runs in a lane (None: every bar); ``windows``: walk-forward's ``(W, 4)``
    train and test bounds (None: no windows, a lane is a symbol).
    """

    positions: np.ndarray
    values: dict
    chunk: int
    sizes: tuple[int, ...]
    spans: tuple[tuple[tuple[int, int] | None, ...], ...]
    n_symbols: int
    segments: int
    ppy: float
    store_id: str
    windows: np.ndarray | None = None

    @property
    def n_chunks(self) -> int:
        return -(-len(self.positions) // self.chunk)

    @property
    def n_windows(self) -> int:
        return 1 if self.windows is None else len(self.windows)

    @property
    def n_lanes(self) -> int:
        return self.n_symbols * self.n_windows

    @property
    def n_blocks(self) -> int:
        return len(self.sizes) * self.n_lanes * self.n_chunks

    @property
    def n_evaluated(self) -> int:
        """Combos evaluated per lane, every rung's counted."""
        return sum(self.sizes)

    def lane_spans(self, lane: int, rung: int) -> tuple[tuple[int, int], ...] | None:
        """The spans rung ``rung``'s blocks run in ``lane``: its span of the symbol's
        bars (None: every bar), or of the window's train bars, and on the last rung the
        window's test bars after them."""
        span = self.spans[lane][rung]
        if self.windows is None:
            return None if span is None else (span,)
        if rung < len(self.sizes) - 1:
            return (span,)
        _, _, start, end = self.windows[lane % self.n_windows].tolist()
        return (span, (start, end))



def plan_search(spec: Spec, symbol_bars: tuple[int, ...], n_threads: int,
                budget: int | None, ppy: float, store_id: str,
                chunk: int | None = None, windows: np.ndarray | None = None) -> SearchPlan:
    """Draw the search's combos and size its blocks: ``chunk`` combos (the store's,
    when resumed), else :func:`~.plan.auto_block_size`'s for the first rung's work,
    cut to ``budget`` bytes (:func:`~.memory.fit_chunks`). ``windows`` (walk-forward's
    ``(W, 4)`` bounds) searches each window's train bars (:func:`lane_spans`)."""
    search, grid = spec.search, spec.param_grid
    positions = draw(grid, search.first_rung(), search.seed,
                     "sobol" if search.method == "sobol" else "random")
    rungs = search.n_rungs
    spans = lane_spans(search, symbol_bars, windows)
    n_bars = max(symbol_bars)
    segments = spans_of(windows).segments(spec.analysis.pbo_segments) if rungs == 1 else 0
    if chunk is None:
        first = spans[0][0]
        chunk = auto_block_size(len(positions), (first[1] - first[0]) if first else n_bars,
                                n_threads)
        if budget is not None:
            strategy = spec.strategy_def
            lengths = dict(zip(grid.names, grid.shape, strict=True))
            table_bars = accounts_of(spec).table_bars(n_bars)  # a portfolio: each member's

            def cost(shape: tuple[int, ...]) -> int:
                box = {name: min(shape[0], n) for name, n in lengths.items()}
                return block_bytes(table_rows(strategy, box), table_bars, shape[0], 1,
                                   segments, len(lengths), len(strategy.indicators))
            chunk = fit_chunks(("combo",), (chunk,), cost, budget)[0]
    return SearchPlan(positions, combo_values(grid, positions), int(chunk),
                      rung_sizes(len(positions), search.eta, rungs), spans,
                      len(symbol_bars), segments, ppy, store_id, windows)


def lane_spans(search, symbol_bars: tuple[int, ...], windows: np.ndarray | None,
               ) -> tuple[tuple[tuple[int, int] | None, ...], ...]:
    """Each lane's rung spans (:func:`~..config.search.rung_spans`): over each symbol's
    bars, or, with walk-forward ``windows``, over each symbol's windows' train bars
    (the most recent of them, as bar indices of the symbol; the last rung all of them).

    >>> from barsweep.pipeline.config.search import SearchSpec
    >>> search = SearchSpec(method="halving", budget=10, eta=3, rungs=2)
    >>> lane_spans(search, (900,), np.array([[0, 300, 300, 400], [100, 400, 400, 500]]))
    (((200, 300), (0, 300)), ((300, 400), (100, 400)))
    """
    if windows is None:
        return tuple(rung_spans(search, n) for n in symbol_bars)
    lanes = []
    for _ in symbol_bars:
        for start, end, _, _ in windows.tolist():
            lanes.append(tuple((start + a, start + b) if span else (start, end)
                               for span in rung_spans(search, end - start)
                               for a, b in [span or (0, 0)]))
    return tuple(lanes)


def store_layout(plan: SearchPlan) -> dict:
    """The store's ``combo`` axis and parameter coordinates (``create_store``'s
    ``axes``, ``chunks``, ``coords``, ``extra`` and ``lead``: walk-forward's ``window``,
    one a block, and ``sample``)."""
    n = len(plan.positions)
    coords = {name: (("combo",), values) for name, values in plan.values.items()}
    coords["box_position"] = (("combo",), plan.positions)
    lead = spans_of(plan.windows).lead(1)
    return {"axes": (("combo", np.arange(n, dtype=np.int64)),), "chunks": (plan.chunk,),
            "coords": coords, "extra": SEARCH_VARS, "driver_vars": ("reach",), "lead": lead}


def rung_tasks(plan: SearchPlan, spec: Spec, out: str, rung: int, reach: np.ndarray,
               backend: str, fingerprint: dict | None, run_id: str,
               modules: tuple[str, ...]) -> tuple[list[BlockTask], list[int]]:
    """Rung ``rung``'s blocks: a task for each (lane, chunk) holding a combo whose
    ``reach`` (shape ``(lanes, combos)``, :func:`read_reach`) is at least ``rung``, and
    the ids of the blocks holding none. A window's block writes its train sample, and on
    the last rung its test sample too."""
    tasks, empty = [], []
    accounts = accounts_of(spec).accounts(bars_refs(spec, fingerprint, run_id))
    for lane in range(plan.n_lanes):
        s, w = divmod(lane, plan.n_windows)
        spans = plan.lane_spans(lane, rung)
        lead = ((slice(s, s + 1),) if plan.windows is None else
                (slice(s, s + 1), slice(w, w + 1), slice(0, len(spans))))
        for c in range(plan.n_chunks):
            block_id = (rung * plan.n_lanes + lane) * plan.n_chunks + c
            lo, hi = c * plan.chunk, min((c + 1) * plan.chunk, len(plan.positions))
            cells = np.flatnonzero(reach[lane, lo:hi] >= rung)
            if not len(cells):
                empty.append(block_id)
                continue
            axes = tuple((name, values[lo:hi][cells]) for name, values in plan.values.items())
            tasks.append(BlockTask(block_id, out, accounts[s], spec.strategy_ref, axes,
                                   (*lead, slice(lo, hi)), (), spec.execution,
                                   plan.ppy, modules, backend=backend,
                                   store_id=plan.store_id, spans=spans,
                                   segments=plan.segments, cells=cells, rung=rung))
    return tasks, empty


def lanes(array: np.ndarray) -> np.ndarray:
    """A search store's variable as ``(lanes, combos)``: ``(symbol, combo)`` as it is,
    ``(symbol, window, sample, combo)`` at the train sample (a view)."""
    return array if array.ndim == 2 else array[:, :, 0, :].reshape(-1, array.shape[-1])


def read_reach(out: str) -> np.ndarray:
    """The highest rung each combo reached, per lane (0 where never promoted)."""
    reach = lanes(zarr.open_group(out, mode="r")["reach"][:])
    return np.where(np.isnan(reach), 0, reach).astype(np.int64)


def promote(out: str, rung: int, size: int, by: str) -> None:
    """Promote, per lane, the best ``size`` combos that ran rung ``rung - 1`` (by
    ``by``, ordered as ``rank`` orders them; combos whose ``by`` is NaN never) to rung
    ``rung``: written into ``reach``, then the ``promoted`` attribute."""
    group = zarr.open_group(out, mode="r+")
    stored = group["reach"][:]
    reach = lanes(stored).copy()
    ran, score = lanes(group["rung"][:]) == rung - 1, lanes(group[by][:])
    ruined, traded = lanes(group["ruined"][:]) == 1.0, lanes(group["n_trades"][:]) > 0.0
    ascending = by in LOWER_IS_BETTER
    idle_wins = ascending or by in BEST_WHEN_IDLE
    for lane in range(reach.shape[0]):
        candidates = np.flatnonzero(ran[lane] & ~np.isnan(score[lane]))
        order = rank_order(score[lane][candidates], ascending, idle_wins=idle_wins,
                           ruined=ruined[lane][candidates], traded=traded[lane][candidates])
        reach[lane, candidates[order[:size]]] = rung
    if stored.ndim == 2:
        stored = reach
    else:
        stored[:, :, 0, :] = reach.reshape(stored.shape[0], stored.shape[1], -1)
    group["reach"][:] = stored
    update_attrs(out, {"promoted": rung})


def mark_empty(out: str, block_ids: list[int]) -> None:
    """Flag a rung's blocks that hold no promoted combo (never computed)."""
    if block_ids:
        done = zarr.open_group(out, mode="r+")["done"]
        flags = done[:]
        flags[np.asarray(block_ids)] = EXCLUDED
        done[:] = flags


def run_rungs(plan: SearchPlan, spec: Spec, out: str, promoted: int,
              compute_rung: Callable[[int, list[BlockTask]], list],
              tasks_of: Callable[[int, np.ndarray], tuple[list[BlockTask], list[int]]],
              say: Callable[[str], None] | None) -> list:
    """Every rung in turn: promote into it (unless the store already did, ``promoted``),
    then compute its pending blocks with ``compute_rung(rung, tasks)``. Returns every
    block's report."""
    reports = []
    for rung, size in enumerate(plan.sizes):
        if rung > promoted:
            promote(out, rung, size, spec.search.by)
        tasks, empty = tasks_of(rung, read_reach(out))
        mark_empty(out, empty)
        flags = done_flags(out)
        todo = [t for t in tasks if flags[t.block_id] == PENDING]
        if say is not None and len(plan.sizes) > 1:
            bars = rung_bars(plan, rung, spec.data.symbols)
            done = sum(flags[t.block_id] == COMPUTED for t in tasks)
            say(f"rung {rung + 1} of {len(plan.sizes)}: "
                f"{rung_combos(out, rung, size, spec.search.by, lane_names(plan, spec))} "
                f"on {bars}"
                + (f" ({done} of {len(tasks)} blocks already done)" if done else ""))
        reports += compute_rung(rung, todo)
    return reports


def rung_bars(plan: SearchPlan, rung: int, symbols) -> str:
    """The bars rung ``rung`` runs, for its header: every bar, the last N (the same on
    every symbol), or each symbol's (symbols of different lengths); in walk-forward
    windows, of each window's train sample."""
    spans = [lane[rung] for lane in plan.spans]
    if plan.windows is not None:
        counts = sorted({b - a for a, b in spans})
        what = (f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,} to {counts[-1]:,}")
        if rung == len(plan.sizes) - 1:
            return f"each window's train bars ({what}), then its test bars"
        return f"the last {what} bars of each window's train bars"
    if all(span is None for span in spans):
        return "every bar"
    counts = [span[1] - span[0] if span else None for span in spans]
    if len(set(counts)) == 1:
        return f"the last {counts[0]:,} bars"
    return "the last " + ", ".join(f"{'every' if c is None else f'{c:,}'} ({s})"
                                   for c, s in zip(counts, symbols, strict=True)) + " bars"


def lane_names(plan: SearchPlan, spec: Spec) -> list[str]:
    """Each lane for people: its symbol, or its symbol and window."""
    symbols = accounts_of(spec).store_symbols(spec.data.symbols, {})[0]
    if plan.windows is None:
        return list(symbols)
    return [f"{symbol} window {w}" for symbol in symbols for w in range(plan.n_windows)]


def rung_combos(out: str, rung: int, size: int, by: str, symbols) -> str:
    """The combos rung ``rung`` runs, counted in the store: ``size`` per symbol, or, where
    fewer were promoted (a combo whose ``by`` is NaN in the rung before, most often one
    that made no trade there, is never promoted), how many of ``size`` and why.

    Read from ``reach`` and the metrics the unpromoted combos keep (those of their last
    rung), so a resumed search says the same. ``symbols`` names the lanes
    (:func:`lane_names`)."""
    group = zarr.open_group(out, mode="r")
    reach = read_reach(out)
    per = "per symbol" if all(" window " not in s for s in symbols) else "per window"
    promoted = (reach >= rung).sum(axis=1)
    if rung == 0 or (promoted == size).all():
        return f"{size:,} combos {per}"
    left = reach == rung - 1  # ran the rung before, not promoted: its metrics kept
    undefined = left & np.isnan(lanes(group[by][:]))
    no_trade = (undefined & (lanes(group["n_trades"][:]) == 0)).sum(axis=1)
    other = undefined.sum(axis=1) - no_trade
    if (promoted == promoted[0]).all() and (no_trade == no_trade[0]).all() and (
            other == other[0]).all():
        n, idle, rest = f"{promoted[0]:,}", f"{no_trade[0]:,}", f"{other[0]:,}"
    else:
        def each(counts):
            return ", ".join(f"{c:,} ({s})" for c, s in zip(counts, symbols, strict=True))
        n, idle, rest = each(promoted), each(no_trade), each(other)
    why = [f"{idle} made no trade in rung {rung}, so had no {by} to rank by"
           if no_trade.any() else "", f"{rest} had no {by} in rung {rung}" if other.any() else ""]
    why_text = "; ".join(w for w in why if w)
    return f"{n} of {size:,} combos {per} promoted" + (f" ({why_text})" if why_text else "")


def search_attrs(spec: Spec, plan: SearchPlan) -> dict:
    """The store attributes that say what the search was."""
    search = spec.search
    return {"search_method": search.method, "search_seed": search.seed,
            "search_budget": int(search.budget), "search_by": search.by,
            "search_eta": search.eta, "search_rungs": search.n_rungs,
            "n_evaluated": plan.n_evaluated * plan.n_lanes, "promoted": 0,
            "rung_sizes": list(plan.sizes), "search_params": list(plan.values)}


def box_size_text(n: int) -> str:
    """A box's combos for a line: exact below a trillion, else as a power of ten."""
    return f"{n:,}" if n < 10 ** 12 else f"~10^{math.log10(n):.1f}"
