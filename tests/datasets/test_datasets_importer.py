"""import_file: formats, column matching, time units and every validation rule."""

import gzip
import logging

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from barsweep.datasets import bar_path, import_file, open_bars, read_table, write_synth
from barsweep.errors import DataError

HEADER = "time,open,high,low,close,volume"
ROWS = [
    "2021-01-01T00:00:00Z,10,12,9,11,100",
    "2021-01-01T01:00:00Z,11,13,10,12,110",
    "2021-01-01T02:00:00Z,12,14,11,13,120",
    "2021-01-01T03:00:00Z,13,15,12,14,130",
]
T0_NS = pd.Timestamp("2021-01-01", tz="UTC").value
HOUR_NS = 3_600 * 10**9


def write_csv(tmp_path, rows=ROWS, header=HEADER, name="bars.csv"):
    path = tmp_path / name
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def replace_row(row_number, text, rows=ROWS):
    """ROWS with 1-based data row `row_number` replaced by `text`."""
    return [text if i + 1 == row_number else row for i, row in enumerate(rows)]


def stored_times(store):
    return read_table(store, "BTC", "1h").column("time").cast(pa.int64()).to_numpy()


def test_import_csv(tmp_path, caplog):
    store = tmp_path / "store"
    with caplog.at_level(logging.INFO):
        report = import_file(write_csv(tmp_path), store, "BTC", "1h")
    assert report.path == bar_path(store, "BTC", "1h")
    assert (report.n_rows, report.n_dropped, report.time_unit) == (4, 0, "iso")
    ds = open_bars(store, "BTC", "1h")
    np.testing.assert_array_equal(ds["time"].values.view(np.int64), T0_NS + HOUR_NS * np.arange(4))
    np.testing.assert_array_equal(ds["close"].values[:, 0], [11.0, 12.0, 13.0, 14.0])
    np.testing.assert_array_equal(ds["volume"].values[:, 0], [100.0, 110.0, 120.0, 130.0])


def test_import_csv_gz_upper_case_timestamp_header_and_extra_columns(tmp_path):
    path = tmp_path / "bars.csv.gz"
    rows = [",".join([*row.split(","), "x"]) for row in ROWS]
    text = "\n".join(["Timestamp,OPEN,High,LOW,Close,Volume,Trades", *rows]) + "\n"
    path.write_bytes(gzip.compress(text.encode()))
    report = import_file(path, tmp_path / "store", "BTC", "1h")
    assert report.n_rows == 4
    assert any("ignored column(s): ['Trades']" in m for m in report.messages)
    np.testing.assert_array_equal(stored_times(tmp_path / "store"), T0_NS + HOUR_NS * np.arange(4))


def test_import_without_volume_stores_nan(tmp_path):
    rows = [row.rsplit(",", 1)[0] for row in ROWS]
    path = write_csv(tmp_path, rows, header="date,open,high,low,close")
    report = import_file(path, tmp_path / "store", "BTC", "1h")
    assert any("no volume column" in m for m in report.messages)
    assert np.isnan(read_table(tmp_path / "store", "BTC", "1h").column("volume").to_numpy()).all()


def test_iso_times_with_offsets_and_naive_times_are_utc(tmp_path):
    times = ["2021-01-01 00:00", "2021-01-01T02:00:00+01:00", "2021-01-01T02:00", "2021-01-01"]
    rows = [f"{t},{row.split(',', 1)[1]}" for t, row in zip(times[:3], ROWS, strict=False)]
    import_file(write_csv(tmp_path, rows), tmp_path / "store", "BTC", "1h")
    np.testing.assert_array_equal(stored_times(tmp_path / "store"), T0_NS + HOUR_NS * np.arange(3))


@pytest.mark.parametrize(
    ("unit", "factor"), [("s", 1), ("ms", 10**3), ("us", 10**6), ("ns", 10**9)]
)
def test_epoch_unit_inferred_from_magnitude(tmp_path, caplog, unit, factor):
    epochs = [(T0_NS // 10**9 + 3600 * i) * factor for i in range(4)]
    rows = [f"{e},{row.split(',', 1)[1]}" for e, row in zip(epochs, ROWS, strict=True)]
    with caplog.at_level(logging.INFO, logger="barsweep.datasets.importer"):
        report = import_file(write_csv(tmp_path, rows), tmp_path / "store", "BTC", "1h")
    assert report.time_unit == unit
    assert any(f"epoch integers in {unit} " in m for m in report.messages)
    assert f"epoch integers in {unit} " in caplog.text
    np.testing.assert_array_equal(stored_times(tmp_path / "store"), T0_NS + HOUR_NS * np.arange(4))


def test_import_parquet_with_typed_times_and_funding(tmp_path):
    frame = pd.DataFrame(
        {
            "Datetime": pd.date_range("2021-01-01", periods=4, freq="h"),  # naive -> UTC
            "Open": [10, 11, 12, 13],  # integers are fine
            "High": [12.0, 13, 14, 15],
            "Low": [9.0, 10, 11, 12],
            "Close": [11.0, 12, 13, 14],
            "Volume": [1.0, 2, 3, 4],
            "funding_rate": [1e-4, None, None, -1e-4],
        }
    )
    path = tmp_path / "bars.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    report = import_file(path, tmp_path / "store", "BTC", "1h")
    assert (report.n_rows, report.time_unit) == (4, "datetime")
    assert any("funding_rate empty in 2 row(s)" in m for m in report.messages)
    table = read_table(tmp_path / "store", "BTC", "1h")
    assert table.column("funding_rate").to_pylist() == [1e-4, 0.0, 0.0, -1e-4]
    np.testing.assert_array_equal(stored_times(tmp_path / "store"), T0_NS + HOUR_NS * np.arange(4))


def test_import_parquet_epoch_ms(tmp_path):
    frame = pd.DataFrame({"timestamp": (T0_NS // 10**6) + 3_600_000 * np.arange(3)})
    for name, value in [("open", 10.0), ("high", 12.0), ("low", 9.0), ("close", 11.0)]:
        frame[name] = value
    path = tmp_path / "bars.parquet"
    frame.to_parquet(path)
    assert import_file(path, tmp_path / "store", "BTC", "1h").time_unit == "ms"
    np.testing.assert_array_equal(stored_times(tmp_path / "store"), T0_NS + HOUR_NS * np.arange(3))


def test_drop_nan(tmp_path):
    rows = replace_row(2, "2021-01-01T01:00:00Z,11,,10,12,110")
    rows = replace_row(4, "2021-01-01T03:00:00Z,13,15,12,14,NaN", rows)
    report = import_file(write_csv(tmp_path, rows), tmp_path / "store", "BTC", "1h",
                         drop_nan=True, force=True)  # two bars left, 2h apart
    assert (report.n_rows, report.n_dropped) == (2, 2)
    assert any("dropped 2 row(s)" in m and "row 2" in m for m in report.messages)
    np.testing.assert_array_equal(
        stored_times(tmp_path / "store"), T0_NS + HOUR_NS * np.array([0, 2])
    )


def test_drop_nan_keeps_original_row_numbers_in_later_errors(tmp_path):
    rows = replace_row(1, "2021-01-01T00:00:00Z,10,12,9,,100")
    rows = replace_row(3, "2021-01-01T02:00:00Z,12,14,11,-13,120", rows)
    with pytest.raises(DataError, match="row 3: non-positive price"):
        import_file(write_csv(tmp_path, rows), tmp_path / "store", "BTC", "1h", drop_nan=True)


def assert_refused(path, store, row, rule, *details, drop_nan=False):
    """Import must fail naming the file, the row and the rule, and leave the store as it was."""
    target = bar_path(store, "BTC", "1h")
    before = target.read_bytes() if target.exists() else None
    with pytest.raises(DataError) as info:
        import_file(path, store, "BTC", "1h", drop_nan=drop_nan, replace=True)
    message = str(info.value)
    assert str(path) in message
    if row is not None:
        assert f"row {row}:" in message
    assert rule in message
    for detail in details:
        assert detail in message
    assert (target.read_bytes() if target.exists() else None) == before
    return message


@pytest.fixture
def store(tmp_path):
    """A store already holding BTC 1h bars, which failed imports must not touch."""
    write_synth(tmp_path / "store", "BTC", "1h", 20, seed=1)
    return tmp_path / "store"


def test_refuses_empty_file(tmp_path, store):
    path = tmp_path / "bars.csv"
    path.write_text("")
    assert_refused(path, store, None, "empty input")


def test_refuses_header_only(tmp_path, store):
    assert_refused(write_csv(tmp_path, rows=[]), store, None, "empty input")


def test_refuses_missing_columns(tmp_path, store):
    rows = [",".join(row.split(",")[:3]) for row in ROWS]
    path = write_csv(tmp_path, rows, header="Stamp,open,High")
    message = assert_refused(path, store, None, "missing required column(s)")
    assert "time (or timestamp, date, datetime), low, close" in message
    assert "columns found: ['Stamp', 'open', 'High']" in message


def test_refuses_ambiguous_time_columns(tmp_path, store):
    rows = [f"2021-01-01,{row}" for row in ROWS]
    assert_refused(write_csv(tmp_path, rows, header="date," + HEADER), store, None, "ambiguous")


def test_refuses_unparseable_timestamp(tmp_path, store):
    rows = replace_row(3, "2021-13-45T02:00:00Z,12,14,11,13,120")
    path = write_csv(tmp_path, rows)
    assert_refused(path, store, 3, "unparseable timestamp", "'2021-13-45T02:00:00Z'")


def test_refuses_epoch_mixed_with_iso(tmp_path, store):
    rows = replace_row(2, "1609462800,11,13,10,12,110")
    assert_refused(write_csv(tmp_path, rows), store, 2, "unparseable timestamp", "epoch integer")


def test_refuses_epoch_units_that_change(tmp_path, store):
    epochs = ["1609459200000", "1609462800000", "1609466400", "1609470000000"]
    rows = [f"{e},{row.split(',', 1)[1]}" for e, row in zip(epochs, ROWS, strict=True)]
    assert_refused(write_csv(tmp_path, rows), store, 3, "unparseable timestamp", "in s", "in ms")


def test_refuses_non_numeric_value(tmp_path, store):
    rows = replace_row(4, "2021-01-01T03:00:00Z,13,15,12,14.0.1,130")
    rows = replace_row(3, "2021-01-01T02:00:00Z,12,14,11,13,12O", rows)
    path = write_csv(tmp_path, rows)
    assert_refused(path, store, 3, "non-numeric value", "column 'volume'", "'12O'")


def test_refuses_infinite_value(tmp_path, store):
    rows = replace_row(2, "2021-01-01T01:00:00Z,11,inf,10,12,110")
    assert_refused(write_csv(tmp_path, rows), store, 2, "non-numeric value", "'inf'")


@pytest.mark.parametrize("cell", ["", "NaN", "nan", "null", "NA"])
def test_refuses_missing_values_unless_drop_nan(tmp_path, store, cell):
    rows = replace_row(2, f"2021-01-01T01:00:00Z,11,13,10,{cell},110")
    path = write_csv(tmp_path, rows)
    assert_refused(path, store, 2, "missing value", "close", "use --drop-nan to drop such rows")


def test_refuses_missing_timestamp_unless_drop_nan(tmp_path, store):
    rows = replace_row(3, ",12,14,11,13,120")
    assert_refused(write_csv(tmp_path, rows), store, 3, "missing value", "time", "--drop-nan")


@pytest.mark.parametrize("column", ["open", "high", "low", "close"])
def test_refuses_non_positive_prices(tmp_path, store, column):
    values = {"open": "12", "high": "14", "low": "11", "close": "13"}
    values[column] = "0" if column != "low" else "-1"
    row = "2021-01-01T02:00:00Z," + ",".join(values.values()) + ",120"
    path = write_csv(tmp_path, replace_row(3, row))
    assert_refused(path, store, 3, "non-positive price", f"{column}=")


def test_refuses_negative_volume(tmp_path, store):
    rows = replace_row(2, "2021-01-01T01:00:00Z,11,13,10,12,-5")
    assert_refused(write_csv(tmp_path, rows), store, 2, "negative volume")


@pytest.mark.parametrize(
    "row",
    [
        "2021-01-01T01:00:00Z,11,11.5,10,12,110",  # high < close
        "2021-01-01T01:00:00Z,12.5,12,10,11,110",
    ],
)  # high < open
def test_refuses_high_below_open_or_close(tmp_path, store, row):
    path = write_csv(tmp_path, replace_row(4, row, replace_row(2, row)))
    assert_refused(path, store, 2, "high < max(open, close)", "2 row(s)")


@pytest.mark.parametrize(
    "row",
    [
        "2021-01-01T01:00:00Z,11,13,11.5,12,110",  # low > open
        "2021-01-01T01:00:00Z,12,13,11.5,11,110",
    ],
)  # low > close
def test_refuses_low_above_open_or_close(tmp_path, store, row):
    assert_refused(write_csv(tmp_path, replace_row(2, row)), store, 2, "low > min(open, close)")


def test_refuses_unsorted_timestamps(tmp_path, store):
    rows = [ROWS[0], ROWS[2], ROWS[1], ROWS[3]]
    path = write_csv(tmp_path, rows)
    assert_refused(path, store, 3, "unsorted timestamps", "earlier than row 2")


def test_refuses_duplicate_timestamps(tmp_path, store):
    rows = replace_row(3, "2021-01-01T01:00:00Z,12,14,11,13,120")
    path = write_csv(tmp_path, rows)
    assert_refused(path, store, 3, "duplicate timestamps", "rows 2 and 3")


def test_refuses_duplicates_after_utc_conversion(tmp_path, store):
    rows = replace_row(3, "2021-01-01T02:00:00+01:00,12,14,11,13,120")
    assert_refused(write_csv(tmp_path, rows), store, 3, "duplicate timestamps", "rows 2 and 3")


def test_refuses_unsupported_and_missing_files(tmp_path, store):
    path = tmp_path / "bars.xlsx"
    path.write_text("x")
    assert_refused(path, store, None, "unsupported file type")
    assert_refused(tmp_path / "absent.csv", store, None, "no such file")


def test_bad_symbol_is_refused_before_reading(tmp_path):
    with pytest.raises(DataError, match="symbol 'BTC/USD'"):
        import_file(tmp_path / "absent.csv", tmp_path / "store", "BTC/USD", "1h")


def test_spacing_that_differs_from_the_timeframe_is_refused_or_noted_with_force(tmp_path):
    with pytest.raises(DataError, match="bars are 1h apart .* but --timeframe 1d is 1d"):
        import_file(write_csv(tmp_path), tmp_path / "store", "BTC", "1d")
    assert not (tmp_path / "store").exists()
    report = import_file(write_csv(tmp_path), tmp_path / "store", "BTC", "1d", force=True)
    assert any("bars are 1h apart" in m and "--force" in m for m in report.messages)


def test_refuses_rows_longer_than_the_header(tmp_path, store):
    rows = replace_row(1, ROWS[0] + ",7,8")
    assert_refused(write_csv(tmp_path, rows), store, 1, "more fields than the header")


def test_eight_digit_times_are_iso_basic_dates(tmp_path):
    rows = [f"2021010{i + 1},{row.split(',', 1)[1]}" for i, row in enumerate(ROWS)]
    report = import_file(write_csv(tmp_path, rows), tmp_path / "store", "BTC", "1d")
    assert report.time_unit == "iso"
    expected = T0_NS + 24 * HOUR_NS * np.arange(4)
    np.testing.assert_array_equal(
        read_table(tmp_path / "store", "BTC", "1d").column("time").cast(pa.int64()).to_numpy(),
        expected,
    )


def test_parquet_epoch_ns_with_nulls_stays_exact(tmp_path):
    ts_ns = [T0_NS + 1, None, T0_NS + HOUR_NS + 3]  # not representable as float64
    table = pa.table(
        {
            "time": pa.array(ts_ns, pa.int64()),
            "open": pa.array([10, 10, None], pa.int64()),
            "high": [12.0, 12.0, 12.0],
            "low": [9.0, 9.0, 9.0],
            "close": [11.0, 11.0, 11.0],
        }
    )
    path = tmp_path / "bars.parquet"
    pq.write_table(table, path)
    with pytest.raises(DataError, match="row 2: missing value.*time"):
        import_file(path, tmp_path / "store", "BTC", "1h")
    report = import_file(path, tmp_path / "store", "BTC", "1h", drop_nan=True)
    assert (report.n_rows, report.n_dropped, report.time_unit) == (1, 2, "ns")
    np.testing.assert_array_equal(stored_times(tmp_path / "store"), [T0_NS + 1])


def test_refuses_a_later_row_longer_than_the_header_naming_its_data_row(tmp_path, store):
    rows = replace_row(3, ROWS[2] + ",7")
    rows.insert(1, "")  # a blank line: pandas skips it, and so does the row count
    path = write_csv(tmp_path, rows)
    assert_refused(path, store, 3, "more fields than the header", "7 fields, the header has 6")


def test_refuses_a_bar_column_named_twice(tmp_path, store):
    rows = [f"{row},1" for row in ROWS]
    path = write_csv(tmp_path, rows, header=HEADER + ",close")
    assert_refused(path, store, None, "ambiguous columns", "'close' appears more than once")
