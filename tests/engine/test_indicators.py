"""Indicator kernels against TA-Lib (the oracle) and against tests/reference.py."""

from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import talib
from bars import random_bars
from reference import (
    ref_atr,
    ref_bbands,
    ref_donchian,
    ref_ema,
    ref_macd,
    ref_roc,
    ref_rsi,
    ref_sma,
    ref_stoch,
    ref_trix,
    ref_wma,
)

from barsweep.engine import ema, sma
from barsweep.engine.indicators import (
    INDICATORS,
    atr,
    bbands,
    compute_indicator,
    donchian,
    macd,
    roc,
    rsi,
    stoch,
    trix,
    trix_signal,
    wma,
)
from barsweep.errors import SpecError

PERIODS = [2, 3, 5, 12, 26, 50, 200]

# One period p -> (ours, TA-Lib), each a function of the bars dict.
SINGLE_PERIOD = {
    "sma": (lambda b, p: sma(b["close"], p), lambda b, p: talib.SMA(b["close"], p)),
    "ema": (lambda b, p: ema(b["close"], p), lambda b, p: talib.EMA(b["close"], p)),
    "wma": (lambda b, p: wma(b["close"], p), lambda b, p: talib.WMA(b["close"], p)),
    "rsi": (lambda b, p: rsi(b["close"], p), lambda b, p: talib.RSI(b["close"], p)),
    "trix": (lambda b, p: trix(b["close"], p), lambda b, p: talib.TRIX(b["close"], p)),
    "trix_signal": (
        lambda b, p: trix_signal(b["close"], p, 9),
        lambda b, p: talib.EMA(talib.TRIX(b["close"], p), 9),
    ),
    "roc": (lambda b, p: roc(b["close"], p), lambda b, p: talib.ROC(b["close"], p)),
    "atr": (
        lambda b, p: atr(b["high"], b["low"], b["close"], p),
        lambda b, p: talib.ATR(b["high"], b["low"], b["close"], p),
    ),
    "bbands": (
        lambda b, p: bbands(b["close"], p, 2.0),
        lambda b, p: talib.BBANDS(b["close"], p, 2.0, 2.0, 0),
    ),
    "donchian": (
        lambda b, p: donchian(b["high"], b["low"], p),
        lambda b, p: (talib.MAX(b["high"], p), talib.MIN(b["low"], p)),
    ),
}
# TA-Lib refuses a period of 1 for these; the others take it.
NO_PERIOD_1 = {"rsi", "bbands", "donchian"}

MACD_ARGS = [(12, 26, 9), (2, 3, 1), (5, 35, 5), (3, 50, 2), (26, 12, 9), (50, 2, 2), (7, 7, 3)]
STOCH_ARGS = [(14, 3, 3), (5, 3, 3), (2, 1, 1), (1, 1, 1), (50, 5, 10), (9, 1, 4)]


@cache
def aapl() -> dict[str, np.ndarray]:
    """AAPL daily bars, 2000-03 to 2013-03 (3270 bars), from bokeh_sampledata."""
    import bokeh_sampledata

    path = Path(bokeh_sampledata.__file__).parent / "_data" / "stocks.csv.gz"
    frame = pd.read_csv(path)
    frame = frame[frame["Ticker"] == "AAPL"]
    return {c.lower(): frame[c].to_numpy(np.float64) for c in ("Open", "High", "Low", "Close")}


def bars_for(data: str) -> dict[str, np.ndarray]:
    return random_bars(2000, seed=7) if data == "random" else aapl()


def assert_matches(ours, theirs, rtol=1e-9, atol=1e-12):
    """Same NaN positions, then equal to ``rtol`` (``atol`` for values near 0)."""
    ours = ours if isinstance(ours, tuple) else (ours,)
    theirs = tuple(theirs) if isinstance(theirs, (tuple, list)) else (theirs,)
    assert len(ours) == len(theirs)
    for mine, other in zip(ours, theirs):
        assert mine.dtype == np.float64 and mine.shape == other.shape
        np.testing.assert_array_equal(np.isnan(mine), np.isnan(other))
        assert (~np.isnan(mine)).any()
        np.testing.assert_allclose(mine, other, rtol=rtol, atol=atol)


@pytest.mark.parametrize("data", ["random", "aapl"])
@pytest.mark.parametrize("period", PERIODS)
@pytest.mark.parametrize("name", list(SINGLE_PERIOD))
def test_matches_talib(name, period, data):
    ours, theirs = SINGLE_PERIOD[name]
    bars = bars_for(data)
    assert_matches(ours(bars, period), theirs(bars, period))


@pytest.mark.parametrize("name", sorted(set(SINGLE_PERIOD) - NO_PERIOD_1))
def test_period_1_matches_talib(name):
    ours, theirs = SINGLE_PERIOD[name]
    bars = random_bars(300, seed=3)
    assert_matches(ours(bars, 1), theirs(bars, 1))


@pytest.mark.parametrize("data", ["random", "aapl"])
@pytest.mark.parametrize("args", MACD_ARGS)
def test_macd_matches_talib(args, data):
    close = bars_for(data)["close"]
    assert_matches(macd(close, *args), talib.MACD(close, *args))


@pytest.mark.parametrize("data", ["random", "aapl"])
@pytest.mark.parametrize("args", STOCH_ARGS)
def test_stoch_matches_talib(args, data):
    b = bars_for(data)
    k_period, k_smooth, d_period = args
    theirs = talib.STOCH(
        b["high"], b["low"], b["close"], fastk_period=k_period, slowk_period=k_smooth,
        slowk_matype=0, slowd_period=d_period, slowd_matype=0,
    )
    assert_matches(stoch(b["high"], b["low"], b["close"], *args), theirs)


@pytest.mark.parametrize("signal", [1, 2, 9, 30])
@pytest.mark.parametrize("period", [2, 9, 30])
def test_ema_and_sma_skip_leading_nans_like_talib(period, signal):
    line = talib.TRIX(aapl()["close"], period)
    assert_matches(ema(line, signal), talib.EMA(line, signal))
    assert_matches(sma(line, signal), talib.SMA(line, signal))
    assert_matches(trix_signal(aapl()["close"], period, signal), talib.EMA(line, signal))


@pytest.mark.parametrize("name", list(SINGLE_PERIOD))
def test_leading_nans_shift_the_warm_up_like_talib(name):
    """As the TA-Lib wrapper: start where every input is non-NaN (here bar 8)."""
    raw = random_bars(400, seed=2)
    b = {k: np.concatenate([np.full(7, np.nan), raw[k]]) for k in ("high", "low", "close")}
    b["high"][7] = np.nan
    ours, theirs = SINGLE_PERIOD[name]
    assert_matches(ours(b, 5), theirs(b, 5))
    if name == "atr":  # and the other multi-input and multi-output kernels
        assert_matches(macd(b["close"], 3, 8, 4), talib.MACD(b["close"], 3, 8, 4))
        assert_matches(
            stoch(b["high"], b["low"], b["close"], 5, 3, 2),
            talib.STOCH(b["high"], b["low"], b["close"], 5, 3, 0, 2, 0),
        )


def test_bbands_stays_accurate_on_a_finely_quoted_series():
    """TA-Lib >= 0.6 takes the variance from shifted sums; E[x^2] - mean^2 would not do."""
    rng = np.random.default_rng(0)
    close = 100.0 + rng.normal(0.0, 1e-5, 500)
    close[200:300] = 100.0  # RSI(2)'s gain and loss fall to ~1e-35 here, yet are not 0
    for period in (2, 5, 20):
        assert_matches(bbands(close, period, 2.0), talib.BBANDS(close, period, 2.0, 2.0, 0))
        assert_matches(rsi(close, period), talib.RSI(close, period))


def test_long_series_do_not_drift():
    """Running sums are re-anchored as TA-Lib's are: still 1e-9 after 100k bars."""
    b = random_bars(100_000, seed=5)
    assert_matches(wma(b["close"], 2), talib.WMA(b["close"], 2))
    assert_matches(bbands(b["close"], 20, 2.0), talib.BBANDS(b["close"], 20, 2.0, 2.0, 0))
    assert_matches(
        stoch(b["high"], b["low"], b["close"], 14, 3, 3),
        talib.STOCH(b["high"], b["low"], b["close"], 14, 3, 0, 3, 0),
    )


@pytest.mark.parametrize("period", [2, 7, 30])
def test_matches_reference(period):
    b = random_bars(300, seed=1)
    h, l, c = (list(b[k]) for k in ("high", "low", "close"))

    def check(ours, ref):
        ours = ours if isinstance(ours, tuple) else (ours,)
        ref = ref if isinstance(ref, tuple) else (ref,)
        for mine, other in zip(ours, ref):
            np.testing.assert_allclose(mine, np.array(other, dtype=float), rtol=1e-9, atol=1e-12)

    close = b["close"]
    check(ema(close, period), ref_ema(c, period))
    check(sma(close, period), ref_sma(c, period))
    check(wma(close, period), ref_wma(c, period))
    check(rsi(close, period), ref_rsi(c, period))
    check(roc(close, period), ref_roc(c, period))
    check(trix(close, period), ref_trix(c, period))
    check(atr(b["high"], b["low"], close, period), ref_atr(h, l, c, period))
    check(bbands(close, period, 1.5), ref_bbands(c, period, 1.5))
    check(donchian(b["high"], b["low"], period), ref_donchian(h, l, period))
    check(macd(close, period, 2 * period, 4), ref_macd(c, period, 2 * period, 4))
    check(macd(close, 2 * period, period, 4), ref_macd(c, 2 * period, period, 4))
    check(stoch(b["high"], b["low"], close, period, 3, 3), ref_stoch(h, l, c, period, 3, 3))


def test_shorter_than_the_warm_up_is_all_nan():
    b = random_bars(5, seed=0)
    h, l, c = b["high"], b["low"], b["close"]
    for out in (ema(c, 10), sma(c, 10), wma(c, 10), rsi(c, 5), roc(c, 5), atr(h, l, c, 5),
                trix(c, 3), trix_signal(c, 2, 3), *macd(c, 2, 4, 3), *bbands(c, 6, 2.0),
                *stoch(h, l, c, 3, 2, 3), *donchian(h, l, 6)):
        assert out.shape == (5,) and np.isnan(out).all()


def test_a_period_below_1_is_all_nan():
    b = random_bars(50, seed=0)
    h, l, c = b["high"], b["low"], b["close"]
    for out in (ema(c, 0), sma(c, 0), wma(c, 0), rsi(c, 0), roc(c, 0), atr(h, l, c, 0),
                trix(c, 0), trix_signal(c, 3, 0), *macd(c, 0, 3, 3), *bbands(c, 0, 2.0),
                *stoch(h, l, c, 3, 0, 2), *donchian(h, l, 0)):
        assert np.isnan(out).all()


def test_inputs_are_not_written():
    b = random_bars(200, seed=4)
    before = {k: v.copy() for k, v in b.items()}
    for name, indicator in INDICATORS.items():
        compute_indicator(name, b, _example_args(indicator))
    for k in before:
        np.testing.assert_array_equal(b[k], before[k])


def _example_args(indicator):
    return {macd: (5, 12, 4), bbands: (10, 2.0), stoch: (7, 3, 3), trix_signal: (5, 3)}.get(
        indicator.fn, (6,)
    )


def test_compute_indicator_picks_the_output():
    b = random_bars(500, seed=9)
    macd_line, signal, hist = macd(b["close"], 12, 26, 9)
    np.testing.assert_array_equal(compute_indicator("macd_hist", b, (12, 26, 9)), hist)
    np.testing.assert_array_equal(compute_indicator("macd_signal", b, (12, 26, 9)), signal)
    upper, middle, lower = bbands(b["close"], 20, 2.5)
    np.testing.assert_array_equal(compute_indicator("bb_lower", b, (20, 2.5)), lower)
    np.testing.assert_array_equal(compute_indicator("bb_middle", b, (20, 2.5)), middle)
    k, d = stoch(b["high"], b["low"], b["close"], 14, 3, 3)
    np.testing.assert_array_equal(compute_indicator("stoch_d", b, (14, 3, 3)), d)
    upper, lower = donchian(b["high"], b["low"], 20)
    np.testing.assert_array_equal(compute_indicator("donchian_upper", b, (20,)), upper)
    np.testing.assert_array_equal(compute_indicator("atr", b, (14,)),
                                  atr(b["high"], b["low"], b["close"], 14))


def test_every_registered_indicator_computes_one_row():
    b = random_bars(200, seed=6)
    for name, indicator in INDICATORS.items():
        assert set(indicator.inputs) <= {"open", "high", "low", "close"}, name
        row = compute_indicator(name, b, _example_args(indicator))
        assert row.shape == (200,) and row.dtype == np.float64, name
        assert np.isfinite(row[-1]), name


def test_compute_indicator_refuses_bad_calls():
    b = random_bars(50, seed=0)
    with pytest.raises(SpecError, match="unknown indicator 'kama'"):
        compute_indicator("kama", b, (10,))
    with pytest.raises(SpecError, match=r"takes 3 arguments \('fast', 'slow', 'signal'\)"):
        compute_indicator("macd_line", b, (12, 26))
    with pytest.raises(SpecError, match=r"reads columns \['high', 'low'\]"):
        compute_indicator("atr", {"close": b["close"]}, (14,))
