"""The typed read of `import_file` (pyarrow types the columns) against the text read.

The typed read is an optimisation: for every file it must either give way (raise
`_NotTyped`, and the text read then decides) or store exactly what the text read stores,
with the same messages. Valid files as they usually come must take it; every refusal
must keep the text read's words.
"""

from __future__ import annotations

import gzip
import math
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barsweep.datasets import import_file, read_table
from barsweep.datasets.import_rows import ImportChoices
from barsweep.datasets.importer import _import_text, _import_typed, _NotTyped
from barsweep.errors import DataError

TIMES = pd.date_range("2021-01-01", periods=4, freq="h", tz="UTC")
PRICES = {"open": [10.0, 11.0, 12.0, 13.0], "high": [12.0, 13.0, 14.0, 15.0],
          "low": [9.0, 10.0, 11.0, 12.0], "close": [11.0, 12.0, 13.0, 14.0],
          "volume": [100.0, 110.0, 120.0, 130.0]}
ISO_FORMS = {
    "z": "%Y-%m-%dT%H:%M:%SZ",
    "space_naive": "%Y-%m-%d %H:%M:%S",
    "t_naive_minutes": "%Y-%m-%dT%H:%M",
    "offset": "%Y-%m-%dT%H:%M:%S+00:00",
    "fraction_z": "%Y-%m-%dT%H:%M:%S.000Z",
}


def choices(timeframe="1h", drop_nan=False, price_column=None, ohlc_from_close=False,
            force=False):
    return ImportChoices(timeframe, drop_nan, None, price_column, ohlc_from_close, force)


def csv_text(times, columns: dict[str, list]) -> str:
    names = ["time", *columns]
    lines = [",".join(names)]
    for i, t in enumerate(times):
        lines.append(",".join([str(t), *(str(columns[c][i]) for c in columns)]))
    return "\n".join(lines) + "\n"


def assert_same_as_text(path, how):
    """The typed read either gives way or equals the text read, which must then pass."""
    try:
        typed = _import_typed(path, how)
    except _NotTyped:
        return None
    text = _import_text(path, how)
    assert (typed.time_unit, typed.n_dropped) == (text.time_unit, text.n_dropped)
    assert typed.messages == text.messages and typed.notes == text.notes
    assert typed.values.keys() == text.values.keys()
    for name, values in text.values.items():
        np.testing.assert_array_equal(typed.values[name].view(np.int64),
                                      values.view(np.int64), err_msg=name)
    return typed


def text_refusal(path, how) -> str:
    with pytest.raises(DataError) as info:
        _import_text(path, how)
    return str(info.value)


# --- files as they usually come take the typed read ---------------------------------------


@pytest.mark.parametrize("form", ISO_FORMS)
def test_iso_csv_is_read_typed_and_stores_what_text_does(tmp_path, form):
    path = tmp_path / "bars.csv"
    path.write_text(csv_text(TIMES.strftime(ISO_FORMS[form]), PRICES))
    assert assert_same_as_text(path, choices()) is not None
    report = import_file(path, tmp_path / "store", "X", "1h")
    assert (report.read_as, report.time_unit, report.n_rows) == ("typed", "iso", 4)


@pytest.mark.parametrize(("unit", "factor"), [("s", 1), ("ms", 10**3), ("us", 10**6),
                                              ("ns", 10**9)])
def test_epoch_csv_is_read_typed(tmp_path, unit, factor):
    path = tmp_path / "bars.csv"
    path.write_text(csv_text(TIMES.as_unit("s").asi8 * factor, PRICES))
    typed = assert_same_as_text(path, choices())
    assert typed is not None and typed.time_unit == unit


def test_gzip_extra_columns_no_volume_and_funding_with_empty_cells(tmp_path):
    columns = {k: v for k, v in PRICES.items() if k != "volume"}
    columns["Trades"] = ["a", "b", "c", "d"]
    columns["funding_rate"] = ["0.0001", "", "", "-0.0001"]
    path = tmp_path / "bars.csv.gz"
    path.write_bytes(gzip.compress(csv_text(TIMES.strftime(ISO_FORMS["z"]), columns).encode()))
    typed = assert_same_as_text(path, choices())
    assert typed is not None
    assert any("funding_rate empty in 2 row(s)" in m for m in typed.messages)


def test_price_column_and_ohlc_from_close_are_read_typed(tmp_path):
    columns = dict(PRICES, adj_close=[5.5, 6.0, 13.0, 14.0])
    path = tmp_path / "bars.csv"
    path.write_text(csv_text(TIMES.strftime(ISO_FORMS["z"]), columns))
    assert assert_same_as_text(path, choices(price_column="Adj Close")) is not None
    assert assert_same_as_text(path, choices(ohlc_from_close=True)) is not None


@pytest.mark.parametrize("time_type", [pa.timestamp("s"), pa.timestamp("ms", "UTC"),
                                       pa.timestamp("us", "Asia/Kolkata"),
                                       pa.timestamp("ns", "UTC"), pa.int64(), pa.string()])
@pytest.mark.parametrize("price_type", [pa.float64(), pa.float32(), pa.int64(), pa.uint32()])
def test_parquet_columns_as_stored_are_read_typed(tmp_path, time_type, price_type):
    ts_s = TIMES.as_unit("s").asi8
    if pa.types.is_timestamp(time_type):
        factor = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[time_type.unit]
        time = pa.array(ts_s * factor, pa.int64()).view(time_type)
    elif time_type == pa.int64():
        time = pa.array(ts_s * 1000)
    else:
        time = pa.array(TIMES.strftime(ISO_FORMS["z"]).tolist())
    table = pa.table({"time": time, **{k: pa.array(v).cast(price_type)
                                       for k, v in PRICES.items()}})
    path = tmp_path / "bars.parquet"
    pq.write_table(table, path)
    assert assert_same_as_text(path, choices()) is not None


def test_a_time_format_takes_the_text_read(tmp_path):
    path = tmp_path / "bars.csv"
    path.write_text(csv_text(TIMES.strftime("%d/%m/%Y %H:%M"), PRICES))
    report = import_file(path, tmp_path / "store", "X", "1h", time_format="%d/%m/%Y %H:%M")
    assert report.read_as == "text" and report.n_rows == 4


@pytest.mark.parametrize("index_name", [None, "Date", "datetime"])
def test_a_parquet_datetime_index_is_read_typed_as_the_time_column(tmp_path, index_name):
    frame = pd.DataFrame(PRICES, index=TIMES.rename(index_name))
    frame.to_parquet(tmp_path / "bars.parquet")
    typed = assert_same_as_text(tmp_path / "bars.parquet", choices())
    assert typed is not None and any("DataFrame index" in m for m in typed.messages)
    report = import_file(tmp_path / "bars.parquet", tmp_path / "store", "X", "1h")
    assert report.read_as == "typed"
    np.testing.assert_array_equal(
        read_table(tmp_path / "store", "X", "1h").column("close").to_numpy(), PRICES["close"])


@pytest.mark.parametrize("case", ["time_column_and_index", "sliced_range", "named_range",
                                  "multi_index", "ambiguous"])
def test_parquet_indexes_agree_with_the_text_read(tmp_path, case):
    frame = pd.DataFrame(PRICES, index=TIMES)
    if case == "time_column_and_index":
        frame.insert(0, "time", TIMES + pd.Timedelta(days=1))  # the index is index_0
    elif case in ("sliced_range", "named_range"):
        frame = frame.reset_index(names="time").iloc[1:]
        frame.index.name = "n" if case == "named_range" else None
    elif case == "multi_index":
        frame.index = pd.MultiIndex.from_arrays([TIMES, list("abcd")])
    else:
        frame.index.name = "Close"
    path = tmp_path / "bars.parquet"
    frame.to_parquet(path)
    assert_same_as_text(path, choices(force=True))
    if case == "ambiguous":
        with pytest.raises(_NotTyped):
            _import_typed(path, choices())
        expected = text_refusal(path, choices())
        with pytest.raises(DataError) as info:
            import_file(path, tmp_path / "store", "X", "1h")
        assert str(info.value) == expected and "ambiguous" in expected


# --- every refusal keeps the text read's words ---------------------------------------------


BROKEN_ROWS = {
    "non-numeric": (2, "2021-01-01T01:00:00Z,11,13,10,12x,110"),
    "infinite": (2, "2021-01-01T01:00:00Z,11,inf,10,12,110"),
    "nan": (3, "2021-01-01T02:00:00Z,12,14,11,NaN,120"),
    "empty": (3, "2021-01-01T02:00:00Z,12,14,,13,120"),
    "negative": (2, "2021-01-01T01:00:00Z,11,13,10,-12,110"),
    "zero": (2, "2021-01-01T01:00:00Z,11,13,10,0,110"),
    "high": (4, "2021-01-01T03:00:00Z,13,13.5,12,14,130"),
    "low": (4, "2021-01-01T03:00:00Z,13,15,13.5,14,130"),
    "volume": (1, "2021-01-01T00:00:00Z,10,12,9,11,-1"),
    "bad_time": (2, "2021-13-01T01:00:00Z,11,13,10,12,110"),
    "epoch_among_iso": (2, "1609462800,11,13,10,12,110"),
    "naive_among_zoned": (3, "2021-01-01 02:00:00,12,14,11,13,120"),
    "duplicate": (3, "2021-01-01T01:00:00Z,12,14,11,13,120"),
    "unsorted": (2, "2020-12-31T01:00:00Z,11,13,10,12,110"),
    "long_row": (3, "2021-01-01T02:00:00Z,12,14,11,13,120,9"),
    "short_row": (3, "2021-01-01T02:00:00Z,12,14,11,13"),
    "spaced_time": (2, " 2021-01-01T01:00:00Z,11,13,10,12,110"),
}


@pytest.mark.parametrize("fault", BROKEN_ROWS)
def test_refusals_are_worded_by_the_text_read(tmp_path, fault):
    row, text = BROKEN_ROWS[fault]
    lines = csv_text(TIMES.strftime(ISO_FORMS["z"]), PRICES).splitlines()
    lines[row] = text
    path = tmp_path / "bars.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(_NotTyped):
        _import_typed(path, choices())
    if fault in ("spaced_time", "naive_among_zoned"):  # valid for the text read
        assert import_file(path, tmp_path / "store", "X", "1h").read_as == "text"
        return
    expected = text_refusal(path, choices())
    with pytest.raises(DataError) as info:
        import_file(path, tmp_path / "store", "X", "1h")
    assert str(info.value) == expected
    assert f"row {row}:" in expected or "more fields" in expected


def test_a_spacing_refusal_is_worded_by_the_text_read(tmp_path):
    path = tmp_path / "bars.csv"
    path.write_text(csv_text(TIMES.strftime(ISO_FORMS["z"]), PRICES))
    expected = text_refusal(path, choices(timeframe="1d"))
    with pytest.raises(DataError) as info:
        import_file(path, tmp_path / "store", "X", "1d")
    assert str(info.value) == expected and "bars are 1h apart" in expected


@pytest.mark.parametrize("header", ["time,open,high,low,close,close.1",
                                    "time,open,high,low,close,",
                                    "time,open,high,low,Close,close"])
def test_headers_pandas_renames_take_the_text_read(tmp_path, header):
    lines = csv_text(TIMES.strftime(ISO_FORMS["z"]), PRICES).splitlines()
    lines[0] = header
    path = tmp_path / "bars.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(_NotTyped):
        _import_typed(path, choices())


def test_spaces_around_numbers_and_a_byte_order_mark_agree(tmp_path):
    lines = csv_text(TIMES.strftime(ISO_FORMS["z"]), PRICES).splitlines()
    lines[0] = "\ufeff" + lines[0]
    lines[2] = "2021-01-01T01:00:00Z, 11 ,13,\t10,12,110"
    path = tmp_path / "bars.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert_same_as_text(path, choices())
    assert import_file(path, tmp_path / "store", "X", "1h").n_rows == 4


# --- property: any cell, either give way or agree ------------------------------------------


def number_cells():
    floats = st.floats(allow_nan=True, allow_infinity=True)
    return st.one_of(
        floats.map(repr),
        floats.filter(math.isfinite).map(lambda x: f"{x:.25g}"),
        st.floats(1e-3, 1e6).map(lambda x: f"{x:.6f}"),
        st.integers(-10**20, 10**20).map(str),
        st.sampled_from(["", "nan", "NaN", "-nan", "NA", "null", "None", "inf", "-Infinity",
                         "1e", "0x10", "1_000", "+5", ".5", "5.", " 5", "5 ", "1e400",
                         "-0", "1E5", "１"]),
        st.text("0123456789.eE+-naifINAF x", max_size=8),
    )


def time_cells():
    base = st.datetimes(min_value=pd.Timestamp("1900-01-01").to_pydatetime(),
                        max_value=pd.Timestamp("2200-01-01").to_pydatetime())
    forms = ["%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S.%fZ",
             "%Y-%m-%dT%H:%M:%S+05:30", "%Y-%m-%dT%H:%M:%S-0100", "%Y-%m-%d", "%Y%m%d",
             "%Y-%m-%dT%H", "%Y-%m-%dT%H:%MZ", "%d/%m/%Y", " %Y-%m-%d"]
    return st.one_of(
        st.tuples(base, st.sampled_from(forms)).map(lambda x: x[0].strftime(x[1])),
        st.integers(-10**20, 10**20).map(str),
        st.sampled_from(["", "NaT", "null", "2021-02-30", "2021-01-01T24:00:00",
                         "1609459200", "+1609459200", "00001609459200", "2021"]),
        st.text("0123456789-:TZ+ .", max_size=22),
    )


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(column=st.sampled_from(["time", *PRICES, "funding_rate"]),
       row=st.integers(0, 3), time_form=st.sampled_from(sorted(ISO_FORMS)),
       data=st.data())
def test_typed_read_gives_way_or_agrees_with_the_text_read(tmp_path, column, row,
                                                           time_form, data):
    cell = data.draw(time_cells() if column == "time" else number_cells())
    times = list(TIMES.strftime(ISO_FORMS[time_form]))
    columns = {k: list(v) for k, v in PRICES.items()}
    columns["funding_rate"] = ["0.0001", "", "0", "-0.0001"]
    (times if column == "time" else columns[column])[row] = cell
    path = tmp_path / "bars.csv"
    path.write_text(csv_text(times, columns))
    how = choices(force=True, drop_nan=data.draw(st.booleans()))
    typed = assert_same_as_text(path, how)
    if typed is None:  # the text read decides; import_file must then say the same
        try:
            expected = _import_text(path, how)
        except DataError as exc:
            with pytest.raises(DataError, match="^" + re.escape(str(exc)) + "$"):
                import_file(path, tmp_path / "store", "X", "1h", force=True,
                            drop_nan=how.drop_nan, replace=True)
        else:
            report = import_file(path, tmp_path / "store", "X", "1h", force=True,
                                 drop_nan=how.drop_nan, replace=True)
            assert report.n_rows == expected.values["time"].size


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.floats(), st.none()), column=st.sampled_from([*PRICES, "time"]),
       kind=st.sampled_from(["float64", "float32", "int64", "uint64", "ts_s", "ts_us_tz"]),
       row=st.integers(0, 3))
def test_parquet_typed_read_gives_way_or_agrees(tmp_path, value, column, kind, row):
    ts_s = TIMES.as_unit("s").asi8
    arrays = {k: pa.array(v) for k, v in PRICES.items()}
    if column == "time":
        second = None if value is None or not math.isfinite(value) else int(value)
        raw = list(ts_s)
        raw[row] = second if second is None or abs(second) < 2**40 else None
        unit = "s" if kind != "ts_us_tz" else "us"
        scaled = [None if t is None else t * (1 if unit == "s" else 10**6) for t in raw]
        time = pa.array(scaled, pa.int64()).view(
            pa.timestamp(unit, "UTC" if kind == "ts_us_tz" else None))
    else:
        time = pa.array(ts_s, pa.int64()).view(pa.timestamp("s", "UTC"))
        cells = list(PRICES[column])
        cells[row] = value
        target = {"ts_s": "float64", "ts_us_tz": "float64"}.get(kind, kind)
        try:
            arrays[column] = pa.array(cells, pa.float64()).cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return
    path = tmp_path / "bars.parquet"
    pq.write_table(pa.table({"time": time, **arrays}), path)
    assert_same_as_text(path, choices(force=True))
