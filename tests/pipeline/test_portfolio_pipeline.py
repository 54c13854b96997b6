"""A portfolio sweep end to end: its spec, a real LocalCluster run whose every cell is
:func:`barsweep.engine.sweep_portfolio` called directly on the same bars,
``max_positions`` as a grid axis, ``rank`` on the store, and the same store from a
threads cluster."""

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
LENGTHS = {"AAA": 700, "BBB": 650, "CCC": 600, "DDD": 680}
MEMBERS = ["AAA", "BBB", "CCC"]
EXECUTION = dict(fill="close", fees=0.001)
GRID = {"fast": [3, 5, 8], "slow": [20, 30], "max_positions": [1, 2, 3]}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = tmp_path_factory.mktemp("bars")
    for seed, (symbol, n) in enumerate(LENGTHS.items()):
        assert main(["data", "synth", "--symbol", symbol, "--timeframe", "1h", "--bars", str(n),
                     "--seed", str(seed + 11), "--store", str(store)]) == 0
    return store


def spec_dict(store, out, **more):
    return {"data": {"store": str(store), "symbols": list(LENGTHS), "timeframe": "1h"},
            "strategy": "ema_cross", "grid": GRID, "constraints": ["fast < slow"],
            "execution": EXECUTION, "portfolio": {"symbols": MEMBERS},
            "run": {"out": str(out), "block_size": 4}, **more}


def run(tmp_path, store, name, *flags):
    out = tmp_path / f"{name}.zarr"
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec_dict(store, out)))
    assert main(["run", str(path), "--no-progress", *flags]) == 0
    return xr.open_zarr(out, consolidated=False).load()


@pytest.fixture(scope="module")
def local(tmp_path_factory, store):
    return run(tmp_path_factory.mktemp("local"), store, "local", "--cluster", "local",
               "--workers", "2")


def member_bars(store):
    """The members' common bars (the first 600), by column."""
    return {s: {k: open_bars(store, s, "1h")[k].values.ravel()[:600] for k in
                ("open", "high", "low", "close")} for s in MEMBERS}


def direct(store):
    """sweep_portfolio on the members' common bars (the first 600), every combo."""
    bars = member_bars(store)
    mesh = np.meshgrid(*GRID.values(), indexing="ij")
    params = {k: m.ravel() for k, m in zip(GRID, mesh, strict=True)}
    kmax = params.pop("max_positions")
    metrics, per_symbol = sweep_portfolio(get_strategy("ema_cross"), bars, params, EXECUTION,
                                          periods_per_year("1h"), max_positions=kmax)
    shape = tuple(len(v) for v in GRID.values())
    return metrics.reshape(*shape, -1), per_symbol.reshape(*shape, len(MEMBERS), -1)


def test_local_cluster_equals_sweep_portfolio(local, store):
    ds = local
    assert ds["symbol"].values.tolist() == ["portfolio"]
    assert ds["member"].values.tolist() == MEMBERS
    assert ds["n_bars"].values.tolist() == [600]
    assert json.loads(ds.attrs["portfolio"])["symbols"] == MEMBERS
    assert list(ds.attrs["members"]) == MEMBERS
    assert ds["sharpe"].dims == ("symbol", "fast", "slow", "max_positions")
    assert ds["member_n_trades"].dims == ("member", "fast", "slow", "max_positions")
    assert ds["seg_sum_r"].dims == ("symbol", "segment", "fast", "slow", "max_positions")
    metrics, per_symbol = direct(store)
    for k, name in enumerate(METRICS):
        np.testing.assert_array_equal(ds[name].values[0], metrics[..., k], err_msg=name)
    for k, name in enumerate(("member_n_trades", "member_exposure")):
        np.testing.assert_array_equal(ds[name].values, np.moveaxis(per_symbol[..., k], -1, 0),
                                      err_msg=name)
    # the axis matters: one position at a time trades differently from three
    assert not np.array_equal(ds["total_return"].values[0, ..., 0],
                              ds["total_return"].values[0, ..., 2])


def test_threads_cluster_writes_the_same_store(local, tmp_path, store):
    threads = run(tmp_path, store, "threads", "--cluster", "threads")
    for name in (*METRICS, "member_n_trades", "member_exposure"):
        np.testing.assert_array_equal(threads[name].values, local[name].values, err_msg=name)


def test_rank_a_portfolio_store(local, tmp_path, store, capsys):
    out = tmp_path / "r.zarr"
    local.drop_encoding().to_zarr(out, zarr_format=3, consolidated=False)
    capsys.readouterr()
    assert main(["rank", str(out), "--by", "dsr", "--where", "max_positions >= 2",
                 "--top", "3", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 3 and {r["symbol"] for r in rows} == {"portfolio"}
    assert all(r["max_positions"] >= 2 for r in rows)
    best = max(rows, key=lambda r: r["dsr"])
    assert rows[0]["dsr"] == best["dsr"]


@pytest.mark.parametrize(("more", "match"), [
    ({"portfolio": {"rebalance": "1H"}}, r"portfolio\.rebalance: a rebalance period is"),
    ({"portfolio": {"symbols": ["AAA"]}}, r"portfolio\.symbols"),
    ({"portfolio": {"rebalance": "1M"}, "grid": {**GRID, "rebalance_days": [1]}},
     r"portfolio\.rebalance: rebalance is also a grid axis \(rebalance_days\)"),
    ({"grid": {**GRID, "rebalance_days": [1], "rebalance_weeks": [1]}},
     r"grid\.rebalance_weeks: one rebalance axis at most"),
    ({"grid": {**GRID, "rebalance_months": [-1, 1]}},
     r"grid\.rebalance_months: .*integers >= 0"),
    ({"portfolio": {"max_positions": 2}}, r"portfolio\.max_positions: .*also a grid axis"),
    ({"portfolio": None}, r"grid\.max_positions: .*add a portfolio section"),
    ({"execution": {"direction": "both"}, "portfolio": {"symbols": MEMBERS, "rebalance": "1M"}},
     r"execution: a rebalanced portfolio trades long only"),
    ({"execution": {"size": {"type": "percent", "value": 0.5}},
      "portfolio": {"symbols": MEMBERS, "rebalance": "1W"}},
     r"execution: a rebalance re-targets each position to its portfolio\.weight"),
    ({"execution": {"lot": 1.0}, "grid": {**GRID, "rebalance_days": [5]}},
     r"execution: a rebalance re-targets each position"),
    ({"grid": {**GRID, "size_value": [0.5], "rebalance_weeks": [1]},
      "execution": {"size": {"type": "percent"}}},
     r"grid\.size_value: a rebalance re-targets each position"),
    ({"execution": {"entry_order": {"type": "limit", "offset": 0.01}}},
     r"execution: a portfolio enters at market only"),
    ({"execution": {"size": {"type": "risk", "value": 0.01, "atr": 2.0}}},
     r"execution: a portfolio's risk size measures its stop by stop_loss"),
])
def test_spec_refusals(store, tmp_path, more, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(spec_dict(store, tmp_path / "x.zarr", **more))


def test_buy_and_hold_row_is_equal_weight(local, store):
    from barsweep.pipeline.analysis.buyhold import buy_and_hold, portfolio_hold
    from barsweep.pipeline.analysis.rebuild import stored_spec

    spec, ppy = stored_spec(local)
    closes = np.stack([open_bars(store, s, "1h")["close"].values.ravel()[:600]
                       for s in MEMBERS])
    hold = portfolio_hold(local, spec, ppy, {"fill": "close"})  # no fees: exact
    assert hold["total_return"] == pytest.approx((closes[:, -1] / closes[:, 0]).mean() - 1,
                                                 rel=1e-12)
    assert hold["exposure"] == 1.0
    row = buy_and_hold(local).iloc[0]
    assert row["symbol"] == "portfolio" and row["n_trades"] == len(MEMBERS)


def test_report_heatmap_and_refusals(local, tmp_path, capsys):
    out = tmp_path / "r.zarr"
    local.drop_encoding().to_zarr(out, zarr_format=3, consolidated=False)
    assert main(["report", str(out), "--out", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "buy&amp;hold" in page and "Best combo of portfolio" in page
    assert page.count("<img") == 3  # two heatmaps and the best combo
    assert main(["plot", "heatmap", str(out), "--x", "fast", "--y", "max_positions",
                 "--out", str(tmp_path / "h.png")]) == 0
    capsys.readouterr()
    assert main(["rank", str(out), "--pbo"]) == 0


def test_best_combo_rebuilt_plotted_and_its_trades(local, tmp_path, store, capsys):
    """best_backtest of a portfolio store is backtest_portfolio of the ranked combo on
    the members' common bars (metrics equal to the store's, checked); plot best and
    trades work on it; a store whose values differ is refused."""
    from barsweep.engine.backtest.portfolio import backtest_portfolio
    from barsweep.errors import MismatchError
    from barsweep.pipeline.analysis.rank import rank
    from barsweep.pipeline.analysis.rebuild import best_backtest

    out = tmp_path / "r.zarr"
    local.drop_encoding().to_zarr(out, zarr_format=3, consolidated=False)
    result = best_backtest(out, by="sharpe")
    row = rank(local, by="sharpe", top=1).iloc[0]
    bars = member_bars(store)
    direct = backtest_portfolio(bars, "ema_cross", dict(fast=row["fast"], slow=row["slow"]),
                                ppy=periods_per_year("1h"),
                                max_positions=int(row["max_positions"]), **EXECUTION)
    assert result.metrics == direct.metrics and result.metrics["sharpe"] == row["sharpe"]
    np.testing.assert_array_equal(result.equity.to_numpy(), direct.equity.to_numpy())
    assert list(result.shares.columns) == MEMBERS and len(result.equity) == 600
    capsys.readouterr()
    assert main(["plot", "best", str(out), "--out", str(tmp_path / "b.png")]) == 0
    assert (tmp_path / "b.png").stat().st_size > 20_000
    assert main(["trades", str(out), "--rank", "2"]) == 0
    text = capsys.readouterr().out
    assert "portfolio of AAA, BBB, CCC ema_cross" in text and "rank 2 by sharpe" in text
    assert "buy and hold" in text and " symbol " in text
    assert {line.split()[1] for line in text.splitlines()
            if line[:1] == " " and line.split()[0].isdigit()} <= set(MEMBERS)
    bad = local.copy()
    bad["member_exposure"] = bad["member_exposure"] * 0.5
    with pytest.raises(MismatchError, match="exposure"):
        best_backtest(bad)


def test_python_sweep_takes_a_portfolio(store):
    import barsweep

    ds = barsweep.sweep(store, "ema_cross", {"fast": [3, 5], "slow": [20]},
                        execution=EXECUTION, symbols=MEMBERS, timeframe="1h",
                        portfolio={"max_positions": 2}, cluster="threads")
    assert ds["symbol"].values.tolist() == ["portfolio"]
    assert ds["member_exposure"].sizes["member"] == len(MEMBERS)
    metrics, _ = direct(store)
    np.testing.assert_array_equal(ds["sharpe"].values[0, :, 0],
                                  metrics[:2, 0, 1, METRICS.index("sharpe")])


def test_stop_axis_equals_sweep_portfolio(store, tmp_path):
    """``stop_loss`` as a grid axis and ``trailing_stop`` as an execution setting: every
    cell of the run is :func:`sweep_portfolio`'s with those stops on each position."""
    grid = {"fast": [3, 5], "slow": [20, 30], "stop_loss": [0.004, 0.02]}
    execution = {**EXECUTION, "trailing_stop": 0.03}
    out = tmp_path / "stops.zarr"
    path = tmp_path / "stops.yaml"
    path.write_text(yaml.safe_dump(spec_dict(store, out, grid=grid, execution=execution)))
    assert main(["run", str(path), "--no-progress", "--cluster", "threads"]) == 0
    ds = xr.open_zarr(out, consolidated=False).load()
    assert ds["sharpe"].dims == ("symbol", "fast", "slow", "stop_loss")
    bars = member_bars(store)
    mesh = np.meshgrid(*grid.values(), indexing="ij")
    params = {k: m.ravel() for k, m in zip(grid, mesh, strict=True)}
    metrics, per_symbol = sweep_portfolio(get_strategy("ema_cross"), bars, params, execution,
                                          periods_per_year("1h"))
    for k, name in enumerate(METRICS):
        np.testing.assert_array_equal(ds[name].values[0].ravel(), metrics[:, k], err_msg=name)
    np.testing.assert_array_equal(ds["member_n_trades"].values.reshape(len(MEMBERS), -1),
                                  per_symbol[:, :, 0].T)
    # the axis matters: a 0.4% stop holds the positions for less time than a 2% one
    exposure = ds["exposure"].values[0]
    assert np.all(exposure[..., 0] < exposure[..., 1])


def test_memory_cut_blocks_and_resume_write_the_same_store(local, tmp_path, store):
    """A budget that fits one value of ``fast`` per block (the table counted once per
    member) cuts the blocks; a block lost then resumed comes back the same."""
    import zarr

    from barsweep.pipeline.run.plan import chunk_cost
    from barsweep.pipeline.run.results import open_results

    spec = parse_spec(spec_dict(store, tmp_path / "m.zarr"))
    cost = chunk_cost(spec, spec.param_grid, 600)
    single = parse_spec({**spec_dict(store, tmp_path / "x.zarr"), "portfolio": None,
                         "grid": {"fast": [3, 5, 8], "slow": [20, 30]},
                         "analysis": {"pbo_segments": 0}})
    # the members' tables: three symbols' bars a row
    assert cost((1, 2, 3)) > chunk_cost(single, single.param_grid, 600)((1, 2))
    out = tmp_path / "m.zarr"
    spec_file = tmp_path / "m.yaml"
    spec_file.write_text(yaml.safe_dump(spec_dict(store, out, run={
        "out": str(out), "block_size": 18, "memory_per_block": cost((1, 2, 3))})))
    assert main(["run", str(spec_file), "--no-progress", "--cluster", "threads"]) == 0
    group = zarr.open_group(str(out), mode="r+")
    chunks = group["sharpe"].chunks
    assert chunks[0] == 1 and np.prod(chunks[1:]) < 18  # cut for memory
    assert group["member_exposure"].chunks == (len(MEMBERS), *chunks[1:])
    first = tuple(slice(0, c) for c in chunks[1:])  # block 0, lost
    group["done"][0] = 0
    group["sharpe"][(0, *first)] = np.nan
    partial = open_results(out, partial=True)  # block 0's values hidden while it is pending
    assert np.isnan(partial["member_n_trades"].values[(slice(None), *first)]).all()
    assert np.isfinite(partial["member_n_trades"].values).sum() == len(MEMBERS) * (
        18 - np.prod(chunks[1:]))
    assert main(["run", str(spec_file), "--no-progress", "--cluster", "threads",
                 "--resume"]) == 0
    ds = xr.open_zarr(out, consolidated=False).load()
    for name in (*METRICS, "member_n_trades", "member_exposure"):
        np.testing.assert_array_equal(ds[name].values, local[name].values, err_msg=name)


def test_rule_portfolio_on_a_local_cluster(tmp_path, store):
    """A rule strategy, next_open fills, max_positions in the section: every cell is
    sweep_portfolio's on the same bars."""
    out = tmp_path / "rule.zarr"
    spec = {"data": {"store": str(store), "symbols": MEMBERS, "timeframe": "1h"},
            "strategy": {"name": "rsi_rule", "rule": {"entry": "rsi(close, period) < lower",
                                                      "exit": "rsi(close, period) > 70"}},
            "grid": {"period": [7, 14], "lower": [30, 40]},
            "execution": {"fill": "next_open", "fees": 0.0005},
            "portfolio": {"max_positions": 2}, "run": {"out": str(out), "block_size": 2}}
    (tmp_path / "rule.yaml").write_text(yaml.safe_dump(spec))
    assert main(["run", str(tmp_path / "rule.yaml"), "--no-progress", "--cluster", "local",
                 "--workers", "2"]) == 0
    ds = xr.open_zarr(out, consolidated=False).load()
    bars = member_bars(store)
    dims = ds["sharpe"].dims[1:]  # the rule's parameters, in the store's order
    mesh = np.meshgrid(*(spec["grid"][d] for d in dims), indexing="ij")
    metrics, per_symbol = sweep_portfolio(parse_spec(spec).strategy_def, bars,
                                          {d: m.ravel() for d, m in zip(dims, mesh, strict=True)},
                                          spec["execution"], periods_per_year("1h"),
                                          max_positions=2)
    for k, name in enumerate(METRICS):
        np.testing.assert_array_equal(ds[name].values[0].ravel(), metrics[:, k], err_msg=name)
    np.testing.assert_array_equal(ds["member_exposure"].values.reshape(len(MEMBERS), -1),
                                  per_symbol[:, :, 1].T)


def test_rebalance_in_the_section(local, tmp_path, store):
    """``portfolio.rebalance: 1D`` on 1h bars: every cell is sweep_portfolio's with the
    same period on the same bars (their times), and differs from never rebalancing."""
    out = tmp_path / "rb.zarr"
    spec = spec_dict(store, out, portfolio={"symbols": MEMBERS, "rebalance": "1D"})
    (tmp_path / "rb.yaml").write_text(yaml.safe_dump(spec))
    assert main(["run", str(tmp_path / "rb.yaml"), "--no-progress", "--cluster",
                 "threads"]) == 0
    ds = xr.open_zarr(out, consolidated=False).load()
    assert json.loads(ds.attrs["portfolio"])["rebalance"] == "1D"
    bars = member_bars(store)
    time = open_bars(store, MEMBERS[0], "1h")["time"].values[:600].astype("datetime64[ns]")
    for b in bars.values():
        b["time"] = time.astype(np.int64)
    mesh = np.meshgrid(*GRID.values(), indexing="ij")
    params = {k: m.ravel() for k, m in zip(GRID, mesh, strict=True)}
    kmax = params.pop("max_positions")
    metrics, per_symbol = sweep_portfolio(get_strategy("ema_cross"), bars, params, EXECUTION,
                                          periods_per_year("1h"), max_positions=kmax,
                                          rebalance="1D")
    shape = tuple(len(v) for v in GRID.values())
    for k, name in enumerate(METRICS):
        np.testing.assert_array_equal(ds[name].values[0], metrics[:, k].reshape(shape),
                                      err_msg=name)
    np.testing.assert_array_equal(ds["member_n_trades"].values,
                                  np.moveaxis(per_symbol[:, :, 0].reshape(*shape, -1), -1, 0))
    changed = ds["total_return"].values != local["total_return"].values
    assert changed.mean() > 0.5


def test_rebalance_as_a_grid_axis(local, tmp_path, store):
    """``grid.rebalance_days: [0, 1, 2]``: the store's coordinate reads 0, 1, 2; every
    cell is sweep_portfolio's with never, ``1D`` and ``2D``; the 0 cells are the
    unrebalanced run's (``max_positions: 3`` of three members is no limit)."""
    out = tmp_path / "rg.zarr"
    grid = {"fast": [3, 5, 8], "slow": [20, 30], "rebalance_days": [0, 1, 2]}
    spec = spec_dict(store, out, grid=grid)
    (tmp_path / "rg.yaml").write_text(yaml.safe_dump(spec))
    assert main(["run", str(tmp_path / "rg.yaml"), "--no-progress", "--cluster",
                 "threads"]) == 0
    ds = xr.open_zarr(out, consolidated=False).load()
    assert ds["rebalance_days"].values.tolist() == [0, 1, 2]
    assert ds["sharpe"].dims == ("symbol", "fast", "slow", "rebalance_days")
    bars = member_bars(store)
    time = open_bars(store, MEMBERS[0], "1h")["time"].values[:600].astype("datetime64[ns]")
    for b in bars.values():
        b["time"] = time.astype(np.int64)
    mesh = np.meshgrid(*grid.values(), indexing="ij")
    params = {k: m.ravel() for k, m in zip(grid, mesh, strict=True)}
    periods = [f"{d}D" if d else None for d in params.pop("rebalance_days")]
    metrics, _ = sweep_portfolio(get_strategy("ema_cross"), bars, params, EXECUTION,
                                 periods_per_year("1h"), rebalance=periods)
    shape = tuple(len(v) for v in grid.values())
    for k, name in enumerate(METRICS):
        np.testing.assert_array_equal(ds[name].values[0], metrics[:, k].reshape(shape),
                                      err_msg=name)
    np.testing.assert_array_equal(ds["total_return"].values[0, ..., 0],
                                  local["total_return"].values[0, ..., 2])
    assert (ds["total_return"].values[0, ..., 1] != ds["total_return"].values[0, ..., 0]).all()


def test_check_says_the_portfolio(store, tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(spec_dict(store, tmp_path / "c.zarr")))
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "18 combos of the portfolio (one account)" in out
    assert "AAA (600 bars), BBB (600 bars), CCC (600 bars)" in out and "DDD" not in out


def test_account_settings_and_axes_on_a_local_cluster(store, tmp_path, capsys):
    """Shorts, leverage as a grid axis, borrowing, a maintenance margin and a percent size
    whose value is a grid axis, run on a real LocalCluster: every cell is
    :func:`sweep_portfolio`'s; the best combo is rebuilt from the store (its metrics
    checked against the store's by ``best_backtest``) and ``trades`` lists its shorts."""
    from barsweep.pipeline.analysis.rebuild import best_backtest

    grid = {"fast": [3, 5], "slow": [20, 30], "size_value": [0.2, 0.5],
            "leverage": [1.0, 2.0]}  # the store's order of the dims
    execution = {**EXECUTION, "direction": "both", "borrow_rate": 0.1,
                 "maintenance_margin": 0.25, "size": {"type": "percent"}}
    out = tmp_path / "account.zarr"
    path = tmp_path / "account.yaml"
    path.write_text(yaml.safe_dump(spec_dict(store, out, grid=grid, execution=execution)))
    assert main(["run", str(path), "--no-progress", "--cluster", "local", "--workers",
                 "2"]) == 0
    ds = xr.open_zarr(out, consolidated=False).load()
    assert ds["sharpe"].dims == ("symbol", "fast", "slow", "size_value", "leverage")
    bars = member_bars(store)
    mesh = np.meshgrid(*grid.values(), indexing="ij")
    params = {k: m.ravel() for k, m in zip(grid, mesh, strict=True)}
    metrics, _ = sweep_portfolio(get_strategy("ema_cross"), bars, params, execution,
                                 periods_per_year("1h"))
    for k, name in enumerate(METRICS):
        np.testing.assert_array_equal(ds[name].values[0].ravel(), metrics[:, k], err_msg=name)
    # both axes matter
    total = ds["total_return"].values[0]
    assert not np.array_equal(total[:, :, 0], total[:, :, 1])
    assert not np.array_equal(total[..., 0], total[..., 1])
    result = best_backtest(out, by="sharpe")
    assert (result.trades["side"] == -1).any() and (result.trades["side"] == 1).any()
    capsys.readouterr()
    assert main(["trades", str(out)]) == 0
    text = capsys.readouterr().out
    assert "short" in text, text[:2000]
