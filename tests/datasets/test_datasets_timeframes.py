"""Timeframe strings: lengths and bars per year."""

import pytest

from barsweep.datasets import periods_per_year, timeframe_seconds
from barsweep.errors import DataError


@pytest.mark.parametrize(
    ("tf", "seconds"),
    [
        ("1s", 1),
        ("1m", 60),
        ("5m", 300),
        ("15m", 900),
        ("1h", 3600),
        ("4h", 14400),
        ("1d", 86400),
        ("1w", 604800),
    ],
)
def test_timeframe_seconds(tf, seconds):
    assert timeframe_seconds(tf) == seconds


@pytest.mark.parametrize("tf", ["", "1", "h", "1H", "1 h", "1mo", "0m", "-1h", "1.5h", None, 60])
def test_timeframe_seconds_refuses_and_names_the_value(tf):
    with pytest.raises(DataError, match="timeframe"):
        timeframe_seconds(tf)


def test_periods_per_year():
    assert periods_per_year("1d", 252) == 252.0
    assert periods_per_year("1h") == 8760.0
    assert periods_per_year("1h", 365.0) == 8760.0
    assert periods_per_year("4h") == 2190.0


@pytest.mark.parametrize("year_days", [0, -1, float("nan"), "365", True])
def test_periods_per_year_refuses_bad_year_days(year_days):
    with pytest.raises(DataError, match="year_days"):
        periods_per_year("1d", year_days)
