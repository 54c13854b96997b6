"""``sweep_cuda`` on grids whose combos the kernel runs in another order (gathered and
put back on the device), against the CPU kernel, in numba's CUDA simulator."""

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.bars import random_bars
from helpers.cuda_sim import RTOL, assert_same_metrics, run_simulated
from helpers.gpu_cases import BARS_SEED, N_BARS, ORDER_CASES, SPANS

from barsweep.engine import Execution, get_strategy, sweep_block
from barsweep.engine.core.hoist import plan_rows
from barsweep.engine.core.inputs import is_identity, lane_order

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim") / "order.npz"
    stdout = run_simulated(str(HERE / "sim_order.py"), str(out))
    checks = json.loads(next(line[7:] for line in stdout.splitlines()
                             if line.startswith("CHECKS ")))
    with np.load(out) as data:
        return {k: data[k] for k in data.files}, checks


@pytest.mark.parametrize(("case_id", "strategy", "params", "kwargs"), ORDER_CASES,
                         ids=[c[0] for c in ORDER_CASES])
def test_cuda_equals_cpu_out_of_order(simulated, case_id, strategy, params, kwargs):
    grid = {k: np.array(v) for k, v in params.items()}
    strategy_params = {k: v for k, v in grid.items() if k != "stop_loss"}
    _, rows = plan_rows(get_strategy(strategy), strategy_params, len(next(iter(grid.values()))))
    assert not is_identity(lane_order(rows))  # the device gathers and puts back
    results, _ = simulated
    bars = random_bars(N_BARS, BARS_SEED)
    cpu = sweep_block(get_strategy(strategy), bars, grid, Execution(**kwargs), 8760.0)
    assert_same_metrics(results[case_id], cpu, RTOL, case_id)
    cpu_spans = sweep_block(get_strategy(strategy), bars, grid, Execution(**kwargs), 8760.0,
                            spans=SPANS)
    assert results[case_id + "-spans"].shape == cpu_spans.shape
    for k in range(len(SPANS)):
        assert_same_metrics(results[case_id + "-spans"][k], cpu_spans[k], RTOL, f"{case_id} {k}")


def test_row_kernels_and_reused_arrays(simulated):
    _, checks = simulated
    assert checks == {"take_rows": True, "put_rows": True, "reused_same_shape": True,
                      "new_for_other_shape": True}
