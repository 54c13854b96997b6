"""Search benchmarks: sampled and successive-halving search against grids, on synthetic
hourly bars (``barsweep data synth``), through ``run_spec`` on a threads cluster.

    python benchmarks/search.py good [--seeds 10] [--budget 5000] [--bars 26280]
    python benchmarks/search.py big [--repeats 3] [--bars 8760] [--budget 100000]
    python benchmarks/search.py draw [--budget 100000]
    python benchmarks/search.py bookkeeping [--budget 1000000] [--bars 8760] [--rungs 3]

``good``: ema_cross fast 2..201 x slow 10..1009 (fast < slow) run as a grid (the
reference), then per seed halving (eta 3, rungs 3 and 4) and random at the same budget:
the best last-rung combo's sharpe, its share of the grid ranked at or above it, and the
share of the grid's combo-bars the search ran (from the store's ``rung`` and
``bars_run``). ``big``: the 4-parameter rsi/sma rule, 1,000 values each (10^12 combos),
random at ``budget`` against an 18^4 grid of the same rule, alternated after one
uncounted grid run that compiles the rule, each run in a fresh interpreter: wall time,
the driver's peak RSS, and the Python memory the plan (the draw included) allocated at
its peak (``tracemalloc``). ``draw``: the draw alone, boxes of 10^6 to 10^15.
``bookkeeping``: halving at ``budget`` on a 10^7-combo ema_cross box: seconds spent
drawing, promoting and writing against the blocks' kernel and indicator seconds.

Every line printed carries the load average (``uptime``'s 1-minute figure).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SYMBOL, load_avg, peak_rss_mib, run_child, table  # noqa: E402

EMA_GRID = {"fast": {"start": 2, "stop": 201, "step": 1},
            "slow": {"start": 10, "stop": 1009, "step": 1}}
RSI_RULE = {"name": "rsi_trend",
            "rule": {"entry": "rsi(close, period) < lower and close > sma(close, trend)",
                     "exit": "rsi(close, period) > upper"}}
RSI_BIG = {"period": {"start": 2, "stop": 1001, "step": 1},
           "lower": {"start": 5.0, "stop": 54.95, "step": 0.05},
           "upper": {"start": 50.0, "stop": 99.95, "step": 0.05},
           "trend": {"start": 10, "stop": 1009, "step": 1}}
RSI_GRID = {"period": list(range(2, 1001, 58)),                      # 18 values
            "lower": [round(5 + 2.9 * i, 2) for i in range(18)],
            "upper": [round(50 + 2.9 * i, 2) for i in range(18)],
            "trend": list(range(10, 1009, 58))}


def bars_store(n_bars: int) -> str:
    from barsweep.datasets import write_synth

    store = tempfile.mkdtemp(prefix="barsweep-search-")
    write_synth(store, SYMBOL, "1h", n_bars, 7)
    return store


def make_spec(store: str, out: str, strategy, grid: dict, search: dict | None = None,
              constraints: list | None = None):
    from barsweep.pipeline.config.model import parse_spec

    spec = {"data": {"store": store, "symbols": [SYMBOL], "timeframe": "1h"},
            "strategy": strategy, "grid": grid,
            "execution": {"fill": "close", "fees": 0.001},
            "run": {"out": out, "max_combos": 10 ** 13}}
    if constraints:
        spec["constraints"] = constraints
    if search:
        spec["search"] = search
    return parse_spec(spec)


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {load_avg():.2f}] {line}", flush=True)


def timed_run(spec, client) -> tuple[float, dict]:
    """Run ``spec`` on ``client``; (wall seconds, the store's attributes)."""
    from barsweep.pipeline.run.orchestrate import run_spec
    from barsweep.pipeline.run.results import store_attrs

    t0 = time.perf_counter()
    summary = run_spec(spec, client=client, overwrite=True)
    return time.perf_counter() - t0, store_attrs(summary.out)


def combo_bars_run(out: str) -> int:
    """The combo-bars a search store's combos ran: every rung up to its last one."""
    import numpy as np
    import zarr

    group = zarr.open_group(out, mode="r")
    rung, bars = group["rung"][:].ravel(), group["bars_run"][:].ravel()
    ran = ~np.isnan(rung)
    rung, bars = rung[ran].astype(int), bars[ran]
    return int(sum((rung >= k).sum() * bars[rung == k][0]
                   for k in range(rung.max() + 1) if (rung == k).any()))


def best_of(out: str) -> tuple[dict, float]:
    """The top combo by sharpe of a store's last rung (as ``barsweep rank``): its
    parameters and sharpe."""
    from barsweep.pipeline.analysis.rank import rank

    row = rank(out, by="sharpe", top=1).iloc[0]
    return {"fast": int(row["fast"]), "slow": int(row["slow"])}, float(row["sharpe"])


# ------------------------------------------------------------------------ good


def good(args) -> None:
    import numpy as np
    import xarray as xr

    from barsweep.pipeline.run.cluster import connect

    store = bars_store(args.bars)
    work = tempfile.mkdtemp(prefix="barsweep-good-")
    rows = []
    with connect("threads", n_workers=2) as client:
        grid_out = f"{work}/grid.zarr"
        spec = make_spec(store, grid_out, "ema_cross", EMA_GRID, constraints=["fast < slow"])
        grid_s, _ = timed_run(spec, client)
        ds = xr.open_zarr(grid_out)
        sharpe = ds["sharpe"].sel(symbol=SYMBOL).values  # (fast, slow), NaN where excluded
        valid = ds["n_trades"].sel(symbol=SYMBOL).values >= 0
        scores = sharpe[valid & ~np.isnan(sharpe)]
        n_grid = int((valid & ~np.isnan(ds["n_trades"].sel(symbol=SYMBOL).values)).sum())
        grid_cb = n_grid * args.bars
        fast0, slow0 = int(ds["fast"][0]), int(ds["slow"][0])
        say(f"grid: {n_grid:,} combos x {args.bars:,} bars in {grid_s:.1f} s; best sharpe "
            f"{np.nanmax(scores):.4f}; top-1% threshold {np.quantile(scores, 0.99):.4f}")

        def top_share(value: float) -> float:
            return float((scores >= value).sum() / n_grid)

        for seed in range(args.seeds):
            row = {"seed": seed}
            for name, search in [
                ("h3", {"method": "halving", "eta": 3, "rungs": 3}),
                ("h4", {"method": "halving", "eta": 3, "rungs": 4}),
                ("random", {"method": "random"})]:
                out = f"{work}/{name}-{seed}.zarr"
                spec = make_spec(store, out, "ema_cross", EMA_GRID,
                                 {**search, "budget": args.budget, "seed": seed, "by": "sharpe"},
                                 constraints=["fast < slow"])
                wall, _ = timed_run(spec, client)
                params, value = best_of(out)
                in_grid = float(sharpe[params["fast"] - fast0, params["slow"] - slow0])
                share = combo_bars_run(out) / grid_cb
                row[name] = {"sharpe": value, "top": top_share(value), "share": share,
                             "wall": wall, "params": params, "equal": value == in_grid}
                say(f"seed {seed} {name}: best {params} sharpe {value:.4f} (grid's "
                    f"{in_grid:.4f}), top {top_share(value):.3%} of the grid, "
                    f"{share:.2%} of its combo-bars, {wall:.1f} s")
            rows.append(row)
    report_good(rows, n_grid, grid_s, args)


def report_good(rows: list, n_grid: int, grid_s: float, args) -> None:
    cells = []
    for r in rows:
        cell = [str(r["seed"])]
        for name in ("h3", "h4", "random"):
            x = r[name]
            cell += [f"{x['sharpe']:.4f}", f"{x['top']:.2%}"]
        cell += ["yes" if r["h3"]["sharpe"] > r["random"]["sharpe"] else "no",
                 "yes" if r["h4"]["sharpe"] > r["random"]["sharpe"] else "no"]
        cells.append(cell)
    print(table(["seed", "halving r3 sharpe", "r3 top", "halving r4 sharpe", "r4 top",
                 "random sharpe", "random top", "r3 > random", "r4 > random"], cells))
    for name in ("h3", "h4", "random"):
        xs = [r[name] for r in rows]
        print(f"{name}: top-1% in {sum(x['top'] <= 0.01 for x in xs)} of {len(xs)} seeds; "
              f"combo-bars run {min(x['share'] for x in xs):.2%}..{max(x['share'] for x in xs):.2%}"
              f" of the grid's; median wall {sorted(x['wall'] for x in xs)[len(xs) // 2]:.1f} s;"
              f" best sharpe equal to the grid's: {all(x['equal'] for x in xs)}")
    print(f"grid: {n_grid:,} combos, {grid_s:.1f} s; budget {args.budget:,}")
    print("BENCH_JSON " + json.dumps(rows))


# ------------------------------------------------------------------------- big


def big_child(job: dict) -> None:
    """One run in a fresh interpreter: random over the 10^12 box, or the 18^4 grid."""
    import tracemalloc

    from _common import emit

    from barsweep.pipeline.run import search_run
    from barsweep.pipeline.run.cluster import connect

    plan_mem = {}
    plan_search = search_run.plan_search

    def traced_plan(*a, **k):
        tracemalloc.start()
        rss0 = peak_rss_mib()
        try:
            return plan_search(*a, **k)
        finally:
            plan_mem["traced_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2 ** 20
            plan_mem["rss_peak_growth_mib"] = peak_rss_mib() - rss0
            tracemalloc.stop()

    search_run.plan_search = traced_plan
    out = tempfile.mkdtemp(prefix="barsweep-big-") + "/r.zarr"
    if job["kind"] == "random":
        spec = make_spec(job["store"], out, RSI_RULE, RSI_BIG,
                         {"method": "random", "budget": job["budget"], "seed": 1})
    else:
        spec = make_spec(job["store"], out, RSI_RULE, RSI_GRID)
    with connect("threads", n_workers=2) as client:
        wall, attrs = timed_run(spec, client)
    emit({"kind": job["kind"], "wall": wall, "n_combos": attrs.get("n_combos"),
          "driver_peak_rss_mib": peak_rss_mib(), **plan_mem,
          "phases": attrs.get("block_phases_s")})


def big(args) -> None:
    import numpy as np

    store = bars_store(args.bars)
    run_child(Path(__file__), "big", {"kind": "grid", "store": store,  # compiles the rule
                                      "budget": args.budget})
    records = []
    for i in range(args.repeats):
        for kind in (("random", "grid") if i % 2 == 0 else ("grid", "random")):
            rec = run_child(Path(__file__), "big", {"kind": kind, "store": store,
                                                     "budget": args.budget})
            records.append(rec)
            say(f"{kind}: {rec['n_combos']:,} combos x {args.bars:,} bars, {rec['wall']:.1f} s, "
                f"driver peak RSS {rec['driver_peak_rss_mib']:.0f} MiB"
                + (f", plan traced peak {rec['traced_peak_mib']:.1f} MiB" if kind == "random"
                   else "") + f" (load {rec['load_before']:.2f} → {rec['load_after']:.2f})")
    walls = {k: [r["wall"] for r in records if r["kind"] == k] for k in ("random", "grid")}
    print(table(["run", "samples s", "median s", "best s", "driver peak RSS MiB"],
                [[k, ", ".join(f"{w:.1f}" for w in v), f"{np.median(v):.1f}", f"{min(v):.1f}",
                  f"{max(r['driver_peak_rss_mib'] for r in records if r['kind'] == k):.0f}"]
                 for k, v in walls.items()]))
    print(f"random / grid: {np.median(walls['random']) / np.median(walls['grid']):.2f}x "
          f"(bests {min(walls['random']) / min(walls['grid']):.2f}x)")
    draw_memory(args)
    print("BENCH_JSON " + json.dumps(records))


def draw_memory(args) -> None:
    """The draw's time and Python memory at its peak (``tracemalloc``) for ``budget``
    combos out of boxes of 10^6 to 10^15 (1,000 values per axis, no constraint)."""
    import tracemalloc

    import numpy as np

    from barsweep.pipeline.config.grid import Grid
    from barsweep.pipeline.config.search import draw

    rows = []
    for n_axes in (2, 3, 4, 5):
        grid = Grid(tuple((f"p{i}", np.arange(1000)) for i in range(n_axes)))
        if grid.size < 2 * args.budget:
            continue
        tracemalloc.start()
        t0 = time.perf_counter()
        draw(grid, args.budget, 1)
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
        tracemalloc.stop()
        rows.append([f"10^{3 * n_axes}", f"{args.budget:,}", f"{peak:.1f}", f"{seconds:.3f}",
                     f"{load_avg():.2f}"])
    print(table(["box", "drawn", "draw traced peak MiB", "draw s", "load"], rows))


# ----------------------------------------------------------------- bookkeeping


def bookkeeping(args) -> None:
    from barsweep.pipeline.config import search as config_search
    from barsweep.pipeline.run import search as run_search
    from barsweep.pipeline.run.cluster import connect

    spent = {"draw": 0.0, "promote": 0.0, "plan_search": 0.0}

    def timing(name, fn):
        def wrapped(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t0
        return wrapped

    run_search.draw = timing("draw", config_search.draw)
    run_search.promote = timing("promote", run_search.promote)
    store = bars_store(args.bars)
    out = tempfile.mkdtemp(prefix="barsweep-book-") + "/r.zarr"
    grid = {"fast": {"start": 2, "stop": 1001, "step": 1},
            "slow": {"start": 10, "stop": 10009, "step": 1}}
    spec = make_spec(store, out, "ema_cross", grid,
                     {"method": args.method, "budget": args.budget, "seed": 1,
                      "eta": 3, "rungs": args.rungs}, constraints=["fast < slow"])
    with connect("threads", n_workers=2) as client:
        load0 = load_avg()
        wall, attrs = timed_run(spec, client)
        load1 = load_avg()
    phases = attrs["block_phases_s"]
    phases = json.loads(phases) if isinstance(phases, str) else phases
    total = {k: v["total"] for k, v in phases.items()}
    compute_s = total.get("kernel", 0) + total.get("indicators", 0)
    book = spent["draw"] + spent["promote"] + total.get("write", 0)
    print(table(["what", "seconds", "% of kernel + indicators"],
                [[k, f"{v:.2f}", f"{v / compute_s:.1%}"] for k, v in
                 [("draw", spent["draw"]), ("promote", spent["promote"]),
                  ("write (blocks)", total.get("write", 0)),
                  ("bookkeeping", book), ("open_bars (blocks)", total.get("open_bars", 0)),
                  ("indicators", total.get("indicators", 0)),
                  ("kernel", total.get("kernel", 0))]]))
    print(f"{args.method} budget {args.budget:,}, rung sizes {attrs.get('rung_sizes')}, "
          f"n_evaluated {attrs.get('n_evaluated'):,}; {args.bars:,} bars; wall {wall:.1f} s; "
          f"timings {attrs.get('timings_s')}; load {load0:.2f} → {load1:.2f}")
    print("BENCH_JSON " + json.dumps({"spent": spent, "phases": phases, "wall": wall}))


def main() -> None:
    if "--child" in sys.argv:
        parser = argparse.ArgumentParser()
        parser.add_argument("--child")
        parser.add_argument("--job")
        a = parser.parse_args()
        big_child(json.loads(a.job))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    g = sub.add_parser("good")
    g.add_argument("--seeds", type=int, default=10)
    g.add_argument("--budget", type=int, default=5000)
    g.add_argument("--bars", type=int, default=26_280)
    b = sub.add_parser("big")
    b.add_argument("--repeats", type=int, default=3)
    b.add_argument("--budget", type=int, default=100_000)
    b.add_argument("--bars", type=int, default=8760)
    d = sub.add_parser("draw")
    d.add_argument("--budget", type=int, default=100_000)
    k = sub.add_parser("bookkeeping")
    k.add_argument("--budget", type=int, default=1_000_000)
    k.add_argument("--bars", type=int, default=8760)
    k.add_argument("--rungs", type=int, default=3)
    k.add_argument("--method", default="halving")
    args = parser.parse_args()
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    say(f"search benchmark {args.what}: {vars(args)}")
    {"good": good, "big": big, "draw": draw_memory,
     "bookkeeping": bookkeeping}[args.what](args)


if __name__ == "__main__":
    main()
