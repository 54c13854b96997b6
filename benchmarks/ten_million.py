"""10M combos on 26,280 bars through ``barsweep run`` (2 workers): wall time, throughput
and peak memory of the driver and the workers, and the Zarr store's size.

    python benchmarks/ten_million.py [N_FAST=5000]

N_FAST fast periods (2..) x 2,000 slow periods (502..2501): 10M combos by default.
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time
from pathlib import Path

N_BARS = 26_280


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    from barsweep.datasets import write_synth
    from barsweep.pipeline.analysis.rank import rank
    from barsweep.pipeline.config.model import parse_spec
    from barsweep.pipeline.run.cluster import connect
    from barsweep.pipeline.run.orchestrate import run_spec

    n_fast = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    store = tempfile.mkdtemp(prefix="barsweep-10m-")
    write_synth(store, "BTCUSDT", "1h", N_BARS, 7)
    out = store + "/results.zarr"
    spec = parse_spec({
        "data": {"store": store, "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": {"start": 2, "stop": 1 + n_fast, "step": 1},
                 "slow": {"start": 502, "stop": 2501, "step": 1}},
        "execution": {"fill": "close", "fees": 0.001},
        "run": {"out": out},
    })
    with connect("local", n_workers=2) as client:
        t0 = time.perf_counter()
        summary = run_spec(spec, client=client)
        run_s = time.perf_counter() - t0
        workers = client.run(peak_rss_mib)
    t0 = time.perf_counter()
    top = rank(out, by="sharpe", top=20)
    rank_s = time.perf_counter() - t0
    size = sum(f.stat().st_size for f in Path(out).rglob("*") if f.is_file())
    print(f"{summary.n_combos:,} combos x {N_BARS:,} bars in {summary.n_blocks} blocks: "
          f"{run_s:.1f} s, {summary.n_combos * N_BARS / run_s / 1e6:.0f} M combo-bars/s")
    print(f"peak RSS: driver {peak_rss_mib():.0f} MiB, workers "
          f"{', '.join(f'{v:.0f}' for v in workers.values())} MiB; Zarr store "
          f"{size / 2**20:.0f} MiB ({size / summary.n_combos:.1f} B/combo)")
    print(f"rank top 20: {rank_s:.2f} s; best sharpe {top['sharpe'].iloc[0]:.4f}")


if __name__ == "__main__":
    main()
