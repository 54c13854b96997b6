"""Strategies written as rules against the builtin ones, side by side in one invocation.

    python benchmarks/rules.py [--quick] [--repeat N] [--out FILE]

Synthetic 1h bars (26,280, seed 7), ``sweep_block()`` on one thread
(``NUMBA_NUM_THREADS=1``), fill at close, fees 0.1%, long only:

1. the builtin ``ema_cross`` against the same strategy as a rule (:data:`EMA_RULE`),
   on the same 8,000 combos: kernel seconds after a warm-up call (``timings=`` splits
   the indicators from the kernel); goal: rule <= 1.1x builtin;
2. a rule with three indicators and a state exit (:data:`STATE_RULE`, ``hold`` a grid
   axis) on as many combos and bars, against the builtin of case 1; goal <= 1.3x;
3. cold compile: the first ``sweep_block()`` (one combo, 500 bars) of a new rule (a
   literal unique to the run) in a process with an empty ``NUMBA_CACHE_DIR``, against
   the builtin's in its own empty folder; goal: rule <= builtin + 20%;
4. cached: a second process on the folder of a case-3 run, timing ``compile_rule()``
   (or ``get_strategy()``) and the first ``sweep_block()`` after ``import barsweep``;
   goal <= 50 ms. Also timed after numba's one-time start in the process (a trivial
   jitted function first), which every first call pays whatever the strategy.

Each kernel round is a process of its own timing the three strategies once, in an order
that rotates from round to round; each first call is a process of its own, with scipy
hidden as in ``pip install barsweep`` (numba imports ``scipy.linalg`` on its first
compile or cache load when it can). Every cache lives in a temporary folder, removed at
the end: the script writes nothing but its report (printed, and to ``--out`` if given).
The builtin and the rule must give the same metrics bit for bit (exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

from _common import (
    FEES,
    PPY,
    SEED,
    STATS_COLUMNS,
    STATS_NOTE,
    HideScipy,
    emit,
    fmt,
    header,
    repeat_stats,
    run_child,
    stats_cells,
    table,
)

T0_PERF = time.perf_counter()  # before barsweep (or numpy) is imported

SCRIPT = Path(__file__).resolve()
EMA_RULE = {"entry": "cross_above(ema(close, fast), ema(close, slow))",
            "exit": "cross_below(ema(close, fast), ema(close, slow))"}
STATE_RULE = {"entry": "cross_above(ema(close, fast), ema(close, slow)) and rsi(close, 14) < 70",
              "exit": "cross_below(ema(close, fast), ema(close, slow)) or bars_held >= hold"}
KINDS = {"builtin": {"fast": "int", "slow": "int"}, "ema_rule": {"fast": "int", "slow": "int"},
         "state_rule": {"fast": "int", "slow": "int", "hold": "int"}}
LABELS = {"builtin": "builtin `ema_cross`", "ema_rule": "rule: ema_cross",
          "state_rule": "rule: 3 indicators + `bars_held` exit"}
WARM_COMBOS = 16
FIRST_BARS = 500
GOALS = {"kernel": {"ema_rule": 1.1, "state_rule": 1.3}, "cold": 1.2, "cached_s": 0.050}


def grids(quick: bool) -> dict[str, dict[str, list[int]]]:
    """The grid axes of case 1 (builtin and ema rule) and case 2 (the state rule): as many
    combos in both, every one with fast < slow."""
    n_fast, n_slow = (20, 10) if quick else (100, 80)
    fast = list(range(2, 2 + n_fast))
    return {"case1": {"fast": fast, "slow": [105 + 25 * k for k in range(n_slow)]},
            "case2": {"fast": fast, "slow": [105 + 50 * k for k in range(n_slow // 2)],
                      "hold": [24, 120]}}


# ------------------------------------------------------------------------ children


def synthetic_bars(n_bars: int) -> dict:
    from barsweep.datasets import synth_bars

    bars = synth_bars(n_bars, seed=SEED, timeframe="1h")
    return {c: bars.column(c).to_numpy() for c in ("open", "high", "low", "close", "volume")}


def flat_params(axes: dict[str, list[int]]) -> dict:
    """Every combo of the axes as flat int64 arrays (C order)."""
    import numpy as np

    mesh = np.meshgrid(*[np.asarray(v, dtype=np.int64) for v in axes.values()], indexing="ij")
    return {name: m.ravel() for name, m in zip(axes, mesh, strict=True)}


def strategy_of(variant: str, nonce: int | None = None):
    """The strategy of a variant; with ``nonce``, a rule whose text holds that literal."""
    from barsweep.engine import get_strategy
    from barsweep.engine.rules import compile_rule

    if variant == "builtin":
        return get_strategy("ema_cross")
    rule = dict(EMA_RULE if variant == "ema_rule" else STATE_RULE)
    if nonce is not None:  # a text no process compiled before: a new module, a new key
        rule["entry"] += f" and close > -{nonce}"
    return compile_rule(rule, KINDS[variant])


def child_kernel(job: dict) -> None:
    """One round of case 1 and 2: each strategy warmed up, then timed once in
    ``job["order"]``; the builtin's and the ema rule's metrics compared."""
    import numba
    import numpy as np

    from barsweep.engine import METRICS, Execution, sweep_block

    numba.set_num_threads(1)
    bars = synthetic_bars(job["n_bars"])
    params = {"builtin": flat_params(job["grids"]["case1"]),
              "ema_rule": flat_params(job["grids"]["case1"]),
              "state_rule": flat_params(job["grids"]["case2"])}
    strategies = {v: strategy_of(v) for v in params}
    execution = Execution(fill="close", fees=FEES)
    for v, strategy in strategies.items():
        sweep_block(strategy, bars, {k: a[:WARM_COMBOS] for k, a in params[v].items()},
                    execution, PPY)
    record, outs = {}, {}
    for v in job["order"]:
        timings = {}
        t0 = time.perf_counter()
        outs[v] = sweep_block(strategies[v], bars, params[v], execution, PPY, timings=timings)
        record[v] = {"total_s": time.perf_counter() - t0, **timings,
                     "n_combos": len(outs[v]),
                     "trades": float(outs[v][:, METRICS.index("n_trades")].mean())}
    same = bool(np.array_equal(outs["builtin"], outs["ema_rule"], equal_nan=True))
    emit({"runs": record, "identical": same, "n_bars": len(bars["close"])})


def child_first(job: dict) -> None:
    """The first ``sweep_block()`` of a strategy in a new process: ``compile_rule()`` (or
    ``get_strategy()``) and the sweep of one combo on 500 bars, timed after the imports
    (and, with ``numba_started``, after a trivial jitted function ran)."""
    sys.meta_path.insert(0, HideScipy())
    import numpy as np

    from barsweep.engine import Execution, sweep_block

    import_s = time.perf_counter() - T0_PERF
    bars = synthetic_bars(FIRST_BARS)
    if job["numba_started"]:
        from numba import njit

        njit(lambda x: x + 1)(1)  # numba's one-time start (its typing and target registries)
    one = {"fast": np.array([10]), "slow": np.array([50]), "hold": np.array([24])}
    params = {k: one[k] for k in KINDS[job["variant"]]}
    t0, c0 = time.perf_counter(), time.process_time()
    strategy = strategy_of(job["variant"], job["nonce"] if job["variant"] != "builtin" else None)
    t1 = time.perf_counter()
    timings = {}
    sweep_block(strategy, bars, params, Execution(fill="close", fees=FEES), PPY,
                timings=timings)
    t2, c2 = time.perf_counter(), time.process_time()
    misses = sum(strategy.kernel.stats.cache_misses.values())
    emit({"seconds": t2 - t0, "cpu_s": c2 - c0, "import_s": import_s, "strategy_s": t1 - t0,
          "sweep_s": t2 - t1, **timings, "kernel_cache_misses": misses})


CHILDREN = {"kernel": child_kernel, "first": child_first}


# ------------------------------------------------------------------------ parent


def log(msg: str) -> None:
    print(f"[rules {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def rotated(items: list[str], k: int) -> list[str]:
    k %= len(items)
    return items[k:] + items[:k]


def kernel_rounds(repeat: int, n_bars: int, quick: bool, tmp: Path) -> list[dict]:
    """``repeat`` kernel rounds, each in a process of its own, on one shared cache."""
    cache = tmp / "numba-cache-kernels"
    recs = []
    for r in range(repeat):
        order = rotated(["builtin", "ema_rule", "state_rule"], r)
        rec = run_child(SCRIPT, "kernel", {"n_bars": n_bars, "grids": grids(quick),
                                           "order": order},
                        env={"NUMBA_CACHE_DIR": str(cache)})
        log(f"kernel round {r + 1}/{repeat} ({', '.join(order)}): " + ", ".join(
            f"{v} {rec['runs'][v]['kernel']:.3f} s" for v in order)
            + f" (load {rec['load_before']:.2f} → {rec['load_after']:.2f})")
        recs.append(rec)
    return recs


def first_rounds(repeat: int, tmp: Path) -> dict[tuple[str, str], list[dict]]:
    """``repeat`` rounds of cold, cached and cached-after-numba's-start first calls of each
    strategy, in an order that rotates; a fresh cache folder per cold run."""
    recs: dict[tuple[str, str], list[dict]] = {}
    for r in range(repeat):
        for i, variant in enumerate(rotated(["builtin", "ema_rule", "state_rule"], r)):
            cache = tmp / f"numba-cache-first-{r}-{variant}"
            nonce = 1_000_003 + 10 * r + i + int(time.time()) % 100_000 * 100
            for state, started in (("cold", False), ("cached", False),
                                   ("cached, numba started", True)):
                rec = run_child(SCRIPT, "first", {"variant": variant, "nonce": nonce,
                                                  "numba_started": started},
                                env={"NUMBA_CACHE_DIR": str(cache)})
                if state != "cold" and rec["kernel_cache_misses"]:
                    raise SystemExit(f"FAIL: the {state} run of {variant} compiled its kernel "
                                     "again instead of loading it from the cache")
                log(f"first call {r + 1}/{repeat}, {variant}, {state}: {rec['seconds']:.3f} s "
                    f"(load {rec['load_before']:.2f})")
                recs.setdefault((variant, state), []).append(rec)
            shutil.rmtree(cache, ignore_errors=True)
    return recs


def load_span(recs: list[dict]) -> tuple[float, float]:
    return recs[0]["load_before"], recs[-1]["load_after"]


def ratio_cell(num: dict, den: dict) -> tuple[str, float]:
    """Ratio of two repeat_stats, from the medians (bold) and the bests; the median one."""
    value = num["median"] / den["median"]
    return f"**{value:.2f}x** ({num['best'] / den['best']:.2f}x)", value


def verdict(value: float, goal: float) -> str:
    return "**yes**" if value <= goal else "**no**"


def kernel_table(recs: list[dict], n_bars: int) -> tuple[str, dict[str, float]]:
    """Cases 1 and 2 as a markdown table, and the median ratios against the builtin."""
    stats = {v: repeat_stats([rec["runs"][v]["kernel"] for rec in recs])
             for v in ("builtin", "ema_rule", "state_rule")}
    rows, ratios = [], {}
    for case, v in (("1", "builtin"), ("1", "ema_rule"), ("2", "state_rule")):
        runs = [rec["runs"][v] for rec in recs]
        work = runs[0]["n_combos"] * n_bars
        rate = (f"{fmt(work / stats[v]['median'] / 1e6, 0)} "
                f"({fmt(work / stats[v]['best'] / 1e6, 0)})")
        if v == "builtin":
            cell, goal, met = "1 (the reference)", "—", "—"
        else:
            cell, ratios[v] = ratio_cell(stats[v], stats["builtin"])
            goal, met = f"≤ {GOALS['kernel'][v]}x", verdict(ratios[v], GOALS["kernel"][v])
        rows.append([case, LABELS[v], f"{runs[0]['n_combos']:,}", *stats_cells(
            stats[v], load_span(recs), 3), fmt(median(r["indicators"] for r in runs), 3),
            fmt(median(r["total_s"] for r in runs), 3), rate,
            fmt(runs[0]["trades"], 1), cell, goal, met])
    columns = ["case", "strategy", "combos", *[f"kernel {c}" if c != "runs" else c
                                               for c in STATS_COLUMNS],
               "indicators median s", "sweep_block median s",
               "M combo-bars/s, kernel median (best)", "trades per combo",
               "kernel / builtin", "goal", "met"]
    return table(columns, rows), ratios


def first_table(recs: dict) -> tuple[str, dict]:
    """Cases 3 and 4 as a markdown table, and the figures the goals are judged on."""
    rows, judged = [], {}
    for case, state in (("3", "cold"), ("4", "cached"), ("4", "cached, numba started")):
        base = repeat_stats([r["seconds"] for r in recs[("builtin", state)]])
        for v in ("builtin", "ema_rule", "state_rule"):
            runs = recs[(v, state)]
            stats = repeat_stats([r["seconds"] for r in runs])
            phases = (f"{'compile_rule' if v != 'builtin' else 'get_strategy'} "
                      f"{fmt(median(r['strategy_s'] for r in runs), 3)} · indicators "
                      f"{fmt(median(r['indicators'] for r in runs), 3)} · kernel "
                      f"{fmt(median(r['kernel'] for r in runs), 3)}")
            cell, goal, met = "—", "—", "—"
            if state == "cold" and v != "builtin":
                cell, value = ratio_cell(stats, base)
                goal, met = f"≤ {GOALS['cold']}x", verdict(value, GOALS["cold"])
                judged[(v, state)] = value
            elif state != "cold":
                cell = ratio_cell(stats, base)[0] if v != "builtin" else "—"
                if state == "cached":
                    goal = f"≤ {GOALS['cached_s'] * 1000:.0f} ms"
                    met = verdict(stats["median"], GOALS["cached_s"])
                    judged[(v, state)] = stats["median"]
            rows.append([case, state, LABELS[v], *stats_cells(stats, load_span(runs), 3),
                         fmt(median(r["cpu_s"] for r in runs), 3),
                         fmt(median(r["import_s"] for r in runs), 2), phases, cell, goal, met])
    columns = ["case", "cache", "strategy", *STATS_COLUMNS, "CPU s (median)", "import s (median)",
               "phases, median s", "vs builtin", "goal", "met"]
    return table(columns, rows), judged


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", choices=sorted(CHILDREN))
    parser.add_argument("--job", help="the child's job, JSON")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--repeat", type=int, default=None,
                        help="rounds of every measurement (default 3, 1 with --quick)")
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args()
    if args.child:
        import json

        CHILDREN[args.child](json.loads(args.job))
        return 0
    repeat = args.repeat or (1 if args.quick else 3)
    n_bars = 5_000 if args.quick else 26_280
    preamble = header("Rules against builtins, side by side")
    t_begin = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="barsweep-rules-bench-") as tmp:
        kernel_recs = kernel_rounds(repeat, n_bars, args.quick, Path(tmp))
        first_recs = first_rounds(repeat, Path(tmp))
    problems = [] if all(r["identical"] for r in kernel_recs) else [
        "the ema_cross rule's metrics differ from the builtin's"]
    k_table, _ = kernel_table(kernel_recs, n_bars)
    f_table, _ = first_table(first_recs)
    g = grids(args.quick)
    report = "\n".join([
        preamble,
        f"## Cases 1 and 2: warm kernels, one thread, {n_bars:,} synthetic 1h bars", "",
        k_table, "",
        f"Case 1 grid: fast {g['case1']['fast'][0]}..{g['case1']['fast'][-1]} x slow "
        f"{g['case1']['slow'][0]}..{g['case1']['slow'][-1]} step 25; case 2: the same fast, "
        f"slow step 50, hold {g['case2']['hold']}. Case 2's rule: entry `{STATE_RULE['entry']}`"
        f", exit `{STATE_RULE['exit']}`; it is compared with the builtin's case-1 kernel "
        "(as many combos and bars). Kernel seconds are `sweep_block(timings=)`'s "
        "`kernel`, after a warm-up call; each round is a process timing the three in a "
        f"rotating order. The builtin and the ema_cross rule gave "
        f"{'identical' if not problems else 'DIFFERENT'} metrics (every combo, every "
        "metric, bit for bit).", "",
        "## Cases 3 and 4: the first `sweep_block()` of a process (one combo, "
        f"{FIRST_BARS} bars)", "",
        f_table, "",
        "Cold: an empty `NUMBA_CACHE_DIR`; the rule's text holds a literal unique to the run "
        "(`... and close > -N`). Cached: a second process on the cold run's folder; "
        "\"numba started\": a trivial jitted function ran before the timer (numba's "
        "one-time start of its typing and target registries, paid by any first call). "
        "Timed from after the imports (import s: process start to `barsweep.engine` "
        "imported) to the first result: `compile_rule()` (`get_strategy()` for the "
        "builtin), then `sweep_block()`, whose indicators and kernel phases load (or "
        "compile) their code; CPU s is that span's `time.process_time()`, less sensitive "
        "to the load. scipy is hidden (not a barsweep dependency).", "",
        STATS_NOTE, "",
        ("**FAIL**: " + "; ".join(problems)) if problems else "Result: **PASS**.", "",
        f"Total benchmark wall time: {time.perf_counter() - t_begin:.0f} s.", ""])
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
