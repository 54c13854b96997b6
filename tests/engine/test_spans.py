"""Runs over a span of the bars (walk-forward windows), the returns' skew and kurtosis,
and the per-segment return sums of PBO, against the slow reference and scipy."""

import numpy as np
import pytest
import scipy.stats
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.reference import ref_ema_cross_signals, ref_simulate
from hypothesis import given, settings
from hypothesis import strategies as st

from barsweep.engine import METRICS, Execution, backtest, get_strategy, sweep_block
from barsweep.engine.core.simulate import segment_bounds

PPY = 8760.0
PAIRS = [(3, 12), (5, 20), (8, 30), (2, 7)]


def bar_returns(equity: np.ndarray, init_cash: float) -> np.ndarray:
    prev = np.concatenate([[init_cash], equity[:-1]])
    return np.where(prev > 0, equity / np.where(prev > 0, prev, 1.0) - 1.0, 0.0)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_bars=st.integers(40, 300),
    cut=st.tuples(st.floats(0, 0.9), st.floats(0.05, 1.0)),
    fill=st.sampled_from(["close", "next_open"]),
    fees=st.sampled_from([0.0, 0.002]),
    direction=st.sampled_from(["long", "both"]),
)
def test_a_span_is_a_run_over_its_bars_with_indicators_warmed_up(seed, n_bars, cut, fill,
                                                                  fees, direction):
    bars = random_bars(n_bars, seed)
    start = int(cut[0] * (n_bars - 1))
    end = min(n_bars, start + max(1, int(cut[1] * n_bars)))
    execution = dict(fill=fill, fees=fees, direction=direction)
    params = dict(fast=np.array([p[0] for p in PAIRS]), slow=np.array([p[1] for p in PAIRS]))
    swept = sweep_block(get_strategy("ema_cross"), bars, params, Execution(**execution), PPY,
                        spans=[(start, end), (0, n_bars)])
    whole = sweep_block(get_strategy("ema_cross"), bars, params, Execution(**execution), PPY)
    np.testing.assert_array_equal(swept[1], whole)
    open_, close = list(bars["open"]), list(bars["close"])
    for (fast, slow), row in zip(PAIRS, swept[0]):
        # the signals of the whole series (indicators from bar 0), the run on the span only
        le, lx = ref_ema_cross_signals(close, fast, slow)
        se, sx = (lx, le) if direction == "both" else (None, None)
        window = slice(start, end)
        ref, ref_equity, _ = ref_simulate(
            open_[window], close[window], le[window], lx[window],
            None if se is None else se[window], None if sx is None else sx[window],
            ppy=PPY, **execution)
        ours = dict(zip(METRICS, row))
        assert_metrics_match(ours, ref, where=(start, end, fast, slow))
        one = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY,
                       span=(start, end), **execution)
        assert one.metrics == pytest.approx(ours, nan_ok=True, rel=0, abs=0)
        np.testing.assert_allclose(one.equity.to_numpy(), ref_equity, rtol=1e-12)
        assert len(one.equity) == end - start


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_skew_and_kurtosis_equal_scipy_on_the_equity_returns(seed):
    bars = random_bars(2000, seed)
    for fast, slow in PAIRS:
        res = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY,
                       direction="both", fees=0.001)
        r = bar_returns(res.equity.to_numpy(), 10_000.0)
        assert res.metrics["skew"] == pytest.approx(scipy.stats.skew(r), rel=1e-9)
        assert res.metrics["kurtosis"] == pytest.approx(
            scipy.stats.kurtosis(r, fisher=False), rel=1e-9)


def test_a_flat_equity_has_no_skew_or_kurtosis():
    bars = random_bars(50, seed=1)
    res = backtest(bars, "ema_cross", dict(fast=60, slow=70), ppy=PPY)
    assert np.isnan(res.metrics["skew"]) and np.isnan(res.metrics["kurtosis"])


@pytest.mark.parametrize(("n_bars", "n_segs", "execution"), [
    (997, 10, dict(fill="close", fees=0.001)),
    (400, 4, dict(fill="next_open", direction="both", stop_loss=0.02)),
    (60, 8, dict(fill="close", direction="short")),
])
def test_segment_sums_are_the_sums_of_each_segments_bar_returns(n_bars, n_segs, execution):
    bars = random_bars(n_bars, seed=n_bars)
    params = dict(fast=np.array([p[0] for p in PAIRS]), slow=np.array([p[1] for p in PAIRS]))
    segs = np.full((len(PAIRS), n_segs, 2), np.nan)
    metrics = sweep_block(get_strategy("ema_cross"), bars, params, Execution(**execution), PPY,
                          seg_sums=segs)
    plain = sweep_block(get_strategy("ema_cross"), bars, params, Execution(**execution), PPY)
    np.testing.assert_array_equal(metrics, plain)  # segments change no metric
    bounds = segment_bounds(0, n_bars, n_segs)
    assert bounds[0, 0] == 0 and bounds[-1, 1] == n_bars
    assert (np.diff(bounds, axis=1) >= n_bars // n_segs).all()
    for c, (fast, slow) in enumerate(PAIRS):
        res = backtest(bars, "ema_cross", dict(fast=fast, slow=slow), ppy=PPY, **execution)
        r = bar_returns(res.equity.to_numpy(), 10_000.0)
        expected = np.array([[r[a:b].sum(), (r[a:b] ** 2).sum()] for a, b in bounds])
        np.testing.assert_allclose(segs[c], expected, rtol=1e-10, atol=1e-14)


def test_segment_sums_of_a_ruined_combo_stop_at_the_ruin():
    close = np.array([100.0, 101, 103, 106, 100, 95, 92, 300, 310, 320, 330, 340])
    bars = dict(open=close, high=close * 1.01, low=close * 0.99, close=close)
    segs = np.empty((1, 4, 2))
    setting = dict(fill="close", direction="short")
    params = dict(fast=np.array([2]), slow=np.array([3]))
    out = sweep_block(get_strategy("ema_cross"), bars, params, Execution(**setting), PPY,
                      seg_sums=segs)
    assert out[0, METRICS.index("ruined")] == 1.0
    res = backtest(bars, "ema_cross", dict(fast=2, slow=3), ppy=PPY, **setting)
    r = bar_returns(res.equity.to_numpy(), 10_000.0)
    expected = [[r[a:b].sum(), (r[a:b] ** 2).sum()] for a, b in segment_bounds(0, 12, 4)]
    np.testing.assert_allclose(segs[0], expected, rtol=1e-12)
    assert segs[0, -1].tolist() == [0.0, 0.0]


def test_spans_and_segments_are_refused_together_and_bad_spans_named():
    bars = random_bars(50, seed=1)
    params = dict(fast=np.array([3]), slow=np.array([9]))
    with pytest.raises(ValueError, match="not with spans"):
        sweep_block(get_strategy("ema_cross"), bars, params, Execution(), PPY, spans=[(0, 10)],
                    seg_sums=np.empty((1, 2, 2)))
    with pytest.raises(ValueError, match=r"0 <= start < end <= 50"):
        sweep_block(get_strategy("ema_cross"), bars, params, Execution(), PPY, spans=[(10, 60)])
