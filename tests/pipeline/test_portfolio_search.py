"""A search over a portfolio (one account over several symbols), end to end on real
stores: each equals its definition. A random search whose budget draws every combo is
the portfolio's grid store bit for bit, the members' variables included (on a
LocalCluster), with walk-forward too; a halving search's last rung is the grid's cells
bit for bit; `rank`, `trades`, `plot best`, `walkforward` and `report` read the store
and rebuild its combos (metrics checked against the store)."""

import json

import numpy as np
import pytest
import xarray as xr
import yaml

from barsweep.pipeline.cli import main

pytestmark = pytest.mark.slow
MEMBERS = ["AAA", "BBB", "CCC"]
GRID = {"fast": {"start": 2, "stop": 20, "step": 2}, "slow": {"start": 20, "stop": 60, "step": 5},
        "max_positions": [1, 2]}
N_COMBOS = (10 * 9 - 1) * 2  # fast < slow: all but fast 20, slow 20
WALK = {"train": 300, "test": 100}
HALVING = {"method": "halving", "budget": 40, "seed": 2, "eta": 3, "rungs": 2}
VARS = ("sharpe", "total_return", "max_drawdown", "n_trades", "exposure", "alpha",
        "member_n_trades", "member_exposure")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = tmp_path_factory.mktemp("bars")
    for seed, symbol in enumerate(MEMBERS):
        assert main(["data", "synth", "--symbol", symbol, "--timeframe", "1h", "--bars",
                     "600", "--seed", str(seed + 41), "--store", str(store)]) == 0
    return store


def run(folder, store, name, *flags, **more):
    out = folder / f"{name}.zarr"
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "data": {"store": str(store), "symbols": MEMBERS, "timeframe": "1h"},
        "strategy": "ema_cross", "grid": GRID, "constraints": ["fast < slow"],
        "execution": {"fill": "close", "fees": 0.001}, "portfolio": {"symbols": MEMBERS},
        "run": {"out": str(out)}, **more}))
    assert main(["run", str(path), "--no-progress", *flags]) == 0
    return xr.open_zarr(out, consolidated=False).load(), out


@pytest.fixture(scope="module")
def grids(tmp_path_factory, store):
    folder = tmp_path_factory.mktemp("grids")
    return (run(folder, store, "grid", "--cluster", "threads")[0],
            run(folder, store, "walk", "--cluster", "threads", walk_forward=WALK)[0])


def at_combos(grid, search):
    """The grid store at the search store's combos (along ``combo``)."""
    return grid.sel({name: xr.DataArray(search[name].values, dims="combo")
                     for name in ("fast", "slow", "max_positions")})


def assert_cells_equal(search, grid, where=()):
    same = at_combos(grid, search)
    for name in VARS:
        ours = search[name].values
        theirs = same[name].transpose(*search[name].dims).values
        if len(where):
            ours, theirs = ours[..., where], theirs[..., where]
        assert ours.tobytes() == theirs.tobytes(), name


def test_a_random_search_drawing_every_combo_is_the_grid(grids, store, tmp_path):
    grid, walk = grids
    s, _ = run(tmp_path, store, "random", "--cluster", "local", "--workers", "2",
               search={"method": "random", "budget": N_COMBOS, "seed": 5})
    assert s["sharpe"].dims == ("symbol", "combo") and s["symbol"].values.tolist() == [
        "portfolio"]
    assert s["member_exposure"].dims == ("member", "combo")
    assert s.sizes["combo"] == N_COMBOS
    assert_cells_equal(s, grid)
    assert s.attrs["members"] == MEMBERS and "portfolio" in s.attrs
    w, _ = run(tmp_path, store, "random_walk", "--cluster", "threads", walk_forward=WALK,
               search={"method": "sobol", "budget": N_COMBOS, "seed": 5})
    assert w["sharpe"].dims == ("symbol", "window", "sample", "combo")
    assert w["member_n_trades"].dims == ("member", "window", "sample", "combo")
    assert_cells_equal(w, walk)


def test_a_halving_search_over_a_portfolio(grids, store, tmp_path, capsys):
    grid, _ = grids
    h, out = run(tmp_path, store, "halving", "--cluster", "threads", search=HALVING)
    sizes = h.attrs["rung_sizes"]
    assert len(sizes) == 2 and sizes[1] == -(-sizes[0] // 3)
    rung = h["rung"].values[0]
    last = np.flatnonzero(rung == 1)
    assert len(last) == sizes[1] and (h["bars_run"].values[0, last] == 600).all()
    assert (h["bars_run"].values[0, rung == 0] == 200).all()  # the last third of the bars
    assert_cells_equal(h, grid, last)
    capsys.readouterr()
    assert main(["rank", str(out), "--top", "2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["symbol"] for r in rows] == ["portfolio"] * 2 and rows[0]["rung"] == 1
    assert main(["trades", str(out)]) == 0  # rank 1 rebuilt, metrics checked
    assert "portfolio of AAA, BBB, CCC" in capsys.readouterr().out
    dropped = np.flatnonzero(rung == 0)[0]
    params = ",".join(f"{n}={int(h[n].values[dropped])}" for n in ("fast", "slow",
                                                                   "max_positions"))
    assert main(["trades", str(out), "--params", params]) == 0  # over rung 0's bars
    assert main(["plot", "best", str(out), "--out", str(tmp_path / "best.png")]) == 0
    assert (tmp_path / "best.png").stat().st_size > 10_000
    assert main(["report", str(out), "--out", str(tmp_path / "r.html")]) == 0
    assert "Best combo of portfolio" in (tmp_path / "r.html").read_text()


def test_a_halving_walk_forward_over_a_portfolio(grids, store, tmp_path, capsys):
    _, walk = grids
    h, out = run(tmp_path, store, "halving_walk", "--cluster", "threads", walk_forward=WALK,
                 search=HALVING)
    for w in range(h.sizes["window"]):
        last = np.flatnonzero(h["rung"].values[0, w, 0] == 1)
        assert len(last) == h.attrs["rung_sizes"][1]
        assert_cells_equal(h.isel(window=[w]), walk.isel(window=[w]), last)
    capsys.readouterr()
    assert main(["walkforward", str(out), "--json"]) == 0
    wf = json.loads(capsys.readouterr().out)
    assert wf["symbol"] == "portfolio" and all(row["chosen"] for row in wf["windows"])
    assert main(["trades", str(out), "--window", "1", "--sample", "test"]) == 0
    assert "window 1 test" in capsys.readouterr().out
