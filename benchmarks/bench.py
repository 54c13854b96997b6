"""barsweep against itself and vectorbt, side by side, in one invocation.

    python benchmarks/bench.py [--quick] [--out benchmarks/RESULTS.md] [--repeat N]

Cases: (a) ema_cross, 8,696 combos on 26,280 synthetic 1h bars; (b) rsi, 2,401 combos on
the same bars; (c) ema_cross, 1,000 combos on 1,000,000 bars. For each: barsweep's bare
kernel (``sweep()``, one thread), ``run_sweep`` on a LocalCluster of 2 single-threaded
workers into a Zarr store then ``rank``, and vectorbt ``Portfolio.from_signals`` on a
strided subset of the same combos, extrapolated. Plus the cold and warm first call of
the kernel and of ``barsweep demo``, and a correctness check against vectorbt (exit 1
when they disagree). Every measurement runs in its own process (peak RSS is its own);
``--quick`` shrinks everything for a smoke run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _common import (
    FEES,
    PPY,
    ROOT,
    SEED,
    SYMBOL,
    TIMEFRAME,
    cpu_seconds,
    emit,
    fmt,
    header,
    peak_rss_mib,
    run_child,
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
    from barsweep.engine import Execution, get_strategy, sweep

    t_imported = time.perf_counter()
    bars = mapped_arrays(job["store"], SYMBOL, TIMEFRAME)
    params = dict(np.load(job["params"]))
    sweep(get_strategy(job["strategy"]), bars, params, Execution(fill="close", fees=FEES), PPY)
    t_done = time.perf_counter()
    emit({"end_epoch": time.time(), "from_script_start": t_done - T0_PERF,
          "import_s": t_imported - t_import, "first_sweep_s": t_done - t_imported,
          "rss_mib": peak_rss_mib()})


class HideScipy:
    """A meta path finder under which ``import scipy`` fails, as when it is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "scipy" or name.startswith("scipy."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def child_kernel(job: dict) -> None:
    """``sweep()`` on every combo in one call, warm (a small block runs first)."""
    import numpy as np

    from barsweep.engine import Execution, get_strategy, sweep

    bars = load_bars(job["store"])
    params = dict(np.load(job["params"]))
    strategy, execution = get_strategy(job["strategy"]), Execution(fill="close", fees=FEES)
    t0 = time.perf_counter()
    sweep(strategy, bars, {k: v[:FIRST_CALL_COMBOS] for k, v in params.items()}, execution, PPY)
    warm_s = time.perf_counter() - t0
    best, cpu = math.inf, math.nan
    for _ in range(job["repeat"]):
        t0, c0 = time.perf_counter(), time.process_time()
        out = sweep(strategy, bars, params, execution, PPY)
        if time.perf_counter() - t0 < best:
            best, cpu = time.perf_counter() - t0, time.process_time() - c0
    np.save(job["out"], out)
    emit({"seconds": best, "cpu_s": cpu, "warmup_s": warm_s, "n_combos": len(out),
          "n_bars": len(bars["close"]), "rss_mib": peak_rss_mib()})


def child_pipeline(job: dict) -> None:
    """``run_sweep`` on a LocalCluster of single-threaded workers, then ``rank``."""
    import _common
    import cloudpickle
    import zarr

    from barsweep.pipeline.cluster import connect
    from barsweep.pipeline.rank import rank
    from barsweep.pipeline.run import run_sweep
    from barsweep.pipeline.spec import parse_spec

    cloudpickle.register_pickle_by_value(_common)  # workers need not import _common
    spec = parse_spec(job["spec"], source="bench")
    t0 = time.perf_counter()
    with connect("local", n_workers=job["workers"]) as client:
        client.wait_for_workers(job["workers"])
        start_s = time.perf_counter() - t0
        warm = client.run(warm_worker, job["store"], spec.strategy, job["warm_params"])
        warm_rss = list(client.run(worker_peak_rss_mib).values())
        cpu0 = sum(client.run(cpu_seconds).values())
        t0 = time.perf_counter()
        summary = run_sweep(spec, client, progress=False)
        run_wall = time.perf_counter() - t0
        workers_cpu = sum(client.run(cpu_seconds).values()) - cpu0
        workers_rss = list(client.run(worker_peak_rss_mib).values())
    t0 = time.perf_counter()
    top = rank(summary.out, by="sharpe", top=20)
    rank_s = time.perf_counter() - t0
    group = zarr.open_group(summary.out, mode="r")
    timings = json.loads(group.attrs["timings_s"])
    block_combos = math.prod(group["sharpe"].chunks)  # (symbol=1, *block shape)
    emit({"timings": timings, "block_combos": block_combos, "run_wall_s": run_wall,
          "workers_cpu_s": workers_cpu, "compute_s": summary.seconds, "n_combos": summary.n_combos,
          "n_blocks": summary.n_blocks, "combo_bars": summary.combo_bars,
          "cluster_start_s": start_s, "worker_warm_s": max(warm.values()), "rank_s": rank_s,
          "rank_rows": len(top), "top_sharpe": float(top["sharpe"].iloc[0]),
          "driver_rss_mib": peak_rss_mib(), "workers_rss_mib": workers_rss,
          "workers_warm_rss_mib": warm_rss})


def signals(strategy: str, close, params: dict):
    """Long entries/exits (n_bars, n_combos), the rules of tests/ref_strategies.py with
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
    """Our vectorized signals equal tests/ref_strategies.py's on a prefix (EMA/RSI are
    causal), for the first combos."""
    import numpy as np

    sys.path.insert(0, str(ROOT / "tests"))
    from ref_strategies import ref_signals

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
    best, results, cpu = None, None, math.nan
    for _ in range(job["repeat"]):
        timings, c0 = [0.0, 0.0], time.process_time()
        parts = [batch(lo, min(lo + VBT_BATCH, m), slice(None), timings)
                 for lo in range(0, m, VBT_BATCH)]
        if best is None or sum(timings) < sum(best):
            best, results, cpu = timings, parts, time.process_time() - c0
    stacked = [np.concatenate([p[i] for p in results]) for i in range(5)]
    np.savez(job["out"], **dict(zip((*CHECKED, "n_trades", "dust"), stacked)))
    emit({"seconds": sum(best), "cpu_s": cpu, "from_signals_s": best[0], "metrics_s": best[1],
          "signals_s": signals_s, "n_combos": m, "n_bars": len(close),
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
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    env.pop("NUMBA_NUM_THREADS", None)
    t0 = time.perf_counter()
    proc = subprocess.run([barsweep_script(), "demo", "--dir", str(tmp / name),
                           "--workers", str(N_WORKERS)],
                          capture_output=True, text=True, env=env, cwd=tmp, timeout=900)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-6000:])
        raise SystemExit(f"FAIL: barsweep demo exited {proc.returncode}")
    found = re.search(r"([\d,]+) combos in .*?: ([\d.]+) s", proc.stdout)
    combos = int(found.group(1).replace(",", "")) if found else None
    sweep_s = float(found.group(2)) if found else None
    return {"seconds": wall, "n_combos": combos, "sweep_s": sweep_s}


def source_stamp() -> list[tuple[str, int]]:
    """Modification times of barsweep's sources: numba's cache is keyed on them."""
    return sorted((str(f), f.stat().st_mtime_ns) for d in ("engine", "pipeline", "datasets")
                  for f in (ROOT / d).rglob("*.py"))


def first_calls(tmp: Path, store: str, params_file: Path, tries: int = 3) -> list[list]:
    """Cold then warm first call of the kernel and of ``barsweep demo``: table rows.

    A pair is run again (fresh cache) if barsweep's sources changed during it, since
    the warm call would then recompile.
    """
    rows = []
    for what in ("kernel", "demo"):
        for attempt in range(1, tries + 1):
            stamp, pair = source_stamp(), []
            cache = tmp / f"numba-cache-{what}-{attempt}"
            states = ("cold", "warm", "warm, no scipy") if what == "kernel" else ("cold", "warm")
            for state in states:
                if what == "kernel":
                    rec = run_child(SCRIPT, "first_call",
                                    {"store": store, "params": str(params_file),
                                     "strategy": "ema_cross",
                                     "hide_scipy": state.endswith("no scipy")},
                                    env={"NUMBA_CACHE_DIR": str(cache)})
                    rec["seconds"] = rec["end_epoch"] - rec["spawn_epoch"]
                else:
                    rec = run_demo(tmp, cache, f"demo-{state}-{attempt}")
                log(f"first call, {what}, {state} cache: {rec['seconds']:.2f} s")
                pair.append((state, rec))
            if source_stamp() == stamp:
                break
            log(f"barsweep's sources changed during the {what} pair: running it again")
        for state, rec in pair:
            if what == "kernel":
                rows.append([
                    "first call", f"kernel, {state} NUMBA_CACHE_DIR", FIRST_CALL_COMBOS,
                    f"{SMALL_BARS:,}", fmt(rec["seconds"]), "—", "—", fmt(rec["rss_mib"], 0),
                    ("(scipy not importable, as in `pip install barsweep`) "
                     if state.endswith("no scipy") else "") +
                    f"process start to first `sweep()` result: import barsweep "
                    f"{rec['import_s']:.2f} s, bars + "
                    f"{'compile + ' if state == 'cold' else 'cache load + '}"
                    f"sweep {rec['first_sweep_s']:.2f} s"])
            else:
                rows.append([
                    "first call", f"`barsweep demo`, {state} NUMBA_CACHE_DIR",
                    fmt(rec["n_combos"], 0) if rec["n_combos"] else "—", f"{SMALL_BARS:,}",
                    fmt(rec["seconds"]), "—", "—", "—",
                    f"whole CLI ({N_WORKERS} workers): synth bars, cluster start, sweep "
                    f"(fill next_open; {fmt(rec['sweep_s'])} s as the demo reports it), top 10"])
    return rows


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
            problems.append(f"{case.key} pipeline {name}: store differs from sweep()")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller everything: a smoke run")
    parser.add_argument("--out", help="also write the markdown report here")
    parser.add_argument("--repeat", type=int, default=1,
                        help="timed repetitions of the kernel and vectorbt (best is kept)")
    parser.add_argument("--cases", default="abc", help="which cases to run (default abc)")
    parser.add_argument("--no-first-call", action="store_true",
                        help="skip the cold/warm first-call rows (kernel and demo)")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args()
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
                                                               first_params)

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
            kernel_rate = combo_bars / kern["seconds"]
            log(f"  kernel {kern['seconds']:.2f} s, {kernel_rate / 1e6:.1f} M combo-bars/s; "
                "pipeline...")

            zarr_path = str(tmp / f"{case.key}-results.zarr")
            warm_params = {k: v[:2].tolist() for k, v in params.items()}
            pipe = run_child(SCRIPT, "pipeline", {
                "spec": case.spec(store, zarr_path), "workers": N_WORKERS,
                "store": store, "warm_params": warm_params})
            pipe_rate = pipe["combo_bars"] / pipe["run_wall_s"]
            log(f"  pipeline {pipe['run_wall_s']:.2f} s, rank {pipe['rank_s']:.2f} s; "
                f"vectorbt on {len(subset)} combos...")

            vb = run_child(SCRIPT, "vbt", {
                "store": store, "strategy": case.strategy, "repeat": args.repeat,
                "params": str(tmp / f"{case.key}-subset.npz"),
                "out": str(tmp / f"{case.key}-vbt.npz")})
            vbt_rate = vb["n_combos"] * vb["n_bars"] / vb["seconds"]
            vbt_full_s = vb["seconds"] * n / vb["n_combos"]
            log(f"  vectorbt {vb['seconds']:.2f} s on {vb['n_combos']} combos "
                f"({vbt_rate / 1e6:.2f} M combo-bars/s)")

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
                                f"sweep()'s {best}")

            bars_txt = f"{case.n_bars:,}"
            rows += [
                [case.label, "barsweep kernel: `sweep()`, 1 thread", f"{n:,}", bars_txt,
                 fmt(kern["seconds"]), fmt(n / kern["seconds"], 0),
                 f"{fmt(kernel_rate / 1e6, 1)} (per core)", fmt(kern["rss_mib"], 0),
                 f"all combos in one call, warm (a 16-combo call compiles first); CPU "
                 f"{kern['cpu_s']:.2f} s"],
                [case.label, f"barsweep run: `run_sweep`, {N_WORKERS} workers, Zarr",
                 f"{n:,}", bars_txt, fmt(pipe["run_wall_s"]),
                 fmt(n / pipe["run_wall_s"], 0),
                 f"{fmt(pipe_rate / N_WORKERS / 1e6, 1)} per core "
                 f"({fmt(pipe_rate / 1e6, 1)} total)",
                 f"driver {fmt(pipe['driver_rss_mib'], 0)}, workers ≤ "
                 f"{fmt(max(pipe['workers_rss_mib']), 0)}",
                 f"{pipe['n_blocks']} block{'s' if pipe['n_blocks'] > 1 else ''} of ≤ "
                 f"{pipe['block_combos']:,} combos; workers' CPU "
                 f"{pipe['workers_cpu_s']:.2f} s of {N_WORKERS} x {pipe['run_wall_s']:.2f} s; "
                 f"plan + store "
                 f"{pipe['timings']['plan_and_create']:.2f} s, compute + write "
                 f"{pipe['timings']['compute_and_write']:.2f} s (task time summed over "
                 f"workers {pipe['timings']['task_seconds_sum']:.2f} s); cluster start "
                 f"({pipe['cluster_start_s']:.1f} s) and worker warm-up "
                 f"({pipe['worker_warm_s']:.2f} s) before timing"],
                [case.label, "barsweep `rank(top=20, by=sharpe)`", f"{n:,}", "—",
                 fmt(pipe["rank_s"], 3), "—", "—", "(in driver)", "reads the Zarr store"],
                [case.label, "vectorbt `from_signals` (extrapolated)", f"{n:,}", bars_txt,
                 fmt(vbt_full_s), fmt(n / vbt_full_s, 0),
                 f"{fmt(vbt_rate / 1e6, 2)} (per core)", fmt(vb["rss_mib"], 0),
                 f"EXTRAPOLATED x{n / vb['n_combos']:.1f} from 1 combo in {stride} "
                 f"({vb['n_combos']} combos, {vb['seconds']:.2f} s: from_signals "
                 f"{vb['from_signals_s']:.2f} s + 4 metrics {vb['metrics_s']:.2f} s, batches "
                 f"of ≤ {VBT_BATCH} columns; CPU {vb['cpu_s']:.2f} s); TA-Lib signals "
                 f"({vb['signals_s']:.2f} s) not counted"],
                [case.label, "ratio: barsweep kernel / vectorbt", "", "", "", "",
                 f"**{kernel_rate / vbt_rate:.1f}x** (per core)", "", "combo-bars/s"],
                [case.label, "ratio: barsweep run / kernel", "", "", "", "",
                 f"**{pipe_rate / N_WORKERS / kernel_rate:.2f}** (per core)", "",
                 "pipeline efficiency per worker"],
                [case.label, "ratio: ranking / sweep", "", "",
                 f"**{pipe['rank_s'] / pipe['run_wall_s']:.3f}**", "", "", "",
                 "rank seconds / run_sweep seconds"],
            ]
        rows += first_rows

    columns = ["case", "engine", "combos", "bars", "seconds", "combos/s", "M combo-bars/s",
               "peak RSS MiB", "notes"]
    lines = [preamble, table(columns, rows), ""]
    lines.append(
        f"All: fees {FEES:.1%}, fill at close, long only, {PPY} bars/year, synthetic bars "
        f"(seed {SEED}). Kernel and vectorbt run with NUMBA_NUM_THREADS=1 (one core); "
        f"the pipeline uses a LocalCluster of {N_WORKERS} single-threaded worker processes "
        "(per core = total / workers). Each measurement is its own process; peak RSS is "
        "that process's `ru_maxrss` (workers: each worker's, via `client.run`). "
        f"Timings are the best of {args.repeat} run(s) on a shared machine: expect noise.")
    lines += ["", "## Correctness: barsweep `sweep()` vs vectorbt on the combos both ran", ""]
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
              "pipeline's Zarr store is also checked against `sweep()` (rtol 1e-12) and "
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
