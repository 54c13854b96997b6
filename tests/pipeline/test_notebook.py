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
from barsweep.pipeline.cluster import connect

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
