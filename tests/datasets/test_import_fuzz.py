"""Generated bad input: every file is imported exactly, or refused in one line, store untouched.

Hypothesis builds valid bars, breaks them in one way (shuffled, duplicated times, NaN,
inf, negative, zero, strings in price columns, missing columns, empty files, huge values,
a DatetimeIndex instead of a time column, mixed-case names), writes them as CSV or
Parquet and imports them through the CLI in-process. An independent, obvious oracle
(`expected_bars`) says whether the file is valid and what the store must then hold.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from barsweep.datasets import import_file, open_bars, write_synth
from barsweep.datasets.index import clear_caches
from barsweep.errors import DataError
from barsweep.pipeline.cli import main

SETTINGS = settings(  # per fault and format: 13 faults x 2 formats x 12 examples
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
PRICES = ("open", "high", "low", "close")
SYMBOL, TIMEFRAME = "X", "1h"
MAX_FLOAT = np.finfo(np.float64).max

# A cell: a float (maybe NaN or inf), None (empty), or a str that is not a number.
Cell = float | None | str


@dataclass(frozen=True)
class Case:
    """Bars as cells, before they are written: time in whole seconds since the epoch."""

    time: list[int | None | str]
    columns: dict[str, list[Cell]]  # open, high, low, close, maybe volume
    names: dict[str, str]  # canonical name -> the name in the file (any case)
    time_repr: str  # iso, iso_naive, iso_offset, epoch_s, epoch_ms, datetime, index
    extra: bool  # an ignored extra column
    empty: str = ""  # "", "zero_bytes", "header_only"

    @property
    def n(self) -> int:
        return len(self.time)


# --- generating cases -------------------------------------------------------------------

positive = st.one_of(
    st.floats(min_value=1e-3, max_value=1e6, allow_nan=False),
    st.floats(min_value=5e-324, max_value=MAX_FLOAT, allow_nan=False, allow_infinity=False),
    st.sampled_from([1.0, 0.1, 100.25, 1e308, MAX_FLOAT, 5e-324]),
)


def mixed_case(draw, name: str) -> str:
    style = draw(st.sampled_from(["lower", "upper", "title", "random"]))
    if style == "random":
        flips = draw(st.lists(st.booleans(), min_size=len(name), max_size=len(name)))
        return "".join(c.upper() if f else c for c, f in zip(name, flips, strict=True))
    return getattr(name, style)()


@st.composite
def valid_cases(draw) -> Case:
    n = draw(st.integers(1, 10))
    start = draw(st.integers(946_684_800, 1_893_456_000))  # 2000 to 2030
    steps = draw(st.lists(st.integers(1, 3 * 86_400), min_size=n - 1, max_size=n - 1))
    time = [start + int(s) for s in np.cumsum([0, *steps])]
    columns = {name: [] for name in PRICES}
    for _ in range(n):
        four = sorted(draw(st.lists(positive, min_size=4, max_size=4)))
        low, a, b, high = four
        if draw(st.booleans()):
            a, b = b, a
        for name, value in zip(PRICES, (a, high, low, b), strict=True):
            columns[name].append(value)
    if draw(st.booleans()):
        volume = st.one_of(st.floats(0, 1e6), st.sampled_from([0.0, 1e308]))
        columns["volume"] = draw(st.lists(volume, min_size=n, max_size=n))
    time_name = draw(st.sampled_from(["time", "timestamp", "date", "datetime"]))
    names = {"time": mixed_case(draw, time_name)}
    names.update({name: mixed_case(draw, name) for name in columns})
    time_repr = draw(st.sampled_from(
        ["iso", "iso_naive", "iso_offset", "epoch_s", "epoch_ms", "datetime", "index"]))
    return Case(time, columns, names, time_repr, extra=draw(st.booleans()))


def set_cell(case: Case, column: str, row: int, value) -> Case:
    if column == "time":
        time = list(case.time)
        time[row] = value
        return replace(case, time=time)
    cells = list(case.columns[column])
    cells[row] = value
    return replace(case, columns={**case.columns, column: cells})


FAULTS = (
    "none", "shuffle", "duplicate", "nan", "inf", "negative", "zero", "string",
    "missing_column", "empty", "huge", "bad_time", "two_faults",
)


@st.composite
def broken_cases(draw, kind: str) -> Case:
    """A valid case, broken in one of the ways users break files (`FAULTS`)."""
    case = draw(valid_cases())
    row = draw(st.integers(0, case.n - 1))
    numeric = [c for c in case.columns]
    if kind == "shuffle":
        order = draw(st.permutations(range(case.n)))
        case = replace(case, time=[case.time[i] for i in order],
                       columns={k: [v[i] for i in order] for k, v in case.columns.items()})
    elif kind == "duplicate" and case.n >= 2:
        case = set_cell(case, "time", max(row, 1), case.time[max(row, 1) - 1])
    elif kind == "nan":
        column = draw(st.sampled_from(["time", *numeric]))
        case = set_cell(case, column, row, None if column == "time" or draw(st.booleans())
                        else math.nan)
    elif kind == "inf":
        case = set_cell(case, draw(st.sampled_from(numeric)), row,
                        draw(st.sampled_from([math.inf, -math.inf])))
    elif kind == "negative":
        column = draw(st.sampled_from(numeric))
        case = set_cell(case, column, row, -abs(case.columns[column][row]) or -1.0)
    elif kind == "zero":
        column = draw(st.sampled_from(numeric))
        case = set_cell(case, column, row, draw(st.sampled_from([0.0, -0.0])))
    elif kind == "string":
        case = set_cell(case, draw(st.sampled_from(numeric)), row,
                        draw(st.sampled_from(["abc", "12,5", "1e", "--1", "0x10", "one"])))
    elif kind == "missing_column":
        column = draw(st.sampled_from(["time", *case.columns]))
        if column == "time":
            case = replace(case, names={**case.names, "time": "stamp"})
        else:
            case = replace(case, columns={k: v for k, v in case.columns.items() if k != column})
    elif kind == "empty":
        case = replace(case, empty=draw(st.sampled_from(["zero_bytes", "header_only"])))
    elif kind == "huge":
        for name in PRICES:
            case = set_cell(case, name, row, MAX_FLOAT)
    elif kind == "bad_time":
        case = set_cell(case, "time", row, draw(st.sampled_from(
            ["yesterday", "2021-13-45", "1e9", "12:00"])))
    elif kind == "two_faults":
        case = set_cell(case, "close", row, -1.0)
        case = set_cell(case, "time", 0, None)
    return case


# --- the oracle -------------------------------------------------------------------------


def is_missing(cell) -> bool:
    return cell is None or (isinstance(cell, float) and math.isnan(cell))


def is_bad(cell) -> bool:
    return isinstance(cell, str) or (isinstance(cell, float) and math.isinf(cell))


def expected_bars(case: Case, drop_nan: bool) -> dict[str, np.ndarray] | None:
    """What the store must hold after importing `case`, or None if it must be refused."""
    if case.empty or case.n == 0:
        return None
    if case.names["time"].lower() not in ("time", "timestamp", "date", "datetime"):
        return None
    if any(name not in case.columns for name in PRICES):
        return None
    checked = {"time": case.time, **case.columns}
    if any(is_bad(cell) for cells in checked.values() for cell in cells):
        return None
    keep = [i for i in range(case.n) if not any(is_missing(c[i]) for c in checked.values())]
    if len(keep) < case.n and not drop_nan:
        return None
    if not keep:
        return None
    out = {"time": np.array([case.time[i] for i in keep], dtype=np.int64) * 10**9}
    for name, cells in case.columns.items():
        out[name] = np.array([cells[i] for i in keep], dtype=np.float64)
    if "volume" not in out:
        out["volume"] = np.full(len(keep), np.nan)
    o, h, lo, c, v = (out[n] for n in (*PRICES, "volume"))
    if (np.minimum.reduce([o, h, lo, c]) <= 0).any() or (v < 0).any():
        return None
    if (h < np.maximum(o, c)).any() or (lo > np.minimum(o, c)).any():
        return None
    if (np.diff(out["time"]) <= 0).any():
        return None
    return out


# --- writing cases ----------------------------------------------------------------------


def iso(seconds: int, style: str) -> str:
    ts = pd.Timestamp(seconds, unit="s", tz="UTC")
    if style == "iso_naive":
        return ts.tz_localize(None).isoformat()
    if style == "iso_offset":
        return ts.tz_convert("Asia/Kolkata").isoformat()  # +05:30
    return ts.strftime("%Y-%m-%dT%H:%M:%SZ")


def time_text(cell, style: str) -> str | None:
    if cell is None or isinstance(cell, str):
        return cell
    if style == "epoch_s":
        return str(cell)
    if style == "epoch_ms":
        return str(cell * 1000)
    return iso(cell, "iso" if style in ("datetime", "index") else style)


def number_text(cell) -> str | None:
    if cell is None or isinstance(cell, str):
        return cell
    return repr(float(cell))  # shortest text that reads back to the same float


def write_csv(case: Case, path: Path) -> None:
    names = [case.names["time"], *(case.names[c] for c in case.columns)]
    if case.extra:
        names.append("Trades")
    if case.empty == "zero_bytes":
        path.write_bytes(b"")
        return
    lines = [",".join(names)]
    if not case.empty:
        for i in range(case.n):
            cells = [time_text(case.time[i], case.time_repr)]
            cells += [number_text(case.columns[c][i]) for c in case.columns]
            if case.extra:
                cells.append("x")
            lines.append(",".join("" if c is None else c for c in cells))
    path.write_text("\n".join(lines) + "\n")


def write_parquet(case: Case, path: Path) -> None:
    n = 0 if case.empty else case.n
    style = case.time_repr
    if any(isinstance(c, str) for c in case.time) and style in ("datetime", "index"):
        style = "iso"  # a typed time column cannot hold text
    frame = pd.DataFrame(index=range(n))
    for name, cells in case.columns.items():
        cells = cells[:n]
        if any(isinstance(c, str) for c in cells):  # a price column of text
            frame[case.names[name]] = pd.Series([number_text(c) for c in cells], dtype=object)
        else:
            frame[case.names[name]] = pd.Series(
                [math.nan if c is None else c for c in cells], dtype=np.float64)
    if case.extra:
        frame["Trades"] = np.arange(n)
    times = case.time[:n]
    if style in ("datetime", "index"):
        typed = pd.DatetimeIndex(
            [pd.NaT if t is None else pd.Timestamp(t, unit="s", tz="UTC") for t in times])
        if style == "index":  # a frame indexed by time, as yfinance and resample give
            name = case.names["time"]
            frame.index = typed.rename(None if name.lower() == "time" else name)
        else:
            frame.insert(0, case.names["time"], typed)
    elif style in ("epoch_s", "epoch_ms") and not any(isinstance(t, str) for t in times):
        factor = 1000 if style == "epoch_ms" else 1
        frame.insert(0, case.names["time"], pd.array(
            [None if t is None else t * factor for t in times], dtype="Int64"))
    else:
        frame.insert(0, case.names["time"],
                     pd.Series([time_text(t, style) for t in times], dtype=object))
    if case.empty == "zero_bytes":
        frame = frame.iloc[:0, :0]
    frame.to_parquet(path)


# --- the property -----------------------------------------------------------------------


def snapshot(store: Path) -> dict[str, bytes]:
    return {p.relative_to(store).as_posix(): p.read_bytes()
            for p in sorted(store.rglob("*")) if p.is_file()}


def run_import(capsys, src: Path, store: Path, drop_nan: bool) -> tuple[int, str]:
    args = ["data", "import", str(src), "--symbol", SYMBOL, "--timeframe", TIMEFRAME,
            "--store", str(store), "--replace", "--force"] + (["--drop-nan"] if drop_nan else [])
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would be a stray line on the user's stderr
        rc = main(args)
    return rc, capsys.readouterr().err


def check_case(capsys, case: Case, fmt: str, drop_nan: bool) -> None:
    clear_caches()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        store = tmp / "store"
        write_synth(store, SYMBOL, TIMEFRAME, 5, seed=1)  # an old file a refusal must keep
        src = tmp / f"bars.{fmt}"
        (write_csv if fmt == "csv" else write_parquet)(case, src)
        before = snapshot(store)
        expected = expected_bars(case, drop_nan)
        event("imported" if expected is not None else "refused")
        rc, err = run_import(capsys, src, store, drop_nan)
        assert "Traceback" not in err
        if expected is None:
            assert rc != 0, f"imported a file the oracle refuses: {case}"
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("barsweep: error: "), err
            assert str(src) in lines[0]
            assert any(w in lines[0] for w in ("row ", "column", "header", "empty input")), err
            assert snapshot(store) == before
        else:
            assert rc == 0, f"refused a valid file: {err}"
            ds = open_bars(store, SYMBOL, TIMEFRAME)
            np.testing.assert_array_equal(ds["time"].values.view(np.int64), expected["time"])
            for name in (*PRICES, "volume"):
                np.testing.assert_array_equal(ds[name].values[:, 0], expected[name], name)
            assert sorted(p.name for p in (store / TIMEFRAME).iterdir()) == [f"{SYMBOL}.arrow"]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("fault", FAULTS)
def test_generated_files_are_imported_exactly_or_refused_in_one_line(capsys, fault, fmt):
    @SETTINGS
    @given(case=broken_cases(fault), drop_nan=st.booleans())
    def check(case, drop_nan):
        check_case(capsys, case, fmt, drop_nan)

    check()


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=valid_cases(), fmt=st.sampled_from(["csv", "parquet"]))
def test_valid_generated_files_always_import(capsys, case, fmt):
    """The generator's valid files are valid for the oracle, so both branches are exercised."""
    assume(case.time_repr != "index" or fmt == "parquet")
    assert expected_bars(case, drop_nan=False) is not None
    check_case(capsys, case, fmt, drop_nan=False)


# --- the DatetimeIndex decision, and a few cases spelled out ----------------------------


def frame_of_bars(n=4):
    index = pd.date_range("2021-01-01", periods=n, freq="h", tz="UTC")
    return pd.DataFrame({"Open": 10.0, "High": 12.0, "Low": 9.0, "Close": 11.0,
                         "Volume": 1.0}, index=index)


@pytest.mark.parametrize("index_name", [None, "Date", "datetime"])
def test_parquet_with_a_datetime_index_imports_it_as_the_time_column(tmp_path, index_name):
    frame = frame_of_bars()
    frame.index.name = index_name
    path = tmp_path / "bars.parquet"
    frame.to_parquet(path)
    report = import_file(path, tmp_path / "store", SYMBOL, TIMEFRAME)
    assert report.n_rows == 4 and report.time_unit == "datetime"
    assert any("DataFrame index" in m for m in report.messages)
    ds = open_bars(tmp_path / "store", SYMBOL, TIMEFRAME)
    np.testing.assert_array_equal(ds["time"].values.view(np.int64), frame.index.as_unit("ns").asi8)


def test_a_time_column_wins_over_an_unnamed_datetime_index(tmp_path):
    frame = frame_of_bars()
    frame.insert(0, "time", frame.index + pd.Timedelta(days=1))
    path = tmp_path / "bars.parquet"
    frame.to_parquet(path)
    report = import_file(path, tmp_path / "store", SYMBOL, TIMEFRAME)
    assert any("index_0" in m for m in report.messages)
    ds = open_bars(tmp_path / "store", SYMBOL, TIMEFRAME)
    np.testing.assert_array_equal(ds["time"].values.view(np.int64),
                                  pd.DatetimeIndex(frame["time"]).as_unit("ns").asi8)


def test_a_named_datetime_index_and_a_time_column_are_ambiguous(tmp_path):
    frame = frame_of_bars()
    frame.index.name = "date"
    frame.insert(0, "Time", frame.index)
    path = tmp_path / "bars.parquet"
    frame.to_parquet(path)
    with pytest.raises(DataError, match="ambiguous"):
        import_file(path, tmp_path / "store", SYMBOL, TIMEFRAME)


def test_csv_with_an_unnamed_index_column_says_how_to_fix_it(tmp_path):
    path = tmp_path / "bars.csv"
    frame_of_bars().to_csv(path)  # the index is written with an empty header
    with pytest.raises(DataError, match="missing required column.*df.index.name = 'time'"):
        import_file(path, tmp_path / "store", SYMBOL, TIMEFRAME)


@pytest.mark.parametrize("content", [b"\x00\x01\x02garbage", b"PAR1" + b"\x00" * 20 + b"PAR1"])
def test_garbage_parquet_is_one_line(tmp_path, capsys, content):
    path = tmp_path / "bars.parquet"
    path.write_bytes(content)
    rc, err = run_import(capsys, path, tmp_path / "store", False)
    assert rc != 0 and len(err.strip().splitlines()) == 1 and str(path) in err


@pytest.mark.parametrize("content", [b"\xff\xfe\x00bad", b"\x1f\x8b\x08\x00truncated"])
def test_garbage_csv_is_one_line(tmp_path, capsys, content):
    path = tmp_path / ("bars.csv.gz" if content.startswith(b"\x1f") else "bars.csv")
    path.write_bytes(content)
    rc, err = run_import(capsys, path, tmp_path / "store", False)
    assert rc != 0 and len(err.strip().splitlines()) == 1 and str(path) in err


def test_parquet_with_unusual_column_types(tmp_path, capsys):
    """Booleans, dates, decimals and durations: read as the rules say, never a crash."""
    import datetime as dt
    import decimal

    table = pa.table({
        "date": pa.array([dt.date(2021, 1, 1), dt.date(2021, 1, 2)], pa.date32()),
        "open": pa.array([decimal.Decimal("10.5"), decimal.Decimal("11")], pa.decimal128(6, 2)),
        "high": [12.0, 13.0],
        "low": [9.0, 10.0],
        "close": [11.0, 12.0],
    })
    pq.write_table(table, tmp_path / "ok.parquet")
    import_file(tmp_path / "ok.parquet", tmp_path / "store", SYMBOL, "1d")
    np.testing.assert_array_equal(
        open_bars(tmp_path / "store", SYMBOL, "1d")["open"].values[:, 0], [10.5, 11.0])
    for column in (pa.array([True, False]), pa.array([1, 2], pa.duration("s"))):
        path = tmp_path / "bad.parquet"
        pq.write_table(table.set_column(4, "close", column), path)
        rc, err = run_import(capsys, path, tmp_path / "store", False)
        assert rc != 0 and len(err.strip().splitlines()) == 1 and "close" in err, err


def test_parquet_times_beyond_what_nanoseconds_hold_are_refused_by_row(tmp_path):
    import datetime as dt

    times = pa.array([dt.datetime(2021, 1, 1), dt.datetime(3000, 1, 1)], pa.timestamp("us"))
    table = pa.table({"time": times, "open": [1.0, 1.0], "high": [2.0, 2.0],
                      "low": [0.5, 0.5], "close": [1.5, 1.5]})
    pq.write_table(table, tmp_path / "bars.parquet")
    with pytest.raises(DataError, match="row 2: unparseable timestamp.*outside the times"):
        import_file(tmp_path / "bars.parquet", tmp_path / "store", SYMBOL, "1d")
    assert not (tmp_path / "store").exists()
