"""Where a block of combos runs: this process's CPU threads or (``backend="cuda"``) a GPU.

The engine's one choice between its numba CPU kernels (:mod:`~barsweep.engine.core.sweep`,
:mod:`~barsweep.engine.portfolio.sweep`) and their numba.cuda compilations
(:mod:`barsweep.engine.gpu`, imported only where CUDA is asked for): the same arithmetic,
the same result. It stands above both, so neither imports the other's side.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from functools import partial

import numpy as np

from ..errors import SpecError
from .core.execution import Execution
from .core.records import PortfolioRecord
from .core.sweep import sweep_cpu
from .portfolio.sweep import run_portfolio_cpu, sweep_portfolio_with
from .strategies.base import Strategy

#: The devices a block runs on.
BACKENDS = ("cpu", "cuda")


def check_backend(backend: str) -> str:
    """``backend`` if it is one of :data:`BACKENDS`, else a SpecError naming them.

    >>> check_backend("gpu")
    Traceback (most recent call last):
    ...
    barsweep.errors.SpecError: backend must be 'cpu' or 'cuda', got 'gpu'
    """
    if backend not in BACKENDS:
        raise SpecError(f"backend must be 'cpu' or 'cuda', got {backend!r}")
    return backend


def sweep_block(
    strategy: Strategy,
    bars: Mapping[str, np.ndarray],
    params: Mapping[str, np.ndarray],
    execution: Execution,
    ppy: float,
    *,
    backend: str = "cpu",
    bars_key: Hashable | None = None,
    spans: Sequence[tuple[int, int]] | None = None,
    seg_sums: np.ndarray | None = None,
    timings: dict[str, float] | None = None,
) -> np.ndarray:
    """Metrics of every combo of a block, never materializing combos x bars.

    Parameters
    ----------
    strategy : Strategy
    bars : mapping with ``open``, ``high``, ``low``, ``close`` ndarrays, shape (n_bars,)
    params : mapping of parameter name to ndarray, shape (n_combos,)
        One value per combo for each of the strategy's parameters, and for any of
        ``stop_loss``, ``take_profit``, ``trailing_stop`` swept as grid axes.
    execution : Execution
    ppy : float
        Bars per year, for annualized metrics.
    backend : {"cpu", "cuda"}, default "cpu"
        ``cuda`` runs :func:`barsweep.engine.gpu.sweep.sweep_cuda` (same arithmetic, same
        result), keeping the bars on the device under ``bars_key`` for later calls in
        this process (None: copied each call).
    spans : sequence of (start, end), optional
        Runs over bars ``[start, end)`` only, one per span (walk-forward windows): each
        starts flat with ``init_cash`` at its first bar, the indicators warmed up on every
        bar before it (``simulate``). None: one run over every bar.
    seg_sums : ndarray, shape (n_combos, S, 2), optional
        Written (without ``spans``): the sums of each combo's bar returns and of their
        squares over S equal segments of the bars (``simulate``'s ``segs``).
    timings : dict, optional
        Receives the seconds spent hoisting the indicators (``indicators``) and in the
        kernel (``kernel``); on ``cuda`` the device stages (``sweep_cuda``).

    Returns
    -------
    ndarray, shape (n_combos, N_METRICS), float64
        Columns in ``METRICS`` order; with ``spans``, shape (n_spans, n_combos,
        N_METRICS).

    Examples
    --------
    >>> import numpy as np
    >>> from barsweep.engine import Execution, get_strategy, sweep_block
    >>> close = 100 + np.cumsum(np.random.default_rng(0).normal(size=500))
    >>> bars = dict(open=close, high=close, low=close, close=close)
    >>> out = sweep_block(get_strategy("ema_cross"), bars,
    ...             dict(fast=np.array([5, 10]), slow=np.array([20, 40])), Execution(), 8760)
    >>> out.shape
    (2, 18)
    """
    if seg_sums is not None and spans is not None:
        raise ValueError("seg_sums are summed over one run of every bar: not with spans")
    if check_backend(backend) == "cuda":
        from .gpu.sweep import sweep_cuda  # imports numba.cuda: only where it is asked for

        return sweep_cuda(strategy, bars, params, execution, ppy, bars_key, timings,
                          spans=spans, seg_sums=seg_sums)
    return sweep_cpu(strategy, bars, params, execution, ppy, spans, seg_sums, timings)


def sweep_portfolio(
    strategy: Strategy,
    bars: Mapping[str, Mapping[str, np.ndarray]],
    params: Mapping[str, np.ndarray],
    execution: Execution | Mapping,
    ppy: float,
    *,
    max_positions=None,
    rebalance=None,
    weight: str = "equal",
    lookback=None,
    priority=None,
    spans: Sequence[tuple[int, int]] | None = None,
    seg_sums: np.ndarray | None = None,
    timings: dict[str, float] | None = None,
    record: PortfolioRecord | None = None,
    backend: str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """Metrics of every combo of a portfolio run: ``strategy`` on each symbol of
    ``bars``, one cash account (docs/EXECUTION.md, "Portfolios"), never materializing
    combos x bars.

    Parameters
    ----------
    strategy : Strategy
        A builtin or a rule strategy (one with a ``signal``).
    bars : mapping of symbol to a mapping with ``open``, ``high``, ``low``, ``close``
        ndarrays, shape (n_bars,), aligned (the same bars for every symbol).
    params : mapping of parameter name to ndarray, shape (n_combos,)
        The strategy's parameters, and the stops swept as axes (``STOP_PARAMS``), each
        position's stops then being its combo's.
    execution : Execution or mapping
        Long only, no funding; its stops, when set, apply to every position.
    ppy : float
        Bars per year.
    max_positions : None, int, or ndarray of int, shape (n_combos,)
        At most this many positions open at once, each ``1 / K`` of the value; None:
        every symbol may be held.
    rebalance : None, str, or sequence of (str or None), one per combo
        The period (``"1W"``, ``"1M"``, ``"3M"``, ...:
        :mod:`barsweep.engine.portfolio.periods`) on whose first bar the held positions
        are re-targeted to their weight; None: never. Needs each symbol's ``time``
        (int64 nanoseconds since the epoch).
    weight : {"equal", "inverse_vol"}
        Each entry's target share of the value: ``1 / K`` (``1 / N`` without
        ``max_positions``), or the inverse-volatility weight
        (:func:`~.portfolio.weights.target_weight`).
    lookback : None, int, or ndarray of int, shape (n_combos,)
        The bars of the volatility (and momentum) of ``inverse_vol`` and a data-driven
        ``priority``, >= 2; None: :data:`~.portfolio.weights.DEFAULT_LOOKBACK`.
    priority : None, "low_vol", "momentum", or a sequence of symbols
        The order of same-bar entries (:func:`~.portfolio.weights.hoist_sizing`); None:
        the symbols' order.
    spans : sequence of (start, end), optional
        Runs over bars ``[start, end)`` only, one per span (walk-forward windows): each
        starts flat with ``init_cash`` at its first bar, the indicators warmed up on every
        bar before it, against the equal-weight buy-and-hold bought at its first bar
        (:func:`~.portfolio.sweep.portfolio_runs`). None: one run over every bar.
    seg_sums : ndarray, shape (n_combos, S, 2), optional
        Written: the sums of each combo's account bar returns and of their squares over
        S equal segments of the bars run (every bar, or the one span; not with several).
    timings : dict, optional
        Receives the seconds spent hoisting the indicators (``indicators``) and in the
        kernel (``kernel``; on ``cuda`` with the copies to and from the device).
    record : PortfolioRecord, optional
        With one combo: written with its equity, cash, shares and trades
        (:func:`~barsweep.engine.core.records.portfolio_record`); CPU only.
    backend : {"cpu", "cuda"}, default "cpu"
        ``cuda`` runs the same simulation on a GPU
        (:func:`barsweep.engine.gpu.portfolio.run_portfolio_cuda`).

    Returns
    -------
    metrics : ndarray, shape (n_combos, N_METRICS)
        The account's metrics, in ``METRICS`` order (alpha and beta against the
        equal-weight buy-and-hold of the symbols, :func:`~.portfolio.sweep.equal_weight_benchmark`).
    per_symbol : ndarray, shape (n_combos, N, 2)
        Each symbol's ``n_trades`` and ``exposure``, symbols in the order of ``bars``.
        With ``spans``, both have a first dim more, one row per span.

    Examples
    --------
    >>> from barsweep.engine import get_strategy
    >>> rng = np.random.default_rng(0)
    >>> bars = {s: dict(open=c, high=c, low=c, close=c) for s, c in
    ...         (("A", 100 + np.cumsum(rng.normal(size=300))),
    ...          ("B", 100 + np.cumsum(rng.normal(size=300))))}
    >>> m, s = sweep_portfolio(get_strategy("ema_cross"), bars,
    ...                        dict(fast=np.array([5, 10]), slow=np.array([20, 40])),
    ...                        Execution(fill="close"), 252)
    >>> m.shape, s.shape
    ((2, 18), (2, 2, 2))
    """
    if backend == "cuda" and record is not None:
        raise SpecError("a portfolio record is written on the CPU: use backend 'cpu'")
    if check_backend(backend) == "cuda":
        from .gpu.portfolio import run_portfolio_cuda  # numba.cuda: imported when used

        runner = run_portfolio_cuda
    else:
        runner = partial(run_portfolio_cpu, record=record)
    return sweep_portfolio_with(runner, strategy, bars, params, execution, ppy,
                                max_positions=max_positions, rebalance=rebalance,
                                weight=weight, lookback=lookback, priority=priority,
                                spans=spans, seg_sums=seg_sums, timings=timings)
