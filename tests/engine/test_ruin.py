"""Ruin (docs/EXECUTION.md "Ruin"): equity never goes below zero.

A position whose equity reaches zero inside a bar is liquidated at the price where it
does (the open when the bar gaps through it), equity stays 0 and the combo trades no
more; the kernels, backtest() and the reference simulator agree on every such path.
"""

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

# ema_cross(2, 3) crosses below at bar 4 (a short entered at its close, 95) and above
# at bar 5; it crosses below again at bar 8, where a short would be entered again.
SQUEEZE_CLOSE = [100.0, 101.0, 102.0, 103.0, 95.0, 180.0, 170.0, 150.0, 120.0, 100.0, 110.0,
                 90.0]


def squeeze_bars(open5, high5=200.0):
    """Bars whose bar 5 squeezes the short entered at bar 4's close (95, ruin price 190)."""
    close = np.array(SQUEEZE_CLOSE)
    open_ = np.concatenate([[100.0], close[:-1]])
    open_[5] = open5
    high = np.maximum(open_, close) + 1.0
    low = np.minimum(open_, close) - 1.0
    high[5] = max(high5, open5, close[5])
    return dict(open=open_, high=high, low=low, close=close,
                funding_rate=np.zeros(len(close)))


def reference(bars, signals, **execution):
    le, lx, se, sx = signals
    return ref_simulate(list(bars["open"]), list(bars["close"]), le, lx, se, sx,
                        high=list(bars["high"]), low=list(bars["low"]),
                        funding_rate=list(bars["funding_rate"]), ppy=PPY, **execution)


def ema_signals(bars, fast, slow):
    up, down = ref_ema_cross_signals(list(bars["close"]), fast, slow)
    return up, down, down, up


def hold_signals(bars):
    le, lx = ref_buy_and_hold_signals(list(bars["close"]))
    n = len(le)
    return le, lx, [False] * n, [False] * n


def check_against_reference(bars, strategy, params, signals, **execution):
    """sweep == backtest() == reference (metrics, equity, trades); returns backtest()'s."""
    strat = get_strategy(strategy)
    arrays = {p: np.array([params[p]]) for p in strat.param_names}
    swept = dict(zip(METRICS, sweep_block(strat, bars, arrays, Execution(**execution), PPY)[0]))
    single = backtest(bars, strategy, params, ppy=PPY, **execution)
    assert single.metrics == pytest.approx(swept, rel=0, abs=0, nan_ok=True)
    ref, ref_equity, ref_trades = reference(bars, signals, **execution)
    assert_metrics_match(swept, ref)
    np.testing.assert_allclose(single.equity.to_numpy(), ref_equity, rtol=1e-12, atol=1e-9)
    trades = single.trades
    assert list(trades["exit_reason"]) == [t["reason"] for t in ref_trades]
    assert list(trades["exit_bar"]) == [t["exit_bar"] for t in ref_trades]
    np.testing.assert_allclose(trades["exit_price"], [t["exit_price"] for t in ref_trades],
                               rtol=1e-12)
    np.testing.assert_allclose(trades["pnl"], [t["pnl"] for t in ref_trades], rtol=1e-9,
                               atol=1e-9)
    return single


def assert_ruined(res, bar):
    """Equity 0 from ``bar`` on (never below), and the metrics of a ruined combo."""
    equity = res.equity.to_numpy()
    assert (equity[:bar] > 0).all() and (equity[bar:] == 0.0).all()
    m = res.metrics
    assert m["ruined"] == 1.0
    assert m["total_return"] == -1.0 and m["cagr"] == -1.0 and m["max_drawdown"] == -1.0
    assert not any(math.isinf(m[k]) for k in METRICS)
    last = res.trades.iloc[-1]
    assert last["exit_reason"] == "ruin" and last["exit_bar"] == bar


@pytest.mark.parametrize(("open5", "exit_price"), [(100.0, 190.0), (200.0, 200.0)],
                         ids=["inside-the-bar", "gap-through"])
def test_short_squeezed_is_liquidated_where_equity_reaches_zero(open5, exit_price):
    bars = squeeze_bars(open5)
    execution = dict(fill="close", direction="short")
    res = check_against_reference(bars, "ema_cross", dict(fast=2, slow=3),
                                  ema_signals(bars, 2, 3), **execution)
    assert_ruined(res, 5)
    assert res.trades["exit_price"].iloc[0] == pytest.approx(exit_price, rel=1e-12)
    assert res.trades["pnl"].iloc[0] == -10_000.0
    # the cross below at bar 8 would short again: a ruined combo trades no more
    assert ema_signals(bars, 2, 3)[2][8] and res.metrics["n_trades"] == 1


def test_stop_before_the_ruin_price_fills_first():
    # stop at 95 * 1.5 = 142.5, reached before the ruin price 190 as the bar rises
    bars = squeeze_bars(100.0)
    res = check_against_reference(bars, "ema_cross", dict(fast=2, slow=3),
                                  ema_signals(bars, 2, 3), fill="close", direction="short",
                                  stop_loss=0.5)
    assert res.metrics["ruined"] == 0.0 and res.metrics["total_return"] > -1.0
    assert res.trades["exit_reason"].iloc[0] == "stop"
    assert res.trades["exit_price"].iloc[0] == pytest.approx(142.5)
    # a bar that opens through both: the stop cannot fill above the ruin price
    gap = squeeze_bars(200.0)
    res = check_against_reference(gap, "ema_cross", dict(fast=2, slow=3),
                                  ema_signals(gap, 2, 3), fill="close", direction="short",
                                  stop_loss=0.5, fees=0.001)
    assert_ruined(res, 5)


def test_target_in_the_same_bar_does_not_beat_ruin():
    # bar 5 spans the ruin price (190, above) and a 20% target (76, below): adverse first
    bars = squeeze_bars(100.0)
    bars["low"][5] = 70.0
    res = check_against_reference(bars, "ema_cross", dict(fast=2, slow=3),
                                  ema_signals(bars, 2, 3), fill="close", direction="short",
                                  take_profit=0.2)
    assert_ruined(res, 5)


def test_next_open_short_ruined_on_its_entry_bar():
    # the signal at bar 4 fills at bar 5's open (100): ruin price 200, bar 5's high 260
    bars = squeeze_bars(100.0, high5=260.0)
    res = check_against_reference(bars, "ema_cross", dict(fast=2, slow=3),
                                  ema_signals(bars, 2, 3), fill="next_open", direction="short",
                                  fees=0.001, slippage=0.001)
    assert_ruined(res, 5)
    assert res.trades["entry_bar"].iloc[0] == 5


def test_short_entered_under_water_is_liquidated_at_its_close():
    # slipped by 60%, the short sells at 38 what is marked at 95: equity < 0 at once
    bars = squeeze_bars(100.0)
    res = check_against_reference(bars, "ema_cross", dict(fast=2, slow=3),
                                  ema_signals(bars, 2, 3), fill="close", direction="short",
                                  slippage=0.6)
    assert_ruined(res, 4)
    assert res.trades[["entry_bar", "exit_bar"]].values.tolist() == [[4, 4]]


@pytest.mark.parametrize("end", [5, 12], ids=["one-bar-left", "eight-bars"])
def test_a_window_ruined_on_its_first_bar(end):
    """A walk-forward window (span) whose first bar enters the short slipped by 60%:
    ruined there, equity 0 on every bar of the window, drawdown -100% on each; the CPU
    kernel, the lockstep (GPU) kernel, backtest() and the reference agree, no exception."""
    from barsweep.engine.core.sweep import sweep_cpu
    from barsweep.engine.strategies import kernels

    bars = squeeze_bars(100.0)
    execution = dict(fill="close", direction="short", slippage=0.6)
    strat = get_strategy("ema_cross")
    params = dict(fast=np.array([2, 2]), slow=np.array([3, 4]))
    span = (4, end)
    swept = sweep_block(strat, bars, params, Execution(**execution), PPY, spans=[span])
    lockstep = sweep_cpu(strat, bars, params, Execution(**execution), PPY, spans=[span],
                         kernel=kernels.compiled(strat.signal).lockstep_kernel)
    assert swept.tobytes() == lockstep.tobytes()
    window = slice(*span)
    le, lx, se, sx = (s[window] for s in ema_signals(bars, 2, 3))
    ref, ref_equity, ref_trades = ref_simulate(
        list(bars["open"][window]), list(bars["close"][window]), le, lx, se, sx,
        high=list(bars["high"][window]), low=list(bars["low"][window]),
        funding_rate=list(bars["funding_rate"][window]), ppy=PPY, **execution)
    ours = dict(zip(METRICS, swept[0, 0]))
    assert_metrics_match(ours, ref)
    assert ref_equity == [0.0] * (end - 4) and ref_trades[0]["reason"] == "ruin"
    assert ours["ruined"] == 1.0 and ours["total_return"] == -1.0
    assert ours["max_drawdown"] == -1.0 and ours["calmar"] == -1.0
    assert ours["ulcer_index"] == 100.0 and ours["n_trades"] == 1.0
    assert not np.isinf(swept).any()
    one = backtest(bars, "ema_cross", dict(fast=2, slow=3), ppy=PPY, span=span, **execution)
    assert one.metrics == pytest.approx(ours, rel=0, abs=0, nan_ok=True)
    assert (one.equity.to_numpy() == 0.0).all()
    assert list(one.trades["exit_reason"]) == ["ruin"]


def flat_bars(n, rate):
    close = np.full(n, 100.0)
    return dict(open=close.copy(), high=close + 1.0, low=close - 1.0, close=close,
                funding_rate=np.asarray(rate, dtype=np.float64))


def test_long_drained_by_funding_is_ruined_inside_a_later_bar():
    # all in at bar 0's close (100 units, cash 0); bar 1's funding costs 6,000: ruin at 60
    bars = flat_bars(6, [0.0, 0.6, 0.0, 0.0, 0.0, 0.0])
    bars["low"][3] = 30.0
    res = check_against_reference(bars, "buy_and_hold", {}, hold_signals(bars), fill="close",
                                  funding=True)
    assert_ruined(res, 3)
    assert res.trades["exit_price"].iloc[0] == pytest.approx(60.0)


def test_funding_beyond_the_equity_liquidates_at_the_close():
    bars = flat_bars(5, [0.0, 0.0, 1.5, 0.0, 0.0])
    res = check_against_reference(bars, "buy_and_hold", {}, hold_signals(bars), fill="close",
                                  funding=True)
    assert_ruined(res, 2)
    assert res.trades["exit_price"].iloc[0] == 100.0


def test_fixed_fee_larger_than_the_proceeds_leaves_zero_not_less():
    # 9,000 of 10,000 pays the entry's fixed fee: 10 units at 100; stopped at 60, the
    # exit's 600 cannot pay the exit's fixed fee
    bars = flat_bars(5, np.zeros(5))
    bars["low"][2] = 50.0
    res = check_against_reference(bars, "buy_and_hold", {}, hold_signals(bars), fill="close",
                                  fixed_fee=9_000.0, stop_loss=0.4)
    assert_ruined(res, 2)
    assert res.trades["exit_price"].iloc[0] == pytest.approx(60.0)


def wild_bars(n_bars, seed, vol):
    """Random bars volatile enough (vol per bar) that shorts are often ruined."""
    bars = random_bars(n_bars, seed, gap=vol / 2)
    rng = np.random.default_rng(seed + 1)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, vol, n_bars)))
    prev = np.concatenate([[100.0], close[:-1]])
    open_ = prev * np.exp(rng.normal(0.0, vol / 2, n_bars))
    bars.update(open=open_, close=close,
                high=np.maximum(open_, close) * np.exp(np.abs(rng.normal(0.0, vol, n_bars))),
                low=np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0.0, vol, n_bars))))
    bars["funding_rate"] = bars["funding_rate"] * 500.0  # up to ~10% a bar
    return bars


stop_values = st.one_of(st.none(), st.sampled_from([0.1, 0.3, 0.6, 0.9]))


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_bars=st.integers(2, 300),
    vol=st.sampled_from([0.05, 0.15]),
    fill=st.sampled_from(["close", "next_open"]),
    direction=st.sampled_from(["short", "both"]),
    fees=st.sampled_from([0.0, 0.01]),
    fixed_fee=st.sampled_from([0.0, 50.0]),
    slippage=st.sampled_from([0.0, 0.005]),
    stop_loss=stop_values,
    take_profit=st.one_of(st.none(), st.sampled_from([0.2, 0.5])),
    trailing_stop=stop_values,
    funding=st.booleans(),
    pairs=st.lists(st.tuples(st.integers(2, 10), st.integers(3, 30)), min_size=1, max_size=4),
)
def test_wild_paths_equal_reference(seed, n_bars, vol, fill, direction, fees, fixed_fee,
                                    slippage, stop_loss, take_profit, trailing_stop, funding,
                                    pairs):
    bars = wild_bars(n_bars, seed, vol)
    execution = dict(fill=fill, direction=direction, fees=fees, fixed_fee=fixed_fee,
                     slippage=slippage, stop_loss=stop_loss, take_profit=take_profit,
                     trailing_stop=trailing_stop, funding=funding)
    params = dict(fast=np.array([p[0] for p in pairs]), slow=np.array([p[1] for p in pairs]))
    swept = sweep_block(get_strategy("ema_cross"), bars, params, Execution(**execution), PPY)
    assert (swept[:, METRICS.index("total_return")] >= -1.0).all()
    assert not np.isinf(swept).any()
    for (fast, slow), row in zip(pairs, swept):
        ours = dict(zip(METRICS, row))
        ref, ref_equity, ref_trades = reference(bars, ema_signals(bars, fast, slow), **execution)
        assert_metrics_match(ours, ref, where=(fast, slow))
        single = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY, **execution)
        assert single.metrics == pytest.approx(ours, nan_ok=True, rel=0, abs=0)
        equity = single.equity.to_numpy()
        assert (equity >= 0.0).all()
        np.testing.assert_allclose(equity, ref_equity, rtol=1e-12, atol=1e-9)
        assert list(single.trades["exit_reason"]) == [t["reason"] for t in ref_trades]
        if ours["ruined"]:
            stop = int(np.argmax(equity == 0.0))
            assert (equity[stop:] == 0.0).all() and ours["total_return"] == -1.0
            assert single.trades["exit_reason"].iloc[-1] == "ruin"
        else:
            assert (equity > 0.0).all() and "ruin" not in set(single.trades["exit_reason"])


def test_wild_paths_do_ruin_some_combos():
    """The property test above is not vacuous: its kind of paths ruin shorts often."""
    bars = wild_bars(300, 3, 0.15)
    fast, slow = np.meshgrid(np.arange(2, 10), np.arange(3, 30, 3))
    out = sweep_block(get_strategy("ema_cross"), bars, dict(fast=fast.ravel(), slow=slow.ravel()),
                      Execution(direction="short", fill="close"), PPY)
    ruined = out[:, METRICS.index("ruined")]
    assert 0 < ruined.sum() < len(ruined)
