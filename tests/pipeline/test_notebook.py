"""barsweep.sweep(): the same machinery as `barsweep run`, from Python, equal to the
CLI's store; in memory (nothing left on disk) or into a store; on a given client."""

import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml

import barsweep
from barsweep.engine import METRICS
from barsweep.errors import SpecError
from barsweep.pipeline.cli import main
from barsweep.pipeline.run.cluster import connect

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = tmp_path_factory.mktemp("bars")
    assert main(["data", "synth", "--symbol", "BTCUSDT", "--timeframe", "1h", "--bars", "1500",
                 "--seed", "4", "--store", str(store)]) == 0
    return store


def test_sweep_from_python_equals_the_cli(store, tmp_path):
    spec = {"data": {"store": str(store), "symbols": ["BTCUSDT"], "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": {"fast": {"start": 2, "stop": 9, "step": 1}, "slow": [20, 30, 40]},
            "constraints": ["fast < slow"], "execution": {"fill": "close", "fees": 0.001},
            "run": {"out": str(tmp_path / "cli.zarr")}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert main(["run", str(tmp_path / "spec.yaml"), "--workers", "2", "--quiet"]) == 0
    cli = barsweep.open_results(tmp_path / "cli.zarr")
    scratch = set(Path(tempfile.gettempdir()).glob("barsweep-*"))
    ds = barsweep.sweep(store, "ema_cross", {"fast": range(2, 10), "slow": np.array([20, 30, 40])},
                        ["fast < slow"], {"fill": "close", "fees": 0.001},
                        symbols="BTCUSDT", timeframe="1h", n_workers=2)
    assert set(Path(tempfile.gettempdir()).glob("barsweep-*")) == scratch  # nothing left
    assert ds["fast"].values.tolist() == list(range(2, 10))
    assert ds.attrs["cluster"] == "threads"  # a small sweep: threads of this process
    assert ds.attrs["cluster_reason"].startswith("auto: ")
    for name in METRICS:
        np.testing.assert_array_equal(ds[name].values, cli[name].values, err_msg=name)
    with connect("local", n_workers=1) as client:
        kept = barsweep.sweep(store, "ema_cross", {"fast": [3, 5], "slow": range(20, 41, 10)},
                              execution={"fill": "close", "fees": 0.001}, symbols=["BTCUSDT"],
                              timeframe="1h", out=tmp_path / "kept.zarr", client=client)
    np.testing.assert_array_equal(kept["sharpe"].values[0], cli["sharpe"].sel(
        fast=[3, 5], slow=[20, 30, 40]).values[0])
    assert (tmp_path / "kept.zarr").is_dir()
    assert kept.attrs["cluster_reason"] == "a client given"


def test_sweep_refuses_what_a_spec_refuses(store):
    with pytest.raises(SpecError, match=r"grid\.slow"):
        barsweep.sweep(store, "ema_cross", {"fast": [3], "slow": []}, symbols="BTCUSDT",
                       timeframe="1h")
    with pytest.raises(SpecError, match="symbols= and timeframe="):
        barsweep.sweep(store, "ema_cross", {"fast": [3], "slow": [9]})


def test_bars_in_memory_are_imported_and_swept_alike(store, tmp_path):
    import pandas as pd

    from barsweep.datasets import open_bars

    grid = {"fast": [3, 5, 8], "slow": range(20, 50, 10)}
    execution = {"fill": "close", "fees": 0.001}
    stored = barsweep.sweep(store, "ema_cross", grid, execution=execution,
                            symbols="BTCUSDT", timeframe="1h", n_workers=1)
    ds = open_bars(store, "BTCUSDT", "1h")
    from_dataset = barsweep.sweep(ds, "ema_cross", grid, execution=execution, n_workers=1)
    frame = pd.DataFrame({c: ds[c].values[:, 0] for c in ("open", "high", "low", "close")},
                         index=pd.DatetimeIndex(ds["time"].values.astype("datetime64[ns]"),
                                                name="time"))
    kept = barsweep.sweep({"BTCUSDT": frame}, "ema_cross", grid, execution=execution,
                          timeframe="1h", out=tmp_path / "r.zarr", n_workers=1)
    assert (tmp_path / "r.zarr.bars" / "1h" / "BTCUSDT.arrow").is_file()
    for name in METRICS:
        for other in (from_dataset, kept):
            np.testing.assert_array_equal(other[name].values, stored[name].values, name)
    with pytest.raises(SpecError, match="no bars for symbol 'ETH'"):
        barsweep.sweep({"BTCUSDT": frame}, "ema_cross", grid, symbols="ETH", timeframe="1h")


def aapl_frame():
    """AAPL's daily bars from bokeh_sampledata as a user reads them: a DatetimeIndex,
    Open..Volume and ``Adj Close`` (the raw close has 2:1 splits as -50 % bars)."""
    import pandas as pd

    pytest.importorskip("bokeh_sampledata")
    import bokeh_sampledata

    frame = pd.read_csv(Path(bokeh_sampledata.__file__).parent / "_data" / "stocks.csv.gz")
    frame = frame[frame["Ticker"] == "AAPL"].drop(columns="Ticker")
    return frame.set_index(pd.DatetimeIndex(pd.to_datetime(frame.pop("Date")), name="Date"))


SMALL = {"fast": [5, 10], "slow": [50]}


def test_an_adj_close_frame_warns_as_the_cli_does(tmp_path):
    import subprocess
    import sys

    from barsweep.datasets import open_bars
    from barsweep.datasets.index import clear_caches
    from barsweep.errors import DataWarning

    frame = aapl_frame()
    with pytest.warns(DataWarning) as told:
        barsweep.sweep({"AAPL": frame}, "ema_cross", SMALL, timeframe="1d",
                       out=tmp_path / "raw.zarr", n_workers=1)
    ours = [w for w in told if w.category is DataWarning]
    lines = [str(w.message) for w in ours]
    assert lines[0] == "AAPL: note: ignored column(s): ['Adj Close']"
    adjusted, splits = lines[1:]
    assert adjusted.startswith("AAPL: column 'Adj Close' holds adjusted prices, but the raw "
                               "close is stored")
    assert "price_column='adj_close'" in adjusted
    assert splits.startswith("AAPL: 3 one-bar close moves beyond ±45 %: 2000-06-21 -45.1 %, "
                             "2000-09-29 -51.9 %, 2005-02-28 -49.6 %: likely unadjusted splits")
    assert [w.filename for w in ours] == [__file__] * 3, [  # pointed at the user's call
        (w.filename, w.lineno) for w in told]
    # the same words as `barsweep data import` of the same bars
    frame.to_csv(tmp_path / "aapl.csv")
    cli = subprocess.run([sys.executable, "-m", "barsweep.pipeline.cli", "data", "import",
                          str(tmp_path / "aapl.csv"), "--symbol", "AAPL", "--timeframe", "1d",
                          "--store", str(tmp_path / "cli")], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    assert cli.stderr.splitlines() == [f"barsweep: warning: {adjusted}",
                                       f"barsweep: warning: {splits}"]

    with pytest.warns(DataWarning) as told:
        barsweep.sweep({"AAPL": frame}, "ema_cross", SMALL, timeframe="1d",
                       out=tmp_path / "adj.zarr", n_workers=1, price_column="adj_close")
    lines = [str(w.message) for w in told if w.category is DataWarning]
    assert not any("holds adjusted prices" in line for line in lines)
    assert "AAPL: note: --price-column: close is column 'Adj Close'" in lines[0]
    assert lines[1] == ("AAPL: 1 one-bar close move beyond ±45 %: 2000-09-29 -51.9 % in the "
                        "stored close (column 'Adj Close'): a real move, or a split that column "
                        "is not adjusted for")
    clear_caches()
    stored = open_bars(tmp_path / "adj.zarr.bars", "AAPL", "1d")
    np.testing.assert_array_equal(stored["close"].values[:, 0], frame["Adj Close"])


def test_bars_in_memory_take_every_import_option(tmp_path):
    import pandas as pd

    from barsweep.datasets import open_bars
    from barsweep.datasets.index import clear_caches
    from barsweep.errors import DataError, DataWarning

    frame = aapl_frame().iloc[:400]
    # close-only, newest first, dates as day-first text, one missing close
    text = pd.DataFrame({"date": frame.index.strftime("%d/%m/%Y"),
                         "close": frame["Adj Close"].to_numpy()}).iloc[::-1]
    text.iloc[5, 1] = np.nan
    with pytest.raises(DataError, match=r"^sweep\(\): bars of 'AAPL': row 1: unparseable "
                       r"timestamp.*pass --time-format '%d/%m/%Y'"):
        barsweep.sweep({"AAPL": text}, "ema_cross", SMALL, timeframe="1d", ohlc_from_close=True)
    with pytest.raises(DataError, match="the rows are newest first.*sort=True in Python"):
        barsweep.sweep({"AAPL": text}, "ema_cross", SMALL, timeframe="1d", ohlc_from_close=True,
                       time_format="%d/%m/%Y", drop_nan=True)
    with pytest.warns(DataWarning) as told:
        ds = barsweep.sweep({"AAPL": text}, "ema_cross", SMALL, timeframe="1h",
                            out=tmp_path / "r.zarr", n_workers=1, ohlc_from_close=True,
                            time_format="%d/%m/%Y", drop_nan=True, sort=True, force=True)
    notes = "\n".join(str(w.message) for w in told if w.category is DataWarning)
    assert "ignored column" not in notes  # the frame's row labels are not a column
    for words in ("--sort: the rows were newest first", "--ohlc-from-close",
                  "imported anyway (--force)"):
        assert words in notes
    assert int(ds["n_trades"].notnull().sum()) == 2
    clear_caches()
    stored = open_bars(tmp_path / "r.zarr.bars", "AAPL", "1h")
    expected = frame["Adj Close"].drop(frame.index[-6])
    np.testing.assert_array_equal(stored["close"].values[:, 0], expected)
    np.testing.assert_array_equal(stored["open"].values[:, 0], expected)


def test_import_options_are_refused_with_a_store(store):
    with pytest.raises(SpecError, match="price_column= apply to bars in memory"):
        barsweep.sweep(store, "ema_cross", SMALL, symbols="BTCUSDT", timeframe="1h",
                       price_column="adj_close")
