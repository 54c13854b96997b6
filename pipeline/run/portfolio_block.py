"""A portfolio's block: a box of the grid run on every member symbol from one account
(:func:`barsweep.engine.portfolio.sweep_portfolio`), its region of the store by name.

The block's metrics are the account's, over ``(symbol, *params)`` with the one
``symbol`` ``portfolio``; each member's ``n_trades`` and ``exposure`` are
``member_n_trades`` and ``member_exposure`` over ``(member, *params)``.
"""

from __future__ import annotations

import time

import numpy as np

from ...engine import METRICS, N_METRICS
from ...engine.portfolio import sweep_portfolio
from ...engine.portfolio_sim import N_SYMBOL_METRICS, SYMBOL_METRICS
from ...engine.strategies import resolve

#: A portfolio store's per-member variables, over ``(member, *params)``.
MEMBER_VARS = tuple(f"member_{name}" for name in SYMBOL_METRICS)


def portfolio_sweep(task, bars: dict[str, dict[str, np.ndarray]],
                    params: dict[str, np.ndarray],
                    timings: dict[str, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~barsweep.engine.portfolio.sweep_portfolio` of ``task``'s strategy on
    ``bars`` (member symbol to its bars) over ``params``, whose ``max_positions``
    column, when the grid sweeps it, is the portfolio's (else its section's), on the
    task's backend."""
    params = dict(params)
    kmax = params.pop("max_positions", task.portfolio.max_positions)
    return sweep_portfolio(resolve(task.strategy), bars, params, task.execution, task.ppy,
                           max_positions=kmax, timings=timings, backend=task.backend)


def portfolio_backend(n_members: int, backend: tuple[str, str]) -> tuple[str, str]:
    """The backend of a portfolio's blocks and why: ``backend`` (``(name, reason)``,
    as :func:`~barsweep.pipeline.run.execute.resolve_backend` chose it), but the CPU
    where it chose CUDA and the CUDA kernel cannot take ``n_members`` symbols (only
    ``auto`` gets there: the spec refuses such a ``run.backend: cuda``)."""
    if backend[0] != "cuda":
        return backend
    from ...engine.gpu_portfolio import portfolio_cuda_problem  # imports numba.cuda

    problem = portfolio_cuda_problem(n_members)
    return ("cpu", f"auto: CPU, since {problem}") if problem else backend


def portfolio_metrics(task, params: dict[str, np.ndarray], keep: np.ndarray,
                      phases: dict[str, float]) -> tuple[dict[str, np.ndarray], int, int]:
    """The block's variables (NaN where the constraints exclude a combo): each metric
    shaped ``(1, *block shape)``, each of :data:`MEMBER_VARS` ``(N, *block shape)``;
    the combos computed and the bars each ran. ``phases`` receives the seconds of
    ``open_bars``, ``indicators`` and ``kernel``."""
    t0 = time.perf_counter()
    bars = {ref.symbol: ref.arrays() for ref in task.members}
    phases["open_bars"] = time.perf_counter() - t0
    shape = tuple(len(v) for _, v in task.axes)
    n = len(task.members)
    metrics = np.full((N_METRICS, keep.size), np.nan)
    member = np.full((N_SYMBOL_METRICS, n, keep.size), np.nan)
    n_kept = int(keep.sum())
    if n_kept:
        kept = {name: values[keep] for name, values in params.items()}
        out, per_symbol = portfolio_sweep(task, bars, kept, timings=phases)
        metrics[:, keep] = out.T
        member[:, :, keep] = per_symbol.transpose(2, 1, 0)
    values = {name: metrics[k].reshape(1, *shape) for k, name in enumerate(METRICS)}
    values.update({name: member[k].reshape(n, *shape) for k, name in enumerate(MEMBER_VARS)})
    return values, n_kept, len(next(iter(bars.values()))["close"])
