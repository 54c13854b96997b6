"""What limit and stop entry orders cost a sweep: ema_cross, 1,140 combos on 26,280
synthetic bars, next-open fills both ways with a 2% stop, at market and with limit and
stop orders 0.2% from the close valid 5 bars; best of 3 after a compile, one process.

    NUMBA_NUM_THREADS=1 python benchmarks/entry_orders.py
"""

from __future__ import annotations

import time

import numpy as np

from barsweep.engine import Execution, get_strategy, sweep_block

N_BARS = 26_280
BASE = dict(fill="next_open", direction="both", fees=0.001, stop_loss=0.02)
CASES = {"market": {},
         "limit 0.2%": {"entry_order": {"type": "limit", "offset": 0.002, "valid_bars": 5}},
         "stop 0.2%": {"entry_order": {"type": "stop", "offset": 0.002, "valid_bars": 5}}}


def synthetic_bars(n: int, seed: int = 7) -> dict[str, np.ndarray]:
    """A random walk's OHLC bars."""
    rng = np.random.default_rng(seed)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    open_ = np.r_[close[0], close[:-1]] * (1 + rng.normal(0, 0.001, n))
    high = np.maximum(open_, close) * (1 + np.abs(rng.normal(0, 0.003, n)))
    low = np.minimum(open_, close) * (1 - np.abs(rng.normal(0, 0.003, n)))
    return dict(open=open_, high=high, low=low, close=close)


def main() -> None:
    bars = synthetic_bars(N_BARS)
    fast, slow = np.meshgrid(np.arange(2, 40), np.arange(10, 100, 3), indexing="ij")
    params = dict(fast=fast.ravel(), slow=slow.ravel())
    n_combos = fast.size
    strategy = get_strategy("ema_cross")
    market = None
    for name, extra in CASES.items():
        execution = Execution(**BASE, **extra)
        sweep_block(strategy, bars, params, execution, 8760.0)  # compile
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            sweep_block(strategy, bars, params, execution, 8760.0)
            times.append(time.perf_counter() - t0)
        best = min(times)
        market = market or best
        print(f"{name:12s} {n_combos} combos x {N_BARS} bars: {best:.3f} s "
              f"({n_combos * N_BARS / best / 1e6:.0f} M combo-bars/s), "
              f"{best / market:.2f}x the market's time")


if __name__ == "__main__":
    main()
