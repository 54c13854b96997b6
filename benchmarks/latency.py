"""Answers in seconds: what a user waits for, BEFORE and AFTER.

BEFORE is a commit (``--before-commit``, 131dae6 by default) as a package tree put first
on ``PYTHONPATH`` (``--before-pkg``, default /tmp/basepkg); AFTER is the tree this script
sits in, as it is when it runs.
Every CLI call is a fresh ``python -m barsweep.pipeline.cli ...`` started from a
temporary directory outside the repository, so the editable install cannot shadow the
BEFORE tree (checked once per side: ``barsweep.__file__`` is printed in the header).

Rows (the goal in brackets):

1. ``barsweep demo``, numba's cache warm: wall from process start to exit [<= 3 s];
   its phases from the stores it leaves (``timings_s``, ``block_phases_s``, ``cluster``)
   and the import time of the CLI.
2. ``barsweep run --quiet --overwrite`` of 10,000 ema_cross combos (fast 2..101 x slow
   110..209) on 26,280 synthetic 1h bars, warm [<= 2 s]; phases from ``timings_s``.
3. 1,000,000 combos: ``barsweep run`` end to end against the bare kernel on the same 2
   cores [>= 0.9x the kernel's throughput], by ``benchmarks/pipeline_vs_kernel.py``.
4. Cold: ``barsweep demo`` with an empty numba cache (a fresh ``NUMBA_CACHE_DIR`` per
   run) [<= 12 s]; the first run of every other builtin strategy (a grid of 2 values per
   parameter on 26,280 bars), also with an empty cache [<= 10 s], once each.
5. ``backtest()``: the first call in a fresh process, caches warm [<= 1 s], and one warm
   call on 26,280 and 1,000,000 bars [<= 0.85 ms, 27 ms], by the code of
   ``benchmarks/backtest_latency.py``.
6. ``data import`` of a 2M-row CSV and Parquet file against pyarrow's read of it
   [<= 3x], by the code of ``benchmarks/import_speed.py``.

    python benchmarks/latency.py [--rows 1 2 3 4 5 6] [--repeat 5] [--out benchmarks/LATENCY.md]

The markdown is rewritten after each row, so an interrupted run leaves what it measured.
BEFORE and AFTER samples alternate, so both sides see the same load.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    ROOT,
    STATS_COLUMNS,
    STATS_NOTE,
    emit,
    fmt,
    header,
    load_avg,
    repeat_stats,
    run_child,
    stats_cells,
    table,
)

BENCH = Path(__file__).resolve().parent
SIDES = ("before", "after")
N_BARS = 26_280
COLD_GRIDS = {  # two values per parameter, within each strategy's requirements
    "bollinger": {"period": [10, 20], "k": [1.5, 2.0]},
    "buy_and_hold": {},
    "donchian": {"period": [10, 20]},
    "macd": {"fast": [8, 12], "slow": [21, 26], "signal": [9]},
    "rsi": {"period": [10, 14], "lower": [25.0, 30.0], "upper": [70.0]},
    "sma_cross": {"fast": [10, 20], "slow": [50, 100]},
    "trix": {"period": [10, 15], "signal": [5, 9]},
}


# ------------------------------------------------------------------ running the CLI


class Bench:
    """Where and how each side runs: environment, a work directory, results so far."""

    def __init__(self, work: Path, before_pkg: str, repeat: int):
        self.work, self.before_pkg, self.repeat = work, before_pkg, repeat
        self.rows: list[dict] = []     # the main table, one dict per measured row
        self.phases: list[str] = []    # markdown sections after the table
        self.bars: dict[str, Path] = {}

    def env(self, side: str, **extra: str) -> dict:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if side == "before":
            env["PYTHONPATH"] = self.before_pkg
        return {**env, **extra}

    def run(self, side: str, args: list[str], **extra: str) -> tuple[float, str]:
        """``python args...`` for a side, from the work directory; (wall s, stdout)."""
        cmd = [sys.executable, *args]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=self.work, env=self.env(side, **extra),
                              capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{side}: {' '.join(args)} exited {proc.returncode}: "
                               + (proc.stdout[-1500:] + proc.stderr[-3000:]).strip())
        return wall, proc.stdout

    def cli(self, side: str, *args: str, **extra: str) -> float:
        return self.run(side, ["-m", "barsweep.pipeline.cli", *args], **extra)[0]

    def bars_store(self, side: str) -> Path:
        """26,280 synthetic 1h BTCUSDT bars written by that side's CLI (once)."""
        if side not in self.bars:
            store = self.work / f"bars-{side}"
            self.cli(side, "data", "synth", "--symbol", "BTCUSDT", "--timeframe", "1h",
                     "--bars", str(N_BARS), "--seed", "7", "--store", str(store))
            self.bars[side] = store
        return self.bars[side]

    def spec(self, side: str, name: str, strategy: str, grid: dict) -> Path:
        """A run spec (JSON is YAML) on that side's bars; its path."""
        path = self.work / f"{name}-{side}.yaml"
        path.write_text(json.dumps({
            "data": {"store": str(self.bars_store(side)), "symbols": ["BTCUSDT"],
                     "timeframe": "1h"},
            "strategy": strategy, "grid": grid,
            "execution": {"fill": "close", "fees": 0.001},
            "run": {"out": str(self.work / f"{name}-{side}.zarr")}}, indent=1))
        return path


def alternate(n: int, measure) -> dict:
    """``measure(side, i)`` n times per side, BEFORE and AFTER alternating; per side the
    list of results and the load just before its first and just after its last."""
    out = {side: {"samples": [], "load": [None, None]} for side in SIDES}
    for i in range(n):
        for side in SIDES:
            if i == 0:
                out[side]["load"][0] = load_avg()
            out[side]["samples"].append(measure(side, i))
            if i == n - 1:
                out[side]["load"][1] = load_avg()
    return out


def attrs(store: Path) -> dict:
    """A results store's attributes, JSON-string values decoded."""
    import zarr

    found = dict(zarr.open_group(str(store), mode="r").attrs)
    for key, value in found.items():
        if isinstance(value, str) and value[:1] in "{[":
            try:
                found[key] = json.loads(value)
            except ValueError:
                pass
    return found


def add_row(bench: Bench, label: str, goal: str, limit: float, results: dict,
            unit: str = "s", higher_is_better: bool = False, note: str = "") -> None:
    """One row of the main table from :func:`alternate`-shaped results of numbers."""
    row = {"label": label, "goal": goal, "unit": unit, "note": note}
    for side in SIDES:
        if results.get(side) and results[side]["samples"]:
            row[side] = (repeat_stats(results[side]["samples"]), tuple(results[side]["load"]))
    after = row.get("after")
    if after:
        ok = after[0]["median"] >= limit if higher_is_better else after[0]["median"] <= limit
        row["met"] = "yes" if ok else "no"
    bench.rows.append(row)


def phase_table(title: str, per_side: dict[str, list[dict]], digits: int = 3) -> str:
    """Median over runs of each named phase (seconds), BEFORE and AFTER side by side."""
    keys = list(dict.fromkeys(k for side in SIDES for run in per_side.get(side, [])
                              for k in run))
    rows = []
    for key in keys:
        cells = []
        for side in SIDES:
            values = [run[key] for run in per_side.get(side, []) if run.get(key) is not None]
            if values and all(isinstance(v, (int, float)) for v in values):
                cells.append(f"{fmt(statistics.median(values), digits)} (n={len(values)})")
            elif values:
                cells.append(", ".join(sorted({str(v) for v in values})))
            else:
                cells.append("—")
        rows.append([key, *cells])
    return f"{title}\n\n" + table(["phase", "BEFORE median", "AFTER median"], rows)


# ------------------------------------------------------------------ the rows


def import_seconds(bench: Bench, side: str) -> float:
    code = ("import time; t = time.perf_counter(); import barsweep.pipeline.cli; "
            "print(time.perf_counter() - t)")
    return float(bench.run(side, ["-c", code])[1].split()[-1])


def row_demo_warm(bench: Bench) -> None:
    """Row 1: ``barsweep demo`` with numba's cache warm; phases from its stores."""
    for side in SIDES:  # fills numba's cache and bytecode
        bench.cli(side, "demo", "--dir", str(bench.work / f"demo-warmup-{side}"))
    phases = {side: [] for side in SIDES}

    def measure(side, i):
        demo = bench.work / f"demo-{side}-{i}"
        wall = bench.cli(side, "demo", "--dir", str(demo))
        run = {"wall (process start to exit)": wall}
        for store in ("results.zarr", "results_wf.zarr"):
            if not (demo / store).exists():
                continue
            found = attrs(demo / store)
            for key, value in (found.get("timings_s") or {}).items():
                run[f"{store} timings_s.{key}"] = value
            for key, value in (found.get("block_phases_s") or {}).items():
                run[f"{store} block_phases_s.{key} (sum over blocks)"] = value.get("total")
            run[f"{store} cluster"] = found.get("cluster") or "(not recorded: local processes)"
        phases[side].append(run)
        return wall

    results = alternate(bench.repeat, measure)
    add_row(bench, "1. `barsweep demo`, warm numba cache, process start to exit",
            "<= 3 s", 3.0, results)
    imports = alternate(bench.repeat, lambda side, i: import_seconds(bench, side))
    versions = alternate(bench.repeat, lambda side, i: bench.cli(side, "--version"))
    for side in SIDES:
        for run, imp, ver in zip(phases[side], imports[side]["samples"],
                                 versions[side]["samples"]):
            run["`import barsweep.pipeline.cli` in a fresh process (separate runs)"] = imp
            run["`python -m barsweep.pipeline.cli --version`, wall (separate runs)"] = ver
            totals = sum(v for k, v in run.items() if k.endswith("timings_s.total"))
            rest = ("wall − CLI import − stores' `total`s (interpreter start-up, synth, "
                    "rank, printing, exit)")
            run[rest] = run["wall (process start to exit)"] - imp - totals
    bench.phases.append(phase_table(
        "### Row 1: where `barsweep demo` spends its seconds\n\n"
        "Per run, the attributes of the two stores the demo leaves (`results.zarr`, the "
        "sweep; `results_wf.zarr`, the walk-forward), medians over the runs; "
        "`block_phases_s` are summed over blocks (busy seconds, on threads or workers "
        "side by side, so they may exceed the wall). The CLI import is timed in separate "
        "fresh processes, same count.", phases))


def row_run_10k(bench: Bench) -> None:
    """Row 2: a 10,000-combo ``barsweep run``, warm."""
    grid = {"fast": {"start": 2, "stop": 101, "step": 1},
            "slow": {"start": 110, "stop": 209, "step": 1}}
    specs = {side: bench.spec(side, "run10k", "ema_cross", grid) for side in SIDES}
    for side in SIDES:  # warm-up
        bench.cli(side, "run", str(specs[side]), "--overwrite", "--quiet")
        n_combos = attrs(bench.work / f"run10k-{side}.zarr")["n_combos"]
        if n_combos != 10_000:
            raise RuntimeError(f"{side}: the 10k spec gave {n_combos} combos")
    phases = {side: [] for side in SIDES}

    def measure(side, i):
        wall = bench.cli(side, "run", str(specs[side]), "--overwrite", "--quiet")
        found = attrs(bench.work / f"run10k-{side}.zarr")
        phases[side].append({"wall (process start to exit)": wall,
                             **{f"timings_s.{k}": v for k, v in found["timings_s"].items()},
                             "cluster": found.get("cluster") or "(not recorded: local processes)"})
        return wall

    results = alternate(bench.repeat, measure)
    add_row(bench, f"2. `barsweep run` 10,000 ema_cross combos x {N_BARS:,} bars, warm, "
            "process start to exit", "<= 2 s", 2.0, results)
    totals = {side: {"samples": [p["timings_s.total"] for p in phases[side]],
                     "load": results[side]["load"]} for side in SIDES}
    add_row(bench, "2b. the same runs: the store's `timings_s.total` (plan, store, "
            "compute, writes; no start-up)", "<= 2 s", 2.0, totals)
    bench.phases.append(phase_table(
        "### Row 2: phases of the 10,000-combo run (store attribute `timings_s`)", phases))


def parse_pvk(text: str) -> dict:
    """The figures printed by pipeline_vs_kernel.py."""
    import re

    kernel = re.search(r"kernel, 2 threads: ([\d,]+) combos in ([\d.]+) s, (\d+) M", text)
    run = re.search(r"end to end, 2 workers: ([\d.]+) s, (\d+) M combo-bars/s; "
                    r"pipeline/kernel ([\d.]+)", text)
    if not (kernel and run):
        raise RuntimeError("pipeline_vs_kernel.py printed no figures:\n" + text[-2000:])
    return {"combos": int(kernel[1].replace(",", "")), "kernel_s": float(kernel[2]),
            "kernel_mcbs": float(kernel[3]), "run_s": float(run[1]),
            "run_mcbs": float(run[2]), "ratio": float(run[3])}


def row_million(bench: Bench, n: int) -> None:
    """Row 3: 1M combos end to end against the bare kernel (pipeline_vs_kernel.py)."""
    script = str(BENCH / "pipeline_vs_kernel.py")
    runs = alternate(n, lambda side, i: parse_pvk(
        bench.run(side, [script], NUMBA_NUM_THREADS="2")[1]))
    ratios = {side: {"samples": [r["ratio"] for r in runs[side]["samples"]],
                     "load": runs[side]["load"]} for side in SIDES}
    add_row(bench, "3. 1,000,000 ema_cross combos x 26,280 bars: `barsweep run` "
            "throughput / bare kernel's, 2 cores", ">= 0.9x", 0.9, ratios, unit="x",
            higher_is_better=True, note=f"n={n} by --million-repeat (each ~2-4 min)")
    per_side = {side: [{"kernel s (sweep(), 2 numba threads)": r["kernel_s"],
                        "kernel M combo-bars/s": r["kernel_mcbs"],
                        "run s (run_spec, LocalCluster of 2 workers)": r["run_s"],
                        "run M combo-bars/s": r["run_mcbs"],
                        "run / kernel throughput": r["ratio"]}
                       for r in runs[side]["samples"]] for side in SIDES}
    bench.phases.append(phase_table(
        "### Row 3: `NUMBA_NUM_THREADS=2 python benchmarks/pipeline_vs_kernel.py` "
        f"({runs['after']['samples'][0]['combos']:,} combos), medians", per_side, 2))


def row_cold(bench: Bench, n_demo: int) -> None:
    """Row 4: first runs with an empty numba cache."""
    def cold_demo(side, i):
        cache = tempfile.mkdtemp(prefix=f"numba-{side}-", dir=bench.work)
        return bench.cli(side, "demo", "--dir", str(bench.work / f"demo-cold-{side}-{i}"),
                         NUMBA_CACHE_DIR=cache)

    add_row(bench, "4. `barsweep demo`, empty numba cache (fresh `NUMBA_CACHE_DIR`)",
            "<= 12 s", 12.0, alternate(n_demo, cold_demo))
    for strategy, values in COLD_GRIDS.items():
        specs = {side: bench.spec(side, f"cold-{strategy}", strategy, values)
                 for side in SIDES}

        def cold_run(side, i, specs=specs):
            cache = tempfile.mkdtemp(prefix=f"numba-{side}-", dir=bench.work)
            return bench.cli(side, "run", str(specs[side]), "--overwrite", "--quiet",
                             NUMBA_CACHE_DIR=cache)

        combos = 1
        for axis in values.values():
            combos *= len(axis)
        add_row(bench, f"4. first `barsweep run` of {strategy} ({combos} combos x "
                f"{N_BARS:,} bars), empty numba cache", "<= 10 s", 10.0,
                alternate(1, cold_run), note="n=1 (one cold compile each)")


def child_warm_backtest(job: dict) -> None:
    """Runs in a fresh interpreter: backtest_latency.time_warm, its seconds."""
    import backtest_latency

    emit({"seconds": backtest_latency.time_warm(job["n_bars"], job["repeat"])})


def row_backtest(bench: Bench) -> None:
    """Row 5: backtest() fresh and warm, by backtest_latency.py's own child and timer."""
    script = BENCH / "backtest_latency.py"
    byte_code = {"PYTHONDONTWRITEBYTECODE": ""}
    for side in SIDES:  # fills numba's cache and bytecode
        run_child(script, "fresh", {"n_bars": N_BARS}, env={**bench.env(side), **byte_code})
    records = alternate(bench.repeat, lambda side, i: run_child(
        script, "fresh", {"n_bars": N_BARS}, env={**bench.env(side), **byte_code}))

    def column(key):
        return {side: {"samples": [r[key] if key != "wall_s" else
                                   r["end_epoch"] - r["spawn_epoch"]
                                   for r in records[side]["samples"]],
                       "load": records[side]["load"]} for side in SIDES}

    add_row(bench, f"5. fresh process to the end of the first `backtest()`, {N_BARS:,} bars, "
            "caches warm", "<= 1 s", 1.0, column("wall_s"))
    add_row(bench, "5. of which `import barsweep.engine`", "—", float("inf"),
            column("import_s"))
    add_row(bench, "5. of which the first `backtest()` call", "—", float("inf"),
            column("first_call_s"))
    warm_n = max(20, bench.repeat)
    for n_bars, goal in ((N_BARS, 0.85), (1_000_000, 27.0)):
        def warm(side, i, n_bars=n_bars):
            record = run_child(Path(__file__), "warm_backtest",
                               {"n_bars": n_bars, "repeat": warm_n}, env=bench.env(side))
            return [s * 1e3 for s in record["seconds"]]

        runs = alternate(1, warm)
        for side in SIDES:
            runs[side]["samples"] = runs[side]["samples"][0]
        add_row(bench, f"5. one warm `backtest()`, {n_bars:,} bars", f"<= {goal} ms",
                goal, runs, unit="ms",
                note=f"n={warm_n} calls in one process after an untimed one")


def row_import(bench: Bench) -> None:
    """Row 6: ``data import`` of a 2M-row CSV and Parquet against pyarrow's read."""
    import import_speed

    n_rows = 2_000_000
    paths = import_speed.write_files(bench.work, n_rows)
    script = str(BENCH / "import_speed.py")

    def child(side, variant, path):
        out = bench.run(side, [script, "--child", variant, str(path),
                               "--repeat", str(bench.repeat)])[1]
        line = next(x for x in out.splitlines() if x.startswith(import_speed.JSON_TAG))
        result = json.loads(line[len(import_speed.JSON_TAG):])
        if variant == "barsweep" and result["rows"] != n_rows:
            raise RuntimeError(f"{side}: imported {result['rows']} rows, not {n_rows}")
        return result["seconds"]

    for kind in ("csv", "parquet"):
        timings = alternate(1, lambda side, i, kind=kind: {
            variant: child(side, variant, paths[kind]) for variant in ("pyarrow", "barsweep")})
        row = {"label": f"6. `data import` of a {n_rows:,}-row {kind.upper()} file / "
                        "pyarrow's read of it", "goal": "<= 3x", "unit": "ratio",
               "note": f"n={bench.repeat} each, after an untimed run, in one process"}
        for side in SIDES:
            seconds = timings[side]["samples"][0]
            bs, pa = repeat_stats(seconds["barsweep"]), repeat_stats(seconds["pyarrow"])
            row[side] = (bs, pa, tuple(timings[side]["load"]))
        after_ratio = row["after"][0]["median"] / row["after"][1]["median"]
        row["met"] = "yes" if after_ratio <= 3.0 else "no"
        bench.rows.append(row)


# ------------------------------------------------------------------ the markdown


def main_cell(row: dict, side: str) -> str:
    if side not in row:
        return "not measured"
    if row["unit"] == "ratio":
        bs, pa, _ = row[side]
        return (f"**{bs['median'] / pa['median']:.1f}x** ({bs['best'] / pa['best']:.1f}x "
                f"from bests; {fmt(bs['median'])} s / {fmt(pa['median'], 3)} s, "
                f"n={bs['n']})")
    stats, _ = row[side]
    digits = 3 if row["unit"] == "ms" or stats["median"] < 1 else 2
    unit = {"s": " s", "ms": " ms", "x": "x"}[row["unit"]]
    return (f"**{fmt(stats['median'], digits)}{unit}** (best {fmt(stats['best'], digits)}, "
            f"spread {fmt(stats['spread'], digits)}, n={stats['n']})")


def detail_rows(row: dict) -> list[list[str]]:
    out = []
    for side in SIDES:
        if side not in row:
            continue
        if row["unit"] == "ratio":
            bs, pa, load = row[side]
            out.append([row["label"] + ": barsweep s", side.upper(), *stats_cells(bs, load, 3)])
            out.append([row["label"] + ": pyarrow s", side.upper(), *stats_cells(pa, load, 3)])
        else:
            stats, load = row[side]
            unit = {"s": "s", "ms": "ms", "x": "ratio"}[row["unit"]]
            out.append([f"{row['label']} ({unit})", side.upper(),
                        *stats_cells(stats, load, 3)])
    return out


def render(bench: Bench, started: str, sides_info: dict, failures: list[str]) -> str:
    head = header("Answers in seconds: BEFORE and AFTER")
    lines = [
        head,
        f"- started {started}; the machine has 2 cores shared with other users, so every "
        "figure is a median of several runs, BEFORE and AFTER alternating, with the "
        "1-minute load average beside it (detail table)",
        f"- BEFORE: commit {bench.before_commit} from `PYTHONPATH={bench.before_pkg}` "
        f"(`barsweep.__file__` = `{sides_info['before']}`)",
        f"- AFTER: this tree as it was during the run, HEAD {sides_info['head']}"
        + (f", with uncommitted changes in {sides_info['dirty']}" if sides_info["dirty"]
           else "") + f" (`barsweep.__file__` = `{sides_info['after']}`)",
        "- CLI calls: `python -m barsweep.pipeline.cli ...` (what `barsweep ...` runs) from "
        "a temporary directory, fresh process each, wall time from spawn to exit; bars: "
        f"`barsweep data synth --symbol BTCUSDT --timeframe 1h --bars {N_BARS} --seed 7`; "
        "specs: fill close, fees 0.001; row 3: `NUMBA_NUM_THREADS=2 python "
        "benchmarks/pipeline_vs_kernel.py`; row 5: `benchmarks/backtest_latency.py`'s "
        "fresh child and `time_warm`; row 6: `benchmarks/import_speed.py`'s files and "
        "children",
        "- \"met?\" compares AFTER's median with the goal",
        "",
        table(["row", "goal", "BEFORE median (best, spread, n)",
               "AFTER median (best, spread, n)", "met?", "note"],
              [[r["label"], r["goal"], main_cell(r, "before"), main_cell(r, "after"),
                r.get("met", "—") if r["goal"] != "—" else "—", r["note"]]
               for r in sorted(bench.rows, key=lambda r: r["label"][0])]),
        "",
    ]
    if failures:
        lines += ["**Not measured:**", ""] + [f"- {f}" for f in failures] + [""]
    lines += ["## Every figure with its spread and load", "",
              table(["row", "side", *STATS_COLUMNS],
                    [cells for r in sorted(bench.rows, key=lambda r: r["label"][0])
                     for cells in detail_rows(r)]), "",
              STATS_NOTE, "", "## Phases", ""]
    lines += [section + "\n" for section in bench.phases]
    return "\n".join(lines)


def side_facts(bench: Bench) -> dict:
    code = "import barsweep; print(barsweep.__file__)"
    facts = {side: bench.run(side, ["-c", code])[1].strip() for side in SIDES}
    if not facts["before"].startswith(bench.before_pkg):
        raise SystemExit(f"BEFORE imports {facts['before']}, not {bench.before_pkg}")
    git = ["git", "-C", str(ROOT)]
    facts["head"] = subprocess.run([*git, "rev-parse", "--short", "HEAD"], text=True,
                                   capture_output=True).stdout.strip()
    status = subprocess.run([*git, "status", "--short", "--untracked-files=no", "--",
                             "datasets", "engine", "pipeline", "__init__.py", "errors.py",
                             "version.py"],
                            text=True, capture_output=True).stdout.split("\n")
    facts["dirty"] = ", ".join(f"`{line[3:]}`" for line in status if line.strip())
    return facts


ROWS = {"1": row_demo_warm, "2": row_run_10k, "3": None, "4": None, "5": row_backtest,
        "6": row_import}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--repeat", type=int, default=5,
                        help="runs per side for rows 1, 2, 5 and 6 (default 5)")
    parser.add_argument("--million-repeat", type=int, default=2,
                        help="pipeline_vs_kernel.py runs per side, row 3 (default 2)")
    parser.add_argument("--cold-repeat", type=int, default=2,
                        help="cold demo runs per side, row 4 (default 2)")
    parser.add_argument("--before-pkg", default="/tmp/basepkg")
    parser.add_argument("--before-commit", default="131dae6",
                        help="the commit the --before-pkg tree was made from, for the header")
    parser.add_argument("--out", default=str(BENCH / "LATENCY.md"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "warm_backtest":
        child_warm_backtest(json.loads(args.job))
        return
    if "PYTHONPATH" in os.environ:
        raise SystemExit("unset PYTHONPATH: AFTER must import the tree this script sits in")

    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="barsweep-latency-") as work:
        bench = Bench(Path(work), args.before_pkg, args.repeat)
        bench.before_commit = args.before_commit
        facts = side_facts(bench)
        for key in args.rows:
            row = ROWS[key]
            if key == "3":
                row = lambda b: row_million(b, args.million_repeat)  # noqa: E731
            elif key == "4":
                row = lambda b: row_cold(b, args.cold_repeat)  # noqa: E731
            t0 = time.perf_counter()
            print(f"row {key} ...", file=sys.stderr, flush=True)
            try:
                row(bench)
            except Exception as exc:  # noqa: BLE001 - one row's failure is reported
                failures.append(f"row {key}: {type(exc).__name__}: "
                                + str(exc).replace("\n", " ")[:600])
            print(f"row {key}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
            Path(args.out).write_text(render(bench, started, facts, failures))
    print(Path(args.out).read_text())


if __name__ == "__main__":
    main()
