"""open_bars: zero-copy views for one symbol, inner join for several, time slicing."""

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import barsweep.datasets.bars as bars_module
from barsweep.datasets import bars_arrays, open_bars, synth_bars, write_bars, write_synth
from barsweep.datasets.bars import PRICE_VARS
from barsweep.errors import DataError

HOUR_NS = 3_600 * 10**9
START_NS = pd.Timestamp("2020-01-01", tz="UTC").value


@pytest.fixture
def spy_tables(monkeypatch):
    """Record the memory-mapped tables open_bars reads."""
    tables = []
    original = bars_module.read_table

    def spy(*args):
        tables.append(original(*args))
        return tables[-1]

    monkeypatch.setattr(bars_module, "read_table", spy)
    return tables


def buffer_address(table, name):
    """Address of the data buffer of one column of a one-batch table."""
    return table.column(name).chunk(0).buffers()[1].address


def test_one_symbol_is_a_zero_copy_view_of_the_memory_map(tmp_path, spy_tables):
    write_synth(tmp_path, "BTC", "1h", 500, seed=1)
    allocated = pa.total_allocated_bytes()
    ds = open_bars(tmp_path, "BTC", "1h")
    # Arrow allocates a few bytes of bookkeeping, far less than one column.
    assert pa.total_allocated_bytes() - allocated < 500 * 8
    (table,) = spy_tables
    for name in PRICE_VARS:
        values = ds[name].values
        assert values.shape == (500, 1)
        assert values.__array_interface__["data"][0] == buffer_address(table, name)
        mapped = table.column(name).chunk(0).to_numpy(zero_copy_only=True)
        assert np.shares_memory(values, mapped)
        assert not values.flags.writeable
    # The time coordinate is datetime64[ns], and still a view of the stored int64 ns
    # (see bars._dataset).
    times = ds["time"].values
    assert times.dtype == np.dtype("datetime64[ns]")
    assert times.__array_interface__["data"][0] == buffer_address(table, "time")
    np.testing.assert_array_equal(times.view(np.int64), START_NS + HOUR_NS * np.arange(500))


def test_one_symbol_slice_is_still_a_view(tmp_path, spy_tables):
    write_synth(tmp_path, "BTC", "1h", 500, seed=1)
    ds = open_bars(tmp_path, "BTC", "1h", start="2020-01-02", end="2020-01-03")
    (table,) = spy_tables
    offset = 24 * 8  # 24 float64 / int64 rows into the buffer
    assert ds.sizes["time"] == 24
    for name in [*PRICE_VARS, "time"]:
        address = ds[name].values.__array_interface__["data"][0]
        assert address == buffer_address(table, name) + offset


def test_dataset_layout(tmp_path):
    write_synth(tmp_path, "BTC", "4h", 30, seed=1)
    ds = open_bars(tmp_path, ["BTC"], "4h")
    assert dict(ds.sizes) == {"time": 30, "symbol": 1}
    assert list(ds.data_vars) == list(PRICE_VARS)
    assert all(ds[name].dims == ("time", "symbol") for name in ds.data_vars)
    assert ds["symbol"].values.tolist() == ["BTC"]
    assert ds["time"].dtype == np.dtype("datetime64[ns]") and ds["time"].attrs == {}
    assert ds.sel(time="2020-01-02").sizes["time"] == 6  # dates select as in any xarray
    assert ds.attrs == {"timeframe": "4h"}
    table = synth_bars(30, seed=1, timeframe="4h")
    np.testing.assert_array_equal(ds["close"].values[:, 0], table.column("close").to_numpy())


def test_bars_arrays_one_symbol_contiguous_views(tmp_path):
    write_synth(tmp_path, "BTC", "1h", 50, seed=1)
    ds = open_bars(tmp_path, "BTC", "1h")
    arrays = bars_arrays(ds, "BTC")
    assert list(arrays) == list(PRICE_VARS)
    for name, values in arrays.items():
        assert values.shape == (50,)
        assert values.flags.c_contiguous
        assert np.shares_memory(values, ds[name].values)


def test_bars_arrays_unknown_symbol(tmp_path):
    write_synth(tmp_path, "BTC", "1h", 5, seed=1)
    with pytest.raises(DataError, match="'ETH'.*available: \\['BTC'\\]"):
        bars_arrays(open_bars(tmp_path, "BTC", "1h"), "ETH")


def shifted_synth(store, symbol, n, first_hour, seed):
    start = (pd.Timestamp("2020-01-01") + pd.Timedelta(hours=first_hour)).isoformat()
    return write_synth(store, symbol, "1h", n, seed=seed, start=start)


def test_several_symbols_inner_join(tmp_path):
    shifted_synth(tmp_path, "BTC", 10, 0, seed=1)  # hours 0..9
    shifted_synth(tmp_path, "ETH", 10, 5, seed=2)  # hours 5..14
    ds = open_bars(tmp_path, ["ETH", "BTC"], "1h")
    assert ds["symbol"].values.tolist() == ["ETH", "BTC"]
    np.testing.assert_array_equal(ds["time"].values.view(np.int64),
                                  START_NS + HOUR_NS * np.arange(5, 10))
    btc = synth_bars(10, seed=1).column("close").to_numpy()
    eth = synth_bars(10, seed=2).column("close").to_numpy()
    np.testing.assert_array_equal(ds["close"].values[:, 1], btc[5:])
    np.testing.assert_array_equal(ds["close"].values[:, 0], eth[:5])
    arrays = bars_arrays(ds, "BTC")
    np.testing.assert_array_equal(arrays["close"], btc[5:])
    assert np.shares_memory(arrays["close"], ds["close"].values)


def test_several_symbols_join_drops_gaps(tmp_path):
    table = synth_bars(10, seed=1)
    write_bars(tmp_path, "BTC", "1h", table.take([0, 1, 2, 4, 6, 7, 8, 9]))
    write_bars(tmp_path, "ETH", "1h", table.take([1, 2, 3, 4, 5, 7, 9]))
    ds = open_bars(tmp_path, ["BTC", "ETH"], "1h", end="2020-01-01T09:00")
    np.testing.assert_array_equal(ds["time"].values.view(np.int64),
                                  START_NS + HOUR_NS * np.array([1, 2, 4, 7]))


def test_several_symbols_disjoint(tmp_path):
    shifted_synth(tmp_path, "BTC", 5, 0, seed=1)
    shifted_synth(tmp_path, "ETH", 5, 100, seed=2)
    with pytest.raises(DataError, match="share no bar time.*BTC: 2020-01-01"):
        open_bars(tmp_path, ["BTC", "ETH"], "1h")


def test_funding_rate_only_when_every_file_has_it(tmp_path):
    table = synth_bars(6, seed=1)
    funded = table.append_column("funding_rate", pa.array(np.full(6, 1e-4)))
    write_bars(tmp_path, "BTC", "1h", funded)
    write_bars(tmp_path, "ETH", "1h", table)
    assert "funding_rate" in open_bars(tmp_path, "BTC", "1h").data_vars
    assert "funding_rate" in bars_arrays(open_bars(tmp_path, "BTC", "1h"), "BTC")
    assert "funding_rate" not in open_bars(tmp_path, ["BTC", "ETH"], "1h").data_vars


@pytest.mark.parametrize(
    ("start", "end", "hours"),
    [
        ("2020-01-01T03:00", "2020-01-01T06:00", [3, 4, 5]),  # start inclusive, end exclusive
        ("2020-01-01T03:30", None, [4, 5, 6, 7, 8, 9]),
        (None, "2020-01-01T02:00:00.000000001", [0, 1, 2]),
        (pd.Timestamp("2020-01-01T08:00"), None, [8, 9]),
        (dt.datetime(2020, 1, 1, 8), None, [8, 9]),
        (np.datetime64("2020-01-01T08:00"), None, [8, 9]),
        ("2020-01-01T09:00+01:00", "2020-01-01T10:00+01:00", [8]),  # tz-aware -> UTC
        (pd.Timestamp("2020-01-01T03:00", tz="America/New_York"), None, [8, 9]),
        ("2019-01-01", "2030-01-01", list(range(10))),
    ],
)
def test_start_end_slicing(tmp_path, start, end, hours):
    write_synth(tmp_path, "BTC", "1h", 10, seed=1)
    ds = open_bars(tmp_path, "BTC", "1h", start=start, end=end)
    np.testing.assert_array_equal(ds["time"].values.view(np.int64),
                                  START_NS + HOUR_NS * np.array(hours))


@pytest.mark.parametrize(
    ("start", "end"),
    [("2020-01-01T03:10", "2020-01-01T03:50"), ("2021-01-01", None), (None, "2019-01-01")],
)
def test_empty_range_names_start_and_end(tmp_path, start, end):
    write_synth(tmp_path, "BTC", "1h", 10, seed=1)
    with pytest.raises(DataError) as info:
        open_bars(tmp_path, "BTC", "1h", start=start, end=end)
    message = str(info.value)
    assert f"start={start!r}" in message and f"end={end!r}" in message
    assert "2020-01-01 00:00 to 2020-01-01 09:00" in message  # hourly bars, to the minute


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"start": "2020-01-02", "end": "2020-01-01"}, "must be before end"),
        ({"start": "yesterday-ish"}, "start 'yesterday-ish' is not a time"),
        ({"end": 1_600_000_000}, "end 1600000000 is a number"),
        ({"symbols": []}, "no symbols"),
        ({"symbols": ["BTC", "BTC"]}, "distinct"),
        ({"symbols": "ETH"}, "no bars for symbol 'ETH'"),
        ({"timeframe": "1x"}, "timeframe '1x'"),
    ],
)
def test_open_bars_refuses(tmp_path, kwargs, match):
    write_synth(tmp_path, "BTC", "1h", 10, seed=1)
    args = {"store": tmp_path, "symbols": "BTC", "timeframe": "1h", **kwargs}
    with pytest.raises(DataError, match=match):
        open_bars(**args)
