"""Walk-forward and PBO over a portfolio (one account over several symbols), end to end
on real stores: a LocalCluster walk-forward run whose every window's train and test
cells are :func:`barsweep.engine.sweep_portfolio` run directly over that
window's spans; ``barsweep walkforward``, ``rank`` and buy and hold on it; a resumed
store; and ``rank --pbo`` of a portfolio store equal to ``robust.pbo`` of the account's
segment sums made from the slow reference's equity curves."""

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import yaml
from helpers.portfolio_cases import CASES
from helpers.portfolio_reference import ref_portfolio

from barsweep.datasets import open_bars, periods_per_year
from barsweep.engine import METRICS, get_strategy, sweep_portfolio
from barsweep.engine.core.simulate import segment_bounds
from barsweep.pipeline.analysis import robust
from barsweep.pipeline.cli import main

pytestmark = pytest.mark.slow
LENGTHS = {"AAA": 700, "BBB": 650, "CCC": 600}
MEMBERS = list(LENGTHS)
N_BARS = 600  # the members' common bars
EXECUTION = dict(fill="close", fees=0.001)
GRID = {"fast": [3, 5, 8], "slow": [20, 30], "max_positions": [1, 2, 3]}
WALK = {"train": 300, "test": 100}
PPY = periods_per_year("1h")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = tmp_path_factory.mktemp("bars")
    for seed, (symbol, n) in enumerate(LENGTHS.items()):
        assert main(["data", "synth", "--symbol", symbol, "--timeframe", "1h", "--bars", str(n),
                     "--seed", str(seed + 31), "--store", str(store)]) == 0
    return store


def spec_dict(store, out, **more):
    return {"data": {"store": str(store), "symbols": MEMBERS, "timeframe": "1h"},
            "strategy": "ema_cross", "grid": GRID, "constraints": ["fast < slow"],
            "execution": EXECUTION, "portfolio": {"symbols": MEMBERS},
            "run": {"out": str(out), "block_size": 6}, **more}


def run(folder, store, name, *flags, **more):
    out = folder / f"{name}.zarr"
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec_dict(store, out, **more)))
    assert main(["run", str(path), "--no-progress", *flags]) == 0
    return out, path


def member_bars(store):
    return {s: {k: open_bars(store, s, "1h")[k].values.ravel()[:N_BARS] for k in
                ("open", "high", "low", "close")} for s in MEMBERS}


def grid_params():
    mesh = np.meshgrid(*GRID.values(), indexing="ij")
    params = {k: m.ravel() for k, m in zip(GRID, mesh, strict=True)}
    return params, params.pop("max_positions")


@pytest.fixture(scope="module")
def walk(tmp_path_factory, store):
    folder = tmp_path_factory.mktemp("walk")
    out, path = run(folder, store, "walk", "--cluster", "local", "--workers", "2",
                    walk_forward=WALK)
    return out, path


def test_each_window_is_sweep_portfolio_over_its_spans(walk, store):
    out, _ = walk
    ds = xr.open_zarr(out, consolidated=False).load()
    assert ds["sharpe"].dims == ("symbol", "window", "sample", "fast", "slow",
                                 "max_positions")
    assert ds["member_exposure"].dims == ("member", "window", "sample", "fast", "slow",
                                          "max_positions")
    assert "seg_sum_r" not in ds
    bounds = np.stack([ds[f"{n}_bar"].values for n in
                       ("train_start", "train_end", "test_start", "test_end")], axis=1)
    assert bounds.tolist() == [[0, 300, 300, 400], [100, 400, 400, 500], [200, 500, 500, 600]]
    spans = [span for a, b, c, d in bounds.tolist() for span in ((a, b), (c, d))]
    params, kmax = grid_params()
    metrics, per_symbol = sweep_portfolio(get_strategy("ema_cross"), member_bars(store),
                                          params, EXECUTION, PPY, max_positions=kmax,
                                          spans=spans)
    shape = tuple(len(v) for v in GRID.values())
    valid = (params["fast"] < params["slow"]).reshape(shape)
    metrics = metrics.reshape(3, 2, *shape, -1)
    per_symbol = per_symbol.reshape(3, 2, *shape, len(MEMBERS), -1)
    for k, name in enumerate(METRICS):
        np.testing.assert_array_equal(ds[name].values[0][..., valid],
                                      metrics[..., k][..., valid], err_msg=name)
    for k, name in enumerate(("member_n_trades", "member_exposure")):
        np.testing.assert_array_equal(ds[name].values[..., valid],
                                      np.moveaxis(per_symbol[..., k], -1, 0)[..., valid],
                                      err_msg=name)
    assert np.isfinite(ds["sharpe"].values[0][..., valid]).all()
    assert (ds["n_trades"].values[0][..., valid] > 0).any()
    # test windows start flat: their runs are not the train runs continued
    returns = ds["total_return"].values[0]
    assert not np.array_equal(returns[0, 1], returns[1, 0])


def test_walkforward_rank_and_buy_and_hold_on_the_store(walk, store, capsys):
    out, _ = walk
    capsys.readouterr()
    assert main(["walkforward", str(out), "--by", "sharpe", "--json"]) == 0
    wf = json.loads(capsys.readouterr().out)
    assert wf["symbol"] == "portfolio" and len(wf["windows"]) == 3
    ds = xr.open_zarr(out, consolidated=False).load()
    chosen = [w for w in wf["windows"] if w["chosen"]]
    assert len(chosen) == 3
    for w in chosen:  # the choice is the best train sharpe; its test cell the stored one
        train = ds["sharpe"].isel(symbol=0, window=w["window"]).sel(sample="train")
        assert w["train_sharpe"] == pytest.approx(float(train.max()), rel=0, abs=0)
        cell = ds.isel(symbol=0, window=w["window"]).sel(
            sample="test", fast=w["fast"], slow=w["slow"], max_positions=w["max_positions"])
        assert w["test_total_return"] == float(cell["total_return"])
    # the test windows tile bars 300..600: the stitched curve compounds their returns
    stitched = wf["stitched"]
    growth = np.prod([1 + w["test_total_return"] for w in chosen])
    assert stitched["total_return"] == pytest.approx(growth - 1, rel=1e-9)
    assert stitched["n_trades"] == sum(w["test_n_trades"] for w in chosen)
    assert stitched["n_bars"] == 300
    assert main(["rank", str(out), "--by", "dsr", "--top", "2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(r["symbol"] == "portfolio" and r["dsr"] is not None for r in rows)
    assert main(["walkforward", str(out)]) == 0
    assert "walk-forward of portfolio" in capsys.readouterr().out


def test_report_and_plot_of_a_portfolio_walk_forward(walk, tmp_path):
    out, _ = walk
    assert main(["report", str(out), "--out", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "Walk-forward of portfolio" in page and "buy and hold, same bars" in page
    assert main(["plot", "walkforward", str(out), "--out", str(tmp_path / "w.png")]) == 0
    assert (tmp_path / "w.png").stat().st_size > 10_000


def shifted(signal, start):
    """``signal`` of the whole series read from bar ``start`` on."""
    return lambda t, position, price, bar: signal(t + start, position, price, bar + start)


def test_walkforward_stitched_curve_is_each_tests_account(walk, store):
    """The stitched equity of each window equals the test run's account rebuilt by the
    slow reference on that window's bars (indicators read from the whole series)."""
    from barsweep.pipeline.analysis.walkforward import walkforward

    out, _ = walk
    wf = walkforward(out, by="total_return")
    bars = member_bars(store)
    _, _, signals_of = CASES["ema_cross"]
    level = 1.0
    for w, row in wf.windows.iterrows():
        start, end = int(row["test_start_bar"]), int(row["test_end_bar"])
        combo = dict(fast=int(row["fast"]), slow=int(row["slow"]))
        part = {s: {k: v[start:end] for k, v in b.items()} for s, b in bars.items()}
        signals = {s: shifted(signals_of(bars[s], combo), start) for s in MEMBERS}
        ref = ref_portfolio(signals, part, ppy=PPY, max_positions=int(row["max_positions"]),
                            **EXECUTION)
        got = wf.equity.to_numpy()[(start - 300):(end - 300)]
        expected = level * np.asarray(ref["equity"])
        np.testing.assert_allclose(got, expected, rtol=1e-10, err_msg=f"window {w}")
        level = expected[-1] / 10_000.0
        assert row["test_total_return"] == pytest.approx(ref["metrics"]["total_return"],
                                                         rel=1e-12)


def test_buy_and_hold_of_a_window_is_bought_at_its_start(walk, store):
    from barsweep.pipeline.analysis.buyhold import buy_and_hold, portfolio_hold
    from barsweep.pipeline.analysis.rebuild import stored_spec

    out, _ = walk
    ds = xr.open_zarr(out, consolidated=False).load()
    spec, ppy = stored_spec(ds)
    closes = np.stack([b["close"] for b in member_bars(store).values()])
    hold = portfolio_hold(ds, spec, ppy, {"fill": "close"}, (400, 500))  # no fees: exact
    assert hold["total_return"] == pytest.approx(
        (closes[:, 499] / closes[:, 400]).mean() - 1, rel=1e-12)
    rows = buy_and_hold(ds)
    assert len(rows) == 6 and set(rows["sample"]) == {"train", "test"}
    test1 = rows[(rows["window"] == 1) & (rows["sample"] == "test")].iloc[0]
    with_fees = portfolio_hold(ds, spec, ppy, {"fill": "close", "fees": 0.001}, (400, 500))
    assert test1["total_return"] == with_fees["total_return"]
    assert test1["n_trades"] == len(MEMBERS)


def test_resume_of_a_portfolio_walk_forward_store(walk, store, tmp_path):
    """Block 0 (every window of the first box) lost, then resumed: the store comes back
    equal to the LocalCluster one."""
    import zarr

    out, _ = walk
    again, path = run(tmp_path, store, "again", "--cluster", "threads", walk_forward=WALK)
    group = zarr.open_group(str(again), mode="r+")
    chunks = group["sharpe"].chunks
    assert chunks[1:3] == (3, 2)  # one block holds the three windows' train and test
    first = tuple(slice(0, c) for c in chunks[1:])
    group["done"][0] = 0
    group["sharpe"][(0, *first)] = np.nan
    group["member_exposure"][(slice(None), *first)] = np.nan
    assert main(["run", str(path), "--no-progress", "--cluster", "threads", "--resume"]) == 0
    local = xr.open_zarr(out, consolidated=False).load()
    ds = xr.open_zarr(again, consolidated=False).load()
    for name in (*METRICS, "member_n_trades", "member_exposure"):
        np.testing.assert_array_equal(ds[name].values, local[name].values, err_msg=name)


def test_pbo_of_a_portfolio_store_is_that_of_the_reference_accounts(store, tmp_path, capsys):
    n_seg = 6
    out, _ = run(tmp_path, store, "pbo", "--cluster", "threads",
                 analysis={"pbo_segments": n_seg})
    ds = xr.open_zarr(out, consolidated=False).load()
    assert ds["seg_sum_r"].dims == ("symbol", "segment", "fast", "slow", "max_positions")
    seg_n = ds["seg_n"].values[0]
    assert seg_n.tolist() == np.diff(segment_bounds(0, N_BARS, n_seg), axis=1)[:, 0].tolist()
    bars = member_bars(store)
    _, _, signals_of = CASES["ema_cross"]
    bounds = segment_bounds(0, N_BARS, n_seg)
    sum_r, sum_r2, stored_r = [], [], []
    for f in GRID["fast"]:
        for s in GRID["slow"]:
            for k in GRID["max_positions"]:
                if f >= s:
                    continue
                combo = dict(fast=f, slow=s)
                ref = ref_portfolio({m: signals_of(bars[m], combo) for m in MEMBERS}, bars,
                                    ppy=PPY, max_positions=k, **EXECUTION)
                equity = np.asarray(ref["equity"])
                r = equity / np.concatenate([[10_000.0], equity[:-1]]) - 1.0
                sum_r.append([r[a:b].sum() for a, b in bounds])
                sum_r2.append([(r[a:b] ** 2).sum() for a, b in bounds])
                stored_r.append(ds["seg_sum_r"].sel(symbol="portfolio", fast=f, slow=s,
                                                    max_positions=k).values)
    np.testing.assert_allclose(stored_r, sum_r, rtol=1e-9, atol=1e-13)
    expected = robust.pbo(np.array(sum_r), np.array(sum_r2), seg_n)
    capsys.readouterr()
    assert main(["rank", str(out), "--pbo", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["symbol"] == "portfolio"
    assert row["pbo"] == expected.pbo and row["n_splits"] == expected.n_splits == 20
    assert main(["rank", str(out), "--by", "dsr", "--top", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["dsr"] is not None


def test_a_window_of_a_portfolio_walk_forward_is_rebuilt(walk, store, tmp_path, capsys):
    """``trades --window`` and ``plot best --window`` rebuild a walk-forward portfolio's
    cell over its window's sample: backtest_portfolio over that span, equal to the store's
    cell (checked by the rebuild, and here against the slow reference's account)."""
    from barsweep.engine.backtest.portfolio import backtest_portfolio
    from barsweep.pipeline.analysis.rebuild import best_backtest
    from barsweep.pipeline.analysis.trades import combo_backtest

    out, _ = walk
    ds = xr.open_zarr(out, consolidated=False).load()
    combo = combo_backtest(out, {"fast": 5, "slow": 20, "max_positions": 2}, window=1,
                           sample="test")
    result = combo.result
    assert len(result.equity) == 100  # bars 400..500
    assert result.equity.index[0].tz_convert(None) == pd.Timestamp(ds["test_start"].values[1])
    cell = ds.sel(symbol="portfolio", window=1, sample="test", fast=5, slow=20,
                  max_positions=2)
    assert result.metrics["total_return"] == float(cell["total_return"])
    bars = member_bars(store)
    _, _, signals_of = CASES["ema_cross"]
    part = {s: {k: v[400:500] for k, v in b.items()} for s, b in bars.items()}
    signals = {s: shifted(signals_of(bars[s], dict(fast=5, slow=20)), 400) for s in MEMBERS}
    ref = ref_portfolio(signals, part, ppy=PPY, max_positions=2, **EXECUTION)
    np.testing.assert_allclose(result.equity.to_numpy(), ref["equity"], rtol=1e-10)
    assert result.trades["entry_bar"].between(400, 499).all()
    hold = result.buy_and_hold()  # the members bought at the window's first bar
    assert hold.equity.index[0] == result.equity.index[0] and len(hold.equity) == 100
    assert hold.metrics["n_trades"] == len(MEMBERS)
    # the ranking of a window's train sample: rank 1 is walkforward's choice
    best = best_backtest(out, window=2)
    train = ds["sharpe"].isel(symbol=0, window=2).sel(sample="train")
    assert best.metrics["sharpe"] == float(train.max())
    picture = tmp_path / "best.png"
    assert main(["plot", "best", str(out), "--window", "2", "--sample", "test",
                 "--out", str(picture)]) == 0
    assert picture.stat().st_size > 10_000
    capsys.readouterr()
    assert main(["trades", str(out), "--window", "0", "--sample", "test"]) == 0
    assert "window 0 test, rank 1 by sharpe" in capsys.readouterr().out
    assert main(["plot", "best", str(out), "--out", str(tmp_path / "no.png")]) == 2
    assert "--window" in capsys.readouterr().err
    full = backtest_portfolio(bars, "ema_cross", dict(fast=5, slow=20), ppy=PPY,
                              max_positions=2, span=(0, N_BARS), **EXECUTION)
    assert full.metrics == backtest_portfolio(bars, "ema_cross", dict(fast=5, slow=20),
                                              ppy=PPY, max_positions=2, **EXECUTION).metrics
