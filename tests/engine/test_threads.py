"""The serial sweep kernel split over threads (engine.core.sweep.run_kernel) gives the very
same metrics and segment sums as one thread."""

import numba
import numpy as np
import pytest
from helpers.bars import random_bars

from barsweep.engine import Execution, get_strategy, sweep_block
from barsweep.engine.core.sweep import PIECE_COMBOS


@pytest.fixture
def threads():
    before = numba.get_num_threads()
    yield lambda n: numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    numba.set_num_threads(before)


def test_threads_give_the_same_results_as_one(threads):
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread here (NUMBA_NUM_THREADS=1)")
    bars = random_bars(3_000, seed=3)
    fast, slow = np.meshgrid(np.arange(2, 30), np.arange(10, 60, 3), indexing="ij")
    params = dict(fast=fast.ravel(), slow=slow.ravel())
    assert params["fast"].size > 4 * PIECE_COMBOS  # several pieces per thread
    execution = Execution(fill="next_open", fees=0.001, direction="both")
    results = []
    for n in (1, 2):
        threads(n)
        seg_sums = np.full((params["fast"].size, 10, 2), np.nan)
        out = sweep_block(get_strategy("ema_cross"), bars, params, execution, 8760,
                          seg_sums=seg_sums)
        spans = sweep_block(get_strategy("ema_cross"), bars, params, execution, 8760,
                            spans=[(0, 1_000), (1_000, 3_000)])
        results.append((out, seg_sums, spans))
    for one, two in zip(*results, strict=True):
        np.testing.assert_array_equal(one, two)
    assert not np.isnan(results[1][1]).any()
