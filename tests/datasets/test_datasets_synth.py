"""Synthetic bars: deterministic per seed, always valid OHLC."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barsweep.datasets import BAR_SCHEMA, open_bars, synth_bars, write_synth
from barsweep.datasets.synth import REGIME_VOLS
from barsweep.errors import DataError


def test_same_seed_same_bytes_different_seed_different_bytes(tmp_path):
    a = write_synth(tmp_path / "a", "BTC", "1h", 2_000, seed=7).read_bytes()
    b = write_synth(tmp_path / "b", "BTC", "1h", 2_000, seed=7).read_bytes()
    c = write_synth(tmp_path / "c", "BTC", "1h", 2_000, seed=8).read_bytes()
    assert a == b
    assert a != c


def test_schema_times_and_first_open():
    table = synth_bars(48, seed=1, timeframe="15m", start="2021-06-01T12:00", price0=50.0)
    assert table.schema.equals(BAR_SCHEMA)
    ts_ns = table.column("time").to_numpy().astype("datetime64[ns]").astype(np.int64)
    assert np.all(np.diff(ts_ns) == 15 * 60 * 10**9)
    assert str(table.column("time")[0]) == "2021-06-01 12:00:00+00:00"
    assert table.column("open")[0].as_py() == 50.0


def ohlc(table):
    return [table.column(name).to_numpy() for name in ("open", "high", "low", "close", "volume")]


@settings(max_examples=40, deadline=None)
@given(
    n_bars=st.integers(1, 300),
    seed=st.integers(0, 2**32),
    timeframe=st.sampled_from(["1s", "1m", "1h", "1d", "1w"]),
)
def test_ohlc_always_valid_and_positive(n_bars, seed, timeframe):
    o, h, lo, c, v = ohlc(synth_bars(n_bars, seed, timeframe=timeframe))
    assert len(o) == n_bars
    assert np.all(np.isfinite([o, h, lo, c, v]))
    assert np.all(lo > 0) and np.all(v > 0)
    assert np.all(h > np.maximum(o, c))
    assert np.all(lo < np.minimum(o, c))


def test_open_follows_previous_close_with_a_small_gap():
    o, _, _, c, _ = ohlc(synth_bars(5_000, seed=3))
    gaps = np.log(o[1:] / c[:-1])
    assert np.all(gaps != 0)
    assert np.abs(gaps).max() < 0.01


def test_volatility_is_in_the_regime_range():
    _, _, _, c, _ = ohlc(synth_bars(20_000, seed=5, timeframe="1h"))
    annual_vol = np.diff(np.log(c)).std() * np.sqrt(8760)
    assert min(REGIME_VOLS) < annual_vol < max(REGIME_VOLS)


def test_written_bars_open_as_the_table(tmp_path):
    write_synth(tmp_path, "BTC", "1d", 30, seed=2)
    ds = open_bars(tmp_path, "BTC", "1d")
    np.testing.assert_array_equal(ds["high"].values[:, 0], ohlc(synth_bars(30, 2, "1d"))[1])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_bars": 0}, "n_bars"),
        ({"n_bars": 2.5}, "n_bars"),
        ({"seed": -1}, "seed"),
        ({"seed": "7"}, "seed"),
        ({"price0": 0.0}, "price0"),
        ({"price0": float("inf")}, "price0"),
        ({"timeframe": "1y"}, "timeframe"),
        ({"start": "not a date"}, "start"),
    ],
)
def test_refuses_bad_arguments(kwargs, match):
    with pytest.raises(DataError, match=match):
        synth_bars(**{"n_bars": 10, "seed": 1, **kwargs})
