"""Walk-forward optimisation: windows, the choice in each train sample, the stitched
out-of-sample result.

A walk-forward run sweeps the grid over every window's train and test bars (the store's
dims ``(symbol, window, sample, *params)``, ``sample`` being ``"train"`` and
``"test"``); :func:`walkforward` then picks, in each window, the best combo in train and
reports its test metrics and the chain of the chosen combos' test runs
(docs/EXECUTION.md, "Walk-forward windows").

The spec's ``walk_forward`` section and the windows it makes are
:mod:`barsweep.pipeline.config.windows`.
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...datasets.timeframes import times_text
from ...engine import BEST_WHEN_IDLE, LOWER_IS_BETTER, METRICS, backtest
from ...engine.analysis import curve_metrics_cpu
from ...engine.core import METRIC_INDEX, N_METRICS, split_combo
from ...errors import DataError, SpecError
from ..config.windows import BOUND_NAMES
from . import stream
from .formatting import metric, param
from .grids import marked
from .kinds import kind_of
from .portfolio_parts import combo_part, member_bars
from .rank import to_records
from .rebuild import stored_bars, stored_spec

__all__ = ["STITCHED_METRICS", "WalkForward", "format_walkforward", "walkforward"]

#: What the stitched out-of-sample curve reports, beyond its extent.
STITCHED_METRICS = ("total_return", "cagr", "sharpe", "max_drawdown", "n_trades")


@dataclass(frozen=True)
class WalkForward:
    """The outcome of :func:`walkforward` for one symbol.

    Attributes
    ----------
    symbol : str
    by : str
        The metric the train samples were ranked by.
    where : str or None
    windows : pandas.DataFrame
        One row per window (index ``window``): its bounds as times (``train_start`` ...
        ``test_end``: first and last bar of each part) and bar indices (``*_bar``, ends
        exclusive); ``chosen`` (whether a combo passed ``where`` with a defined ``by``),
        ``combo`` (its flat index in the grid, -1 when none), its parameters, then
        ``train_<metric>`` and ``test_<metric>`` for every metric.
    stitched : dict
        The chained out-of-sample curve (:func:`walkforward`): ``total_return``,
        ``cagr``, ``sharpe``, ``max_drawdown``, ``n_trades``, ``n_bars``, ``start``,
        ``end``, ``n_windows`` (chained) of ``windows_total``, ``in_sample_cagr``,
        ``efficiency``.
    equity : pandas.Series
        The chained curve, indexed by time, starting from ``init_cash``.
    """

    symbol: str
    by: str
    where: str | None
    windows: pd.DataFrame
    stitched: dict
    equity: pd.Series = field(repr=False)

    def to_json(self) -> dict:
        """``{"symbol", "by", "where", "windows": [...], "stitched": {...}}``, JSON-ready
        (times as ISO strings, NaN as None)."""
        frame = self.windows.reset_index()
        for name in BOUND_NAMES:
            frame[name] = [_iso(t) for t in frame[name]]
        stitched = to_records(pd.DataFrame([{k: _iso(v) if k in ("start", "end") else v
                                             for k, v in self.stitched.items()}]))[0]
        return {"symbol": self.symbol, "by": self.by, "where": self.where,
                "windows": to_records(frame), "stitched": stitched}


def walkforward(results: str | os.PathLike | Any, by: str = "sharpe",
                where: str | None = None, symbol: str | None = None, *,
                bars: Any = None) -> WalkForward:
    """Choose a combo in each window's train sample and chain their test runs.

    Parameters
    ----------
    results : str, os.PathLike or xarray.Dataset
        A walk-forward results store (or the Dataset opened from it): metric variables
        over ``(symbol, window, sample, *params)``, ``sample`` holding ``"train"`` and
        ``"test"``; coordinates over ``window`` (or ``(symbol, window)``)
        ``train_start_bar``, ``train_end_bar``, ``test_start_bar``, ``test_end_bar``
        (ints, ends exclusive) and ``train_start`` ... ``test_end`` (times); attributes
        ``spec`` (the run's spec as YAML) and ``periods_per_year`` (by default that of
        the spec's ``data.timeframe`` and ``data.year_days``).
    by : str
        The metric ranked in train: descending unless lower is better, with
        :func:`barsweep.pipeline.analysis.rank.rank_order`'s rules (NaN never chosen; ruined
        combos, infinite values and, by a metric doing nothing wins, idle combos never
        first; ties to the lower flat index).
    where : str, optional
        A filter over metric and parameter names, evaluated on the train metrics.
    symbol : str, optional
        Required when the store holds several symbols.
    bars : optional
        The symbol's bars (anything :func:`barsweep.engine.backtest.single` takes; for a
        portfolio store, its members' as
        :func:`~barsweep.pipeline.analysis.portfolio_parts.member_bars` gives them); by
        default opened from the spec's ``data`` (store, timeframe, start, end).

    Returns
    -------
    WalkForward

    Notes
    -----
    The stitched curve chains the chosen combos' test runs (``backtest(..., span=)``),
    each compounded where the previous one ended, up to the next chained window's test
    start when test windows overlap; ``efficiency`` is its ``cagr`` over the chosen
    combos' train runs chained likewise (``in_sample_cagr``), NaN unless that is > 0.
    Every rule: docs/EXECUTION.md, "Walk-forward windows".
    """
    ds = marked(results) if hasattr(results, "data_vars") else stream.open_store(results)
    if by not in METRICS:
        raise SpecError(f"--by: unknown metric {by!r}; metrics: {', '.join(METRICS)}")
    kind = kind_of(ds)
    if not kind.walk_forward:
        raise SpecError(f"walkforward: the results store is not a walk-forward run (a "
                        f"{kind.describe()}: its metrics are over "
                        f"{', '.join(ds[METRICS[0]].dims)}; a run with walk_forward has "
                        f"symbol, window, sample, then its combos)")
    params = kind.combo_dims
    # a search chooses among the combos its last rung ran on every train bar
    choose_where = kind.ranked(where)
    symbol = _one_symbol(ds, symbol)
    one = ds.sel(symbol=[symbol])  # dims kept: slabs find their blocks' flags
    ds = ds.sel(symbol=symbol)
    spec, ppy = stored_spec(ds, "walkforward")
    shape = tuple(ds.sizes[p] for p in params)
    bounds = np.stack([np.asarray(ds[f"{n}_bar"].values, dtype=np.int64)
                       for n in BOUND_NAMES], axis=1)
    rows, combos = [], []
    for w in range(ds.sizes["window"]):
        flat = _choose(one.isel(window=[w]).sel(sample=["train"]), by, choose_where,
                       kind.ranked_vars())
        at = dict(zip(params, np.unravel_index(max(flat, 0), shape)))
        combo = None if flat < 0 else kind.combo_at(ds, flat)
        combos.append(combo)
        row = {"window": w, **{n: ds[n].values[w] for n in BOUND_NAMES},
               **{f"{n}_bar": int(bounds[w, i]) for i, n in enumerate(BOUND_NAMES)},
               "chosen": flat >= 0, "combo": flat,
               **{p: None if combo is None else combo[p] for p in kind.params}}
        picked = ds[list(METRICS)].isel(window=w, **at).load()
        for sample in ("train", "test"):
            values = picked.sel(sample=sample)
            row.update({f"{sample}_{m}": float(values[m]) if flat >= 0 else math.nan
                        for m in METRICS})
        rows.append(row)
    windows = pd.DataFrame(rows).set_index("window")
    equity, stitched = _stitch(windows, combos, spec, _test_run(ds, spec, bars, symbol, ppy),
                               ppy)
    return WalkForward(symbol=symbol, by=by, where=where, windows=windows,
                       stitched=stitched, equity=equity)


def _one_symbol(ds, symbol: str | None) -> str:
    """The symbol to report: ``symbol``, or the store's only one."""
    symbols = [str(s) for s in ds["symbol"].values]
    if symbol is None:
        if len(symbols) != 1:
            raise SpecError(f"walkforward: the store holds {len(symbols)} symbols "
                            f"({', '.join(symbols)}); name one (--symbol SYMBOL)")
        return symbols[0]
    if symbol not in symbols:
        raise SpecError(f"walkforward: symbol {symbol!r} is not in the store; it holds "
                        f"{', '.join(symbols)}")
    return symbol


def _choose(train, by: str, where: str | None, more: tuple[str, ...] = ()) -> int:
    """The flat index over the parameters of the best combo of ``train`` (one symbol's,
    window's and train sample's grid, those dims kept as length 1, marked by
    :func:`~.stream.mark_positions` before the selection) by rank's rules, or -1 when
    none qualifies; read slab by slab (:func:`~.stream.stream_top`)."""
    dims = tuple(train[METRICS[0]].dims)
    ascending = by in LOWER_IS_BETTER
    done = stream.done_grid(train, dims) if "done" in train.variables else None
    names = [*METRICS, *more]  # a search's rung: its choice is among its last rung's
    chosen, _ = stream.stream_top(train, by, 1, where, ascending,
                                  ascending or by in BEST_WHEN_IDLE, dims, names, done)
    return int(chosen[0]) if len(chosen) else -1


def _test_run(ds, spec, bars, symbol: str, ppy: float):
    """The function ``(combo, (start, end)) -> (equity, n_trades)`` of a chosen combo's
    run over bars ``[start, end)``: ``backtest(..., span=)`` on the symbol's bars, or a
    portfolio store's account over its members' bars (:func:`.portfolio_parts.combo_part`;
    ``bars`` then as :func:`.portfolio_parts.member_bars` gives them)."""
    if kind_of(ds).portfolio:
        members, index = member_bars(spec) if bars is None else bars
        return lambda combo, span: combo_part(spec, members, index, combo, span, ppy)
    bars = stored_bars(spec, symbol) if bars is None else bars
    execution = spec.execution.model_dump()

    def run(combo, span):
        strategy_params, stops = split_combo(combo)
        result = backtest(bars, spec.strategy_def, strategy_params, ppy=ppy, span=span,
                          **{**execution, **stops})
        return result.equity, result.metrics["n_trades"]
    return run


def _stitch(windows: pd.DataFrame, combos: list, spec, test_run,
            ppy: float) -> tuple[pd.Series, dict]:
    """The chained test curve of the chosen combos (``combos[w]``, None where window w
    has no choice; ``test_run`` of :func:`_test_run`) and its summary (see
    :func:`walkforward`)."""
    init_cash = float(spec.execution.init_cash)
    chosen = [w for w, combo in enumerate(combos) if combo is not None]
    starts = windows["test_start_bar"].to_numpy()
    ends = windows["test_end_bar"].to_numpy()
    parts, indexes, n_trades, level = [], [], 0.0, 1.0
    for k, w in enumerate(chosen):
        end = int(ends[w]) if k + 1 == len(chosen) else min(int(ends[w]),
                                                            int(starts[chosen[k + 1]]))
        run, trades = test_run(combos[w], (int(starts[w]), end))
        _check_bars(run.index, windows["test_start"].iloc[w], w, int(starts[w]))
        growth = level * (run.to_numpy() / init_cash)  # this run, compounded on
        level = float(growth[-1])
        parts.append(growth)
        indexes.append(run.index)
        n_trades += trades
    growth = np.concatenate(parts) if parts else np.empty(0)
    index = indexes[0].append(indexes[1:]) if indexes else pd.DatetimeIndex([], name="time")
    equity = pd.Series(init_cash * growth, index=index, name="equity")
    n = len(growth)
    stitched = {"n_windows": len(chosen), "windows_total": len(windows), "n_bars": n,
                "start": index[0] if n else None, "end": index[-1] if n else None}
    stitched.update(_curve_metrics(growth, ppy))
    stitched["n_trades"] = n_trades
    picked = windows.iloc[chosen]
    tr = picked["train_total_return"].to_numpy()
    train_bars = int((picked["train_end_bar"] - picked["train_start_bar"]).sum())
    in_growth = float(np.prod(1.0 + tr)) if len(tr) else math.nan
    in_cagr = in_growth ** (ppy / train_bars) - 1.0 if in_growth >= 0.0 else math.nan
    stitched["in_sample_cagr"] = in_cagr
    stitched["efficiency"] = stitched["cagr"] / in_cagr if in_cagr > 0.0 else math.nan
    return equity, stitched


def _check_bars(index, stored, w: int, bar: int) -> None:
    """Refuse bars whose time at a window's first test bar is not the store's."""
    if isinstance(index, pd.DatetimeIndex) and not pd.isna(stored):
        first, stored = index[0].tz_convert(None), pd.Timestamp(stored).tz_localize(None)
        if first != stored:
            raise DataError(f"walkforward: the bars are not the run's: window {w} tests from "
                            f"bar {bar}, at {stored} in the results store and at {first} in "
                            f"the bars; open the bars the run swept (its spec's data)")


def _curve_metrics(growth: np.ndarray, ppy: float) -> dict:
    """total_return, cagr, sharpe, max_drawdown of an equity curve ``growth`` (in units
    of the starting cash), by the engine's accumulators and ``metrics.finalize``
    (:func:`~barsweep.engine.analysis.curve_metrics_cpu`); NaN for an empty curve."""
    if not len(growth):
        return dict.fromkeys(_CURVE_METRICS, math.nan)
    out = np.empty(N_METRICS)
    curve_metrics_cpu(np.ascontiguousarray(growth, dtype=np.float64), float(ppy), out)
    return {name: float(out[METRIC_INDEX[name]]) for name in _CURVE_METRICS}


_CURVE_METRICS = ("total_return", "cagr", "sharpe", "max_drawdown")


def format_walkforward(wf: WalkForward) -> str:
    """The CLI's text: one line per window (bounds, choice, train ``by``, test metrics),
    then the stitched out-of-sample lines."""
    frame = wf.windows
    s = wf.stitched
    params = [c for c in frame.columns if c not in _FIXED_COLUMNS]
    bounds = ("train_start", "train_end", "test_start", "test_end")
    n = len(frame)
    texts = bound_texts([v for b in bounds for v in frame[b]] + [s["start"], s["end"]])
    day = {b: texts[i * n:(i + 1) * n] for i, b in enumerate(bounds)}
    table = pd.DataFrame({
        "train": [f"{a}..{b}" for a, b in zip(day["train_start"], day["train_end"])],
        "test": [f"{a}..{b}" for a, b in zip(day["test_start"], day["test_end"])],
    }, index=frame.index)
    for p in params:
        table[p] = [param(v) if ok else "-" for v, ok in zip(frame[p], frame["chosen"])]
    table[f"train {wf.by}"] = [metric(wf.by, v) for v in frame[f"train_{wf.by}"]]
    for m in dict.fromkeys((wf.by, "total_return", "sharpe", "max_drawdown", "n_trades")):
        table[f"test {m}"] = [metric(m, v) for v in frame[f"test_{m}"]]
    lines = [f"walk-forward of {wf.symbol}: best train {wf.by}"
             + (f" where {wf.where}" if wf.where else ""),
             table.to_string(), "",
             f"stitched out of sample: {s['n_windows']} of {s['windows_total']} windows, "
             f"{s['n_bars']:,} bars ({texts[-2]}..{texts[-1]})"]
    for key in (*STITCHED_METRICS, "in_sample_cagr", "efficiency"):
        lines.append(f"  {key:<15}{metric(key.replace('in_sample_', ''), s[key])}")
    return "\n".join(lines)


_FIXED_COLUMNS = frozenset({*BOUND_NAMES, *(f"{n}_bar" for n in BOUND_NAMES), "chosen", "combo",
                            *(f"{s}_{m}" for s in ("train", "test") for m in METRICS)})


def _scalar(value):
    return value.item() if isinstance(value, np.generic) else value


def _iso(value) -> str | int | None:
    """A time as ISO text; a bar number (bars without times) as it is; None for none."""
    if value is None or pd.isna(value):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    return pd.Timestamp(value).isoformat()


def bound_texts(values) -> list[str]:
    """Window bounds for people, as one column shows them (:func:`times_text`: dates on
    daily bars, else to the minute or second); a bar number (bars without times) as it
    is; ``-`` for none."""
    def none(v) -> bool:
        return v is None or bool(pd.isna(v))

    stamps = [pd.Timestamp(v).value for v in values
              if not none(v) and not isinstance(v, numbers.Integral)]
    texts = iter(times_text(np.asarray(stamps, dtype=np.int64)))
    return ["-" if none(v) else str(int(v)) if isinstance(v, numbers.Integral) else next(texts)
            for v in values]
