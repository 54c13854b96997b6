"""Buy and hold of each symbol beside a results store's combos: the reference a ranked
combo is read against.

A portfolio store's one row (``symbol`` portfolio; one per window and sample of a
walk-forward one) is the equal-weight buy and hold of its members: ``1 / N`` of the
account bought in each at the first bar (of the part) and held
(:func:`barsweep.engine.sweep_portfolio` of ``buy_and_hold``), with the run's
fill, fees and cash.

Computed, not stored: for each symbol, the ``buy_and_hold`` strategy through
:func:`barsweep.engine.backtest.single` over the bars the run used (the stored spec's store and
range, checked against the run's fingerprint), with the run's fill, fees, slippage,
fixed fee, initial cash and funding (long, all-in, unlevered, at market; no stop, target
or trailing stop: :func:`barsweep.engine.core.execution.hold_execution`) and
the store's ``periods_per_year``. In a walk-forward store, once per window and sample,
over that part's bars, as the combos ran.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from ...engine import METRICS, backtest
from ...engine.core import hold_execution
from ...errors import BarsweepError, DataError
from ..config.dims import NON_PARAM_DIMS
from .kinds import kind_of, rung_span
from .rebuild import stored_bars, stored_spec

#: What a buy-and-hold row shows in the parameter columns of a table.
LABEL = "buy&hold"

def buy_and_hold(ds, groups: Iterable[Mapping] | None = None) -> pd.DataFrame:
    """Buy and hold of each symbol of a results Dataset (each group of a walk-forward
    one).

    Parameters
    ----------
    ds : xarray.Dataset
        A results store as opened (attributes ``spec``, ``periods_per_year``,
        ``bars_fingerprint``; a walk-forward store's ``<sample>_start_bar`` and
        ``<sample>_end_bar`` coordinates over ``window``).
    groups : iterable of mapping, optional
        The rows wanted: each maps ``symbol`` (and ``window``, ``sample`` in a
        walk-forward store; ``bars_run`` in a search store, the bars of the rung its
        combos ran: the last ones) to a label. Default: every symbol of ``ds`` (every
        window and sample of it in a walk-forward store).

    Returns
    -------
    pandas.DataFrame
        One row per group, in order: the group's labels, then every metric.

    Raises
    ------
    BarsweepError
        The store has no spec, its bars are gone or are not the run's (naming the
        symbol): a buy-and-hold row would not be the run's reference.
    """
    spec, ppy = stored_spec(ds, "buy and hold", strategy=False)
    kind = kind_of(ds)
    walk = kind.walk_forward
    if groups is None:
        groups = [{"symbol": s, **({"window": w, "sample": p} if walk else {})}
                  for s in ds["symbol"].values.tolist()
                  for w in (ds["window"].values.tolist() if walk else [None])
                  for p in (ds["sample"].values.tolist() if walk else [None])]
    groups = list(groups)
    execution = _execution(spec)
    bars, rows = {}, []
    for group in groups:
        symbol = str(group["symbol"])
        span = None
        if walk:
            w = int(np.flatnonzero(ds["window"].values == group["window"])[0])
            span = tuple(int(_at(ds, f"{group['sample']}_{end}_bar", symbol, w))
                         for end in ("start", "end"))
        if "bars_run" in group:  # a search rung: the lane's last bars_run bars, as it ran
            n = int(np.ravel(ds["n_bars"].values)[0 if kind.portfolio else
                                                  ds["symbol"].values.tolist().index(symbol)])
            span = rung_span(span, int(group["bars_run"]), n)
        if kind.portfolio:
            rows.append({**group, **portfolio_hold(ds, spec, ppy, execution, span)})
            continue
        if symbol not in bars:
            bars[symbol] = _run_bars(ds, spec, symbol)
        result = _hold(bars[symbol], span, ppy, execution)
        rows.append({**group, **{m: result.metrics[m] for m in METRICS}})
    return pd.DataFrame(rows, columns=[*(groups[0] if groups else ["symbol"]), *METRICS])


def buy_and_hold_run(ds, symbol: str, span: tuple[int, int] | None = None):
    """Buy and hold of ``symbol`` over the run's bars (``span``: bars ``[start, end)``
    of them), as :func:`buy_and_hold` runs it: the
    :class:`~barsweep.engine.backtest.single.BacktestResult`."""
    spec, ppy = stored_spec(ds, "buy and hold", strategy=False)
    return _hold(_run_bars(ds, spec, symbol), span, ppy, _execution(spec))


def _hold(bars, span, ppy: float, execution: dict):
    """Buy and hold over ``bars`` (bars ``[start, end)`` of them with ``span``): the
    strategy enters on the first bar it sees, so a span is cut from the bars."""
    if span is not None:
        bars = bars.isel(time=slice(*span))
    return backtest(bars, "buy_and_hold", {}, ppy=ppy, **execution)


def portfolio_hold(ds, spec, ppy: float, execution: dict,
                   span: tuple[int, int] | None = None) -> dict[str, float]:
    """The metrics of the equal-weight buy and hold of a portfolio store's members
    (``spec.data.symbols``) over the bars the run used (``span``: bars ``[start, end)``
    of them, bought at the first)."""
    from ...engine import get_strategy, sweep_portfolio

    part = slice(None) if span is None else slice(*span)
    bars = {}
    for symbol in spec.data.symbols:
        ds_bars = _run_bars(ds, spec, symbol)
        bars[symbol] = {k: ds_bars[k].values.ravel()[part]
                        for k in ("open", "high", "low", "close", "funding_rate")
                        if k in ds_bars}  # the funding rate: what execution.funding reads
    metrics, _ = sweep_portfolio(get_strategy("buy_and_hold"), bars, {}, execution, ppy)
    return dict(zip(METRICS, metrics[0].tolist(), strict=True))


def _execution(spec) -> dict:
    """The run's execution settings as buy and hold takes them
    (:func:`~barsweep.engine.core.execution.hold_execution`: long, all-in, unlevered,
    no stops)."""
    return hold_execution(spec.execution).model_dump()


def _run_bars(ds, spec, symbol: str):
    """``symbol``'s bars as the run read them, refused when they are not the run's."""
    from ...datasets import fingerprint

    files = json.loads(ds.attrs.get("bars_fingerprint", "{}") or "{}").get("files", [])
    recorded = next((f for f in files if f.get("symbol") == symbol), None)
    try:
        now = fingerprint(spec.data.store, [symbol], spec.data.timeframe)["files"][0]
    except BarsweepError as err:
        raise DataError(f"buy and hold of {symbol}: {err}") from None
    if recorded is not None and now.get("blake2b") != recorded.get("blake2b"):
        raise DataError(f"buy and hold of {symbol}: its bars in {spec.data.store} are not "
                        f"the ones the run used (their hash changed since)")
    return stored_bars(spec, symbol)


def _at(ds, name: str, symbol: str, w: int):
    """Coordinate ``name`` of window ``w`` (over ``window``, or ``(symbol, window)``)."""
    coord = ds[name]
    if "symbol" in coord.dims:
        coord = coord.sel(symbol=symbol)
    return coord.values[w]


def groups_of(frame: pd.DataFrame) -> list[dict]:
    """The distinct ``symbol`` (``window``, ``sample``; a search store's ``bars_run``)
    labels of a ranking's rows, in the order they first appear: the buy-and-hold rows
    that go beside them, each over the bars its rows ran."""
    keys = [k for k in (*NON_PARAM_DIMS, "bars_run") if k in frame.columns]
    seen = dict.fromkeys(tuple(row) for row in frame[keys].itertuples(index=False))
    return [dict(zip(keys, (v.item() if isinstance(v, np.generic) else v for v in labels)))
            for labels in seen]


def stitched_hold(ds, wf):
    """Buy and hold of a walk-forward's symbol over the bars its stitched out-of-sample
    curve covers (first chained test bar to the last; a BacktestResult, for a portfolio
    store the members' equal-weight hold as a
    :class:`~barsweep.pipeline.analysis.portfolio_parts.Part`), or None when no window
    chose."""
    chosen = wf.windows[wf.windows["chosen"]]
    if not len(chosen):
        return None
    span = (int(chosen["test_start_bar"].iloc[0]), int(chosen["test_end_bar"].iloc[-1]))
    if kind_of(ds).portfolio:  # the members' equal-weight hold: its equity and metrics
        from .portfolio_parts import hold_part, member_bars

        spec, ppy = stored_spec(ds, "buy and hold", strategy=False)
        return hold_part(*member_bars(spec), span, ppy, _execution(spec))
    return buy_and_hold_run(ds, wf.symbol, span)
