"""Symbols of different lengths: each over its own bars (default), or the common range
(``data.align: inner``); through a real LocalCluster, checked against backtest()."""

import pytest
import xarray as xr
import yaml

from barsweep.datasets import open_bars, periods_per_year
from barsweep.engine import METRICS, backtest
from barsweep.errors import SpecError
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.model import load_spec

pytestmark = pytest.mark.slow
LENGTHS = {"LONG": 900, "SHORT": 500}
EXECUTION = dict(fill="close", fees=0.001)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = tmp_path_factory.mktemp("bars")
    for seed, (symbol, n) in enumerate(LENGTHS.items()):
        assert main(["data", "synth", "--symbol", symbol, "--timeframe", "1h", "--bars", str(n),
                     "--seed", str(seed + 3), "--store", str(store)]) == 0
    return store


def spec_file(tmp_path, store, align=None):
    data = {"store": str(store), "symbols": list(LENGTHS), "timeframe": "1h"}
    if align:
        data["align"] = align
    spec = {"data": data, "strategy": "ema_cross",
            "grid": {"fast": [3, 5, 8], "slow": [20, 30]}, "execution": EXECUTION,
            "run": {"out": str(tmp_path / "r.zarr")}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize("align", [None, "inner"])
def test_symbols_of_different_lengths(store, tmp_path, align):
    spec = spec_file(tmp_path, store, align)
    assert main(["run", str(spec), "--workers", "2", "--no-progress"]) == 0
    ds = xr.open_zarr(tmp_path / "r.zarr", consolidated=False)
    expected = [900, 500] if align is None else [500, 500]
    assert ds["n_bars"].values.tolist() == expected
    for s, symbol in enumerate(LENGTHS):
        bars = open_bars(store, symbol, "1h")
        bars = bars.isel(time=slice(0, expected[s]))
        for i, fast in enumerate([3, 5, 8]):
            one = backtest(bars, "ema_cross", dict(fast=fast, slow=30),
                           ppy=periods_per_year("1h"), **EXECUTION)
            stored = {m: float(ds[m].values[s, i, 1]) for m in METRICS}
            assert one.metrics == pytest.approx(stored, rel=0, abs=0, nan_ok=True)


def test_align_is_validated(store, tmp_path):
    spec = spec_file(tmp_path, store, "outer")
    with pytest.raises(SpecError, match=r"data\.align"):
        load_spec(spec)
