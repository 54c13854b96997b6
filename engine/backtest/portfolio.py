"""One portfolio combo in full: the account's equity and cash, each symbol's shares, the
trades, and a picture; recorded by the sweep's own kernel (:mod:`..core.records`), so
its metrics are the sweep's for that combo."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ...errors import SpecError
from ..core.execution import Execution, execution_of, hold_execution, split_combo
from ..core.metrics import METRICS
from ..core.records import portfolio_record
from ..dispatch import sweep_portfolio
from ..portfolio.orders import SYMBOL_METRICS
from .single import bar_columns, infer_ppy, strategy_of, time_index, trades_frame

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class PortfolioResult:
    """The outcome of :func:`backtest_portfolio`.

    Attributes
    ----------
    metrics : dict[str, float]
        Every metric of ``METRICS``, the account's; equal to the portfolio sweep's for
        the same combo.
    members : pandas.DataFrame
        Per symbol (index): ``n_trades`` and ``exposure``, as the sweep's.
    equity : pandas.Series
        The account's value at each close, indexed by time (UTC) or bar number.
    cash : pandas.Series
        The cash at each close.
    shares : pandas.DataFrame
        Each symbol's shares held at each close (a column per symbol; 0 when flat).
    trades : pandas.DataFrame
        One row per round trip, in the order they closed: ``symbol`` and the columns of
        :attr:`BacktestResult.trades` (side +1 long, -1 short; exit reason signal, stop,
        target, trail, margin, end or ruin).
    close : pandas.DataFrame
        Each symbol's close (a column per symbol).
    execution : Execution
    ppy : float
    max_positions : int or None
    """

    metrics: dict[str, float]
    members: pd.DataFrame
    equity: pd.Series
    cash: pd.Series
    shares: pd.DataFrame
    trades: pd.DataFrame
    close: pd.DataFrame
    execution: Execution
    ppy: float
    max_positions: int | None = None
    # {symbol: bar columns}, times: what buy_and_hold() reruns on
    _bars: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def values(self) -> pd.DataFrame:
        """Each symbol's holding marked at each close: shares x close."""
        return self.shares * self.close

    def stats(self, buy_and_hold: bool = True) -> pd.Series:
        """The summary of this backtest, as :meth:`BacktestResult.stats`; with
        ``buy_and_hold``, ``buy_and_hold_return`` is the equal-weight hold's
        (:meth:`buy_and_hold`)."""
        from .stats import backtest_stats

        bh = self.buy_and_hold().metrics["total_return"] if buy_and_hold else None
        return backtest_stats(self.metrics, self.equity, self.trades,
                              self.execution.init_cash, False, buy_and_hold_return=bh)

    def buy_and_hold(self) -> PortfolioResult:
        """The equal-weight buy and hold of the same symbols over the same bars, with the
        execution settings of :func:`~barsweep.engine.core.execution.hold_execution`
        (long, unlevered, without stops): ``buy_and_hold`` on every symbol from one
        account, each entry ``1 / N`` of the value."""
        if self._bars is None:
            raise SpecError("buy_and_hold(): this PortfolioResult does not hold its bars; "
                            "make it with backtest_portfolio()")
        columns, time, span = self._bars
        at = slice(None) if span is None else slice(*span)  # bought at the span's start
        bars = {s: dict({k: v[at] for k, v in cols.items()},
                        **({} if time is None else {"time": time[at]}))
                for s, cols in columns.items()}
        return backtest_portfolio(bars, "buy_and_hold", ppy=self.ppy,
                                  **hold_execution(self.execution).model_dump())

    def plot(self, path=None, title: str | None = None, hold: PortfolioResult | None = None):
        """The account's equity beside the equal-weight hold's, each symbol's holding
        beneath, and the drawdown; saved as PNG when ``path``. Returns the Figure."""
        from .portfolio_plot import plot_portfolio

        return plot_portfolio(self, path=path, title=title,
                              hold=self.buy_and_hold() if hold is None else hold)


def backtest_portfolio(
    bars,
    strategy,
    params: Mapping[str, float] | None = None,
    *,
    ppy: float | None = None,
    year_days: float | None = None,
    max_positions: int | None = None,
    rebalance: str | None = None,
    weight: str = "equal",
    lookback: int | None = None,
    priority=None,
    span: tuple[int, int] | None = None,
    **execution,
) -> PortfolioResult:
    """Backtest one portfolio combo with full traces (docs/EXECUTION.md, "Portfolios").

    Parameters
    ----------
    bars : mapping of symbol to bars, or xarray.Dataset with a ``symbol`` dim
        Each symbol's bars as :func:`~barsweep.engine.backtest.single` takes them, aligned: the
        same number of bars, and the same times when they carry times.
    strategy : str, Strategy, Rule or mapping
        As :func:`~barsweep.engine.backtest.single`'s.
    params : mapping of parameter name to value
    ppy, year_days : float, optional
        As :func:`~barsweep.engine.backtest.single`'s (measured from the times by default).
    max_positions : int, optional
        At most this many positions open at once, each ``1 / K`` of the value.
    rebalance, weight, lookback, priority
        As :func:`~barsweep.engine.dispatch.sweep_portfolio`'s.
    span : (start, end), optional
        Run over bars ``[start, end)`` only (a walk-forward window's sample): flat with
        ``init_cash`` at ``start``, the indicators warmed up on the bars before, against
        the equal-weight hold bought at ``start``; the traces cover the span. None:
        every bar.
    **execution
        As :func:`~barsweep.engine.dispatch.sweep_portfolio`'s ``execution``: ``fill``,
        the costs, ``init_cash``, the stops, ``direction``, ``funding`` (each symbol's
        ``funding_rate``), ``size``, ``lot``, ``leverage``, ``borrow_rate``,
        ``maintenance_margin`` (docs/EXECUTION.md, "Portfolios").

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> bars = {s: dict(open=c, high=c, low=c, close=c) for s, c in
    ...         (("A", 100 + np.cumsum(rng.normal(size=300))),
    ...          ("B", 100 + np.cumsum(rng.normal(size=300))))}
    >>> res = backtest_portfolio(bars, "ema_cross", dict(fast=5, slow=20), ppy=252,
    ...                          fill="close")
    >>> list(res.shares.columns), len(res.equity), res.metrics["n_trades"] == len(res.trades)
    (['A', 'B'], 300, True)
    """
    exe = execution_of(execution)
    params = dict(params or {})
    strat = strategy_of(strategy, params)
    strat.validate(split_combo(params)[0])  # the execution axes are the combo's settings
    columns, time_ns = _member_columns(bars, exe.funding)
    n_bars = len(next(iter(columns.values()))["close"])
    if n_bars == 0:
        raise SpecError("backtest_portfolio(): the bars are empty; metrics need a bar")
    if ppy is None:
        ppy = infer_ppy(time_ns, year_days)
    start, end = (0, n_bars) if span is None else (int(span[0]), int(span[1]))
    if not 0 <= start < end <= n_bars:
        raise SpecError(f"backtest_portfolio(): span must be (start, end) with 0 <= start "
                        f"< end <= {n_bars}, got {span}")
    record = portfolio_record(len(columns), n_bars)
    one = {name: np.array([value]) for name, value in params.items()}
    timed = columns if time_ns is None or time_ns.dtype != np.int64 else {
        s: dict(c, time=time_ns) for s, c in columns.items()}  # what rebalancing reads
    metrics, per_symbol = sweep_portfolio(strat, timed, one, exe, ppy,
                                          max_positions=max_positions, rebalance=rebalance,
                                          weight=weight, lookback=lookback,
                                          priority=priority, record=record,
                                          spans=None if span is None else [(start, end)])
    if span is not None:  # one span: its run's rows
        metrics, per_symbol = metrics[0], per_symbol[0]
    import pandas as pd  # lazily: the sweep path never needs pandas

    symbols = list(columns)
    index = time_index(time_ns, 0, n_bars)  # the trades' bars index it whole
    values = dict(zip(METRICS, metrics[0].tolist(), strict=True))
    frame = pd.DataFrame  # every column below is this call's own array
    part, at = index[start:end], slice(start, end)
    return PortfolioResult(
        metrics=values,
        members=frame(per_symbol[0], index=pd.Index(symbols, name="symbol"),
                      columns=list(SYMBOL_METRICS)),
        equity=pd.Series(record.equity[at], index=part, name="equity", copy=False),
        cash=pd.Series(record.cash[at], index=part, name="cash", copy=False),
        shares=frame(record.shares[:, at].T, index=part, columns=symbols),
        trades=trades_frame(record.trades[:int(values["n_trades"])], index, 0, symbols),
        close=frame({s: columns[s]["close"][at] for s in symbols}, index=part),
        execution=exe, ppy=float(ppy),
        max_positions=None if max_positions is None else int(max_positions),
        _bars=(columns, time_ns, span))


def _member_columns(bars, funding: bool = False,
                    ) -> tuple[dict[str, dict[str, np.ndarray]], np.ndarray | None]:
    """Each symbol's bar columns (:func:`~barsweep.engine.backtest.single.bar_columns`; its
    funding rates with ``funding``) and the times they share; SpecError when they are not
    aligned."""
    if hasattr(bars, "data_vars") and "symbol" in bars.dims:  # xarray.Dataset
        bars = {str(s): bars.sel(symbol=s) for s in bars["symbol"].values}
    if not isinstance(bars, Mapping) or not bars:
        raise SpecError("backtest_portfolio(): pass the bars as a mapping of symbol to "
                        "bars, at least one symbol")
    columns, times = {}, {}
    for symbol, one in bars.items():
        columns[str(symbol)], times[str(symbol)] = bar_columns(one, funding)
    lengths = {s: len(c["close"]) for s, c in columns.items()}
    first = next(iter(times))
    for symbol, time in times.items():
        same = (time is None) == (times[first] is None) and (
            time is None or np.array_equal(time, times[first]))
        if lengths[symbol] != lengths[first] or not same:
            raise SpecError(f"backtest_portfolio(): the bars of {symbol} and {first} are "
                            f"not aligned ({lengths[symbol]:,} and {lengths[first]:,} bars, "
                            f"or different times): keep the bars they share")
    return columns, times[first]

