"""A 1M-combo ema_cross sweep on 26,280 bars, side by side in one run: the bare kernel
(``sweep_block()``, 2 numba threads) and ``barsweep run`` end to end (``run_spec`` on a
LocalCluster of 2 single-threaded workers: plan, Zarr store, warm-up, compute, writes),
then ranking the top 20 from the store.

    NUMBA_NUM_THREADS=2 python benchmarks/pipeline_vs_kernel.py [N_FAST=500]

N_FAST fast periods (2..) x 2,000 slow periods (502..2501) combos.
"""

from __future__ import annotations

import sys
import tempfile
import time

import numpy as np

N_BARS = 26_280


def main() -> None:
    import numba

    from barsweep.datasets import mapped_arrays, write_synth
    from barsweep.engine import Execution, get_strategy, sweep_block
    from barsweep.pipeline.analysis.rank import rank
    from barsweep.pipeline.config.model import parse_spec
    from barsweep.pipeline.run.cluster import connect
    from barsweep.pipeline.run.orchestrate import run_spec

    n_fast = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    store = tempfile.mkdtemp(prefix="barsweep-pvk-")
    write_synth(store, "BTCUSDT", "1h", N_BARS, 7)
    spec = parse_spec({
        "data": {"store": store, "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": {"start": 2, "stop": 1 + n_fast, "step": 1},
                 "slow": {"start": 502, "stop": 2501, "step": 1}},
        "execution": {"fill": "close", "fees": 0.001},
        "run": {"out": store + "/results.zarr"},
    })
    bars = mapped_arrays(store, "BTCUSDT", "1h")
    fast, slow = np.meshgrid(np.arange(2, 2 + n_fast), np.arange(502, 2502), indexing="ij")
    params = dict(fast=fast.ravel(), slow=slow.ravel())
    n = len(params["fast"])
    strategy, execution = get_strategy("ema_cross"), Execution(fill="close", fees=0.001)
    sweep_block(strategy, bars, {k: v[:2] for k, v in params.items()}, execution, 8760.0)
    numba.set_num_threads(2)
    t0 = time.perf_counter()
    sweep_block(strategy, bars, params, execution, 8760.0)
    kernel_s = time.perf_counter() - t0
    print(f"kernel, 2 threads: {n:,} combos in {kernel_s:.1f} s, "
          f"{n * N_BARS / kernel_s / 1e6:.0f} M combo-bars/s", flush=True)
    with connect("local", n_workers=2) as client:
        t0 = time.perf_counter()
        run_spec(spec, client=client)
        run_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    rank(store + "/results.zarr", by="sharpe", top=20)
    rank_s = time.perf_counter() - t0
    print(f"barsweep run end to end, 2 workers: {run_s:.1f} s, "
          f"{n * N_BARS / run_s / 1e6:.0f} M combo-bars/s; pipeline/kernel {kernel_s / run_s:.2f}")
    print(f"rank top 20 of {n:,}: {rank_s:.2f} s = {rank_s / run_s:.3f} of the run")


if __name__ == "__main__":
    main()
