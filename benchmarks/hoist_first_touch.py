"""The indicator table's first touch: one process hoists the same ema_cross block (17 fast
x 2,001 slow periods: 2,018 rows x 26,280 bars, 424 MB) six times, after a tiny hoist that
loads the compiled indicator functions; the first big table pays the fresh memory's page
faults, the later ones reuse what the first freed.

    python benchmarks/hoist_first_touch.py
"""

import time

import numpy as np

from barsweep.engine import get_strategy
from barsweep.engine.core.hoist import hoist


def main() -> None:
    rng = np.random.default_rng(7)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, 26_280)))
    bars = dict(open=close, high=close, low=close, close=close)
    strategy = get_strategy("ema_cross")
    fast, slow = np.meshgrid(np.arange(2, 19), np.arange(502, 2503), indexing="ij")
    params = dict(fast=fast.ravel(), slow=slow.ravel())
    hoist(strategy, bars, {k: v[:3] for k, v in params.items()}, 3)
    for k in range(6):
        t0 = time.perf_counter()
        ind, _ = hoist(strategy, bars, params, len(params["fast"]))
        print(f"hoist {k}: {ind.shape[0]:,} rows x {ind.shape[1]:,} bars in "
              f"{time.perf_counter() - t0:.3f} s")
        del ind


if __name__ == "__main__":
    main()
