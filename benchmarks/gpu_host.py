"""Host preparation of ``sweep_cuda``, stage by stage, on the CPU (no GPU needed).

    python benchmarks/gpu_host.py [--sizes 100000,1000000,10000000] [--repeat 3]

Times the host functions a GPU block runs before and after its kernels, for ema_cross
grids of the GPU check (``gpu_check.ema_params``: fast 2.. x slow 502..2501) on 26,280
bars: ``prepare_block``, ``plan_rows``, ``locality_order``, ``Block.combos`` (the
combos gathered in kernel order) and the scatter of the metrics back to the grid's order
(``out[:, order] = result``, 18 metrics per combo). When ``sweep_cuda`` puts the
metrics back in order on the device (``barsweep.engine.gpu.restore_order``), the host's
part of that is nothing and the row says so. Prints the median seconds per stage.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_check import PPY, ema_params, synth_bars  # noqa: E402

N_BARS = 26_280


def timed(fn, repeat: int) -> tuple[float, object]:
    """(median seconds of ``repeat`` calls of ``fn``, the last result)."""
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), result


def stages(n: int, bars: dict, repeat: int) -> dict[str, float]:
    """Median seconds of each host stage for ``n`` ema_cross combos."""
    from barsweep.engine import Execution, get_strategy, gpu
    from barsweep.engine.block import locality_order, prepare_block
    from barsweep.engine.hoist import plan_rows
    from barsweep.engine.metrics import N_METRICS

    strategy, execution = get_strategy("ema_cross"), Execution(fill="close", fees=0.001)
    params = ema_params(n)
    out: dict[str, float] = {}
    out["prepare_block"], block = timed(
        lambda: prepare_block(strategy, bars, params, execution, PPY), repeat)
    out["plan_rows"], (_, rows) = timed(
        lambda: plan_rows(strategy, block.strategy_params, n), repeat)
    out["locality_order"], order = timed(lambda: locality_order(rows), repeat)
    out["combos"], _ = timed(lambda: block.combos(rows, order), repeat)
    if hasattr(gpu, "restore_order"):
        out["scatter"] = 0.0  # on the device
    else:
        result = np.random.default_rng(0).random((1, n, N_METRICS))

        def scatter():
            back = np.empty_like(result)
            back[:, order] = result
            return back

        out["scatter"], _ = timed(scatter, repeat)
    out["total"] = sum(out.values())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bars = synth_bars(N_BARS)
    sizes = [int(s) for s in args.sizes.split(",")]
    table = {n: stages(n, bars, args.repeat) for n in sizes}
    names = list(table[sizes[0]])
    print("| stage | " + " | ".join(f"{n:,}" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{table[n][name]:.3f}" for n in sizes) + " |")


if __name__ == "__main__":
    main()
