"""BacktestResult.stats(): each entry recomputed here from ``res.equity`` and
``res.trades`` with plain loops, and checked against vectorbt's ``Portfolio.stats()``
for the same signals."""

import math
import statistics

import numpy as np
import pandas as pd
import pytest
from helpers.bars import random_bars

from barsweep.engine import METRICS, backtest, ema
from barsweep.engine.backtest.stats import STATS, STATS_INFO
from barsweep.engine.core.simulate import cross_above, cross_below

PPY = 8760.0
FEES = 0.001


def loop_drawdown_duration(equity: pd.Series):
    """The longest peak-to-recovery (or peak-to-last-bar) stretch, bar by bar."""
    times = list(equity.index)
    values = list(equity)
    longest = times[0] - times[0]
    peak_at, peak = 0, values[0]
    for t in range(1, len(values)):
        if values[t] >= peak:
            longest = max(longest, times[t] - times[peak_at])
            peak_at, peak = t, values[t]
    return max(longest, times[-1] - times[peak_at])


def loop_fees(trades: pd.DataFrame, fee_rate: float, fixed_fee: float) -> float:
    """Fees charged on each fill: the entry's, and the exit's unless the trade is still
    open at the end (marked to market without an exit fee)."""
    total = 0.0
    for row in trades.itertuples():
        total += row.size * row.entry_price * fee_rate + fixed_fee
        if row.exit_reason != "end":
            total += row.size * row.exit_price * fee_rate + fixed_fee
    return total


@pytest.mark.parametrize("fill, stop", [("close", None), ("next_open", 0.02)])
def test_stats_equal_what_equity_and_trades_say(fill, stop):
    bars = random_bars(3000, seed=21)
    res = backtest(bars, "ema_cross", dict(fast=6, slow=30), ppy=PPY, fill=fill, fees=FEES,
                   fixed_fee=1.0, stop_loss=stop)
    s = res.stats()
    trades, equity = res.trades, res.equity
    assert list(s.index) == list(STATS)
    assert set(METRICS) <= set(s.index) and set(STATS_INFO) <= set(s.index)
    for name in METRICS:
        same = s[name] == res.metrics[name] or (math.isnan(s[name])
                                                and math.isnan(res.metrics[name]))
        assert same, name
    assert len(trades) > 10 and (trades["pnl"] > 0).any() and (trades["pnl"] < 0).any()
    assert s["start"] == pd.Timestamp("2020-01-01", tz="UTC")
    assert s["end"] == s["start"] + pd.Timedelta(hours=2999) == equity.index[-1]
    assert s["duration"] == pd.Timedelta(hours=2999)
    assert s["n_bars"] == 3000
    assert s["init_cash"] == 10_000.0
    assert s["equity_final"] == equity.iloc[-1]
    assert s["equity_peak"] == max(equity)
    assert s["n_trades"] == len(trades)
    assert s["n_open_trades"] == sum(r == "end" for r in trades["exit_reason"])
    returns = list(trades["return"])
    assert s["best_trade"] == max(returns) and s["worst_trade"] == min(returns)
    wins = [r for r, p in zip(returns, trades["pnl"]) if p > 0]
    losses = [r for r, p in zip(returns, trades["pnl"]) if p < 0]
    assert s["avg_winning_trade"] == pytest.approx(sum(wins) / len(wins), rel=1e-12)
    assert s["avg_losing_trade"] == pytest.approx(sum(losses) / len(losses), rel=1e-12)
    held = [b - a for a, b in zip(trades["entry_time"], trades["exit_time"])]
    assert s["max_trade_duration"] == max(held)
    assert abs(s["avg_trade_duration"] - sum(held, pd.Timedelta(0)) / len(held)) < \
        pd.Timedelta(microseconds=1)
    for row in trades.itertuples():  # bars_held counts the same stretch in bars
        assert row.exit_time - row.entry_time == pd.Timedelta(hours=row.bars_held)
    assert s["max_drawdown_duration"] == loop_drawdown_duration(equity)
    assert s["max_drawdown_duration"] > pd.Timedelta(0)
    pnl = list(trades["pnl"])
    assert s["sqn"] == pytest.approx(math.sqrt(len(pnl)) * statistics.mean(pnl)
                                     / statistics.stdev(pnl), rel=1e-9)
    assert s["fees_paid"] == pytest.approx(loop_fees(trades, FEES, 1.0), rel=1e-9)
    # buy and hold of the same bars: entered at bar 0's close (or bar 1's open) paying the
    # fees, marked at the last close
    entry = bars["close"][0] if fill == "close" else bars["open"][1]
    size = (10_000.0 - 1.0) / (entry * (1 + FEES))
    assert s["buy_and_hold_return"] == pytest.approx(
        size * bars["close"][-1] / 10_000.0 - 1.0, rel=1e-12)


def test_stats_of_a_window_and_bars_without_times():
    bars = random_bars(1500, seed=4)
    res = backtest(bars, "ema_cross", dict(fast=5, slow=20), ppy=PPY, span=(400, 1100))
    s = res.stats()
    assert s["start"] == res.equity.index[0] == pd.Timestamp(bars["time"][400], tz="UTC")
    assert s["n_bars"] == 700
    # buy and hold over the window only: bar 401's open to bar 1099's close
    assert s["buy_and_hold_return"] == pytest.approx(
        bars["close"][1099] / bars["open"][401] - 1.0, rel=1e-12)
    untimed = {k: v for k, v in bars.items() if k != "time"}
    res = backtest(untimed, "ema_cross", dict(fast=5, slow=20), ppy=PPY, fill="close")
    s = res.stats()
    assert (s["start"], s["end"], s["duration"]) == (0, 1499, 1499)
    assert s["max_trade_duration"] == max(res.trades["bars_held"])
    assert s["max_drawdown_duration"] == loop_drawdown_duration(res.equity)
    assert s["buy_and_hold_return"] == pytest.approx(
        bars["close"][-1] / bars["close"][0] - 1.0, rel=1e-12)


def test_stats_without_trades_are_nan_not_zero():
    bars = random_bars(50, seed=1)
    res = backtest(bars, "ema_cross", dict(fast=60, slow=70), ppy=PPY, fill="close")
    s = res.stats(buy_and_hold=False)
    assert "buy_and_hold_return" not in s.index
    assert s["n_trades"] == 0 and s["n_open_trades"] == 0 and s["fees_paid"] == 0.0
    for name in ("best_trade", "worst_trade", "avg_winning_trade", "avg_trade_duration",
                 "sqn", "win_rate"):
        assert math.isnan(s[name]), name
    assert s["max_drawdown_duration"] == pd.Timedelta(0)
    assert s["equity_final"] == s["equity_peak"] == 10_000.0


def test_stats_match_vectorbt_portfolio_stats():
    vbt = pytest.importorskip("vectorbt")
    bars = random_bars(3000, seed=8)
    close = bars["close"]
    res = backtest(bars, "ema_cross", dict(fast=7, slow=45), ppy=PPY, fill="close",
                   fees=FEES)
    fast, slow = ema(close, 7), ema(close, 45)
    entries = np.zeros(len(close), dtype=bool)
    exits = np.zeros(len(close), dtype=bool)
    for t in range(1, len(close)):
        entries[t] = cross_above(fast[t - 1], slow[t - 1], fast[t], slow[t])
        exits[t] = cross_below(fast[t - 1], slow[t - 1], fast[t], slow[t])
    index = pd.date_range("2020-01-01", periods=len(close), freq="1h")
    pf = vbt.Portfolio.from_signals(pd.Series(close, index=index), entries, exits,
                                    fees=FEES, init_cash=10_000.0, freq="1h")
    theirs = pf.stats(settings=dict(incl_open=True))
    ours = res.stats()
    assert ours["n_open_trades"] == theirs["Total Open Trades"] == 1  # the open one counts
    pairs = {
        "init_cash": "Start Value", "equity_final": "End Value",
        "total_return": "Total Return [%]", "max_drawdown": "Max Drawdown [%]",
        "win_rate": "Win Rate [%]", "best_trade": "Best Trade [%]",
        "worst_trade": "Worst Trade [%]", "avg_winning_trade": "Avg Winning Trade [%]",
        "avg_losing_trade": "Avg Losing Trade [%]", "profit_factor": "Profit Factor",
        "fees_paid": "Total Fees Paid", "sharpe": "Sharpe Ratio",
        "sortino": "Sortino Ratio", "calmar": "Calmar Ratio",
    }
    for name, label in pairs.items():
        scale = 100.0 if label.endswith("[%]") else 1.0
        want = theirs[label] if name != "max_drawdown" else -theirs[label]
        assert ours[name] * scale == pytest.approx(want, rel=1e-9), name
    assert ours["n_trades"] == theirs["Total Trades"]
    assert ours["max_drawdown_duration"] == theirs["Max Drawdown Duration"]
    assert ours["start"].tz_localize(None) == theirs["Start"]
    assert ours["end"].tz_localize(None) == theirs["End"]
