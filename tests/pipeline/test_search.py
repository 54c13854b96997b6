"""Search over grids too big to enumerate: the draw (distinct, within the constraints,
O(budget), reproducible), and real runs on real clusters (a halving search's last rung
equal to the grid's metrics bit for bit, the same store whatever the cluster or block
size, a SIGKILLed search resumed to the same store, rank on a search store)."""

import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from helpers.compare import assert_same_store

from barsweep.engine import METRICS
from barsweep.errors import SpecError
from barsweep.pipeline.analysis.rank import rank
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.expr import parse_expr
from barsweep.pipeline.config.grid import Grid
from barsweep.pipeline.config.model import parse_spec
from barsweep.pipeline.config.search import draw, rung_sizes, rung_span
from barsweep.pipeline.run.results import store_attrs

N_BARS = 4_000
CLI = [sys.executable, "-m", "barsweep.pipeline.cli"]
GRID = {"fast": {"start": 2, "stop": 60, "step": 1}, "slow": {"start": 10, "stop": 300, "step": 1}}
HALVING = {"method": "halving", "budget": 1500, "seed": 7, "eta": 3, "rungs": 3}


def big_grid(n_axes=6, n=1000):
    return Grid(tuple((f"p{i}", np.arange(n)) for i in range(n_axes)),
                (parse_expr("p0 < p1"), parse_expr("p2 + p3 < 1500")))


@pytest.mark.parametrize("method", ["random", "sobol"])
def test_draws_are_distinct_valid_and_depend_only_on_the_seed(method):
    grid = big_grid()  # 10^18 combos
    drawn = draw(grid, 20_000, 3, method)
    assert len(drawn) == 20_000 and np.all(np.diff(drawn) > 0)  # distinct, ascending
    p = np.unravel_index(drawn, grid.shape)
    assert np.all(p[0] < p[1]) and np.all(p[2] + p[3] < 1500)
    assert np.array_equal(drawn, draw(grid, 20_000, 3, method))
    assert not np.array_equal(drawn, draw(grid, 20_000, 4, method))


def test_a_draw_takes_memory_of_the_budget_not_of_the_space():
    grid = big_grid(5, 1000)  # 10^15 combos
    tracemalloc.start()
    draw(grid, 100_000, 1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * 2 ** 20, peak  # ~100 B per combo drawn; the box would be 8 PB


def test_random_draws_are_uniform_over_the_valid_combos():
    grid = Grid((("a", np.arange(10)), ("b", np.arange(10))), (parse_expr("a < b"),))
    counts = np.zeros(100)
    for seed in range(400):
        counts[draw(grid, 5, seed)] += 1
    valid = np.flatnonzero(grid.mask(grid.combos((slice(0, 10), slice(0, 10)))))
    assert counts[np.setdiff1d(np.arange(100), valid)].sum() == 0
    assert counts[valid].min() > 0.5 * counts[valid].mean()  # 45 cells, ~44 each


def test_a_draw_larger_than_the_valid_combos_is_refused():
    grid = Grid((("a", np.arange(5)), ("b", np.arange(4))), (parse_expr("a < b"),))
    assert len(draw(grid, 6, 0)) == 6
    with pytest.raises(SpecError, match="holds 6 valid combos, fewer than the 7"):
        draw(grid, 7, 0)


def test_rungs_halve_the_combos_and_multiply_the_bars():
    assert rung_sizes(1000, 3, 4) == (1000, 334, 112, 38)
    assert [rung_span(27_000, r, 3, 4) for r in range(4)] == [
        (26_000, 27_000), (24_000, 27_000), (18_000, 27_000), None]


def test_promotion_keeps_the_best_of_each_symbol_as_rank_orders_them(tmp_path):
    import zarr

    from barsweep.pipeline.run.search import promote

    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    sharpe = np.array([[0.5, 2.0, np.nan, 1.0, 3.0, -1.0, 2.5, np.inf],
                       [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]])
    ran = np.array([[0, 0, 0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0, 0, 0]], dtype=float)
    for name, values in {"sharpe": sharpe, "rung": ran,
                         "ruined": np.array([[0, 0, 0, 0, 1, 0, 0, 0], [0] * 8]),
                         "n_trades": np.ones((2, 8)),
                         "reach": np.full((2, 8), np.nan)}.items():
        group.create_array(name, data=np.asarray(values, dtype=float))
    promote(str(tmp_path / "s.zarr"), 1, 3, "sharpe")
    reach = zarr.open_group(str(tmp_path / "s.zarr"))["reach"][:]
    # symbol 0: among rung 0's combos, NaN never, ruined (3.0) last, inf after finite
    # ones; combo 6 ran rung 1 already and takes no part
    assert np.flatnonzero(reach[0] == 1).tolist() == [0, 1, 3]
    assert np.flatnonzero(reach[1] == 1).tolist() == [5, 6, 7]
    assert store_attrs_raw(tmp_path / "s.zarr")["promoted"] == 1


def store_attrs_raw(path):
    import zarr

    return dict(zarr.open_group(str(path), mode="r").attrs)


def spec_dict(store, out, run=None, **more):
    return {"data": {"store": str(store), "symbols": ["AAA", "BBB"], "timeframe": "1h"},
            "strategy": "ema_cross", "grid": GRID, "constraints": ["fast < slow"],
            "execution": {"fees": 0.001}, "run": {**(run or {}), "out": str(out)}, **more}


def test_the_spec_refuses_a_search_without_budget(tmp_path):
    with pytest.raises(SpecError, match="needs a budget"):
        parse_spec(spec_dict(tmp_path, tmp_path / "o", search={"method": "random"}))
    searched = parse_spec(spec_dict(tmp_path, tmp_path / "o", search=HALVING,
                                    walk_forward={"train": 1000, "test": 500}))
    assert searched.walk_forward is not None  # test_search_walkforward.py runs it
    huge = {f"p{i}": {"start": 1, "stop": 100, "step": 1} for i in range(5)}
    rule = {"name": "r", "rule": {"entry": "sma(close, p0) > sma(close, p1) and "
                                           "rsi(close, p2) < p3",
                                  "exit": "rsi(close, p2) > p4"}}
    base = {**spec_dict(tmp_path, tmp_path / "o"), "grid": huge, "constraints": [],
            "strategy": rule}
    with pytest.raises(SpecError, match="or search it: search.method random"):
        parse_spec(base)
    spec = parse_spec({**base, "search": {"method": "random", "budget": 1000}})
    assert spec.param_grid.size == 100 ** 5


@pytest.fixture(scope="module")
def bars(tmp_path_factory):
    store = tmp_path_factory.mktemp("bars")
    for symbol, seed in (("AAA", 5), ("BBB", 9)):
        assert main(["data", "synth", "--symbol", symbol, "--bars", str(N_BARS), "--seed",
                     str(seed), "--store", str(store)]) == 0
    return store


def run(tmp_path, bars, name, *args, **more) -> Path:
    out = tmp_path / f"{name}.zarr"
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(yaml.safe_dump(spec_dict(bars, out, **more)))
    assert main(["run", str(spec), "--no-progress", *args]) == 0
    return out


@pytest.fixture(scope="module")
def grid_store(bars, tmp_path_factory):
    return run(tmp_path_factory.mktemp("grid"), bars, "grid", "--cluster", "threads")


@pytest.fixture(scope="module")
def halving_store(bars, tmp_path_factory):
    return run(tmp_path_factory.mktemp("halving"), bars, "halving", "--workers", "2",
               search=HALVING)


def test_the_last_rung_equals_the_grid_bit_for_bit(halving_store, grid_store):
    h, g = (xr.open_zarr(p, consolidated=False)
                                   for p in (halving_store, grid_store))
    sizes = store_attrs(halving_store)["rung_sizes"]
    assert sizes == [4500, 1500, 500] and dict(h.sizes)["combo"] == 4500
    for s, symbol in enumerate(h["symbol"].values):
        rung = h["rung"].values[s]
        # promoted: at most a third of each rung, never a combo whose sharpe is NaN (no
        # trade in the rung's bars), the last rung whole
        counts = [int((rung == r).sum()) for r in range(3)]
        assert sum(counts) == 4500 and counts[2] == 500 and counts[1] + counts[2] <= 1500
        last = np.flatnonzero(rung == 2)
        at = dict(fast=xr.DataArray(h["fast"].values[last]),
                  slow=xr.DataArray(h["slow"].values[last]))
        assert np.all(h["bars_run"].values[s][last] == N_BARS)
        for m in METRICS:
            ours = h[m].values[s][last]
            theirs = g[m].sel(symbol=symbol).sel(at).values
            assert ours.tobytes() == theirs.tobytes(), (symbol, m)
        assert h["bars_run"].values[s][rung == 0].max() < N_BARS / 3
        # promoted: the best third of each rung by sharpe, per symbol (here none ruined
        # and every one traded, so the order is sharpe's)
        reach = np.nan_to_num(h["reach"].values[s])
        assert int((reach == 2).sum()) == 500
        # and it found a combo in the grid's top 1% (on these bars a short window's
        # losers do well over every bar too: the promotion is held by its own test)
        every = g["sharpe"].sel(symbol=symbol).values.ravel()
        every = every[np.isfinite(every)]
        assert np.mean(every < np.nanmax(h["sharpe"].values[s][last])) > 0.99


def test_the_same_seed_gives_the_same_store_on_any_cluster_and_block_size(
        bars, halving_store, tmp_path):
    threads = run(tmp_path, bars, "threads", "--cluster", "threads", search=HALVING)
    assert_same_store(threads, halving_store)
    small = run(tmp_path, bars, "small", "--cluster", "threads", search=HALVING,
                run={"block_size": 500})
    a, b = (xr.open_zarr(p, consolidated=False) for p in (small, halving_store))
    for name in (*METRICS, "rung", "bars_run", "fast", "slow"):
        assert a[name].values.tobytes() == b[name].values.tobytes(), name


def test_rank_ranks_the_last_rung_with_the_parameters(halving_store):
    frame = rank(halving_store, top=5)
    assert list(frame.columns[:4]) == ["symbol", "combo", "fast", "slow"]
    assert set(frame["rung"]) == {2} and set(frame["bars_run"]) == {N_BARS}
    first = rank(halving_store, top=5, rung=0)
    assert set(first["rung"]) == {0} and first["bars_run"].max() < N_BARS
    with pytest.raises(SpecError, match="ran rungs 0 to 2"):
        rank(halving_store, rung=3)


def test_a_search_sigkilled_then_resumed_equals_an_undisturbed_one(bars, halving_store,
                                                                   tmp_path, capsys):
    out = tmp_path / "killed.zarr"
    spec = tmp_path / "killed.yaml"
    spec.write_text(yaml.safe_dump(spec_dict(bars, out, search=HALVING)))
    proc = subprocess.Popen([*CLI, "run", str(spec), "--no-progress", "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    t0 = time.monotonic()
    while (store_attrs(out) or {}).get("promoted", 0) < 1:  # killed in rung 1
        assert proc.poll() is None and time.monotonic() - t0 < 240, proc.communicate()
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert store_attrs(out)["complete"] is False
    assert main(["run", str(spec), "--resume", "--workers", "2", "--no-progress"]) == 0
    assert_same_store(out, halving_store)


def test_views_of_a_search_store(halving_store, tmp_path, capsys):
    assert main(["plot", "heatmap", str(halving_store), "--symbol", "AAA", "--x", "fast",
                 "--y", "slow", "--out", str(tmp_path / "h.png")]) == 0
    from barsweep.pipeline.analysis.plots import metric_grid
    ds = xr.open_zarr(halving_store, consolidated=False)
    grid = metric_grid(ds, "sharpe", "fast", "slow", symbol="AAA")
    assert grid.shape == (291, 59)  # the grid's axes, not only the values drawn
    last = ds.sel(symbol="AAA")
    ran = last["rung"].values == 2
    best = np.nanmax(np.where(np.isfinite(last["sharpe"].values[ran]),
                              last["sharpe"].values[ran], np.nan))
    assert np.nanmax(grid.values) == best
    assert int(np.isfinite(grid.values).sum()) == int(
        np.isfinite(last["sharpe"].values[ran]).sum())  # one combo per cell
    # plot best rebuilds the best combo with backtest() and checks every metric
    assert main(["plot", "best", str(halving_store), "--out", str(tmp_path / "b.png")]) == 0
    top = rank(halving_store, top=1, symbol="BBB").iloc[0]
    assert main(["trades", str(halving_store), "--symbol", "BBB", "--params",
                 f"fast={top['fast']},slow={top['slow']}"]) == 0
    assert main(["report", str(halving_store), "--out", str(tmp_path / "r.html")]) == 0
    assert "sharpe of AAA over" in (tmp_path / "r.html").read_text()
    capsys.readouterr()
    assert main(["rank", str(halving_store), "--pbo"]) == 2
    assert "search with method random or sobol" in capsys.readouterr().err
    assert main(["rank", str(halving_store), "--pareto", "sharpe,max_drawdown",
                 "--json"]) == 0
    front = yaml.safe_load(capsys.readouterr().out)
    assert front and all(r["rung"] == 2 and "fast" in r for r in front)
    assert main(["rank", str(halving_store), "--rung", "0", "--top", "3", "--json"]) == 0
    rows = yaml.safe_load(capsys.readouterr().out)
    assert [r["rung"] for r in rows] == [0, 0, 0] and all(r["bars_run"] < 1500 for r in rows)


def test_sweep_searches_from_python_and_pbo_counts_the_random_draw(bars, tmp_path):
    from barsweep import sweep
    from barsweep.pipeline.analysis.rank import pbo_table

    ds = sweep(bars, "ema_cross", {"fast": range(2, 60), "slow": range(10, 300)},
               ["fast < slow"], symbols=["AAA"], timeframe="1h", cluster="threads",
               search={"method": "sobol", "budget": 800, "seed": 3},
               out=tmp_path / "s.zarr")
    assert dict(ds.sizes)["combo"] == 800 and ds.attrs["search_method"] == "sobol"
    assert ds.attrs["n_evaluated"] == 800
    (labels, result), = pbo_table(ds)
    assert labels == {"symbol": "AAA"} and result.n_combos == int(
        np.isfinite(ds["sharpe"].values).sum())


def test_a_rung_header_says_how_many_combos_were_promoted_and_why_not_all(
        bars, tmp_path, capsys):
    """A combo with no Sharpe ratio in a rung (no trade on its few bars) is never
    promoted: the next rung's header says how many of its size were, and why, counted
    in the store."""
    rsi = {"period": {"start": 10, "stop": 60, "step": 1},
           "lower": {"start": 2, "stop": 40, "step": 1}, "upper": [70, 80]}
    spec = {**spec_dict(bars, tmp_path / "rsi.zarr"), "strategy": "rsi", "grid": rsi,
            "constraints": [], "data": {"store": str(bars), "symbols": ["AAA"],
                                        "timeframe": "1h"},
            "search": {"method": "halving", "budget": 450, "seed": 3, "eta": 3, "rungs": 3}}
    path = tmp_path / "rsi.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["run", str(path), "--no-progress", "--cluster", "threads"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith("rung ")]
    ds = xr.open_zarr(tmp_path / "rsi.zarr", consolidated=False)
    sizes = store_attrs(tmp_path / "rsi.zarr")["rung_sizes"]
    reach = np.nan_to_num(ds["reach"].values[0])
    left = reach == 0  # ran rung 0 only: its metrics are rung 0's
    idle = int((left & (ds["n_trades"].values[0] == 0)).sum())
    promoted = int((reach >= 1).sum())
    assert promoted == sizes[0] - idle < sizes[1]  # the case the header must say
    assert int((left & np.isnan(ds["sharpe"].values[0])).sum()) == idle  # all untraded
    first, second = (b - a for a, b in (rung_span(N_BARS, r, 3, 3) for r in (0, 1)))
    assert lines[0] == f"rung 1 of 3: {sizes[0]:,} combos per symbol on the last {first} bars"
    assert lines[1] == (f"rung 2 of 3: {promoted:,} of {sizes[1]:,} combos per symbol "
                        f"promoted ({idle:,} made no trade in rung 1, so had no sharpe to "
                        f"rank by) on the last {second:,} bars")


def test_rank_rung_sets_buy_and_hold_over_the_rungs_bars(halving_store, bars, capsys):
    """`rank --rung 0` shows each symbol's buy and hold over the bars rung 0 ran (its
    last bars_run), beside combos measured on those bars, not over every bar."""
    from barsweep.datasets import open_bars
    from barsweep.engine import backtest
    from barsweep.pipeline.analysis.buyhold import buy_and_hold, groups_of

    ds = xr.open_zarr(halving_store, consolidated=False)
    # BBB: on AAA's last bars no combo trades in rung 0, so none ranks there
    frame = rank(halving_store, top=3, rung=0, symbol="BBB")
    ran = int(frame["bars_run"].iloc[0])
    assert ran < N_BARS
    held = buy_and_hold(ds, groups_of(frame))
    assert held["bars_run"].tolist() == [ran]
    close = open_bars(bars, "BBB", "1h").isel(symbol=0)["close"].values
    alone = backtest({k: open_bars(bars, "BBB", "1h").isel(symbol=0)[k].values[-ran:]
                      for k in ("open", "high", "low", "close")}, "buy_and_hold",
                     ppy=ds.attrs["periods_per_year"], fees=0.001)
    assert held["total_return"].iloc[0] == alone.metrics["total_return"]
    assert held["total_return"].iloc[0] != pytest.approx(close[-1] / close[0] - 1, rel=0.01)
    assert main(["rank", str(halving_store), "--rung", "0", "--symbol", "BBB",
                 "--top", "3"]) == 0
    table = capsys.readouterr().out.splitlines()
    hold = [line for line in table if line.startswith("-")]
    assert len(hold) == 1 and "buy&hold" in hold[0] and f"{ran:,}" in hold[0].split()


def test_a_rung_header_says_each_symbols_bars_when_they_differ():
    """Symbols of different lengths run rung 0 on different bars (a share of each
    symbol's): the header says each symbol's, not the first's for all."""
    from barsweep.pipeline.config.search import SearchSpec, rung_spans
    from barsweep.pipeline.run.search import SearchPlan, rung_bars

    search = SearchSpec(method="halving", budget=100, eta=3, rungs=3)
    plan = SearchPlan(np.arange(4), {}, 4, (4, 2, 1),
                      (rung_spans(search, 3270), rung_spans(search, 2148)), 2, 0, 252.0, "")
    assert rung_bars(plan, 0, ["AAPL", "GOOG"]) == "the last 364 (AAPL), 239 (GOOG) bars"
    assert rung_bars(plan, 2, ["AAPL", "GOOG"]) == "every bar"
    same = SearchPlan(np.arange(4), {}, 4, (4, 2, 1), (rung_spans(search, 900),) * 2, 2, 0,
                      252.0, "")
    assert rung_bars(same, 1, ["A", "B"]) == "the last 300 bars"
