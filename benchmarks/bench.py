"""barsweep against itself and vectorbt, side by side, in one invocation.

    python benchmarks/bench.py [--quick] [--out benchmarks/RESULTS.md] [--repeat N]

Cases: (a) ema_cross, 8,696 combos on 26,280 synthetic 1h bars; (b) rsi, 2,401 combos on
the same bars; (c) ema_cross, 1,000 combos on 1,000,000 bars. For each: barsweep's bare
kernel (``sweep_block()``, one thread), ``run_spec`` on a LocalCluster of 2 single-threaded
workers into a Zarr store then ``rank``, and vectorbt ``Portfolio.from_signals`` on a
strided subset of the same combos, extrapolated. Plus the cold and warm first call of
the kernel and of ``barsweep demo``, and a correctness check against vectorbt (exit 1
when they disagree). Every measurement runs in its own process (peak RSS is its own);
``--quick`` shrinks everything for a smoke run.

Every timing is run ``--repeat`` times (default 3) and reported as the median, the best
and the spread (max - min) of the runs, beside the 1-minute load average before and
after; ratios against vectorbt come from the medians and from the bests of this one
invocation (the conventions of ``_common.repeat_stats``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from _common import (
    FEES,
    PPY,
    ROOT,
    SEED,
    STATS_COLUMNS,
    STATS_NOTE,
    SYMBOL,
    TIMEFRAME,
    HideScipy,
    cpu_seconds,
    emit,
    fmt,
    header,
    load_avg,
    peak_rss_mib,
    repeat_stats,
    run_child,
    stats_cells,
    table,
    warm_worker,
    worker_peak_rss_mib,
)

T0_PERF = time.perf_counter()  # before barsweep (or numpy) is imported: first-call timing

SCRIPT = Path(__file__).resolve()
SMALL_BARS = 26_280  # three years of hourly bars
N_WORKERS = 2
VBT_BATCH = 200  # columns per from_signals call
RTOL, ATOL = 1e-9, 1e-12
DUST = 1e-9  # vectorbt's portfolio value under this at some bar: its 1e-12 tolerances bite
CHECKED = ("total_return", "max_drawdown", "sharpe")
FIRST_CALL_COMBOS = 16


@dataclass(frozen=True)
class Case:
    key: str
    strategy: str
    n_bars: int
    axes: dict[str, list]  # grid axes in the strategy's parameter order
    constraints: tuple[str, ...]
    vbt_cap: int  # at most this many combos go through vectorbt

    @property
    def label(self) -> str:
        bars = f"{self.n_bars / 1e6:g}M" if self.n_bars >= 1e6 else f"{self.n_bars / 1e3:.0f}k"
        return f"{self.key}: {self.strategy}, {bars} bars"

    def combos(self):
        """Flat parameter arrays of the valid combos, in the results store's (C) order."""
        import numpy as np

        mesh = np.meshgrid(*[np.asarray(v) for v in self.axes.values()], indexing="ij")
        flat = {name: m.ravel() for name, m in zip(self.axes, mesh)}
        keep = np.ones(mesh[0].size, dtype=bool)
        for text in self.constraints:  # our own constant expressions over numpy arrays
            keep &= eval(text, {}, dict(flat))
        return {name: v[keep] for name, v in flat.items()}, keep

    def spec(self, store: str, out: str) -> dict:
        return {
            "data": {"store": store, "symbols": [SYMBOL], "timeframe": TIMEFRAME},
            "strategy": self.strategy,
            "grid": {k: list(v) for k, v in self.axes.items()},
            "constraints": list(self.constraints),
            "execution": {"fill": "close", "fees": FEES, "direction": "long"},
            "run": {"out": out},  # block_size: the default (auto, from combos x bars)
        }


def make_cases(quick: bool) -> list[Case]:
    levels_low = [float(x) for x in range(10, 41, 5)]
    levels_high = [float(x) for x in range(60, 91, 5)]
    if quick:
        return [
            Case("a", "ema_cross", SMALL_BARS,
                 {"fast": list(range(2, 102, 3)), "slow": list(range(10, 399, 12))},
                 ("fast < slow",), 100),
            Case("b", "rsi", SMALL_BARS,
                 {"period": list(range(2, 51, 5)), "lower": levels_low, "upper": levels_high},
                 (), 100),
            Case("c", "ema_cross", 100_000,
                 {"fast": list(range(2, 42, 4)), "slow": list(range(50, 300, 25))},
                 ("fast < slow",), 10),
        ]
    return [
        Case("a", "ema_cross", SMALL_BARS,
             {"fast": list(range(2, 102)), "slow": list(range(10, 399, 4))},
             ("fast < slow",), 400),
        Case("b", "rsi", SMALL_BARS,
             {"period": list(range(2, 51)), "lower": levels_low, "upper": levels_high},
             (), 400),
        Case("c", "ema_cross", 1_000_000,
             {"fast": list(range(2, 42)), "slow": list(range(50, 300, 10))},
             ("fast < slow",), 20),
    ]


# ------------------------------------------------------------------------ children


def load_bars(store: str):
    from barsweep.datasets import bars_arrays, open_bars

    return bars_arrays(open_bars(store, SYMBOL, TIMEFRAME), SYMBOL)


def child_first_call(job: dict) -> None:
    """From before ``import barsweep`` to the first sweep result of a small block.

    With ``hide_scipy`` the child cannot import scipy, as in an install without the
    test extras: numba imports ``scipy.linalg`` (~0.3 s) on its first compile or cache
    load whenever scipy is importable, and vectorbt brings scipy into the test venv.
    """
    if job.get("hide_scipy"):
        sys.meta_path.insert(0, HideScipy())
    t_import = time.perf_counter()
    import numpy as np

    from barsweep.datasets import mapped_arrays  # the light path a Dask task uses
    from barsweep.engine import Execution, get_strategy, sweep_block

    t_imported = time.perf_counter()
    bars = mapped_arrays(job["store"], SYMBOL, TIMEFRAME)
    params = dict(np.load(job["params"]))
    sweep_block(get_strategy(job["strategy"]), bars, params, Execution(fill="close", fees=FEES),
                PPY)
    t_done = time.perf_counter()
    emit({"end_epoch": time.time(), "from_script_start": t_done - T0_PERF,
          "import_s": t_imported - t_import, "first_sweep_s": t_done - t_imported,
          "rss_mib": peak_rss_mib()})


def child_kernel(job: dict) -> None:
    """``sweep_block()`` on every combo in one call, warm (a small block runs first)."""
    import numpy as np

    from barsweep.engine import Execution, get_strategy, sweep_block

    bars = load_bars(job["store"])
    params = dict(np.load(job["params"]))
    strategy, execution = get_strategy(job["strategy"]), Execution(fill="close", fees=FEES)
    t0 = time.perf_counter()
    sweep_block(strategy, bars, {k: v[:FIRST_CALL_COMBOS] for k, v in params.items()},
                execution, PPY)
    warm_s = time.perf_counter() - t0
    seconds, cpu = [], []
    for _ in range(job["repeat"]):
        t0, c0 = time.perf_counter(), time.process_time()
        out = sweep_block(strategy, bars, params, execution, PPY)
        seconds.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    np.save(job["out"], out)
    emit({"seconds_runs": seconds, "cpu_s_runs": cpu, "warmup_s": warm_s, "n_combos": len(out),
          "n_bars": len(bars["close"]), "rss_mib": peak_rss_mib()})


def child_pipeline(job: dict) -> None:
    """``run_spec`` on a LocalCluster of single-threaded workers, then ``rank``, each
    ``job["repeat"]`` times (default 1).

    The first run writes the spec's ``run.out``, which stays for the checks; later runs
    write next to it and are removed. ``rank`` reads the first store. The ``*_runs``
    keys hold every sample; ``run_wall_s``, ``workers_cpu_s``, ``rank_s`` and
    ``timings`` are their medians (one run: that run, as scaling.py reads them).
    """
    import shutil
    import statistics

    import _common
    import cloudpickle
    import zarr

    from barsweep.pipeline.analysis.rank import rank
    from barsweep.pipeline.config.model import parse_spec
    from barsweep.pipeline.run.cluster import connect
    from barsweep.pipeline.run.orchestrate import run_spec

    cloudpickle.register_pickle_by_value(_common)  # workers need not import _common
    spec = parse_spec(job["spec"], source="bench")
    repeat = job.get("repeat", 1)
    outs = [spec.run.out] + [f"{spec.run.out}.run{i}" for i in range(1, repeat)]
    run_wall, workers_cpu, timings = [], [], []
    t0 = time.perf_counter()
    with connect("local", n_workers=job["workers"]) as client:
        client.wait_for_workers(job["workers"])
        start_s = time.perf_counter() - t0
        warm = client.run(warm_worker, job["store"], spec.strategy, job["warm_params"])
        warm_rss = list(client.run(worker_peak_rss_mib).values())
        for out in outs:
            cpu0 = sum(client.run(cpu_seconds).values())
            t0 = time.perf_counter()
            summary = run_spec(spec, out=out, client=client)
            run_wall.append(time.perf_counter() - t0)
            workers_cpu.append(sum(client.run(cpu_seconds).values()) - cpu0)
            timings.append(json.loads(zarr.open_group(out, mode="r").attrs["timings_s"]))
            if out != outs[0]:
                shutil.rmtree(out)
        workers_rss = list(client.run(worker_peak_rss_mib).values())
    rank_s = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        top = rank(outs[0], by="sharpe", top=20)
        rank_s.append(time.perf_counter() - t0)
    group = zarr.open_group(outs[0], mode="r")
    block_combos = math.prod(group["sharpe"].chunks)  # (symbol=1, *block shape)
    timings_median = {k: statistics.median(t[k] for t in timings) for k in timings[0]}
    emit({"timings": timings_median, "timings_runs": timings, "block_combos": block_combos,
          "run_wall_s": statistics.median(run_wall), "run_wall_s_runs": run_wall,
          "workers_cpu_s": statistics.median(workers_cpu), "workers_cpu_s_runs": workers_cpu,
          "compute_s": summary.seconds, "n_combos": summary.n_combos,
          "n_blocks": summary.n_blocks, "combo_bars": summary.combo_bars,
          "cluster_start_s": start_s, "worker_warm_s": max(warm.values()),
          "rank_s": statistics.median(rank_s), "rank_s_runs": rank_s,
          "rank_rows": len(top), "top_sharpe": float(top["sharpe"].iloc[0]),
          "driver_rss_mib": peak_rss_mib(), "workers_rss_mib": workers_rss,
          "workers_warm_rss_mib": warm_rss})


def signals(strategy: str, close, params: dict):
    """Long entries/exits (n_bars, n_combos), the rules of tests/helpers/ref_strategies.py with
    TA-Lib indicators and vectorized crosses (checked against ref_signals below)."""
    import numpy as np
    import talib

    n, m = len(close), len(next(iter(params.values())))
    entries = np.zeros((n, m), dtype=bool)
    exits = np.zeros((n, m), dtype=bool)

    def crosses(a, b):  # a crosses above b / below b at t (NaN never crosses)
        return ((a[:-1] < b[:-1]) & (a[1:] > b[1:]), (a[:-1] > b[:-1]) & (a[1:] < b[1:]))

    cache: dict[int, np.ndarray] = {}
    if strategy == "ema_cross":
        def ema(p):
            return cache.setdefault(p, talib.EMA(close, p))

        for j, (f, s) in enumerate(zip(params["fast"], params["slow"])):
            entries[1:, j], exits[1:, j] = crosses(ema(int(f)), ema(int(s)))
    elif strategy == "rsi":
        for j, (p, lo, hi) in enumerate(zip(params["period"], params["lower"], params["upper"])):
            r = cache.setdefault(int(p), talib.RSI(close, int(p)))
            entries[1:, j] = crosses(r, np.full(n, lo))[1]  # crosses below lower
            exits[1:, j] = crosses(r, np.full(n, hi))[0]  # crosses above upper
    else:
        raise KeyError(strategy)
    return entries, exits


def check_signals(strategy: str, bars, params: dict, entries, exits) -> None:
    """Our vectorized signals equal tests/helpers/ref_strategies.py's on a prefix (EMA/RSI are
    causal), for the first combos."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.ref_strategies import ref_signals

    k = min(len(bars["close"]), 20_000)
    prefix = {c: np.asarray(bars[c][:k], dtype=float) for c in ("close", "high", "low")}
    for j in range(min(2, entries.shape[1])):
        p = {name: v[j].item() for name, v in params.items()}
        long_entry, long_exit, _, _ = ref_signals(strategy, prefix, p)
        if not (np.array_equal(entries[:k, j], long_entry)
                and np.array_equal(exits[:k, j], long_exit)):
            raise SystemExit(f"FAIL: vectorized signals differ from ref_signals for {p}")


def child_vbt(job: dict) -> None:
    """vectorbt ``Portfolio.from_signals`` on the subset, in batches, plus the metrics
    compared (total_return, max_drawdown, sharpe_ratio, trades.count)."""
    import numpy as np
    import pandas as pd
    import vectorbt as vbt

    bars = load_bars(job["store"])
    close = np.asarray(bars["close"], dtype=np.float64)
    params = dict(np.load(job["params"]))
    t0 = time.perf_counter()
    entries, exits = signals(job["strategy"], close, params)
    signals_s = time.perf_counter() - t0
    check_signals(job["strategy"], bars, params, entries, exits)
    index = pd.date_range("2020-01-01", periods=len(close), freq="h")
    price = pd.Series(close, index=index)
    m = entries.shape[1]

    def batch(lo: int, hi: int, rows: slice, timings: list[float] | None = None):
        t_a = time.perf_counter()
        pf = vbt.Portfolio.from_signals(
            price.iloc[rows], pd.DataFrame(entries[rows, lo:hi], index=index[rows]),
            pd.DataFrame(exits[rows, lo:hi], index=index[rows]),
            fees=FEES, init_cash=10_000.0, freq="1h")
        t_b = time.perf_counter()
        values = (pf.total_return().to_numpy(), pf.max_drawdown().to_numpy(),
                  pf.sharpe_ratio().to_numpy(), pf.trades.count().to_numpy())
        if timings is not None:
            timings[0] += t_b - t_a
            timings[1] += time.perf_counter() - t_b
        dust = pf.value().to_numpy().min(axis=0) < DUST  # untimed: for compare()
        return (*values, dust)

    batch(0, min(VBT_BATCH, m), slice(0, 2000))  # compile vectorbt's numba functions first
    runs = {"seconds_runs": [], "from_signals_s_runs": [], "metrics_s_runs": [],
            "cpu_s_runs": []}
    for _ in range(job["repeat"]):
        timings, c0 = [0.0, 0.0], time.process_time()
        parts = [batch(lo, min(lo + VBT_BATCH, m), slice(None), timings)
                 for lo in range(0, m, VBT_BATCH)]
        runs["cpu_s_runs"].append(time.process_time() - c0)
        runs["seconds_runs"].append(sum(timings))
        runs["from_signals_s_runs"].append(timings[0])
        runs["metrics_s_runs"].append(timings[1])
    stacked = [np.concatenate([p[i] for p in parts]) for i in range(5)]
    np.savez(job["out"], **dict(zip((*CHECKED, "n_trades", "dust"), stacked)))
    emit({**runs, "signals_s": signals_s, "n_combos": m, "n_bars": len(close),
          "rss_mib": peak_rss_mib()})


CHILDREN = {"first_call": child_first_call, "kernel": child_kernel,
            "pipeline": child_pipeline, "vbt": child_vbt}


# ------------------------------------------------------------------------ parent


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def barsweep_script() -> str:
    for path in (ROOT / ".venv" / "bin" / "barsweep", Path(sys.executable).parent / "barsweep"):
        if path.exists():
            return str(path)
    raise SystemExit("FAIL: no barsweep console script next to this Python or in .venv/bin")


def run_demo(tmp: Path, cache: Path, name: str) -> dict:
    """``barsweep demo`` in a fresh process: wall seconds, combos and the sweep seconds it
    prints, and the load average just before and after (as :func:`run_child` records)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    env.pop("NUMBA_NUM_THREADS", None)
    load_before = load_avg()
    t0 = time.perf_counter()
    proc = subprocess.run([barsweep_script(), "demo", "--dir", str(tmp / name),
                           "--workers", str(N_WORKERS)],
                          capture_output=True, text=True, env=env, cwd=tmp, timeout=900)
    wall = time.perf_counter() - t0
    load_after = load_avg()
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-6000:])
        raise SystemExit(f"FAIL: barsweep demo exited {proc.returncode}")
    shutil.rmtree(tmp / name, ignore_errors=True)  # repeats would pile up stores
    found = re.search(r"([\d,]+) combos in .*?: ([\d.]+) s", proc.stdout)
    combos = int(found.group(1).replace(",", "")) if found else None
    sweep_s = float(found.group(2)) if found else None
    return {"seconds": wall, "n_combos": combos, "sweep_s": sweep_s,
            "load_before": load_before, "load_after": load_after}


def source_stamp() -> list[tuple[str, int]]:
    """Modification times of barsweep's sources: numba's cache is keyed on them."""
    return sorted((str(f), f.stat().st_mtime_ns) for d in ("engine", "pipeline", "datasets")
                  for f in (ROOT / d).rglob("*.py"))


def first_calls(tmp: Path, store: str, params_file: Path, repeat: int,
                tries: int = 3) -> list[list]:
    """Cold then warm first call of the kernel and of ``barsweep demo``, ``repeat``
    rounds of each (a fresh cache per round): table rows.

    A round is run again (fresh cache) if barsweep's sources changed during it, since
    its warm call would then recompile.
    """
    rows = []
    for what in ("kernel", "demo"):
        states = ("cold", "warm", "warm, no scipy") if what == "kernel" else ("cold", "warm")
        recs = {state: [] for state in states}
        for round_no in range(1, repeat + 1):
            for attempt in range(1, tries + 1):
                stamp, pair = source_stamp(), []
                cache = tmp / f"numba-cache-{what}-{round_no}-{attempt}"
                for state in states:
                    if what == "kernel":
                        rec = run_child(SCRIPT, "first_call",
                                        {"store": store, "params": str(params_file),
                                         "strategy": "ema_cross",
                                         "hide_scipy": state.endswith("no scipy")},
                                        env={"NUMBA_CACHE_DIR": str(cache)})
                        rec["seconds"] = rec["end_epoch"] - rec["spawn_epoch"]
                    else:
                        rec = run_demo(tmp, cache, f"demo-{state}-{round_no}-{attempt}")
                    log(f"first call, {what}, {state} cache, run {round_no}/{repeat}: "
                        f"{rec['seconds']:.2f} s (load {rec['load_before']:.2f})")
                    pair.append((state, rec))
                changed = source_stamp() != stamp
                if not changed:
                    break
                log(f"barsweep's sources changed during the {what} round"
                    + (": running it again" if attempt < tries else
                       f" {tries} times: keeping this round, marked in the table"))
            for state, rec in pair:
                recs[state].append({**rec, "sources_changed": changed})
        for state, runs in recs.items():
            timing = stats_cells(repeat_stats([r["seconds"] for r in runs]), load_span(runs))
            n_changed = sum(r["sources_changed"] for r in runs)
            caveat = (f"; {n_changed} run(s) while barsweep's sources were being edited (a "
                      "warm one may have recompiled)" if n_changed else "")
            if what == "kernel":
                rows.append([
                    "first call", f"kernel, {state} NUMBA_CACHE_DIR", FIRST_CALL_COMBOS,
                    f"{SMALL_BARS:,}", *timing, "—", "—",
                    fmt(max(r["rss_mib"] for r in runs), 0),
                    ("(scipy not importable, as in `pip install barsweep`) "
                     if state.endswith("no scipy") else "") +
                    f"process start to first `sweep_block()` result (medians): import barsweep "
                    f"{median(r['import_s'] for r in runs):.2f} s, bars + "
                    f"{'compile + ' if state == 'cold' else 'cache load + '}"
                    f"sweep {median(r['first_sweep_s'] for r in runs):.2f} s{caveat}"])
            else:
                combos = runs[0]["n_combos"]
                reported = [r["sweep_s"] for r in runs if r["sweep_s"] is not None]
                rows.append([
                    "first call", f"`barsweep demo`, {state} NUMBA_CACHE_DIR",
                    fmt(combos, 0) if combos else "—", f"{SMALL_BARS:,}", *timing,
                    "—", "—", "—",
                    f"whole CLI ({N_WORKERS} workers): synth bars, cluster start, sweep "
                    + (f"(fill next_open; {fmt(median(reported))} s median as the demo "
                       "reports it)" if reported else "(fill next_open)")
                    + f", top 10{caveat}"])
    return rows


def samples(stats: dict) -> str:
    """A log line's view of repeat_stats(): every sample in run order, then the median."""
    return (", ".join(f"{x:.3f}" for x in stats["samples"])
            + f" s (median {stats['median']:.3f} s, load now {load_avg():.2f})")


def rates(work: float, stats: dict) -> dict:
    """``work`` (e.g. combo-bars) per second at the median and at the best time."""
    return {"median": work / stats["median"], "best": work / stats["best"]}


def per_core(rate: dict, digits: int = 1) -> str:
    """A rates() cell in millions: "240.1 (244.4) per core", median (best)."""
    return f"{fmt(rate['median'] / 1e6, digits)} ({fmt(rate['best'] / 1e6, digits)}) per core"


def ratio(num: dict, den: dict, digits: int, unit: str = "") -> str:
    """Two rates() as a ratio cell: from the medians (bold), from the bests in parentheses."""
    return (f"**{num['median'] / den['median']:.{digits}f}{unit}** "
            f"({num['best'] / den['best']:.{digits}f}{unit})")


def load_span(recs: list[dict]) -> tuple[float, float]:
    """The load average before the first and after the last of a measurement's runs."""
    return recs[0]["load_before"], recs[-1]["load_after"]


def compare(case: Case, kernel_out, vbt_file: Path, subset) -> tuple[dict, list[str]]:
    """Max relative error per metric and the problems found, barsweep vs vectorbt."""
    import numpy as np

    from barsweep.engine import METRICS

    col = {name: i for i, name in enumerate(METRICS)}
    theirs = dict(np.load(vbt_file))
    ours = kernel_out[subset]
    errors, problems = {}, []
    # Zero-variance equity (no trade): barsweep's sharpe is NaN (undefined), vectorbt's
    # is +-inf (its 0/0). Both say "undefined"; counted, not a disagreement.
    flat = ours[:, col["volatility"]] == 0
    errors["undefined"] = int((flat & np.isnan(ours[:, col["sharpe"]])
                               & np.isinf(np.asarray(theirs["sharpe"], dtype=float))).sum())
    # Ruined combos (vectorbt's value fell under DUST, ours ended under 1e-8 of the
    # cash): vectorbt treats cash and sizes under its 1e-12 tolerance as zero and stops
    # trading, barsweep trades on with the dust, so their later trades (and sharpe)
    # cannot match. Their total_return and max_drawdown are still compared.
    ruined = theirs["dust"] & (np.abs(1 + ours[:, col["total_return"]]) < 1e-12)
    trades_differ = ours[:, col["n_trades"]] != theirs["n_trades"]
    errors["ruined"] = f"{ruined.sum()} ({(ruined & trades_differ).sum()} differ)"
    for name in (*CHECKED, "n_trades"):
        a, b = ours[:, col[name]], np.asarray(theirs[name], dtype=float)
        if name in ("sharpe", "n_trades"):
            a, b, skip = a[~ruined], b[~ruined], flat[~ruined]
        else:
            skip = flat
        if name == "n_trades":
            errors[name] = float(np.abs(a - b).max()) if a.size else 0.0
            if not np.array_equal(a, b):
                problems.append(f"{case.key} n_trades: {(a != b).sum()} combos differ")
            continue
        both_nan = np.isnan(a) & np.isnan(b)
        if name == "sharpe":
            both_nan |= skip & np.isnan(a) & np.isinf(b)
        close = np.isclose(a, b, rtol=RTOL, atol=ATOL) | both_nan
        finite = np.isfinite(a) & np.isfinite(b) & (b != 0)
        rel = np.abs(a[finite] - b[finite]) / np.abs(b[finite])
        errors[name] = float(rel.max()) if rel.size else 0.0
        if not close.all():
            bad = np.flatnonzero(~close)[:3]
            problems.append(f"{case.key} {name}: {(~close).sum()} combos differ, e.g. "
                            + ", ".join(f"{a[i]!r} vs {b[i]!r}" for i in bad))
    return errors, problems


def check_pipeline(case: Case, kernel_out, zarr_path: str, keep) -> list[str]:
    """The pipeline's store holds the kernel's numbers, NaN where excluded."""
    import numpy as np
    import xarray as xr

    from barsweep.engine import METRICS

    ds = xr.open_zarr(zarr_path, consolidated=False)
    problems = []
    for i, name in enumerate(METRICS):
        stored = np.asarray(ds[name].values, dtype=float).ravel()
        if not np.isnan(stored[~keep]).all():
            problems.append(f"{case.key} pipeline {name}: excluded combos are not NaN")
        if not np.allclose(stored[keep], kernel_out[:, i], rtol=1e-12, atol=0, equal_nan=True):
            problems.append(f"{case.key} pipeline {name}: store differs from sweep_block()")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller everything: a smoke run")
    parser.add_argument("--out", help="also write the markdown report here")
    parser.add_argument("--repeat", type=int, default=3,
                        help="runs of every timed measurement (default 3): the tables show "
                             "the median, the best and the spread")
    parser.add_argument("--cases", default="abc", help="which cases to run (default abc)")
    parser.add_argument("--no-first-call", action="store_true",
                        help="skip the cold/warm first-call rows (kernel and demo)")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1 (got {args.repeat}); 3 or more gives a "
                     "median worth reading")
    if args.child:
        CHILDREN[args.child](json.loads(args.job))
        return 0

    import numpy as np

    from barsweep.datasets import write_synth

    t_begin = time.perf_counter()
    cases = [c for c in make_cases(args.quick) if c.key in args.cases]
    title = "barsweep benchmarks" + (" (--quick)" if args.quick else "")
    preamble = header(title)
    rows, problems, errors_by_case = [], [], {}
    with tempfile.TemporaryDirectory(prefix="barsweep-bench-") as tmp_name:
        tmp = Path(tmp_name)
        stores = {}
        for n_bars in sorted({SMALL_BARS} | {c.n_bars for c in cases}):
            stores[n_bars] = str(tmp / f"bars-{n_bars}")
            write_synth(stores[n_bars], SYMBOL, TIMEFRAME, n_bars, SEED)
        log(f"bars written: {', '.join(f'{n:,}' for n in stores)} (seed {SEED})")

        # ---- first calls: the kernel alone, then the whole demo, cold and warm cache
        first_params = tmp / "first.npz"
        a_params, _ = make_cases(args.quick)[0].combos()
        np.savez(first_params, **{k: v[:FIRST_CALL_COMBOS] for k, v in a_params.items()})
        first_rows = [] if args.no_first_call else first_calls(tmp, stores[SMALL_BARS],
                                                               first_params, args.repeat)

        # ---- the three cases
        for case in cases:
            store = stores[case.n_bars]
            params, keep = case.combos()
            n = len(next(iter(params.values())))
            stride = max(1, math.ceil(n / case.vbt_cap))
            subset = np.arange(0, n, stride)
            np.savez(tmp / f"{case.key}-all.npz", **params)
            np.savez(tmp / f"{case.key}-subset.npz", **{k: v[subset] for k, v in params.items()})
            combo_bars = n * case.n_bars
            log(f"case {case.label}: {n:,} combos; kernel...")

            kern = run_child(SCRIPT, "kernel", {
                "store": store, "strategy": case.strategy, "repeat": args.repeat,
                "params": str(tmp / f"{case.key}-all.npz"), "out": str(tmp / f"{case.key}.npy")})
            kern_s = repeat_stats(kern["seconds_runs"])
            kernel_rate = rates(combo_bars, kern_s)
            log(f"  kernel {samples(kern_s)}, {kernel_rate['median'] / 1e6:.1f} M "
                "combo-bars/s (median); pipeline...")

            zarr_path = str(tmp / f"{case.key}-results.zarr")
            warm_params = {k: v[:2].tolist() for k, v in params.items()}
            pipe = run_child(SCRIPT, "pipeline", {
                "spec": case.spec(store, zarr_path), "workers": N_WORKERS,
                "store": store, "warm_params": warm_params, "repeat": args.repeat})
            pipe_s = repeat_stats(pipe["run_wall_s_runs"])
            rank_s = repeat_stats(pipe["rank_s_runs"])
            pipe_rate = rates(pipe["combo_bars"] / N_WORKERS, pipe_s)  # per worker
            log(f"  pipeline {samples(pipe_s)}, rank {samples(rank_s)}; vectorbt on "
                f"{len(subset)} combos...")

            vb = run_child(SCRIPT, "vbt", {
                "store": store, "strategy": case.strategy, "repeat": args.repeat,
                "params": str(tmp / f"{case.key}-subset.npz"),
                "out": str(tmp / f"{case.key}-vbt.npz")})
            vb_s = repeat_stats(vb["seconds_runs"])
            vbt_rate = rates(vb["n_combos"] * vb["n_bars"], vb_s)
            scale = n / vb["n_combos"]
            vbt_full_s = repeat_stats([x * scale for x in vb["seconds_runs"]])
            log(f"  vectorbt {samples(vb_s)} on {vb['n_combos']} combos "
                f"({vbt_rate['median'] / 1e6:.2f} M combo-bars/s, median)")

            kernel_out = np.load(tmp / f"{case.key}.npy")
            errors, found = compare(case, kernel_out, tmp / f"{case.key}-vbt.npz", subset)
            errors_by_case[case.key] = (len(subset), errors)
            problems += found
            problems += check_pipeline(case, kernel_out, zarr_path, keep)
            if pipe["n_combos"] != n:
                problems.append(f"{case.key}: pipeline swept {pipe['n_combos']} combos, not {n}")
            best = np.nanmax(kernel_out[:, 3])
            if pipe["rank_rows"] != min(20, n) or not np.isclose(pipe["top_sharpe"], best,
                                                                  rtol=1e-12):
                problems.append(f"{case.key}: rank's best sharpe {pipe['top_sharpe']} is not "
                                f"sweep_block()'s {best}")

            bars_txt = f"{case.n_bars:,}"
            timings = pipe["timings"]  # medians over the runs
            rows += [
                [case.label, "barsweep kernel: `sweep_block()`, 1 thread", f"{n:,}", bars_txt,
                 *stats_cells(kern_s, load_span([kern])), fmt(n / kern_s["median"], 0),
                 per_core(kernel_rate), fmt(kern["rss_mib"], 0),
                 f"all combos in one call, warm (a 16-combo call compiles first); CPU "
                 f"{median(kern['cpu_s_runs']):.2f} s (median)"],
                [case.label, f"barsweep run: `run_spec`, {N_WORKERS} workers, Zarr",
                 f"{n:,}", bars_txt, *stats_cells(pipe_s, load_span([pipe])),
                 fmt(n / pipe_s["median"], 0),
                 f"{per_core(pipe_rate)}, {fmt(pipe_rate['median'] * N_WORKERS / 1e6, 1)} total",
                 f"driver {fmt(pipe['driver_rss_mib'], 0)}, workers ≤ "
                 f"{fmt(max(pipe['workers_rss_mib']), 0)}",
                 f"{pipe['n_blocks']} block{'s' if pipe['n_blocks'] > 1 else ''} of ≤ "
                 f"{pipe['block_combos']:,} combos; medians: workers' CPU "
                 f"{pipe['workers_cpu_s']:.2f} s of {N_WORKERS} x {pipe_s['median']:.2f} s, "
                 f"plan + store {timings['plan_and_create']:.2f} s, compute + write "
                 f"{timings['compute_and_write']:.2f} s (task time summed over workers "
                 f"{timings['task_seconds_sum']:.2f} s); one cluster for the {pipe_s['n']} runs "
                 f"({', '.join(f'{x:.2f}' for x in pipe_s['samples'])} s in order), each into "
                 f"a new store; cluster start ({pipe['cluster_start_s']:.1f} s) and "
                 f"worker warm-up ({pipe['worker_warm_s']:.2f} s) before timing"],
                [case.label, "barsweep `rank(top=20, by=sharpe)`", f"{n:,}", "—",
                 *stats_cells(rank_s, load_span([pipe]), 3), "—", "—", "(in driver)",
                 f"reads the Zarr store; the first call in the process took "
                 f"{rank_s['samples'][0]:.3f} s (load: the run_spec process's)"],
                [case.label, "vectorbt `from_signals` (extrapolated)", f"{n:,}", bars_txt,
                 *stats_cells(vbt_full_s, load_span([vb])), fmt(n / vbt_full_s["median"], 0),
                 per_core(vbt_rate, 2), fmt(vb["rss_mib"], 0),
                 f"EXTRAPOLATED x{scale:.1f} from 1 combo in {stride} "
                 f"({vb['n_combos']} combos, medians: {vb_s['median']:.2f} s = from_signals "
                 f"{median(vb['from_signals_s_runs']):.2f} s + 4 metrics "
                 f"{median(vb['metrics_s_runs']):.2f} s, batches of ≤ {VBT_BATCH} columns; "
                 f"CPU {median(vb['cpu_s_runs']):.2f} s); TA-Lib signals "
                 f"({vb['signals_s']:.2f} s) not counted"],
                [case.label, "ratio: barsweep kernel / vectorbt", "", "", "", "", "", "", "",
                 "", ratio(kernel_rate, vbt_rate, 1, "x"), "",
                 "combo-bars/s per core, from the medians (from the bests)"],
                [case.label, "ratio: barsweep run / kernel", "", "", "", "", "", "", "",
                 "", ratio(pipe_rate, kernel_rate, 2), "",
                 "pipeline efficiency per worker: combo-bars/s per core, from the medians "
                 "(from the bests)"],
                [case.label, "ratio: ranking / sweep", "", "", "",
                 f"**{rank_s['median'] / pipe_s['median']:.3f}**",
                 f"{rank_s['best'] / pipe_s['best']:.3f}", "", "", "", "", "",
                 "rank seconds / run_spec seconds: of the medians (of the bests)"],
            ]
        rows += first_rows

    columns = ["case", "engine", "combos", "bars", *STATS_COLUMNS, "combos/s (median)",
               "M combo-bars/s median (best)", "peak RSS MiB", "notes"]
    lines = [preamble, table(columns, rows), ""]
    lines.append(
        f"All: fees {FEES:.1%}, fill at close, long only, {PPY} bars/year, synthetic bars "
        f"(seed {SEED}). Kernel and vectorbt run with NUMBA_NUM_THREADS=1 (one core); "
        f"the pipeline uses a LocalCluster of {N_WORKERS} single-threaded worker processes "
        "(per core = total / workers). Each measurement is its own process; peak RSS is "
        "that process's `ru_maxrss` (workers: each worker's, via `client.run`). "
        f"Every timing is measured {args.repeat} time(s) (`--repeat`) on a shared machine: "
        "kernel and vectorbt repeat in their process after a warm-up call, run_spec repeats "
        "on one warm cluster and rank on the first store, and each first-call run is a new "
        "process (a new cache for each cold one). " + STATS_NOTE)
    lines += ["", "## Correctness: barsweep `sweep_block()` vs vectorbt on the combos both ran", ""]
    check_rows = []
    for key, (m, errs) in errors_by_case.items():
        check_rows.append([key, m] + [f"{errs[name]:.1e}" for name in CHECKED]
                          + [f"{errs['n_trades']:.0f}", errs["undefined"], errs["ruined"]])
    lines.append(table(["case", "combos compared", *[f"max rel err {c}" for c in CHECKED],
                        "max n_trades diff", "sharpe undefined in both",
                        "ruined in both (of which n_trades differ)"],
                       check_rows))
    lines += ["", f"Tolerance rtol {RTOL:g} (atol {ATOL:g}), trade counts exact. "
              "\"Sharpe undefined in both\": combos without a trade (zero variance), where "
              "barsweep's sharpe is NaN and vectorbt's is inf; not a disagreement. \"Ruined "
              f"in both\": vectorbt's portfolio value fell under {DUST:g} (and barsweep's "
              "total_return is -1 to 1e-12): equity is dust, e.g. after tens "
              "of thousands of trades paying fees over 1M bars; vectorbt treats cash and order "
              "sizes under its 1e-12 tolerance as zero and stops trading while barsweep trades "
              "on, so sharpe and n_trades are not compared there (total_return and "
              "max_drawdown are). The "
              "pipeline's Zarr store is also checked against `sweep_block()` (rtol 1e-12) and "
              "rank's best sharpe against the kernel's maximum.", ""]
    lines.append("**FAIL**:\n\n" + "\n".join(f"- {p}" for p in problems) if problems
                 else "Result: **PASS**.")
    lines += ["", f"Total benchmark wall time: {time.perf_counter() - t_begin:.0f} s.", ""]
    report = "\n".join(lines)
    print(report)
    if args.out:
        Path(args.out).write_text(report)
        log(f"written to {args.out}")
    if problems:
        print("FAIL: barsweep and vectorbt (or the pipeline) disagree, see above",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
