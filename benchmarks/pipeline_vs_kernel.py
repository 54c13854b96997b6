"""A 1M-combo ema_cross sweep on 26,280 bars, side by side in one run: the bare kernel
(``sweep()``, 2 numba threads) and ``barsweep run`` end to end (``run_sweep`` on a
LocalCluster of 2 single-threaded workers: plan, Zarr store, warm-up, compute, writes),
then ranking the top 20 from the store.

    NUMBA_NUM_THREADS=2 python benchmarks/pipeline_vs_kernel.py [N_FAST=500]

N_FAST fast periods x 2,000 slow periods (502..2501) combos.
"""

import sys
import tempfile
import time

import numpy as np

if __name__ == "__main__":
    import numba

    from barsweep.datasets import mapped_arrays, write_synth
    from barsweep.engine import Execution, get_strategy, sweep
    from barsweep.pipeline.cluster import connect
    from barsweep.pipeline.rank import rank
    from barsweep.pipeline.run import run_sweep
    from barsweep.pipeline.spec import parse_spec

    d = tempfile.mkdtemp()
    write_synth(d, "BTCUSDT", "1h", 26280, 7)
    nf = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    grid = {
        "fast": {"start": 2, "stop": 1 + nf, "step": 1},
        "slow": {"start": 502, "stop": 2501, "step": 1},
    }
    spec = parse_spec(
        {
            "data": {"store": d, "symbols": ["BTCUSDT"], "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": grid,
            "execution": {"fill": "close", "fees": 0.001},
            "run": {"out": d + "/r.zarr"},
        }
    )
    bars = mapped_arrays(d, "BTCUSDT", "1h")
    f, s = np.meshgrid(np.arange(2, 2 + nf), np.arange(502, 2502), indexing="ij")
    p = dict(fast=f.ravel(), slow=s.ravel())
    n = len(p["fast"])
    ex = Execution(fill="close", fees=0.001)
    sweep(get_strategy("ema_cross"), bars, {k: v[:2] for k, v in p.items()}, ex, 8760)
    numba.set_num_threads(2)
    t = time.perf_counter()
    sweep(get_strategy("ema_cross"), bars, p, ex, 8760)
    dk = time.perf_counter() - t
    print(
        f"kernel, 2 threads: {n} combos {dk:.1f} s, {n * 26280 / dk / 1e6:.0f} M combo-bars/s",
        flush=True,
    )
    with connect("local", n_workers=2) as client:
        t = time.perf_counter()
        sm = run_sweep(spec, client, progress=False)
        dp = time.perf_counter() - t
    t = time.perf_counter()
    top = rank(d + "/r.zarr", by="sharpe", top=20)
    dr = time.perf_counter() - t
    print(
        f"barsweep run end to end (plan, store, warm-up, compute, writes), 2 workers: {dp:.1f} s, {n * 26280 / dp / 1e6:.0f} M combo-bars/s; pipeline/kernel {dk / dp:.2f}"
    )
    print(f"rank top 20 of {n}: {dr:.2f} s = {dr / dp:.3f} of the run")
