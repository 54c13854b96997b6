"""A portfolio's block: a box of the grid run on every member symbol from one account
(:func:`barsweep.engine.sweep_portfolio`), its region of the store by name.

The block's metrics are the account's, over ``(symbol, *params)`` with the one
``symbol`` ``portfolio``; each member's ``n_trades`` and ``exposure`` are
``member_n_trades`` and ``member_exposure`` over ``(member, *params)``. A walk-forward
portfolio block runs its windows' train and test spans (each variable then has the
``window`` and ``sample`` dims after its first), and a block over every bar keeps the
account's PBO segment sums as a single symbol's block keeps its own.
"""

from __future__ import annotations

import time

import numpy as np

from ...engine import N_METRICS, sweep_portfolio
from ...engine.portfolio import N_SYMBOL_METRICS, SYMBOL_METRICS
from ...engine.strategies import resolve
from ..config.portfolio import PortfolioSpec, rebalance_periods

#: A portfolio store's per-member variables, over ``(member, *params)`` (``(member,
#: window, sample, *params)`` in a walk-forward store).
MEMBER_VARS = tuple(f"member_{name}" for name in SYMBOL_METRICS)

#: The per-segment sums of each combo's bar returns and of their squares (PBO's input,
#: :mod:`barsweep.pipeline.analysis.robust`), over dims ``(symbol, segment, *params)``.
SEGMENT_SUMS = ("seg_sum_r", "seg_sum_r2")


def task_portfolio_sweep(task, section: PortfolioSpec,
                         bars: dict[str, dict[str, np.ndarray]],
                         params: dict[str, np.ndarray], seg_sums: np.ndarray | None = None,
                         timings: dict[str, float] | None = None,
                         ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~barsweep.engine.sweep_portfolio` of ``task``'s strategy on
    ``bars`` (member symbol to its bars) over ``params``, whose ``max_positions``,
    ``vol_lookback`` and rebalance columns, when the grid sweeps them, are the
    portfolio's (else ``section``'s, the spec's ``portfolio``;
    :func:`~barsweep.pipeline.config.portfolio.rebalance_periods`); over the task's
    spans (walk-forward windows) when it has some, writing ``seg_sums`` when given, on
    the task's backend."""
    params = dict(params)
    kmax = params.pop("max_positions", section.max_positions)
    lookback = params.pop("vol_lookback", section.vol_lookback)
    rebalance = rebalance_periods(params, section.rebalance)
    return sweep_portfolio(resolve(task.strategy), bars, params, task.execution, task.ppy,
                           max_positions=kmax, rebalance=rebalance, weight=section.weight,
                           lookback=lookback, priority=section.priority, spans=task.spans,
                           seg_sums=seg_sums, timings=timings,
                           backend=task.backend)


def portfolio_backend(n_members: int, backend: tuple[str, str]) -> tuple[str, str]:
    """The backend of a portfolio's blocks and why: ``backend`` (``(name, reason)``,
    as :func:`~barsweep.pipeline.run.execute.resolve_backend` chose it), but the CPU
    where it chose CUDA and the CUDA kernel cannot take ``n_members`` symbols (only
    ``auto`` gets there: the spec refuses such a ``run.backend: cuda``)."""
    if backend[0] != "cuda":
        return backend
    from ...engine.gpu import portfolio_cuda_problem  # imports numba.cuda

    problem = portfolio_cuda_problem(n_members)
    return ("cpu", f"auto: CPU, since {problem}") if problem else backend


def portfolio_runs(task, account, kept: dict[str, np.ndarray], n_kept: int,
                   sums: np.ndarray | None, phases: dict[str, float],
                   ) -> tuple[np.ndarray, dict, int]:
    """A portfolio block's runs (``account``: its
    :class:`~.accounts.PortfolioAccount`) of the ``n_kept`` kept combos (``kept``: their parameters
    as flat columns, none for a strategy without any): the account's metrics
    ``(runs, n_kept, N_METRICS)``, each member's ``n_trades`` and ``exposure`` by
    :data:`MEMBER_VARS` name ``(runs, n_kept, members)``, and the members' bars;
    ``sums`` (the account's segment sums) written when given. ``phases`` receives the
    seconds of ``open_bars``, ``indicators`` and ``kernel``."""
    t0 = time.perf_counter()
    bars = {ref.symbol: ref.arrays() for ref in account.members}
    phases["open_bars"] = time.perf_counter() - t0
    n = len(account.members)
    runs = 1 if task.spans is None else len(task.spans)
    n_bars = len(next(iter(bars.values()))["close"])
    if not n_kept:
        return (np.empty((runs, 0, N_METRICS)),
                {name: np.empty((runs, 0, n)) for name in MEMBER_VARS}, n_bars)
    out, per_symbol = task_portfolio_sweep(task, account.section, bars, kept, sums,
                                           timings=phases)
    per_symbol = per_symbol.reshape(runs, n_kept, n, N_SYMBOL_METRICS)
    return (out.reshape(runs, n_kept, N_METRICS),
            {name: per_symbol[..., k] for k, name in enumerate(MEMBER_VARS)}, n_bars)
