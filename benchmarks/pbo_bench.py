"""Time ``barsweep.pipeline.analysis.robust.pbo`` on 1,000,000 random combos x S = 10 segments
(all 252 splits): the median of several runs (the goal: at most 10 s).

    .venv/bin/python benchmarks/pbo_bench.py [--combos N] [--segments S] [--repeat K]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from barsweep.pipeline.analysis.robust import pbo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--combos", type=int, default=1_000_000)
    parser.add_argument("--segments", type=int, default=10)
    parser.add_argument("--bars", type=int, default=2_520, help="bars in all")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    seg_n = np.full(args.segments, args.bars // args.segments)
    # sums of seg_n returns of mean ~0, std 1%: drawn directly, never combos x bars
    mean = rng.normal(0.0, 2e-4, size=(args.combos, 1))
    sum_r = rng.normal(mean * seg_n, 0.01 * np.sqrt(seg_n))
    sum_r2 = (0.01**2) * rng.chisquare(seg_n, size=(args.combos, args.segments))
    sum_r2 += sum_r**2 / seg_n  # keeps every segment's variance positive
    t0 = time.perf_counter()
    pbo(sum_r[:100], sum_r2[:100], seg_n)  # the kernels: from numba's cache, or compiled
    first = time.perf_counter() - t0
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        res = pbo(sum_r, sum_r2, seg_n)
        times.append(time.perf_counter() - t0)
    print(f"pbo: {args.combos:,} combos x S={args.segments}: {res.n_splits} splits "
          f"(sampled: {res.sampled}): median {statistics.median(times):.2f} s "
          f"of {args.repeat} (min {min(times):.2f}, max {max(times):.2f}); "
          f"PBO {res.pbo:.3f}; first call on 100 combos {first:.2f} s")


if __name__ == "__main__":
    main()
