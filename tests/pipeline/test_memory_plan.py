"""Blocks sized by memory: the estimate against a measured block, the planner within its
budget on any grid, a budget too small refused, and blocks cut for memory writing the
same store."""

import tracemalloc

import numpy as np
import pytest
import xarray as xr
import yaml
from helpers.runs import run_spec_file, synth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barsweep.engine import Execution, get_strategy, sweep_block
from barsweep.engine.core.hoist import hoist, plan_rows
from barsweep.engine.indicators.registry import compute_indicator
from barsweep.errors import SpecError
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.grid import box_combos
from barsweep.pipeline.config.model import parse_spec
from barsweep.pipeline.config.sizes import parse_bytes
from barsweep.pipeline.run.memory import block_bytes, table_rows, worker_budget
from barsweep.pipeline.run.plan import chunk_cost, plan

DATA = {"store": "bars/", "symbols": ["A"], "timeframe": "1h", "year_days": 365}
RULE = {"entry": "rsi(close, period) < lower and close > sma(close, trend)",
        "exit": "rsi(close, period) > upper"}


def walk(n_bars: np.random.Generator | int, seed: int = 0) -> dict:
    close = 100 + np.cumsum(np.random.default_rng(seed).normal(size=n_bars))
    return dict(open=close, high=close + 0.5, low=close - 0.5, close=close)


def test_estimate_covers_a_measured_block_and_is_close():
    """tracemalloc's peak over a real sweep_block (the indicator table dominating) lies
    within the estimate, and the estimate within 1.5x of it."""
    strategy = get_strategy("ema_cross")
    fast, slow = np.meshgrid(np.arange(2, 42), np.arange(50, 250), indexing="ij")
    params = {"fast": fast.ravel(), "slow": slow.ravel()}
    bars = walk(20_000)
    sweep_block(strategy, walk(300), {k: v[:4] for k, v in params.items()}, Execution(), 8760)
    sums = np.empty((fast.size, 10, 2))
    tracemalloc.start()
    sweep_block(strategy, bars, params, Execution(), 8760, seg_sums=sums)
    peak = tracemalloc.get_traced_memory()[1] + sums.nbytes
    tracemalloc.stop()
    rows = table_rows(strategy, {"fast": 40, "slow": 200})
    assert rows == len(plan_rows(strategy, params, fast.size)[0]) == 240
    estimate = block_bytes(rows, 20_000, fast.size, 1, 10, 2, 2)
    assert peak <= estimate <= 1.5 * peak, (peak, estimate)


def test_hoist_fills_the_table_as_the_indicators_compute_it():
    strategy = get_strategy("macd")
    bars = walk(3_000, seed=3)
    params = {"fast": np.array([3, 5, 5, 8]), "slow": np.array([20, 26, 30, 26]),
              "signal": np.array([9, 9, 4, 4])}
    ind, rows = hoist(strategy, bars, params, 4)
    keys, _ = plan_rows(strategy, params, 4)
    expected = np.stack([compute_indicator(name, bars, args) for name, args in keys])
    assert ind.shape == expected.shape and ind.flags.c_contiguous
    np.testing.assert_array_equal(ind.view(np.uint64), expected.view(np.uint64))


AXES = {"ema_cross": ("fast", "slow"), "macd": ("fast", "slow", "signal"),
        "bollinger": None, "rule": ("period", "lower", "upper", "trend")}


def spec_for(kind: str, sizes: list[int], extra_axis: int, segments: int, wf: bool):
    if kind == "rule":
        strategy, names = {"name": "r", "rule": RULE}, AXES["rule"]
    else:
        strategy, names = kind, AXES[kind]
    grid = {n: list(range(2 + i, 2 + i + 3 * k, 3)) for i, (n, k) in
            enumerate(zip(names, sizes, strict=False))}
    if extra_axis:
        grid["stop_loss"] = [0.01 * (i + 1) for i in range(extra_axis)]
    more = {"walk_forward": {"train": 500, "test": 200}} if wf else {}
    return parse_spec({"data": DATA, "strategy": strategy, "grid": grid,
                       "analysis": {"pbo_segments": segments}, **more})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["ema_cross", "macd", "rule"]),
       sizes=st.lists(st.integers(1, 12), min_size=4, max_size=4),
       extra_axis=st.integers(0, 3), segments=st.sampled_from([0, 2, 10]),
       wf=st.booleans(), n_bars=st.integers(1, 3_000_000),
       block_size=st.integers(1, 5_000), budget=st.integers(10_000, 10**10))
def test_planner_never_exceeds_its_budget(kind, sizes, extra_axis, segments, wf, n_bars,
                                          block_size, budget):
    spec = spec_for(kind, sizes, extra_axis, segments, wf)
    windows = np.array([[0, 500, 500, 700], [200, 700, 700, 900], [400, 900, 900, 1100]]) \
        if wf else None
    grid = spec.param_grid
    cost = chunk_cost(spec, grid, n_bars, windows)
    if cost((1,) * len(grid.shape)) > budget:
        with pytest.raises(SpecError, match=r"run.memory_per_block: one combo .* needs ~"):
            plan(spec, "o.zarr", block_size, n_bars=n_bars, budget=budget, windows=windows)
        return
    p = plan(spec, "o.zarr", block_size, n_bars=n_bars, budget=budget, windows=windows)
    assert min(p.chunks) >= 1 and np.prod(p.chunks) <= max(block_size, 1)
    assert cost(p.chunks) <= budget
    strategy = get_strategy(kind) if kind != "rule" else None
    runs = 1 if windows is None else 2 * p.windows_per_block
    for task in p.tasks:
        combos = box_combos(task.axes)
        n = len(next(iter(combos.values())))
        assert n >= 1
        if strategy is not None:  # the block's real table rows within the estimate
            real = len(plan_rows(strategy, combos, n)[0])
            assert block_bytes(real, n_bars, n, runs, p.segments, len(task.axes),
                               len(strategy.indicators)) <= budget


def test_worker_budget_is_a_share_of_each_thread():
    workers = [{"memory_limit": 8 * 2**30, "nthreads": 2}, {"memory_limit": 4 * 2**30,
                                                             "nthreads": 1}]
    assert worker_budget(workers, 0) == 2**30
    assert worker_budget([{"memory_limit": 0, "nthreads": 4}], 16 * 2**30) == 2**30


@pytest.mark.parametrize("value", ["lots", "-3GiB", 0, "2 parsecs", True])
def test_bad_memory_per_block_is_refused_naming_the_key(value):
    with pytest.raises(SpecError, match="memory_per_block"):
        parse_spec({"data": DATA, "strategy": "ema_cross", "grid": {"fast": [2], "slow": [9]},
                    "run": {"memory_per_block": value}})
    assert parse_bytes("2GiB") == 2**31


def small_spec(bars, out, **run) -> dict:
    return {"data": {"store": str(bars), "symbols": ["BTCUSDT"], "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": {"fast": {"start": 2, "stop": 30, "step": 2},
                     "slow": {"start": 10, "stop": 120, "step": 5}},
            "constraints": ["fast < slow"], "execution": {"fill": "next_open", "fees": 0.001},
            "run": {"out": str(out), **run}}


@pytest.mark.slow
def test_a_tiny_budget_is_refused_before_any_store(tmp_path, capsys):
    bars = synth(tmp_path / "bars", 3_000, seed=5)
    out = tmp_path / "o.zarr"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(small_spec(bars, out, memory_per_block="100KiB")))
    assert main(["run", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "one combo of this spec needs ~" in err[0]
    assert "100.0 KiB allowed" in err[0]
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("more", [{}, {"walk_forward": {"train": 800, "test": 400}}],
                         ids=["plain", "walk-forward"])
def test_blocks_cut_for_memory_write_the_same_store(tmp_path, more):
    bars = synth(tmp_path / "bars", 3_000, seed=5)
    stores = {}
    for name, run in (("default", {}), ("cut", {"memory_per_block": "700KB"})):
        spec = {**small_spec(bars, tmp_path / f"{name}.zarr", **run), **more}
        stores[name] = xr.open_zarr(run_spec_file(spec, tmp_path / "s.yaml"),
                                    consolidated=False).load()
    assert stores["cut"]["done"].size > 5 * stores["default"]["done"].size
    for name in stores["default"].data_vars:
        if name in ("done", "written"):  # one per block: as many as there are blocks
            continue
        np.testing.assert_array_equal(stores["cut"][name].values, stores["default"][name].values,
                                      err_msg=name)


def test_dask_memory_warnings_are_silenced_and_a_restart_said_in_our_words(monkeypatch):
    import logging

    from barsweep.pipeline.run.cluster import quiet_memory_logs

    said = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    monkeypatch.setattr(logging.getLogger("distributed"), "level", logging.WARNING)
    worker, nanny = (logging.getLogger(f"distributed.{n}.memory") for n in ("worker", "nanny"))
    for logger in (worker, nanny):
        monkeypatch.setattr(logger, "handlers", [handler])
        monkeypatch.setattr(logger, "disabled", False)  # a logging.config of another test
    quiet_memory_logs()
    worker.warning("Unmanaged memory use is high. This may indicate a memory leak")
    worker.warning("Worker is at 81%% memory usage. Pausing worker.")
    nanny.warning("Worker tcp://1.2.3.4:5 (pid=9) exceeded 95% memory budget. Restarting...")
    nanny.warning("Worker tcp://1.2.3.4:5 (pid=9) is slow to %s", "terminate")
    assert said == ["barsweep: a worker ran out of memory and is restarted (its block is "
                    "retried); set run.memory_per_block lower or give the workers more memory"]
