"""What `barsweep data import`, `data verify` and `data info` tell a user whose file is
not quite right: each refusal names the option that reads the file (and that option
then does), an adjusted close left unused and moves that look like unadjusted splits are
one loud line each, every note is shown once, and a damaged file in a store is named
while the others are still listed.

Real files in tmp_path (AAPL's daily bars from bokeh_sampledata, with their real 2:1
splits), the CLI run as a process of its own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from barsweep.datasets import bar_path, open_bars
from barsweep.datasets.import_hints import split_warning
from barsweep.datasets.index import clear_caches
from barsweep.datasets.rules import large_moves
from barsweep.pipeline.cli import main

pytest.importorskip("bokeh_sampledata")

CLI = [sys.executable, "-m", "barsweep.pipeline.cli"]
AAPL_MOVES = "2000-06-21 -45.1 %, 2000-09-29 -51.9 %, 2005-02-28 -49.6 %"


def aapl() -> pd.DataFrame:
    """AAPL's daily bars as bokeh_sampledata ships them: Ticker, Date, Open, High, Low,
    Close, Volume, Adj Close; unadjusted, with 2:1 splits on 2000-06-21 and 2005-02-28."""
    import bokeh_sampledata

    frame = pd.read_csv(Path(bokeh_sampledata.__file__).parent / "_data" / "stocks.csv.gz")
    return frame[frame["Ticker"] == "AAPL"].sort_values("Date").reset_index(drop=True)


def barsweep(*args, cwd=None) -> subprocess.CompletedProcess:
    done = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def data_import(src, store, *flags, symbol="AAPL", timeframe="1d"):
    return barsweep("data", "import", src, "--symbol", symbol, "--timeframe", timeframe,
                    "--store", store, *flags)


def one_error(done: subprocess.CompletedProcess, *says: str) -> str:
    """The refusal: exit 2, one line on stderr, `says` in it."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("barsweep: error: "), lines[0]
    for words in says:
        assert words in lines[0], lines[0]
    return lines[0]


def warnings_of(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("barsweep: warning:")]


def stored(store, symbol="AAPL", timeframe="1d"):
    clear_caches()
    return open_bars(store, symbol, timeframe)


# --- an adjusted close left unused, and unadjusted splits --------------------------------


def test_an_unused_adj_close_and_the_splits_are_one_line_each(tmp_path):
    frame = aapl()
    frame.to_csv(tmp_path / "aapl.csv", index=False)
    done = data_import(tmp_path / "aapl.csv", tmp_path / "store")
    assert done.returncode == 0, done.stderr
    adjusted, splits = warnings_of(done)
    assert adjusted == (
        "barsweep: warning: AAPL: column 'Adj Close' holds adjusted prices, but the raw close "
        "is stored (splits and dividends not adjusted for): pass --price-column adj_close "
        "(price_column='adj_close' in Python) to store the adjusted prices")
    assert splits.startswith(f"barsweep: warning: AAPL: 3 one-bar close moves beyond ±45 %: "
                             f"{AAPL_MOVES}: likely unadjusted splits")
    assert "--price-column adj_close" in splits
    # stored as the importer's contract says: the raw close
    np.testing.assert_array_equal(stored(tmp_path / "store")["close"].values[:, 0],
                                  frame["Close"])


def test_price_column_adj_close_stores_it_and_names_the_one_real_move(tmp_path):
    frame = aapl()
    frame.to_csv(tmp_path / "aapl.csv", index=False)
    done = data_import(tmp_path / "aapl.csv", tmp_path / "store", "--price-column", "adj_close")
    assert done.returncode == 0, done.stderr
    # the 2000-09-29 crash is a real move: named as one, the splits are gone
    assert warnings_of(done) == [
        "barsweep: warning: AAPL: 1 one-bar close move beyond ±45 %: 2000-09-29 -51.9 % in "
        "the stored close (column 'Adj Close'): a real move, or a split that column is not "
        "adjusted for"]
    np.testing.assert_array_equal(stored(tmp_path / "store")["close"].values[:, 0],
                                  frame["Adj Close"])


@pytest.mark.parametrize("name", ["Adj Close", "adj_close", "adjclose", "ADJ-CLOSE",
                                  "Adjusted Close"])
@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_an_adjusted_close_is_found_in_any_spelling(tmp_path, capsys, name, fmt):
    frame = aapl().iloc[:300].drop(columns="Ticker").rename(columns={"Adj Close": name})
    src = tmp_path / f"aapl.{fmt}"
    frame.to_csv(src, index=False) if fmt == "csv" else frame.to_parquet(src, index=False)
    clear_caches()
    capsys.readouterr()
    assert main(["data", "import", str(src), "--symbol", "AAPL", "--timeframe", "1d",
                 "--store", str(tmp_path / "store")]) == 0
    err = capsys.readouterr().err
    option = "adjusted_close" if name == "Adjusted Close" else "adj_close"
    assert (f"barsweep: warning: AAPL: column {name!r} holds adjusted prices, but the raw "
            f"close is stored") in err
    assert f"--price-column {option} (price_column={option!r} in Python)" in err
    clear_caches()
    capsys.readouterr()
    assert main(["data", "import", str(src), "--symbol", "AAPL", "--timeframe", "1d",
                 "--store", str(tmp_path / "store"), "--replace",
                 "--price-column", option]) == 0  # the option named reads that column
    assert "holds adjusted prices" not in capsys.readouterr().err
    np.testing.assert_array_equal(stored(tmp_path / "store")["close"].values[:, 0], frame[name])


def test_data_verify_warns_of_the_splits_and_still_passes(tmp_path):
    aapl().to_csv(tmp_path / "aapl.csv", index=False)
    msft_like = aapl().assign(Close=lambda f: f["Close"].iloc[0], Open=lambda f: f["Close"],
                              High=lambda f: f["Close"], Low=lambda f: f["Close"])
    msft_like.to_csv(tmp_path / "flat.csv", index=False)
    assert data_import(tmp_path / "aapl.csv", tmp_path / "store").returncode == 0
    assert data_import(tmp_path / "flat.csv", tmp_path / "store", symbol="FLAT").returncode == 0
    done = barsweep("data", "verify", "--store", tmp_path / "store")
    assert done.returncode == 0, done.stdout  # a warning is not a failure
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "ok     1d/AAPL.arrow: 3,270 bars, hash as recorded"
    assert lines[1].startswith(f"warn   1d/AAPL.arrow: 3 one-bar close moves beyond ±45 %: "
                               f"{AAPL_MOVES}: likely unadjusted splits")
    assert "--price-column adj_close" in lines[1]
    assert lines[2] == "ok     1d/FLAT.arrow: 3,270 bars, hash as recorded"
    assert lines[3] == "2 files, all ok (1 with a warning)"


def test_data_verify_does_not_tell_an_adjusted_store_to_adjust(tmp_path):
    """Bars imported with --price-column record the column their close came from, and
    `data verify` words their one real move as the import did: no advice to pass the
    option they were imported with."""
    aapl().to_csv(tmp_path / "aapl.csv", index=False)
    done = data_import(tmp_path / "aapl.csv", tmp_path / "store", "--price-column", "adj_close")
    assert done.returncode == 0, done.stderr
    done = barsweep("data", "verify", "--store", tmp_path / "store")
    assert done.returncode == 0, done.stdout
    lines = done.stdout.strip().splitlines()
    assert lines[1] == (
        "warn   1d/AAPL.arrow: 1 one-bar close move beyond ±45 %: 2000-09-29 -51.9 % in the "
        "stored close (column 'Adj Close'): a real move, or a split that column is not "
        "adjusted for")
    assert "--price-column" not in done.stdout and "unadjusted" not in done.stdout
    # the record rides in the file's own bytes: a copy of the store says the same
    import shutil

    shutil.copytree(tmp_path / "store", tmp_path / "copy")
    again = barsweep("data", "verify", "--store", tmp_path / "copy", "--update-index")
    assert again.returncode == 0 and lines[1] in again.stdout, again.stdout


def test_moves_at_the_limit_are_not_reported():
    close = np.array([100.0, 55.0, 55.0 * 1.45, 200.0, 100.0])  # -45, +45, +151, -50 %
    assert large_moves(close).tolist() == [3, 4]
    ts_ns = pd.date_range("2021-01-04", periods=5, freq="h").as_unit("ns").asi8
    text = split_warning(ts_ns, close)
    assert text.startswith("2 one-bar close moves beyond ±45 %: 2021-01-04 03:00 +150.8 %, "
                           "2021-01-04 04:00 -50.0 %: likely unadjusted splits")
    assert split_warning(ts_ns, close[:3]) is None


# --- each note once ----------------------------------------------------------------------


def test_data_import_shows_each_note_once(tmp_path):
    frame = aapl().iloc[:400].copy()
    frame["Date"] = pd.to_datetime(frame["Date"]).astype("int64") // 10**9  # epoch seconds
    frame.to_csv(tmp_path / "aapl.csv", index=False)
    done = data_import(tmp_path / "aapl.csv", tmp_path / "store", "--price-column", "adj_close",
                       "--force", timeframe="1h")
    assert done.returncode == 0, done.stderr
    lines = [*done.stdout.splitlines(), *done.stderr.splitlines()]
    assert len(lines) == len(set(lines)), lines
    for words in ("ignored column(s): ['Ticker']", "--price-column: close is column",
                  "imported anyway (--force)", "epoch integers in s"):
        assert sum(words in line for line in lines) == 1, (words, lines)
    assert "note: --price-column: close is column 'Adj Close'" in done.stdout


# --- refusals that name their fix -------------------------------------------------------


def test_close_only_is_refused_naming_ohlc_from_close(tmp_path):
    aapl()[["Date", "Close"]].to_csv(tmp_path / "close.csv", index=False)
    one_error(data_import(tmp_path / "close.csv", tmp_path / "store"),
              "missing required column(s): open, high, low",
              "for close-only data pass --ohlc-from-close")
    done = data_import(tmp_path / "close.csv", tmp_path / "store", "--ohlc-from-close")
    assert done.returncode == 0, done.stderr
    assert stored(tmp_path / "store")["open"].values[0, 0] == aapl()["Close"].iloc[0]


def test_day_first_dates_are_refused_naming_the_time_format(tmp_path):
    frame = aapl().iloc[:300].copy()
    frame["Date"] = pd.to_datetime(frame["Date"]).dt.strftime("%d/%m/%Y")
    frame.to_csv(tmp_path / "dmy.csv", index=False)
    one_error(data_import(tmp_path / "dmy.csv", tmp_path / "store"),
              "row 1: unparseable timestamp", "'01/03/2000'",
              "the times look like dd/mm/yyyy: pass --time-format '%d/%m/%Y'")
    done = data_import(tmp_path / "dmy.csv", tmp_path / "store", "--time-format", "%d/%m/%Y")
    assert done.returncode == 0, done.stderr
    expected = pd.to_datetime(aapl()["Date"].iloc[:300]).to_numpy("datetime64[ns]")
    np.testing.assert_array_equal(stored(tmp_path / "store")["time"].values, expected)


def test_month_first_and_ambiguous_dates_name_what_they_look_like(tmp_path):
    days = pd.bdate_range("2021-01-04", periods=30)
    frame = pd.DataFrame({"date": days.strftime("%m/%d/%Y %H:%M"), "open": 1.0, "high": 1.0,
                          "low": 1.0, "close": 1.0})
    frame.to_csv(tmp_path / "mdy.csv", index=False)
    one_error(data_import(tmp_path / "mdy.csv", tmp_path / "store"),
              "mm/dd/yyyy: pass --time-format '%m/%d/%Y %H:%M'")
    frame.iloc[:5].to_csv(tmp_path / "short.csv", index=False)  # every day and month <= 12
    one_error(data_import(tmp_path / "short.csv", tmp_path / "store"),
              "pass --time-format '%d/%m/%Y %H:%M' (day first) or '%m/%d/%Y %H:%M' "
              "(month first)")


def test_newest_first_is_refused_offering_sort(tmp_path):
    aapl().iloc[::-1].to_csv(tmp_path / "newest.csv", index=False)
    one_error(data_import(tmp_path / "newest.csv", tmp_path / "store"),
              "row 2: unsorted timestamps", "the rows are newest first",
              "pass --sort (sort=True in Python)")
    done = data_import(tmp_path / "newest.csv", tmp_path / "store", "--sort")
    assert done.returncode == 0, done.stderr
    assert "note: --sort: the rows were newest first: sorted by time" in done.stdout
    np.testing.assert_array_equal(stored(tmp_path / "store")["close"].values[:, 0],
                                  aapl()["Close"])


def test_sort_still_refuses_duplicate_times_naming_the_file_rows(tmp_path):
    frame = aapl().iloc[:50].iloc[::-1].reset_index(drop=True)
    frame = pd.concat([frame, frame.iloc[[10]]], ignore_index=True)  # row 51 repeats row 11
    frame.to_csv(tmp_path / "dup.csv", index=False)
    one_error(data_import(tmp_path / "dup.csv", tmp_path / "store", "--sort"),
              "duplicate timestamps", "rows 11 and 51 both have")
    assert not (tmp_path / "store").exists() or not bar_path(tmp_path / "store", "AAPL",
                                                               "1d").exists()


@pytest.mark.parametrize(("delimiter", "typed"), [(";", "';'"), ("\t", "'\\t'"),
                                                  ("|", "'|'")])
def test_another_delimiter_is_refused_naming_it(tmp_path, delimiter, typed):
    frame = aapl().iloc[:200]
    frame.to_csv(tmp_path / "other.csv", index=False, sep=delimiter)
    one_error(data_import(tmp_path / "other.csv", tmp_path / "store"),
              f"the header looks {typed}-separated: pass --delimiter {typed}")
    done = data_import(tmp_path / "other.csv", tmp_path / "store",
                       "--delimiter", "\\t" if delimiter == "\t" else delimiter)
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(stored(tmp_path / "store")["close"].values[:, 0],
                                  frame["Close"])


def test_a_semicolon_csv_with_decimal_commas_names_the_delimiter(tmp_path):
    text = "Date;Open;High;Low;Close\n2021-01-04;1,5;2,0;1,0;1,5\n2021-01-05;1,5;2,0;1,0;1,5\n"
    (tmp_path / "eu.csv").write_text(text)
    one_error(data_import(tmp_path / "eu.csv", tmp_path / "store"),
              "row 1: more fields than the header has columns", "--delimiter ';'")


def test_a_delimiter_of_more_than_one_character_is_one_line(tmp_path):
    aapl().iloc[:20].to_csv(tmp_path / "a.csv", index=False)
    one_error(data_import(tmp_path / "a.csv", tmp_path / "store", "--delimiter", ";;"),
              "--delimiter ';;': expected one character")


def test_new_options_have_help_without_markup():
    done = barsweep("data", "import", "--help")
    assert done.returncode == 0
    for option in ("--sort", "--delimiter"):
        assert option in done.stdout
    text = " ".join(done.stdout.split())
    assert "sort the rows by time before the checks" in text
    assert "the CSV's field delimiter" in text
    assert "``" not in done.stdout


# --- data info on a damaged store ---------------------------------------------------------


def damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(bytes(data[: len(data) // 3]))
    else:  # bytes changed in place: same size, a new mtime
        middle = len(data) // 2
        data[middle:middle + 8] = bytes(255 - b for b in data[middle:middle + 8])
        path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["truncated", "bytes changed"])
def test_data_info_lists_the_good_files_and_names_the_damaged_one(tmp_path, how):
    store = tmp_path / "store"
    frame = aapl()
    frame.to_csv(tmp_path / "aapl.csv", index=False)
    for symbol in ("AAPL", "IBM", "MSFT"):
        assert data_import(tmp_path / "aapl.csv", store, symbol=symbol).returncode == 0
    damaged = bar_path(store, "IBM", "1d")
    damage(damaged, how)
    done = barsweep("data", "info", "--store", store)
    assert done.returncode == 1
    rows = done.stdout.strip().splitlines()
    assert rows[0].split()[:3] == ["symbol", "tf", "bars"]
    assert [row.split()[:3] for row in rows[1:]] == [["AAPL", "1d", "3,270"],
                                                    ["MSFT", "1d", "3,270"]]
    errors = done.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith(f"barsweep: error: {damaged}"), errors
    assert "re-import it" in errors[0] and "barsweep data verify" in errors[0]
