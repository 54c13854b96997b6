"""One block of a sweep: the pure, idempotent function a Dask task runs.

A block is one symbol and a box of the parameter dims, exactly one chunk of each
metric in the results store. The task reads the bars itself, from the memory-mapped
store when its worker sees the driver's files, else from the copy the driver shipped
(nothing large travels in the graph; see :mod:`barsweep.pipeline.run.shipping`), sweeps the
combos the constraints keep, and writes its region of the store, then its ``done`` flag
(or returns the metrics for the driver to write, where its worker cannot).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np

from ...engine import METRICS, Execution
from ...engine.backend import limit_threads
from ...engine.expr import Node, holds
from ...engine.strategies import Strategy, import_strategy_module
from ..config.grid import box_combos
from .accounts import BarsRef, PortfolioAccount, SymbolAccount
from .results import SEGMENT_SUMS, write_block
from .shipping import can_write
from .watch import Watch, block_summary


@dataclass(frozen=True)
class BlockTask:
    """Everything one task needs, small enough to travel in the graph.

    Attributes
    ----------
    block_id : int
        Index of the block's ``done`` flag.
    out : str
        Path of the results store.
    account : SymbolAccount or PortfolioAccount
        Who trades (:mod:`.accounts`): one symbol on its bars, or a portfolio's one
        account on its members' bars.
    strategy : str or Strategy
        A registered strategy's name, or a Strategy compiled from rules (it pickles as
        its rules: the worker compiles it).
    axes : tuple of (name, ndarray)
        The block's slice of each parameter axis.
    region : tuple of slice
        ``(symbol, *params)`` region of the store the block writes.
    constraints : tuple of barsweep.engine.expr.Node
        The grid's constraints (:attr:`Grid.conditions
        <barsweep.pipeline.config.grid.Grid.conditions>`): the block keeps the combos
        that meet them all (:func:`barsweep.engine.expr.holds`).
    execution : Execution
    ppy : float
        Bars per year.
    modules : tuple of str
        Modules to import first, registering custom strategies on the worker.
    threads : int
        Threads the kernel may use in this task (1: Dask's workers are the parallelism,
        so cores are not oversubscribed).
    backend : {"cpu", "cuda"}
        Where the kernel runs (``cuda``: ``barsweep.engine.gpu.sweep.sweep_cuda``, the bars
        cached on the worker's device under ``bars``).
    store_id : str
        The results store's ``store_id`` attribute: a worker writes only the store it
        finds at ``out`` with this id, else returns the metrics to the driver.
    spans : tuple of (start, end), optional
        A walk-forward window's train and test bars: the block runs each (its region
        then spans the window's ``sample`` dim). None: one run over every bar.
    segments : int
        Equal segments of the bars over which the returns' sums are kept for PBO
        (``seg_sum_r``, ``seg_sum_r2``); 0: none.
    cells : ndarray of int64, optional
        A search's block: the combos it runs, as offsets in its region's ``combo``
        slice; ``axes`` then hold one value per listed combo (not a box) and the block
        writes only those cells of its region (with their ``rung`` and ``bars_run``).
        None: the block runs its box.
    rung : int
        The search rung the block runs (-1: not a search); ``spans`` then holds the
        rung's one span (None on the last rung: every bar).
    watch : Watch, optional
        What the block summarises for the dashboard page (:mod:`.watch`); None: nothing.
    """

    block_id: int
    out: str
    account: SymbolAccount | PortfolioAccount
    strategy: str | Strategy
    axes: tuple[tuple[str, np.ndarray], ...]
    region: tuple[slice, ...]
    constraints: tuple[Node, ...]
    execution: Execution
    ppy: float
    modules: tuple[str, ...] = ()
    threads: int = 1
    backend: str = "cpu"
    store_id: str = ""
    spans: tuple[tuple[int, int], ...] | None = None
    segments: int = 0
    cells: np.ndarray | None = None
    rung: int = -1
    watch: Watch | None = None

    @property
    def bars(self) -> BarsRef:
        """The bars the block's account trades on (a portfolio's first member's)."""
        return self.account.bars

    @property
    def lead(self) -> tuple[int, ...]:
        """The lengths of the region before the combos' dims: ``(1,)`` (a symbol), or
        ``(1, windows, samples)`` (walk-forward), whose product is the task's runs."""
        combo_dims = 1 if self.cells is not None else len(self.axes)
        return tuple(part.stop - part.start
                     for part in self.region[:len(self.region) - combo_dims])


@dataclass(frozen=True)
class BlockReport:
    """What a finished block tells the driver; ``metrics`` (the block's region of every
    variable, by name) only when its worker could not write the store, for the driver
    to write (which then sets ``written_by_driver``); ``summary``: its best rows and
    heatmap cells for the dashboard page (:func:`~.watch.block_summary`), and ``worker``
    the address of the worker that ran it ("" outside a Dask worker)."""

    block_id: int
    n_combos: int
    n_bars: int  # the bars each combo ran: over its spans with walk-forward
    seconds: float
    metrics: dict[str, np.ndarray] | None = None
    written_by_driver: bool = False
    best_sharpe: float = float("nan")  # the block's best, for the progress line
    phases: dict[str, float] = dataclasses.field(default_factory=dict)  # seconds
    summary: dict | None = None
    worker: str = ""


def block_metrics(task: BlockTask, phases: dict[str, float] | None = None,
                  ) -> tuple[dict[str, np.ndarray], int, int]:
    """Compute a block: each variable's region of the store by name (NaN where a combo
    is excluded, or a search's cell the block does not run): the metrics shaped
    ``(*lead, *block shape)`` (:attr:`BlockTask.lead`: the symbol, then a walk-forward
    block's windows and samples), a portfolio's member variables ``(members, *lead[1:],
    *block shape)``, the segment sums ``(1, S, *block shape)``, and a search's ``rung``
    and ``bars_run`` shaped as the metrics.

    Returns the variables, the number of combos computed and the bars each combo ran
    (the symbol's bars, or the sum of the spans' bars over the walk-forward windows);
    ``phases`` receives the seconds of ``open_bars``, ``indicators`` and ``kernel``.
    """
    phases = {} if phases is None else phases
    params, keep, shape = block_cells(task)
    lead = task.lead
    runs = math.prod(lead[1:])
    n_kept = int(keep.sum())
    kept = {name: values[keep] for name, values in params.items()}
    sums = np.empty((n_kept, task.segments, 2)) if task.segments else None
    out, per_run, n_bars = task.account.runs(task, kept, n_kept, sums, phases)  # (runs, kept..)

    def scatter(array: np.ndarray, first: tuple[int, ...]) -> np.ndarray:
        """``array`` (runs, n_kept) into the region: NaN where not kept."""
        full = np.full((runs, keep.size), np.nan)
        full[:, keep] = array
        return full.reshape((*first, *lead[1:], *shape))  # () for one member's no-param cell

    values = {name: scatter(out[..., k], (1,)) for k, name in enumerate(METRICS)}
    for name, array in per_run.items():  # a portfolio's members: (runs, n_kept, members)
        values[name] = np.stack([scatter(array[..., m], ()) for m in range(array.shape[-1])])
    if task.segments:
        segs = np.full((2, task.segments, keep.size), np.nan)
        segs[:, :, keep] = sums.transpose(2, 1, 0)
        values.update({name: segs[k].reshape(1, task.segments, *shape)
                       for k, name in enumerate(SEGMENT_SUMS)})
    if task.rung >= 0:  # a search's cells: the rung and each run's bars
        ran = ([n_bars] if task.spans is None else [b - a for a, b in task.spans])
        values["rung"] = scatter(np.full((runs, n_kept), float(task.rung)), (1,))
        values["bars_run"] = scatter(np.repeat(np.asarray(ran, float)[:, None], n_kept, 1),
                                     (1,))
    return values, n_kept, bars_run(task, n_bars)


def block_cells(task: BlockTask) -> tuple[dict[str, np.ndarray], np.ndarray, tuple[int, ...]]:
    """The block's region's combos as flat columns, which of them it runs, and the
    region's shape over its combos' dims: the box (those the constraints keep), or a
    search's chunk of ``combo`` (its listed cells)."""
    params, keep = block_combos(task)
    if task.cells is None:
        return params, keep, tuple(len(v) for _, v in task.axes)
    keep = np.zeros(task.region[-1].stop - task.region[-1].start, dtype=bool)
    keep[task.cells] = True
    scattered = {name: np.zeros(keep.size, values.dtype) for name, values in task.axes}
    for name, values in task.axes:
        scattered[name][task.cells] = values
    return scattered, keep, keep.shape


def bars_run(task: BlockTask, n_bars: int) -> int:
    """The bars each combo of ``task`` runs on a symbol of ``n_bars`` bars: all of them,
    or the sum of its spans (every window's train and test runs)."""
    if task.spans is None:
        return n_bars
    return sum(stop - start for start, stop in task.spans)


def block_combos(task: BlockTask) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The block's combos (its box, flattened; a search's listed combos) and which of
    them the constraints keep, with this process ready to run its kernel (threads
    limited, strategy modules in)."""
    limit_threads(task.threads)
    for module in task.modules:
        import_strategy_module(module)
    if task.cells is not None:  # drawn among the valid combos
        return dict(task.axes), np.ones(len(task.cells), dtype=bool)
    params = box_combos(task.axes)
    return params, holds(task.constraints, params)


def warm_block(task: BlockTask, head: dict[str, np.ndarray]) -> None:
    """Run the task's kernel on its first combos and ``head``, the first bars, so this
    process has it compiled (or loaded from numba's cache) with the very types its
    blocks use (the kernels always see read-only bars), whether or not it can read the
    store."""
    params, keep = block_combos(task)
    keep = np.flatnonzero(keep)[:2]
    n = len(head["close"])
    warm = dataclasses.replace(task, spans=None if task.spans is None
                               else ((0, n),) * len(task.spans))
    sums = np.empty((len(keep), task.segments, 2)) if task.segments else None
    task.account.warm(warm, head, {k: v[keep] for k, v in params.items()}, sums)


def run_block(task: BlockTask) -> BlockReport:
    """Compute one block and write it (and its ``done`` flag) into the results store,
    or return its metrics where this worker cannot write the store; unless the run was
    cancelled meanwhile (Ctrl-C, a failed block): then nothing is written or returned
    and the block stays pending for ``--resume``."""
    t0 = time.perf_counter()
    phases: dict[str, float] = {}
    metrics, n_combos, n_bars = block_metrics(task, phases)
    best = best_sharpe(metrics) if task.spans is None else float("nan")
    summary = block_summary(task, metrics)
    t_write = time.perf_counter()
    if task_cancelled():
        metrics = None
    elif can_write(task.out, task.store_id):
        write_block(task.out, task.region, metrics, task.block_id, task.cells)
        metrics = None
        phases["write"] = time.perf_counter() - t_write
    return BlockReport(task.block_id, n_combos, n_bars, time.perf_counter() - t0, metrics,
                       best_sharpe=best, phases=phases, summary=summary,
                       worker=worker_address())


def best_sharpe(values: dict[str, np.ndarray]) -> float:
    """The block's best finite Sharpe among combos not ruined (NaN if none)."""
    sharpe = values["sharpe"][(values["ruined"] == 0) & np.isfinite(values["sharpe"])]
    return float(sharpe.max()) if sharpe.size else float("nan")


def worker_address() -> str:
    """The address of the Dask worker running this code ("" outside one)."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return ""


def task_cancelled() -> bool:
    """Whether the Dask task running this code has been cancelled or released by the
    scheduler (False outside a Dask worker)."""
    try:
        from distributed import get_worker

        from .internals import task_key

        worker = get_worker()
        key = task_key()
    except (ImportError, ValueError):
        return False
    if key is None:
        return False
    state = worker.state.tasks.get(key)
    return state is None or state.state in ("cancelled", "released", "forgotten")

