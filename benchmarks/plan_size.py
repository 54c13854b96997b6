"""Planning large grids: validation and plan() time and peak memory, never enumerating.

    python benchmarks/plan_size.py [REPEATS=3]

Each case is a spec whose constraints keep part of a 10^9 or 10^10-combo box (the
latter with ``run.max_combos`` raised); ``plan()`` decides every block by interval
bounds and counts the mixed ones within a fixed budget. Reported: the median wall time
of spec validation (``parse_spec``, whose ``has_valid`` check also bisects), of
``Grid.estimate_valid`` (what ``auto_block_size`` is fed) and of ``plan()`` at the
auto block size (26,280 bars, 2 workers) and at 65,536 combos per block, then the
peak traced allocation of one ``plan()`` (tracemalloc, a separate run) and the
process's peak RSS. Exits 1 if a plan takes over 30 s or traces over 200 MiB.
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
import tracemalloc

N_BARS, N_WORKERS = 26_280, 2
LIMIT_S, LIMIT_MIB = 30.0, 200.0


def axis(start: int, stop: int) -> dict:
    return {"start": start, "stop": stop, "step": 1}


CASES = {  # name: (strategy, grid, constraints, run.max_combos)
    "ema_cross 31,622^2 fast<slow (1.0e9)": (
        "ema_cross", {"fast": axis(2, 31_623), "slow": axis(2, 31_623)}, ["fast < slow"],
        10**9),
    "macd 1000^3 fast<slow (1e9)": (
        "macd", {"fast": axis(2, 1001), "slow": axis(2, 1001), "signal": axis(1, 1000)}, [],
        10**9),
    "macd 1000^3 signal<fast<slow (1e9)": (
        "macd", {"fast": axis(2, 1001), "slow": axis(2, 1001), "signal": axis(1, 1000)},
        ["signal < fast"], 10**9),
    "ema_cross 31,622^2 x 10 stops (1.0e10)": (
        "ema_cross", {"fast": axis(2, 31_623), "slow": axis(2, 31_623),
                      "stop_loss": [0.01 * k for k in range(1, 11)]}, ["fast < slow"], 10**10),
    "macd 2154^3 signal<fast<slow (1.0e10)": (
        "macd", {"fast": axis(2, 2155), "slow": axis(2, 2155), "signal": axis(1, 2154)},
        ["signal < fast"], 10**10),
}


def timed(fn, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> int:
    from barsweep.pipeline.config.model import parse_spec
    from barsweep.pipeline.run.plan import auto_block_size, plan

    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    failed = False
    print(f"{'case':42} {'size':>15} {'valid (est.)':>15} {'parse s':>8} {'est. s':>7} "
          f"{'block':>8} {'blocks':>7} {'tasks':>7} {'plan s':>7} {'exact':>5} "
          f"{'64k plan s':>10} {'peak MiB':>8}")
    for name, (strategy, grid_spec, constraints, max_combos) in CASES.items():
        raw = {"data": {"store": "bars/", "symbols": ["BTCUSDT"], "timeframe": "1h"},
               "strategy": strategy, "grid": grid_spec, "constraints": constraints,
               "execution": {"direction": "long"}, "run": {"max_combos": max_combos}}
        parse_s, spec = timed(lambda raw=raw: parse_spec(raw), repeats)
        grid = spec.param_grid
        est_s, (estimate, _) = timed(grid.estimate_valid, repeats)
        block = auto_block_size(estimate, N_BARS, N_WORKERS)
        plan_s, p = timed(lambda spec=spec, block=block, grid=grid:
                          plan(spec, "out.zarr", block, grid), repeats)
        small_s, _ = timed(lambda spec=spec, grid=grid: plan(spec, "out.zarr", 65_536, grid),
                           repeats)
        tracemalloc.start()
        plan(spec, "out.zarr", 65_536, grid)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        failed |= max(plan_s, small_s) > LIMIT_S or peak > LIMIT_MIB
        print(f"{name:42} {grid.size:>15,} {estimate:>15,} {parse_s:>8.2f} {est_s:>7.2f} "
              f"{block:>8,} {p.n_blocks:>7,} {len(p.tasks):>7,} {plan_s:>7.2f} "
              f"{'yes' if p.n_combos_exact else 'bound':>5} {small_s:>10.2f} {peak:>8.1f}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"process peak RSS {rss:.0f} MiB; limits: {LIMIT_S:.0f} s per plan, "
          f"{LIMIT_MIB:.0f} MiB traced")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
