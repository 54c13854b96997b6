"""Limit entry orders through the pipeline: ``execution.entry_order`` with its offset and
validity as the grid axes ``entry_offset`` and ``valid_bars``, run on a cluster, stored as
dims of the store, ranked, and equal to the engine's sweep of the same combos; bad
settings refused in one line before any store exists."""

import json

import numpy as np
import pytest
import yaml

import barsweep
from barsweep.datasets import open_bars
from barsweep.engine import METRICS, Execution, get_strategy, sweep_block
from barsweep.pipeline.cli import main


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("orders") / "bars"
    assert main(["data", "synth", "--symbol", "AAA", "--timeframe", "1h", "--bars", "1200",
                 "--seed", "8", "--store", str(path)]) == 0
    return path


def spec_file(tmp_path, store, execution, grid, out):
    spec = {"data": {"store": str(store), "symbols": ["AAA"], "timeframe": "1h"},
            "strategy": "ema_cross", "execution": execution,
            "grid": {"fast": [4, 8], "slow": [30, 60], **grid}, "run": {"out": str(out)}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_order_axes_are_dims_of_the_store_and_rank(tmp_path, store, capsys):
    out = tmp_path / "orders.zarr"
    execution = {"fill": "next_open", "direction": "both", "fees": 0.001, "stop_loss": 0.03,
                 "entry_order": {"type": "limit"}}
    grid = {"entry_offset": [0.0, 0.005, 0.02], "valid_bars": [1, 6]}
    spec = spec_file(tmp_path, store, execution, grid, out)
    assert main(["run", str(spec), "--cluster", "local", "--workers", "2", "--quiet"]) == 0
    ds = barsweep.open_results(out)
    assert ds["sharpe"].dims == ("symbol", "fast", "slow", "entry_offset", "valid_bars")
    np.testing.assert_array_equal(ds["entry_offset"].values, [0.0, 0.005, 0.02])
    assert ds["valid_bars"].dtype.kind == "i"
    bars = open_bars(str(store), "AAA", "1h").isel(symbol=0)
    bars = {k: bars[k].values for k in ("open", "high", "low", "close")}
    f, s, o, v = np.meshgrid([4, 8], [30, 60], grid["entry_offset"], grid["valid_bars"],
                             indexing="ij")
    ours = sweep_block(get_strategy("ema_cross"), bars,
                       dict(fast=f.ravel(), slow=s.ravel(), entry_offset=o.ravel(),
                            valid_bars=v.ravel()),
                       Execution(**execution), float(ds.attrs["periods_per_year"]))
    for k, name in enumerate(METRICS):
        np.testing.assert_array_equal(ds[name].values[0].ravel(), ours[:, k], err_msg=name)
    assert len(np.unique(ds["total_return"].values)) > 8  # the axes change the results
    capsys.readouterr()
    assert main(["rank", str(out), "--by", "sharpe", "--top", "3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 3 and all("entry_offset" in r and "valid_bars" in r for r in rows)


@pytest.mark.parametrize("execution, grid, words", [
    ({"entry_order": {"type": "limit"}}, {},
     "execution.entry_order: type limit needs an offset"),
    ({}, {"entry_offset": [0.01]}, "grid.entry_offset: the entry order is type market"),
    ({"entry_order": {"type": "stop", "offset": -0.01}}, {},
     "execution.entry_order.offset: Input should be greater than or equal to 0"),
    ({"entry_order": {"type": "limit", "offset": 0.01}}, {"valid_bars": [0, 3]},
     "grid.valid_bars: valid_bars must be a whole number of bars >= 1"),
])
def test_bad_orders_are_refused_before_any_store(tmp_path, store, capsys, execution, grid,
                                                 words):
    out = tmp_path / "never.zarr"
    spec = spec_file(tmp_path, store, execution, grid, out)
    capsys.readouterr()
    assert main(["run", str(spec), "--quiet"]) != 0
    err = capsys.readouterr().err.strip()
    assert words in err and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.parametrize("mode", [
    {"walk_forward": {"train": 400, "test": 200}},
    {"search": {"method": "random", "budget": 10, "seed": 3}},
    {"search": {"method": "halving", "budget": 24, "seed": 3, "eta": 2, "rungs": 2}},
])
def test_order_axes_in_walk_forward_and_search_stores(tmp_path, store, mode):
    """The order's axes (offsets in ATRs here) are parameters like any other: a
    walk-forward store has its windows; a searched store its drawn combos, those run on
    every bar equal to the engine's run of them on the same bars."""
    out = tmp_path / "orders.zarr"
    execution = {"fill": "next_open", "direction": "both", "fees": 0.001,
                 "entry_order": {"type": "stop", "unit": "atr"}, "atr_window": 10}
    grid = {"entry_offset": [0.0, 0.5, 1.5], "valid_bars": [1, 3, 8]}
    spec = yaml.safe_load(spec_file(tmp_path, store, execution, grid, out).read_text())
    spec.update(mode)
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert main(["run", str(tmp_path / "spec.yaml"), "--cluster", "local", "--workers", "2",
                 "--quiet"]) == 0
    ds = barsweep.open_results(out)
    assert "entry_offset" in ds.variables and "valid_bars" in ds.variables
    assert np.isfinite(ds["sharpe"].values).any()
    if "walk_forward" in mode:
        assert "window" in ds.dims
        return
    assert np.unique(ds["entry_offset"].values).size > 1
    full = ds.isel(symbol=0).where(ds["bars_run"].isel(symbol=0) == 1200, drop=True)
    bars = open_bars(str(store), "AAA", "1h").isel(symbol=0)
    bars = {k: bars[k].values for k in ("open", "high", "low", "close")}
    params = {k: full[k].values for k in ("fast", "slow", "entry_offset", "valid_bars")}
    ours = sweep_block(get_strategy("ema_cross"), bars, params, Execution(**execution),
                       float(ds.attrs["periods_per_year"]))
    assert len(ours) > 0
    np.testing.assert_array_equal(full["sharpe"].values, ours[:, METRICS.index("sharpe")])
