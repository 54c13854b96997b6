"""A strategy written as rules in the spec, run for real: local worker processes and a
hand-started worker with a numba cache of its own (it never saw the spec: it compiles
the rule from the task), then every analysis from the store alone; a rule refused
before any store or cluster exists."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import yaml
from helpers.processes import WITHOUT_PYTHONPATH
from helpers.runs import run_spec_file, synth

from barsweep.datasets import open_bars
from barsweep.engine import METRICS, Execution, sweep_block
from barsweep.engine.rules import compile_rule

RULE = {"entry": "rsi(close, period) < lower and close > sma(close, trend)",
        "exit": "rsi(close, period) > upper or bars_held >= hold "
                "or close < entry_price * (1 - 2 * stdev(close / close[1] - 1, 20))"}
GRID = {"period": [7, 14], "lower": [40, 45], "upper": [55.0, 65.5], "trend": [20, 50],
        "hold": [5, 12]}


def barsweep(*args, cwd: Path, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "barsweep.pipeline.cli", *map(str, args)],
                          cwd=cwd, env=env or WITHOUT_PYTHONPATH, capture_output=True,
                          text=True, timeout=600)


def spec_of(tmp_path: Path, out: str, **sections) -> dict:
    return {"data": {"store": str(tmp_path / "bars"), "symbols": ["BTCUSDT"],
                     "timeframe": "1h"},
            "strategy": {"name": "rsi_trend", "rule": RULE}, "grid": GRID,
            "execution": {"fill": "next_open", "fees": 0.001, "direction": "long"},
            "run": {"out": str(tmp_path / out), "block_size": 8}, **sections}


def direct(tmp_path: Path, spec: dict) -> np.ndarray:
    """The metrics of every combo straight from the engine, shape (n_combos, N_METRICS),
    the combos in the store's order (its dims: the spec file's grid order)."""
    bars = open_bars(str(tmp_path / "bars"), ["BTCUSDT"], "1h").isel(symbol=0)
    columns = {c: bars[c].values for c in ("open", "high", "low", "close", "volume")}
    store = xr.open_zarr(spec["run"]["out"], consolidated=False)
    dims = store["sharpe"].dims[1:]
    mesh = np.meshgrid(*(store[d].values for d in dims), indexing="ij")
    params = {k: m.ravel() for k, m in zip(dims, mesh, strict=True)}
    kinds = {k: "int" if all(float(v).is_integer() for v in vs) else "float"
             for k, vs in GRID.items()}
    strategy = compile_rule({**RULE, "name": "rsi_trend"}, kinds)
    return sweep_block(strategy, columns, params, Execution(**spec["execution"]),
                       float(store.attrs["periods_per_year"]))


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("rules")
    synth(tmp_path / "bars", 3_000, seed=3)
    spec = spec_of(tmp_path, "plain.zarr")
    run_spec_file(spec, tmp_path / "plain.yaml")
    return tmp_path, spec


def test_a_rule_spec_runs_on_workers_equal_to_the_engine(plain):
    tmp_path, spec = plain
    ds = xr.open_zarr(spec["run"]["out"], consolidated=False)
    stored = yaml.safe_load(ds.attrs["spec"])
    assert stored["strategy"]["rule"]["entry"] == RULE["entry"]
    assert stored["strategy"]["name"] == "rsi_trend"
    assert ds.attrs["strategy"] == "rsi_trend"
    assert ds.attrs["rule"] == f"entry: {RULE['entry']}\nexit: {RULE['exit']}"
    want = direct(tmp_path, spec)
    for k, name in enumerate(METRICS):
        got = ds[name].isel(symbol=0).values.reshape(-1)
        np.testing.assert_array_equal(got, want[:, k], err_msg=name)
    assert (ds["n_trades"].values > 0).mean() > 0.5
    assert ds["hold"].dtype.kind == "i" and ds["upper"].dtype.kind == "f"


def test_every_analysis_reads_a_rule_store_alone(plain, tmp_path):
    base, spec = plain
    store = spec["run"]["out"]
    (base / "bars").rename(base / "bars.moved")  # the rule itself is not looked up anywhere
    try:
        (base / "bars").symlink_to(base / "bars.moved")
        ranked = barsweep("rank", store, "--by", "sharpe", "--top", "3", "--json", cwd=tmp_path)
        assert ranked.returncode == 0, ranked.stderr
        best = json.loads(ranked.stdout)
        trades = barsweep("trades", store, "--csv", tmp_path / "trades.csv", cwd=tmp_path)
        assert trades.returncode == 0, trades.stderr
        assert "rsi_trend" in trades.stdout
        assert len((tmp_path / "trades.csv").read_text().splitlines()) > 1
        png = tmp_path / "best.png"
        assert barsweep("plot", "best", store, "--out", png, cwd=tmp_path).returncode == 0
        assert png.stat().st_size > 10_000
        page = tmp_path / "report.html"
        report = barsweep("report", store, "--out", page, cwd=tmp_path)
        assert report.returncode == 0, report.stderr
        assert "rsi_trend" in page.read_text()
        assert "exit: rsi(close, period) &gt; upper or bars_held &gt;= hold" in page.read_text()
        resumed = barsweep("run", base / "plain.yaml", "--resume", "--no-progress",
                           cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
    finally:
        (base / "bars").unlink()
        (base / "bars.moved").rename(base / "bars")
    assert best


def test_a_rule_walk_forward_runs_and_is_read_back(plain, tmp_path):
    base, _ = plain
    spec = spec_of(base, "wf.zarr", walk_forward={"train": 1000, "test": 500})
    spec["run"]["out"] = str(tmp_path / "wf.zarr")
    run_spec_file(spec, tmp_path / "wf.yaml")
    done = barsweep("walkforward", tmp_path / "wf.zarr", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    windows = json.loads(done.stdout)
    assert windows


def test_a_worker_that_never_saw_the_rule_compiles_it(plain, tmp_path, hand_started):
    base, spec = plain
    cache = tmp_path / "worker-cache"
    # compiled kernels and rule modules of the worker's own
    address = hand_started(env={"NUMBA_CACHE_DIR": str(cache)})
    remote = barsweep("run", base / "plain.yaml", "--scheduler", address, "--out",
                      tmp_path / "remote.zarr", "--no-progress", cwd=tmp_path)
    assert remote.returncode == 0, remote.stderr
    got = xr.open_zarr(tmp_path / "remote.zarr", consolidated=False)
    want = xr.open_zarr(spec["run"]["out"], consolidated=False)
    for name in METRICS:
        np.testing.assert_array_equal(got[name].values, want[name].values, err_msg=name)
    assert list(cache.glob("barsweep_rules/rule_*.py")), "the worker wrote no rule module"


def test_a_bad_rule_is_refused_before_any_store_or_cluster(tmp_path):
    synth(tmp_path / "bars", 300, seed=1)
    spec = spec_of(tmp_path, "never.zarr")
    spec["strategy"]["rule"] = {**RULE, "entry": "rsi(close, perod) < lower"}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(spec))
    for command in ("run", "check"):
        done = barsweep(command, path, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert "strategy.rule.entry: unknown name 'perod' (did you mean 'period'?)" in lines[0]
        assert lines[-2].strip() == "rsi(close, perod) < lower"
        assert lines[-1].strip() == "^^^^^"
        assert lines[-1].index("^") == lines[-2].index("perod")
    assert not (tmp_path / "never.zarr").exists()


@pytest.mark.parametrize(("entry", "grid", "said", "marked"), [
    ("close > open * (1 + stop_loss) and close > sma(close, n)", {"stop_loss": [0.02, 0.05]},
     "strategy.rule.entry: 'stop_loss' is a stop (execution.stop_loss, or a grid axis of "
     "that name), applied by the simulation inside each bar: a rule cannot read it (to read "
     "a level in a rule, give its grid axis another name, e.g. 'stop_loss_level'); a rule "
     "reads the series (open, high, low, close, volume, hour, minute, weekday, day, month), "
     "the state (position, entry_price, bars_held, quantity, equity, pending, "
     "pending_price) and the grid's other axes (n)", "stop_loss"),
    ("close > open AND close > sma(close, n)", {},
     "strategy.rule.entry: write `and` instead of `AND`: the rule language's logic is `and`, "
     "`or`, `not`, in lowercase as in Python", "AND"),
    ("close > open & close > sma(close, n)", {},
     "strategy.rule.entry: write `and` instead of `&`", "&"),
    ("RSI(close, n) < 30", {},
     "strategy.rule.entry: unknown function 'RSI' (did you mean 'rsi'?)", "RSI"),
])
def test_what_a_rule_cannot_say_is_refused_with_what_to_write(tmp_path, entry, grid, said,
                                                              marked):
    """``check`` and ``run`` of a spec whose rule reads a stop axis, writes ``AND`` or
    ``&`` for ``and``, or ``RSI`` for ``rsi``: one line naming the rule's key and what
    to write, the rule and a caret under the text at fault; no store."""
    synth(tmp_path / "bars", 300, seed=1)
    spec = {**spec_of(tmp_path, "never.zarr"),
            "strategy": {"name": "r", "rule": {"entry": entry, "exit": "close < open"}},
            "grid": {"n": [5, 10], **grid}}
    path = tmp_path / "rule.yaml"
    path.write_text(yaml.safe_dump(spec))
    for command in ("check", "run"):
        done = barsweep(command, path, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        first, rule, carets = done.stderr.strip().splitlines()
        assert first.startswith(f"barsweep: error: invalid sweep spec {path}: "), first
        assert said in first, first
        assert rule.strip() == entry
        assert rule[carets.index("^"):].startswith(marked) and carets.count("^") == len(marked)
    assert not (tmp_path / "never.zarr").exists()


def test_a_grid_axis_named_as_a_series_is_refused_as_reserved(tmp_path):
    """A grid axis ``close`` beside a rule (whose ``close`` is the bars'): refused by
    ``check`` as reserved for the series, naming the grid's key, in one line."""
    synth(tmp_path / "bars", 300, seed=1)
    spec = {**spec_of(tmp_path, "never.zarr"),
            "strategy": {"name": "r", "rule": {"entry": "close > sma(close, n)",
                                               "exit": "close < open"}},
            "grid": {"n": [5, 10], "close": [1, 2]}}
    path = tmp_path / "close.yaml"
    path.write_text(yaml.safe_dump(spec))
    done = barsweep("check", path, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"barsweep: error: invalid sweep spec {path}: grid.close: the name 'close' is "
        "reserved for the series (open, high, low, close, volume, hour, minute, weekday, day, "
        "month): in a rule, close is the bars' close; give the grid axis another name, e.g. "
        "'close_level'"), done.stderr


def test_check_compiles_a_rule_without_running(plain, tmp_path):
    base, _ = plain
    done = barsweep("check", base / "plain.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "\nOK: " in done.stdout and "rsi_trend" in done.stdout


def test_sweep_and_backtest_take_a_rule_from_python(plain):
    """``barsweep.sweep(store, {"entry", "exit", "name"}, grid)`` equals the CLI's store,
    and ``backtest(bars, rule, combo)`` the store's row of that combo."""
    import barsweep
    from barsweep.engine import backtest

    base, spec = plain
    rule = {**RULE, "name": "rsi_trend"}
    ds = barsweep.sweep(str(base / "bars"), rule, GRID, symbols="BTCUSDT", timeframe="1h",
                        execution=spec["execution"], cluster="threads")
    stored = xr.open_zarr(spec["run"]["out"], consolidated=False)
    for name in METRICS:
        np.testing.assert_array_equal(ds[name].transpose(*stored[name].dims).values,
                                      stored[name].values, err_msg=name)
    combo = {"period": 14, "lower": 45, "upper": 65.5, "trend": 20, "hold": 12}
    bars = open_bars(str(base / "bars"), ["BTCUSDT"], "1h")
    one = backtest(bars, rule, combo, ppy=float(stored.attrs["periods_per_year"]),
                   **spec["execution"])
    row = stored.sel(symbol="BTCUSDT", **combo)
    for name in METRICS:
        np.testing.assert_array_equal(one.metrics[name], row[name].values, err_msg=name)


@pytest.mark.parametrize(("builtin", "grid", "constraints"), [
    ("ema_cross", {"fast": [3, 5, 8], "slow": [20, 30]}, ["fast < slow"]),
    ("bollinger", {"period": [10, 20], "k": [1.5, 2.0]}, []),
    ("rsi", {"period": [7, 14], "lower": [30.0, 40.0], "upper": [60.0, 35.0]}, []),
])
def test_a_builtin_written_as_a_rule_makes_the_same_store(plain, tmp_path, builtin, grid,
                                                           constraints):
    """The store of a builtin and of its rules (barsweep strategies): every metric bit for
    bit (rsi's requirement lower < upper excludes the same combos as the constraint)."""
    from barsweep.engine.rules.builtins import BUILTIN_RULES

    base, _ = plain
    rule = BUILTIN_RULES[builtin]
    rules = {k: getattr(rule, k) for k in ("entry", "exit", "short_entry", "short_exit")
             if getattr(rule, k)}
    stores = {}
    for kind, strategy in (("builtin", builtin), ("rule", {"name": "r", "rule": rules})):
        spec = {**spec_of(base, f"{kind}.zarr"), "strategy": strategy, "grid": grid,
                "constraints": constraints + (["lower < upper"] if builtin == "rsi"
                                              and kind == "rule" else []),
                "execution": {"fill": "next_open", "direction": "both", "fees": 0.001,
                              "stop_loss": 0.03}}
        spec["run"]["out"] = str(tmp_path / f"{kind}.zarr")
        run_spec_file(spec, tmp_path / f"{kind}.yaml", "--cluster", "threads")
        stores[kind] = xr.open_zarr(tmp_path / f"{kind}.zarr", consolidated=False)
    for name in METRICS:  # the rule's dims follow the grid's order (sorted in the file)
        want = stores["builtin"][name]
        np.testing.assert_array_equal(stores["rule"][name].transpose(*want.dims).values,
                                      want.values, err_msg=name)
    assert np.nansum(stores["rule"]["n_trades"].values) > 0


ACCOUNT_RULE = {"entry": "close > sma(close, n) and pending == 0 and equity > floor",
                "exit": "close < sma(close, n) or close > pending_price * (1 + run)",
                "name": "account_rule"}
ACCOUNT_GRID = {"n": [10, 30], "floor": [9_000.0, 9_900.0], "run": [0.004, 0.05],
                "valid_bars": [2, 6]}


def test_a_rule_reading_the_account_runs_on_workers_and_is_read_back(plain, tmp_path):
    """A rule reading ``equity``, ``pending`` and ``pending_price`` with limit entries
    (``valid_bars`` a grid axis), run by ``barsweep run`` on local workers: the store is
    the engine's sweep, and ``trades`` replays its best combo."""
    base, _ = plain
    spec = spec_of(base, "account.zarr", execution={
        "fill": "next_open", "fees": 0.001, "direction": "long",
        "entry_order": {"type": "limit", "offset": 0.003}})
    spec.update(strategy={"name": "account_rule", "rule": {
        k: v for k, v in ACCOUNT_RULE.items() if k != "name"}}, grid=ACCOUNT_GRID)
    spec["run"]["out"] = str(tmp_path / "account.zarr")
    run_spec_file(spec, tmp_path / "account.yaml")
    ds = xr.open_zarr(spec["run"]["out"], consolidated=False)
    bars = open_bars(str(base / "bars"), ["BTCUSDT"], "1h").isel(symbol=0)
    columns = {c: bars[c].values for c in ("open", "high", "low", "close")}
    dims = ds["sharpe"].dims[1:]
    mesh = np.meshgrid(*(ds[d].values for d in dims), indexing="ij")
    params = {k: m.ravel() for k, m in zip(dims, mesh, strict=True)}
    strategy = compile_rule(ACCOUNT_RULE, {"n": "int", "floor": "float", "run": "float"})
    want = sweep_block(strategy, columns, params, Execution(**spec["execution"]),
                       float(ds.attrs["periods_per_year"]))
    for k, name in enumerate(METRICS):
        np.testing.assert_array_equal(ds[name].isel(symbol=0).values.reshape(-1),
                                      want[:, k], err_msg=name)
    assert (ds["n_trades"].values > 0).mean() > 0.5
    trades = barsweep("trades", spec["run"]["out"], "--csv", tmp_path / "trades.csv",
                      cwd=tmp_path)
    assert trades.returncode == 0, trades.stderr
    assert len((tmp_path / "trades.csv").read_text().splitlines()) > 1


CALENDAR_RULE = {"entry": "weekday < 5 and hour >= start and close > sma(close, n)",
                 "exit": "hour >= stop or close < sma(close, n)"}
CALENDAR_GRID = {"n": [10, 30], "start": [8, 14], "stop": [18, 22]}


def test_a_rule_reading_the_calendar_runs_on_workers_and_is_read_back(plain, tmp_path):
    """A session filter (``weekday``, ``hour``) run by ``barsweep run`` on local workers,
    which read the calendar from the stored bars' time stamps: the store is the engine's
    sweep on the same bars, and ``trades`` lists only entries decided in the session."""
    base, _ = plain
    spec = spec_of(base, "calendar.zarr", grid=CALENDAR_GRID,
                   strategy={"name": "session", "rule": CALENDAR_RULE})
    spec["run"]["out"] = str(tmp_path / "calendar.zarr")
    run_spec_file(spec, tmp_path / "calendar.yaml")
    ds = xr.open_zarr(spec["run"]["out"], consolidated=False)
    bars = open_bars(str(base / "bars"), ["BTCUSDT"], "1h").isel(symbol=0)
    columns = {c: bars[c].values for c in ("open", "high", "low", "close")}
    columns["time"] = bars["time"].values
    dims = ds["sharpe"].dims[1:]
    mesh = np.meshgrid(*(ds[d].values for d in dims), indexing="ij")
    params = {k: m.ravel() for k, m in zip(dims, mesh, strict=True)}
    strategy = compile_rule({**CALENDAR_RULE, "name": "session"},
                            {"n": "int", "start": "int", "stop": "int"})
    want = sweep_block(strategy, columns, params, Execution(**spec["execution"]),
                       float(ds.attrs["periods_per_year"]))
    for k, name in enumerate(METRICS):
        np.testing.assert_array_equal(ds[name].isel(symbol=0).values.reshape(-1),
                                      want[:, k], err_msg=name)
    assert (ds["n_trades"].values > 0).all()
    trades = barsweep("trades", spec["run"]["out"], "--csv", tmp_path / "trades.csv",
                      cwd=tmp_path)
    assert trades.returncode == 0, trades.stderr
    table = pd.read_csv(tmp_path / "trades.csv")
    entered = pd.DatetimeIndex(pd.to_datetime(table["entry_time"], utc=True))
    decided = entered - pd.Timedelta("1h")  # at the close before the fill
    assert len(table) > 0 and (decided.day_of_week < 5).all()
