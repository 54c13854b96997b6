"""Planning never enumerates the grid: exact per-block counts on small grids, bounded
memory on a 10^9-combo one (timings: benchmarks/plan_size.py)."""

import tracemalloc

import numpy as np
import pytest

from barsweep.engine.expr import holds
from barsweep.pipeline.config.grid import box_combos
from barsweep.pipeline.config.model import parse_spec
from barsweep.pipeline.run.plan import auto_block_size, plan

DATA = {"store": "bars/", "symbols": ["A", "B"], "timeframe": "1h", "year_days": 365}


def spec_of(strategy, grid, constraints=(), symbols=("A", "B")):
    return parse_spec({"data": {**DATA, "symbols": list(symbols)}, "strategy": strategy,
                       "grid": grid, "constraints": list(constraints)})


def mask_count(task):
    """The combos a block's task keeps (:func:`barsweep.pipeline.run.blocks.block_combos`)."""
    return int(holds(task.constraints, box_combos(task.axes)).sum())


@pytest.mark.parametrize("block_size", [1, 7, 40, 10_000])
def test_plan_counts_every_block_exactly(block_size):
    spec = spec_of("macd", {"fast": [2, 5, 9, 3], "slow": {"start": 4, "stop": 30, "step": 2},
                            "signal": [9, 1, 4]}, ["signal < fast", "fast * 3 > slow"])
    p = plan(spec, "o.zarr", block_size)
    grid = spec.param_grid
    assert p.n_blocks == 2 * grid.n_blocks(p.chunks) and p.n_combos_exact
    assert len(p.tasks) == len(p.task_combos)
    ids = sorted([t.block_id for t in p.tasks] + list(p.excluded))
    assert ids == list(range(p.n_blocks))
    for task, n in zip(p.tasks, p.task_combos, strict=True):
        assert n == mask_count(task) > 0
    per_block = {}
    for b, index in grid.blocks(p.chunks):
        per_block[b] = int(grid.mask(grid.combos(index)).sum())
    per_symbol = grid.n_blocks(p.chunks)
    for block_id in p.excluded:
        assert per_block[block_id % per_symbol] == 0
    assert p.n_combos == 2 * grid.count_valid()
    assert [t.bars.symbol for t in p.tasks] == ["A"] * (len(p.tasks) // 2) + ["B"] * (
        len(p.tasks) // 2)


def test_plan_regions_are_the_grid_blocks():
    spec = spec_of("ema_cross", {"fast": {"start": 2, "stop": 40, "step": 3},
                                 "slow": [50, 10, 30, 20]}, ["fast < slow"])
    p = plan(spec, "o.zarr", 6)
    grid = p.grid
    blocks = dict(grid.blocks(p.chunks))
    per_symbol = grid.n_blocks(p.chunks)
    for task in p.tasks:
        index = blocks[task.block_id % per_symbol]
        assert task.region[1:] == index
        assert task.region[0] == slice(task.block_id // per_symbol,
                                       task.block_id // per_symbol + 1)
        for (name, values), (axis_name, axis), sl in zip(task.axes, grid.axes, index,
                                                         strict=True):
            assert name == axis_name and np.array_equal(values, axis[sl])


def _planned(spec, block_size):
    tracemalloc.start()
    try:
        result = plan(spec, "o.zarr", block_size)
        return result, tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_planning_a_billion_combos_is_lazy():
    # 31,622^2 = 999,950,884 combos: enumerating them took minutes and gigabytes
    n = 31_622
    spec = spec_of("ema_cross", {"fast": {"start": 2, "stop": n + 1, "step": 1},
                                 "slow": {"start": 2, "stop": n + 1, "step": 1}},
                   ["fast < slow"], symbols=["A"])
    grid = spec.param_grid
    estimate, exact = grid.estimate_valid()
    assert (estimate, exact) == (n * (n - 1) // 2, True)
    block = auto_block_size(estimate, 26_280, 2)
    for block_size in (block, 65_536):
        p, peak_mib = _planned(spec, block_size)
        assert peak_mib < 200, (block_size, peak_mib)
        assert p.n_combos == n * (n - 1) // 2 and p.n_combos_exact
        assert len(p.tasks) + len(p.excluded) == p.n_blocks
        for i in (0, len(p.tasks) // 2, -1):
            assert p.task_combos[i] == mask_count(p.tasks[i])


def test_planning_a_three_axis_billion_stays_bounded():
    r = {"start": 2, "stop": 1001, "step": 1}
    spec = spec_of("macd", {"fast": r, "slow": r, "signal": {"start": 1, "stop": 1000, "step": 1}},
                   ["signal < fast"], symbols=["A"])  # and macd's fast < slow: 3 axes read
    p, peak_mib = _planned(spec, 1 << 20)
    assert peak_mib < 200
    exact = sum((f - 1) * (1001 - f) for f in range(2, 1002))  # signal < fast < slow
    assert p.n_combos == exact if p.n_combos_exact else exact < p.n_combos < 1.1 * exact
    for i in (0, len(p.tasks) // 3, -1):
        n = mask_count(p.tasks[i])
        assert p.task_combos[i] >= n > 0
