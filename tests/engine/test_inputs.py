"""A kernel's inputs made ready: one preparation for sweep_cpu, sweep_cuda and backtest."""

import numpy as np
from helpers.bars import random_bars

from barsweep.engine import Execution, backtest, get_strategy, sweep_block
from barsweep.engine.core.inputs import bar_tuple, locality_order, prepare_inputs


def test_bar_tuple_hands_the_kernels_read_only_columns():
    bars = random_bars(50, seed=3)
    columns = bar_tuple(bars)
    assert len(columns) == 6 and all(not c.flags.writeable for c in columns)
    assert all(c.dtype == np.float64 and c.flags.c_contiguous for c in columns)
    assert bars["close"].flags.writeable  # the caller's arrays are left as they were
    assert np.shares_memory(columns[3], bars["close"])  # no copy of float64 columns


def test_one_compiled_specialisation_serves_every_caller():
    """Writable arrays (a notebook), read-only ones (the memory map) and backtest() all
    reach the kernel with the same types: it compiles (or loads) once."""
    strategy = get_strategy("ema_cross")
    bars = random_bars(300, seed=4)
    frozen = {k: v.copy() for k, v in bars.items()}
    for v in frozen.values():
        v.flags.writeable = False
    params = dict(fast=np.array([5, 8]), slow=np.array([20, 30]))
    a = sweep_block(strategy, bars, params, Execution(), 8760.0)
    b = sweep_block(strategy, frozen, params, Execution(), 8760.0)
    one = backtest(bars, strategy, dict(fast=5, slow=20), ppy=8760.0)
    np.testing.assert_array_equal(a, b)
    assert one.metrics["sharpe"] == a[0, list(one.metrics).index("sharpe")]
    bar_types = {sig[0] for sig in strategy.kernel.signatures}
    assert len(bar_types) == 1 and "readonly" in str(bar_types.pop())


def test_prepare_inputs_packs_what_every_backend_takes():
    bars = random_bars(100, seed=5)
    params = dict(fast=np.array([5, 10, 5]), slow=np.array([20, 20, 30]),
                  stop_loss=np.array([0.05, 0.1, 0.2]))
    inputs = prepare_inputs(get_strategy("ema_cross"), bars, params, Execution(fees=0.001), 8760.0)
    assert inputs.n_combos == 3 and set(inputs.strategy_params) == {"fast", "slow"}
    assert inputs.fparams.shape == (3, 2)
    assert inputs.per_combo["stop_loss"].tolist() == [0.05, 0.1, 0.2]
    assert inputs.per_combo["size_value"].tolist() == [1.0, 1.0, 1.0]  # all-in
    assert (inputs.settings.start, inputs.settings.end, inputs.settings.fee_rate) == (0, 100, 0.001)
    # the prices, and the calendar of the bars' time stamps (engine/core/calendar.py)
    assert sorted(inputs.columns) == sorted(["close", "high", "low", "open", "hour", "minute",
                                             "weekday", "day", "month"])
    rows = np.array([[0, 2], [1, 2], [0, 3]])
    assert sorted(locality_order(rows).tolist()) == [0, 1, 2]
