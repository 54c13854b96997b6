"""A sized sweep through the pipeline: ``execution.size`` with its value as the grid axis
``size_value``, run on a cluster, stored as a dim of the store, ranked, and equal to the
engine's sweep of the same combos."""

import json

import numpy as np
import pytest
import yaml

import barsweep
from barsweep.datasets import open_bars
from barsweep.engine import METRICS, Execution, get_strategy, sweep_block
from barsweep.errors import SpecError
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.model import parse_spec


def test_a_size_axis_is_a_dim_of_the_store_and_ranks(tmp_path, capsys):
    store = tmp_path / "bars"
    assert main(["data", "synth", "--symbol", "AAA", "--timeframe", "1h", "--bars", "1200",
                 "--seed", "6", "--store", str(store)]) == 0
    out = tmp_path / "sized.zarr"
    execution = {"fill": "close", "fees": 0.001, "size": {"type": "percent"}, "lot": 0.01}
    spec = {"data": {"store": str(store), "symbols": ["AAA"], "timeframe": "1h"},
            "strategy": "ema_cross", "execution": execution,
            "grid": {"fast": [4, 8], "slow": [30, 60], "size_value": [0.2, 0.6, 1.0]},
            "run": {"out": str(out)}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert main(["run", str(tmp_path / "spec.yaml"), "--cluster", "local", "--workers", "2",
                 "--quiet"]) == 0
    ds = barsweep.open_results(out)
    assert ds["sharpe"].dims == ("symbol", "fast", "slow", "size_value")
    np.testing.assert_array_equal(ds["size_value"].values, [0.2, 0.6, 1.0])
    bars = open_bars(str(store), "AAA", "1h").isel(symbol=0)
    bars = {k: bars[k].values for k in ("open", "high", "low", "close")}
    f, s, v = np.meshgrid([4, 8], [30, 60], [0.2, 0.6, 1.0], indexing="ij")
    ours = sweep_block(get_strategy("ema_cross"), bars,
                       dict(fast=f.ravel(), slow=s.ravel(), size_value=v.ravel()),
                       Execution(**execution), float(ds.attrs["periods_per_year"]))
    for k, name in enumerate(METRICS):
        np.testing.assert_array_equal(ds[name].values[0].ravel(), ours[:, k], err_msg=name)
    capsys.readouterr()
    assert main(["rank", str(out), "--by", "total_return", "--top", "3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 3 and all("size_value" in r for r in rows)


def test_a_leverage_axis_is_a_dim_of_the_store(tmp_path):
    store = tmp_path / "bars"
    assert main(["data", "synth", "--symbol", "AAA", "--timeframe", "1h", "--bars", "800",
                 "--seed", "4", "--store", str(store)]) == 0
    out = tmp_path / "levered.zarr"
    execution = {"fill": "close", "direction": "both", "fees": 0.001, "borrow_rate": 0.1,
                 "maintenance_margin": 0.25}
    spec = {"data": {"store": str(store), "symbols": ["AAA"], "timeframe": "1h"},
            "strategy": "ema_cross", "execution": execution,
            "grid": {"fast": [4, 8], "slow": [30], "leverage": [1.0, 2.0, 4.0]},
            "run": {"out": str(out)}}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert main(["run", str(tmp_path / "spec.yaml"), "--cluster", "local", "--workers", "2",
                 "--quiet"]) == 0
    ds = barsweep.open_results(out)
    assert ds["sharpe"].dims == ("symbol", "fast", "slow", "leverage")
    bars = open_bars(str(store), "AAA", "1h").isel(symbol=0)
    bars = {k: bars[k].values for k in ("open", "high", "low", "close")}
    f, s, v = np.meshgrid([4, 8], [30], [1.0, 2.0, 4.0], indexing="ij")
    ours = sweep_block(get_strategy("ema_cross"), bars,
                       dict(fast=f.ravel(), slow=s.ravel(), leverage=v.ravel()),
                       Execution(**execution), float(ds.attrs["periods_per_year"]))
    np.testing.assert_array_equal(ds["total_return"].values[0].ravel(),
                                  ours[:, METRICS.index("total_return")])
    # the best combo rebuilt from the store (its stored spec says leverage: 1.0 beside
    # the axis), its metrics checked against the store's
    from barsweep.pipeline.analysis.rebuild import best_backtest

    best = best_backtest(out, by="total_return")
    assert best.metrics["total_return"] == float(ds["total_return"].max())


@pytest.mark.parametrize("execution, grid, words", [
    ({}, {"leverage": [0.5, 2.0]}, "grid.leverage: leverage must be >= 1"),
    ({"leverage": 2.0}, {"leverage": [1.0, 3.0]}, "execution.leverage: it is also a grid axis"),
    ({"size": {"type": "percent"}}, {"leverage": [1.0, 3.0], "size_value": [0.5, 2.0]},
     "grid.size_value: type percent takes a fraction of the cash up to the combo's leverage"),
])
def test_a_bad_leverage_axis_is_refused_by_the_spec(tmp_path, execution, grid, words):
    spec = {"data": {"store": str(tmp_path), "symbols": ["AAA"], "timeframe": "1h"},
            "strategy": "ema_cross", "grid": {"fast": [3], "slow": [9], **grid},
            "execution": execution}
    with pytest.raises(SpecError) as err:
        parse_spec(spec)
    assert words in str(err.value), str(err.value)
