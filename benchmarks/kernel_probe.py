"""Side by side, one core: barsweep's ema_cross sweep kernel and a tight hand-written
numba kernel (the "floor": returns, Sharpe sums and drawdown only, no other metric).

    NUMBA_NUM_THREADS=1 python benchmarks/kernel_probe.py [--reps 7]

Prints the best of ``--reps`` runs of each and their ratio; used for the predictions
and outcomes in benchmarks/NOTES.md (ratios, because the machine is shared and noisy).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from numba import njit

from barsweep.engine import Execution, get_strategy, sweep_block
from barsweep.engine.core.hoist import hoist


@njit(cache=True)
def tight(close, ind, rows, fee, out):
    """Long-only ema_cross at the close with fees: sum r, sum r², max drawdown, trades."""
    n = close.shape[0]
    for c in range(rows.shape[0]):
        f = ind[rows[c, 0]]
        s = ind[rows[c, 1]]
        cash, pos, prev, peak, mdd = 10_000.0, 0.0, 10_000.0, 10_000.0, 0.0
        s_r = s_r2 = 0.0
        n_tr = 0
        for t in range(1, n):
            up = f[t - 1] < s[t - 1] and f[t] > s[t]
            down = f[t - 1] > s[t - 1] and f[t] < s[t]
            px = close[t]
            if pos == 0.0 and up:
                pos = cash / (px * (1 + fee))
                cash = 0.0
            elif pos > 0.0 and down:
                cash = pos * px * (1 - fee)
                pos = 0.0
                n_tr += 1
            eq = cash + pos * px
            r = eq / prev - 1.0
            s_r += r
            s_r2 += r * r
            prev = eq
            if eq > peak:
                peak = eq
            elif eq < peak:
                dd = eq / peak - 1.0
                if dd < mdd:
                    mdd = dd
        out[c, 0], out[c, 1], out[c, 2], out[c, 3] = s_r, s_r2, mdd, n_tr


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--bars", type=int, default=26_280)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, args.bars)))
    bars = dict(open=close, high=close, low=close, close=close)
    fast, slow = np.meshgrid(np.arange(2, 102), np.arange(10, 400, 4), indexing="ij")
    keep = fast < slow
    params = dict(fast=fast[keep][::4], slow=slow[keep][::4])
    n_combos = len(params["fast"])
    strategy = get_strategy("ema_cross")
    execution = Execution(fill="close", fees=0.001)
    ind, rows = hoist(strategy, bars, params, n_combos)
    out = np.zeros((n_combos, 4))
    tight(close, ind, rows[:2], 0.001, out)
    sweep_block(strategy, bars, {k: v[:2] for k, v in params.items()}, execution, 8760.0)
    best_tight = best_ours = float("inf")
    for _ in range(args.reps):
        t0 = time.perf_counter()
        tight(close, ind, rows, 0.001, out)
        best_tight = min(best_tight, time.perf_counter() - t0)
        t0 = time.perf_counter()
        sweep_block(strategy, bars, params, execution, 8760.0)
        best_ours = min(best_ours, time.perf_counter() - t0)
    work = n_combos * args.bars / 1e6
    print(f"{n_combos} combos x {args.bars} bars, best of {args.reps}: "
          f"tight {work / best_tight:.0f} M combo-bars/s, barsweep {work / best_ours:.0f} "
          f"M combo-bars/s (all metrics), barsweep/tight time {best_ours / best_tight:.2f}")


if __name__ == "__main__":
    main()
