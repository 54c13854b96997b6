"""Indicator kernels against TA-Lib (the oracle) and against tests/helpers/reference.py."""

from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import talib
from helpers.bars import random_bars
from helpers.reference import (
    ref_atr,
    ref_bbands,
    ref_donchian,
    ref_ema,
    ref_macd,
    ref_roc,
    ref_rsi,
    ref_sma,
    ref_stdev,
    ref_stoch,
    ref_trix,
    ref_wma,
)

from barsweep.engine import ema, sma
from barsweep.engine.indicators.registry import (
    INDICATORS,
    atr,
    bbands,
    compute_indicator,
    donchian,
    highest,
    lowest,
    macd,
    roc,
    rsi,
    stdev,
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
    "stdev": (lambda b, p: stdev(b["close"], p), lambda b, p: talib.STDDEV(b["close"], p, 1)),
    "highest": (lambda b, p: highest(b["close"], p), lambda b, p: talib.MAX(b["close"], p)),
    "lowest": (lambda b, p: lowest(b["close"], p), lambda b, p: talib.MIN(b["close"], p)),
}
# TA-Lib refuses a period of 1 for these; the others take it.
NO_PERIOD_1 = {"rsi", "bbands", "donchian", "stdev", "highest", "lowest"}

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


# TA-Lib's function for each registered kernel of one series and one period.
ONE_SERIES_TALIB = {
    "sma": talib.SMA, "ema": talib.EMA, "wma": talib.WMA, "rsi": talib.RSI, "roc": talib.ROC,
    "trix": talib.TRIX, "stdev": lambda x, n: talib.STDDEV(x, n, 1), "highest": talib.MAX,
    "lowest": talib.MIN,
}
# Series with and without a NaN warm-up, each a function of the bars dict.
SERIES = {
    "rsi14": lambda b: talib.RSI(b["close"], 14),
    "ema10": lambda b: talib.EMA(b["close"], 10),
    "trix4": lambda b: talib.TRIX(b["close"], 4),
    "roc3": lambda b: talib.ROC(b["close"], 3),
    "close-open": lambda b: b["close"] - b["open"],
}


def test_every_one_series_indicator_has_its_talib_function():
    one_series = {name for name, ind in INDICATORS.items()
                  if ind.inputs == ("close",) and ind.output is None and len(ind.arg_names) == 1}
    assert one_series == set(ONE_SERIES_TALIB)


@pytest.mark.parametrize("inner", list(SERIES))
@pytest.mark.parametrize("name", list(ONE_SERIES_TALIB))
def test_nested_like_talib(name, inner):
    """An indicator of another's output (or of close - open) equals TA-Lib's nesting:
    ``kernel(talib.X(close, n), m) == talib.Y(talib.X(close, n), m)``."""
    series = SERIES[inner](random_bars(600, seed=8))
    for m in (2, 9):
        assert_matches(INDICATORS[name].fn(series, m), ONE_SERIES_TALIB[name](series, m))


def test_multi_input_kernels_start_where_every_input_is_defined_like_talib():
    """high, low and close with NaN warm-ups of different lengths (each the longest once):
    ATR and STOCH start where all three are defined, as TA-Lib's wrapper."""
    b = random_bars(600, seed=3)
    heads = [(talib.SMA(b["high"], 3), talib.EMA(b["low"], 6), talib.WMA(b["close"], 2)),
             (talib.WMA(b["high"], 2), talib.SMA(b["low"], 3), talib.EMA(b["close"], 9)),
             (talib.EMA(b["high"], 7), talib.WMA(b["low"], 2), talib.SMA(b["close"], 4))]
    for h, l, c in heads:
        for period in (1, 2, 5, 14):
            assert_matches(atr(h, l, c, period), talib.ATR(h, l, c, period))
        for k_period, k_smooth, d_period in ((5, 3, 3), (9, 4, 2), (5, 2, 7)):
            assert_matches(stoch(h, l, c, k_period, k_smooth, d_period),
                           talib.STOCH(h, l, c, fastk_period=k_period, slowk_period=k_smooth,
                                       slowk_matype=0, slowd_period=d_period, slowd_matype=0))


@pytest.mark.parametrize("args", [(9, 4, 2), (5, 2, 7)])
def test_stoch_takes_talibs_argument_order(args):
    """``stoch(high, low, close, a, b, c)`` is TA-Lib's ``fastk_period=a, slowk_period=b,
    slowd_period=c``, through the kernel and the registry alike; any other order differs
    (in %K at least: %D, an SMA of an SMA, does not see the two smoothings swapped)."""
    b = random_bars(400, seed=12)
    h, l, c = b["high"], b["low"], b["close"]
    a, k_smooth, d_period = args
    theirs = talib.STOCH(h, l, c, fastk_period=a, slowk_period=k_smooth, slowk_matype=0,
                         slowd_period=d_period, slowd_matype=0)
    assert_matches(stoch(h, l, c, *args), theirs)
    assert_matches((compute_indicator("stoch_k", b, args), compute_indicator("stoch_d", b, args)),
                   theirs)
    for other in {(a, d_period, k_smooth), (k_smooth, a, d_period), (d_period, k_smooth, a)}:
        k, _ = stoch(h, l, c, *other)
        assert not np.allclose(k, theirs[0], equal_nan=True)


@pytest.mark.parametrize("period", [2, 3, 5, 20, 33, 200])
def test_stdev_is_talibs_bit_for_bit(period):
    """The same arithmetic as TA-Lib's VAR (shifted sums, re-centred), on a random walk, a
    finely quoted series with a flat stretch, one with spikes and an RSI (NaN warm-up)."""
    rng = np.random.default_rng(0)
    fine = 100.0 + rng.normal(0.0, 1e-5, 1000)
    fine[200:300] = 100.0
    close = random_bars(3000, seed=9)["close"]
    spiky = close.copy()
    spiky[[100, 700, 1500]] *= 1e4
    for x in (close, fine, spiky, talib.RSI(close, 14)):
        np.testing.assert_array_equal(stdev(x, period), talib.STDDEV(x, period, 1))


@pytest.mark.parametrize("name", ["stdev", "highest", "lowest"])
def test_window_of_all_bars_and_longer(name):
    ours, theirs = SINGLE_PERIOD[name]
    b = random_bars(120, seed=4)
    for period in (119, 120):
        assert_matches(ours(b, period), theirs(b, period))
    for period in (121, 500):
        assert np.isnan(ours(b, period)).all() and np.isnan(theirs(b, period)).all()


def test_period_1_gives_the_plain_value():
    """TA-Lib refuses a period of 1 for STDDEV, MAX and MIN: 0 and the series itself,
    from the series' first defined value on."""
    close = random_bars(200, seed=5)["close"]
    for x in (close, talib.RSI(close, 14)):
        defined = ~np.isnan(x)
        np.testing.assert_array_equal(stdev(x, 1), np.where(defined, 0.0, np.nan))
        np.testing.assert_array_equal(highest(x, 1), x)
        np.testing.assert_array_equal(lowest(x, 1), x)


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
    check(stdev(close, period), ref_stdev(c, period))
    check((highest(close, period), lowest(close, period)), ref_donchian(c, c, period))
    check(macd(close, period, 2 * period, 4), ref_macd(c, period, 2 * period, 4))
    check(macd(close, 2 * period, period, 4), ref_macd(c, 2 * period, period, 4))
    check(stoch(b["high"], b["low"], close, period, 3, 3), ref_stoch(h, l, c, period, 3, 3))


def test_shorter_than_the_warm_up_is_all_nan():
    b = random_bars(5, seed=0)
    h, l, c = b["high"], b["low"], b["close"]
    for out in (ema(c, 10), sma(c, 10), wma(c, 10), rsi(c, 5), roc(c, 5), atr(h, l, c, 5),
                trix(c, 3), trix_signal(c, 2, 3), *macd(c, 2, 4, 3), *bbands(c, 6, 2.0),
                *stoch(h, l, c, 3, 2, 3), *donchian(h, l, 6), stdev(c, 6), highest(c, 6),
                lowest(c, 6)):
        assert out.shape == (5,) and np.isnan(out).all()


def test_a_period_below_1_is_all_nan():
    b = random_bars(50, seed=0)
    h, l, c = b["high"], b["low"], b["close"]
    for out in (ema(c, 0), sma(c, 0), wma(c, 0), rsi(c, 0), roc(c, 0), atr(h, l, c, 0),
                trix(c, 0), trix_signal(c, 3, 0), *macd(c, 0, 3, 3), *bbands(c, 0, 2.0),
                *stoch(h, l, c, 3, 0, 2), *donchian(h, l, 0), stdev(c, 0), highest(c, -1),
                lowest(c, 0)):
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
