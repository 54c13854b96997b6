"""A block planned for a memory budget: its estimate against the peak RSS it takes.

    python benchmarks/memory.py [BUDGET_MIB=256 ...]

For each budget, ``ema_cross`` (fast 2..101 x slow 100..2000 step 2, ``fast < slow``)
on 200,000 random-walk bars with 10 PBO segments is planned as a run would
(``auto_block_size`` for 2 workers, then cut to the budget); the first (fullest) block
is then swept in a fresh process, as a worker would run it (``block_metrics``' arrays
and ``sweep_block``), and that process's peak RSS (sampled every millisecond) over its
RSS before the block (imports done, kernel compiled) is set against the estimate.
Exits 1 if a block's RSS passes its budget. Small enough for a minute.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import psutil

N_BARS, SEGMENTS = 200_000, 10
GRID = {"fast": {"start": 2, "stop": 101, "step": 1},
        "slow": {"start": 100, "stop": 2000, "step": 2}}


def planned(budget: int) -> tuple[tuple[int, ...], int]:
    """The chunks of the case at ``budget`` bytes and their estimate in bytes."""
    from barsweep.pipeline.config.model import parse_spec
    from barsweep.pipeline.run.plan import auto_block_size, block_chunks, chunk_cost

    spec = parse_spec({"data": {"store": "b/", "symbols": ["A"], "timeframe": "1m",
                                "year_days": 365}, "strategy": "ema_cross", "grid": GRID,
                       "constraints": ["fast < slow"],
                       "analysis": {"pbo_segments": SEGMENTS}})
    grid = spec.param_grid
    size = auto_block_size(grid.size, N_BARS, 2)
    chunks = block_chunks(spec, grid, size, N_BARS, budget)
    return chunks, chunk_cost(spec, grid, N_BARS)(chunks)


def sweep_one(chunks: tuple[int, ...]) -> int:
    """Sweep the first block of ``chunks`` here; the bytes of RSS it added at its peak."""
    import numpy as np

    from barsweep.engine import N_METRICS, Execution, get_strategy, sweep_block

    close = 100 + np.cumsum(np.random.default_rng(0).normal(size=N_BARS))
    bars = dict(open=close, high=close + 0.5, low=close - 0.5, close=close)
    strategy = get_strategy("ema_cross")
    sweep_block(strategy, {k: v[:500] for k, v in bars.items()},
                {"fast": np.array([2]), "slow": np.array([100])}, Execution(), 525_600)
    process = psutil.Process()
    before, peak, done = process.memory_info().rss, [0], threading.Event()

    def watch() -> None:  # RSS every millisecond: the peak of this block, not of imports
        while not done.wait(0.001):
            peak[0] = max(peak[0], process.memory_info().rss)

    watcher = threading.Thread(target=watch)
    watcher.start()
    fast, slow = np.meshgrid(np.arange(2, 2 + chunks[0]), np.arange(100, 100 + 2 * chunks[1], 2),
                             indexing="ij")
    params = {"fast": fast.ravel(), "slow": slow.ravel()}
    metrics = np.full((N_METRICS, 1, fast.size), np.nan)  # the task's region
    sums = np.empty((fast.size, SEGMENTS, 2))
    out = sweep_block(strategy, bars, params, Execution(), 525_600, seg_sums=sums)
    metrics[:, 0] = out.T
    done.set()
    watcher.join()
    return max(peak[0], process.memory_info().rss) - before


def main(argv: list[str]) -> int:
    if argv[:1] == ["--sweep"]:
        print(sweep_one(tuple(json.loads(argv[1]))))
        return 0
    rows = []
    for mib in [int(a) for a in argv] or [64, 256, 1024]:
        chunks, estimate = planned(mib * 2**20)
        rss = int(subprocess.run([sys.executable, __file__, "--sweep", json.dumps(chunks)],
                                 capture_output=True, text=True, check=True).stdout)
        rows.append((mib, chunks, estimate / 2**20, rss / 2**20))
        print(f"budget {mib:5d} MiB  block {chunks}  estimate {estimate / 2**20:7.1f} MiB  "
              f"peak RSS added {rss / 2**20:7.1f} MiB  ({rss / estimate:.2f} of it)", flush=True)
    return 0 if all(rss <= mib for mib, _, _, rss in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
