"""What a run tells the dashboard's ``/barsweep`` page: small summaries, never combos x bars.

Each block summarises itself on its worker (:func:`block_summary`: its best ``top``
combos by the run's ``by`` metric, and the best value of each cell of the heatmap's two
parameters); the driver sends one event per stage (a grid run's blocks, or one rung of a
search) and one per finished block under the topic :data:`TOPIC` (:class:`Feed`), which
the scheduler's plugin (:mod:`barsweep.pipeline.run.dashboard`) folds into the page's
state.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...engine import BEST_WHEN_IDLE, LOWER_IS_BETTER
from ..config.grid import Grid, box_combos
from ..config.portfolio import PORTFOLIO_LABEL

#: The Dask event topic of the page's events.
TOPIC = "barsweep"
#: The name of the scheduler plugin that folds them (:mod:`.dashboard`).
PLUGIN = "barsweep-dashboard"
#: Best combos a block reports, and the page's table shows.
TOP = 20
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
    shape : tuple of int
        The store's ``(symbol, *params)`` sizes (``(symbol, combo)`` for a search): a
        combo's flat position there breaks ties as ``rank`` does.
    top : int
    """

    by: str
    ascending: bool
    idle_wins: bool
    pair: tuple[str, ...]
    shape: tuple[int, ...]
    top: int = TOP


def watch_of(by: str, grid: Grid, shape: tuple[int, ...], top: int = TOP) -> Watch:
    """The :class:`Watch` of a run ranked by ``by`` over ``grid`` (store shape ``shape``)."""
    ascending = by in LOWER_IS_BETTER
    return Watch(by, ascending, ascending or by in BEST_WHEN_IDLE, heatmap_pair(grid),
                 tuple(int(n) for n in shape), top)


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


def block_params(task) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A block's combos as flat arrays in the order of its metrics, and each one's flat
    position in the store's ``(symbol, *params)`` (or ``(symbol, combo)``) cells."""
    shape = task.watch.shape
    symbol = task.region[0].start
    if task.cells is not None:  # a search's listed combos, scattered in a combo slice
        n = task.region[-1].stop - task.region[-1].start
        params = {name: np.zeros(n, values.dtype) for name, values in task.axes}
        for name, values in task.axes:
            params[name][task.cells] = values
        start = symbol * shape[-1] + task.region[-1].start
        return params, np.arange(start, start + n, dtype=np.int64)
    params = box_combos(task.axes)
    local = np.indices(tuple(len(v) for _, v in task.axes)).reshape(len(task.axes), -1)
    index = [np.full(local.shape[1], symbol)] + [
        local[k] + task.region[k + 1].start for k in range(len(task.axes))]
    return params, np.ravel_multi_index(index, shape).astype(np.int64)


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
    if watch is None or (task.spans is not None and task.rung < 0):
        return None
    params, position = block_params(task)
    score = np.asarray(metrics[watch.by], dtype=np.float64).ravel()
    if score.size != position.size:  # pragma: no cover - a layout this does not know
        return None
    ruined = np.asarray(metrics["ruined"]).ravel() == 1.0
    traded = np.asarray(metrics["n_trades"]).ravel() > 0.0
    pick = np.flatnonzero(~np.isnan(score))
    order = pick[row_order(score[pick], watch, ruined[pick], traded[pick])][:watch.top]
    symbol = PORTFOLIO_LABEL if task.members else task.bars.symbol
    names = dict.fromkeys((watch.by, *ROW_METRICS))
    rows = [{"symbol": symbol, **{k: params[k][i].item() for k in params},
             **{m: float(np.asarray(metrics[m]).ravel()[i]) for m in names if m in metrics},
             "position": int(position[i]), "ruined": bool(ruined[i]),
             "traded": bool(traded[i])} for i in order]
    return {"rows": rows, "cells": cell_best(params, score, ruined, watch)}


def row_order(score: np.ndarray, watch: Watch, ruined: np.ndarray,
              traded: np.ndarray) -> np.ndarray:
    """The order ``rank`` gives candidates listed by position, best first
    (:func:`~barsweep.pipeline.run.order.rank_order`)."""
    from .order import rank_order

    return rank_order(score, watch.ascending, watch.idle_wins, ruined, traded)


def cell_best(params: dict[str, np.ndarray], score: np.ndarray, ruined: np.ndarray,
              watch: Watch) -> list[list[float]]:
    """``[a, b, best]`` for each ``(a, b)`` of the heatmap's parameters among the block's
    finite, unruined combos (``b`` 0 with one parameter; nothing without any)."""
    ok = np.isfinite(score) & ~ruined
    if not watch.pair or not ok.any():
        return []
    a = params[watch.pair[0]][ok].astype(np.float64)
    b = (params[watch.pair[1]][ok].astype(np.float64) if len(watch.pair) > 1
         else np.zeros(len(a)))
    signed = -score[ok] if watch.ascending else score[ok]
    keys, inverse = np.unique(np.stack([a, b], axis=1), axis=0, return_inverse=True)
    best = np.full(len(keys), -np.inf)
    np.maximum.at(best, inverse.ravel(), signed)
    best = -best if watch.ascending else best
    return [[float(x), float(y), float(v)] for (x, y), v in zip(keys, best)]


class Feed:
    """Sends a stage's events to the scheduler: the stage as it starts, each block as
    it ends, and the stage's end. A scheduler that cannot take one (gone, or an old
    one) costs the page its events, never the run.

    Parameters
    ----------
    client : distributed.Client
    run : str
        The run's key: the page starts afresh on a key it has not seen.
    stage : dict
        What the page shows of the run and this stage (``out``, ``strategy``, ``by``,
        ``pair`` and its axes' values, ``rung``, ``blocks``, ``combos``).
    """

    def __init__(self, client, run: str, stage: dict) -> None:
        self.client, self.run = client, run
        self.send({"kind": "stage", "t": time.time(), **stage})

    def send(self, msg: dict) -> None:
        with contextlib.suppress(Exception):
            self.client.log_event(TOPIC, {"run": self.run, **msg})

    def done(self, then: Callable | None) -> Callable:
        """A block's ``on_done``: its event sent, then ``then`` called."""
        def on_done(report) -> None:
            self.send({"kind": "block", "t": time.time(), "block": report.block_id,
                       "combos": report.n_combos, "bars": report.n_bars,
                       "seconds": report.seconds, "worker": report.worker,
                       **(report.summary or {})})
            if then is not None:
                then(report)
        return on_done

    def end(self) -> None:
        self.send({"kind": "end", "t": time.time()})


def watched(tasks, watch: Watch) -> tuple:
    """``tasks`` with ``watch`` set, so each block summarises itself."""
    return tuple(dataclasses.replace(t, watch=watch) for t in tasks)


def stage_feed(client, prepared, tasks: tuple, todo_combos: int) -> tuple[Feed, tuple]:
    """The :class:`Feed` of a stage computing ``tasks`` (``todo_combos`` combos) of the
    prepared run, and the tasks with their :class:`Watch`."""
    import os

    spec = prepared.spec
    n_symbols = 1 if spec.portfolio is not None else len(spec.data.symbols)
    if tasks and tasks[0].cells is not None:  # a search: (symbol, combo)
        shape = (n_symbols, max(t.region[-1].stop for t in tasks))
    else:
        shape = (n_symbols, *prepared.grid.shape)
    watch = watch_of(spec.search.by, prepared.grid, shape)
    axes = dict(prepared.grid.axes)
    stage = {"out": prepared.out, "strategy": spec.strategy_name, "by": watch.by,
             "ascending": watch.ascending, "idle_wins": watch.idle_wins,
             "pair": list(watch.pair), "axes": [axes[n].tolist() for n in watch.pair],
             "params": list(axes), "rung": tasks[0].rung if tasks else -1,
             "blocks": len(tasks), "combos": int(todo_combos)}
    run = f"{prepared.out}#{os.getpid()}-{id(prepared):x}"
    return Feed(client, run, stage), watched(tasks, watch)
