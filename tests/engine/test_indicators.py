import numpy as np
import pytest
import talib
from bars import random_bars
from reference import ref_ema, ref_sma

from barsweep.engine import ema, sma

PERIODS = [2, 3, 5, 12, 26, 50, 200]


@pytest.mark.parametrize("period", PERIODS)
@pytest.mark.parametrize("name", ["ema", "sma"])
def test_matches_talib_on_random_walks(name, period):
    close = random_bars(1000, seed=period)["close"]
    ours = {"ema": ema, "sma": sma}[name](close, period)
    theirs = getattr(talib, name.upper())(close, timeperiod=period)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=0)


@pytest.mark.parametrize("period", [2, 7, 30])
def test_matches_reference(period):
    close = random_bars(300, seed=1)["close"]
    np.testing.assert_allclose(ema(close, period), ref_ema(list(close), period), rtol=1e-12)
    np.testing.assert_allclose(sma(close, period), ref_sma(list(close), period), rtol=1e-12)


def test_shorter_than_period_is_all_nan():
    close = random_bars(5, seed=0)["close"]
    assert np.isnan(ema(close, 10)).all()
    assert np.isnan(sma(close, 10)).all()
