"""The CUDA portfolio kernel against the CPU's, in numba's CUDA simulator, and compiled
for a real GPU (PTX for compute capability 9.0, assembled by ptxas), without one.

``sim_portfolio.py`` runs every case of ``helpers/gpu_portfolio_cases.py`` through
``sweep_portfolio(..., backend="cuda")`` in a process of its own (the simulator must be
switched on before numba is imported); here the compiled CPU kernel runs the same cases:
identical trade counts per symbol, every metric and each symbol's exposure equal to
1e-12 relative (as the single-symbol kernels, ``test_cuda_sim.py``).
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.cuda_sim import RTOL, assert_same_metrics, run_simulated
from helpers.gpu_portfolio_cases import (
    EXECUTIONS,
    LIMITS,
    PARAMS,
    cases,
    sized,
    strategy,
    universe,
)

from barsweep.engine import METRICS, Execution, sweep_portfolio
from barsweep.engine.gpu.portfolio import MAX_PARAM_BYTES, SYMBOL_PARAM_BYTES, param_bytes

HERE = Path(__file__).resolve().parent
PPY = 8760.0
CASES = cases()


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim") / "portfolio.npz"
    run_simulated(str(HERE / "sim_portfolio.py"), str(out))
    with np.load(out) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="module")
def bars():
    return universe()


def cpu_case(bars, name, params, execution, limit, case_id=""):
    return sweep_portfolio(strategy(name), bars, params, Execution(**execution), PPY,
                           max_positions=limit, **sized(case_id))


@pytest.mark.parametrize(("case_id", "name", "params", "execution", "limit"), CASES,
                         ids=[c[0] for c in CASES])
def test_cuda_portfolio_equals_cpu(simulated, bars, case_id, name, params, execution, limit):
    metrics, per_symbol = cpu_case(bars, name, params, EXECUTIONS[execution], limit, case_id)
    gpu_metrics = simulated[f"{case_id}/metrics"]
    gpu_symbols = simulated[f"{case_id}/per_symbol"]
    assert_same_metrics(gpu_metrics, metrics, RTOL, case_id)
    np.testing.assert_array_equal(gpu_symbols[:, :, 0], per_symbol[:, :, 0], err_msg=case_id)
    np.testing.assert_allclose(gpu_symbols[:, :, 1], per_symbol[:, :, 1], rtol=RTOL,
                               err_msg=case_id)
    held = per_symbol[:, :, 0]
    assert held.sum(axis=0).min() > 0 and held.sum(axis=1).min() > 0, \
        f"{case_id}: every symbol and every combo must trade"


def test_cases_are_not_vacuous(bars):
    """max_positions binds, the ruin case ruins, each cost of ``open_costs`` (fees,
    fixed fee, slippage), the stops and the rebalanced inverse-vol sizing change some
    metric."""
    trades = {}
    for case_id, name, params, execution, limit in CASES:
        metrics, per_symbol = cpu_case(bars, name, params, EXECUTIONS[execution], limit)
        trades[case_id] = per_symbol[:, :, 0].sum()
        if execution == "ruin":
            assert metrics[:, METRICS.index("ruined")].sum() > 0
    for name in PARAMS:
        for execution in ("close_fees", "open_costs"):
            assert trades[f"{name}-{execution}-two"] < trades[f"{name}-{execution}-all"]
    costs = EXECUTIONS["open_costs"]
    full, _ = cpu_case(bars, "ema_cross", PARAMS["ema_cross"], costs, LIMITS["two"])
    for key in ("fees", "fixed_fee", "slippage"):
        less, _ = cpu_case(bars, "ema_cross", PARAMS["ema_cross"],
                           {k: v for k, v in costs.items() if k != key}, LIMITS["two"])
        assert not np.array_equal(full, less, equal_nan=True), key
    stops = EXECUTIONS["stops"]
    with_stops, _ = cpu_case(bars, "ema_cross", PARAMS["ema_cross"], stops, 2)
    without, _ = cpu_case(bars, "ema_cross", PARAMS["ema_cross"],
                          {k: v for k, v in stops.items() if "_" not in k}, 2)
    assert not np.array_equal(with_stops, without, equal_nan=True), "stops"
    plain, _ = cpu_case(bars, "ema_cross", PARAMS["ema_cross"], EXECUTIONS["close_fees"], 2)
    rebalanced, _ = cpu_case(bars, "ema_cross", PARAMS["ema_cross"],
                             EXECUTIONS["close_fees"], 2, "ema_cross-close_fees-rebalance")
    assert not np.array_equal(plain, rebalanced, equal_nan=True), "rebalance"


def ptxas() -> Path:
    """ptxas of the ``nvidia-cuda-nvcc-cu12`` wheel (numba-cuda[cu12] installs it)."""
    spec = importlib.util.find_spec("nvidia.cuda_nvcc")
    assert spec is not None, "nvidia-cuda-nvcc-cu12 is missing: pip install 'barsweep[test]'"
    return Path(next(iter(spec.submodule_search_locations))) / "bin" / "ptxas"


def test_portfolio_kernel_compiles_for_sm_90(tmp_path):
    """PTX for 4 symbols (ema_cross and the rule), and for the most symbols the kernel's
    parameters are said to hold: each within the bound of ``param_bytes`` and assembled
    by ptxas for sm_90."""
    most = (MAX_PARAM_BYTES - param_bytes(0)) // SYMBOL_PARAM_BYTES
    env = {**os.environ, "PTX_OUT": str(tmp_path)}
    for key in ("NUMBA_ENABLE_CUDASIM", "NUMBA_DISABLE_JIT"):
        env.pop(key, None)
    proc = subprocess.run([sys.executable, str(HERE / "ptx_portfolio.py"), "4", str(most)],
                          capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    report = json.loads(next(line[4:] for line in proc.stdout.splitlines()
                             if line.startswith("PTX ")))
    assert set(report) == {"ema_cross-4", f"ema_cross-{most}", "state_rule-4"}
    for key, entry in report.items():
        n_sym = int(key.rpartition("-")[2])
        assert entry["ptx_chars"] > 10_000 and entry["fma"] > 0, key
        assert 0 < entry["param_bytes"] <= param_bytes(n_sym) <= MAX_PARAM_BYTES, key
        done = subprocess.run([str(ptxas()), "-arch=sm_90", str(tmp_path / f"{key}.ptx"),
                               "-o", str(tmp_path / f"{key}.cubin")],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{key}: {done.stderr[-3000:]}"


def test_pipeline_portfolio_on_the_gpu_equals_the_cpu(tmp_path):
    """`barsweep run` of a portfolio with ``--backend cuda`` on a LocalCluster whose
    worker is in the CUDA simulator: its blocks run on cuda and the store equals
    ``sweep_portfolio`` on the CPU."""
    import xarray as xr
    import yaml

    from barsweep.datasets import open_bars, periods_per_year

    store, out = tmp_path / "bars", tmp_path / "gpu.zarr"
    members = ["AAA", "BBB", "CCC"]
    cli = [sys.executable, "-m", "barsweep.pipeline.cli"]
    for seed, symbol in enumerate(members):
        subprocess.run([*cli, "data", "synth", "--symbol", symbol, "--timeframe", "1h",
                        "--bars", "300", "--seed", str(seed + 3), "--store", str(store)],
                       check=True, capture_output=True)
    grid = {"fast": [3, 5], "slow": [12, 20], "max_positions": [1, 2]}
    execution = {"fill": "next_open", "fees": 0.001, "slippage": 0.0005}
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "data": {"store": str(store), "symbols": members, "timeframe": "1h"},
        "strategy": "ema_cross", "grid": grid, "execution": execution, "portfolio": {},
        "run": {"block_size": 4, "out": str(out)}}))
    assert "blocks on cuda" in run_simulated("-m", "barsweep.pipeline.cli", "run", str(spec),
                                             "--no-progress", "--workers", "1",
                                             "--backend", "cuda")
    ds = xr.open_zarr(out, consolidated=False).load()
    assert ds.attrs["backend"] == "cuda" and ds.attrs["backend_requested"] == "cuda"
    bars = {s: {k: open_bars(store, s, "1h")[k].values.ravel() for k in
                ("open", "high", "low", "close")} for s in members}
    mesh = np.meshgrid(*grid.values(), indexing="ij")
    params = {k: m.ravel() for k, m in zip(grid, mesh, strict=True)}
    kmax = params.pop("max_positions")
    cpu, per_symbol = sweep_portfolio(strategy("ema_cross"), bars, params, execution,
                                      periods_per_year("1h"), max_positions=kmax)
    gpu = np.stack([ds[m].sel(symbol="portfolio").values.ravel() for m in METRICS], axis=1)
    assert_same_metrics(gpu, cpu, RTOL, "pipeline")
    np.testing.assert_array_equal(
        ds["member_n_trades"].transpose("member", *grid).values.reshape(3, -1).T,
        per_symbol[:, :, 0])
    assert per_symbol[:, :, 0].sum() > 0


def test_too_many_symbols_for_the_cuda_kernel():
    """Past the kernel's parameter space: refused on cuda, auto falls back to the CPU."""
    from barsweep.engine.gpu.portfolio import portfolio_cuda_problem
    from barsweep.pipeline.run.portfolio_block import portfolio_backend

    most = (MAX_PARAM_BYTES - param_bytes(0)) // SYMBOL_PARAM_BYTES
    assert portfolio_cuda_problem(most) is None
    assert f"({most}:" in portfolio_cuda_problem(most + 1)
    gpu = ("cuda", "auto: each of the 1 workers has a CUDA GPU of its own")
    assert portfolio_backend(most, gpu) == gpu
    chosen, reason = portfolio_backend(most + 1, gpu)
    assert chosen == "cpu" and reason.startswith("auto: CPU, since a portfolio of")
    assert portfolio_backend(most + 1, ("cpu", "run.backend is cpu"))[0] == "cpu"
