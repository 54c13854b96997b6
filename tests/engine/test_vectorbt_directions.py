"""vectorbt ``Portfolio.from_signals`` as the oracle for directions, costs and stops.

vectorbt is fed the very signals barsweep's strategies produce (TA-Lib-based, see
ref_strategies.py), its stops anchored at the fill price
(``stop_entry_price="fillprice"``), fills at the close.

Slippage: barsweep fills stop and trailing exits as market orders (slippage
applies) and targets as limit orders (none); vectorbt takes one setting for both
(``stop_exit_price``), so slippage is only combined with one kind per case.

One difference by design (docs/EXECUTION.md): when a stop fires inside a bar,
vectorbt ignores every signal of that bar, while barsweep still acts on the
signal at the bar's close (the stop happened before the close). Every combo is
still compared over its whole run: barsweep's run is replayed by the slow
reference simulator (which the kernels equal, test_execution; here checked again
on the very signals) with the signals cleared, one at a time, on each bar where a
stop closed a position and barsweep entered at that close (``vectorbt_signals``).
vectorbt fed the original signals equals that replay over every bar; combos where
nothing was cleared equal the kernel's own metrics directly. The rule itself is
pinned on hand-computed cases (``test_signal_on_a_stop_bar_differs_by_design``).

Ruin is the other: vectorbt lets a squeezed short's value go below zero and trades on,
barsweep liquidates it where its equity reaches zero. Ruined combos (real AAPL bars) are
compared up to the ruin bar, where vectorbt's own position is shown to be worth <= 0.
"""

import numpy as np
import pandas as pd
import pytest
from helpers.bars import random_bars
from helpers.ref_strategies import ref_signals
from helpers.reference import ref_simulate
from numba import njit

from barsweep.engine import METRICS, Execution, Param, Strategy, backtest, get_strategy, sweep_block

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


def replay(bars, signals, execution):
    """The reference simulator's (metrics, equity, trades) on these signals."""
    options = {k: v for k, v in execution.items() if v is not None}
    return ref_simulate(list(bars["open"]), list(bars["close"]), *signals,
                        high=list(bars["high"]), low=list(bars["low"]), ppy=PPY, **options)


def vectorbt_signals(bars, signals, execution):
    """What vectorbt acts on: the signals with those of every bar where barsweep enters at
    the close of a bar whose stop (stop, trail or target) closed a position cleared.

    One bar at a time, the earliest first: clearing it changes nothing before it and
    removes that entry, so the next such bar of the replay is later. Returns the cleared
    bars, the replay of the original signals and the replay of the cleared ones (each
    (metrics, equity, trades); the same run when nothing was cleared)."""
    signals = [list(s) for s in signals]
    cleared = []
    original = run = replay(bars, signals, execution)
    while True:
        stopped = {t["exit_bar"] for t in run[2] if t["reason"] in ("stop", "target", "trail")}
        entered = [t["entry_bar"] for t in run[2] if t["entry_bar"] in stopped]
        if not entered:
            return cleared, original, run
        bar = min(entered)
        assert not cleared or bar > cleared[-1]
        for s in signals:
            s[bar] = False
        cleared.append(bar)
        run = replay(bars, signals, execution)


def assert_same_run(equity, pnls, metrics, pf, label):
    """A run (equity per bar, each trade's pnl, metrics) equals vectorbt's over every bar."""
    np.testing.assert_allclose(equity, pf.value().to_numpy(), rtol=1e-12, err_msg=str(label))
    theirs = pf.trades.records_readable
    assert len(pnls) == len(theirs), label
    np.testing.assert_allclose(pnls, theirs["PnL"].to_numpy(),
                               rtol=1e-9, atol=1e-9, err_msg=str(label))
    assert metrics["total_return"] == pytest.approx(pf.total_return(), rel=1e-9, abs=1e-12)
    assert metrics["max_drawdown"] == pytest.approx(pf.max_drawdown(), rel=1e-9, abs=1e-12)
    assert metrics["sharpe"] == pytest.approx(pf.sharpe_ratio(), rel=1e-9), label


@pytest.mark.parametrize("exec_name", sorted(EXECUTIONS))
@pytest.mark.parametrize("direction", ["long", "short", "both"])
def test_matches_vectorbt(direction, exec_name):
    bars = random_bars(N_BARS, seed=11, gap=0.004)
    execution = dict(EXECUTIONS[exec_name], fill="close", direction=direction)
    direct = replayed = 0
    for name, examples in CASES.items():
        strategy = get_strategy(name)
        params = {p: np.array([ex[p] for ex in examples]) for p in strategy.param_names}
        ours = sweep_block(strategy, bars, params, Execution(**execution), PPY)
        for example, row in zip(examples, ours):
            mine = dict(zip(METRICS, row))
            signals = ref_signals(name, bars, example)
            pf = vectorbt_run(bars, signals, direction, execution)
            single = backtest(bars, name, example, ppy=PPY, **execution)
            label = (name, example, direction, exec_name)
            # the sweep, backtest() and the reference agree on the very same signals
            np.testing.assert_array_equal(row, [single.metrics[m] for m in METRICS], str(label))
            cleared, (_, equity, trades), (metrics, vbt_equity, vbt_trades) = vectorbt_signals(
                bars, signals, execution)
            np.testing.assert_allclose(single.equity.to_numpy(), equity, rtol=1e-12,
                                       err_msg=str(label))
            assert single.trades["exit_reason"].tolist() == [t["reason"] for t in trades]
            assert_same_run(vbt_equity, [t["pnl"] for t in vbt_trades], metrics, pf, label)
            if not cleared:
                assert_same_run(single.equity.to_numpy(), single.trades["pnl"].to_numpy(),
                                mine, pf, label)
                assert mine["n_trades"] == pf.trades.count(), label
                direct += 1
                continue
            # which bar, which rule: barsweep's first departure is an entry on a stop bar
            assert cleared[0] == first_entry_on_a_stop_bar(single.trades), label
            replayed += 1
    # every combo over its whole run; without stops nothing is ever cleared, and with
    # direction both the stops clear bars in 4-10 of the 10 combos of each case
    assert direct + replayed == sum(map(len, CASES.values()))
    assert replayed == 0 if exec_name == "costs" else direction != "both" or replayed >= 4


@njit(cache=True)
def scheduled_signal(ind, rows, fparams, bars, t):
    """Long at the close of bar ``enter``; at the close of bar ``flip`` the long's exit,
    which is also a short entry (direction both)."""
    return t == fparams[0], t == fparams[1], t == fparams[1], False


SCHEDULED = Strategy(name="scheduled", params=(Param("enter"), Param("flip")), indicators=(),
                     signal=scheduled_signal, doc="bar-numbered signals for hand cases")

# open, high, low, close of each bar; the long enters at bar 1's close (101)
STOP_BARS = [(100, 100, 100, 100), (101, 101, 101, 101), (100, 100, 95, 96), (96, 96, 94, 95),
             (95, 95, 93, 94)]
TRAIL_BARS = [(100, 100, 100, 100), (101, 101, 101, 101), (104, 110, 107, 108),
              (107, 107, 100, 101), (100, 100, 98, 99), (99, 99, 97, 98)]
TARGET_BARS = [(100, 100, 100, 100), (101, 101, 101, 101), (102, 107, 101, 100),
               (100, 100, 98, 99), (99, 99, 97, 98)]


def hand_case(rule):
    """(bars, execution, flip bar, the long's exit fill, the short's entry fill, last close)
    worked out by hand: cash 10,000, no fees; the short's equity at the end is
    ``cash + size * (entry - last close)``."""
    s = 0.001  # slippage: longs buy at price * (1 + s), sell at price * (1 - s)
    cases = {
        # stop 3% below the 101 fill = 97.97, inside bar 2 (open 100, low 95)
        "stop": (STOP_BARS, dict(stop_loss=0.03), 2, 101 * 0.97, 96.0),
        "stop+slippage": (STOP_BARS, dict(stop_loss=0.03, slippage=s), 2,
                          101 * (1 + s) * 0.97 * (1 - s), 96 * (1 - s)),
        # the highest high since the fill: 110 at bar 2; 3% below = 106.7, inside bar 3
        "trail": (TRAIL_BARS, dict(trailing_stop=0.03), 3, 110 * 0.97, 101.0),
        "trail+slippage": (TRAIL_BARS, dict(trailing_stop=0.03, slippage=s), 3,
                           110 * 0.97 * (1 - s), 101 * (1 - s)),
        # 5% above the 101 fill = 106.05, a limit reached by bar 2's high (107)
        "target": (TARGET_BARS, dict(take_profit=0.05), 2, 101 * 1.05, 100.0),
    }
    rows, costs, flip, exit_fill, short_fill = cases[rule]
    bars = {c: np.array([float(r[i]) for r in rows]) for i, c in enumerate(
        ("open", "high", "low", "close"))}
    return bars, dict(costs, fill="close", direction="both"), flip, exit_fill, short_fill


@pytest.mark.parametrize("rule", ["stop", "stop+slippage", "trail", "trail+slippage", "target"])
def test_signal_on_a_stop_bar_differs_by_design(rule):
    """The one rule where vectorbt differs, pinned by hand: a long (filled at 101 on bar
    1) is closed inside the flip bar by its stop, trailing stop or target, and the flip
    bar's close crosses down. barsweep's kernel then opens the short at that close
    (the stop came first, the close's signal after it) and holds it to the end; vectorbt
    ignores every signal of a bar where a stop fired and stays flat. Up to that bar the
    two are the same; the whole-run oracle above clears exactly this bar."""
    bars, execution, flip, exit_fill, short_fill = hand_case(rule)
    slip = execution.get("slippage", 0.0)
    long_fill = 101 * (1 + slip)
    cash = 10_000.0 / long_fill * exit_fill           # the long closed: flat, no fees
    last = bars["close"][-1]
    final = cash + cash / short_fill * (short_fill - last)
    reason = {"stop": "stop", "trail": "trail", "target": "target"}[rule.split("+")[0]]

    ours = backtest(bars, SCHEDULED, dict(enter=1, flip=flip), ppy=PPY, **execution)
    trades = ours.trades
    assert trades[["side", "entry_bar", "exit_bar", "exit_reason"]].values.tolist() == [
        [1, 1, flip, reason], [-1, flip, len(bars["close"]) - 1, "end"]]
    np.testing.assert_allclose(trades["entry_price"], [long_fill, short_fill], rtol=1e-12)
    assert trades["exit_price"].iloc[0] == pytest.approx(exit_fill, rel=1e-12)
    assert ours.equity.iloc[-1] == pytest.approx(final, rel=1e-12)

    n = len(bars["close"])
    le, lx = [t == 1 for t in range(n)], [t == flip for t in range(n)]
    signals = (le, lx, lx, [False] * n)
    theirs = vectorbt_run(bars, signals, "both", execution)
    assert theirs.trades.count() == 1                  # the long only, closed inside bar flip
    assert theirs.trades.records_readable["Avg Exit Price"].iloc[0] == pytest.approx(exit_fill,
                                                                                 rel=1e-12)
    held = [10_000.0 / long_fill * bars["close"][t] for t in range(1, flip)]
    np.testing.assert_allclose(theirs.value().to_numpy(), [10_000.0, *held] + [cash] * (n - flip),
                               rtol=1e-12)
    np.testing.assert_allclose(ours.equity.to_numpy()[:flip], theirs.value().to_numpy()[:flip],
                               rtol=1e-12)
    cleared, _, _ = vectorbt_signals(bars, signals, execution)
    assert cleared == [flip]


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
