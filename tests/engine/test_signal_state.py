"""Signals that see the position state (8 arguments: ``position, entry_price, entry_bar``),
held to the slow reference simulator asking the same rule of its own state, bar by bar.

The rule (``signal_state_example.py``, the example of docs/STRATEGIES.md) enters only from
flat and exits on the bars held or on the close against the entry price: a signal given
a stale or wrong state enters, exits or holds on other bars than the reference.
"""

import math
import re
from pathlib import Path

import numpy as np
import pytest
import signal_state_example
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.reference import ref_simulate, ref_sma
from numba import njit

from barsweep.engine import METRICS, Execution, Indicator, Param, Strategy, backtest, sweep_block
from barsweep.engine.strategies import crossover, kernels
from barsweep.engine.warm import signal_problem
from barsweep.errors import SpecError

PPY = 8760.0
STRATEGY = signal_state_example.STRATEGY
STRATEGIES_PAGE = Path(__file__).resolve().parents[2] / "docs" / "STRATEGIES.md"
COMBOS = [dict(period=5, hold=3, k=0.01), dict(period=20, hold=12, k=0.02),
          dict(period=12, hold=40, k=0.05), dict(period=8, hold=1, k=0.5)]
STOPS = {"none": {}, "stops": dict(stop_loss=0.015, take_profit=0.03, trailing_stop=0.02)}
#: exits of a stop, a target or a trailing stop (the trades table's exit_reason)
STOP_REASONS = {"stop", "target", "trail"}


def ref_rule(close, period, hold, k):
    """sma_hold's rule written for the reference: ``signal(t, position, entry_price,
    entry_bar)`` on the reference's state (entry price and bar are None when flat)."""
    sma = ref_sma(close, period)

    def signal(t, position, entry_price, entry_bar):
        flat = position == 0.0
        aged = not flat and t - entry_bar >= hold
        long_exit = position > 0 and (aged or close[t] < entry_price * (1 - k))
        short_exit = position < 0 and (aged or close[t] > entry_price * (1 + k))
        return flat and close[t] > sma[t], long_exit, flat and close[t] < sma[t], short_exit

    return signal


def reference(bars, params, execution):
    close = list(bars["close"])
    return ref_simulate(list(bars["open"]), close, high=list(bars["high"]),
                        low=list(bars["low"]), ppy=PPY, signal=ref_rule(close, **params),
                        **execution)


@pytest.fixture(scope="module")
def bars():
    return random_bars(700, seed=24, gap=0.003)


@pytest.mark.parametrize("stops", sorted(STOPS))
@pytest.mark.parametrize("direction", ["long", "short", "both"])
@pytest.mark.parametrize("fill", ["close", "next_open"])
def test_state_rule_equals_reference(bars, fill, direction, stops):
    """Metrics of the sweep, equity and trades of backtest(), equal to the reference over
    whole runs; with stops, a position stopped out in a bar is flat at that bar's close,
    so the rule enters again there (fill close) or at the next open."""
    execution = dict(fill=fill, direction=direction, fees=0.001, slippage=0.0005,
                     **STOPS[stops])
    grid = {name: np.array([c[name] for c in COMBOS]) for name in COMBOS[0]}
    swept = sweep_block(STRATEGY, bars, grid, Execution(**execution), PPY)
    reentered = aged = adverse = 0
    for params, row in zip(COMBOS, swept):
        ref, ref_equity, ref_trades = reference(bars, params, execution)
        ours = dict(zip(METRICS, row))
        assert_metrics_match(ours, ref, where=str(params))
        single = backtest(bars, STRATEGY, params, ppy=PPY, **execution)
        assert single.metrics == pytest.approx(ours, nan_ok=True, rel=0, abs=0)
        np.testing.assert_allclose(single.equity.to_numpy(), ref_equity, rtol=1e-12)
        trades = single.trades
        assert len(trades) == len(ref_trades) > 0
        for column, key in (("entry_bar", "entry_bar"), ("exit_bar", "exit_bar"),
                            ("side", "side"), ("exit_reason", "reason")):
            assert list(trades[column]) == [t[key] for t in ref_trades], (params, column)
        np.testing.assert_allclose(trades["entry_price"], [t["entry_price"] for t in ref_trades],
                                   rtol=1e-15)
        lag = 0 if fill == "close" else 1
        rows = list(trades.itertuples())
        reentered += sum(a.exit_reason in STOP_REASONS and b.entry_bar == a.exit_bar + lag
                         for a, b in zip(rows, rows[1:]))
        for trade in rows:
            if trade.exit_reason == "signal":
                held = trade.exit_bar - lag - trade.entry_bar
                aged += held >= params["hold"]
                adverse += held < params["hold"]
    assert aged > 0 and adverse > 0  # both state exits decide some trades
    assert (reentered > 0) == (stops == "stops")


def test_in_process_kernel_equals_the_module_kernel(bars):
    """An 8-argument signal that cannot be imported by name (its kernel compiled in this
    process only) runs the same simulation, bit for bit."""
    local = njit(signal_state_example.signal.py_func)
    with pytest.warns(UserWarning, match="cannot be imported by name"):
        here = Strategy(name="sma_hold_here", params=STRATEGY.params,
                        indicators=STRATEGY.indicators, signal=local)
    step = kernels.compiled(local).step
    assert step is not local and step.targetoptions["inline"] == "always"
    grid = {name: np.array([c[name] for c in COMBOS]) for name in COMBOS[0]}
    execution = Execution(fill="next_open", direction="both", fees=0.001, stop_loss=0.02)
    np.testing.assert_array_equal(sweep_block(here, bars, grid, execution, PPY),
                                  sweep_block(STRATEGY, bars, grid, execution, PPY))


def test_step_is_the_11_argument_signal_or_an_inlined_wrapper():
    """The simulation calls the 11-argument form: a shorter signal through a wrapper
    inlined into the kernel, which drops the arguments it does not take."""
    assert kernels.signal_arity(signal_state_example.signal) == 8
    assert kernels.signal_arity(crossover.signal) == 5
    for signal in (signal_state_example.signal, crossover.signal):
        step = kernels.compiled(signal).step
        assert step is not signal and step.targetoptions["inline"] == "always"
        assert list(step.py_func.__code__.co_varnames[:11]) == [
            *kernels.SIGNAL_ARGS, *kernels.STATE_ARGS, *kernels.ACCOUNT_ARGS]
        assert kernels.compiled(signal).ACCOUNT is False


def _six(ind, rows, fparams, bars, t, position):
    return False, False, False, False


def _star(ind, rows, fparams, bars, *state):
    return False, False, False, False


@pytest.mark.parametrize("function", [_six, _star])
def test_other_arities_are_refused_naming_the_signal(function):
    with pytest.raises(SpecError, match=re.escape(f"{__name__}.{function.__name__}")) as info:
        Strategy(name="bad_arity", params=(), indicators=(), signal=njit(function))
    message = str(info.value)
    assert "5 arguments (ind, rows, fparams, bars, t)" in message
    assert ("8 (and position, entry_price, entry_bar) or 11 (and position, entry_price, "
            "entry_bar, equity, pending, pending_price)") in message


def test_the_driver_check_types_an_8_argument_signal():
    """``barsweep run``'s check types the signal on the 8 arguments the kernel passes: a
    good one passes, a wrong return is refused as for a 5-argument signal."""
    assert signal_problem(STRATEGY) is None

    @njit
    def three(ind, rows, fparams, bars, t, position, entry_price, entry_bar):
        return position > 0.0, t - entry_bar > 2, entry_price > 0.0

    with pytest.warns(UserWarning, match="cannot be imported by name"):
        bad = Strategy(name="three", params=(Param("period", "int", 2),),
                       indicators=(Indicator("sma", ("period",)),), signal=three)
    assert "it returns a tuple of 3: (bool, bool, bool)" in signal_problem(bad)


def test_strategies_page_shows_the_state_example_verbatim():
    text = STRATEGIES_PAGE.read_text(encoding="utf-8")
    section = text.split("## Position state in a signal", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    source = Path(signal_state_example.__file__).read_text(encoding="utf-8")
    assert [b.strip() for b in blocks] == [source.strip()], (
        "docs/STRATEGIES.md's 'Position state in a signal' block and "
        "tests/engine/signal_state_example.py differ; keep them identical")


def test_the_reference_rule_sees_none_when_flat(bars):
    """The reference's callback gets (0.0, None, None) when flat: a rule that read the
    entry price or bar of a flat position would fail there, not pass silently."""
    seen = []

    def spy(t, position, entry_price, entry_bar):
        seen.append((position, entry_price, entry_bar))
        return t == 3, t == 9, False, False

    ref_simulate(list(bars["open"][:12]), list(bars["close"][:12]), fill="close", signal=spy)
    assert seen[3] == (0.0, None, None)
    assert seen[4][0] > 0 and seen[4][2] == 3 and not math.isnan(seen[4][1])
    assert seen[10] == (0.0, None, None)
