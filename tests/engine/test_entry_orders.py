"""Limit and stop entry orders (``execution.entry_order``, the grid axes ``entry_offset``
and ``valid_bars``): the sweep and ``backtest()`` against the reference simulator,
backtesting.py's ``buy(limit=..., stop=...)`` where its semantics are ours, and
hand-computed cases where they are not."""

import numpy as np
import pandas as pd
import pytest
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.reference import ref_ema_cross_signals, ref_simulate
from hypothesis import given, settings
from hypothesis import strategies as st

from barsweep.engine import METRICS, Execution, backtest, get_strategy, sweep_block
from barsweep.errors import SpecError

PPY = 8760.0

SIZES = [{"type": "all"}, {"type": "percent", "value": 0.6}, {"type": "quantity", "value": 40.0},
         {"type": "risk", "value": 0.05}, {"type": "vol_target", "value": 30.0, "window": 5}]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_bars=st.integers(1, 300),
    gap=st.sampled_from([0.0, 0.03]),
    order=st.sampled_from(["limit", "stop"]),
    offset=st.sampled_from([0.0, 0.002, 0.01, 0.04]),
    valid_bars=st.sampled_from([None, 1, 3]),
    fill=st.sampled_from(["close", "next_open"]),
    direction=st.sampled_from(["long", "short", "both"]),
    fees=st.sampled_from([0.0, 0.001]),
    slippage=st.sampled_from([0.0, 0.0005]),
    stops=st.sampled_from([{}, {"stop_loss": 0.01}, {"take_profit": 0.02},
                           {"trailing_stop": 0.015, "stop_loss": 0.03}]),
    size=st.sampled_from(SIZES),
    leverage=st.sampled_from([1.0, 2.0]),
    pairs=st.lists(st.tuples(st.integers(2, 20), st.integers(3, 50)), min_size=1, max_size=3),
)
def test_entry_orders_in_the_sweep_and_backtest_equal_the_reference(
        seed, n_bars, gap, order, offset, valid_bars, fill, direction, fees, slippage, stops,
        size, leverage, pairs):
    bars = random_bars(n_bars, seed, gap=gap)
    if size["type"] == "risk":
        stops = {**stops, "stop_loss": stops.get("stop_loss") or 0.02}
    execution = dict(fill=fill, direction=direction, fees=fees, slippage=slippage,
                     leverage=leverage, **stops)
    entry_order = {"type": order, "offset": offset, "valid_bars": valid_bars}
    params = dict(fast=np.array([p[0] for p in pairs]), slow=np.array([p[1] for p in pairs]))
    swept = sweep_block(get_strategy("ema_cross"), bars, params,
                        Execution(size=size, entry_order=entry_order, **execution), PPY)
    for (fast, slow), row in zip(pairs, swept):
        ours = dict(zip(METRICS, row))
        up, down = ref_ema_cross_signals(list(bars["close"]), fast, slow)
        ref, ref_equity, ref_trades = ref_simulate(
            list(bars["open"]), list(bars["close"]), up, down, down, up,
            high=list(bars["high"]), low=list(bars["low"]), ppy=PPY, size=size["type"],
            size_value=size.get("value"), window=size.get("window") or 20,
            entry_order=order, entry_offset=offset, valid_bars=valid_bars, **execution)
        assert_metrics_match(ours, ref, rtol=1e-10, atol=1e-10)
        single = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY, size=size,
                          entry_order=entry_order, **execution)
        assert single.metrics == pytest.approx(ours, nan_ok=True, rel=0, abs=0)
        np.testing.assert_allclose(single.equity.to_numpy(), ref_equity, rtol=1e-10,
                                   atol=1e-9)
        assert list(single.trades["entry_bar"]) == [t["entry_bar"] for t in ref_trades]
        assert list(single.trades["exit_reason"]) == [t["reason"] for t in ref_trades]


def test_offset_and_validity_as_grid_axes_equal_each_run_alone():
    bars = random_bars(400, 11, gap=0.01)
    grid = dict(fast=np.array([3, 3, 5, 5]), slow=np.array([12, 12, 20, 20]),
                entry_offset=np.array([0.0, 0.01, 0.005, 0.02]),
                valid_bars=np.array([1, 4, 2, 10]))
    execution = dict(fill="next_open", direction="both", fees=0.001, stop_loss=0.03)
    swept = sweep_block(get_strategy("ema_cross"), bars, grid,
                        Execution(entry_order={"type": "limit"}, **execution), PPY)
    for k in range(4):
        alone = backtest(bars, "ema_cross", dict(fast=grid["fast"][k], slow=grid["slow"][k]),
                         ppy=PPY, entry_order={"type": "limit",
                                               "offset": float(grid["entry_offset"][k]),
                                               "valid_bars": int(grid["valid_bars"][k])},
                         **execution)
        assert dict(zip(METRICS, swept[k])) == pytest.approx(alone.metrics, nan_ok=True,
                                                             rel=0, abs=0)
    assert len(set(map(tuple, swept.tolist()))) == 4  # the axes change the results


class Signals:
    """A rule that enters long at the closes ``entries`` and exits at ``exits``."""

    def __init__(self, n, entries, exits=()):
        self.entry = np.zeros(n, dtype=bool)
        self.exit = np.zeros(n, dtype=bool)
        self.entry[list(entries)] = True
        self.exit[list(exits)] = True


def run(bars, entries, exits=(), **execution):
    n = len(bars["close"])
    sig = Signals(n, entries, exits)
    up, down = list(sig.entry), list(sig.exit)
    _, equity, trades = ref_simulate(list(bars["open"]), list(bars["close"]), up, down,
                                     high=list(bars["high"]), low=list(bars["low"]), ppy=PPY,
                                     **execution)
    return equity, trades


def ohlc(rows):
    """Bars from rows of (open, high, low, close)."""
    a = np.asarray(rows, dtype=float)
    return {"open": a[:, 0], "high": a[:, 1], "low": a[:, 2], "close": a[:, 3]}


def test_hand_cases_of_the_reference():
    """Each rule of docs/EXECUTION.md's "Entry orders", computed by hand (the kernels are
    held to the reference above)."""
    bars = ohlc([(100, 100, 100, 100), (100, 101, 99.5, 100), (99, 99.5, 98, 98.5),
                 (97, 100, 96, 98), (98, 104, 97, 103), (103, 103, 103, 103)])
    limit = dict(entry_order="limit", entry_offset=0.01, fill="close")
    # placed at close 0 at 99: bar 1's low 99.5 misses it, bar 2 opens through it at 99
    _, trades = run(bars, [0], **limit)
    assert (trades[0]["entry_bar"], trades[0]["entry_price"]) == (2, 99.0)
    # valid one bar: only bar 1 may fill it, and it does not
    assert run(bars, [0], valid_bars=1, **limit)[1] == []
    # the exit signal at close 1 cancels it before bar 2
    assert run(bars, [0], exits=[1], **limit)[1] == []
    # a new entry at close 1 replaces it: 99 again (close 100), filled at bar 2's open
    _, trades = run(bars, [0, 1], **limit)
    assert trades[0]["entry_bar"] == 2
    # a stop 1% above close 2 (98.5 -> 99.485): bar 3 reaches it inside, with slippage
    _, trades = run(bars, [2], entry_order="stop", entry_offset=0.01, fill="close",
                    slippage=0.001)
    assert trades[0]["entry_bar"] == 3
    assert trades[0]["entry_price"] == pytest.approx(98.5 * 1.01 * 1.001, rel=1e-15)
    # a limit fills without slippage, at its level inside the bar (bar 2: low 98 <= 99)
    _, trades = run(bars, [1], entry_order="limit", entry_offset=0.01, fill="close",
                    slippage=0.001)
    assert trades[0]["entry_price"] == 99.0
    # the entry bar's stops see the bar from the fill on: a stop entry at 101 in bar 1
    # (open 97, under its 2% stop loss at 98.98) is stopped there at 98.98 (the bar's low
    # 96 reaches it after the fill), not at the open
    rally = ohlc([(100, 100, 100, 100), (97, 102, 96, 101), (101, 101, 101, 101)])
    _, trades = run(rally, [0], entry_order="stop", entry_offset=0.01, fill="close",
                    stop_loss=0.02)
    assert trades[0]["entry_price"] == 101.0
    assert trades[0]["reason"] == "stop" and trades[0]["exit_bar"] == 1
    assert trades[0]["exit_price"] == pytest.approx(101.0 * 0.98, rel=1e-15)


def test_the_kernel_on_the_hand_cases():
    bars = ohlc([(100, 100, 100, 100), (100, 101, 99.5, 100), (99, 99.5, 98, 98.5),
                 (97, 100, 96, 98), (98, 104, 97, 103), (103, 103, 103, 103)])
    res = backtest(bars, "buy_and_hold", {}, ppy=PPY, fill="close",
                   entry_order={"type": "limit", "offset": 0.01})
    assert (res.trades["entry_bar"].iloc[0], res.trades["entry_price"].iloc[0]) == (2, 99.0)
    expired = backtest(bars, "buy_and_hold", {}, ppy=PPY, fill="close",
                       entry_order={"type": "limit", "offset": 0.01, "valid_bars": 1})
    assert len(expired.trades) == 0 and expired.metrics["total_return"] == 0.0
    stopped = backtest(bars, "buy_and_hold", {}, ppy=PPY, fill="close", stop_loss=0.02,
                       entry_order={"type": "stop", "offset": 0.0})
    trade = stopped.trades.iloc[0]  # long stop at 100 from close 0: bar 1 opens at it
    assert (trade["entry_bar"], trade["entry_price"]) == (1, 100.0)
    assert (trade["exit_bar"], trade["exit_reason"]) == (2, "stop")
    rally = ohlc([(100, 100, 100, 100), (97, 102, 96, 101), (101, 101, 101, 101)])
    inside = backtest(rally, "buy_and_hold", {}, ppy=PPY, fill="close", stop_loss=0.02,
                      entry_order={"type": "stop", "offset": 0.01}).trades.iloc[0]
    assert (inside["entry_price"], inside["exit_bar"]) == (101.0, 1)
    assert inside["exit_price"] == pytest.approx(101.0 * 0.98, rel=1e-15)


@pytest.mark.parametrize("order", ["limit", "stop"])
@pytest.mark.parametrize("valid_bars", [None, 3])
def test_long_orders_equal_backtesting_py(order, valid_bars):
    """backtesting.py's ``buy(size=..., limit=...)`` / ``buy(stop=...)``, its orders
    cancelled and replaced by a strategy that keeps our rules, on whole units (its sizes
    are whole): the same trades and final equity. Its orders are checked from the bar
    after the one they are placed at, fill at the open through a gap and at the level
    inside a bar, and a stop fills as a market order: ours."""
    backtesting = pytest.importorskip("backtesting")
    bars = random_bars(600, 5, gap=0.01)
    fast, slow, offset, units = 4, 15, 0.004, 30
    up, down = ref_ema_cross_signals(list(bars["close"]), fast, slow)

    class Orders(backtesting.Strategy):
        def init(self):
            self.placed = None

        def next(self):
            t = len(self.data) - 1
            close = self.data.Close[-1]
            pending = [o for o in self.orders if not o.is_contingent]
            if self.placed is not None and (down[t] or t >= self.placed):
                for o in pending:
                    o.cancel()
                self.placed = None
            if self.position and down[t]:
                self.position.close()
            if up[t] and not self.position:
                for o in pending:
                    o.cancel()
                kind = "limit" if order == "limit" else "stop"
                level = close * (1 - offset) if order == "limit" else close * (1 + offset)
                self.buy(size=units, **{kind: level})
                self.placed = t + valid_bars if valid_bars else np.inf

    frame = pd.DataFrame({"Open": bars["open"], "High": bars["high"], "Low": bars["low"],
                          "Close": bars["close"]},
                         index=pd.date_range("2020-01-01", periods=600, freq="h"))
    stats = backtesting.Backtest(frame, Orders, cash=10_000.0, commission=0.0,
                                 finalize_trades=True).run()
    theirs = stats["_trades"]
    ours = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY,
                    size={"type": "quantity", "value": float(units)},
                    entry_order={"type": order, "offset": offset, "valid_bars": valid_bars})
    assert len(theirs) > 5
    np.testing.assert_array_equal(ours.trades["entry_bar"], theirs["EntryBar"])
    np.testing.assert_allclose(ours.trades["entry_price"], theirs["EntryPrice"], rtol=1e-14)
    np.testing.assert_array_equal(ours.trades["exit_bar"], theirs["ExitBar"])
    np.testing.assert_allclose(ours.trades["exit_price"], theirs["ExitPrice"], rtol=1e-14)
    # the equity at every close but the last, where backtesting.py may still fill an
    # order and close it at once (``finalize_trades``) without listing the trade
    np.testing.assert_allclose(ours.equity.to_numpy()[:-1],
                               stats["_equity_curve"]["Equity"].to_numpy()[:-1], rtol=1e-12)


@pytest.mark.parametrize("settings, words", [
    ({"entry_order": {"type": "limit", "offset": -0.01}},
     "execution.entry_order.offset: Input should be greater than or equal to 0"),
    ({"entry_order": {"type": "market", "offset": 0.01}},
     "execution.entry_order: type market fills at once"),
    ({"entry_order": {"type": "stop", "offset": 0.01, "valid_bars": 0}},
     "execution.entry_order.valid_bars: Input should be greater than or equal to 1"),
    ({"entry_order": {"type": "iceberg"}}, "execution.entry_order.type: Input should be"),
])
def test_bad_orders_are_refused_in_one_line(settings, words):
    from barsweep.engine.core import execution_of

    with pytest.raises(SpecError) as err:
        execution_of(settings)
    assert str(err.value).startswith(words), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("order, grid, words", [
    ({"type": "limit"}, {}, "execution.entry_order: type limit needs an offset"),
    ({}, {"entry_offset": [0.01]}, "grid.entry_offset: the entry order is type market"),
    ({"type": "stop", "offset": 0.01}, {"entry_offset": [0.01]},
     "execution.entry_order: its offset is also a grid axis"),
    ({"type": "stop"}, {"entry_offset": [0.01, 1.5]},
     "grid.entry_offset: entry_offset must be a fraction of the close in [0, 1)"),
    ({"type": "limit", "offset": 0.0}, {"valid_bars": [2, 0]},
     "grid.valid_bars: valid_bars must be a whole number of bars >= 1"),
])
def test_bad_order_columns_are_refused_naming_the_key(order, grid, words):
    bars = random_bars(50, 1)
    params = dict(fast=np.array([3] * len(next(iter(grid.values()), [0]))),
                  slow=np.array([9] * len(next(iter(grid.values()), [0]))))
    params.update({k: np.array(v) for k, v in grid.items()})
    with pytest.raises(SpecError) as err:
        sweep_block(get_strategy("ema_cross"), bars, params, Execution(entry_order=order),
                    PPY)
    assert str(err.value).startswith(words), str(err.value)
