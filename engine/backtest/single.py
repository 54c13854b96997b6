"""One combo in full: metrics, the equity curve, the trades table and a plot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ...errors import SpecError
from ..core.execution import Execution, execution_of, hold_execution, split_combo
from ..core.fills import EXIT_REASONS
from ..core.hoist import hoist
from ..core.inputs import BAR_COLUMNS, KernelInputs, prepare_inputs
from ..core.metrics import METRICS, N_METRICS
from ..core.records import symbol_record
from ..core.simulate import Outputs, no_segments
from ..core.year import bars_in_year, bars_per_year
from ..rules import Rule, compile_rule
from ..strategies import get_strategy
from ..strategies.base import Strategy

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class BacktestResult:
    """The outcome of :func:`backtest`.

    Attributes
    ----------
    metrics : dict[str, float]
        Every metric of ``METRICS``; equal to the sweep kernel's for the same combo.
    equity : pandas.Series
        Equity marked at each close, indexed by time (UTC) when the bars have times;
        never below zero (0 from a ruin on).
    trades : pandas.DataFrame
        One row per round trip: entry/exit time, bar and price, side (+1 long, -1
        short), size, pnl, return, bars held and exit reason (signal, stop, target,
        trail, end or ruin: equity reached zero, see docs/EXECUTION.md).
    close : pandas.Series
        The close prices, for plotting.
    execution : Execution or None
        The execution settings the combo ran with (its stops included).
    ppy : float or None
        Bars per year the metrics were annualised with.
    """

    metrics: dict[str, float]
    equity: pd.Series
    trades: pd.DataFrame
    close: pd.Series
    execution: Execution | None = None
    ppy: float | None = None
    # (bar columns, times, start, end): what buy_and_hold() reruns on
    _bars: tuple | None = field(default=None, repr=False, compare=False)

    def stats(self, buy_and_hold: bool = True) -> pd.Series:
        """The summary of this backtest, as backtesting.py's and vectorbt's ``stats()``.

        Every metric (fractions, not percent), and ``start``, ``end``, ``duration``,
        ``n_bars``, ``init_cash``, ``equity_final``, ``equity_peak``,
        ``buy_and_hold_return``, ``max_drawdown_duration``, ``n_open_trades``,
        ``best_trade``, ``worst_trade``, ``avg_winning_trade``, ``avg_losing_trade``,
        ``avg_trade_duration``, ``max_trade_duration``, ``sqn`` and ``fees_paid``
        (each described in :data:`barsweep.engine.backtest.stats.STATS_INFO`). Times and
        durations are pandas Timestamps and Timedeltas when the bars carry times.

        Parameters
        ----------
        buy_and_hold : bool
            Include ``buy_and_hold_return`` (runs :meth:`buy_and_hold`).

        Returns
        -------
        pandas.Series, dtype object, in the order of
        :data:`barsweep.engine.backtest.stats.STATS`.

        Examples
        --------
        >>> import numpy as np
        >>> from barsweep.engine import backtest
        >>> close = 100 + np.cumsum(np.random.default_rng(0).normal(size=500))
        >>> res = backtest(dict(open=close, high=close, low=close, close=close),
        ...                "ema_cross", dict(fast=5, slow=20), ppy=252, fill="close")
        >>> s = res.stats()
        >>> s["n_bars"], s["n_trades"] == len(res.trades)
        (500, True)
        """
        from .stats import backtest_stats

        exe = self.execution or Execution()
        bh = self.buy_and_hold().metrics["total_return"] if buy_and_hold else None
        return backtest_stats(self.metrics, self.equity, self.trades, exe.init_cash,
                              exe.funding, buy_and_hold_return=bh)

    def buy_and_hold(self) -> BacktestResult:
        """The ``buy_and_hold`` strategy over the same bars, with the same bars per year
        and the execution settings of :func:`~barsweep.engine.core.execution.
        hold_execution` (long, all-in, unlevered, without stops): entered on the first
        bar (at its close, or the next open), held to the last."""
        if self._bars is None or self.execution is None:
            raise SpecError("buy_and_hold(): this BacktestResult does not hold its bars; "
                            "make it with backtest()")
        columns, time, start, end = self._bars
        bars = {name: column[start:end] for name, column in columns.items()}
        if time is not None:
            bars["time"] = time[start:end]
        return backtest(bars, "buy_and_hold", ppy=self.ppy,
                        **hold_execution(self.execution).model_dump())

    def plot(self, path=None, title: str | None = None):
        """Price with entries/exits, equity, and drawdown; saved as PNG when ``path``.

        Returns the matplotlib Figure (matplotlib must be installed).
        """
        from .plot import plot_backtest

        return plot_backtest(self, path=path, title=title)


def backtest(
    bars,
    strategy: str | Strategy | Rule | Mapping,
    params: Mapping[str, float] | None = None,
    *,
    ppy: float | None = None,
    year_days: float | None = None,
    span: tuple[int, int] | None = None,
    **execution,
) -> BacktestResult:
    """Backtest one combo with full traces.

    Parameters
    ----------
    bars : xarray.Dataset (one symbol, from ``open_bars``), pandas.DataFrame or mapping
        Columns ``open``, ``high``, ``low``, ``close`` (and ``funding_rate`` with
        ``funding=True``); times from the ``time`` coordinate/index (int64 ns or
        datetime64), optional for a mapping.
    strategy : str, Strategy, Rule or mapping
        A registered strategy's name, a Strategy, or rules (``{"entry": ..., "exit":
        ...}``, docs/RULES.md) whose parameters are the keys of ``params`` (int where the
        value is a whole number).
    params : mapping of parameter name to value
    ppy : float, optional
        Bars per year; by default ``year_days * 1 day / median bar spacing``, or,
        without ``year_days``, measured from the bars' times as a run measures them
        (:func:`~barsweep.engine.core.year.bars_per_year`: 365 days of bars for bars on every
        day, else the bars counted per calendar year, ~252 for daily stocks).
    year_days : float, optional
        365 for markets that trade every day, 252 for daily equities.
    span : (start, end), optional
        Run over bars ``[start, end)`` only, as one walk-forward window: flat with
        ``init_cash`` at ``start``, the indicators warmed up on the bars before it; the
        metrics, equity and trades are those of that run (bar numbers stay the series').
    **execution
        ``fill``, ``fees``, ``fixed_fee``, ``slippage``, ``init_cash``, ``direction``,
        ``stop_loss``, ``take_profit``, ``trailing_stop``, ``funding`` (see
        :class:`Execution`).

    Examples
    --------
    >>> import numpy as np
    >>> from barsweep.engine import backtest
    >>> close = 100 + np.cumsum(np.random.default_rng(0).normal(size=500))
    >>> res = backtest(dict(open=close, high=close, low=close, close=close), "ema_cross",
    ...                dict(fast=5, slow=20), ppy=252, fill="close", fees=0.001)
    >>> sorted(res.metrics)[:3]
    ['alpha', 'avg_trade_return', 'beta']
    """
    exe = execution_of(execution)
    params = dict(params or {})
    strat = strategy_of(strategy, params)
    strat.validate(split_combo(params)[0])  # the execution axes are the combo's settings

    columns, time_ns = bar_columns(bars, exe.funding)
    if len(columns["close"]) == 0:
        raise SpecError("backtest(): the bars are empty; metrics need at least one bar")
    if ppy is None:
        ppy = infer_ppy(time_ns, year_days)
    one = {name: np.array([value]) for name, value in params.items()}
    inputs = prepare_inputs(strat, columns, one, exe, ppy)
    n_bars = len(inputs.bars.close)
    start, end = (0, n_bars) if span is None else (int(span[0]), int(span[1]))
    if not 0 <= start < end <= n_bars:
        raise SpecError(f"backtest(): span must be (start, end) with 0 <= start < end <= "
                        f"{n_bars}, got {span}")
    run_span = None if span is None else (start, end)
    metrics, rec_equity, rec_trades = _run_one(strat, inputs, run_span)

    import pandas as pd  # lazily: the sweep path never needs pandas

    index = time_index(time_ns, start, end)
    # rec_equity is this call's own buffer: the Series keeps it; close is the caller's, copied
    equity = pd.Series(rec_equity[start:end], index=index, name="equity", copy=False)
    trades = trades_frame(rec_trades, index, start)
    return BacktestResult(metrics=metrics, equity=equity, trades=trades,
                          close=pd.Series(inputs.bars.close[start:end], index=index,
                                          name="close"),
                          execution=exe, ppy=float(ppy),
                          _bars=(columns, time_ns, start, end))


def strategy_of(strategy, params: Mapping[str, float]) -> Strategy:
    """The Strategy that ``backtest`` runs: registered, given, or compiled from rules
    (the parameters other than the stops are theirs)."""
    if isinstance(strategy, str):
        return get_strategy(strategy)
    if isinstance(strategy, Strategy):
        return strategy
    strategy_params, _ = split_combo(params)
    kinds = {k: "int" if float(v).is_integer() else "float" for k, v in strategy_params.items()}
    return compile_rule(strategy, kinds)


def _run_one(strategy: Strategy, inputs: KernelInputs,
             span: tuple[int, int] | None) -> tuple[dict[str, float], np.ndarray, np.ndarray]:
    """Run the one combo of ``inputs`` over bars ``span`` (None: every bar), recording: its
    metrics by name, its equity at each close (shape (n_bars,), written over the span)
    and its trades (shape (n_trades,), :data:`~barsweep.engine.core.records.trade_dt`)."""
    ind, rows = hoist(strategy, inputs.columns, inputs.strategy_params, 1)
    out = Outputs(np.empty((1, N_METRICS)), no_segments(1))
    rec = symbol_record(len(inputs.bars.close))
    run = inputs.runs(None if span is None else [span])[0]
    strategy.kernel(inputs.bars, ind, inputs.combos(rows), run, out, rec)
    metrics = dict(zip(METRICS, out.metrics[0].tolist()))
    return metrics, rec.equity, rec.trades[: int(metrics["n_trades"])]


def bar_columns(bars, funding: bool) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """Bar columns as 1-D arrays and the times: int64 ns for datetime64 and integer
    times, other times (floats, strings) as given, None without times."""
    names = BAR_COLUMNS + ("volume",) + (("funding_rate",) if funding else ())
    if hasattr(bars, "data_vars"):  # xarray.Dataset
        if "symbol" in bars.dims:
            if bars.sizes["symbol"] != 1:
                raise SpecError("backtest() takes one symbol; select it with ds.sel(symbol=...)")
            bars = bars.isel(symbol=0)
        time = bars["time"].values if "time" in bars.coords else None
        cols = {c: bars[c].values for c in names if c in bars}
    elif type(bars).__name__ == "DataFrame":  # pandas, without importing it
        cols = {c: bars[c].to_numpy() for c in names if c in bars.columns}
        time = bars.index.values if bars.index.dtype.kind == "M" else None
        if time is None and "time" in bars.columns:
            time = bars["time"].to_numpy()
    else:
        cols = {c: np.asarray(bars[c]) for c in names if c in bars}
        time = np.asarray(bars["time"]) if "time" in bars else None
    missing = [c for c in BAR_COLUMNS if c not in cols]
    if missing:
        raise SpecError(f"backtest(): the bars lack columns {missing}")
    if time is not None:
        time = np.asarray(time)
        if np.issubdtype(time.dtype, np.datetime64):
            time = time.astype("datetime64[ns]", copy=False).view(np.int64)
        elif time.dtype.kind in "iu":
            time = time.astype(np.int64, copy=False)
        if time.dtype == np.int64:  # the calendar's source (engine/core/calendar.py)
            cols["time"] = time
    return cols, time


def infer_ppy(time_ns: np.ndarray | None, year_days: float | None) -> float:
    if time_ns is None or len(time_ns) < 2:
        raise SpecError("backtest(): pass ppy= (bars per year); the bars carry no times")
    steps = np.diff(time_ns)
    lowest, highest = steps.min(), steps.max()
    # evenly spaced bars (the usual case) need no sort for their median
    step_ns = float(lowest) if lowest == highest else float(np.median(steps))
    if year_days is None:
        return bars_per_year(time_ns, step_ns)[0]
    return bars_in_year(step_ns, year_days)


def time_index(time, start: int, end: int):
    """The pandas index of bars ``[start, end)``, named ``time``: UTC times, or the bar
    numbers when the bars carry no times.

    int64 ns are viewed as datetime64[ns] and localized to UTC, 0.7 ms for 1M bars
    (``pd.to_datetime`` of the int64 goes through Python objects, and with ``unit="ns"``
    it takes 6 ms). Only bars ``[start, end)`` are
    converted. Other times (floats, strings) are parsed by ``pd.to_datetime``.
    """
    import pandas as pd

    if time is None:
        return pd.RangeIndex(start, end, name="time")
    if time.dtype == np.int64:
        return pd.DatetimeIndex(time[start:end].view("datetime64[ns]"), tz="UTC", name="time")
    return pd.to_datetime(time, utc=True).rename("time")[start:end]


_EXIT_REASONS = np.array(EXIT_REASONS, dtype=object)


def trades_frame(trades: np.ndarray, index, start: int = 0,
                 symbols: list[str] | None = None):
    """The trades table from the rows a kernel recorded, ``trades`` (shape (n_trades,),
    :data:`~barsweep.engine.core.records.trade_dt`); ``index`` is :func:`time_index` of
    bars ``[start, ...)``. With ``symbols`` (a portfolio's members), a first column
    ``symbol`` names each trade's."""
    import pandas as pd

    # each field copied out of the record (contiguous, and the record's room let go)
    entry_bar = trades["entry_bar"].copy()
    exit_bar = trades["exit_bar"].copy()
    columns = {} if symbols is None else {
        "symbol": np.array(symbols, dtype=object)[trades["symbol"]].tolist()}
    columns.update({
        "entry_time": index[entry_bar - start],
        "exit_time": index[exit_bar - start],
        "entry_bar": entry_bar,
        "exit_bar": exit_bar,
        "side": trades["side"].copy(),
        "entry_price": trades["entry_price"].copy(),
        "exit_price": trades["exit_price"].copy(),
        "size": trades["size"].copy(),
        "pnl": trades["pnl"].copy(),
        "return": trades["return"].copy(),
        "bars_held": exit_bar - entry_bar,
        "exit_reason": _EXIT_REASONS[trades["exit_reason"]].tolist(),
    })
    return pd.DataFrame(columns, copy=False)  # every column is this call's own array
