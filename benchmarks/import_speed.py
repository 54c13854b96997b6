"""How long ``barsweep data import`` takes against pyarrow's own read of the same file.

    python benchmarks/import_speed.py [--rows 2000000] [--repeat 3] [--kinds csv parquet]

Writes a 1-minute OHLCV file of ``--rows`` bars to a temporary directory, as CSV (times
as ISO text like ``2020-01-01T00:00:00Z``, prices with up to 6 decimals) and as Parquet
(time a ``timestamp[ns, UTC]`` column, prices float64). Then, in a fresh child process
per measurement (so one does not warm the other's caches or heap), times ``--repeat``
runs, after one untimed warm-up run, of

* ``pyarrow``: ``pyarrow.csv.read_csv`` / ``pyarrow.parquet.read_table`` of the file, and
* ``barsweep``: `barsweep.datasets.importer.import_file` of it (what the CLI's
  ``barsweep data import`` calls: every check, and the store file written), with
  ``replace=True`` into a temporary store,

and prints a markdown table of best and median seconds with the ratio of the bests and
``os.getloadavg()`` before each measurement (the machine may be shared: compare ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JSON_TAG = "IMPORT_JSON "
START = 1_577_836_800  # 2020-01-01T00:00:00Z


def write_files(directory: Path, n_rows: int, seed: int = 7) -> dict[str, Path]:
    """Write ``bars.csv`` and ``bars.parquet`` (n_rows 1-minute bars) into `directory`."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    close = np.round(100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.001, n_rows))), 6)
    open_ = np.round(np.r_[close[0], close[:-1]], 6)
    spread = np.round(np.abs(rng.normal(0.0, 0.05, (2, n_rows))), 6)
    high = np.round(np.maximum(open_, close) + spread[0], 6)
    low = np.round(np.minimum(open_, close) - spread[1], 6)
    volume = np.round(rng.exponential(10.0, n_rows), 4)
    ts_ns = (START + 60 * np.arange(n_rows, dtype=np.int64)) * 10**9
    time_col = pa.array(ts_ns, type=pa.int64()).view(pa.timestamp("ns", tz="UTC"))
    prices = {"open": open_, "high": high, "low": low, "close": close, "volume": volume}
    seconds = pa.array(ts_ns // 10**9, type=pa.int64()).view(pa.timestamp("s", tz="UTC"))
    iso = pc.strftime(seconds, format="%Y-%m-%dT%H:%M:%SZ")
    text = pa.table({"time": iso, **prices})
    paths = {"csv": directory / "bars.csv", "parquet": directory / "bars.parquet"}
    with open(paths["csv"], "wb") as fh:
        fh.write((",".join(text.column_names) + "\n").encode())
        options = pacsv.WriteOptions(include_header=False, quoting_style="none")
        pacsv.write_csv(text, fh, options)
    pq.write_table(pa.table({"time": time_col, **prices}), paths["parquet"])
    return paths


def run_pyarrow(path: Path) -> int:
    """Read `path` with pyarrow alone; the number of rows."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = pacsv.read_csv(path) if path.suffix == ".csv" else pq.read_table(path)
    return table.num_rows


def run_barsweep(path: Path, store: Path) -> int:
    """Import `path` into `store` as `import_file` does for the CLI; the rows written."""
    from barsweep.datasets.importer import import_file

    return import_file(path, store, "BTCUSDT", "1m", replace=True).n_rows


def child(variant: str, path: Path, repeat: int) -> None:
    """Time `repeat` runs of `variant` on `path` in this process; print them as JSON."""
    if variant == "barsweep":
        import barsweep.datasets.importer  # noqa: F401 - import time is not measured
    else:
        import pyarrow.csv  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    seconds = []
    with tempfile.TemporaryDirectory(prefix="import-speed-store-") as store:
        for _ in range(repeat + 1):  # the first run warms up (lazy imports) and is dropped
            t0 = time.perf_counter()
            rows = run_barsweep(path, Path(store)) if variant == "barsweep" else run_pyarrow(path)
            seconds.append(time.perf_counter() - t0)
    print(JSON_TAG + json.dumps({"seconds": seconds[1:], "rows": rows}), flush=True)


def measure(variant: str, path: Path, repeat: int) -> dict:
    """Run `child` in a fresh interpreter; its times, with the load average before."""
    load = os.getloadavg()[0]
    cmd = [sys.executable, __file__, "--child", variant, str(path), "--repeat", str(repeat)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    line = next(x for x in out.splitlines() if x.startswith(JSON_TAG))
    result = json.loads(line[len(JSON_TAG):])
    result["load"] = load
    return result


def table_rows(kind: str, pa_result: dict, bs_result: dict) -> str:
    """One markdown row: best and median of each variant, the ratio of the bests."""
    pa_s, bs_s = pa_result["seconds"], bs_result["seconds"]
    ratio = min(bs_s) / min(pa_s)
    return (
        f"| {kind} | {min(pa_s):.3f} | {statistics.median(pa_s):.3f} | {min(bs_s):.3f} | "
        f"{statistics.median(bs_s):.3f} | {ratio:.1f}x | "
        f"{pa_result['load']:.2f} / {bs_result['load']:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kinds", nargs="+", default=["csv", "parquet"],
                        choices=["csv", "parquet"])
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), args.repeat)
        return
    with tempfile.TemporaryDirectory(prefix="import-speed-") as directory:
        paths = write_files(Path(directory), args.rows)
        lines = [
            f"{args.rows:,} 1-minute bars, best and median of {args.repeat} runs (seconds), "
            "load average (1 min) before each",
            "",
            "| file | pyarrow best | pyarrow median | barsweep best | barsweep median | "
            "barsweep / pyarrow | load pa / bs |",
            "|---|---|---|---|---|---|---|",
        ]
        for kind in args.kinds:
            pa_result = measure("pyarrow", paths[kind], args.repeat)
            bs_result = measure("barsweep", paths[kind], args.repeat)
            if bs_result["rows"] != args.rows:
                raise SystemExit(f"{kind}: imported {bs_result['rows']} rows, not {args.rows}")
            lines.append(table_rows(kind, pa_result, bs_result))
        print("\n".join(lines))


if __name__ == "__main__":
    main()
