"""Sizing (``execution.size``, ``execution.lot``): the sweep and ``backtest()`` against
the reference simulator, and long positions against vectorbt's ``from_signals`` with
``size_type`` (``percent``, ``value``, ``amount``) and ``size_granularity``."""

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

SIZES = [{"type": "all"}, {"type": "percent", "value": 0.35}, {"type": "percent", "value": 1.0},
         {"type": "cash", "value": 2500.0}, {"type": "cash", "value": 50_000.0},
         {"type": "quantity", "value": 12.0}, {"type": "quantity", "value": 1e6},
         {"type": "risk", "value": 0.004}, {"type": "risk", "value": 0.5},
         {"type": "vol_target", "value": 0.1, "window": 5},
         {"type": "vol_target", "value": 40.0}]


def reference(bars, fast, slow, size, **execution):
    up, down = ref_ema_cross_signals(list(bars["close"]), fast, slow)
    return ref_simulate(list(bars["open"]), list(bars["close"]), up, down, down, up,
                        high=list(bars["high"]), low=list(bars["low"]),
                        funding_rate=list(bars["funding_rate"]), ppy=PPY,
                        size=size["type"], size_value=size.get("value"),
                        window=size.get("window") or 20, **execution)


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
    stop_loss=st.sampled_from([None, 0.01]),
    funding=st.booleans(),
    size=st.sampled_from(SIZES),
    lot=st.sampled_from([None, 1.0, 0.25, 40.0]),
    pairs=st.lists(st.tuples(st.integers(2, 20), st.integers(3, 50)), min_size=1, max_size=3),
)
def test_sized_sweep_and_backtest_equal_the_reference(seed, n_bars, gap, fill, direction, fees,
                                                      fixed_fee, slippage, stop_loss, funding,
                                                      size, lot, pairs):
    bars = random_bars(n_bars, seed, gap=gap)
    if size["type"] == "risk":
        stop_loss = stop_loss or 0.02  # a risk size needs a stop
    execution = dict(fill=fill, direction=direction, fees=fees, fixed_fee=fixed_fee,
                     slippage=slippage, stop_loss=stop_loss, funding=funding, lot=lot)
    params = dict(fast=np.array([p[0] for p in pairs]), slow=np.array([p[1] for p in pairs]))
    swept = sweep_block(get_strategy("ema_cross"), bars, params,
                        Execution(size=size, **execution), PPY)
    for (fast, slow), row in zip(pairs, swept):
        ours = dict(zip(METRICS, row))
        ref, ref_equity, ref_trades = reference(bars, fast, slow, size, **execution)
        assert_metrics_match(ours, ref, rtol=1e-11, atol=1e-11)
        single = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY, size=size,
                          **execution)
        assert single.metrics == pytest.approx(ours, nan_ok=True, rel=0, abs=0)
        np.testing.assert_allclose(single.equity.to_numpy(), ref_equity, rtol=1e-11)
        assert len(single.trades) == len(ref_trades)
        if lot and len(single.trades):  # whole lots only
            units = single.trades["size"].to_numpy() / lot
            np.testing.assert_allclose(units, np.round(units), rtol=0, atol=1e-9)


def test_a_risk_size_without_a_stop_is_refused_before_anything_runs(tmp_path):
    from barsweep.engine.core.execution import execution_columns
    from barsweep.pipeline.config.model import parse_spec

    spec = {"data": {"store": str(tmp_path), "symbols": ["AAA"], "timeframe": "1h"},
            "strategy": "ema_cross", "grid": {"fast": [3], "slow": [9]},
            "execution": {"size": {"type": "risk", "value": 0.01}}}
    with pytest.raises(SpecError, match=r"execution\.size: type risk sizes by the loss at "
                                        r"the stop: set execution\.size\.atr .* or "
                                        r"execution\.stop_loss"):
        parse_spec(spec)
    swept = {**spec, "grid": {**spec["grid"], "stop_loss": [0.01, 0.02]}}
    assert parse_spec(swept).execution.size.type == "risk"  # a stop as a grid axis
    with pytest.raises(SpecError, match="type risk sizes by the loss"):
        execution_columns(Execution(size={"type": "risk", "value": 0.01}), {}, 3)


def test_a_vol_target_size_is_the_target_over_the_measured_volatility():
    """Bought at a close with no fees: the position's value over the equity is the target
    over the annualised sample deviation of the 20 returns up to that close."""
    bars = random_bars(300, 8)
    close = bars["close"]
    res = backtest(bars, "ema_cross", dict(fast=5, slow=30), ppy=PPY, fill="close",
                   size={"type": "vol_target", "value": 0.05})
    first = res.trades.iloc[0]
    t = int(first["entry_bar"])
    vol = np.std(close[t - 19:t + 1] / close[t - 20:t] - 1.0, ddof=1) * np.sqrt(PPY)
    assert 0.0 < 0.05 / vol < 1.0  # a partial position: the target decides
    assert first["size"] * close[t] / 10_000.0 == pytest.approx(0.05 / vol, rel=1e-12)


def test_a_partial_size_leaves_the_rest_in_cash():
    """Half the cash in: the equity moves half as much as the price while held (no fees)."""
    bars = random_bars(400, 5)
    half = backtest(bars, "buy_and_hold", {}, ppy=PPY, fill="close",
                    size={"type": "percent", "value": 0.5})
    close = bars["close"]
    expected = 10_000.0 * (0.5 + 0.5 * close / close[0])
    np.testing.assert_allclose(half.equity.to_numpy(), expected, rtol=1e-12)
    assert half.trades["size"].iloc[0] == pytest.approx(5_000.0 / close[0], rel=1e-15)


@pytest.mark.parametrize("settings, words", [
    ({"size": {"type": "percent", "value": 1.5}}, "execution: size: type percent takes a fraction"),
    ({"size": {"type": "all", "value": 0.5}}, "execution.size: type all takes no value"),
    ({"size": {"type": "quantity", "value": -3.0}}, "execution.size.value: Input should be "
                                                   "greater than 0"),
    ({"size": {"type": "kelly", "value": 0.5}}, "execution.size.type: Input should be 'all'"),
    ({"size": {"type": "risk", "value": 2.0}}, "execution.size: type risk takes a fraction"),
    ({"size": {"type": "percent", "value": 0.5, "window": 10}},
     "execution.size: type percent takes no window"),
    ({"size": {"type": "vol_target", "value": 0.2, "window": 1}},
     "execution.size.window: Input should be greater than or equal to 2"),
    ({"lot": 0.0}, "execution.lot: Input should be greater than 0"),
])
def test_bad_sizes_are_refused_in_one_line(settings, words):
    from barsweep.engine.core import execution_of

    with pytest.raises(SpecError) as err:
        execution_of(settings)
    assert str(err.value).startswith(words), str(err.value)
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------ vectorbt, long


vbt = pytest.importorskip("vectorbt")
talib = pytest.importorskip("talib")

FEES = 0.001


def oracle_signals(close, fast, slow):
    """TA-Lib EMAs and numpy crosses: no code shared with barsweep."""
    a, b = talib.EMA(close, timeperiod=int(fast)), talib.EMA(close, timeperiod=int(slow))
    prev_a, prev_b = np.roll(a, 1), np.roll(b, 1)
    defined = ~(np.isnan(a) | np.isnan(b) | np.isnan(prev_a) | np.isnan(prev_b))
    defined[0] = False
    return defined & (prev_a < prev_b) & (a > b), defined & (prev_a > prev_b) & (a < b)


@pytest.mark.parametrize("size, lot, vbt_size", [
    ({"type": "percent", "value": 0.4}, None, dict(size=0.4, size_type="percent")),
    ({"type": "percent", "value": 0.4}, 3.0, dict(size=0.4, size_type="percent",
                                                  size_granularity=3.0)),
    ({"type": "cash", "value": 3_000.0}, None, dict(size=3_000.0, size_type="value")),
    ({"type": "cash", "value": 30_000.0}, None, dict(size=30_000.0, size_type="value")),
    ({"type": "quantity", "value": 25.0}, None, dict(size=25.0, size_type="amount")),
    ({"type": "quantity", "value": 25.0}, 10.0, dict(size=25.0, size_type="amount",
                                                     size_granularity=10.0)),
])
def test_long_sizes_match_vectorbt_from_signals(size, lot, vbt_size):
    bars = random_bars(3000, seed=42)
    close = bars["close"]
    rng = np.random.default_rng(1)
    fast = rng.integers(2, 40, 24)
    slow = fast + rng.integers(1, 120, 24)
    ours = sweep_block(get_strategy("ema_cross"), bars, dict(fast=fast, slow=slow),
                       Execution(fill="close", fees=FEES, size=size, lot=lot), ppy=PPY)
    signals = [oracle_signals(close, f, s) for f, s in zip(fast, slow)]
    index = pd.date_range("2020-01-01", periods=len(close), freq="1h")
    entries = pd.DataFrame(np.column_stack([a for a, _ in signals]), index=index)
    exits = pd.DataFrame(np.column_stack([b for _, b in signals]), index=index)
    pf = vbt.Portfolio.from_signals(pd.Series(close, index=index), entries, exits,
                                    direction="longonly", fees=FEES, init_cash=10_000.0,
                                    freq="1h", **vbt_size)
    col = {name: i for i, name in enumerate(METRICS)}
    trade_returns = pf.trades.records_readable.groupby("Column")["Return"].mean()
    theirs = {
        "total_return": pf.total_return(), "cagr": pf.annualized_return(),
        "volatility": pf.annualized_volatility(), "sharpe": pf.sharpe_ratio(),
        "sortino": pf.sortino_ratio(), "max_drawdown": pf.max_drawdown(),
        "calmar": pf.calmar_ratio(), "win_rate": pf.trades.win_rate(),
        "profit_factor": pf.trades.profit_factor(),
        "avg_trade_return": trade_returns.reindex(range(len(fast))),
        "exposure": pf.position_mask().mean(),
    }
    for name, values in theirs.items():
        np.testing.assert_allclose(ours[:, col[name]], np.asarray(values, dtype=float),
                                   rtol=1e-9, atol=1e-12, err_msg=name)
    np.testing.assert_array_equal(ours[:, col["n_trades"]], pf.trades.count().to_numpy())
    assert (ours[:, col["n_trades"]] > 0).all()
    # one combo in full: the trades' sizes and the equity, bar by bar
    one = backtest(bars, "ema_cross", dict(fast=int(fast[0]), slow=int(slow[0])), ppy=PPY,
                   fill="close", fees=FEES, size=size, lot=lot)
    records = pf.trades.records_readable[pf.trades.records_readable["Column"] == 0]
    np.testing.assert_allclose(one.trades["size"], records["Size"], rtol=1e-12)
    np.testing.assert_allclose(one.equity.to_numpy(), pf.value()[0].to_numpy(), rtol=1e-12)


# ------------------------------------------------------------------ a grid axis


def test_size_value_as_a_grid_axis_equals_each_value_set_alone():
    bars = random_bars(600, 12, gap=0.01)
    values = np.array([0.1, 0.25, 0.5, 1.0])
    fast, slow = np.repeat([4, 9], 4), np.repeat([20, 45], 4)
    params = dict(fast=fast, slow=slow, size_value=np.tile(values, 2))
    execution = dict(fill="next_open", direction="both", fees=0.001, fixed_fee=1.0,
                     size={"type": "percent"}, lot=0.5)
    swept = sweep_block(get_strategy("ema_cross"), bars, params, Execution(**execution), PPY)
    for k in range(len(fast)):
        alone = sweep_block(get_strategy("ema_cross"), bars,
                            dict(fast=fast[k:k + 1], slow=slow[k:k + 1]),
                            Execution(**{**execution, "size": {"type": "percent",
                                                              "value": float(values[k % 4])}}),
                            PPY)
        np.testing.assert_array_equal(swept[k], alone[0])
    assert len({row[METRICS.index("total_return")] for row in swept[:4]}) == 4


@pytest.mark.parametrize("execution, grid, words", [
    ({}, {"size_value": [0.5]}, r"grid\.size_value: type all takes no value"),
    ({"size": {"type": "percent", "value": 0.5}}, {"size_value": [0.5]},
     r"execution\.size: its value is also a grid axis"),
    ({"size": {"type": "percent"}}, {"size_value": [0.5, 1.5]},
     r"grid\.size_value: type percent takes a fraction of the cash in \(0, 1\], got 1\.5"),
    ({"size": {"type": "cash"}}, {}, r"execution\.size: type cash needs a value"),
])
def test_a_size_axis_is_checked_with_its_type(tmp_path, execution, grid, words):
    from barsweep.pipeline.config.model import parse_spec

    spec = {"data": {"store": str(tmp_path), "symbols": ["AAA"], "timeframe": "1h"},
            "strategy": "ema_cross", "grid": {"fast": [3], "slow": [9], **grid},
            "execution": execution}
    with pytest.raises(SpecError, match=words):
        parse_spec(spec)
    with pytest.raises(SpecError, match=words.replace(r"grid\.", r"(grid\.)?")):
        sweep_block(get_strategy("ema_cross"), random_bars(50, 1),
                    {"fast": np.array([3]), "slow": np.array([9]),
                     **{k: np.asarray(v[-1:], dtype=float) for k, v in grid.items()}},
                    Execution(**execution), PPY)
