"""What a user waits for in one ``backtest()``.

(a) A fresh interpreter: ``import barsweep.engine`` and the first ``backtest()`` on
    26,280 hourly bars, with numba's on-disk cache warm (one throw-away child fills it
    first). Wall time from just before the process is spawned to the end of that call,
    and the child's own split: the import, the first call. Once more with scipy not
    importable, as in ``pip install barsweep`` without the test extras: numba imports
    ``scipy.linalg`` on its first compile or cache load whenever it can (NOTES.md, "Cold
    start"), and vectorbt brings scipy into the test venv.
(b) Warm: one ``backtest()`` in a process that has already run one, on 26,280 and
    1,000,000 bars.

Every call is ema_cross (fast 10, slow 50), ``fill="close"``, fees 0.001, with the equity
curve and the trades table built, ``ppy`` inferred from the times. The bars are a mapping
of numpy arrays (a seeded random walk) with ``time`` as int64 ns, hourly from 2020-01-01:
2 ms for 26,280 bars, numpy only (in the fresh process's wall time, not in its first
call).

    python benchmarks/backtest_latency.py [--fresh 5] [--warm 20]

Prints a markdown table: median, best and spread of the runs, and the 1-minute load
average before and after each (the convention of ``_common.repeat_stats``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    STATS_COLUMNS,
    STATS_NOTE,
    HideScipy,
    emit,
    header,
    load_avg,
    repeat_stats,
    run_child,
    stats_cells,
    table,
)

SEED = 7
HOUR_NS = 3_600 * 10**9
START_NS = 1_577_836_800 * 10**9  # 2020-01-01T00:00Z
SIZES = (26_280, 1_000_000)
PARAMS = {"fast": 10, "slow": 50}
EXECUTION = {"fill": "close", "fees": 0.001}


def make_bars(n_bars: int) -> dict:
    """OHLC of a seeded random walk and hourly int64-ns times (numpy only)."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.005, n_bars)))
    open_ = np.empty(n_bars)
    open_[0] = 100.0
    open_[1:] = close[:-1]
    wick = np.abs(rng.normal(0.0, 0.002, n_bars))
    return {
        "time": START_NS + HOUR_NS * np.arange(n_bars, dtype=np.int64),
        "open": open_,
        "high": np.maximum(open_, close) * (1.0 + wick),
        "low": np.minimum(open_, close) * (1.0 - wick),
        "close": close,
    }


def child_fresh(job: dict) -> None:
    """Runs in a fresh interpreter: the import, then the first backtest()."""
    if job.get("hide_scipy"):
        sys.meta_path.insert(0, HideScipy())
    t0 = time.perf_counter()
    import barsweep.engine as engine

    t_import = time.perf_counter()
    bars = make_bars(job["n_bars"])
    t_bars = time.perf_counter()
    res = engine.backtest(bars, "ema_cross", PARAMS, **EXECUTION)
    t_end = time.perf_counter()
    emit({"import_s": t_import - t0, "first_call_s": t_end - t_bars, "end_epoch": time.time(),
          "n_trades": len(res.trades)})


def time_warm(n_bars: int, repeat: int) -> list[float]:
    """Seconds of each of ``repeat`` backtest() calls after one untimed call."""
    from barsweep.engine import backtest

    bars = make_bars(n_bars)
    backtest(bars, "ema_cross", PARAMS, **EXECUTION)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        backtest(bars, "ema_cross", PARAMS, **EXECUTION)
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", type=int, default=5, help="fresh processes (a)")
    parser.add_argument("--warm", type=int, default=20, help="warm calls per size (b)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "fresh":
        child_fresh(json.loads(args.job))
        return

    script = Path(__file__).resolve()
    # as a user's interpreter: bytecode cached (PYTHONDONTWRITEBYTECODE set in the caller's
    # shell would compile every barsweep module in every child, ~0.1 s); the first child
    # writes it and fills numba's cache if need be
    byte_code = {"PYTHONDONTWRITEBYTECODE": ""}
    run_child(script, "fresh", {"n_bars": SIZES[0]}, env=byte_code)
    fresh = {False: [], True: []}  # by hide_scipy, runs alternating
    for _ in range(args.fresh):
        for hide in fresh:
            record = run_child(script, "fresh", {"n_bars": SIZES[0], "hide_scipy": hide},
                               env=byte_code)
            fresh[hide].append({"wall_s": record["end_epoch"] - record["spawn_epoch"],
                                **record})
    warm = {}
    for n in SIZES:
        before = load_avg()
        warm[n] = (time_warm(n, args.warm), (before, load_avg()))

    rows = []
    for hide, records in fresh.items():
        load = (records[0]["load_before"], records[-1]["load_after"])
        venv = " (scipy not importable)" if hide else ""
        for what, key in ((f"(a) fresh process to end of first backtest(), {SIZES[0]:,} "
                           f"bars{venv}", "wall_s"),
                          ("(a) of which `import barsweep.engine`", "import_s"),
                          ("(a) of which the first backtest()", "first_call_s")):
            rows.append([what, *stats_cells(repeat_stats([r[key] for r in records]), load,
                                            digits=4)])
    rows += [[f"(b) warm backtest(), {n:,} bars",
              *stats_cells(repeat_stats(samples), load, digits=4)]
             for n, (samples, load) in warm.items()]
    print(header("backtest() latency"))
    print(table(["what", *STATS_COLUMNS], rows))
    print()
    print(STATS_NOTE)

if __name__ == "__main__":
    main()
