"""What a run tells the dashboard's ``/barsweep`` page: small summaries, never combos x bars.

Each block summarises itself on its worker (:func:`block_summary`: its best ``top``
combos by the run's ``by`` metric, and the best value of each cell of the heatmap's two
parameters); the driver sends one event per stage (a grid run's blocks, or one rung of a
search) and one per finished block under the topic :data:`TOPIC` (:class:`Feed`), which
the scheduler's plugin (:mod:`barsweep.pipeline.run.dashboard`) folds into the page's
state.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...engine import BEST_WHEN_IDLE, LOWER_IS_BETTER
from ..config.grid import Grid, box_combos

#: The Dask event topic of the page's events.
TOPIC = "barsweep"
#: The name of the scheduler plugin that folds them (:mod:`.dashboard`).
PLUGIN = "barsweep-dashboard"
#: Best combos a block reports, and the page's table shows.
TOP = 20
#: The most cells of the heatmap along each parameter: longer axes are binned.
BINS = 60
#: Metrics a table row carries besides the ranked one.
ROW_METRICS = ("sharpe", "total_return", "max_drawdown", "n_trades")


@dataclass(frozen=True)
class Watch:
    """What a block summarises for the page.

    Attributes
    ----------
    by : str
        The metric combos are ranked by (the run's ``search.by``).
    ascending, idle_wins : bool
        Its direction, and whether combos that never traded rank after those that did
        (as ``rank`` orders them).
    pair : tuple of str
        The heatmap's parameters (none, one or two).
    pair_values : tuple of ndarray
        Each one's values over the whole grid; a cell of the heatmap is a bin of at most
        ``len / BINS`` consecutive values of each (:func:`bin_edges`).
    shape : tuple of int
        The store's ``(symbol, *params)`` sizes (``(symbol, combo)`` for a search): a
        combo's flat position there breaks ties as ``rank`` does.
    top : int
    """

    by: str
    ascending: bool
    idle_wins: bool
    pair: tuple[str, ...]
    pair_values: tuple[np.ndarray, ...]
    shape: tuple[int, ...]
    top: int = TOP


def watch_of(by: str, grid: Grid, shape: tuple[int, ...], top: int = TOP) -> Watch:
    """The :class:`Watch` of a run ranked by ``by`` over ``grid`` (store shape ``shape``)."""
    ascending = by in LOWER_IS_BETTER
    pair, axes = heatmap_pair(grid), dict(grid.axes)
    return Watch(by, ascending, ascending or by in BEST_WHEN_IDLE, pair,
                 tuple(np.asarray(axes[n]) for n in pair), tuple(int(n) for n in shape), top)


def heatmap_pair(grid: Grid) -> tuple[str, ...]:
    """The two parameters of ``grid`` with the most values (in grid order; ties to the
    first): those whose best-metric map tells most of the grid's shape.

    >>> import numpy as np
    >>> heatmap_pair(Grid((("a", np.arange(3)), ("b", np.arange(9)), ("c", np.arange(5)))))
    ('b', 'c')
    """
    sizes = [(len(values), -k, name) for k, (name, values) in enumerate(grid.axes)
             if len(values) > 1]
    chosen = {name for _, _, name in sorted(sizes, reverse=True)[:2]}
    return tuple(name for name, _ in grid.axes if name in chosen)


def block_params(task) -> dict[str, np.ndarray]:
    """A block's combos as flat arrays in the order of its metrics."""
    if task.cells is None:
        return box_combos(task.axes)
    n = task.region[-1].stop - task.region[-1].start  # a search's combos, scattered
    params = {name: np.zeros(n, values.dtype) for name, values in task.axes}
    for name, values in task.axes:
        params[name][task.cells] = values
    return params


def store_positions(task, local: np.ndarray) -> np.ndarray:
    """The flat positions in the store's ``(symbol, *params)`` (or ``(symbol, combo)``)
    cells of the block's combos at flat offsets ``local`` (their order kept: positions
    grow with offsets)."""
    shape, symbol = task.watch.shape, task.region[0].start
    if task.cells is not None:
        return symbol * shape[-1] + task.region[-1].start + local
    if not task.axes:  # no parameter: one cell per symbol
        return np.full(len(local), symbol)
    index = np.unravel_index(local, tuple(len(v) for _, v in task.axes))
    return np.ravel_multi_index(
        [np.full(len(local), symbol), *(ix + task.region[k + 1].start
                                        for k, ix in enumerate(index))], shape)


def block_summary(task, metrics: dict[str, np.ndarray]) -> dict | None:
    """The page's summary of a finished block: its best ``top`` rows and the best
    ``by`` of each heatmap cell; None without a watch, or over walk-forward windows.

    Returns
    -------
    dict or None
        ``{"rows": [row, ...], "cells": [[a, b, best], ...]}``; a row maps ``symbol``,
        each parameter, ``by`` and :data:`ROW_METRICS` to plain values, with ``position``,
        ``ruined`` and ``traded`` (the keys the page merges rows by).
    """
    watch = task.watch
    if watch is None or len(task.lead) > 1:  # walk-forward windows: none
        return None
    params = block_params(task)
    score = np.asarray(metrics[watch.by], dtype=np.float64).ravel()
    if any(v.size != score.size for v in params.values()):  # pragma: no cover
        return None  # a layout this does not know
    ruined = np.asarray(metrics["ruined"]).ravel() == 1.0
    traded = np.asarray(metrics["n_trades"]).ravel() > 0.0
    pick = np.flatnonzero(~np.isnan(score))
    order = pick[top_order(score[pick], watch, ruined[pick], traded[pick])]
    position = store_positions(task, order)
    symbol = task.account.label
    names = dict.fromkeys((watch.by, *ROW_METRICS))
    rows = [{"symbol": symbol, **{k: params[k][i].item() for k in params},
             **{m: float(np.asarray(metrics[m]).ravel()[i]) for m in names if m in metrics},
             "position": int(p), "ruined": bool(ruined[i]),
             "traded": bool(traded[i])} for i, p in zip(order, position)]
    return {"rows": rows, "cells": cell_best(params, score, ruined, watch)}


def top_order(score: np.ndarray, watch: Watch, ruined: np.ndarray,
              traded: np.ndarray) -> np.ndarray:
    """The best ``watch.top`` of candidates listed by position, best first, in the order
    ``rank`` gives them (:func:`~barsweep.pipeline.run.order.rank_order`), sorting only
    the few that can be among them: the groups rank puts first (not ruined, traded where
    idling would win, finite), and within the last group needed the values up to its
    ``top``-th (ties included)."""
    from .order import rank_order

    signed = score if watch.ascending else -score
    idle = ~traded if watch.idle_wins else np.zeros(len(score), dtype=bool)
    group = ruined * 4 + idle * 2 + np.isinf(score)
    picked, n = [], 0
    for g in range(8):
        members = np.flatnonzero(group == g)
        if n + len(members) > watch.top:
            need = watch.top - n
            kth = np.partition(signed[members], need - 1)[need - 1]
            members = members[signed[members] <= kth]
        picked.append(members)
        n += len(members)
        if n >= watch.top:
            break
    chosen = np.sort(np.concatenate(picked)) if picked else np.empty(0, dtype=np.int64)
    return chosen[rank_order(score[chosen], watch.ascending, watch.idle_wins,
                             ruined[chosen], traded[chosen])][:watch.top]


def cell_best(params: dict[str, np.ndarray], score: np.ndarray, ruined: np.ndarray,
              watch: Watch) -> list[list[float]]:
    """``[i, j, best]`` for each heatmap cell (bins ``i`` and ``j`` of the two parameters,
    :func:`bin_of`) holding some of the block's finite, unruined combos (``j`` 0 with one
    parameter; nothing without any): at most :data:`BINS` squared, whatever the block's
    size."""
    ok = np.isfinite(score) & ~ruined
    if not watch.pair or not ok.any():
        return []
    bins = [bin_of(params[name][ok], values)
            for name, values in zip(watch.pair, watch.pair_values)]
    sizes = [n_bins(len(values)) for values in watch.pair_values]
    if len(bins) == 1:
        bins, sizes = [bins[0], np.zeros_like(bins[0])], [sizes[0], 1]
    flat = bins[0] * sizes[1] + bins[1]
    signed = -score[ok] if watch.ascending else score[ok]
    best = np.full(sizes[0] * sizes[1], -np.inf)
    np.maximum.at(best, flat, signed)
    cells = np.flatnonzero(best > -np.inf)
    values = -best[cells] if watch.ascending else best[cells]
    return [[int(c // sizes[1]), int(c % sizes[1]), float(v)] for c, v in zip(cells, values)]


def n_bins(n_values: int) -> int:
    """The heatmap's cells along an axis of ``n_values`` values."""
    return min(n_values, BINS)


def bin_of(values: np.ndarray, axis: np.ndarray) -> np.ndarray:
    """The heatmap bin of each of ``values`` on ``axis`` (the parameter's grid values):
    its index on the axis, scaled to :func:`n_bins` bins.

    >>> bin_of(np.array([10, 13, 19]), np.arange(10, 20)).tolist()
    [0, 3, 9]
    >>> bin_of(np.array([0, 119]), np.arange(120)).tolist()
    [0, 59]
    """
    order = np.argsort(axis, kind="stable")
    found = np.searchsorted(axis[order], values)
    index = order[np.minimum(found, len(axis) - 1)]
    return index * n_bins(len(axis)) // len(axis)


def bin_edges(axis: np.ndarray) -> list[float]:
    """The first value of each heatmap bin of ``axis`` (what its label shows).

    >>> bin_edges(np.arange(120))[:3]
    [0.0, 2.0, 4.0]
    """
    n, size = len(axis), n_bins(len(axis))
    return [float(axis[-(-k * n // size)]) for k in range(size)]


#: The longest a page's event may hold the run up.
SEND_TIMEOUT_S = 2.0


class Feed:
    """Sends a stage's events to the scheduler: the stage as it starts, each block as
    it ends, and the stage's end. They go in order from the client's event loop, so the
    run never waits on one (nor takes a Ctrl-C inside one); :meth:`end` waits at most
    :data:`SEND_TIMEOUT_S` for those still going. A scheduler that cannot take one (gone,
    or an old one) costs the page its events, never the run.

    Parameters
    ----------
    client : distributed.Client
    run : str
        The run's key: the page starts afresh on a key it has not seen.
    stage : dict
        What the page shows of the run and this stage (``out``, ``strategy``, ``by``,
        ``pair`` and its bins' first values, ``rung``, ``blocks``, ``combos``).
    """

    def __init__(self, client, run: str, stage: dict) -> None:
        self.client, self.run, self.off = client, run, False
        self.rung = int(stage.get("rung", -1))  # each block's event names it
        self.lock = asyncio.Lock()  # taken in the order the sends were asked
        self.send({"kind": "stage", "t": time.time(), **stage})

    def send(self, msg: dict) -> None:
        """Log ``msg`` on the scheduler, from the client's event loop; nothing once a
        send failed or while the client is not connected."""
        if self.off or self.client.status != "running":
            return
        self.client.loop.add_callback(self._send, {"run": self.run, **msg})

    async def _send(self, msg: dict) -> None:
        async with self.lock:
            if self.off:
                return
            try:
                await asyncio.wait_for(self.client.scheduler.log_event(topic=TOPIC, msg=msg),
                                       SEND_TIMEOUT_S)
            except Exception:
                self.off = True

    async def _sent(self) -> None:
        async with self.lock:
            pass

    def done(self, then: Callable | None) -> Callable:
        """A block's ``on_done``: its event sent, then ``then`` called."""
        def on_done(report) -> None:
            self.send({"kind": "block", "t": time.time(), "block": report.block_id,
                       "rung": self.rung,
                       "combos": report.n_combos, "bars": report.n_bars,
                       "seconds": report.seconds, "worker": report.worker,
                       **(report.summary or {})})
            if then is not None:
                then(report)
        return on_done

    def end(self) -> None:
        """The stage's end sent, after every earlier event (waiting at most
        :data:`SEND_TIMEOUT_S`)."""
        self.send({"kind": "end", "t": time.time()})
        if self.off or self.client.status != "running":
            return
        try:
            self.client.sync(self._sent, callback_timeout=SEND_TIMEOUT_S)
        except Exception:
            self.off = True


def watched(tasks, watch: Watch) -> tuple:
    """``tasks`` with ``watch`` set, so each block summarises itself."""
    return tuple(dataclasses.replace(t, watch=watch) for t in tasks)


def stage_feed(client, prepared, tasks: tuple, todo_combos: int) -> tuple[Feed, tuple]:
    """The :class:`Feed` of a stage computing ``tasks`` (``todo_combos`` combos) of the
    prepared run, and the tasks with their :class:`Watch`."""
    import os

    spec = prepared.spec
    n_symbols = len(prepared.account_bars)
    if tasks and tasks[0].cells is not None:  # a search: (symbol, combo)
        shape = (n_symbols, max(t.region[-1].stop for t in tasks))
    else:
        shape = (n_symbols, *prepared.grid.shape)
    watch = watch_of(spec.search.by, prepared.grid, shape)
    stage = {"out": prepared.out, "strategy": spec.strategy_name, "by": watch.by,
             "ascending": watch.ascending, "idle_wins": watch.idle_wins,
             "pair": list(watch.pair),
             "axes": [bin_edges(values) for values in watch.pair_values],
             "params": [name for name, _ in prepared.grid.axes],
             "rung": tasks[0].rung if tasks else -1, "blocks": len(tasks),
             "combos": int(todo_combos)}
    run = f"{prepared.out}#{os.getpid()}-{id(prepared):x}"
    return Feed(client, run, stage), watched(tasks, watch)
