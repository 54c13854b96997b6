"""The plan of a run: its grid cut into blocks (block = Dask task = Zarr chunk), pure.

:func:`plan` takes a prepared spec and the combos per block (:func:`auto_block_size`
sizes them to the cluster) and returns a :class:`Plan`: every block's task, the blocks
the constraints exclude, and the store's shape beyond the parameters (the walk-forward
``window`` and ``sample`` dims, the PBO segments), each worked out once here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...datasets import periods_per_year, to_ns
from ...engine.strategies import resolve
from ..config.grid import Grid
from ..config.model import Spec
from .accounts import BarsRef
from .blocks import BlockTask
from .kinds import accounts_of, spans_of
from .memory import block_bytes, fit_chunks, table_rows


@dataclass(frozen=True)
class Plan:
    """The blocks of a run: those to compute and those the constraints exclude.

    ``n_combos`` is the number of combos the tasks compute when ``n_combos_exact``,
    else an upper bound (counting stopped at :data:`barsweep.pipeline.config.count.COUNT_BUDGET`;
    each task reports its exact count as it finishes). ``task_combos`` holds the same
    per task, in ``tasks`` order. ``excluded`` lists the blocks proven empty.

    ``lead`` is the store's dims between ``symbol`` and the parameters, each
    ``(name, values, chunk)``: walk-forward's ``window`` (``windows_per_block`` windows
    a block) and ``sample`` (train, test); none without walk-forward. ``segments`` is the
    PBO segments each block sums its returns over (0: none, as with walk-forward).
    ``store_id`` is the id of the store the tasks write; ``ppy`` the bars a year every
    task annualises with.
    """

    grid: Grid
    chunks: tuple[int, ...]
    n_blocks: int
    tasks: tuple[BlockTask, ...]
    excluded: tuple[int, ...]
    n_combos: int
    n_combos_exact: bool = True
    task_combos: tuple[int, ...] = ()
    lead: tuple[tuple[str, np.ndarray, int], ...] = ()
    segments: int = 0
    windows_per_block: int = 0
    store_id: str = ""
    ppy: float = 0.0


#: A block should compute for well over a Dask task's ~2-3 ms of overhead, and there
#: should be several blocks per worker so that the last ones balance.
MIN_BLOCK_COMBO_BARS = 50_000_000
BLOCKS_PER_WORKER = 4
MAX_BLOCK_COMBOS = 1 << 20


def auto_block_size(n_combos: int, n_bars: int, n_workers: int) -> int:
    """Combos per block: ~BLOCKS_PER_WORKER blocks per worker, but no block shorter than
    MIN_BLOCK_COMBO_BARS combo-bars (about 0.25 s of kernel) nor larger than MAX_BLOCK_COMBOS;
    where that floor decides, a multiple of ``n_workers`` (worker threads) blocks, so that
    every worker computes the same number of blocks.

    ``n_combos`` is the grid's valid combos, or an upper bound of them such as
    :meth:`~barsweep.pipeline.config.grid.Grid.estimate_valid` gives without enumerating.

    Examples
    --------
    >>> auto_block_size(1_000_000, 26_280, 2)
    125000
    >>> auto_block_size(4_000, 26_280, 2)
    2000
    """
    n_workers = max(1, n_workers)
    spread = -(-n_combos // (n_workers * BLOCKS_PER_WORKER))
    floor = -(-MIN_BLOCK_COMBO_BARS // max(1, n_bars))
    if floor > spread:  # few blocks: a multiple of the workers
        n_blocks = max(n_workers, -(-n_combos // floor) // n_workers * n_workers)
        floor = -(-n_combos // n_blocks)
    return int(max(1, min(max(spread, floor), MAX_BLOCK_COMBOS, n_combos)))


def plan(spec: Spec, out: str, block_size: int,
         grid: Grid | None = None, backend: str = "cpu", fingerprint: dict | None = None,
         run_id: str = "", store_id: str = "", windows: np.ndarray | None = None,
         n_bars: int = 0, budget: int | None = None,
         chunks: tuple[int, ...] | None = None) -> Plan:
    """Cut the spec's grid into blocks (block = Dask task = Zarr chunk) for every symbol.

    ``block_size`` is the combos per block, resolved (the spec's ``auto`` is
    :func:`auto_block_size`'s, which the orchestrator applies); ``grid`` is
    ``spec.param_grid`` by default; ``backend`` is the resolved one (``cpu`` or
    ``cuda``). ``fingerprint`` is the bars' (:func:`~barsweep.datasets.fingerprint`):
    workers check the files they see against it (and GPU workers key their device copy
    of the bars on it); ``run_id`` names the Dask datasets of bars shipped to workers
    that cannot read them, and ``store_id`` is the results store's id (workers write
    only that store).
    ``windows`` (walk-forward: ``(W, 4)`` train and test bounds) makes a block of each
    box and group of :func:`~.kinds.windows_per_block` windows: their train and test runs (the
    indicators hoisted once for all), the store's ``window``/``sample`` dims.
    ``budget`` (bytes, with ``n_bars`` the bars a block reads) cuts the blocks further,
    on any axis, until each one's :func:`~barsweep.pipeline.run.memory.block_bytes`
    fits (:func:`block_chunks`); SpecError when one combo does not. ``chunks``, when
    given, is the block shape as it is (a resumed store's).

    The grid is never enumerated: each block is decided by interval bounds and counted
    by :meth:`~barsweep.pipeline.config.grid.Grid.block_counts` within a fixed budget, so
    planning a 10^9-combo grid takes about a second and memory in proportion to the
    number of blocks (``benchmarks/plan_size.py``).
    """
    grid = grid if grid is not None else spec.param_grid
    chunks = chunks or block_chunks(spec, grid, block_size, n_bars, budget, windows)
    per_symbol = grid.n_blocks(chunks)
    if spec.data.year_days is None:
        raise ValueError("plan() takes a prepared spec: data.year_days is measured from the "
                         "bars by prepare_run")
    ppy = periods_per_year(spec.data.timeframe, spec.data.year_days)
    counts, exact = grid.block_counts(chunks)
    boxes = grid_boxes(grid, chunks, counts)
    empty = (counts == 0).nonzero()[0].tolist()
    spans = spans_of(windows)
    step = spans.step(math.prod(chunks))
    groups = spans.groups(step)
    segments = spans.segments(spec.analysis.pbo_segments)
    modules = tuple(spec.modules)
    tasks, task_combos, excluded = [], [], []
    # each symbol's account, or a portfolio's one account over every member's bars
    accounts = accounts_of(spec).accounts(bars_refs(spec, fingerprint, run_id))
    for s, account in enumerate(accounts):
        for g, (group, span) in enumerate(groups):
            first = (s * len(groups) + g) * per_symbol  # block ids: symbol, windows, box
            lead = (slice(s, s + 1),) if span is None else (
                slice(s, s + 1), group, slice(0, 2))
            for b, axes, slices, n_valid in boxes:
                tasks.append(BlockTask(first + b, out, account, spec.strategy_ref, axes,
                                       (*lead, *slices), grid.conditions, spec.execution,
                                       ppy, modules, backend=backend,
                                       store_id=store_id, spans=span, segments=segments))
                task_combos.append(n_valid)
            excluded.extend(first + b for b in empty)
    n_blocks = per_symbol * len(accounts) * len(groups)
    return Plan(grid, chunks, n_blocks, tuple(tasks), tuple(excluded), sum(task_combos),
                bool(exact.all()), tuple(task_combos), spans.lead(step), segments,
                step, store_id, ppy)


def block_chunks(spec: Spec, grid: Grid, block_size: int, n_bars: int,
                 budget: int | None, windows: np.ndarray | None = None) -> tuple[int, ...]:
    """The chunk shape of blocks of at most ``block_size`` combos (:meth:`Grid.chunks`),
    cut further until a block's estimated peak fits ``budget`` bytes (None: as is)."""
    chunks = grid.chunks(block_size)
    if budget is None:
        return chunks
    return fit_chunks(grid.names, chunks, chunk_cost(spec, grid, n_bars, windows), budget)


def chunk_cost(spec: Spec, grid: Grid, n_bars: int, windows: np.ndarray | None = None):
    """The function of a chunk shape giving its block's estimated peak in bytes
    (:func:`~barsweep.pipeline.run.memory.block_bytes`)."""
    strategy = resolve(spec.strategy_ref)
    names = grid.names
    accounts, spans = accounts_of(spec), spans_of(windows)
    segments = spans.segments(spec.analysis.pbo_segments)
    n_bars = accounts.table_bars(n_bars)  # a portfolio: a table per member

    def cost(shape: tuple[int, ...]) -> int:
        combos = math.prod(shape)
        dims = dict(zip(names, shape, strict=True))
        rows = table_rows(strategy, dims) + accounts.sizing_rows(dims)  # per member
        return block_bytes(rows, n_bars, combos, spans.runs(combos), segments, len(shape),
                           len(strategy.indicators))
    return cost


def grid_boxes(grid: Grid, chunks: tuple[int, ...], counts: np.ndarray) -> list[tuple]:
    """The boxes of the grid that hold a valid combo, each ``(block id within a symbol,
    the axes' slices of values, the region's slices, the combos it keeps)``."""
    per_axis = [-(-n // c) for n, c in zip(grid.shape, chunks, strict=True)]
    pieces = [[((name, values[i * c:(i + 1) * c]), slice(i * c, min((i + 1) * c, len(values))))
               for i in range(k)]  # each axis's chunks once, shared by every block
              for (name, values), c, k in zip(grid.axes, chunks, per_axis, strict=True)]
    boxes = []
    block_combos = counts.tolist()
    for b in counts.nonzero()[0].tolist():
        position, rest = [], b
        for k in reversed(per_axis):
            rest, i = divmod(rest, k)
            position.append(i)
        chosen = [axis[i] for axis, i in zip(pieces, reversed(position), strict=True)]
        boxes.append((b, tuple(a for a, _ in chosen), tuple(sl for _, sl in chosen),
                      block_combos[b]))
    return boxes


def bars_refs(spec: Spec, fingerprint: dict | None, run_id: str) -> list[BarsRef]:
    """Where each symbol's tasks find their bars (see :class:`BarsRef`)."""
    files = (fingerprint or {}).get("files", [{}] * len(spec.data.symbols))
    return [BarsRef(spec.data.store, symbol, spec.data.timeframe,
                    to_ns(spec.data.start, "data.start"), to_ns(spec.data.end, "data.end"),
                    (fingerprint or {}).get("blake2b", ""), files[s].get("blake2b", ""),
                    f"barsweep-bars-{run_id}-{s}" if run_id else "")
            for s, symbol in enumerate(spec.data.symbols)]
