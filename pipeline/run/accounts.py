"""Who trades in a block: a :class:`~.blocks.BlockTask`'s ``account``.

One symbol trading on its own (:class:`SymbolAccount`), or a portfolio's one account
trading every member (:class:`PortfolioAccount`, :mod:`.portfolio_block`). Both answer
the same questions (the label the store gives the account, the bars the block reads,
its runs of the kept combos, the kernel it warms), so that a block never asks which
it has. A run's kind (:mod:`.kinds`) makes one for every block.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...engine import N_METRICS, sweep_block
from ...engine.strategies import resolve
from ..config.portfolio import PORTFOLIO_LABEL, PortfolioSpec
from .portfolio_block import portfolio_runs, task_portfolio_sweep
from .shipping import worker_bars


@dataclass(frozen=True)
class BarsRef:
    """Where a task finds its bars: a store, a symbol, a timeframe and a time range
    (ns since the epoch, UTC; start inclusive, end exclusive)."""

    store: str
    symbol: str
    timeframe: str
    start_ns: int | None = None
    end_ns: int | None = None
    fingerprint: str = ""  # the store's content hash: a GPU worker's device copy key
    file_hash: str = ""  # the driver's BLAKE2b of this symbol's file ("": not checked)
    shipped: str = ""  # the Dask dataset holding the bars if the driver shipped them

    def arrays(self) -> dict[str, np.ndarray]:
        """The bars, read-only: views of the memory-mapped store, or the driver's copy
        where this worker cannot read the store (:func:`~.shipping.worker_bars`)."""
        return worker_bars(self)


@dataclass(frozen=True)
class SymbolAccount:
    """One symbol trading on its own, on the bars ``bars``: its block runs the sweep
    kernel (:func:`~barsweep.engine.sweep_block`)."""

    bars: BarsRef
    #: whether its blocks run the portfolio kernel (which kernel a run compiles)
    portfolio_kernel = False

    @property
    def label(self) -> str:
        """The account's ``symbol`` in the store: the symbol's."""
        return self.bars.symbol

    @property
    def refs(self) -> tuple[BarsRef, ...]:
        """Every symbol's bars the block reads."""
        return (self.bars,)

    def runs(self, task, kept: dict[str, np.ndarray], n_kept: int, sums: np.ndarray | None,
             phases: dict[str, float]) -> tuple[np.ndarray, dict, int]:
        """The block's runs of the ``n_kept`` kept combos (``kept``: their parameters,
        none for a strategy without any): the metrics ``(runs, n_kept, N_METRICS)``, no
        per-run extras, and the symbol's bars; ``sums`` (segment sums) written when
        given, ``phases`` the seconds of ``open_bars``, ``indicators`` and ``kernel``."""
        t0 = time.perf_counter()
        bars = self.bars.arrays()
        phases["open_bars"] = time.perf_counter() - t0
        runs = 1 if task.spans is None else len(task.spans)
        if not n_kept:
            return np.empty((runs, 0, N_METRICS)), {}, len(bars["close"])
        out = task_sweep(task, bars, kept, bars_key=self.bars, seg_sums=sums, timings=phases)
        return out.reshape(runs, n_kept, N_METRICS), {}, len(bars["close"])

    def warm(self, task, head: dict[str, np.ndarray], params: dict[str, np.ndarray],
             sums: np.ndarray | None) -> None:
        """Run the block's kernel on ``params`` and ``head``, the first bars."""
        task_sweep(task, head, params, bars_key=None, seg_sums=sums)


@dataclass(frozen=True)
class PortfolioAccount:
    """One account trading every member of a portfolio (``section``: the spec's
    ``portfolio``), on the bars ``members``: its block runs the portfolio kernel
    (:mod:`.portfolio_block`)."""

    members: tuple[BarsRef, ...]
    section: PortfolioSpec
    portfolio_kernel = True
    label = PORTFOLIO_LABEL

    @property
    def bars(self) -> BarsRef:
        """The first member's bars (the account's bars are its members' common ones)."""
        return self.members[0]

    @property
    def refs(self) -> tuple[BarsRef, ...]:
        return self.members

    def runs(self, task, kept: dict[str, np.ndarray], n_kept: int, sums: np.ndarray | None,
             phases: dict[str, float]) -> tuple[np.ndarray, dict, int]:
        """:func:`~.portfolio_block.portfolio_runs`: the account's metrics and each
        member's by name."""
        return portfolio_runs(task, self, kept, n_kept, sums, phases)

    def warm(self, task, head: dict[str, np.ndarray], params: dict[str, np.ndarray],
             sums: np.ndarray | None) -> None:
        task_portfolio_sweep(task, self.section, {ref.symbol: head for ref in self.members},
                             params, sums)


def task_sweep(task, bars: dict[str, np.ndarray], params: dict[str, np.ndarray],
               bars_key: BarsRef | None, seg_sums: np.ndarray | None = None,
               timings: dict[str, float] | None = None) -> np.ndarray:
    """The task's kernel on the given combos, on its backend: ``(n_combos, N_METRICS)``,
    or ``(n_spans, n_combos, N_METRICS)`` over the task's spans (``seg_sums`` written
    when given).

    On ``cuda`` the bars stay on the worker's device under ``bars_key`` for its later
    blocks (None: not cached, e.g. the warm-up's truncated bars).
    """
    return sweep_block(resolve(task.strategy), bars, params, task.execution, task.ppy,
                       backend=task.backend, bars_key=bars_key, spans=task.spans,
                       seg_sums=seg_sums, timings=timings)
