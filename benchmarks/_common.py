"""Helpers shared by the benchmark scripts: child processes, peak memory, the header,
and the conventions for repeated timings.

Only the standard library is imported at module level, so a child process can time
``import barsweep`` (and everything it pulls in) from a clean start.

Repeated timings
----------------
On a shared machine one sample says little (the same run of bench.py gave ema_cross
56x and 126x vectorbt), so every timing a benchmark reports follows one convention:

- run it ``n >= 3`` times and report the **median** and the **best** (minimum) of the
  samples, with ``n``; :func:`repeat_stats` computes them;
- the **spread** is the range, ``max - min`` of the samples (not an IQR, which says
  little for n of 3 to 5), shown as seconds and as a share of the median;
- ratios between two measurements are given from the medians and from the bests;
- the 1-minute load average (:func:`load_avg`) is read just before the first sample
  and just after the last (:func:`run_child` adds both to its record) and printed
  beside the figure, "before → after" (:func:`fmt_load`). It counts the benchmark's
  own processes too; a load above the usable cores before a case means it shared them.

:data:`STATS_COLUMNS` and :func:`stats_cells` give a table those columns, and
:data:`STATS_NOTE` is the sentence that explains them under the table::

    from _common import STATS_COLUMNS, STATS_NOTE, repeat_stats, stats_cells, table

    stats = repeat_stats([0.94, 1.02, 0.97])
    print(table(["case", *STATS_COLUMNS], [["a", *stats_cells(stats)]]))
    print(STATS_NOTE)
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYMBOL = "BTCUSDT"
TIMEFRAME = "1h"
SEED = 7
FEES = 0.001
PPY = 365 * 24  # hourly bars, 365-day years (barsweep's and vectorbt's default)
JSON_TAG = "BENCH_JSON "
STATS_COLUMNS = ["runs", "median s", "best s", "spread s (max−min)", "load 1-min before → after"]
STATS_NOTE = (
    "Timings: median and best (minimum) of `runs` samples; spread is the range, max − min "
    "of the samples (seconds, and % of the median); ratios are given from the medians and, "
    "in parentheses, from the bests. Load: the 1-minute load average (`os.getloadavg()[0]`, "
    "all processes, the benchmark's own included) just before the first sample → just "
    "after the last.")


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker_peak_rss_mib() -> float:
    """Run on a Dask worker through ``client.run``: that process's peak RSS, MiB."""
    import resource as _resource

    return _resource.getrusage(_resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    """User + system CPU seconds of this process so far (also run on workers)."""
    import resource as _resource

    usage = _resource.getrusage(_resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def warm_worker(store: str, strategy: str, params: dict) -> float:
    """Run on each Dask worker: import the pipeline's task code and load (or compile) the
    strategy's kernel, so that timing starts warm; seconds taken."""
    import time as _time

    t0 = _time.perf_counter()
    import numpy as np

    import barsweep.pipeline.run.blocks  # noqa: F401 - what a task imports (zarr, xarray)
    from barsweep.datasets import bars_arrays, open_bars
    from barsweep.engine import Execution, get_strategy, sweep_block

    bars = bars_arrays(open_bars(store, SYMBOL, TIMEFRAME), SYMBOL)
    sweep_block(get_strategy(strategy), bars, {k: np.asarray(v) for k, v in params.items()},
                Execution(fill="close", fees=FEES), PPY)
    return _time.perf_counter() - t0


def emit(record: dict) -> None:
    """A child's result: one tagged JSON line on stdout, collected by the parent."""
    print(JSON_TAG + json.dumps(record), flush=True)


def run_child(script: Path, kind: str, job: dict, env: dict | None = None,
              timeout: float = 1800) -> dict:
    """Run ``script --child kind --job JSON`` in a fresh interpreter; its JSON record.

    The record gets ``spawn_epoch`` (``time.time()`` just before the process started)
    and ``load_before`` / ``load_after`` (:func:`load_avg` just before it started and
    just after it ended). A failed child aborts the benchmark with its output.
    """
    cmd = [sys.executable, str(script), "--child", kind, "--job", json.dumps(job)]
    full_env = {**os.environ, "NUMBA_NUM_THREADS": "1", **(env or {})}
    load_before = load_avg()
    spawn = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=timeout,
                          cwd=ROOT)
    load_after = load_avg()
    records = [json.loads(line[len(JSON_TAG):]) for line in proc.stdout.splitlines()
               if line.startswith(JSON_TAG)]
    if proc.returncode != 0 or not records:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
        raise SystemExit(f"FAIL: child {kind} exited {proc.returncode} without a result")
    return {**records[-1], "spawn_epoch": spawn, "load_before": load_before,
            "load_after": load_after}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def version_of(module: str) -> str:
    try:
        return __import__(module).__version__
    except Exception:  # noqa: BLE001 - a missing optional package is reported, not fatal
        return "not installed"


def header(title: str) -> str:
    """Markdown preamble: date, machine, versions, the exact command."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    versions = ", ".join(f"{m} {version_of(m)}" for m in
                         ("barsweep", "numba", "numpy", "vectorbt", "dask", "zarr"))
    command = "python " + " ".join(shlex.quote(a) for a in
                                   [os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]])
    return "\n".join([
        f"# {title}",
        "",
        f"- date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- machine: {platform.platform()}, CPU {cpu_model()}, {cores} cores usable, "
        f"load average at start {load}",
        f"- Python {platform.python_version()}, {versions}",
        f"- command: `{command}` (from the repository root)",
        "",
    ])


def fmt(x: float | None, digits: int = 2) -> str:
    """A number for a table cell: fixed digits, thousands separators, '—' for None."""
    if x is None:
        return "—"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:,.{digits}f}"


def dir_size(path: str | Path) -> tuple[int, int]:
    """(apparent bytes, bytes allocated on disk) of every file under ``path``."""
    apparent = allocated = 0
    for root, _, files in os.walk(path):
        for name in files:
            st = os.stat(os.path.join(root, name))
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return apparent, allocated


def table(columns: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# ------------------------------------------------------------ repeated timings


class HideScipy:
    """A meta path finder under which ``import scipy`` fails, as when it is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "scipy" or name.startswith("scipy."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def load_avg() -> float:
    """The 1-minute load average now: processes running or waiting for a core, averaged
    over about a minute, machine-wide (``os.getloadavg()[0]``)."""
    return os.getloadavg()[0]


def repeat_stats(samples: Sequence[float]) -> dict:
    """Best, median and spread of repeated timings (seconds), the benchmarks' convention.

    Parameters
    ----------
    samples : sequence of float, length n >= 1
        One figure per run, e.g. seconds; not modified.

    Returns
    -------
    dict
        ``best`` (min), ``median``, ``worst`` (max), ``spread`` = max - min (the range,
        not an IQR), ``spread_rel`` = spread / median (NaN when the median is 0), ``n``
        and ``samples`` (a list, in run order).

    Examples
    --------
    >>> s = repeat_stats([1.2, 1.0, 1.5])
    >>> s["best"], s["median"], s["spread"], s["n"]
    (1.0, 1.2, 0.5, 3)
    """
    values = [float(x) for x in samples]
    if not values:
        raise ValueError("repeat_stats: no samples (run the measurement at least once)")
    median = statistics.median(values)
    spread = max(values) - min(values)
    return {"best": min(values), "median": median, "worst": max(values), "spread": spread,
            "spread_rel": spread / median if median else float("nan"), "n": len(values),
            "samples": values}


def fmt_load(before: float | None, after: float | None) -> str:
    """A load cell: "1.93 → 2.41" (1-minute load averages), '—' when not measured."""
    if before is None or after is None:
        return "—"
    return f"{before:.2f} → {after:.2f}"


def stats_cells(stats: dict, load: tuple[float, float] | None = None,
                digits: int = 2) -> list[str]:
    """The :data:`STATS_COLUMNS` cells of a :func:`repeat_stats` result and a
    (before, after) load pair: runs, median, best, spread (with % of the median), load."""
    rel = stats["spread_rel"]
    spread = fmt(stats["spread"], digits) + ("" if math.isnan(rel) else f" ({rel:.0%})")
    return [str(stats["n"]), fmt(stats["median"], digits), fmt(stats["best"], digits), spread,
            fmt_load(*load) if load else "—"]

