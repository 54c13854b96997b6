"""Start time of the local cluster barsweep starts, TLS with a key made for the run
(``cluster.security: temporary``, the default) against plain TCP (``plain``), side by
side: the same ``connect()`` call, alternating which goes first, timed until the client
has run a function on every worker, then closed.

    python benchmarks/local_tls_start.py [REPS] [WORKERS]
"""

import os
import statistics
import sys
import time

from barsweep.pipeline.config.cluster import ClusterSpec
from barsweep.pipeline.run.cluster import connect


def once(security: str, workers: int) -> tuple[float, float]:
    """Seconds until the workers answer, and until the cluster is closed."""
    t0 = time.perf_counter()
    with connect(ClusterSpec(kind="local", security=security), n_workers=workers) as client:
        client.run(os.getpid)
        up = time.perf_counter() - t0
    return up, time.perf_counter() - t0


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    seconds: dict[str, list[tuple[float, float]]] = {"temporary": [], "plain": []}
    for i in range(reps):
        for mode in ("temporary", "plain") if i % 2 else ("plain", "temporary"):
            seconds[mode].append(once(mode, workers))
    print(f"load average {os.getloadavg()[0]:.1f}, {workers} workers, {reps} starts each")
    for mode, runs in seconds.items():
        ups = [u for u, _ in runs]
        print(f"{mode:9s} up: median {statistics.median(ups):.2f} s (min {min(ups):.2f}, "
              f"max {max(ups):.2f}); up and closed: median "
              f"{statistics.median([t for _, t in runs]):.2f} s")


if __name__ == "__main__":
    main()
