"""The CUDA kernels against the CPU kernel, in numba's CUDA simulator (no GPU needed).

``sim_run.py`` runs every case of ``helpers/gpu_cases.py`` through ``sweep_cuda`` in a
process of its own (the simulator must be switched on before numba is imported); here the
compiled CPU kernel runs the same cases. Trade counts must be identical and every metric equal to
1e-12 relative: in the simulator the device functions run as plain Python, float64 step
by step like the CPU's (no fused multiply-adds; a real GPU is held to 1e-9 instead, see
benchmarks/gpu_check.py). ``sim_hoist.py`` hoists every device indicator the same way,
checked against the CPU kernels.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.bars import random_bars
from helpers.cuda_sim import RTOL, assert_same_metrics, run_simulated
from helpers.gpu_cases import (
    BARS_SEED,
    CONFLICTS,
    EXECUTIONS,
    HOIST_ARGS,
    HOIST_BARS,
    N_BARS,
    N_SEGMENTS,
    RUIN_BARS,
    SPANS,
    cases,
    import_modules,
    ruin_bars,
    ruin_cases,
)

from barsweep.engine import METRICS, Execution, get_strategy, sweep_block
from barsweep.engine.gpu.hoist import DEVICE_INDICATORS
from barsweep.engine.indicators.registry import INDICATORS, compute_indicator

HERE = Path(__file__).resolve().parent
CASES = cases()
RUIN_CASES = ruin_cases()


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim") / "metrics.npz"
    stdout = run_simulated(str(HERE / "sim_run.py"), str(out))
    checks = json.loads(next(line[7:] for line in stdout.splitlines()
                             if line.startswith("CHECKS ")))
    with np.load(out) as data:
        return {k: data[k] for k in data.files}, checks, out.with_suffix(".spans.npz")


@pytest.fixture(scope="module")
def bars():
    import_modules()
    return random_bars(N_BARS, BARS_SEED)


@pytest.mark.parametrize(("case_id", "strategy", "execution", "params", "kwargs"), CASES,
                         ids=[c[0] for c in CASES])
def test_cuda_kernel_equals_cpu_kernel(simulated, bars, case_id, strategy, execution, params,
                                       kwargs):
    results, *_ = simulated
    cpu = sweep_block(get_strategy(strategy), bars, params, Execution(**kwargs), 8760.0)
    assert_same_metrics(results[case_id], cpu, RTOL, case_id)


@pytest.mark.parametrize(("case_id", "strategy", "execution", "params", "kwargs"), RUIN_CASES,
                         ids=[c[0] for c in RUIN_CASES])
def test_cuda_kernel_equals_cpu_kernel_where_combos_are_ruined(simulated, case_id, strategy,
                                                               execution, params, kwargs):
    """Ruin (liquidation inside a bar, at a gap or a close; exits that cannot pay their
    fee; funding beyond the equity) on the GPU as on the CPU; some combos ruined."""
    results, *_ = simulated
    cpu = sweep_block(get_strategy(strategy), ruin_bars(**RUIN_BARS), params, Execution(**kwargs),
                      8760.0)
    assert_same_metrics(results[case_id], cpu, RTOL, case_id)
    ruined = results[case_id][:, METRICS.index("ruined")]
    assert ruined.sum() > 0 and not np.isinf(results[case_id]).any()


#: Run in the simulator: the slipped donchian shorts over the walk-forward spans, saved.
RUIN_SPANS_SCRIPT = """
import sys
sys.path[:0] = [sys.argv[2]]
import numpy as np
from helpers.gpu_cases import RUIN_BARS, SPANS, ruin_bars, ruin_cases
from barsweep.engine import Execution, get_strategy, gpu
_, name, _, params, kwargs = next(c for c in ruin_cases() if c[0] == sys.argv[3])
spans = [(a, min(z, RUIN_BARS["n_bars"])) for a, z in SPANS]
np.save(sys.argv[1], gpu.sweep_cuda(get_strategy(name), ruin_bars(**RUIN_BARS), params,
                                    Execution(**kwargs), 8760.0, spans=spans))
"""


def test_cuda_windows_ruined_on_their_first_bar_equal_the_cpu(tmp_path):
    """A walk-forward span whose first bar ruins combos (a short slipped by 60% entered at
    the window's first close): the GPU's metrics equal the CPU's, drawdown -100% on every
    bar, nothing raised (each bar's drawdown under a peak of 0 is no division)."""
    case_id = "ruin-donchian-close_short_slipped"
    out = tmp_path / "spans.npy"
    run_simulated("-c", RUIN_SPANS_SCRIPT, str(out), str(HERE.parent), case_id, timeout=300)
    _, name, _, params, kwargs = next(c for c in RUIN_CASES if c[0] == case_id)
    spans = [(a, min(z, RUIN_BARS["n_bars"])) for a, z in SPANS]
    cpu = sweep_block(get_strategy(name), ruin_bars(**RUIN_BARS), params, Execution(**kwargs),
                      8760.0, spans=spans)
    gpu = np.load(out)
    for k, span in enumerate(spans):
        assert_same_metrics(gpu[k], cpu[k], RTOL, f"span {span}")
    window = cpu[spans.index((200, 260))]
    first = window[:, METRICS.index("ulcer_index")] == 100.0  # -100% from its first bar
    assert first.any() and (window[first, METRICS.index("max_drawdown")] == -1.0).all()


def test_cases_cover_every_strategy_and_trade(simulated):
    results, *_ = simulated
    trades = METRICS.index("n_trades")
    assert all(np.nanmax(r[:, trades]) > 0 for r in results.values())
    assert len(results) == len(CASES) + len(RUIN_CASES) and len(CASES) >= 20
    assert {c[1] for c in CASES} == {"buy_and_hold", "sma_cross", "ema_cross", "rsi", "trix",
                                     "macd", "bollinger", "donchian", "sma_trend", "wma_band",
                                     "sma_hold", "rule_state", "rule_hold", "rule_account",
                                     "rule_calendar"}


@pytest.mark.parametrize("execution", sorted({**EXECUTIONS, **CONFLICTS}))
def test_every_execution_setting_matters_in_the_cases(bars, execution):
    """Not a vacuous comparison: in the cases that use an execution, dropping any one of
    its settings (fees, slippage, each stop, funding, a conflict mode that acts otherwise
    than the default ``opposite``, ...) changes some metric."""
    kwargs = {**EXECUTIONS, **CONFLICTS}[execution]
    used = [c for c in CASES if c[2] == execution]
    assert used
    for key in kwargs:
        if key == "fill" or (key == "conflict" and kwargs[key] in ("opposite", "exit")):
            continue  # exit acts as opposite, the default (helpers.gpu_cases.CONFLICTS)
        reduced = {k: v for k, v in kwargs.items() if k != key}
        changed = False
        for _, strategy, _, params, _ in used:
            if any(p in params for p in ("stop_loss", "take_profit", "trailing_stop")):
                continue  # stops swept as grid axes: checked by the other cases
            full = sweep_block(get_strategy(strategy), bars, params, Execution(**kwargs), 8760.0)
            less = sweep_block(get_strategy(strategy), bars, params, Execution(**reduced), 8760.0)
            changed |= not np.array_equal(full, less, equal_nan=True)
        assert changed, f"{execution}: {key} changes nothing in its cases"


def test_bars_stay_on_the_device_per_key(simulated):
    _, checks, _ = simulated
    assert checks == {"reused": True, "distinct_key_copied": True, "cached_keys": 2,
                      "evicted_oldest": True, "kept": 4}


def test_pipeline_on_the_gpu_matches_the_cpu(tmp_path):
    """`barsweep run` on LocalClusters whose workers are in the CUDA simulator: with one
    worker auto takes the GPU and says why; two workers would share it, so auto stays on
    the CPU; asked for cuda they share it (blocks across both). The Zarr store equals
    the CPU kernel."""
    import xarray as xr
    import yaml

    from barsweep.datasets import open_bars, periods_per_year
    from barsweep.datasets.bars import bars_arrays

    store, out = tmp_path / "bars", tmp_path / "gpu.zarr"
    cli = [sys.executable, "-m", "barsweep.pipeline.cli"]
    subprocess.run([*cli, "data", "synth", "--symbol", "BTCUSDT", "--timeframe", "1h",
                    "--bars", "400", "--seed", "5", "--store", str(store)], check=True,
                   capture_output=True)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "data": {"store": str(store), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": {"start": 2, "stop": 8, "step": 1},
                 "slow": {"start": 10, "stop": 40, "step": 5}},
        "constraints": ["fast < slow"],
        "execution": {"fill": "next_open", "direction": "both", "fees": 0.001,
                      "stop_loss": 0.02},
        "run": {"block_size": 16, "out": str(out)},
    }))
    cmd = ["-m", "barsweep.pipeline.cli", "run", str(spec), "--no-progress"]
    # one worker, one (simulated) GPU: auto takes it
    assert "blocks on cuda" in run_simulated(*cmd, "--workers", "1")
    ds = xr.open_zarr(out, consolidated=False)
    assert ds.attrs["backend"] == "cuda" and ds.attrs["backend_requested"] == "auto"
    assert ds.attrs["backend_reason"] == "auto: each of the 1 workers has a CUDA GPU of its own"
    auto_metrics = {m: ds[m].values for m in METRICS}
    # two workers sharing it: auto stays on the CPU, an explicit cuda shares the GPU
    shared = tmp_path / "shared.zarr"
    assert "blocks on cpu" in run_simulated(*cmd, "--workers", "2", "--out", str(shared))
    assert "2 workers would share GPU" in xr.open_zarr(shared, consolidated=False).attrs[
        "backend_reason"]
    assert "blocks on cuda" in run_simulated(*cmd, "--workers", "2", "--backend", "cuda",
                                             "--out", str(out), "--overwrite")
    ds = xr.open_zarr(out, consolidated=False)
    assert ds.attrs["backend"] == "cuda" and ds.attrs["backend_requested"] == "cuda"
    for m in METRICS:
        np.testing.assert_array_equal(ds[m].values, auto_metrics[m])
    stacked = ds.sel(symbol="BTCUSDT").stack(combo=("fast", "slow"))
    keep = stacked["fast"].values < stacked["slow"].values
    gpu = np.column_stack([stacked[m].values[keep] for m in METRICS])
    params = dict(fast=stacked["fast"].values[keep], slow=stacked["slow"].values[keep])
    bars = bars_arrays(open_bars(store, "BTCUSDT", "1h"), "BTCUSDT")
    cpu = sweep_block(get_strategy("ema_cross"), bars, params,
                      Execution(fill="next_open", direction="both", fees=0.001, stop_loss=0.02),
                      periods_per_year("1h"))
    assert_same_metrics(gpu, cpu, RTOL, "pipeline")


def test_cuda_spans_and_segment_sums_equal_the_cpu(simulated, bars):
    """Walk-forward spans and PBO segment sums: the same arithmetic on the GPU."""
    with np.load(simulated[2]) as data:
        results = {k: data[k] for k in data.files}
    case_id, strategy, _, params, kwargs = next(c for c in CASES if c[3])
    cpu = sweep_block(get_strategy(strategy), bars, params, Execution(**kwargs), 8760.0,
                      spans=SPANS)
    for k, span in enumerate(SPANS):
        assert_same_metrics(results["spans"][k], cpu[k], RTOL, f"span {span}")
    segs = np.empty((len(cpu[0]), N_SEGMENTS, 2))
    whole = sweep_block(get_strategy(strategy), bars, params, Execution(**kwargs), 8760.0,
                        seg_sums=segs)
    assert_same_metrics(results["segmented"], whole, RTOL, "segmented")
    np.testing.assert_allclose(results["seg_sums"], segs, rtol=RTOL, atol=1e-15)


def test_every_device_fill_equals_the_cpu_kernel(tmp_path):
    """Each indicator the GPU hoists itself, hoisted by its CUDA kernel (``sim_hoist.py``),
    equals the CPU kernel row for row: periods of 1, warm-ups longer than the bars."""
    out = tmp_path / "hoisted.npz"
    run_simulated(str(HERE / "sim_hoist.py"), str(out))
    bars = random_bars(HOIST_BARS, BARS_SEED)
    with np.load(out) as data:
        assert set(data.files) == set(DEVICE_INDICATORS)
        for name in DEVICE_INDICATORS:
            arg_rows = HOIST_ARGS[INDICATORS[name].arg_names]
            cpu = np.array([compute_indicator(name, bars, args) for args in arg_rows])
            np.testing.assert_allclose(data[name], cpu, rtol=RTOL, atol=0.0, equal_nan=True,
                                       err_msg=name)
            assert np.isfinite(cpu).any() and np.isnan(cpu).any(), name
