"""Ranking: the best combos of a results store by one metric.

Never first: NaN (never ranked at all), an infinite value, a ruined combo, and, by a
metric that doing nothing wins (volatility, ulcer_index, max_drawdown, ruined, or any
ranked ascending), a combo that never traded.

Beyond one metric in sample (docs/ROBUST.md): the probabilistic and deflated Sharpe
ratios as rankable columns (``by="psr"``, ``by="dsr"``), ranking by a metric smoothed
over each combo's parameter neighbourhood (``smooth``), by a metric aggregated across
symbols (``across="symbol"``), the Pareto fronts of several metrics
(:func:`pareto_front`) and the probability of backtest overfitting (:func:`pbo_table`).

A walk-forward store's train and test samples are never ranked together: the train
samples are ranked unless ``sample="test"`` is asked (each window's choice and its
test are :func:`barsweep.pipeline.analysis.walkforward.walkforward`'s job).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from ...engine import BEST_WHEN_IDLE, LOWER_IS_BETTER, METRICS
from ...errors import SpecError
from ..config.dims import NON_PARAM_DIMS, SAMPLES
from ..config.expr import check_names, parse_expr
from ..run.order import rank_order  # noqa: F401  (the order rank applies, kept here)
from . import robust, stream, stream_fronts, stream_more
from .kinds import kind_of
from .search_views import search_params, with_params
from .stream import where_mask as _where_mask  # noqa: F401  (walkforward imports it here)

#: Columns computed from the stored metrics (``robust.dsr_columns``), rankable by name.
COMPUTED = ("psr", "dsr")

#: How ``across`` aggregates a metric over symbols.
AGGREGATES = ("median", "mean", "min")


def param_dims(ds: xr.Dataset) -> tuple[str, ...]:
    """The dims of a results store after ``symbol``, in order: the parameters (after
    ``window`` and ``sample`` in a walk-forward store)."""
    return tuple(d for d in ds[METRICS[0]].dims if d != "symbol")


def select(ds: xr.Dataset, symbol: str | None = None,
           sample: str | None = None) -> xr.Dataset:
    """The part of a results Dataset that ranking reads: one ``symbol`` (all when None)
    and, in a walk-forward store, one ``sample`` (``"train"`` when None); both dims
    kept, so rows still name them.

    Raises
    ------
    SpecError
        An unknown symbol or sample (naming those the store holds), or ``sample`` for a
        store without that dim.
    """
    if symbol is not None:
        symbols = [str(s) for s in ds["symbol"].values]
        if symbol not in symbols:
            raise SpecError(f"--symbol: no symbol {symbol!r} in the results store; it holds "
                            f"{', '.join(symbols)}")
        ds = ds.isel(symbol=[symbols.index(symbol)])
    if "sample" not in ds.dims:
        if sample is not None:
            raise SpecError(f"--sample {sample}: the results store has no sample dim (not a "
                            f"walk-forward run)")
        return ds
    if sample is None:
        sample = "train"
    if sample not in SAMPLES:
        raise SpecError(f"--sample: expected train or test, got {sample!r}")
    return ds.sel(sample=[sample])


def rank(
    results: str | os.PathLike | xr.Dataset,
    by: str = "sharpe",
    top: int = 20,
    where: str | None = None,
    ascending: bool | None = None,
    *,
    smooth: int | None = None,
    across: str | None = None,
    agg: str = "median",
    symbol: str | None = None,
    sample: str | None = None,
    partial: bool = False,
    rung: int | None = None,
) -> pd.DataFrame:
    """The ``top`` combos by metric ``by``.

    Read slab by slab (:mod:`.stream`, :mod:`.stream_more`: memory bounded by a few
    blocks, whatever the grid's size).

    Parameters
    ----------
    results : str, os.PathLike or xarray.Dataset
        The path of a results store, or the Dataset opened from it.
    by : str
        A metric name, or ``psr`` / ``dsr`` (computed from ``sharpe``, ``skew``,
        ``kurtosis``, ``n_bars`` and ``periods_per_year``:
        :func:`barsweep.pipeline.analysis.robust.dsr_columns`; both are columns of the frame, and
        names for ``where``, whenever the store holds those); descending unless lower is
        better (volatility, ulcer_index).
    top : int
    where : str, optional
        A filter over metric and dim names, e.g. ``"n_trades >= 10"`` or
        ``"symbol == 'MSFT' and fast < slow / 2"`` (strings compared with ``==``/``!=``).
    ascending : bool, optional
        Override the metric's natural direction.
    smooth : int, optional
        Rank by ``by`` averaged over each combo's box of this radius in every parameter
        dim (:func:`barsweep.pipeline.analysis.robust.smooth`); the frame gains the column
        ``<by>_smooth``. Combos outside ``where`` do not count in their neighbours' means.
    across : {"symbol"}, optional
        Rank parameter combos by ``by`` aggregated across symbols with ``agg``. A combo
        takes part only where ``by`` is defined (and ``where`` holds) on every symbol.
        The frame then has the parameters, ``<by>_<agg>`` (and
        ``<by>_smooth_<agg>`` with ``smooth``) and one column ``<by>[<symbol>]`` per
        symbol.
    agg : {"median", "mean", "min"}
    symbol : str, optional
        Rank this symbol's combos only.
    sample : {"train", "test"}, optional
        A walk-forward store: the sample ranked (default ``"train"``); the frame then
        has ``window`` and ``sample`` columns after ``symbol``.
    partial : bool
        Rank an incomplete store (given as a path) as it is: its pending blocks take
        no part.
    rung : int, optional
        A search store (dims ``symbol``, ``combo``): rank the combos whose last rung
        is this one (0 first); default the last rung, whose combos ran every bar. The
        frame then has the parameters after ``combo``, and ``rung`` and ``bars_run``
        after the metrics.

    Returns
    -------
    pandas.DataFrame
        One row per combo, best first: ``symbol``, the parameters, every metric.
        Combos whose ``by`` is NaN (excluded, undefined) are never ranked. The order
        (:func:`rank_order`): ruined combos after every other; then, by a metric that
        doing nothing wins, combos that never traded after those that did; then
        infinite values after finite ones; then by ``by``; ties by position.
    """
    _check_rank(by, top, smooth)
    _check_across(across, agg, symbol)
    if ascending is None:
        ascending = by in LOWER_IS_BETTER
    ds, names, dims, done = _opened(results, by in COMPUTED, symbol, sample, partial)
    kind = kind_of(ds)
    refusal = kind.neighbours_refusal("--smooth") if smooth or across else None
    if refusal:
        raise SpecError(refusal)
    where, names = kind.ranked(where, rung), [*names, *kind.ranked_vars()]
    idle_wins = ascending or by in BEST_WHEN_IDLE
    if not (smooth or across):
        chosen, sr0 = stream.stream_top(ds, by, top, where, ascending, idle_wins, dims,
                                        names, done)
        return _frame(ds, chosen, dims, names, sr0)
    best, sr0 = stream_more.stream_smooth_top(ds, by, top, where, ascending, idle_wins,
                                              dims, names, done, smooth, bool(across), agg)
    if across:
        return _across_frame(ds, best, by, agg, smooth, dims)
    frame = _frame(ds, best.position, dims, names, sr0)
    frame[f"{by}_smooth"] = best.score
    return frame


def _opened(results, need: bool, symbol, sample, partial):
    """The selected Dataset of ``results`` read lazily (:func:`.stream.open_store`), the
    metric names the frame shows (``psr`` and ``dsr`` when the store holds their inputs;
    refused when ``need`` and it does not), the dims ranked over, and the block flags
    that hide pending blocks (None for a Dataset given, its pending blocks hidden)."""
    given = isinstance(results, xr.Dataset)
    ds = stream.mark_positions(results) if given else stream.open_store(results,
                                                                         partial=partial)
    if need and not robust.has_dsr_inputs(ds):
        robust.dsr_columns(ds)  # raises, naming what the store lacks
    names = [*METRICS, *COMPUTED] if need or robust.has_dsr_inputs(ds) else list(METRICS)
    ds = select(ds, symbol, sample)
    dims = ("symbol", *param_dims(ds))
    return ds, names, dims, None if given else stream.done_grid(ds, dims)


def _frame(ds: xr.Dataset, chosen: np.ndarray, dims: tuple[str, ...],
           names: Sequence[str], sr0) -> pd.DataFrame:
    """The rows at flat positions ``chosen`` (over ``dims``): the dims' labels, then
    metrics ``names``."""
    index = np.unravel_index(chosen, tuple(ds.sizes[d] for d in dims))
    frame = pd.DataFrame({d: ds[d].values[ix] for d, ix in zip(dims, index)})
    for name, column in stream.frame_columns(ds, chosen, dims, names, sr0).items():
        frame[name] = column
    frame = with_params(ds, frame[[*dims, *names]])
    frame.index = pd.RangeIndex(1, len(frame) + 1, name="rank")
    return frame


def _across_frame(ds, best, by, agg, smooth, dims) -> pd.DataFrame:
    """The rows of parameter combos ranked across symbols: the parameters,
    ``<by>_<agg>`` (and ``<by>_smooth_<agg>``), then ``<by>[<symbol>]`` per symbol."""
    params = dims[1:]
    index = np.unravel_index(best.position, tuple(ds.sizes[d] for d in params))
    frame = pd.DataFrame({d: ds[d].values[ix] for d, ix in zip(params, index)})
    frame[f"{by}_{agg}"] = best.extra.get("total", np.empty(0))
    if smooth:
        frame[f"{by}_smooth_{agg}"] = best.score
    for k, symbol in enumerate(ds["symbol"].values):
        frame[f"{by}[{symbol}]"] = best.extra.get(f"s{k}", np.empty(0))
    frame.index = pd.RangeIndex(1, len(frame) + 1, name="rank")
    return frame


def combo_params(ds: xr.Dataset) -> list[str]:
    """The names that make a ranked row's combo: a search store's parameters, else the
    dims after ``symbol`` (:func:`param_dims`)."""
    return search_params(ds) or list(param_dims(ds))


def _check_rank(by: str, top: int, smooth: int | None) -> None:
    """Refuse an unknown metric, a count below one or a radius that is not a positive int."""
    if by not in METRICS and by not in COMPUTED:
        raise SpecError(f"--by: unknown metric {by!r}; metrics: "
                        f"{', '.join((*METRICS, *COMPUTED))}")
    if top < 1:
        raise SpecError(f"--top: expected a positive count, got {top}")
    if smooth is not None and (isinstance(smooth, bool) or not isinstance(smooth, int)
                               or smooth < 1):
        raise SpecError(f"--smooth: expected a positive radius in grid steps, got {smooth!r}")


def pareto_front(results: str | os.PathLike | xr.Dataset, metrics: Sequence[str],
                 where: str | None = None, *, symbol: str | None = None,
                 sample: str | None = None, across: str | None = None,
                 agg: str = "median", partial: bool = False) -> pd.DataFrame:
    """The non-dominated combos by ``metrics``, each in its own better direction
    (:func:`barsweep.pipeline.analysis.robust.pareto`): one front per symbol (and per window in
    a walk-forward store), each best first by the first metric; with
    ``across="symbol"``, one front of parameter combos by each metric aggregated over
    the symbols with ``agg`` (a combo takes part where every metric is defined on every
    symbol).

    Rows with a NaN metric, or failing ``where``, take no part. ``symbol``,
    ``sample`` and ``partial`` choose as in :func:`rank`. Read slab by slab, a running
    front per group (:mod:`.stream_fronts`).

    Returns
    -------
    pandas.DataFrame
        As :func:`rank`'s: ``symbol`` (and ``window``, ``sample``), the parameters,
        every metric; with ``across``: the parameters, then ``<metric>_<agg>`` for each
        metric.
    """
    metrics = list(metrics)
    ds, names, dims, done = _opened(results, any(m in COMPUTED for m in metrics), None,
                                    None, partial)
    unknown = [m for m in metrics if m not in names]
    if unknown or len(metrics) < 2 or len(set(metrics)) < len(metrics):
        raise SpecError(f"--pareto: expected two or more distinct metrics separated by "
                        f"commas, e.g. sharpe,max_drawdown; got {','.join(metrics)!r}"
                        + (f" (unknown: {', '.join(unknown)})" if unknown else ""))
    _check_across(across, agg, symbol)
    kind = kind_of(ds)
    refusal = kind.neighbours_refusal("--across-pareto") if across else None
    if refusal:
        raise SpecError(refusal)
    where, names = kind.ranked(where), [*names, *kind.ranked_vars()]
    ds = select(ds, symbol, sample)
    dims = ("symbol", *param_dims(ds))
    chosen, values, sr0 = stream_fronts.stream_pareto(ds, metrics, where, dims, names,
                                                      done, bool(across), agg)
    if not across:
        return _frame(ds, chosen, dims, names, sr0)
    params = dims[1:]
    index = np.unravel_index(chosen, tuple(ds.sizes[d] for d in params))
    frame = pd.DataFrame({d: ds[d].values[ix] for d, ix in zip(params, index)})
    for m in metrics:
        frame[f"{m}_{agg}"] = values[m]
    frame.index = pd.RangeIndex(1, len(frame) + 1, name="rank")
    return frame


def pbo_table(results: str | os.PathLike | xr.Dataset, where: str | None = None, *,
              max_splits: int = 5000, seed: int = 0, symbol: str | None = None,
              partial: bool = False) -> list[tuple[dict, robust.PBOResult]]:
    """The probability of backtest overfitting of each symbol's grid (and each window's
    and sample's, where the store has them) from the stored segment sums, read slab by
    slab.

    The trials are the combos with a finite ``sharpe`` that pass ``where``; ``symbol``
    and ``partial`` choose as in :func:`rank`.

    Returns
    -------
    list of (labels, PBOResult)
        ``labels`` maps the non-parameter dims (``symbol``, ...) to the group's values.
    """
    given = isinstance(results, xr.Dataset)
    ds = stream.mark_positions(results) if given else stream.open_store(results,
                                                                         partial=partial)
    ds = select(ds, symbol)
    missing = [n for n in ("seg_sum_r", "seg_sum_r2", "seg_n") if n not in ds.variables]
    refusal = kind_of(ds).pbo_refusal()
    if missing and refusal:
        raise SpecError(refusal)
    if missing:
        raise SpecError(f"--pbo: the results store lacks the segment sums "
                        f"({', '.join(missing)}); rerun the sweep with this version of "
                        f"barsweep")
    dims = ("symbol", *param_dims(ds))
    if where:  # refused up front, naming what it does not know
        check_names(parse_expr(where, strings=True), set(METRICS) | set(dims),
                    what="--where", text=[d for d in dims if ds[d].dtype.kind in "OUST"])
    done = None if given else stream.done_grid(ds, dims)
    groups = [d for d in dims if d in NON_PARAM_DIMS]
    return [({g: _label(ds[g].values[i]) for g, i in zip(groups, group)}, result)
            for group, result in stream_fronts.stream_pbo(ds, where, dims, done,
                                                          max_splits, seed)]


def _check_across(across: str | None, agg: str, symbol: str | None) -> None:
    """SpecError for ``--across``/``--agg``/``--symbol`` that cannot go together."""
    if across is not None and across != "symbol":
        raise SpecError(f"--across: only 'symbol' can be aggregated across, got {across!r}")
    if agg not in AGGREGATES:
        raise SpecError(f"--agg: expected one of {', '.join(AGGREGATES)}, got {agg!r}")
    if across and symbol is not None:
        raise SpecError(f"--symbol {symbol} and --across symbol do not go together: one "
                        f"symbol has nothing to aggregate across")


def _label(value):
    """A coordinate value as a plain Python scalar (for printing and JSON)."""
    return value.item() if isinstance(value, np.generic) else value


def to_records(frame: pd.DataFrame) -> list[dict]:
    """JSON-ready rows: Python scalars; NaN and infinities as None (valid JSON)."""
    records = []
    for row in frame.to_dict(orient="records"):
        clean = {}
        for key, value in row.items():
            if isinstance(value, np.generic):
                value = value.item()
            if isinstance(value, float) and not math.isfinite(value):
                value = None
            clean[key] = value
        records.append(clean)
    return records
