"""What a results store's checks cost: a block's write and ``barsweep rank`` of a store
of ~1M combos, side by side with the code of another revision (default ``main``).

    python benchmarks/store_checks.py [--base REV] [--combos 1000] [--rounds 3]

Each side runs in fresh interpreters: the current tree, and ``REV`` exported with
``git archive`` into a temporary folder (its ``barsweep`` first on ``sys.path``). Each
makes a store of one symbol over a ``combos x combos`` grid (blocks of ``combos**2 /
8`` combos, the PBO segment sums of the default 10 segments) and writes every block
with random metrics (``write_block``, each timed); then, ``--rounds`` times, the two
sides alternating, a process times ``barsweep rank STORE --by sharpe --json`` on its
side's store (in-process, twice after one untimed rank). Prints a Markdown table.
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


def child(kind: str, job: dict) -> None:
    """With the barsweep on ``sys.path``: make and write a store (``make``), or rank it
    (``rank``); emit the seconds."""
    if kind == "rank":
        emit({"ranks": ranks(job["store"], 2)})
        return
    import numpy as np

    from barsweep.engine import METRICS
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
    emit({"writes": writes, "bytes": dir_size(path)[0],
          "crc32c": "crc32c" in (Path(path) / "sharpe" / "zarr.json").read_text()})


def ranks(path: str, n: int) -> list[float]:
    """Seconds of ``n`` ranks of the store at ``path``, after one untimed (imports)."""
    from barsweep.pipeline.cli import main

    seconds = []
    for i in range(n + 1):
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["rank", path, "--by", "sharpe", "--json"]) == 0
        if i:
            seconds.append(time.perf_counter() - t0)
    return seconds


def side_env(rev: str | None, work: Path) -> dict:
    """The environment of a side's processes: ``rev`` exported first on the path."""
    if rev is None:
        return {}
    pkg = work / "base" / "barsweep"
    pkg.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(pkg)], input=archive, check=True)
    return {"PYTHONPATH": str(work / "base")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="main")
    parser.add_argument("--combos", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child")
    parser.add_argument("--job")
    args = parser.parse_args()
    if args.child:
        child(args.child, json.loads(args.job))
        return
    rows = []
    sides = ((f"{args.base} (no checks)", args.base), ("this tree", None))
    with tempfile.TemporaryDirectory(prefix="store-checks-", dir=os.environ.get("TMPDIR")) as tmp:
        envs, made, timed = {}, {}, {label: [] for label, _ in sides}
        for label, rev in sides:
            envs[label] = side_env(rev, Path(tmp))
            store = Path(tmp) / f"store-{len(made)}"
            store.mkdir()
            made[label] = run_child(Path(__file__), "make", {"combos": args.combos,
                                                             "dir": str(store)}, envs[label])
            made[label]["store"] = str(store / "r.zarr")
        for _ in range(args.rounds):
            for label, _ in sides:
                timed[label] += run_child(Path(__file__), "rank", {"store": made[label][
                    "store"]}, envs[label])["ranks"]
        for label, _ in sides:
            record = made[label]
            write, rank = repeat_stats(record["writes"]), repeat_stats(timed[label])
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
                 f"rank --by sharpe s, median / best of {2 * args.rounds}", "store MiB",
                 "load while writing"], rows))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main()
