"""`barsweep data import` on files as they come: time columns and formats, adjusted and
close-only prices, re-imports (--replace) and a timeframe the bars do not have (--force).

Every test writes a real CSV or Parquet file, imports it through the CLI and reads the
store back with `open_bars`; every refusal is one line naming the file and leaves the
store's files and index as they were.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from barsweep.datasets import bar_path, open_bars
from barsweep.datasets.index import clear_caches, read_index
from barsweep.pipeline.cli import main

SYMBOL = "X"
DAYS = pd.date_range("2021-01-04", periods=5, freq="D", tz="UTC")
HOURS = pd.date_range("2021-01-04", periods=5, freq="h", tz="UTC")


def bars_frame(times=DAYS) -> pd.DataFrame:
    n = len(times)
    close = 100.0 + np.arange(n)
    return pd.DataFrame({"open": close - 0.5, "high": close + 1.0, "low": close - 1.0,
                         "close": close, "volume": 1_000.0 + np.arange(n)}, index=times)


def write(frame: pd.DataFrame, path, time_name: str | None = "Date", text=None):
    """`frame` as CSV or Parquet, the time as column `time_name` (None: the index)."""
    frame = frame.copy()
    if time_name is not None:
        frame.insert(0, time_name, frame.index if text is None else text)
        frame = frame.reset_index(drop=True)
    if path.suffix == ".csv":
        frame.to_csv(path, index=time_name is None)
    else:
        frame.to_parquet(path, index=time_name is None)
    return path


def cli(capsys, src, store, timeframe="1d", *flags):
    clear_caches()
    capsys.readouterr()
    rc = main(["data", "import", str(src), "--symbol", SYMBOL, "--timeframe", timeframe,
               "--store", str(store), *flags])
    out, err = capsys.readouterr()
    return rc, out, err


def snapshot(store):
    return {p.relative_to(store).as_posix(): p.read_bytes()
            for p in sorted(store.rglob("*")) if p.is_file()} if store.exists() else {}


def refused(capsys, src, store, timeframe, *flags, says=()):
    before = snapshot(store)
    rc, out, err = cli(capsys, src, store, timeframe, *flags)
    lines = err.strip().splitlines()
    assert rc != 0 and len(lines) == 1 and lines[0].startswith("barsweep: error: "), err
    for words in says:
        assert words in lines[0], lines[0]
    assert snapshot(store) == before
    return lines[0]


def stored(store, timeframe="1d"):
    clear_caches()
    return open_bars(store, SYMBOL, timeframe)


# --- time columns as files come ---------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("time_name", ["Date", "Datetime", "timestamp", "TIME"])
def test_time_column_names_in_any_case(tmp_path, capsys, fmt, time_name):
    src = write(bars_frame(), tmp_path / f"bars.{fmt}", time_name)
    rc, out, err = cli(capsys, src, tmp_path / "store")
    assert rc == 0, err
    assert "imported 5 bars" in out
    np.testing.assert_array_equal(stored(tmp_path / "store")["time"].values.view(np.int64),
                                  DAYS.as_unit("ns").asi8)


def test_parquet_with_the_time_in_a_datetime_index(tmp_path, capsys):
    src = write(bars_frame(), tmp_path / "bars.parquet", time_name=None)
    rc, _, err = cli(capsys, src, tmp_path / "store")
    assert rc == 0, err
    ds = stored(tmp_path / "store")
    np.testing.assert_array_equal(ds["time"].values.view(np.int64), DAYS.as_unit("ns").asi8)
    np.testing.assert_array_equal(ds["close"].values[:, 0], bars_frame()["close"])


@pytest.mark.parametrize(("unit", "factor"), [("s", 10**9), ("ms", 10**6)])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_epoch_integer_timestamps(tmp_path, capsys, caplog, unit, factor, fmt):
    epoch = DAYS.as_unit("ns").asi8 // factor
    src = write(bars_frame(), tmp_path / f"bars.{fmt}", "timestamp", text=epoch)
    with caplog.at_level(logging.INFO):
        rc, _, err = cli(capsys, src, tmp_path / "store")
    assert rc == 0, err
    assert f"epoch integers in {unit}" in caplog.text
    np.testing.assert_array_equal(stored(tmp_path / "store")["time"].values.view(np.int64),
                                  DAYS.as_unit("ns").asi8)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_time_format_reads_unusual_dates(tmp_path, capsys, fmt):
    text = DAYS.strftime("%d/%m/%Y")
    src = write(bars_frame(), tmp_path / f"bars.{fmt}", "Date", text=list(text))
    refused(capsys, src, tmp_path / "store", "1d", says=(str(src), "row ", "unparseable"))
    rc, _, err = cli(capsys, src, tmp_path / "store", "1d", "--time-format", "%d/%m/%Y")
    assert rc == 0, err
    np.testing.assert_array_equal(stored(tmp_path / "store")["time"].values.view(np.int64),
                                  DAYS.as_unit("ns").asi8)


def test_time_format_with_an_offset_is_converted_to_utc(tmp_path, capsys):
    text = (HOURS + pd.Timedelta(hours=2)).tz_convert("Etc/GMT-2").strftime("%Y%m%d %H%M %z")
    src = write(bars_frame(HOURS), tmp_path / "bars.csv", "time", text=list(text))
    rc, _, err = cli(capsys, src, tmp_path / "store", "1h", "--time-format", "%Y%m%d %H%M %z")
    assert rc == 0, err
    np.testing.assert_array_equal(stored(tmp_path / "store", "1h")["time"].values.view(np.int64),
                                  (HOURS + pd.Timedelta(hours=2)).as_unit("ns").asi8)


def test_a_row_not_matching_the_time_format_is_named(tmp_path, capsys):
    text = list(DAYS.strftime("%d/%m/%Y"))
    text[3] = "2021-01-07"
    src = write(bars_frame(), tmp_path / "bars.csv", "Date", text=text)
    refused(capsys, src, tmp_path / "store", "1d", "--time-format", "%d/%m/%Y",
            says=(str(src), "row 4: unparseable timestamp", "'2021-01-07'",
                  "does not match --time-format '%d/%m/%Y'"))


def test_an_invalid_time_format_is_one_line(tmp_path, capsys):
    src = write(bars_frame(), tmp_path / "bars.csv")
    refused(capsys, src, tmp_path / "store", "1d", "--time-format", "%Q",
            says=(str(src), "--time-format '%Q' is not a valid strptime format"))


# --- --price-column --------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_price_column_is_the_close_and_scales_open_high_low(tmp_path, capsys, fmt):
    frame = bars_frame()
    frame["Adj Close"] = frame["close"] * np.array([0.5, 0.5, 0.5, 1.0, 1.0])  # a 2:1 split
    src = write(frame, tmp_path / f"bars.{fmt}")
    rc, out, err = cli(capsys, src, tmp_path / "store", "1d", "--price-column", "adj_close")
    assert rc == 0, err
    assert "note: --price-column: close is column 'Adj Close'" in out
    assert "scaled per bar by Adj Close / close" in out
    ds = stored(tmp_path / "store")
    factor = (frame["Adj Close"] / frame["close"]).to_numpy()
    np.testing.assert_allclose(ds["close"].values[:, 0], frame["Adj Close"], rtol=0)
    for name in ("open", "high", "low"):
        np.testing.assert_allclose(ds[name].values[:, 0], frame[name] * factor, rtol=1e-15)
    np.testing.assert_array_equal(ds["volume"].values[:, 0], frame["volume"])  # as in the file


def test_price_column_that_is_absent_or_not_a_price_is_refused(tmp_path, capsys):
    src = write(bars_frame(), tmp_path / "bars.csv")
    refused(capsys, src, tmp_path / "store", "1d", "--price-column", "adj_close",
            says=(str(src), "--price-column 'adj_close' is not a column", "columns found"))
    frame = bars_frame()
    frame["adj_close"] = [50.0, 50.0, -1.0, 51.0, 52.0]
    src = write(frame, tmp_path / "bad.csv")
    refused(capsys, src, tmp_path / "store", "1d", "--price-column", "adj_close",
            says=(str(src), "row 3: non-positive price", "column 'adj_close' has -1.0"))


# --- --ohlc-from-close -----------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_close_only_data(tmp_path, capsys, fmt):
    frame = bars_frame()[["close"]]
    src = write(frame, tmp_path / f"bars.{fmt}")
    refused(capsys, src, tmp_path / "store", "1d",
            says=(str(src), "missing required column(s): open, high, low"))
    rc, out, err = cli(capsys, src, tmp_path / "store", "1d", "--ohlc-from-close")
    assert rc == 0, err
    assert "stops and take-profits are checked on the close only" in out
    ds = stored(tmp_path / "store")
    for name in ("open", "high", "low", "close"):
        np.testing.assert_array_equal(ds[name].values[:, 0], frame["close"])
    assert np.isnan(ds["volume"].values).all()


def test_close_only_from_a_price_column(tmp_path, capsys):
    frame = bars_frame()
    frame["adj_close"] = frame["close"] / 2
    src = write(frame[["adj_close", "volume"]], tmp_path / "bars.csv")
    rc, out, err = cli(capsys, src, tmp_path / "store", "1d",
                       "--ohlc-from-close", "--price-column", "adj_close")
    assert rc == 0, err
    assert "all the column 'adj_close'" in out
    ds = stored(tmp_path / "store")
    for name in ("open", "high", "low", "close"):
        np.testing.assert_array_equal(ds[name].values[:, 0], frame["adj_close"])


# --- --replace -------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_reimport_is_refused_unless_replace(tmp_path, capsys, fmt):
    store = tmp_path / "store"
    first = write(bars_frame(), tmp_path / f"a.{fmt}")
    assert cli(capsys, first, store)[0] == 0
    second_frame = bars_frame() * 2
    second = write(second_frame, tmp_path / f"b.{fmt}")
    refused(capsys, second, store, "1d",
            says=(f"already holds bars for {SYMBOL} 1d", "--replace"))
    np.testing.assert_array_equal(stored(store)["close"].values[:, 0], bars_frame()["close"])

    rc, _, err = cli(capsys, second, store, "1d", "--replace")
    assert rc == 0, err
    np.testing.assert_array_equal(stored(store)["close"].values[:, 0], second_frame["close"])
    path = bar_path(store, SYMBOL, "1d")
    record = read_index(store, cached=False)[f"1d/{SYMBOL}.arrow"]
    assert record.bytes == path.stat().st_size  # index and file agree


def test_a_refused_replacement_keeps_the_old_file_and_entry(tmp_path, capsys):
    store = tmp_path / "store"
    assert cli(capsys, write(bars_frame(), tmp_path / "a.csv"), store)[0] == 0
    bad = bars_frame()
    bad.iloc[2, bad.columns.get_loc("high")] = 1.0
    refused(capsys, write(bad, tmp_path / "bad.csv"), store, "1d", "--replace",
            says=("bad.csv", "row 3: high < max(open, close)"))


def test_an_index_entry_without_its_file_still_needs_replace(tmp_path, capsys):
    store = tmp_path / "store"
    assert cli(capsys, write(bars_frame(), tmp_path / "a.csv"), store)[0] == 0
    bar_path(store, SYMBOL, "1d").unlink()
    refused(capsys, write(bars_frame(), tmp_path / "b.csv"), store, "1d",
            says=("already holds bars",))
    assert cli(capsys, tmp_path / "b.csv", store, "1d", "--replace")[0] == 0
    assert stored(store).sizes["time"] == 5


# --- --force ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_daily_bars_as_1h_are_refused_naming_the_spacing_unless_force(tmp_path, capsys, fmt):
    src = write(bars_frame(), tmp_path / f"bars.{fmt}")
    refused(capsys, src, tmp_path / "store", "1h",
            says=(str(src), "bars are 1d apart", "--timeframe 1h", "--force"))
    rc, out, err = cli(capsys, src, tmp_path / "store", "1h", "--force")
    assert rc == 0, err
    assert "note: the bars are 1d apart" in out
    assert stored(tmp_path / "store", "1h").sizes["time"] == 5


def test_weekday_bars_measure_as_daily(tmp_path, capsys):
    days = pd.bdate_range("2021-01-04", periods=20, tz="UTC")  # weekends missing
    src = write(bars_frame(days), tmp_path / "bars.csv")
    rc, out, err = cli(capsys, src, tmp_path / "store", "1d")
    assert rc == 0, err
    assert "note:" not in out


# --- a few more edges -------------------------------------------------------------------


def test_time_format_reads_integer_dates_in_parquet(tmp_path, capsys):
    ymd = DAYS.strftime("%Y%m%d").astype(int).to_numpy()
    src = write(bars_frame(), tmp_path / "bars.parquet", "date", text=ymd)
    rc, _, err = cli(capsys, src, tmp_path / "store", "1d", "--time-format", "%Y%m%d")
    assert rc == 0, err
    np.testing.assert_array_equal(stored(tmp_path / "store")["time"].values.view(np.int64),
                                  DAYS.as_unit("ns").asi8)


def test_time_format_on_typed_datetimes_is_noted_and_not_used(tmp_path, capsys, caplog):
    src = write(bars_frame(), tmp_path / "bars.parquet", time_name=None)
    with caplog.at_level(logging.INFO):
        rc, _, err = cli(capsys, src, tmp_path / "store", "1d", "--time-format", "%d/%m/%Y")
    assert rc == 0, err
    assert "not used: the times are typed datetimes" in caplog.text


def test_a_missing_price_column_value_follows_the_missing_value_policy(tmp_path, capsys):
    frame = bars_frame()
    frame["adj_close"] = frame["close"] / 2
    frame.loc[frame.index[1], "adj_close"] = np.nan
    src = write(frame, tmp_path / "bars.csv")
    refused(capsys, src, tmp_path / "store", "1d", "--price-column", "adj_close",
            says=(str(src), "row 2: missing value", "price", "--drop-nan"))
    rc, out, err = cli(capsys, src, tmp_path / "store", "1d", "--price-column", "adj_close",
                       "--drop-nan", "--force")  # a 2-day gap is left
    assert rc == 0, err
    assert "imported 4 bars" in out and "(1 rows with missing values dropped)" in out
    np.testing.assert_array_equal(stored(tmp_path / "store")["close"].values[:, 0],
                                  frame["adj_close"].dropna())


def test_one_bar_says_its_spacing_was_not_checked(tmp_path, capsys):
    src = write(bars_frame().iloc[:1], tmp_path / "bars.csv")
    rc, out, err = cli(capsys, src, tmp_path / "store", "1h")
    assert rc == 0, err
    assert "note: one bar: its spacing cannot be checked" in out
