"""Leverage, borrowing and margin calls (``execution.leverage``, ``borrow_rate``,
``maintenance_margin``): the sweep and ``backtest()`` against the reference simulator,
and hand-computed cases."""

import numpy as np
import pytest
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.reference import ref_ema_cross_signals, ref_simulate
from hypothesis import given, settings
from hypothesis import strategies as st

from barsweep.engine import METRICS, Execution, backtest, get_strategy, sweep_block
from barsweep.errors import SpecError

PPY = 8760.0

SIZES = [{"type": "all"}, {"type": "percent", "value": 1.7}, {"type": "cash", "value": 25_000.0},
         {"type": "risk", "value": 0.05}, {"type": "vol_target", "value": 30.0, "window": 5}]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_bars=st.integers(1, 300),
    gap=st.sampled_from([0.0, 0.03]),
    fill=st.sampled_from(["close", "next_open"]),
    direction=st.sampled_from(["long", "short", "both"]),
    fees=st.sampled_from([0.0, 0.001]),
    fixed_fee=st.sampled_from([0.0, 1.5]),
    slippage=st.sampled_from([0.0, 0.0005]),
    stop_loss=st.sampled_from([None, 0.01, 0.04]),
    funding=st.booleans(),
    size=st.sampled_from(SIZES),
    leverage=st.sampled_from([1.0, 2.0, 5.0]),
    borrow_rate=st.sampled_from([0.0, 0.3]),
    maintenance_margin=st.sampled_from([None, 0.1, 0.5]),
    pairs=st.lists(st.tuples(st.integers(2, 20), st.integers(3, 50)), min_size=1, max_size=3),
)
def test_leveraged_sweep_and_backtest_equal_the_reference(
        seed, n_bars, gap, fill, direction, fees, fixed_fee, slippage, stop_loss, funding,
        size, leverage, borrow_rate, maintenance_margin, pairs):
    bars = random_bars(n_bars, seed, gap=gap)
    if size["type"] == "risk":
        stop_loss = stop_loss or 0.02
    if size["type"] == "percent":
        size = {**size, "value": min(size["value"], leverage)}
    execution = dict(fill=fill, direction=direction, fees=fees, fixed_fee=fixed_fee,
                     slippage=slippage, stop_loss=stop_loss, funding=funding,
                     leverage=leverage, borrow_rate=borrow_rate,
                     maintenance_margin=maintenance_margin)
    params = dict(fast=np.array([p[0] for p in pairs]), slow=np.array([p[1] for p in pairs]))
    swept = sweep_block(get_strategy("ema_cross"), bars, params,
                        Execution(size=size, **execution), PPY)
    for (fast, slow), row in zip(pairs, swept):
        ours = dict(zip(METRICS, row))
        up, down = ref_ema_cross_signals(list(bars["close"]), fast, slow)
        ref, ref_equity, ref_trades = ref_simulate(
            list(bars["open"]), list(bars["close"]), up, down, down, up,
            high=list(bars["high"]), low=list(bars["low"]),
            funding_rate=list(bars["funding_rate"]), ppy=PPY, size=size["type"],
            size_value=size.get("value"), window=size.get("window") or 20, **execution)
        assert_metrics_match(ours, ref, rtol=1e-10, atol=1e-10)
        single = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY, size=size,
                          **execution)
        assert single.metrics == pytest.approx(ours, nan_ok=True, rel=0, abs=0)
        np.testing.assert_allclose(single.equity.to_numpy(), ref_equity, rtol=1e-10,
                                   atol=1e-9)
        assert list(single.trades["exit_reason"]) == [t["reason"] for t in ref_trades]


def bars_of(close, low=None):
    close = np.asarray(close, dtype=float)
    low = close if low is None else np.asarray(low, dtype=float)
    return {"open": close.copy(), "high": np.maximum(close, low), "low": low, "close": close}


def test_twice_the_equity_moves_twice_the_price_and_pays_interest():
    close = 100.0 * np.array([1.0, 1.01, 0.99, 1.03, 1.03, 1.03, 1.05])
    res = backtest(bars_of(close), "buy_and_hold", {}, ppy=PPY, fill="close", leverage=2.0)
    np.testing.assert_allclose(res.equity.to_numpy(), 10_000.0 * (1 + 2 * (close / 100 - 1)),
                               rtol=1e-13)
    rate = 0.5  # a year, on the 10,000 borrowed, charged at each close after the entry's
    paid = backtest(bars_of(close), "buy_and_hold", {}, ppy=PPY, fill="close", leverage=2.0,
                    borrow_rate=rate)
    owed = 10_000.0 * (1 + rate / PPY) ** np.arange(len(close))
    expected = 2 * 10_000.0 * close / 100 - owed
    np.testing.assert_allclose(paid.equity.to_numpy(), expected, rtol=1e-12)


def test_a_margin_call_closes_where_the_equity_is_the_maintenance_fraction():
    """2x long from 100: cash -10,000 and 200 units; with 25% maintenance the call is at
    10,000 / (200 * 0.75) = 66.67, where the equity is 25% of the position's value."""
    close = [100.0, 90.0, 80.0, 75.0, 70.0, 72.0]
    low = [100.0, 88.0, 79.0, 60.0, 69.0, 70.0]
    res = backtest(bars_of(close, low), "buy_and_hold", {}, ppy=PPY, fill="close",
                   leverage=2.0, maintenance_margin=0.25)
    trade = res.trades.iloc[0]
    level = 10_000.0 / (200.0 * 0.75)
    assert trade["exit_reason"] == "margin" and trade["exit_bar"] == 3
    assert trade["exit_price"] == pytest.approx(level, rel=1e-14)
    assert res.equity.iloc[3] == pytest.approx(0.25 * 200.0 * level, rel=1e-12)
    assert res.metrics["ruined"] == 0
    gap = backtest(bars_of([100.0, 90.0, 40.0], [100.0, 88.0, 40.0]), "buy_and_hold", {},
                   ppy=PPY, fill="close", leverage=2.0, maintenance_margin=0.25)
    assert gap.trades.iloc[0]["exit_reason"] == "ruin"  # opened beyond zero equity


@pytest.mark.parametrize("settings, words", [
    ({"leverage": 0.5}, "execution.leverage: Input should be greater than or equal to 1"),
    ({"maintenance_margin": 1.0}, "execution.maintenance_margin: Input should be less than 1"),
    ({"borrow_rate": -0.1}, "execution.borrow_rate: Input should be greater than or equal"),
    ({"leverage": 2.0, "size": {"type": "percent", "value": 2.5}},
     "execution: size: type percent takes a fraction of the cash in (0, 2] (leverage 2)"),
])
def test_bad_leverage_is_refused_in_one_line(settings, words):
    from barsweep.engine.core import execution_of

    with pytest.raises(SpecError) as err:
        execution_of(settings)
    assert str(err.value).startswith(words), str(err.value)
    assert "\n" not in str(err.value)


def test_leverage_as_a_grid_axis_equals_each_run_alone():
    bars = random_bars(400, 13, gap=0.01)
    grid = dict(fast=np.array([3, 3, 5, 5]), slow=np.array([12, 12, 20, 20]),
                leverage=np.array([1.0, 2.5, 1.5, 4.0]), size_value=np.array([0.5, 2.0, 1.5, 3.0]))
    execution = dict(fill="next_open", direction="both", fees=0.001, borrow_rate=0.2,
                     maintenance_margin=0.2, size={"type": "percent"})
    swept = sweep_block(get_strategy("ema_cross"), bars, grid, Execution(**execution), PPY)
    for k in range(4):
        alone = backtest(bars, "ema_cross", dict(fast=grid["fast"][k], slow=grid["slow"][k]),
                         ppy=PPY, **{**execution, "leverage": float(grid["leverage"][k]),
                                     "size": {"type": "percent",
                                              "value": float(grid["size_value"][k])}})
        assert dict(zip(METRICS, swept[k])) == pytest.approx(alone.metrics, nan_ok=True,
                                                             rel=0, abs=0)
    assert len(set(map(tuple, swept.tolist()))) == 4


@pytest.mark.parametrize("execution, grid, words", [
    ({}, {"leverage": [0.5, 2.0]}, "grid.leverage: leverage must be >= 1"),
    ({"leverage": 2.0}, {"leverage": [1.0, 2.0]}, "execution.leverage: it is also a grid axis"),
    ({"size": {"type": "percent"}}, {"leverage": [1.0, 2.0], "size_value": [1.5, 1.5]},
     "grid.size_value: type percent takes a fraction of the cash up to the combo's leverage"),
])
def test_a_bad_leverage_axis_is_refused_naming_the_key(execution, grid, words):
    bars = random_bars(50, 1)
    n = len(grid["leverage"])
    params = dict(fast=np.array([3] * n), slow=np.array([9] * n),
                  **{k: np.array(v) for k, v in grid.items()})
    with pytest.raises(SpecError) as err:
        sweep_block(get_strategy("ema_cross"), bars, params, Execution(**execution), PPY)
    assert str(err.value).startswith(words), str(err.value)
