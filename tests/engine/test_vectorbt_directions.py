"""vectorbt ``Portfolio.from_signals`` as the oracle for directions, costs and stops.

vectorbt is fed the very signals barsweep's strategies produce (TA-Lib-based, see
ref_strategies.py), its stops anchored at the fill price
(``stop_entry_price="fillprice"``), fills at the close.

Slippage: barsweep fills stop and trailing exits as market orders (slippage
applies) and targets as limit orders (none); vectorbt takes one setting for both
(``stop_exit_price``), so slippage is only combined with one kind per case.

One difference by design (docs/EXECUTION.md): when a stop fires inside a bar,
vectorbt ignores every signal of that bar, while barsweep still acts on the
signal at the bar's close (the stop happened before the close). Combos where a
stop and an acted-on entry share a bar are therefore compared separately, and
the difference itself is tested on a constructed case. Such combos are compared
up to that bar (equity curve and the trades closed before it).

Ruin is the other: vectorbt lets a squeezed short's value go below zero and trades on,
barsweep liquidates it where its equity reaches zero. Ruined combos (real AAPL bars) are
compared up to the ruin bar, where vectorbt's own position is shown to be worth <= 0.
"""

import numpy as np
import pandas as pd
import pytest
from bars import random_bars
from ref_strategies import ref_signals

from barsweep.engine import METRICS, Execution, backtest, get_strategy, sweep

vbt = pytest.importorskip("vectorbt")

N_BARS = 1500
PPY = 8760.0
CASES = {
    "ema_cross": [dict(fast=f, slow=s) for f, s in [(3, 20), (5, 30), (12, 60)]],
    "sma_cross": [dict(fast=10, slow=50)],
    "rsi": [dict(period=p, lower=lo, upper=hi) for p, lo, hi in [(14, 30.0, 70.0),
                                                                 (7, 25.0, 75.0)]],
    "bollinger": [dict(period=20, k=2.0), dict(period=30, k=1.5)],
    "donchian": [dict(period=20)],
    "macd": [dict(fast=12, slow=26, signal=9)],
}
EXECUTIONS = {
    "costs": dict(fees=0.001, slippage=0.0005),
    "stop_loss": dict(fees=0.001, stop_loss=0.04),
    "take_profit": dict(fees=0.0005, take_profit=0.05),
    "trailing": dict(fees=0.001, trailing_stop=0.05),
    "stop+target": dict(fees=0.001, stop_loss=0.05, take_profit=0.08),
    "stop+slippage": dict(fees=0.001, slippage=0.0005, stop_loss=0.04),
    "trail+slippage": dict(fees=0.001, slippage=0.0005, trailing_stop=0.05),
    "target+slippage": dict(fees=0.001, slippage=0.0005, take_profit=0.05),
}


def series(values, index):
    return pd.Series(np.asarray(values), index=index)


def vectorbt_run(bars, signals, direction, execution):
    index = pd.date_range("2020-01-01", periods=len(bars["close"]), freq="1h")
    le, lx, se, sx = (series(s, index) for s in signals)
    kwargs = dict(fees=execution.get("fees", 0.0), slippage=execution.get("slippage", 0.0),
                  init_cash=10_000.0, freq="1h", open=series(bars["open"], index),
                  high=series(bars["high"], index), low=series(bars["low"], index),
                  stop_entry_price="fillprice",
                  # stops fill as market orders (slippage), targets as limits (none)
                  stop_exit_price="stoplimit" if execution.get("take_profit") else "stopmarket")
    if execution.get("stop_loss"):
        kwargs["sl_stop"] = execution["stop_loss"]
    if execution.get("trailing_stop"):
        kwargs.update(sl_stop=execution["trailing_stop"], sl_trail=True)
    if execution.get("take_profit"):
        kwargs["tp_stop"] = execution["take_profit"]
    close = series(bars["close"], index)
    if direction == "long":
        return vbt.Portfolio.from_signals(close, le, lx, direction="longonly", **kwargs)
    if direction == "short":
        return vbt.Portfolio.from_signals(close, se, sx, direction="shortonly", **kwargs)
    return vbt.Portfolio.from_signals(close, le, lx, short_entries=se, short_exits=sx, **kwargs)


def first_entry_on_a_stop_bar(trades):
    """The first bar where barsweep entered right after a stop closed a position, or None."""
    stopped = set(trades.loc[trades["exit_reason"].isin(["stop", "target", "trail"]),
                             "exit_bar"])
    both = sorted(stopped & set(trades["entry_bar"]))
    return both[0] if both else None


@pytest.mark.parametrize("exec_name", sorted(EXECUTIONS))
@pytest.mark.parametrize("direction", ["long", "short", "both"])
def test_matches_vectorbt(direction, exec_name):
    bars = random_bars(N_BARS, seed=11, gap=0.004)
    execution = dict(EXECUTIONS[exec_name], fill="close", direction=direction)
    compared = prefix_trades = 0
    for name, examples in CASES.items():
        strategy = get_strategy(name)
        params = {p: np.array([ex[p] for ex in examples]) for p in strategy.param_names}
        ours = sweep(strategy, bars, params, Execution(**execution), PPY)
        for example, row in zip(examples, ours):
            mine = dict(zip(METRICS, row))
            pf = vectorbt_run(bars, ref_signals(name, bars, example), direction, execution)
            single = backtest(bars, name, example, ppy=PPY, **execution)
            label = (name, example, direction, exec_name)
            split = first_entry_on_a_stop_bar(single.trades)
            if split is not None:
                # identical up to the bar where the semantics part: equity and trades
                np.testing.assert_allclose(single.equity.to_numpy()[:split],
                                           pf.value().to_numpy()[:split], rtol=1e-12,
                                           err_msg=str(label))
                theirs = pf.trades.records_readable
                n_before = int((single.trades["exit_bar"] < split).sum())
                np.testing.assert_allclose(single.trades["pnl"].to_numpy()[:n_before],
                                           theirs["PnL"].to_numpy()[:n_before], rtol=1e-9,
                                           err_msg=str(label))
                prefix_trades += n_before
                continue
            compared += 1
            assert mine["n_trades"] == pf.trades.count(), label
            assert mine["total_return"] == pytest.approx(pf.total_return(), rel=1e-9,
                                                         abs=1e-12), label
            assert mine["max_drawdown"] == pytest.approx(pf.max_drawdown(), rel=1e-9,
                                                         abs=1e-12), label
            assert mine["sharpe"] == pytest.approx(pf.sharpe_ratio(), rel=1e-9), label
    # enough evidence: whole runs, or many trades before the semantics part
    assert compared >= 4 or prefix_trades >= 50, (compared, prefix_trades)


def test_signal_on_a_stop_bar_differs_by_design():
    """Long stopped inside bar 2 whose close crosses down: barsweep opens the short at
    that close (direction both); vectorbt ignores the bar's signals. barsweep's side
    is shown with the reference simulator, which every kernel equals (test_execution)."""
    close = np.array([100.0, 101.0, 96.0, 95.0, 94.0])
    bars = dict(open=np.array([100.0, 101.0, 100.0, 96.0, 95.0]),
                high=np.array([100.0, 101.0, 100.0, 96.0, 95.0]),
                low=np.array([100.0, 101.0, 95.0, 94.0, 93.0]), close=close)
    le = [False, True, False, False, False]
    lx = [False, False, True, False, False]
    signals = (le, lx, lx, le)
    theirs = vectorbt_run(bars, signals, "both", dict(stop_loss=0.03))
    assert theirs.trades.count() == 1                 # the long only, stopped at bar 2

    from reference import ref_simulate

    _, _, trades = ref_simulate(list(bars["open"]), list(close), le, lx, lx, le,
                                high=list(bars["high"]), low=list(bars["low"]),
                                fill="close", direction="both", stop_loss=0.03)
    assert [(t["side"], t["exit_bar"], t["reason"]) for t in trades] == [
        (1, 2, "stop"), (-1, 4, "end")]


@pytest.mark.parametrize("direction", ["long", "short", "both"])
def test_next_open_matches_vectorbt_with_shifted_signals(direction):
    """``fill: next_open`` is vectorbt fed the signals one bar later, priced at the open."""
    bars = random_bars(N_BARS, seed=12, gap=0.006)
    execution = dict(fill="next_open", direction=direction, fees=0.001, slippage=0.0005)
    index = pd.date_range("2020-01-01", periods=N_BARS, freq="1h")
    for name in ("ema_cross", "bollinger", "rsi"):
        example = CASES[name][0]
        mine = backtest(bars, name, example, ppy=PPY, **execution)
        shifted = [series(np.r_[False, np.asarray(s[:-1], dtype=bool)], index)
                   for s in ref_signals(name, bars, example)]
        kwargs = dict(price=series(bars["open"], index), fees=0.001, slippage=0.0005,
                      init_cash=10_000.0, freq="1h")
        close = series(bars["close"], index)
        le, lx, se, sx = shifted
        if direction == "long":
            pf = vbt.Portfolio.from_signals(close, le, lx, direction="longonly", **kwargs)
        elif direction == "short":
            pf = vbt.Portfolio.from_signals(close, se, sx, direction="shortonly", **kwargs)
        else:
            pf = vbt.Portfolio.from_signals(close, le, lx, short_entries=se, short_exits=sx,
                                            **kwargs)
        assert mine.metrics["n_trades"] == pf.trades.count() > 0, name
        np.testing.assert_allclose(mine.equity.to_numpy(), pf.value().to_numpy(), rtol=1e-12)
        assert mine.metrics["sharpe"] == pytest.approx(pf.sharpe_ratio(), rel=1e-9)


def test_ruin_is_where_vectorbt_lets_equity_go_below_zero():
    """Ruin (docs/EXECUTION.md): on real daily AAPL, rsi shorts squeezed by the rise.

    vectorbt does not liquidate: its short's value goes below zero and it keeps trading.
    Up to the bar where barsweep's combo is ruined the two are identical (equity and
    every trade closed before); on that bar vectorbt's own position, marked at the bar's
    high (low for a long), is worth <= 0, which is where barsweep liquidates. After it
    they differ by design, and only the prefix is compared."""
    pytest.importorskip("bokeh_sampledata")
    from golden.cases import load_bars

    bars = load_bars("AAPL")
    execution = dict(fill="close", direction="both", fees=0.001)
    checked = 0
    for period, upper in [(5, 70.0), (10, 60.0), (14, 60.0), (20, 80.0), (30, 70.0)]:
        params = dict(period=period, lower=30.0, upper=upper)
        ours = backtest(bars, "rsi", params, ppy=252.0, **execution)
        assert ours.metrics["ruined"] == 1.0, params
        trades = ours.trades
        ruin = int(trades["exit_bar"].iloc[-1])
        assert trades["exit_reason"].iloc[-1] == "ruin"
        pf = vectorbt_run(bars, ref_signals("rsi", bars, params), "both", execution)
        theirs = pf.value().to_numpy()
        np.testing.assert_allclose(ours.equity.to_numpy()[:ruin], theirs[:ruin], rtol=1e-12,
                                   err_msg=str(params))
        before = trades[trades["exit_bar"] < ruin]
        np.testing.assert_allclose(before["pnl"].to_numpy(),
                                   pf.trades.records_readable["PnL"].to_numpy()[:len(before)],
                                   rtol=1e-9, err_msg=str(params))
        cash, assets = pf.cash().to_numpy()[ruin - 1], pf.assets().to_numpy()[ruin - 1]
        worst = bars["high"][ruin] if assets < 0 else bars["low"][ruin]
        assert np.sign(assets) == trades["side"].iloc[-1] and cash + assets * worst <= 0.0
        assert theirs.min() < 0.0 and (ours.equity.to_numpy() >= 0.0).all()
        checked += 1
    assert checked == 5
