"""The portfolio kernel against the single-symbol kernel, side by side in one process.

    python benchmarks/portfolio.py [--quick] [--repeat N] [--combos N] [--symbols N]

Synthetic 1h bars (26,280 per symbol, seeds 7, 8, ...), ``ema_cross`` on the same
combos (fast 2..41 x slow 50 values from 60, 2,000 by default), one thread
(``NUMBA_NUM_THREADS=1``), fill at close, fees 0.1%, long only:

- single: ``sweep_block()`` on each symbol in turn (its own account each), kernel
  seconds (``timings``): throughput in combo-bars/s (combos x bars x symbols / s);
- portfolio: ``sweep_portfolio()`` on the N symbols from one account, kernel seconds:
  throughput in symbol-bars/s (combos x N symbols x bars / s); the same with
  ``max_positions`` N / 2; with ``rebalance`` weekly (``1W``); and with
  ``max_positions`` N / 2, ``weight: inverse_vol`` and ``priority: low_vol`` (lookback
  20).
- stops: single and portfolio again with ``stop_loss`` 2%, ``take_profit`` 4% and
  ``trailing_stop`` 3% (:data:`STOPS`) on every position.

Both after a warm-up call (compiled, cached); each timing is repeated (median and best).
The goal is portfolio >= 0.5x single. Nothing is written but the report (stdout).
"""

from __future__ import annotations

import os

os.environ["NUMBA_NUM_THREADS"] = "1"  # before numba is imported

import argparse  # noqa: E402
import time  # noqa: E402

from _common import (  # noqa: E402
    FEES,
    PPY,
    SEED,
    STATS_COLUMNS,
    STATS_NOTE,
    fmt,
    header,
    load_avg,
    repeat_stats,
    stats_cells,
    table,
)

#: The stops of the stops rows.
STOPS = {"stop_loss": 0.02, "take_profit": 0.04, "trailing_stop": 0.03}


def synthetic_universe(n_symbols: int, n_bars: int) -> dict:
    from barsweep.datasets import synth_bars

    out = {}
    for k in range(n_symbols):
        bars = synth_bars(n_bars, seed=SEED + k, timeframe="1h")
        out[f"S{k}"] = {c: bars.column(c).to_numpy() for c in ("open", "high", "low", "close")}
        out[f"S{k}"]["time"] = bars.column("time").to_numpy().astype("datetime64[ns]").view(
            "int64")
    return out


def combo_params(n_combos: int) -> dict:
    import numpy as np

    fast = np.arange(2, 42)
    slow = 60 + 5 * np.arange(max(1, -(-n_combos // len(fast))))
    f, s = np.meshgrid(fast, slow, indexing="ij")
    return {"fast": f.ravel()[:n_combos], "slow": s.ravel()[:n_combos]}


def time_single(strategy, universe, params, execution) -> float:
    from barsweep.engine import sweep_block

    total = 0.0
    for bars in universe.values():
        timings: dict = {}
        sweep_block(strategy, bars, params, execution, PPY, timings=timings)
        total += timings["kernel"]
    return total


def time_portfolio(strategy, universe, params, execution, max_positions=None,
                   **sizing) -> float:
    from barsweep.engine import sweep_portfolio

    timings: dict = {}
    sweep_portfolio(strategy, universe, params, execution, PPY, timings=timings,
                    max_positions=max_positions, **sizing)
    return timings["kernel"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5,000 bars, 200 combos")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--combos", type=int, default=2_000)
    parser.add_argument("--symbols", type=int, default=4)
    args = parser.parse_args()
    n_bars, n_combos = (5_000, 200) if args.quick else (26_280, args.combos)

    from barsweep.engine import Execution, get_strategy

    universe = synthetic_universe(args.symbols, n_bars)
    params = combo_params(n_combos)
    n_combos = len(params["fast"])
    strategy = get_strategy("ema_cross")
    execution = Execution(fill="close", fees=FEES)
    small = {k: v[:2] for k, v in params.items()}
    time_single(strategy, universe, small, execution)  # compile or load from the cache
    time_portfolio(strategy, universe, small, execution)
    time_portfolio(strategy, universe, small, execution, weight="inverse_vol")
    stops = Execution(fill="close", fees=FEES, **STOPS)
    time_single(strategy, universe, small, stops)
    time_portfolio(strategy, universe, small, stops)

    work = n_combos * n_bars * args.symbols
    load = [load_avg()]
    half = max(1, args.symbols // 2)
    timers = {"single": time_single, "portfolio": time_portfolio,
              "max_positions": lambda *a: time_portfolio(*a, max_positions=half),
              "rebalance": lambda *a: time_portfolio(*a, rebalance="1W"),
              "inverse_vol": lambda *a: time_portfolio(*a, max_positions=half,
                                                       weight="inverse_vol",
                                                       priority="low_vol"),
              "single_stops": lambda s, u, p, _: time_single(s, u, p, stops),
              "portfolio_stops": lambda s, u, p, _: time_portfolio(s, u, p, stops)}
    samples = {case: [] for case in timers}
    for k in range(args.repeat):  # rotate, so the cases share the machine's moments
        cases = list(timers)
        for case in cases[k % len(cases):] + cases[:k % len(cases)]:
            samples[case].append(timers[case](strategy, universe, params, execution))
    load.append(load_avg())
    stats = {case: repeat_stats(s) for case, s in samples.items()}
    rate = {case: work / stats[case]["median"] for case in stats}
    best = {case: work / stats[case]["best"] for case in stats}
    print(header("Portfolio kernel vs single-symbol kernel"))
    print(f"ema_cross, {args.symbols} symbols x {n_bars:,} bars x {n_combos:,} combos, "
          f"fill close, fees {FEES}, one thread; kernel seconds (indicators excluded).\n")
    rows = [
        ["single (each symbol its own account)", *stats_cells(stats["single"], tuple(load)),
         f"{fmt(rate['single'] / 1e6)} M combo-bars/s"],
        ["portfolio (one account)", *stats_cells(stats["portfolio"], tuple(load)),
         f"{fmt(rate['portfolio'] / 1e6)} M symbol-bars/s"],
        [f"portfolio, max_positions {half}", *stats_cells(stats["max_positions"], tuple(load)),
         f"{fmt(rate['max_positions'] / 1e6)} M symbol-bars/s"],
        ["portfolio, rebalance 1W", *stats_cells(stats["rebalance"], tuple(load)),
         f"{fmt(rate['rebalance'] / 1e6)} M symbol-bars/s"],
        [f"portfolio, max_positions {half}, inverse_vol, priority low_vol",
         *stats_cells(stats["inverse_vol"], tuple(load)),
         f"{fmt(rate['inverse_vol'] / 1e6)} M symbol-bars/s"],
        ["single, stops", *stats_cells(stats["single_stops"], tuple(load)),
         f"{fmt(rate['single_stops'] / 1e6)} M combo-bars/s"],
        ["portfolio, stops", *stats_cells(stats["portfolio_stops"], tuple(load)),
         f"{fmt(rate['portfolio_stops'] / 1e6)} M symbol-bars/s"],
    ]
    print(table(["kernel", *STATS_COLUMNS, "throughput (median)"], rows))
    print()
    print(f"portfolio / single: {rate['portfolio'] / rate['single']:.2f}x "
          f"({best['portfolio'] / best['single']:.2f}x from the bests); with max_positions "
          f"{rate['max_positions'] / rate['single']:.2f}x; with rebalance 1W "
          f"{rate['rebalance'] / rate['single']:.2f}x, and inverse_vol "
          f"{rate['inverse_vol'] / rate['single']:.2f}x; goal >= 0.5x")
    print(f"with stops ({', '.join(f'{k} {v}' for k, v in STOPS.items())}): portfolio / "
          f"single {rate['portfolio_stops'] / rate['single_stops']:.2f}x "
          f"({best['portfolio_stops'] / best['single_stops']:.2f}x from the bests)")
    print()
    print(STATS_NOTE)
    print(f"\n(total {time.process_time():.1f} CPU s)")


if __name__ == "__main__":
    main()
