"""Bars per year measured from the bars' times (engine.core.year)."""

import numpy as np
import pytest

from barsweep.engine import backtest
from barsweep.engine.core.year import bars_per_year

pytest.importorskip("bokeh_sampledata")
from golden.cases import load_bars  # noqa: E402

HOUR, DAY = 3_600 * 10**9, 86_400 * 10**9


def weekdays(start: str, end: str) -> np.ndarray:
    days = np.arange(start, end, dtype="datetime64[D]")
    return days[np.is_busday(days)].astype("datetime64[ns]").view(np.int64)


@pytest.mark.parametrize("symbol", ["AAPL", "MSFT", "IBM", "GOOG"])
def test_daily_stocks_have_252_bars_a_year(symbol):
    ppy, how = bars_per_year(load_bars(symbol)["time"], DAY)
    assert ppy == 252.0
    assert how == "the median of 12 whole calendar years, 2001-2012" or symbol == "GOOG"


def test_bars_on_every_day_keep_the_calendar():
    hours = np.arange(3 * 8760, dtype=np.int64) * HOUR + 1_600_000_000 * 10**9
    assert bars_per_year(hours, HOUR) == (8760.0, "bars on every day: 365 days of bars")
    # a 24/7 market with a few missing bars is still every day
    gappy = np.delete(hours, np.arange(0, len(hours), 40))
    assert bars_per_year(gappy, HOUR)[0] == 8760.0
    days = np.arange(1000, dtype=np.int64) * DAY
    assert bars_per_year(days, DAY)[0] == 365.0


def test_trading_hours_count_their_bars():
    # 7 hourly bars on each weekday, 2018-2021: 7 x 261 (or 262) bars a year
    days = weekdays("2018-01-01", "2022-01-01")
    hours = (days[:, None] + np.arange(14, 21) * HOUR).ravel()
    ppy, _ = bars_per_year(hours, HOUR)
    counts = [7 * np.is_busday(np.arange(f"{y}-01-01", f"{y + 1}-01-01",
                                         dtype="datetime64[D]")).sum() for y in (2019, 2020)]
    assert ppy == float(np.median(counts))


def test_less_than_a_whole_year_scales_the_span():
    days = weekdays("2020-03-02", "2020-12-31")
    ppy, how = bars_per_year(days, DAY)
    assert 255 <= ppy <= 265 and "scaled to 365.25 days" in how
    assert bars_per_year(days[:2], DAY) == (365.0, "too few bars to measure: 365 days of bars")


def test_backtest_annualises_daily_stocks_from_the_bars():
    bars = load_bars("AAPL")
    params = dict(fast=10, slow=50)
    measured = backtest(bars, "ema_cross", params)
    stocks = backtest(bars, "ema_cross", params, ppy=252)
    calendar = backtest(bars, "ema_cross", params, year_days=365)
    for name in ("cagr", "sharpe", "volatility"):
        assert measured.metrics[name] == stocks.metrics[name]
    assert calendar.metrics["sharpe"] == pytest.approx(
        stocks.metrics["sharpe"] * np.sqrt(365 / 252), rel=1e-12)
