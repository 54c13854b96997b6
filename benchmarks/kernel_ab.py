"""The ema_cross, rsi and a rule's sweep kernels of two barsweep trees, side by side, one core.

    mkdir -p /tmp/before/barsweep && git archive main | tar -x -C /tmp/before/barsweep
    mkdir -p /tmp/after/barsweep && git archive HEAD | tar -x -C /tmp/after/barsweep
    NUMBA_NUM_THREADS=1 python benchmarks/kernel_ab.py /tmp/after /tmp/before [--pairs 6]
    NUMBA_NUM_THREADS=1 python benchmarks/kernel_ab.py /tmp/after /tmp/before --portfolio

Each tree (a folder holding the package as ``barsweep/``) is put first on ``PYTHONPATH``
of a child process, A then B, ``--pairs`` times in turn; a child runs each case once to
load or compile its kernel, then ``--reps`` times, and reports its best. Cases:
bench.py's (a) ema_cross, 8,696 combos, and (b) rsi, 2,401 combos, and (c) ``rule_state``,
a rule reading the position state (an 8-argument signal), 1,200 combos, on 26,280 synthetic
bars, with fill at the close long only and at the next open both ways with a stop. Prints
per case the median and best of A and B and the median of the pairwise ratios A/B, and
refuses (exit 1) when the two trees' metrics differ in any bit. ``--portfolio``: the
portfolio kernel instead (``sweep_portfolio``), ema_cross on 4 such symbols (seeds 7 to
10), 2,000 combos (fast 2..41 x 50 slow values from 60, as benchmarks/portfolio.py), at
the close long only and at the next open long only with a stop.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from statistics import median

CASES = {"close_long": dict(fill="close", fees=0.001),
         "open_both_stop": dict(fill="next_open", direction="both", fees=0.001,
                                stop_loss=0.02)}
#: The portfolio's cases: long only, as every tree's portfolio kernel trades
PORTFOLIO_CASES = {"close_long": CASES["close_long"],
                   "open_long_stop": dict(fill="next_open", fees=0.001, stop_loss=0.02)}


def synthetic(seed: int, n: int = 26_280) -> dict:
    """Random-walk bars, seeded."""
    import numpy as np

    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n)))
    open_ = np.concatenate([[100.0], close[:-1]]) * np.exp(rng.normal(0.0, 0.002, n))
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0.0, 0.004, n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0.0, 0.004, n)))
    return dict(open=open_, high=high, low=low, close=close)


def portfolio_child(reps: int) -> None:
    """:func:`child` for the portfolio kernel."""
    import time

    import numpy as np

    from barsweep.engine import Execution, get_strategy, sweep_portfolio

    universe = {f"S{seed}": synthetic(seed) for seed in range(7, 11)}
    fast, slow = (m.ravel() for m in np.meshgrid(np.arange(2, 42), np.arange(60, 310, 5),
                                                 indexing="ij"))
    params = dict(fast=fast, slow=slow)
    seconds, digests = {}, {}
    for case, kwargs in PORTFOLIO_CASES.items():
        strategy, execution = get_strategy("ema_cross"), Execution(**kwargs)
        sweep_portfolio(strategy, universe, {k: v[:2] for k, v in params.items()}, execution,
                        8760.0)
        runs = []
        for _ in range(reps):
            t0 = time.perf_counter()
            out, _ = sweep_portfolio(strategy, universe, params, execution, 8760.0)
            runs.append(time.perf_counter() - t0)
        seconds[f"portfolio/{case}"] = min(runs)
        digests[f"portfolio/{case}"] = hashlib.sha256(out.tobytes()).hexdigest()
    print(json.dumps({"seconds": seconds, "digests": digests}))


def strategy_of(name: str):
    """A builtin strategy by name, or ``rule_state`` compiled from its rule."""
    from barsweep.engine import get_strategy
    from barsweep.engine.rules import Rule, compile_rule

    if name != "rule_state":
        return get_strategy(name)
    rule = Rule("close > sma(close, n) and position == 0",
                "bars_held >= hold or close < entry_price * (1 - k)",
                short_entry="close < sma(close, n) and position == 0",
                short_exit="bars_held >= hold or close > entry_price * (1 + k)", name=name)
    return compile_rule(rule, {"n": "int", "hold": "int", "k": "float"})


def child(reps: int) -> None:
    """Time every case with the barsweep first on sys.path; one JSON line."""
    import time

    import numpy as np

    from barsweep.engine import Execution, sweep_block

    bars = synthetic(7)
    fast, slow = (m.ravel() for m in np.meshgrid(np.arange(2, 102), np.arange(10, 399, 4),
                                                 indexing="ij"))
    period, lower, upper = (m.ravel() for m in np.meshgrid(
        np.arange(2, 51), np.arange(10.0, 41.0, 5.0), np.arange(60.0, 91.0, 5.0),
        indexing="ij"))
    n, hold, k = (m.ravel() for m in np.meshgrid(np.arange(5, 125, 2), np.arange(2, 42, 4),
                                                 np.array([0.01, 0.03]), indexing="ij"))
    grids = {"ema_cross": dict(fast=fast[fast < slow], slow=slow[fast < slow]),
             "rsi": dict(period=period, lower=lower, upper=upper),
             "rule_state": dict(n=n, hold=hold, k=k)}
    seconds, digests = {}, {}
    for name, params in grids.items():
        for case, kwargs in CASES.items():
            strategy, execution = strategy_of(name), Execution(**kwargs)
            sweep_block(strategy, bars, {k: v[:2] for k, v in params.items()}, execution, 8760.0)
            runs = []
            for _ in range(reps):
                t0 = time.perf_counter()
                out = sweep_block(strategy, bars, params, execution, 8760.0)
                runs.append(time.perf_counter() - t0)
            seconds[f"{name}/{case}"] = min(runs)
            digests[f"{name}/{case}"] = hashlib.sha256(out.tobytes()).hexdigest()
    print(json.dumps({"seconds": seconds, "digests": digests}))


def run_tree(tree: str, reps: int, portfolio: bool) -> dict:
    env = {**os.environ, "PYTHONPATH": tree}
    done = subprocess.run([sys.executable, __file__, "--child", "--reps", str(reps),
                           *(["--portfolio"] if portfolio else [])],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", nargs="?", help="tree A (e.g. the change)")
    parser.add_argument("b", nargs="?", help="tree B (e.g. main)")
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--portfolio", action="store_true",
                        help="the portfolio kernel's cases instead")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        (portfolio_child if args.portfolio else child)(args.reps)
        return 0
    a, b = [], []
    for _ in range(args.pairs):
        a.append(run_tree(args.a, args.reps, args.portfolio))
        b.append(run_tree(args.b, args.reps, args.portfolio))
    same = all(r["digests"] == a[0]["digests"] for r in a + b)
    print(f"A = {args.a}, B = {args.b}: {args.pairs} pairs, best of {args.reps} per child")
    for case in a[0]["seconds"]:
        sa, sb = ([r["seconds"][case] for r in runs] for runs in (a, b))
        ratio = median(x / y for x, y in zip(sa, sb))
        print(f"{case:26s} A median {median(sa):.3f} s best {min(sa):.3f} | B median "
              f"{median(sb):.3f} s best {min(sb):.3f} | A/B pairwise median {ratio:.3f}")
    print("metrics: bit-identical" if same else "metrics DIFFER between the trees")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
