"""Every execution feature, sweep and backtest() against the reference simulator."""


import numpy as np
import pytest
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.reference import ref_ema_cross_signals, ref_simulate
from hypothesis import given, settings
from hypothesis import strategies as st

from barsweep.engine import METRICS, Execution, backtest, get_strategy, sweep_block

PPY = 8760.0

stop_values = st.one_of(st.none(), st.sampled_from([0.005, 0.01, 0.02, 0.05]))


assert_metrics_close = assert_metrics_match


def reference(bars, fast, slow, **execution):
    up, down = ref_ema_cross_signals(list(bars["close"]), fast, slow)
    return ref_simulate(list(bars["open"]), list(bars["close"]), up, down, down, up,
                        high=list(bars["high"]), low=list(bars["low"]),
                        funding_rate=list(bars["funding_rate"]), ppy=PPY, **execution)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_bars=st.integers(1, 300),
    gap=st.sampled_from([0.0, 0.002, 0.03]),
    fill=st.sampled_from(["close", "next_open"]),
    direction=st.sampled_from(["long", "short", "both"]),
    fees=st.sampled_from([0.0, 0.001]),
    fixed_fee=st.sampled_from([0.0, 1.5]),
    slippage=st.sampled_from([0.0, 0.0005]),
    stop_loss=stop_values,
    take_profit=stop_values,
    trailing_stop=stop_values,
    funding=st.booleans(),
    pairs=st.lists(st.tuples(st.integers(2, 20), st.integers(3, 50)), min_size=1, max_size=4),
)
def test_sweep_and_backtest_equal_reference(seed, n_bars, gap, fill, direction, fees,
                                            fixed_fee, slippage, stop_loss, take_profit,
                                            trailing_stop, funding, pairs):
    bars = random_bars(n_bars, seed, gap=gap)
    execution = dict(fill=fill, direction=direction, fees=fees, fixed_fee=fixed_fee,
                     slippage=slippage, stop_loss=stop_loss, take_profit=take_profit,
                     trailing_stop=trailing_stop, funding=funding)
    params = dict(fast=np.array([p[0] for p in pairs]), slow=np.array([p[1] for p in pairs]))
    swept = sweep_block(get_strategy("ema_cross"), bars, params, Execution(**execution), PPY)
    for (fast, slow), row in zip(pairs, swept):
        ours = dict(zip(METRICS, row))
        ref, ref_equity, ref_trades = reference(bars, fast, slow, **execution)
        assert_metrics_close(ours, ref)
        single = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY, **execution)
        assert single.metrics == pytest.approx(ours, nan_ok=True, rel=0, abs=0)
        np.testing.assert_allclose(single.equity.to_numpy(), ref_equity, rtol=1e-12)
        trades = single.trades
        assert list(trades["exit_reason"]) == [t["reason"] for t in ref_trades]
        assert list(trades["side"]) == [t["side"] for t in ref_trades]
        assert list(trades["exit_bar"]) == [t["exit_bar"] for t in ref_trades]
        np.testing.assert_allclose(trades["pnl"], [t["pnl"] for t in ref_trades],
                                   rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(trades["exit_price"], [t["exit_price"] for t in ref_trades],
                                   rtol=1e-12)


def test_stops_swept_as_grid_axes_equal_scalar_runs():
    bars = random_bars(800, seed=5, gap=0.01)
    stops = np.array([0.01, 0.02, 0.05])
    params = dict(fast=np.full(3, 5), slow=np.full(3, 30), stop_loss=stops)
    swept = sweep_block(get_strategy("ema_cross"), bars, params, Execution(direction="both"), PPY)
    for row, sl in zip(swept, stops):
        one = sweep_block(get_strategy("ema_cross"), bars, dict(fast=np.array([5]),
                          slow=np.array([30])), Execution(direction="both", stop_loss=sl), PPY)
        np.testing.assert_array_equal(row, one[0])
    assert len({tuple(r) for r in swept}) == 3


def test_gap_through_stop_fills_at_open_and_stop_beats_target():
    # one long entered at bar 0's close (100); bar 1 gaps to 90 (stop 5% at 95 -> fill 90);
    # bar 2 of a second run spans both the stop and the target: the stop fills.
    close = np.array([100.0, 91.0, 92.0])
    bars = dict(open=np.array([100.0, 90.0, 91.0]), high=np.array([100.0, 92.0, 93.0]),
                low=np.array([100.0, 89.0, 90.0]), close=close)
    res = backtest(bars, "buy_and_hold", {}, ppy=PPY, fill="close", stop_loss=0.05)
    assert res.trades["exit_reason"].tolist() == ["stop"]
    assert res.trades["exit_price"].iloc[0] == 90.0
    wide = dict(open=np.array([100.0, 100.0, 100.0]), high=np.array([100.0, 111.0, 100.0]),
                low=np.array([100.0, 94.0, 100.0]), close=np.array([100.0, 100.0, 100.0]))
    both = backtest(wide, "buy_and_hold", {}, ppy=PPY, fill="close", stop_loss=0.05,
                    take_profit=0.10)
    assert both.trades["exit_reason"].tolist() == ["stop"]
    assert both.trades["exit_price"].iloc[0] == pytest.approx(95.0)


def test_stop_on_the_entry_bar_with_next_open():
    # signal at bar 0's close, entry at bar 1's open (100), bar 1's low 90 hits a 5% stop
    bars = dict(open=np.array([100.0, 100.0, 100.0]), high=np.array([100.0, 101.0, 100.0]),
                low=np.array([100.0, 90.0, 100.0]), close=np.array([100.0, 99.0, 100.0]))
    res = backtest(bars, "buy_and_hold", {}, ppy=PPY, fill="next_open", stop_loss=0.05)
    assert res.trades[["entry_bar", "exit_bar", "exit_reason"]].values.tolist() == [
        [1, 1, "stop"]]


def test_funding_longs_pay_shorts_receive():
    n = 50
    flat = np.full(n, 100.0)
    rate = np.full(n, 0.001)
    bars = dict(open=flat, high=flat, low=flat, close=flat, funding_rate=rate)
    long = backtest(bars, "buy_and_hold", {}, ppy=PPY, fill="close", funding=True)
    assert long.metrics["total_return"] < 0
    free = backtest(bars, "buy_and_hold", {}, ppy=PPY, fill="close")
    assert free.metrics["total_return"] == 0.0
    # no funding column when funding is asked for: a clear error naming it
    del bars["funding_rate"]
    with pytest.raises(ValueError, match="funding_rate"):
        backtest(bars, "buy_and_hold", {}, ppy=PPY, funding=True)


def test_reversal_with_direction_both():
    bars = random_bars(600, seed=21)
    res = backtest(bars, "ema_cross", dict(fast=5, slow=20), ppy=PPY, fill="close",
                   direction="both")
    t = res.trades
    assert set(t["side"]) == {-1, 1}
    # each exit by signal is followed by an entry of the other side on the same bar
    follow = t.iloc[:-1]
    assert (follow["exit_bar"].to_numpy() == t["entry_bar"].to_numpy()[1:]).all()
    assert (follow["side"].to_numpy() == -t["side"].to_numpy()[1:]).all()


@pytest.mark.parametrize(
    "kwargs, key",
    [
        (dict(stop_loss=0.0), "stop_loss"),
        (dict(stop_loss=1.0), "stop_loss"),
        (dict(trailing_stop=-0.1), "trailing_stop"),
        (dict(take_profit=0.0), "take_profit"),
        (dict(take_profit=1.5, direction="short"), "take_profit"),
        (dict(fees=-0.001), "fees"),
        (dict(fixed_fee=-1.0), "fixed_fee"),
        (dict(direction="sideways"), "direction"),
        (dict(fill="vwap"), "fill"),
        (dict(init_cash=0.0), "init_cash"),
    ],
)
def test_bad_execution_is_refused_naming_the_setting(kwargs, key):
    with pytest.raises(ValueError, match=key):
        Execution(**kwargs)


def test_grid_stop_out_of_range_is_refused():
    bars = random_bars(100, seed=1)
    with pytest.raises(ValueError, match="grid.stop_loss"):
        sweep_block(get_strategy("ema_cross"), bars,
                    dict(fast=np.array([5]), slow=np.array([20]), stop_loss=np.array([1.2])),
                    Execution(), PPY)
