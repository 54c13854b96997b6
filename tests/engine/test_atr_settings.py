"""Settings in ATRs (``execution.atr_window``): a risk size's stop distance
(``size.atr``) and an entry order's offset (``entry_order.unit: atr``), against the
reference simulator fed the reference ATR, the kernels' ATR against TA-Lib, and the
refusals."""

import numpy as np
import pytest
import talib
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.reference import ref_atr, ref_ema_cross_signals, ref_simulate
from hypothesis import given, settings
from hypothesis import strategies as st

from barsweep.engine import METRICS, Execution, backtest, get_strategy, sweep_block
from barsweep.engine.core.inputs import atr_column, bar_tuple, prepare_inputs
from barsweep.errors import SpecError

PPY = 8760.0


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_bars=st.integers(1, 250),
    window=st.sampled_from([1, 5, 14]),
    fill=st.sampled_from(["close", "next_open"]),
    direction=st.sampled_from(["long", "short", "both"]),
    order=st.sampled_from([None, "limit", "stop"]),
    offset=st.sampled_from([0.0, 0.5, 2.0]),
    risk=st.sampled_from([None, (0.02, 1.5), (0.2, 3.0)]),
    stop_loss=st.sampled_from([None, 0.02]),
    pairs=st.lists(st.tuples(st.integers(2, 20), st.integers(3, 50)), min_size=1, max_size=3),
)
def test_atr_settings_equal_the_reference(seed, n_bars, window, fill, direction, order,
                                          offset, risk, stop_loss, pairs):
    bars = random_bars(n_bars, seed, gap=0.02)
    execution = dict(fill=fill, direction=direction, fees=0.001, slippage=0.0005,
                     stop_loss=stop_loss)
    size = ({"type": "risk", "value": risk[0], "atr": risk[1]} if risk
            else {"type": "percent", "value": 0.5})
    entry_order = ({"type": order, "offset": offset, "unit": "atr", "valid_bars": 4} if order
                   else {})
    params = dict(fast=np.array([p[0] for p in pairs]), slow=np.array([p[1] for p in pairs]))
    swept = sweep_block(get_strategy("ema_cross"), bars, params,
                        Execution(size=size, entry_order=entry_order, atr_window=window,
                                  **execution), PPY)
    atr = ref_atr(list(bars["high"]), list(bars["low"]), list(bars["close"]), window)
    for (fast, slow), row in zip(pairs, swept):
        up, down = ref_ema_cross_signals(list(bars["close"]), fast, slow)
        ref, _, ref_trades = ref_simulate(
            list(bars["open"]), list(bars["close"]), up, down, down, up,
            high=list(bars["high"]), low=list(bars["low"]), ppy=PPY, size=size["type"],
            size_value=size["value"], risk_atr=size.get("atr"), atr=atr,
            entry_order=order or "market", entry_offset=offset, valid_bars=4,
            offset_unit="atr", **execution)
        assert_metrics_match(dict(zip(METRICS, row)), ref, rtol=1e-10, atol=1e-10)
        single = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY, size=size,
                          entry_order=entry_order, atr_window=window, **execution)
        assert list(single.trades["entry_bar"]) == [t["entry_bar"] for t in ref_trades]


@pytest.mark.parametrize("window", [1, 7, 14, 30])
def test_the_kernels_atr_is_talibs(window):
    bars = random_bars(200, 4, gap=0.01)
    ours = atr_column(bar_tuple(bars), window)
    theirs = talib.ATR(bars["high"], bars["low"], bars["close"], timeperiod=window)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, equal_nan=True)
    assert atr_column(bar_tuple(bars), 0) is None  # unread: nothing computed
    execution = Execution(entry_order={"type": "limit", "offset": 1.0, "unit": "atr"},
                          atr_window=window)
    inputs = prepare_inputs(get_strategy("ema_cross"), bars,
                            dict(fast=np.array([3]), slow=np.array([9])), execution, PPY)
    np.testing.assert_array_equal(inputs.settings.atr[0], ours)  # what the kernels read
    assert prepare_inputs(get_strategy("ema_cross"), bars,
                          dict(fast=np.array([3]), slow=np.array([9])), Execution(),
                          PPY).settings.atr == ()  # compiled away


def test_a_risk_size_in_atrs_loses_its_fraction_at_that_distance():
    """A risk of 1% of 10,000 at 1.5 ATRs buys 100 / (1.5 ATR) units, the ATR (TA-Lib's)
    as of the entry's close; none in the ATR's warm-up."""
    n = 40
    close = np.full(n, 100.0)
    close[15:20] -= 0.5  # a dip, then a step up: ema(2) crosses above ema(3) at bar 20
    close[20:] += 0.5
    bars = {"open": close, "high": close + 1.0, "low": close - 1.0, "close": close}
    size = {"type": "risk", "value": 0.01, "atr": 1.5}
    res = backtest(bars, "ema_cross", dict(fast=2, slow=3), ppy=PPY, fill="close",
                   atr_window=5, size=size)
    trade = res.trades.iloc[0]
    atr = talib.ATR(bars["high"], bars["low"], bars["close"], timeperiod=5)[20]
    assert trade["entry_bar"] == 20
    assert trade["size"] == pytest.approx(0.01 * 10_000.0 / (1.5 * atr), rel=1e-14)
    early = backtest(bars, "buy_and_hold", {}, ppy=PPY, fill="close", atr_window=5,
                     size=size)
    assert len(early.trades) == 0  # bar 0's ATR is not there yet (its warm-up)


@pytest.mark.parametrize("settings, words", [
    ({"size": {"type": "percent", "value": 0.5, "atr": 2.0}},
     "execution.size: Value error, type percent takes no atr"),
    ({"entry_order": {"type": "limit", "offset": -1.0, "unit": "atr"}},
     "execution.entry_order.offset: Input should be greater than or equal to 0"),
    ({"entry_order": {"type": "limit", "offset": 1.5}},
     "execution.entry_order: Value error, offset must be a fraction of the close in [0, 1)"),
    ({"atr_window": 0}, "execution.atr_window: Input should be greater than or equal to 1"),
])
def test_bad_atr_settings_are_refused_in_one_line(settings, words):
    from barsweep.engine.core import execution_of

    with pytest.raises(SpecError) as err:
        execution_of(settings)
    message = str(err.value).replace("Value error, ", "")
    assert message.startswith(words.replace("Value error, ", "")), str(err.value)
    assert "\n" not in str(err.value)


def test_offsets_in_atrs_may_pass_one_as_a_grid_axis():
    bars = random_bars(300, 9, gap=0.01)
    params = dict(fast=np.array([3, 3]), slow=np.array([12, 12]),
                  entry_offset=np.array([0.5, 2.5]))
    swept = sweep_block(get_strategy("ema_cross"), bars, params,
                        Execution(entry_order={"type": "limit", "unit": "atr"}), PPY)
    assert not np.array_equal(swept[0], swept[1])
    with pytest.raises(SpecError, match="grid.entry_offset: entry_offset must be a fraction"):
        sweep_block(get_strategy("ema_cross"), bars, params,
                    Execution(entry_order={"type": "limit"}), PPY)


def test_risk_in_atrs_needs_no_stop_loss():
    bars = random_bars(300, 2, gap=0.01)
    size = {"type": "risk", "value": 0.01}
    with pytest.raises(SpecError, match="execution.size: type risk sizes by the loss"):
        sweep_block(get_strategy("ema_cross"), bars, dict(fast=np.array([3]),
                                                          slow=np.array([9])),
                    Execution(size=size), PPY)
    swept = sweep_block(get_strategy("ema_cross"), bars, dict(fast=np.array([3]),
                                                              slow=np.array([9])),
                        Execution(size={**size, "atr": 2.0}), PPY)
    assert swept[0][METRICS.index("n_trades")] > 0
