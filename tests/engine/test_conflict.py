"""An entry and an exit of one side true on the same bar (``execution.conflict``).

The default, ``opposite``: while a position is open its exit wins, so a rule's exit does
what it says even where its entry still holds. Each of vectorbt's conflict modes is held
to vectorbt's ``Portfolio.from_signals`` (``upon_long_conflict``/``upon_short_conflict``)
on signals that overlap on many bars, and to the reference simulator (tests/helpers/reference.py)
with both fills and stops; the builtin strategies, whose entries and exits never hold
together, give the same metrics, bit for bit, under every mode.
"""

import numpy as np
import pandas as pd
import pytest
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.portfolio_reference import ref_portfolio
from helpers.ref_strategies import EXAMPLES
from helpers.reference import ref_simulate
from numba import njit

from barsweep.engine import (
    METRICS,
    Execution,
    Param,
    Strategy,
    backtest,
    get_strategy,
    sweep_block,
    sweep_portfolio,
)
from barsweep.engine.core.hoist import hoist
from barsweep.engine.core.inputs import prepare_inputs
from barsweep.engine.core.sweep import sweep_cpu
from barsweep.engine.rules import Rule
from barsweep.engine.strategies import kernels
from barsweep.errors import SpecError

MODES = ("opposite", "ignore", "entry", "exit", "adjacent")
N_BARS = 800
PPY = 8760.0


@njit(cache=True)
def coin_signal(ind, rows, fparams, bars, t):
    """Four signals read from the bar's own prices, each true on about half the bars and
    each pair of one side together on about a quarter: many conflicts of every kind."""
    o, h, low, c = bars.open[t], bars.high[t], bars.low[t], bars.close[t]
    k = fparams[0]
    return c > o, h - c < (c - low) * k, h - o > o - low, c > (h + low) * 0.5


COIN = Strategy(name="coin", params=(Param("k", "float", 0.0, 10.0),), indicators=(),
                signal=coin_signal, doc="signals from the bar's prices, overlapping")


def coin_signals(bars, k):
    """:func:`coin_signal`'s four lists, computed with numpy."""
    o, h, low, c = (np.asarray(bars[x]) for x in ("open", "high", "low", "close"))
    return [list(s) for s in (c > o, h - c < (c - low) * k, h - o > o - low,
                              c > (h + low) * 0.5)]


def vectorbt_run(vbt, bars, signals, direction, mode):
    index = pd.date_range("2020-01-01", periods=len(bars["close"]), freq="1h")
    le, lx, se, sx = (pd.Series(np.asarray(s, dtype=bool), index=index) for s in signals)
    close = pd.Series(bars["close"], index=index)
    kwargs = dict(fees=0.001, init_cash=10_000.0, freq="1h", upon_long_conflict=mode,
                  upon_short_conflict=mode)
    if direction == "long":
        return vbt.Portfolio.from_signals(close, le, lx, direction="longonly", **kwargs)
    if direction == "short":
        return vbt.Portfolio.from_signals(close, se, sx, direction="shortonly", **kwargs)
    return vbt.Portfolio.from_signals(close, le, lx, short_entries=se, short_exits=sx,
                                      **kwargs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("direction", ["long", "short", "both"])
def test_each_mode_matches_vectorbt(direction, mode):
    """Every mode, as vectorbt's ``from_signals`` with ``upon_long_conflict`` and
    ``upon_short_conflict`` set to it. With direction ``both`` the signals are a rule's
    (short entry = long exit, short exit = long entry: what barsweep reverses on, as
    vectorbt's default ``upon_opposite_entry`` does)."""
    vbt = pytest.importorskip("vectorbt")
    bars = random_bars(N_BARS, seed=31)
    k = 1.0
    signals = coin_signals(bars, k)
    if direction == "both":
        signals = [signals[0], signals[1], signals[1], signals[0]]
    conflicts = sum(a and b for a, b in zip(signals[0], signals[1]))
    assert conflicts > N_BARS // 8
    pf = vectorbt_run(vbt, bars, signals, direction, mode)
    strategy = COIN if direction != "both" else BOTH
    ours = backtest(bars, strategy, dict(k=k), ppy=PPY, fill="close", fees=0.001,
                    direction=direction, conflict=mode)
    label = (direction, mode)
    np.testing.assert_allclose(ours.equity.to_numpy(), pf.value().to_numpy(), rtol=1e-12,
                               err_msg=str(label))
    assert ours.metrics["n_trades"] == pf.trades.count() > 10, label
    np.testing.assert_allclose(ours.trades["pnl"].to_numpy(),
                               pf.trades.records_readable["PnL"].to_numpy(), rtol=1e-9,
                               atol=1e-9, err_msg=str(label))


@njit(cache=True)
def both_signal(ind, rows, fparams, bars, t):
    """:func:`coin_signal`'s long pair, its short side a rule's default (the long's exit
    enters short, the long's entry exits it)."""
    long_entry, long_exit, _, _ = coin_signal(ind, rows, fparams, bars, t)
    return long_entry, long_exit, long_exit, long_entry


BOTH = Strategy(name="coin_both", params=(Param("k", "float", 0.0, 10.0),), indicators=(),
                signal=both_signal, doc="coin's long signals, shorts as a rule's")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fill", ["close", "next_open"])
@pytest.mark.parametrize("direction", ["long", "short", "both"])
def test_each_mode_equals_the_reference(direction, fill, mode):
    """The sweep kernel, ``backtest()`` and the reference simulator agree under every
    mode, fill and direction, with a stop and without."""
    bars = random_bars(N_BARS, seed=32, gap=0.004)
    for k, stop in ((1.0, None), (0.7, 0.01)):
        execution = dict(fill=fill, direction=direction, fees=0.001, conflict=mode)
        if stop:
            execution["stop_loss"] = stop
        ours = backtest(bars, COIN, dict(k=k), ppy=PPY, **execution)
        swept = sweep_block(COIN, bars, dict(k=np.array([k])), Execution(**execution), PPY)
        np.testing.assert_array_equal(swept[0], [ours.metrics[m] for m in METRICS])
        metrics, equity, trades = ref_simulate(
            list(bars["open"]), list(bars["close"]), *coin_signals(bars, k),
            high=list(bars["high"]), low=list(bars["low"]), ppy=PPY, **execution)
        label = (direction, fill, mode, stop)
        np.testing.assert_allclose(ours.equity.to_numpy(), equity, rtol=1e-12,
                                   err_msg=str(label))
        assert ours.trades["entry_bar"].tolist() == [t["entry_bar"] for t in trades], label
        assert ours.trades["exit_reason"].tolist() == [t["reason"] for t in trades], label


@pytest.mark.parametrize("fill", ["close", "next_open"])
def test_an_exit_fires_while_the_entry_still_holds(fill):
    """The issue's case: ``exit: bars_held >= hold`` on a rule whose entry stays true.
    Under the default every trade the exit closes ends at the first close where it has
    been held ``hold`` bars (filled there, or at the next open), and the next trade
    begins a bar later (the entry acts again once flat); under ``ignore`` (vectorbt's
    default) the exit never fires."""
    bars = random_bars(300, seed=33)
    rule = Rule("close > 0", "bars_held >= hold")
    ours = backtest(bars, rule, dict(hold=3), ppy=PPY, fill=fill)
    closed = ours.trades[ours.trades["exit_reason"] == "signal"]
    assert len(closed) > 50
    held = 3 if fill == "close" else 4
    assert ((closed["exit_bar"] - closed["entry_bar"]) == held).all()
    later = ours.trades["entry_bar"].to_numpy()[1:]
    np.testing.assert_array_equal(later, closed["exit_bar"].to_numpy()[:len(later)] + 1)
    ignored = backtest(bars, rule, dict(hold=3), ppy=PPY, fill=fill, conflict="ignore")
    assert ignored.trades["exit_reason"].tolist() == ["end"]


def step_signals(strategy, bars, params):
    """The strategy's four signals at every bar, as its kernel's ``step`` gives them while
    flat, one array per combo: shape (n_combos, n_bars, 4)."""
    inputs = prepare_inputs(strategy, bars, params, Execution(), PPY)
    ind, rows = hoist(strategy, inputs.columns, inputs.strategy_params, inputs.n_combos)
    combos = inputs.combos(rows)
    step = kernels.compiled(strategy.signal).step
    n = len(bars["close"])
    return np.array([[step(ind, combos.rows[c], combos.fparams[c], inputs.bars, t, 0.0, 0.0, t,
                           1.0, 0.0, 0.0)
                      for t in range(n)] for c in range(inputs.n_combos)], dtype=bool)


def builtin_bars():
    """Synthetic bars, and real daily AAPL where the sample data is installed."""
    yield random_bars(2000, seed=34, gap=0.004)
    try:
        from golden.cases import load_bars
        yield load_bars("AAPL")
    except ImportError:
        pass


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_builtins_never_hold_an_entry_and_its_exit_together(name):
    """A builtin's entry and exit of one side never hold on the same bar (crosses one
    way and the other, levels lower < upper, bands, channels: the signal reads no
    position, so its flat values are all there is), and so every mode gives its metrics:
    bit for bit, and to rounding under ``entry``, whose flat bars are stepped one by one
    (the drawdown sums added bar by bar instead of a stretch at once)."""
    strategy = get_strategy(name)
    examples = EXAMPLES[name]
    params = {p: np.array([ex[p] for ex in examples]) for p in examples[0]}
    for bars in builtin_bars():
        signals = step_signals(strategy, bars, params)
        assert signals[..., 0].any() and not (signals[..., 0] & signals[..., 1]).any()
        assert not (signals[..., 2] & signals[..., 3]).any()
        for fill in ("close", "next_open"):
            runs = [sweep_block(strategy, bars, params, Execution(
                fill=fill, direction="both", fees=0.001, conflict=mode), PPY) for mode in MODES]
            for mode, run in zip(MODES[1:], runs[1:]):
                label = f"{name} {fill} {mode}"
                if mode == "entry":
                    np.testing.assert_allclose(run, runs[0], rtol=1e-12, err_msg=label)
                else:
                    np.testing.assert_array_equal(run, runs[0], err_msg=label)


def test_an_unknown_mode_is_one_line():
    with pytest.raises(SpecError, match="execution.conflict"):
        from barsweep.engine.core.execution import execution_of
        execution_of(dict(conflict="exits"))


@pytest.mark.parametrize("mode", MODES)
def test_lockstep_equals_the_cpu_kernel_under_every_mode(mode):
    """The GPU's simulation (one bar per iteration), compiled for the CPU, gives the CPU
    kernel's metrics bit for bit under every mode (tests/engine/test_lockstep.py)."""
    bars = random_bars(N_BARS, seed=35, gap=0.004)
    params = dict(k=np.linspace(0.3, 2.0, 8))
    for execution in (dict(fill="close", direction="long", fees=0.001),
                      dict(fill="next_open", direction="both", fees=0.001, stop_loss=0.01)):
        execution = Execution(**execution, conflict=mode)
        whole, stepped = (sweep_cpu(COIN, bars, params, execution, PPY, kernel=kernel)
                          for kernel in (None, kernels.compiled(COIN.signal).lockstep_kernel))
        assert whole.tobytes() == stepped.tobytes(), execution
        assert whole[:, METRICS.index("n_trades")].sum() > 50


def replay_of(signals):
    """The four lists as the portfolio reference asks for them, ``f(t, position, ...)``."""
    return lambda t, *_: tuple(s[t] for s in signals)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fill", ["close", "next_open"])
def test_a_portfolio_resolves_each_mode_as_the_reference(fill, mode):
    """A portfolio's rules (long only) under every mode: its kernel equals the portfolio
    reference (tests/helpers/portfolio_reference.py) resolving each symbol's signals the
    same way."""
    universe = {s: random_bars(600, seed=40 + i, gap=0.003) for i, s in enumerate("ABC")}
    params = dict(k=np.array([0.8, 1.5]))
    execution = dict(fill=fill, fees=0.001, conflict=mode)
    ours, per_symbol = sweep_portfolio(COIN, universe, params, Execution(**execution), PPY)
    for c, k in enumerate(params["k"]):
        signals = {s: replay_of(coin_signals(b, k)) for s, b in universe.items()}
        ref = ref_portfolio(signals, universe, ppy=PPY, **execution)
        where = f"{fill} {mode} k={k}"
        assert_metrics_match(dict(zip(METRICS, ours[c], strict=True)), ref["metrics"],
                             where=where)
        assert [per_symbol[c, i, 0] for i in range(3)] == [
            ref["per_symbol"][s][0] for s in universe], where
        assert ours[c, METRICS.index("n_trades")] > 20, where
