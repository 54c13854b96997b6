"""One combo of a results store in full (``barsweep trades``): chosen by its place in
the ranking or by its parameter values, rebuilt from the stored spec (metrics checked
against the store's), its stats beside buy and hold's, and its trades."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...datasets.timeframes import times_text
from ...engine.backtest import BacktestResult, PortfolioResult, stat_units
from ...errors import ResultsError, SpecError
from ..run.results import open_results
from .rank import combo_params, param_dims
from .rank import rank as ranked
from .rebuild import rebuild_combo, stored_spec, window_view
from .search_views import search_params


@dataclass(frozen=True)
class Combo:
    """A combo of a results store, rebuilt.

    Attributes
    ----------
    symbol : str
    strategy : str
    params : dict
        Every parameter dim's value, as the store's coordinates hold it.
    chosen : str
        How it was chosen, for people: ``rank 1 by sharpe`` or ``by --params``.
    result : BacktestResult or PortfolioResult
        A portfolio store's combo is a PortfolioResult (symbol ``portfolio``).
    """

    symbol: str
    strategy: str
    params: dict
    chosen: str
    result: BacktestResult | PortfolioResult


def combo_backtest(results, params: Mapping | None = None, *, rank: int | None = None,
                   symbol: str | None = None, by: str = "sharpe", where: str | None = None,
                   window: int | None = None, sample: str | None = None) -> Combo:
    """A combo of a results store rebuilt with :func:`barsweep.engine.backtest.single`: the one
    with parameter values ``params``, or number ``rank`` of the ranking by ``by`` among
    those passing ``where`` (``rank 1`` when neither is given).

    Parameters
    ----------
    results : str, os.PathLike or xarray.Dataset
    params : mapping of parameter name to value, optional
        Values as numbers or text (``{"fast": "12"}``); every parameter with more than
        one value in the grid must be named.
    rank : int, optional
    symbol : str, optional
        The symbol: with ``params``, needed when the store holds several; with ``rank``,
        the ranking is of its combos only (of every symbol's when None, the combo's own
        symbol then taken, as ``barsweep plot best`` does).
    by, where : str
        The ranking (with ``rank``), as ``barsweep rank``'s.
    window : int, optional
        A walk-forward store's window (needed there, refused elsewhere): the combo is
        chosen among, and run over, that window's ``sample``.
    sample : {"train", "test"}, optional
        With ``window``; train by default.

    Raises
    ------
    SpecError
        A parameter or value the grid lacks, a combo the constraints exclude, a symbol
        the store lacks (or none named among several), a window the store lacks.
    ResultsError
        A rank past the ranked combos.
    MismatchError
        The rebuilt metrics differ from the store's.
    """
    ds = open_results(results) if isinstance(results, str | os.PathLike) else results
    view, window, sample = window_view(ds, window, sample)
    if params is not None:
        if rank is not None:
            raise SpecError("--rank and --params each choose the combo: give one")
        symbol = one_symbol(ds, symbol)
        chosen = grid_point(view, symbol, params)
        how = "chosen by --params"
    else:
        rank = 1 if rank is None else rank
        across = symbol is None and ds.sizes["symbol"] > 1
        symbol, chosen = ranked_point(view, None if symbol is None else one_symbol(ds, symbol),
                                      rank, by, where)
        how = (f"rank {rank} by {by}" + (f" where {where}" if where else "")
               + (" among every symbol's combos" if across else ""))
    if window is not None:
        how = f"window {window} {sample}, {how}"
    spec, _ = stored_spec(ds, "trades")
    return Combo(symbol=symbol, strategy=spec.strategy_name, params=chosen, chosen=how,
                 result=rebuild_combo(ds, symbol, chosen, "trades", window=window,
                                      sample=sample))


def one_symbol(ds, symbol: str | None) -> str:
    """``symbol``, checked against the store's symbols, or the store's only one."""
    symbols = [str(s) for s in ds["symbol"].values]
    if symbol is None:
        if len(symbols) > 1:
            raise SpecError(f"--symbol: the store holds {len(symbols)} symbols "
                            f"({', '.join(symbols)}); name one, e.g. --symbol {symbols[0]}")
        return symbols[0]
    if symbol not in symbols:
        raise SpecError(f"--symbol: {symbol!r} is not in the store; it holds "
                        f"{', '.join(symbols)}")
    return symbol


def ranked_point(ds, symbol: str | None, rank_n: int, by: str,
                 where: str | None) -> tuple[str, dict]:
    """The symbol and parameter values of combo ``rank_n`` of the ranking: of
    ``symbol``'s combos, or (None) of every symbol's, as ``barsweep rank`` ranks them."""
    if rank_n < 1:
        raise ResultsError(f"--rank: expected 1 or more, got {rank_n}")
    top = ranked(ds, by=by, top=rank_n, where=where, symbol=symbol)
    if len(top) < rank_n:
        passing = f" pass --where {where!r} and" if where else ""
        of = f" of {symbol}" if symbol is not None else ""
        raise ResultsError(f"--rank {rank_n}: only {len(top)} combos{of}{passing} "
                           f"have a defined {by}")
    row = top.iloc[rank_n - 1]
    return str(row["symbol"]), {name: _plain(row[name]) for name in combo_params(ds)}


def parse_params(text: str) -> dict[str, str]:
    """``fast=12,slow=80`` as ``{"fast": "12", "slow": "80"}``."""
    out: dict[str, str] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise SpecError(f"--params: expected NAME=VALUE pairs separated by commas, "
                            f"e.g. fast=12,slow=80; got {text!r}")
        if name in out:
            raise SpecError(f"--params: {name} is given twice in {text!r}")
        out[name] = value
    return out


def grid_point(ds, symbol: str, asked: Mapping) -> dict:
    """The grid's coordinate values for the parameter values ``asked``, refused when a
    name or value is not in the grid or the constraints exclude the combo."""
    if search_params(ds):  # a search store: one of the combos it drew
        from .search_views import search_point

        return search_point(ds, asked, search_params(ds))
    dims = param_dims(ds)
    unknown = [name for name in asked if name not in dims]
    if unknown:
        raise SpecError(f"--params: {unknown[0]!r} is not a parameter of the grid; its "
                        f"parameters: {', '.join(dims)}")
    missing = [name for name in dims if name not in asked and ds.sizes[name] > 1]
    if missing:
        raise SpecError(f"--params: give {' and '.join(missing)} too; "
                        + "; ".join(f"the grid's {name}: {grid_values(ds[name].values)}"
                                    for name in missing))
    point = {}
    for name in dims:
        values = ds[name].values
        at = _position(name, asked[name], values) if name in asked else 0
        point[name] = _plain(values[at])
    n_trades = float(ds["n_trades"].sel(symbol=symbol, **point))
    if math.isnan(n_trades):
        spec, _ = stored_spec(ds, "trades")
        said = ", ".join(f"{k}={_show(v)}" for k, v in point.items())
        rules = "; ".join(spec.constraints) or "none"
        raise SpecError(f"--params {said}: the spec's constraints ({rules}) exclude this "
                        f"combo; choose one they allow")
    return point


def _position(name: str, raw, values: np.ndarray) -> int:
    """Where value ``raw`` (text or a number) sits in coordinate ``values``."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = math.nan
    hits = np.flatnonzero(values == value) if math.isfinite(value) else []
    if len(hits) == 0 and math.isfinite(value) and values.dtype.kind == "f":
        hits = np.flatnonzero(np.isclose(values, value, rtol=1e-9, atol=0.0))
    if len(hits) != 1:
        raise SpecError(f"--params: {name}={raw} is not in the grid; the grid's {name}: "
                        f"{grid_values(values)}")
    return int(hits[0])


def grid_values(values: np.ndarray, most: int = 12) -> str:
    """A coordinate's values for a message: all of them, or the first and last few."""
    shown = [_show(_plain(v)) for v in values]
    if len(shown) > most:
        shown = [*shown[:8], "...", *shown[-3:], f"({len(values)} values)"]
    return ", ".join(shown)


def _show(value) -> str:
    return format(value, ".10g") if isinstance(value, float) else str(value)


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def stats_table(combo: pd.Series, held: pd.Series) -> pd.DataFrame:
    """The combo's ``stats()`` beside buy and hold's, as text for people: one row per
    entry (``buy_and_hold_return`` is the second column's ``total_return``)."""
    names = [n for n in combo.index if n != "buy_and_hold_return"]
    return pd.DataFrame({
        "combo": [format_stat(n, combo[n]) for n in names],
        "buy and hold": [format_stat(n, held[n]) if n in held.index else "" for n in names],
    }, index=pd.Index(names, name=None))


def format_stat(name: str, value) -> str:
    """One entry of ``stats()`` for people, by its units: fractions in percent, cash
    with thousands separators, times to the minute (a midnight as its date),
    durations to the second (whole days as days)."""
    units = stat_units(name)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, pd.Timestamp):
        return times_text([value.value], to_minute=True)[0]
    if isinstance(value, pd.Timedelta):  # whole days (daily bars) without 00:00:00
        whole = value.round("s")
        return f"{whole.days:,} days" if whole == pd.Timedelta(days=whole.days) else str(whole)
    if units == "duration":  # bars without times
        return f"{value:,.1f} bars" if value != int(value) else f"{int(value):,} bars"
    if units in ("fraction", "fraction per year"):
        return f"{value:.2%}"
    if units == "cash":
        return f"{value:,.2f}"
    if units in ("trades", "bars", "time"):
        return f"{int(value):,}"
    return f"{value:.4g}"


def trades_text(trades: pd.DataFrame) -> str:
    """The trades table for people: times (UTC) to the minute, dates when every one is
    at midnight (daily bars), side as long/short, returns in percent; numbered from 1;
    a portfolio's with each trade's symbol first."""
    symbol = {"symbol": trades["symbol"]} if "symbol" in trades.columns else {}
    times = {}
    if isinstance(trades["entry_time"].dtype, pd.DatetimeTZDtype):
        both = times_text(np.concatenate([trades[c].dt.tz_convert(None).to_numpy()
                                          for c in ("entry_time", "exit_time")]),
                          to_minute=True)
        times = {"entry_time": both[:len(trades)], "exit_time": both[len(trades):]}
    table = pd.DataFrame({
        **symbol,
        "entry_time": times.get("entry_time",
                                [format_stat("start", t) for t in trades["entry_time"]]),
        "exit_time": times.get("exit_time",
                               [format_stat("start", t) for t in trades["exit_time"]]),
        "side": np.where(trades["side"] > 0, "long", "short"),
        "entry_price": trades["entry_price"].map("{:,.6g}".format),
        "exit_price": trades["exit_price"].map("{:,.6g}".format),
        "size": trades["size"].map("{:.6g}".format),
        "pnl": trades["pnl"].map("{:,.2f}".format),
        "return": trades["return"].map("{:.2%}".format),
        "bars_held": trades["bars_held"],
        "exit_reason": trades["exit_reason"],
    })
    table.index = pd.RangeIndex(1, len(table) + 1)
    return table.to_string()


def describe(combo: Combo) -> str:
    """The header line: symbol, strategy and parameters, how chosen, the annualisation."""
    said = " ".join(f"{k}={_show(v)}" for k, v in combo.params.items())
    held = getattr(combo.result, "members", None)  # a portfolio: one account, its members
    symbol = combo.symbol if held is None else f"{combo.symbol} of {', '.join(held.index)}"
    named = " ".join(part for part in (symbol, combo.strategy, said) if part)
    return f"{named} ({combo.chosen}), annualised with " \
           f"{combo.result.ppy:,.6g} bars a year; rebuilt from the stored spec, metrics " \
           f"equal to the store's"

