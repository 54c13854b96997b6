"""What walk-forward costs against a plain sweep of the same grid, one core.

    NUMBA_NUM_THREADS=1 python benchmarks/walkforward_cost.py [--reps 5]

A walk-forward window runs its train and test bars only (indicators are hoisted once
over the whole series), so its cost is about (train + test) / step plain sweeps over
the windows' span; the issue's bound is (train + test) / step. Prints the best of
``--reps`` of each, their ratio and the bound.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from barsweep.engine import Execution, get_strategy, sweep_block
from barsweep.pipeline.config.windows import window_bounds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--train", type=int, default=4320)  # 180 days of 1h bars
    parser.add_argument("--test", type=int, default=1440)   # 60 days
    parser.add_argument("--step", type=int, default=1440)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, 26_280)))
    bars = dict(open=close, high=close * 1.003, low=close * 0.997, close=close)
    fast, slow = np.meshgrid(np.arange(2, 50), np.arange(10, 200, 4), indexing="ij")
    keep = fast < slow
    params = dict(fast=fast[keep], slow=slow[keep])
    windows = window_bounds(len(close), args.train, args.test, args.step)
    spans = [tuple(p) for a, b, c, d in windows.tolist() for p in ((a, b), (c, d))]
    strategy, execution = get_strategy("ema_cross"), Execution(fill="next_open", fees=0.001)

    def best(**kw) -> float:
        sweep_block(strategy, bars, params, execution, 8760.0, **kw)  # compiled or loaded
        times = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            sweep_block(strategy, bars, params, execution, 8760.0, **kw)
            times.append(time.perf_counter() - t0)
        return min(times)

    plain, walk = best(), best(spans=spans)
    bound = (args.train + args.test) / args.step
    run_bars = len(windows) * (args.train + args.test)
    print(f"{len(params['fast']):,} combos x {len(close):,} bars; {len(windows)} windows "
          f"(train {args.train}, test {args.test}, step {args.step} bars)")
    print(f"plain sweep {plain:.3f} s, walk-forward {walk:.3f} s: ratio {walk / plain:.2f} "
          f"(bound (train + test) / step = {bound:.2f}; bars run {run_bars / len(close):.2f}x)")


if __name__ == "__main__":
    main()
