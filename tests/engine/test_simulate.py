"""Sweep kernel and backtest() against the slow reference simulator."""

import math

import numpy as np
import pytest
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.reference import ref_buy_and_hold_signals, ref_ema_cross_signals, ref_simulate
from hypothesis import given, settings
from hypothesis import strategies as st

from barsweep.engine import METRICS, Execution, backtest, get_strategy, sweep_block

PPY = 8760.0


assert_metrics_close = assert_metrics_match


def run_sweep(bars, strategy, params, **execution):
    out = sweep_block(get_strategy(strategy), bars, params, Execution(**execution), PPY)
    return [dict(zip(METRICS, row)) for row in out]


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_bars=st.integers(1, 400),
    fill=st.sampled_from(["close", "next_open"]),
    fees=st.sampled_from([0.0, 0.001, 0.01]),
    slippage=st.sampled_from([0.0, 0.0005]),
    pairs=st.lists(st.tuples(st.integers(2, 40), st.integers(2, 80)), min_size=1, max_size=6),
)
def test_ema_cross_sweep_equals_reference_and_backtest(seed, n_bars, fill, fees, slippage, pairs):
    bars = random_bars(n_bars, seed)
    execution = dict(fill=fill, fees=fees, slippage=slippage)
    params = dict(fast=np.array([p[0] for p in pairs]), slow=np.array([p[1] for p in pairs]))
    swept = run_sweep(bars, "ema_cross", params, **execution)
    for (fast, slow), ours in zip(pairs, swept):
        entries, exits = ref_ema_cross_signals(list(bars["close"]), fast, slow)
        ref, ref_equity, ref_trades = ref_simulate(
            list(bars["open"]), list(bars["close"]), entries, exits, ppy=PPY, **execution
        )
        assert_metrics_close(ours, ref)
        single = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY, **execution)
        assert single.metrics == pytest.approx(ours, nan_ok=True, rel=0, abs=0)
        np.testing.assert_allclose(single.equity.to_numpy(), ref_equity, rtol=1e-12)
        assert len(single.trades) == len(ref_trades)
        assert list(single.trades["exit_reason"]) == [t["reason"] for t in ref_trades]


@pytest.mark.parametrize("fill", ["close", "next_open"])
def test_buy_and_hold(fill):
    bars = random_bars(500, seed=3)
    ours = run_sweep(bars, "buy_and_hold", {}, fill=fill, fees=0.001)[0]
    entries, exits = ref_buy_and_hold_signals(list(bars["close"]))
    ref, _, _ = ref_simulate(list(bars["open"]), list(bars["close"]), entries, exits,
                             fill=fill, fees=0.001, ppy=PPY)
    assert_metrics_close(ours, ref)
    assert ours["n_trades"] == 1.0
    if fill == "close":  # without fees, held from bar 0's close: the benchmark itself
        free = run_sweep(bars, "buy_and_hold", {}, fill=fill)[0]
        assert free["beta"] == pytest.approx(1.0, rel=1e-12)
        assert free["alpha"] == pytest.approx(0.0, abs=1e-9)


def test_no_trades_gives_nan_not_zero():
    bars = random_bars(50, seed=1)
    ours = run_sweep(bars, "ema_cross", dict(fast=np.array([60]), slow=np.array([70])),
                     fill="close")[0]
    assert ours["n_trades"] == 0.0
    assert ours["total_return"] == 0.0
    for name in ("sharpe", "sortino", "win_rate", "profit_factor", "avg_trade_return", "calmar"):
        assert math.isnan(ours[name]), name


def test_one_bar():
    bars = random_bars(1, seed=1)
    ours = run_sweep(bars, "buy_and_hold", {}, fill="close")[0]
    assert ours["n_trades"] == 1.0
    assert math.isnan(ours["sharpe"]) and math.isnan(ours["beta"])


def test_trades_table_and_equity_index():
    bars = random_bars(600, seed=11)
    res = backtest(bars, "ema_cross", dict(fast=5, slow=30), ppy=PPY, fill="next_open")
    assert len(res.equity) == 600
    assert str(res.equity.index.tz) == "UTC"
    trades = res.trades
    assert len(trades) == res.metrics["n_trades"] > 0
    assert (trades["bars_held"] >= 0).all()
    # next_open fills: entry prices are slipped opens of the bar after the signal
    np.testing.assert_allclose(trades["entry_price"], bars["open"][trades["entry_bar"]])
    assert res.equity.iloc[-1] == pytest.approx(10_000 * (1 + res.metrics["total_return"]))


def test_backtest_refuses_bad_params():
    bars = random_bars(100, seed=1)
    with pytest.raises(ValueError, match="fast"):
        backtest(bars, "ema_cross", dict(fast=1, slow=20), ppy=PPY)
    with pytest.raises(ValueError, match="missing parameters \\['slow'\\]"):
        backtest(bars, "ema_cross", dict(fast=5), ppy=PPY)
    with pytest.raises(ValueError, match="execution.fill"):
        backtest(bars, "ema_cross", dict(fast=5, slow=20), ppy=PPY, fill="open")
    with pytest.raises(ValueError, match="execution.fees"):
        backtest(bars, "ema_cross", dict(fast=5, slow=20), ppy=PPY, fees=-0.1)


def test_backtest_infers_ppy_from_times():
    bars = random_bars(300, seed=2)
    inferred = backtest(bars, "ema_cross", dict(fast=5, slow=20))
    explicit = backtest(bars, "ema_cross", dict(fast=5, slow=20), ppy=8760.0)
    assert inferred.metrics == pytest.approx(explicit.metrics, nan_ok=True, rel=1e-15)


def test_hoisting_shares_rows():
    from barsweep.engine.core.hoist import hoist

    bars = random_bars(100, seed=1)
    ind, rows = hoist(get_strategy("ema_cross"), bars,
                      dict(fast=np.array([5, 10, 5]), slow=np.array([10, 20, 20])), 3)
    assert ind.shape == (3, 100)  # ema 5, 10, 20: ema(10) shared by fast and slow
    assert rows[1, 0] == rows[0, 1]


def test_empty_bars_are_refused():
    empty = dict(open=np.empty(0), high=np.empty(0), low=np.empty(0), close=np.empty(0))
    with pytest.raises(ValueError, match="empty"):
        backtest(empty, "buy_and_hold", {}, ppy=PPY)
    with pytest.raises(ValueError, match="empty"):
        run_sweep(empty, "buy_and_hold", {})
