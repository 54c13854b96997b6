"""A search run: drawn combos along one ``combo`` dim, run rung by rung.

The store of a search has dims ``(symbol, combo)``: the drawn combos in the order of
their flat position in the grid's box, each parameter a coordinate along ``combo``. A
block is one symbol and one chunk of ``combo``; rung ``r``'s blocks (flags ``done[(r *
n_symbols + s) * n_chunks + c]``, rung 0's first, as a grid store's) run the combos of
their chunk that reached rung ``r`` (``reach``, written by the driver when it promotes),
on the rung's span of the bars, and overwrite those cells with the rung's metrics,
``rung`` and ``bars_run``. Each cell thus ends with the metrics of the last rung its
combo ran; the last rung runs every bar, as a grid run does.

Promotion (:func:`promote`) keeps, per symbol, the best ``1/eta`` of the combos that
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
from ..config.search import combo_values, draw, rung_sizes, rung_spans, search_work
from .blocks import BlockTask
from .estimate import size_line
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
    ``sizes``: the combos each rung runs per symbol; ``spans[s][r]``: the bars rung
    ``r`` runs on symbol ``s`` (None: every bar).
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

    @property
    def n_chunks(self) -> int:
        return -(-len(self.positions) // self.chunk)

    @property
    def n_blocks(self) -> int:
        return len(self.sizes) * self.n_symbols * self.n_chunks

    @property
    def n_evaluated(self) -> int:
        """Combos evaluated per symbol, every rung's counted."""
        return sum(self.sizes)



def plan_search(spec: Spec, symbol_bars: tuple[int, ...], n_threads: int,
                budget: int | None, ppy: float, store_id: str,
                chunk: int | None = None) -> SearchPlan:
    """Draw the search's combos and size its blocks: ``chunk`` combos (the store's,
    when resumed), else :func:`~.plan.auto_block_size`'s for the first rung's work,
    cut to ``budget`` bytes (:func:`~.memory.fit_chunks`)."""
    search, grid = spec.search, spec.param_grid
    positions = draw(grid, search.first_rung(), search.seed,
                     "sobol" if search.method == "sobol" else "random")
    rungs = search.n_rungs
    spans = tuple(rung_spans(search, n) for n in symbol_bars)
    n_bars = max(symbol_bars)
    if chunk is None:
        first = spans[0][0]
        chunk = auto_block_size(len(positions), (first[1] - first[0]) if first else n_bars,
                                n_threads)
        if budget is not None:
            strategy = spec.strategy_def
            lengths = dict(zip(grid.names, grid.shape, strict=True))
            segments = spec.analysis.pbo_segments if rungs == 1 else 0

            def cost(shape: tuple[int, ...]) -> int:
                box = {name: min(shape[0], n) for name, n in lengths.items()}
                return block_bytes(table_rows(strategy, box), n_bars, shape[0], 1,
                                   segments, len(lengths), len(strategy.indicators))
            chunk = fit_chunks(("combo",), (chunk,), cost, budget)[0]
    return SearchPlan(positions, combo_values(grid, positions), int(chunk),
                      rung_sizes(len(positions), search.eta, rungs), spans,
                      len(symbol_bars), spec.analysis.pbo_segments if rungs == 1 else 0,
                      ppy, store_id)


def search_size_line(spec: Spec, symbol_bars: tuple[int, ...], n_threads: int) -> str:
    """What a search evaluates, its store's size and its time on ``n_threads`` worker
    threads (:func:`~.estimate.size_line`), from the spec alone: the combos it draws per
    symbol, every rung's cells and combo-bars (:func:`~..config.search.search_work`),
    never the box it draws from."""
    sizes, combo_bars = search_work(spec.search, symbol_bars)
    n_symbols = len(symbol_bars)
    segments = spec.analysis.pbo_segments if spec.search.n_rungs == 1 else 0
    return size_line(sizes[0] * n_symbols, sum(sizes) * n_symbols, segments,
                     float(combo_bars), n_threads)


def store_layout(plan: SearchPlan) -> dict:
    """The store's ``combo`` axis and parameter coordinates (``create_store``'s
    ``axes``, ``chunks``, ``coords`` and ``extra``)."""
    n = len(plan.positions)
    coords = {name: (("combo",), values) for name, values in plan.values.items()}
    coords["box_position"] = (("combo",), plan.positions)
    return {"axes": (("combo", np.arange(n, dtype=np.int64)),), "chunks": (plan.chunk,),
            "coords": coords, "extra": SEARCH_VARS, "driver_vars": ("reach",)}


def rung_tasks(plan: SearchPlan, spec: Spec, out: str, rung: int, reach: np.ndarray,
               backend: str, fingerprint: dict | None, run_id: str,
               modules: tuple[str, ...]) -> tuple[list[BlockTask], list[int]]:
    """Rung ``rung``'s blocks: a task for each (symbol, chunk) holding a combo whose
    ``reach`` (shape ``(symbols, combos)``) is at least ``rung``, and the ids of the
    blocks holding none."""
    tasks, empty = [], []
    for s, bars in enumerate(bars_refs(spec, fingerprint, run_id)):
        span = plan.spans[s][rung]
        for c in range(plan.n_chunks):
            block_id = (rung * plan.n_symbols + s) * plan.n_chunks + c
            lo, hi = c * plan.chunk, min((c + 1) * plan.chunk, len(plan.positions))
            cells = np.flatnonzero(reach[s, lo:hi] >= rung)
            if not len(cells):
                empty.append(block_id)
                continue
            axes = tuple((name, values[lo:hi][cells]) for name, values in plan.values.items())
            tasks.append(BlockTask(block_id, out, bars, spec.strategy_ref, axes,
                                   (slice(s, s + 1), slice(lo, hi)), (), spec.execution,
                                   plan.ppy, modules, backend=backend,
                                   store_id=plan.store_id,
                                   spans=None if span is None else (span,),
                                   segments=plan.segments, cells=cells, rung=rung))
    return tasks, empty


def read_reach(out: str, n_symbols: int) -> np.ndarray:
    """The highest rung each combo reached, per symbol (0 where never promoted)."""
    reach = zarr.open_group(out, mode="r")["reach"][:]
    return np.where(np.isnan(reach), 0, reach).astype(np.int64).reshape(n_symbols, -1)


def promote(out: str, rung: int, size: int, by: str) -> None:
    """Promote, per symbol, the best ``size`` combos that ran rung ``rung - 1`` (by
    ``by``, ordered as ``rank`` orders them; combos whose ``by`` is NaN never) to rung
    ``rung``: written into ``reach``, then the ``promoted`` attribute."""
    group = zarr.open_group(out, mode="r+")
    reach = group["reach"][:]
    ascending = by in LOWER_IS_BETTER
    idle_wins = ascending or by in BEST_WHEN_IDLE
    for s in range(reach.shape[0]):
        ran = group["rung"][s] == rung - 1
        score = group[by][s]
        candidates = np.flatnonzero(ran & ~np.isnan(score))
        order = rank_order(score[candidates], ascending, idle_wins=idle_wins,
                           ruined=group["ruined"][s][candidates] == 1.0,
                           traded=group["n_trades"][s][candidates] > 0.0)
        reach[s, candidates[order[:size]]] = rung
    group["reach"][:] = reach
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
        tasks, empty = tasks_of(rung, read_reach(out, plan.n_symbols))
        mark_empty(out, empty)
        flags = done_flags(out)
        todo = [t for t in tasks if flags[t.block_id] == PENDING]
        if say is not None and len(plan.sizes) > 1:
            bars = rung_bars(plan, rung, spec.data.symbols)
            done = sum(flags[t.block_id] == COMPUTED for t in tasks)
            say(f"rung {rung + 1} of {len(plan.sizes)}: "
                f"{rung_combos(out, rung, size, spec.search.by, spec.data.symbols)} on {bars}"
                + (f" ({done} of {len(tasks)} blocks already done)" if done else ""))
        reports += compute_rung(rung, todo)
    return reports


def rung_bars(plan: SearchPlan, rung: int, symbols) -> str:
    """The bars rung ``rung`` runs, for its header: every bar, the last N (the same on
    every symbol), or each symbol's (symbols of different lengths)."""
    spans = [symbol_spans[rung] for symbol_spans in plan.spans]
    if all(span is None for span in spans):
        return "every bar"
    counts = [span[1] - span[0] if span else None for span in spans]
    if len(set(counts)) == 1:
        return f"the last {counts[0]:,} bars"
    return "the last " + ", ".join(f"{'every' if c is None else f'{c:,}'} ({s})"
                                   for c, s in zip(counts, symbols, strict=True)) + " bars"


def rung_combos(out: str, rung: int, size: int, by: str, symbols) -> str:
    """The combos rung ``rung`` runs, counted in the store: ``size`` per symbol, or, where
    fewer were promoted (a combo whose ``by`` is NaN in the rung before, most often one
    that made no trade there, is never promoted), how many of ``size`` and why.

    Read from ``reach`` and the metrics the unpromoted combos keep (those of their last
    rung), so a resumed search says the same."""
    group = zarr.open_group(out, mode="r")
    reach = read_reach(out, len(symbols))
    promoted = (reach >= rung).sum(axis=1)
    if rung == 0 or (promoted == size).all():
        return f"{size:,} combos per symbol"
    left = reach == rung - 1  # ran the rung before, not promoted: its metrics kept
    undefined = left & np.isnan(group[by][:])
    no_trade = (undefined & (group["n_trades"][:] == 0)).sum(axis=1)
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
    return f"{n} of {size:,} combos per symbol promoted" + (f" ({why_text})" if why_text else "")


def search_attrs(spec: Spec, plan: SearchPlan) -> dict:
    """The store attributes that say what the search was."""
    search = spec.search
    return {"search_method": search.method, "search_seed": search.seed,
            "search_budget": int(search.budget), "search_by": search.by,
            "search_eta": search.eta, "search_rungs": search.n_rungs,
            "n_evaluated": plan.n_evaluated * plan.n_symbols, "promoted": 0,
            "rung_sizes": list(plan.sizes), "search_params": list(plan.values)}


def box_size_text(n: int) -> str:
    """A box's combos for a line: exact below a trillion, else as a power of ten."""
    return f"{n:,}" if n < 10 ** 12 else f"~10^{math.log10(n):.1f}"
