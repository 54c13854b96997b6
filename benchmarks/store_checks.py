"""What a results store's checks cost: a block's write and ``barsweep rank`` of a store
of ~1M combos, side by side with the code of another revision (default ``main``).

    python benchmarks/store_checks.py [--base REV] [--combos 1000] [--repeat 3]

Each side runs in a fresh interpreter: the current tree, and ``REV`` exported with
``git archive`` into a temporary folder (its ``barsweep`` first on ``sys.path``). Each
makes a store of one symbol over a ``combos x combos`` grid (blocks of ``combos**2 /
8`` combos, the PBO segment sums of the default 10 segments), writes every block with
random metrics (``write_block``, each timed), then times ``barsweep rank STORE --by
sharpe --json`` (in-process, after one untimed rank), the median and best of
``--repeat``. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, dir_size, emit, fmt, header, repeat_stats, run_child, table

SEGMENTS = 10
BLOCKS = 8


def child(job: dict) -> None:
    """Make, write and rank one store with the barsweep on ``sys.path``; emit figures."""
    import numpy as np

    from barsweep.engine import METRICS
    from barsweep.pipeline.cli import main
    from barsweep.pipeline.run.results import SEGMENT_SUMS, create_store, write_block

    n = job["combos"]
    rows = n // BLOCKS
    path = str(Path(job["dir"]) / "r.zarr")
    axes = [("fast", np.arange(n, dtype=np.int64)), ("slow", np.arange(n, dtype=np.int64))]
    create_store(path, ["A"], axes, (rows, n), BLOCKS,
                 {"spec": "strategy: ema_cross\n", "barsweep_version": "bench",
                  "n_combos": n * n}, segments=SEGMENTS)
    rng = np.random.default_rng(0)
    writes = []
    for b in range(BLOCKS):
        values = {name: rng.normal(size=(1, rows, n)) for name in METRICS}
        values["ruined"] = np.zeros((1, rows, n))
        values["n_trades"] = rng.integers(1, 50, size=(1, rows, n)).astype(float)
        values.update({name: rng.normal(size=(1, SEGMENTS, rows, n)) for name in SEGMENT_SUMS})
        t0 = time.perf_counter()
        write_block(path, (slice(0, 1), slice(b * rows, (b + 1) * rows), slice(0, n)),
                    values, b)
        writes.append(time.perf_counter() - t0)
    from barsweep.pipeline.run.results import finish_store

    finish_store(path, {})
    argv = ["rank", path, "--by", "sharpe", "--json"]
    ranks = []
    for i in range(job["repeat"] + 1):
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(argv) == 0
        if i:  # the first one imports and warms the page cache
            ranks.append(time.perf_counter() - t0)
    emit({"writes": writes, "ranks": ranks, "bytes": dir_size(path)[0],
          "crc32c": "crc32c" in (Path(path) / "sharpe" / "zarr.json").read_text()})


def side(rev: str | None, combos: int, repeat: int, work: Path) -> dict:
    """One side's record: the current tree (``rev`` None) or ``rev`` exported."""
    env = {}
    if rev is not None:
        pkg = work / "base" / "barsweep"
        pkg.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(pkg)], input=archive, check=True)
        env["PYTHONPATH"] = str(work / "base")
    store_dir = work / ("base-store" if rev else "this-store")
    store_dir.mkdir()
    return run_child(Path(__file__), "side", {"combos": combos, "repeat": repeat,
                                               "dir": str(store_dir)}, env=env)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="main")
    parser.add_argument("--combos", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child")
    parser.add_argument("--job")
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.job))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="store-checks-", dir=os.environ.get("TMPDIR")) as tmp:
        for label, rev in ((f"{args.base} (no checks)", args.base), ("this tree", None)):
            record = side(rev, args.combos, args.repeat, Path(tmp))
            write, rank = repeat_stats(record["writes"]), repeat_stats(record["ranks"])
            rows.append([label, "yes" if record["crc32c"] else "no",
                         f"{fmt(write['median'], 3)} / {fmt(write['best'], 3)}",
                         f"{fmt(rank['median'], 2)} / {fmt(rank['best'], 2)}",
                         f"{record['bytes'] / 2**20:,.1f}",
                         f"{record['load_before']:.1f} → {record['load_after']:.1f}"])
    print(header("The results store's checks: cost of a block's write and of rank"))
    print(f"{args.combos**2:,} combos (1 symbol, {args.combos} x {args.combos}), "
          f"{BLOCKS} blocks of {args.combos**2 // BLOCKS:,} combos, {SEGMENTS} PBO "
          f"segments; random metrics.\n")
    print(table(["code", "crc32c", f"write_block s, median / best of {BLOCKS}",
                 f"rank --by sharpe s, median / best of {args.repeat}", "store MiB",
                 "load"], rows))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
