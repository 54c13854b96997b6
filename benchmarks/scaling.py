"""How `barsweep run` scales with combos and workers, and what memory it needs.

    python benchmarks/scaling.py [--max-combos 1000000] [--out benchmarks/SCALING.md]

ema_cross on 26,280 synthetic 1h bars (seed 7), fees 0.1%, fill at close, long only.
The grid is fast 2..101 x slow 102..201 (10,000 combos, all fast < slow) times a
``stop_loss`` grid axis of 1, 10, 100 (and 1,000) values: 10k, 100k, 1M (and 10M with
``--max-combos 10000000``) combos. Each size runs with 1 and then 2 single-threaded
worker processes, each run in its own process (bench.py's pipeline child: LocalCluster,
warm workers, ``run_spec`` into a Zarr store, ``rank(top=20)``). A run whose estimated
time would overrun ``--budget-s`` is skipped and says so. Blocks: barsweep's auto sizing
unless ``--block-size`` is given.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _common import FEES, SEED, SYMBOL, TIMEFRAME, dir_size, fmt, header, run_child, table

BENCH = Path(__file__).resolve().with_name("bench.py")
N_BARS = 26_280
SIZES = (10_000, 100_000, 1_000_000, 10_000_000)
FAST = list(range(2, 102))
SLOW = list(range(102, 202))
OVERHEAD_S = 15.0  # process, cluster start and warm-up around each timed run


def stop_losses(k: int) -> list[float]:
    if k == 1:
        return [0.05]
    return [round(0.005 + i * (0.5 - 0.005) / (k - 1), 7) for i in range(k)]


def spec(store: str, out: str, n_combos: int, block_size: str) -> dict:
    k = n_combos // (len(FAST) * len(SLOW))
    return {
        "data": {"store": store, "symbols": [SYMBOL], "timeframe": TIMEFRAME},
        "strategy": "ema_cross",
        "grid": {"fast": FAST, "slow": SLOW, "stop_loss": stop_losses(k)},
        "constraints": ["fast < slow"],
        "execution": {"fill": "close", "fees": FEES, "direction": "long"},
        "run": {"block_size": int(block_size) if block_size != "auto" else "auto", "out": out},
    }


def log(msg: str) -> None:
    print(f"[scaling {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-combos", type=int, default=1_000_000,
                        help="largest size: 10000, 100000, 1000000 or 10000000")
    parser.add_argument("--workers", default="1,2", help="worker counts, in order")
    parser.add_argument("--budget-s", type=float, default=570.0,
                        help="skip runs estimated to end past this many seconds (0: never)")
    parser.add_argument("--block-size", default="auto",
                        help="combos per block (default: barsweep's auto sizing)")
    parser.add_argument("--out", help="also write the markdown report here")
    args = parser.parse_args()

    from barsweep.datasets import write_synth

    t_begin = time.perf_counter()
    sizes = [n for n in SIZES if n <= args.max_combos]
    workers = [int(w) for w in args.workers.split(",")]
    preamble = header("barsweep scaling: combos x workers")
    rows, done = [], []
    rate_per_worker = None  # best measured combo-bars/s per worker, for estimates
    with tempfile.TemporaryDirectory(prefix="barsweep-scaling-") as tmp_name:
        tmp = Path(tmp_name)
        store = str(tmp / "bars")
        write_synth(store, SYMBOL, TIMEFRAME, N_BARS, SEED)
        for n in sizes:
            for w in workers:
                if rate_per_worker and args.budget_s > 0:
                    estimate = n * N_BARS / (rate_per_worker * w) + OVERHEAD_S
                    elapsed = time.perf_counter() - t_begin
                    if elapsed + estimate > args.budget_s:
                        log(f"{n:,} combos, {w} worker(s): skipped (~{estimate:.0f} s)")
                        rows.append([f"{n:,}", w] + ["skipped"] + [""] * 9 + [
                            f"estimated {estimate:.0f} s at the measured rate would end past "
                            f"--budget-s {args.budget_s:.0f} (elapsed {elapsed:.0f} s)"])
                        continue
                out = str(tmp / f"results-{n}-{w}.zarr")
                job_spec = spec(store, out, n, args.block_size)
                log(f"{n:,} combos, {w} worker(s)...")
                rec = run_child(BENCH, "pipeline", {
                    "spec": job_spec, "workers": w, "store": store,
                    "warm_params": {"fast": [5, 6], "slow": [20, 30], "stop_loss": [0.05, 0.1]}},
                    timeout=7200)
                apparent, allocated = dir_size(out)
                shutil.rmtree(out, ignore_errors=True)
                if rec["n_combos"] != n:
                    raise SystemExit(f"FAIL: the run swept {rec['n_combos']:,} combos, not {n:,}")
                wall = rec["run_wall_s"]
                rate = rec["combo_bars"] / wall
                rate_per_worker = max(rate_per_worker or 0.0, rate / w)
                worker_peak = max(rec["workers_rss_mib"])
                worker_base = max(rec["workers_warm_rss_mib"])
                block_combos = rec["block_combos"]
                log(f"  {wall:.1f} s, {rate / 1e6:.1f} M combo-bars/s, worker peak "
                    f"{worker_peak:.0f} MiB, store {apparent / 2**20:.1f} MiB")
                done.append({"n": n, "w": w, "wall": wall, "driver": rec["driver_rss_mib"],
                             "worker": worker_peak, "store": apparent})
                rows.append([
                    f"{n:,}", w, f"{rec['n_blocks']} x {block_combos:,}", fmt(wall),
                    fmt(rate / 1e6, 1), fmt(rate / w / 1e6, 1), fmt(rec["rank_s"], 2),
                    fmt(rec["driver_rss_mib"], 0),
                    f"{worker_peak:.0f} (after warm-up {worker_base:.0f})",
                    f"{apparent / 2**20:.1f} / {allocated / 2**20:.1f}",
                    fmt(apparent / n, 1),
                    f"{worker_peak * 2**20 / block_combos:,.0f} "
                    f"({max(worker_peak - worker_base, 0) * 2**20 / block_combos:,.0f})",
                    f"plan + store {rec['timings']['plan_and_create']:.2f} s"])

    columns = ["combos", "workers", "blocks x combos", "wall s", "M combo-bars/s",
               "per worker", "rank s", "driver peak MiB", "worker peak MiB",
               "store MiB (bytes / on disk)", "store B/combo", "worker peak B/block combo "
               "(growth over warm-up)", "notes"]
    lines = [preamble, table(columns, rows), ""]
    lines.append(
        f"ema_cross on {N_BARS:,} bars, fast 2..101 x slow 102..201 x a stop_loss axis of "
        "1/10/100/1,000 values; fees 0.1%, fill at close, long only. `wall s` is `run_spec` "
        "(plan, store creation, compute, writes) on a warm LocalCluster of single-threaded "
        "workers; cluster start and worker warm-up are not included. `rank s` is "
        "`rank(top=20, by=sharpe)`. Peak RSS: `ru_maxrss` of the driver process and of "
        "each worker (max shown). Shared 2-core machine: expect noise.")
    lines += ["", "## Memory", "", memory_summary(done), ""]
    lines.append(f"Total wall time: {time.perf_counter() - t_begin:.0f} s.")
    lines.append("")
    report = "\n".join(lines)
    print(report)
    if args.out:
        Path(args.out).write_text(report)
        log(f"written to {args.out}")
    return 0


def memory_summary(done: list[dict]) -> str:
    """Memory grows with combos, not combos x bars: said from the measured numbers.

    Between the smallest and the largest size (same worker count), each process's
    peak RSS and the store grow by some bytes per added combo; a layout holding
    combos x bars float64 would need ``8 * N_BARS`` bytes per added combo.
    """
    by_w = {}
    for d in done:
        by_w.setdefault(d["w"], []).append(d)
    pairs = [(min(v, key=lambda d: d["n"]), max(v, key=lambda d: d["n"]))
             for v in by_w.values() if len({d["n"] for d in v}) > 1]
    if not pairs:
        return "Fewer than two sizes ran with the same workers: no growth to report."
    small, big = max(pairs, key=lambda p: (p[1]["n"], p[1]["w"]))
    added = big["n"] - small["n"]
    row_bytes = 8 * N_BARS
    slopes = {what: max(big[key] - small[key], 0.0) * scale / added for what, key, scale in (
        ("driver peak RSS", "driver", 2**20), ("worker peak RSS", "worker", 2**20),
        ("Zarr store", "store", 1))}
    holds = all(v < 0.01 * row_bytes for v in slopes.values())
    lines = [
        f"From {small['n']:,} to {big['n']:,} combos with {big['w']} worker(s) "
        f"(x{big['n'] / small['n']:,.0f} combos, same {N_BARS:,} bars):",
        "",
        f"- driver peak RSS {small['driver']:.0f} -> {big['driver']:.0f} MiB, worker peak RSS "
        f"{small['worker']:.0f} -> {big['worker']:.0f} MiB (one block at a time per worker), "
        f"Zarr store {small['store'] / 2**20:.1f} -> {big['store'] / 2**20:.1f} MiB.",
        "- Growth per added combo: " + ", ".join(f"{k} {v:,.1f} B" for k, v in slopes.items())
        + f"; a combos x bars float64 layout needs {row_bytes:,} B per combo "
        f"({big['n'] * row_bytes / 2**30:,.0f} GiB at {big['n']:,} combos).",
        "",
        f"Memory grows with combos, not combos x bars: **{'yes' if holds else 'NO'}** "
        f"(every growth per combo {'is' if holds else 'is not'} under 1% of "
        f"{row_bytes:,} B).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
