"""A search in walk-forward windows, end to end on real stores: each window's train
bars searched (random, sobol, halving), the combos its last rung ran also tested on
the window's test bars; each equals its definition: a random search whose budget draws
every valid combo equals the grid's walk-forward store bit for bit (on a LocalCluster),
and so does `barsweep walkforward` on it; a halving search's rungs run the most recent
bars of each window's train sample and promote per window, its last rung's train and
test cells the grid's bit for bit; a killed block resumed gives the same store."""

import json

import numpy as np
import pytest
import xarray as xr
import yaml
from helpers.compare import assert_same_store

from barsweep.datasets import open_bars
from barsweep.engine import METRICS, Execution, get_strategy, sweep_block
from barsweep.pipeline.cli import main
from barsweep.pipeline.run.order import rank_order
from barsweep.pipeline.run.results import store_attrs

pytestmark = pytest.mark.slow
N_BARS = 3_000
GRID = {"fast": {"start": 2, "stop": 30, "step": 2}, "slow": {"start": 10, "stop": 100, "step": 5}}
WALK = {"train": 1_200, "test": 400}
EXECUTION = {"fees": 0.001}
FAST, SLOW = np.arange(2, 31, 2), np.arange(10, 101, 5)
N_VALID = int((FAST[:, None] < SLOW[None, :]).sum())
HALVING = {"method": "halving", "budget": 150, "seed": 3, "eta": 3, "rungs": 2}


@pytest.fixture(scope="module")
def bars(tmp_path_factory):
    store = tmp_path_factory.mktemp("bars")
    for symbol, seed in (("AAA", 5), ("BBB", 9)):
        assert main(["data", "synth", "--symbol", symbol, "--timeframe", "1h", "--bars",
                     str(N_BARS), "--seed", str(seed), "--store", str(store)]) == 0
    return store


def run(folder, bars, name, *args, **more):
    out = folder / f"{name}.zarr"
    spec = folder / f"{name}.yaml"
    spec.write_text(yaml.safe_dump({
        "data": {"store": str(bars), "symbols": ["AAA", "BBB"], "timeframe": "1h"},
        "strategy": "ema_cross", "grid": GRID, "constraints": ["fast < slow"],
        "execution": EXECUTION, "walk_forward": WALK, "run": {"out": str(out)}, **more}))
    assert main(["run", str(spec), "--no-progress", *args]) == 0
    return out, spec


@pytest.fixture(scope="module")
def grid_walk(bars, tmp_path_factory):
    return run(tmp_path_factory.mktemp("grid"), bars, "grid", "--cluster", "threads")[0]


@pytest.fixture(scope="module")
def halving_walk(bars, tmp_path_factory):
    return run(tmp_path_factory.mktemp("halving"), bars, "halving", "--cluster", "threads",
               search=HALVING)


def cells_of(grid, search):
    """The grid store's cells at the search store's combos: (symbol, window, sample,
    combo) as the search store holds them."""
    at = dict(fast=xr.DataArray(search["fast"].values, dims="combo"),
              slow=xr.DataArray(search["slow"].values, dims="combo"))
    return grid.sel(at)


@pytest.mark.parametrize("method", ["random", "sobol"])
def test_a_search_drawing_every_combo_is_the_grids_walk_forward(bars, grid_walk, tmp_path,
                                                                method, capsys):
    out, _ = run(tmp_path, bars, method, "--cluster", "local", "--workers", "2",
                 search={"method": method, "budget": N_VALID, "seed": 1})
    s = xr.open_zarr(out, consolidated=False).load()
    g = xr.open_zarr(grid_walk, consolidated=False).load()
    assert s["sharpe"].dims == ("symbol", "window", "sample", "combo")
    assert s.sizes["combo"] == N_VALID and s.sizes["window"] == g.sizes["window"] == 4
    for name in ("train_start_bar", "train_end_bar", "test_start_bar", "test_end_bar",
                 "train_start", "test_end"):
        assert s[name].values.tobytes() == g[name].values.tobytes(), name
    same = cells_of(g, s)
    for m in METRICS:
        assert s[m].values.tobytes() == same[m].transpose(*s[m].dims).values.tobytes(), m
    assert (s["rung"].values == 0).all()
    assert (s["bars_run"].values[:, :, 0] == 1_200).all()
    assert (s["bars_run"].values[:, :, 1] == 400).all()
    # walkforward chooses the same combos and stitches the same curve
    for symbol in ("AAA", "BBB"):
        capsys.readouterr()
        assert main(["walkforward", str(out), "--symbol", symbol, "--json"]) == 0
        ours = json.loads(capsys.readouterr().out)
        assert main(["walkforward", str(grid_walk), "--symbol", symbol, "--json"]) == 0
        theirs = json.loads(capsys.readouterr().out)
        assert ours["stitched"] == theirs["stitched"]
        for a, b in zip(ours["windows"], theirs["windows"], strict=True):
            assert (a["fast"], a["slow"]) == (b["fast"], b["slow"])
            assert {k: v for k, v in a.items() if k.startswith(("train_", "test_"))} == {
                k: v for k, v in b.items() if k.startswith(("train_", "test_"))}


def test_halving_searches_each_windows_train_bars(halving_walk, grid_walk, bars):
    out, _ = halving_walk
    h = xr.open_zarr(out, consolidated=False).load()
    g = xr.open_zarr(grid_walk, consolidated=False).load()
    attrs = store_attrs(out)
    assert attrs["rung_sizes"] == [225, 75]
    assert attrs["n_evaluated"] == 300 * 2 * 4  # per window of each symbol
    same = cells_of(g, h)
    strategy = get_strategy("ema_cross")
    for s, symbol in enumerate(("AAA", "BBB")):
        close = open_bars(bars, symbol, "1h")
        columns = {k: close[k].values.ravel() for k in ("open", "high", "low", "close")}
        for w in range(4):
            a, b, c, d = (int(h[n].values[w]) for n in ("train_start_bar", "train_end_bar",
                                                        "test_start_bar", "test_end_bar"))
            rung = h["rung"].values[s, w, 0]
            last = np.flatnonzero(rung == 1)
            first = np.flatnonzero(rung == 0)
            assert len(last) == 75 and len(first) == 150
            # the last rung: the window's train and test cells, the grid's bit for bit
            for m in METRICS:
                ours = h[m].values[s, w][:, last]
                theirs = same[m].transpose(*h[m].dims).values[s, w][:, last]
                assert ours.tobytes() == theirs.tobytes(), (symbol, w, m)
            assert np.isnan(h["sharpe"].values[s, w, 1, first]).all()  # never tested
            # rung 0: the most recent 400 bars of the window's train bars, and promoted
            # in this window: its 75 best rung-0 sharpes (rank's order), whatever the
            # other windows promoted
            assert (a, c, d - c) == (w * 400, b, 400)
            assert (h["bars_run"].values[s, w, 0, first] == 400).all()
            drawn = {"fast": h["fast"].values, "slow": h["slow"].values}
            direct = sweep_block(strategy, columns, drawn, Execution(**EXECUTION), 8760.0,
                                 spans=[(b - 400, b)])[0]
            for m in METRICS:
                k = list(METRICS).index(m)
                assert direct[first, k].tobytes() == h[m].values[s, w, 0, first].tobytes(), m
            score = direct[:, list(METRICS).index("sharpe")]
            ran = np.flatnonzero(~np.isnan(score))
            order = rank_order(score[ran], False, idle_wins=False,
                               ruined=direct[ran, list(METRICS).index("ruined")] == 1.0,
                               traded=direct[ran, list(METRICS).index("n_trades")] > 0.0)
            assert sorted(ran[order[:75]].tolist()) == last.tolist()


def test_a_halving_store_is_read_by_walkforward_trades_and_report(halving_walk, tmp_path,
                                                                 capsys):
    out, _ = halving_walk
    h = xr.open_zarr(out, consolidated=False).load()
    capsys.readouterr()
    assert main(["walkforward", str(out), "--symbol", "BBB", "--json"]) == 0
    wf = json.loads(capsys.readouterr().out)
    for row in wf["windows"]:  # chosen among the combos the last rung ran
        picked = (h["fast"].values == row["fast"]) & (h["slow"].values == row["slow"])
        assert h["rung"].values[1, row["window"], 0][picked].tolist() == [1.0]
        best = np.nanmax(np.where(h["rung"].values[1, row["window"], 0] == 1,
                                  h["sharpe"].values[1, row["window"], 0], np.nan))
        assert row["train_sharpe"] == best
    assert main(["trades", str(out), "--symbol", "BBB", "--window", "2", "--sample",
                 "test"]) == 0
    assert "window 2 test, rank 1 by sharpe" in capsys.readouterr().out
    dropped = np.flatnonzero(h["rung"].values[1, 2, 0] == 0)[0]
    params = f"fast={int(h['fast'].values[dropped])},slow={int(h['slow'].values[dropped])}"
    assert main(["trades", str(out), "--symbol", "BBB", "--window", "2", "--params",
                 params]) == 0  # its train cell: rung 0's bars
    assert main(["trades", str(out), "--symbol", "BBB", "--window", "2", "--sample", "test",
                 "--params", params]) == 2
    assert "did not run window 2's test sample" in capsys.readouterr().err
    assert main(["report", str(out), "--out", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "Walk-forward of AAA" in page and "Walk-forward of BBB" in page
    capsys.readouterr()
    assert main(["rank", str(out), "--top", "3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["rung"] == 1 for r in rows)


def test_a_halving_walk_forward_resumes_to_the_same_store(halving_walk, bars, tmp_path):
    import zarr

    out, spec = halving_walk
    again, path = run(tmp_path, bars, "again", "--cluster", "threads", search=HALVING)
    group = zarr.open_group(str(again), mode="r+")
    done = group["done"][:]
    last = len(done) - 1  # a block of the last rung: BBB's last window, last chunk
    group["done"][last] = 0  # as if its worker died before writing: its cells lost
    chunk = group["sharpe"].chunks[-1]
    lo = (group["sharpe"].shape[-1] - 1) // chunk * chunk
    ran = np.flatnonzero(group["reach"][1, 3, 0, lo:] == 1) + lo
    assert len(ran)
    for name in ("sharpe", "rung", "bars_run"):
        values = group[name][1, 3]
        values[:, ran] = np.nan
        group[name][1, 3] = values
    assert main(["run", str(path), "--no-progress", "--cluster", "threads", "--resume"]) == 0
    assert_same_store(again, out)
