"""An ema_cross sweep on 26,280 bars, side by side in one run, on 2 cores: a tight
hand-written numba kernel (the floor: returns, Sharpe sums, drawdown and trades only,
``kernel_probe.tight`` over the combos in 2 threads, its indicators hoisted by barsweep),
the bare barsweep kernel with every metric (``sweep_block()``, 2 numba threads), and
``barsweep run`` end to end (``run_spec`` on a LocalCluster of 2 single-threaded workers:
plan, Zarr store, warm-up, compute, writes); then ranking the top 20 from the store.

    NUMBA_NUM_THREADS=2 python benchmarks/pipeline_vs_kernel.py [N_FAST=500] [--repeat 3]

N_FAST fast periods (2..) x 2,000 slow periods (502..2501) combos (139: 278,000 combos).
The three are timed in turn ``--repeat`` times (medians); ratios are time / tight time's
inverse, i.e. the tight kernel's time over each one's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numba import njit, prange

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernel_probe import tight  # noqa: E402

N_BARS = 26_280


@njit(parallel=True, cache=True)
def tight_parallel(close, ind, rows, fee, out, n_chunks):
    """``tight`` over ``n_chunks`` slices of the combos, one thread each."""
    n = rows.shape[0]
    for k in prange(n_chunks):
        lo, hi = k * n // n_chunks, (k + 1) * n // n_chunks
        tight(close, ind, rows[lo:hi], fee, out[lo:hi])


def time_tight(strategy, bars, params, n: int) -> tuple[float, float]:
    """Seconds of the tight kernel over ``params`` with its indicators hoisted first, and
    of the kernel alone."""
    from barsweep.engine.core.hoist import hoist

    t0 = time.perf_counter()
    ind, rows = hoist(strategy, bars, params, n)
    t1 = time.perf_counter()
    tight_parallel(bars["close"], ind, rows, 0.001, np.zeros((n, 4)), 64)
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1


def main() -> None:
    import numba

    from barsweep.datasets import mapped_arrays, write_synth
    from barsweep.engine import Execution, get_strategy, sweep_block
    from barsweep.pipeline.analysis.rank import rank
    from barsweep.pipeline.config.model import parse_spec
    from barsweep.pipeline.run.cluster import connect
    from barsweep.pipeline.run.orchestrate import run_spec

    parser = argparse.ArgumentParser()
    parser.add_argument("n_fast", nargs="?", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    store = tempfile.mkdtemp(prefix="barsweep-pvk-")
    write_synth(store, "BTCUSDT", "1h", N_BARS, 7)
    spec = {
        "data": {"store": store, "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": {"start": 2, "stop": 1 + args.n_fast, "step": 1},
                 "slow": {"start": 502, "stop": 2501, "step": 1}},
        "execution": {"fill": "close", "fees": 0.001},
    }
    bars = mapped_arrays(store, "BTCUSDT", "1h")
    fast, slow = np.meshgrid(np.arange(2, 2 + args.n_fast), np.arange(502, 2502),
                             indexing="ij")
    params = dict(fast=fast.ravel(), slow=slow.ravel())
    n = len(params["fast"])
    strategy, execution = get_strategy("ema_cross"), Execution(fill="close", fees=0.001)
    small = {k: v[:64] for k, v in params.items()}
    sweep_block(strategy, bars, small, execution, 8760.0)
    time_tight(strategy, bars, small, 64)
    numba.set_num_threads(2)
    times: dict[str, list[float]] = {"tight": [], "tight kernel alone": [], "kernel": [],
                                     "run": []}
    with connect("local", n_workers=2) as client:
        for k in range(args.repeat):
            tight_s, alone_s = time_tight(strategy, bars, params, n)
            times["tight"].append(tight_s)
            times["tight kernel alone"].append(alone_s)
            t0 = time.perf_counter()
            sweep_block(strategy, bars, params, execution, 8760.0)
            times["kernel"].append(time.perf_counter() - t0)
            out = f"{store}/results{k}.zarr"
            t0 = time.perf_counter()
            run_spec(parse_spec({**spec, "run": {"out": out}}), client=client)
            times["run"].append(time.perf_counter() - t0)
            print(", ".join(f"{name} {t[-1]:.2f} s" for name, t in times.items()), flush=True)
    med = {name: statistics.median(t) for name, t in times.items()}
    rate = {name: n * N_BARS / s / 1e6 for name, s in med.items()}
    alone = med["tight kernel alone"]
    print(f"{n:,} combos x {N_BARS:,} bars, medians of {args.repeat}: "
          f"tight (2 threads, hoist included) {med['tight']:.2f} s ({rate['tight']:.0f} M/s); "
          f"sweep_block every metric {med['kernel']:.2f} s ({rate['kernel']:.0f} M/s, "
          f"{med['tight'] / med['kernel']:.2f}x tight); barsweep run end to end "
          f"{med['run']:.2f} s ({rate['run']:.0f} M/s, {med['tight'] / med['run']:.2f}x tight; "
          f"pipeline/kernel {med['kernel'] / med['run']:.2f}); the tight kernel without its "
          f"hoist {alone:.2f} s: {alone / med['kernel']:.2f}x and {alone / med['run']:.2f}x")
    t0 = time.perf_counter()
    rank(f"{store}/results0.zarr", by="sharpe", top=20)
    print(f"rank top 20 of {n:,}: {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    main()
