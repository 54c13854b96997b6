"""Annualising a run: bars per year from the bars unless the spec sets data.year_days
(what a user sweeping daily stocks from a CSV does)."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import yaml
from helpers.runs import synth

from barsweep.datasets import open_bars
from barsweep.engine import backtest
from barsweep.pipeline.cli import main

pytest.importorskip("bokeh_sampledata")
from golden.cases import stocks_csv  # noqa: E402

GRID = {"fast": [5, 10, 20], "slow": [50, 100]}


@pytest.fixture(scope="module")
def stock_store(tmp_path_factory):
    """AAPL and MSFT daily bars imported from CSV files by ``barsweep data import``."""
    root = tmp_path_factory.mktemp("stocks")
    frame = pd.read_csv(stocks_csv())
    for symbol in ("AAPL", "MSFT"):
        one = frame[frame["Ticker"] == symbol].sort_values("Date").drop(columns="Ticker")
        one.to_csv(root / f"{symbol}.csv", index=False)
        assert main(["data", "import", str(root / f"{symbol}.csv"), "--symbol", symbol,
                     "--timeframe", "1d", "--store", str(root / "bars")]) == 0
    return root / "bars"


def run(tmp_path, capsys, store, symbols, timeframe="1d", **data):
    spec = {"data": {"store": str(store), "symbols": symbols, "timeframe": timeframe, **data},
            "strategy": "ema_cross", "grid": GRID, "run": {"out": str(tmp_path / "r.zarr")}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    capsys.readouterr()
    rc = main(["run", str(tmp_path / "spec.yaml"), "--cluster", "threads", "--no-progress"])
    return rc, capsys.readouterr()


def test_daily_stocks_are_annualised_with_their_own_bars(tmp_path, capsys, stock_store):
    rc, out = run(tmp_path, capsys, stock_store, ["AAPL", "MSFT"])
    assert rc == 0, out.err
    assert ("annualised with 252 bars a year, from the bars (the median of 2 symbols); "
            "set data.year_days to override") in out.out
    ds = xr.open_zarr(tmp_path / "r.zarr", consolidated=False)
    assert ds.attrs["periods_per_year"] == 252.0
    assert yaml.safe_load(ds.attrs["spec"])["data"]["year_days"] == 252.0
    # every combo's annualised metrics are those of a backtest at 252 bars a year
    bars = open_bars(stock_store, "AAPL", "1d")
    for fast in GRID["fast"]:
        one = backtest(bars, "ema_cross", {"fast": fast, "slow": 100}, ppy=252)
        for name in ("cagr", "sharpe", "sortino", "volatility"):
            stored = float(ds[name].sel(symbol="AAPL", fast=fast, slow=100))
            assert stored == pytest.approx(one.metrics[name], rel=1e-12, abs=1e-15)


def test_the_spec_year_days_overrides(tmp_path, capsys, stock_store):
    rc, out = run(tmp_path, capsys, stock_store, ["AAPL"], year_days=365)
    assert rc == 0, out.err
    assert "annualised with 365 bars a year (data.year_days: 365)" in out.out
    assert xr.open_zarr(tmp_path / "r.zarr", consolidated=False).attrs["periods_per_year"] == 365


def test_a_24_7_store_keeps_365_days(tmp_path, capsys):
    store = synth(tmp_path / "bars", 3000, seed=3)
    rc, out = run(tmp_path, capsys, store, ["BTCUSDT"], timeframe="1h")
    assert rc == 0, out.err
    assert ("annualised with 8,760 bars a year, from the bars (bars on every day: 365 days "
            "of bars); set data.year_days to override") in out.out
    assert xr.open_zarr(tmp_path / "r.zarr", consolidated=False).attrs["periods_per_year"] \
        == 8760.0


def test_walk_forward_years_are_the_bars_years(tmp_path, capsys, stock_store):
    spec_wf = {"walk_forward": {"train": "2y", "test": "6M"}}
    spec = {"data": {"store": str(stock_store), "symbols": ["AAPL"], "timeframe": "1d"},
            "strategy": "ema_cross", "grid": GRID, "run": {"out": str(tmp_path / "w.zarr")},
            **spec_wf}
    (tmp_path / "wf.yaml").write_text(yaml.safe_dump(spec))
    assert main(["run", str(tmp_path / "wf.yaml"), "--cluster", "threads", "--quiet"]) == 0
    ds = xr.open_zarr(tmp_path / "w.zarr", consolidated=False)
    train = ds["train_end_bar"].values - ds["train_start_bar"].values
    test = ds["test_end_bar"].values - ds["test_start_bar"].values
    assert set(train.tolist()) == {504} and set(test.tolist()) == {126}


def test_symbols_that_disagree_on_the_year_are_refused(tmp_path, capsys, stock_store):
    # a 24/7 daily symbol beside a weekday one: no one year annualises both
    days = pd.date_range("2001-01-01", "2006-01-01", freq="D")
    close = np.linspace(10.0, 20.0, len(days))
    frame = pd.DataFrame({"time": days, "open": close, "high": close, "low": close,
                          "close": close, "volume": 1.0})
    store = tmp_path / "mixed"
    frame.to_csv(tmp_path / "C.csv", index=False)
    assert main(["data", "import", str(tmp_path / "C.csv"), "--symbol", "COIN",
                 "--timeframe", "1d", "--store", str(store)]) == 0
    one = pd.read_csv(stocks_csv())
    one[one["Ticker"] == "IBM"].drop(columns="Ticker").to_csv(tmp_path / "IBM.csv",
                                                              index=False)
    assert main(["data", "import", str(tmp_path / "IBM.csv"), "--symbol", "IBM",
                 "--timeframe", "1d", "--store", str(store)]) == 0
    rc, out = run(tmp_path, capsys, store, ["COIN", "IBM"])
    assert rc != 0
    assert out.err.count("\n") == 1 and "Traceback" not in out.err
    assert "data.year_days" in out.err and "COIN: 365" in out.err and "IBM: 252" in out.err
    assert not (tmp_path / "r.zarr").exists()
