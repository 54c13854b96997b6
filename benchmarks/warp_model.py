"""Warp model (CPU only): how busy a GPU's 32-lane warps would be on the check's sweeps.

    python benchmarks/warp_model.py [--sizes 100000 1000000 10000000] [--warps 2000]
                                    [--costs C_FLAT C_HELD C_EVENT]

The grid is ``benchmarks/gpu_check.py``'s: ema_cross on 26,280 synthetic hourly bars,
``close, long, fees``, ``ema_params(n)`` combos. Each combo's path is replayed bar by bar
with the strategy's own ``step`` and ``resolve_signals`` (the functions ``simulate``
calls): its *events* are the bars whose signal acts (an entry or an exit), which the
kernel's general step handles; between them it spends its bars in the flat scan or the
held step. The replay's trade counts are checked against ``sweep_block`` (the CPU
kernel). Lanes are grouped into warps of 32 consecutive combos in a lane order; a
sample of ``--warps`` warps (all when fewer) is modelled for each design:

- ``(a) own pace`` (today's kernel): each lane loops at its own pace through flat
  scans, held stretches and general steps. SIMT executes the union of the lanes' paths,
  reconverging after each stretch: the warp's k-th stretch takes as many iterations as
  its longest lane's k-th stretch (lanes alternate flat and held alike, starting flat),
  then one general step if any lane has one. Lane costs: a flat iteration ``c_flat``,
  a held one ``c_held``, a general step ``c_event``.
- ``(b) warp-synchronous``: the warp steps bar by bar; a bar costs ``c_event`` when any
  lane has an event on it, else ``c_held`` when any lane holds a position through it
  (the held accumulators run under a predicate, flat lanes masked), else ``c_flat``.
  This is the GPU's kernel now: ``simulate(..., lockstep=True)``, one bar per iteration
  of its loop; (a) is the same kernel with ``lockstep=False``, as the CPU runs it (both
  are timed side by side by ``gpu_check.py`` up to 1M combos). The model gives both
  designs the same per-bar costs.

Lane efficiency = the lanes' own cost (what each would take alone: its flat iterations,
held iterations and events at their costs) / (32 x the warp's cost); with unit costs it
is active lane-steps / (32 x warp steps). ``cost/combo-bar`` is the warp's cost per
combo-bar in units of a flat iteration: the designs' ratio of it predicts their speed
ratio (both latency-bound alike; the coalesced loads of (b) come on top). Lane orders:
``locality`` (:func:`~barsweep.engine.core.inputs.locality_order`, the CPU's: the slot with
the most distinct rows major; on an ema_cross grid of 50 fast x 2,000 slow periods the
lanes of a warp differ in the fast period) and ``lanes``
(:func:`~barsweep.engine.core.inputs.lane_order`, the GPU's: that slot varies fastest, so the
lanes differ in the slow period, whose neighbours cross at nearly the same bars).
``spread`` is the median over the warp's stretches of the spread of its lanes' bars at a
stretch's start (a).

Default costs are the SASS sizes for sm_90 of the kernel's two inner loops (flat scan 79
instructions, held step 209: ``c_held`` = 2.6) and an assumed general step of 8 flat
iterations; ``--costs 1 1 1`` models unit costs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_check import N_BARS, PPY, ema_params, synth_bars  # noqa: E402

from barsweep.engine import METRICS, Execution, get_strategy, sweep_block  # noqa: E402
from barsweep.engine.core.fills import CONFLICT_OPPOSITE, resolve_signals  # noqa: E402
from barsweep.engine.core.hoist import hoist, plan_rows  # noqa: E402
from barsweep.engine.core.inputs import bar_tuple, lane_order, locality_order  # noqa: E402
from barsweep.engine.strategies import kernels  # noqa: E402

WARP = 32
EXECUTION = Execution(fill="close", fees=0.001)
COSTS = {"c_flat": 1.0, "c_held": 2.6, "c_event": 8.0}


@njit(cache=True)
def lane_events(step, ind, rows, fparams, bars, allow_long, allow_short, events):
    """Replay one combo with ``fill: close`` and no stops or funding: write the bars
    whose signal acts into ``events``; return their number."""
    n = bars.close.shape[0]
    position = 0.0
    k = 0
    for t in range(n):
        long_entry, long_exit, short_entry, short_exit = step(ind, rows, fparams, bars, t,
                                                              position, 0.0, t, 0.0, 0.0, 0.0)
        exit_now, side = resolve_signals(position, allow_long, allow_short, CONFLICT_OPPOSITE,
                                         long_entry, long_exit, short_entry, short_exit)
        if exit_now:
            position = 0.0
        if side != 0 and position == 0.0:
            position = float(side)
        if exit_now or side != 0:
            events[k] = t
            k += 1
    return k


@njit(cache=True)
def own_pace(events, counts, n, c_flat, c_held, c_event):
    """Design (a) for one warp: ``(lanes' own cost, warp cost, median bar spread)``.

    Stretch ``k`` of a lane runs from the bar after its event ``k - 1`` (bar 0 for
    ``k == 0``) to its event ``k`` (included), or to the end without one.
    """
    lanes = counts.shape[0]
    own = 0.0
    warp = 0.0
    spreads = np.empty(counts.max() + 1)
    for k in range(counts.max() + 1):
        longest = 0
        any_event = False
        lo, hi = n, 0
        for lane in range(lanes):
            if k > counts[lane]:
                continue
            start = 0 if k == 0 else events[lane, k - 1] + 1
            lo, hi = min(lo, start), max(hi, start)
            length = events[lane, k] + 1 - start if k < counts[lane] else n - start
            longest = max(longest, length)
            any_event |= k < counts[lane]
            own += length * (c_flat if k % 2 == 0 else c_held)
            own += c_event if k < counts[lane] else 0.0
        warp += longest * (c_flat if k % 2 == 0 else c_held) + (c_event if any_event else 0.0)
        spreads[k] = hi - lo
    return own, warp, np.median(spreads)


@njit(cache=True)
def synchronous(events, counts, n, c_flat, c_held, c_event):
    """Design (b) for one warp: its cost. A bar costs ``c_event`` when any lane has an
    event on it, else ``c_held`` when any lane holds a position through it, else
    ``c_flat`` (a branch no lane takes is skipped)."""
    hit = np.zeros(n, dtype=np.bool_)
    held = np.zeros(n + 1, dtype=np.int64)  # +1 at a held stretch's start, -1 after it
    for lane in range(counts.shape[0]):
        for k in range(counts[lane]):
            hit[events[lane, k]] = True
            if k % 2 == 0:  # an entry: held from the next bar to the exit (or the end)
                held[events[lane, k] + 1] += 1
                held[events[lane, k + 1] if k + 1 < counts[lane] else n] -= 1
    cost = 0.0
    holding = 0
    for t in range(n):
        holding += held[t]
        cost += c_event if hit[t] else (c_held if holding > 0 else c_flat)
    return cost


def lane_orders(rows: np.ndarray) -> dict[str, np.ndarray]:
    """The CPU kernel's combo order and the GPU kernel's."""
    return {"locality": locality_order(rows), "lanes": lane_order(rows)}


def warp_paths(strategy, bars, params, combos: np.ndarray):
    """Each combo's events (shape (len(combos), max events)) and their numbers."""
    pick = {k: v[combos] for k, v in params.items()}
    ind, rows = hoist(strategy, dict(zip(("open", "high", "low", "close"), bars[:4])),
                      pick, len(combos))
    step = kernels.compiled(strategy.signal).step
    fparams = np.column_stack([pick[p.name].astype(np.float64) for p in strategy.params])
    events = np.empty((len(combos), bars.close.shape[0]), dtype=np.int64)
    counts = np.array([lane_events(step, ind, rows[i], fparams[i], bars, True, False,
                                   events[i]) for i in range(len(combos))])
    return events[:, :max(1, counts.max())].copy(), counts


def check_trades(strategy, bars_dict, params, combos, counts) -> None:
    """The replay's trades (an open position at the end counts) are the CPU kernel's."""
    cpu = sweep_block(strategy, bars_dict, {k: v[combos] for k, v in params.items()},
                      EXECUTION, PPY)
    trades = cpu[:, METRICS.index("n_trades")]
    if not np.array_equal(trades, (counts + 1) // 2):
        raise SystemExit("the replay's trade counts differ from sweep_block's")


def model_size(n: int, bars_dict, n_warps: int, costs: dict, rng) -> list[list[str]]:
    """The table rows of one grid size: each lane order under both designs."""
    strategy = get_strategy("ema_cross")
    params = ema_params(n)
    bars = bar_tuple(bars_dict)
    _, rows = plan_rows(strategy, params, n)
    total = -(-n // WARP)
    sample = np.sort(rng.choice(total, min(n_warps, total), replace=False))
    out = []
    for name, order in lane_orders(rows).items():
        sums = np.zeros(3)
        spreads = []
        for i, w in enumerate(sample):
            combos = order[w * WARP:(w + 1) * WARP]
            events, counts = warp_paths(strategy, bars, params, combos)
            if i % 100 == 0:
                check_trades(strategy, bars_dict, params, combos, counts)
            own_a, warp_a, spread = own_pace(events, counts, N_BARS, costs["c_flat"],
                                             costs["c_held"], costs["c_event"])
            warp_b = synchronous(events, counts, N_BARS, costs["c_flat"], costs["c_held"],
                                 costs["c_event"])
            sums += (own_a, WARP * warp_a, WARP * warp_b)
            spreads.append(spread)
        work = WARP * len(sample) * N_BARS
        for design, own, cost in (("(a) own pace", sums[0], sums[1]),
                                  ("(b) warp-synchronous", sums[0], sums[2])):
            out.append([f"{n:,}", f"{len(sample):,}", name, design, f"{own / cost:.2f}",
                        f"{cost / work:.2f}",
                        f"{np.median(spreads):,.0f}" if design.startswith("(a)") else ""])
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000,
                                                                 10_000_000])
    parser.add_argument("--warps", type=int, default=2000, help="warps sampled per size")
    parser.add_argument("--costs", type=float, nargs=3, metavar=("FLAT", "HELD", "EVENT"),
                        help="c_flat, c_held, c_event (default: %(default)s)",
                        default=list(COSTS.values()))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    costs = dict(zip(COSTS, args.costs))
    bars_dict = synth_bars(N_BARS)
    rng = np.random.default_rng(args.seed)
    head = ["combos", "warps modelled", "lane order", "design", "lane efficiency",
            "cost/combo-bar", "spread (bars)"]
    print(f"costs: {costs}")
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for n in args.sizes:
        t0 = time.perf_counter()
        for row in model_size(n, bars_dict, args.warps, costs, rng):
            print("| " + " | ".join(row) + " |", flush=True)
        print(f"({n:,} combos modelled in {time.perf_counter() - t0:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
