"""The Arrow IPC bar store: paths, writing, reading, listing, fingerprints."""

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from barsweep.datasets import (
    BAR_SCHEMA,
    bar_path,
    fingerprint,
    list_bars,
    read_table,
    synth_bars,
    write_bars,
    write_synth,
)
from barsweep.errors import DataError


def small_table(n=5, **overrides):
    """Valid bars, hourly from 2021-01-01, with columns replaced by `overrides`."""
    columns = {
        "time": pa.array(pd.date_range("2021-01-01", periods=n, freq="h", tz="UTC")),
        "open": np.full(n, 10.0),
        "high": np.full(n, 12.0),
        "low": np.full(n, 9.0),
        "close": np.full(n, 11.0),
        "volume": np.arange(n, dtype=float),
    }
    columns.update(overrides)
    return pa.table(columns)


def test_bar_path_layout(tmp_path):
    assert bar_path(tmp_path, "BTC-USD_1.x", "4h") == tmp_path / "4h" / "BTC-USD_1.x.arrow"


@pytest.mark.parametrize("symbol", ["", "BTC/USD", "../x", "a b", 7])
def test_bar_path_refuses_bad_symbols(tmp_path, symbol):
    with pytest.raises(DataError, match="symbol"):
        bar_path(tmp_path, symbol, "1h")


def test_bar_path_refuses_bad_timeframe(tmp_path):
    with pytest.raises(DataError, match="'1hour'"):
        bar_path(tmp_path, "BTC", "1hour")


def test_write_then_read_round_trip_one_batch(tmp_path):
    table = synth_bars(100, seed=1)
    path = write_bars(tmp_path, "BTC", "1h", table)
    assert path == bar_path(tmp_path, "BTC", "1h")
    back = read_table(tmp_path, "BTC", "1h")
    assert back.schema.equals(BAR_SCHEMA)
    assert back.equals(table)
    assert all(back.column(name).num_chunks == 1 for name in back.column_names)
    assert [p.name for p in path.parent.iterdir()] == ["BTC.arrow"]  # no temp file left


def test_write_casts_allowed_types_and_keeps_funding(tmp_path):
    n = 4
    naive_ms = pa.array(pd.date_range("2021-01-01", periods=n, freq="h").as_unit("ms"))
    table = small_table(
        n,
        time=naive_ms,
        open=pa.array([10, 10, 10, 10], pa.int32()),
        volume=pa.array(np.ones(n, np.float32)),
        funding_rate=np.full(n, 1e-4),
    )
    write_bars(tmp_path, "BTC", "1h", table)
    back = read_table(tmp_path, "BTC", "1h")
    assert back.column_names == [*BAR_SCHEMA.names, "funding_rate"]
    assert back.schema.field("time").type == pa.timestamp("ns", tz="UTC")
    assert back.column("time")[0].value == pd.Timestamp("2021-01-01", tz="UTC").value
    assert back.column("open").type == pa.float64()


@pytest.mark.parametrize(
    ("table", "match"),
    [
        (small_table().drop_columns(["close"]), "missing: \\['close'\\]"),
        (small_table(extra=np.zeros(5)), "unexpected: \\['extra'\\]"),
        (small_table(close=pa.array([1.0, None, 1.0, 1.0, 1.0])), "null.*row 2"),
        (small_table(close=pa.array(["a"] * 5)), "'close' must hold numbers"),
        (small_table(time=np.arange(5)), "'time' must hold a timestamp"),
        (small_table(0), "no rows"),
    ],
)
def test_write_refuses_bad_tables(tmp_path, table, match):
    with pytest.raises(DataError, match=match):
        write_bars(tmp_path, "BTC", "1h", table)
    assert not bar_path(tmp_path, "BTC", "1h").exists()


def test_write_refuses_times_that_do_not_increase(tmp_path):
    times = pd.DatetimeIndex(["2021-01-01 00:00", "2021-01-01 01:00", "2021-01-01 01:00"], tz="UTC")
    with pytest.raises(DataError, match="row 3"):
        write_bars(tmp_path, "BTC", "1h", small_table(3, time=pa.array(times)))


def test_failed_write_leaves_the_old_file(tmp_path):
    path = write_synth(tmp_path, "BTC", "1h", 50, seed=1)
    before = path.read_bytes()
    with pytest.raises(DataError):
        write_bars(tmp_path, "BTC", "1h", small_table(close=pa.array([1.0, None, 1, 1, 1])))
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["BTC.arrow"]


def test_read_missing_names_store_symbol_timeframe_and_lists_available(tmp_path):
    write_synth(tmp_path, "ETH", "1h", 10, seed=1)
    write_synth(tmp_path, "BTC", "1d", 10, seed=1)
    with pytest.raises(DataError) as info:
        read_table(tmp_path, "BTC", "1h")
    message = str(info.value)
    assert str(tmp_path) in message and "'BTC'" in message and "'1h'" in message
    assert "available: BTC 1d, ETH 1h" in message


def test_read_missing_store(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        read_table(tmp_path / "nowhere", "BTC", "1h")


def test_read_refuses_a_file_that_is_not_arrow(tmp_path):
    path = bar_path(tmp_path, "BTC", "1h")
    path.parent.mkdir(parents=True)
    path.write_text("time,open\n")
    with pytest.raises(DataError, match="not a readable Arrow IPC"):
        read_table(tmp_path, "BTC", "1h")


def test_list_bars(tmp_path):
    write_synth(tmp_path, "ETH", "1h", 24, seed=1)
    write_synth(tmp_path, "BTC", "1d", 10, seed=2, start="2022-03-01")
    write_synth(tmp_path, "BTC", "1h", 5, seed=3)
    (tmp_path / "notes").mkdir()
    (tmp_path / "1h" / "readme.txt").write_text("not bars")
    infos = list_bars(tmp_path)
    assert [(i.symbol, i.timeframe, i.n_bars) for i in infos] == [
        ("BTC", "1h", 5),
        ("BTC", "1d", 10),
        ("ETH", "1h", 24),
    ]
    btc_daily = infos[1]
    assert btc_daily.start == pd.Timestamp("2022-03-01", tz="UTC")
    assert btc_daily.end == pd.Timestamp("2022-03-10", tz="UTC")
    assert btc_daily.bytes == btc_daily.path.stat().st_size > 0
    assert btc_daily.columns == tuple(BAR_SCHEMA.names)


def test_list_bars_missing_store(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        list_bars(tmp_path / "nowhere")


def test_fingerprint_changes_when_a_file_changes(tmp_path):
    write_synth(tmp_path, "BTC", "1h", 100, seed=1)
    write_synth(tmp_path, "ETH", "1h", 100, seed=2)
    first = fingerprint(tmp_path, ["BTC", "ETH"], "1h")
    assert [f["symbol"] for f in first["files"]] == ["BTC", "ETH"]
    assert first["files"][0]["bytes"] == bar_path(tmp_path, "BTC", "1h").stat().st_size
    assert fingerprint(tmp_path, ["BTC", "ETH"], "1h") == first
    assert fingerprint(tmp_path, "BTC", "1h")["files"] == first["files"][:1]

    write_synth(tmp_path, "ETH", "1h", 100, seed=3)
    second = fingerprint(tmp_path, ["BTC", "ETH"], "1h")
    assert second["files"][0] == first["files"][0]
    assert second["files"][1]["blake2b"] != first["files"][1]["blake2b"]
    assert second["blake2b"] != first["blake2b"]


def test_fingerprint_missing_file(tmp_path):
    write_synth(tmp_path, "BTC", "1h", 10, seed=1)
    with pytest.raises(DataError, match="'ETH'.*available: BTC 1h"):
        fingerprint(tmp_path, ["BTC", "ETH"], "1h")
