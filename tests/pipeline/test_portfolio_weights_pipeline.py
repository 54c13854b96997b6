"""A portfolio run with ``weight: inverse_vol``, ``priority`` and ``vol_lookback`` as a
grid axis: every cell of the store is :func:`barsweep.engine.sweep_portfolio`
called directly on the same bars; and the section's refusals."""

import json

import numpy as np
import pytest
import xarray as xr
import yaml

from barsweep.datasets import open_bars, periods_per_year
from barsweep.engine import METRICS, get_strategy, sweep_portfolio
from barsweep.errors import SpecError
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.model import parse_spec

pytestmark = pytest.mark.slow
MEMBERS = ["AAA", "BBB", "CCC"]
EXECUTION = dict(fill="next_open", fees=0.001)
GRID = {"fast": [3, 8], "slow": [20, 30], "vol_lookback": [10, 40]}
SECTION = {"symbols": MEMBERS, "weight": "inverse_vol", "max_positions": 2,
           "priority": ["CCC", "AAA"]}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = tmp_path_factory.mktemp("bars")
    for seed, symbol in enumerate(MEMBERS):
        assert main(["data", "synth", "--symbol", symbol, "--timeframe", "1h", "--bars", "500",
                     "--seed", str(seed + 31), "--store", str(store)]) == 0
    return store


def spec_dict(store, out, **more):
    return {"data": {"store": str(store), "symbols": MEMBERS, "timeframe": "1h"},
            "strategy": "ema_cross", "grid": GRID, "execution": EXECUTION,
            "portfolio": SECTION, "run": {"out": str(out), "block_size": 4}, **more}


def test_lookback_axis_run_equals_sweep_portfolio(store, tmp_path):
    out = tmp_path / "w.zarr"
    (tmp_path / "w.yaml").write_text(yaml.safe_dump(spec_dict(store, out)))
    assert main(["run", str(tmp_path / "w.yaml"), "--no-progress", "--cluster",
                 "threads"]) == 0
    ds = xr.open_zarr(out, consolidated=False).load()
    assert ds["sharpe"].dims == ("symbol", "fast", "slow", "vol_lookback")
    assert ds["vol_lookback"].values.tolist() == [10, 40]
    assert json.loads(ds.attrs["portfolio"])["priority"] == ["CCC", "AAA"]
    bars = {s: {k: open_bars(store, s, "1h")[k].values.ravel() for k in
                ("open", "high", "low", "close")} for s in MEMBERS}
    mesh = np.meshgrid(*GRID.values(), indexing="ij")
    params = {k: m.ravel() for k, m in zip(GRID, mesh, strict=True)}
    lookback = params.pop("vol_lookback")
    metrics, per_symbol = sweep_portfolio(get_strategy("ema_cross"), bars, params, EXECUTION,
                                          periods_per_year("1h"), max_positions=2,
                                          weight="inverse_vol", lookback=lookback,
                                          priority=["CCC", "AAA"])
    shape = tuple(len(v) for v in GRID.values())
    for k, name in enumerate(METRICS):
        np.testing.assert_array_equal(ds[name].values[0], metrics[:, k].reshape(shape),
                                      err_msg=name)
    np.testing.assert_array_equal(ds["member_n_trades"].values,
                                  per_symbol[:, :, 0].T.reshape(len(MEMBERS), *shape))
    # the axis matters
    assert not np.array_equal(ds["total_return"].values[0, ..., 0],
                              ds["total_return"].values[0, ..., 1])
    assert ds["member_n_trades"].values.sum() > 20


@pytest.mark.parametrize(("more", "match"), [
    ({"portfolio": {**SECTION, "weight": "risk_parity"}}, r"portfolio\.weight: .*inverse_vol"),
    ({"portfolio": {**SECTION, "priority": "high_vol"}}, r"portfolio\.priority: .*low_vol"),
    ({"portfolio": {**SECTION, "priority": ["CCC", "XYZ"]}},
     r"portfolio\.priority: \['XYZ'\] are not members"),
    ({"portfolio": {**SECTION, "vol_lookback": 20}},
     r"portfolio\.vol_lookback: .*also a grid axis"),
    ({"portfolio": {**SECTION, "weight": "equal"}}, r"grid\.vol_lookback: vol_lookback is read by"),
    ({"grid": {**GRID, "vol_lookback": [1, 5]}}, r"grid\.vol_lookback: .*integers >= 2"),
    ({"grid": {"fast": [3], "slow": [20]},
      "portfolio": {"weight": "equal", "vol_lookback": 20}},
     r"portfolio\.vol_lookback: vol_lookback is"),
])
def test_spec_refusals(store, tmp_path, more, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(spec_dict(store, tmp_path / "x.zarr", **more))


def test_spec_accepts_data_driven_priority(store, tmp_path):
    spec = parse_spec(spec_dict(store, tmp_path / "x.zarr", grid={"fast": [3], "slow": [20]},
                                portfolio={"weight": "equal", "priority": "momentum",
                                           "vol_lookback": 60}))
    assert spec.portfolio.priority == "momentum" and spec.portfolio.vol_lookback == 60
