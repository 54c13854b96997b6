"""Host preparation of ``sweep_cuda``, stage by stage, on the CPU (no GPU needed).

    python benchmarks/gpu_host.py [--sizes 100000,1000000,10000000] [--repeat 3] [--shuffle]

Times the host functions a GPU block runs around its kernels, for the ema_cross grids
of the GPU check (``gpu_check.ema_params``: fast 2.. x slow 502..2501, fast-major) on
26,280 bars, or those grids in a random order (``--shuffle``): ``prepare_inputs``,
``plan_rows``, ``locality_order``, the combos packed for the kernel and the metrics (18
per combo) put back in the grid's order. Where ``sweep_cuda`` gathers the combos and
puts the metrics back on the device (``barsweep.engine.gpu.sweep.device_combos``), the host's
share of those two is what is timed (the order checked, the block's own arrays handed
over); otherwise ``KernelInputs.combos(rows, order)`` and ``out[:, order] = result``. The
copies over PCIe cannot be timed here; ``metrics_back`` counts, besides any scatter,
one host copy of the metrics into a new array (what ``copy_to_host`` into pageable
memory costs the host). Prints the median seconds per stage.
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


def stages(n: int, bars: dict, repeat: int, shuffle: bool) -> dict[str, float]:
    """Median seconds of each host stage for ``n`` ema_cross combos."""
    from barsweep.engine import Execution, get_strategy
    from barsweep.engine.core.hoist import plan_rows
    from barsweep.engine.core.inputs import locality_order, prepare_inputs
    from barsweep.engine.core.metrics import N_METRICS
    from barsweep.engine.gpu import sweep as gpu

    strategy, execution = get_strategy("ema_cross"), Execution(fill="close", fees=0.001)
    params = ema_params(n)
    if shuffle:
        pick = np.random.default_rng(1).permutation(n)
        params = {k: v[pick] for k, v in params.items()}
    on_device = hasattr(gpu, "device_combos")
    out: dict[str, float] = {}
    out["prepare_inputs"], inputs = timed(
        lambda: prepare_inputs(strategy, bars, params, execution, PPY), repeat)
    out["plan_rows"], (_, rows) = timed(
        lambda: plan_rows(strategy, inputs.strategy_params, n), repeat)
    out["locality_order"], order = timed(lambda: locality_order(rows), repeat)
    result = np.random.default_rng(0).random((1, n, N_METRICS))  # the kernel's metrics
    if on_device:
        out["combos"], _ = timed(lambda: (gpu.is_identity(order), inputs.combos(rows)), repeat)

        def back():  # copy_to_host into a new array: the driver's copy out of its staging
            host = np.empty_like(result)
            host[...] = result
            return host
    else:
        out["combos"], _ = timed(lambda: inputs.combos(rows, order), repeat)

        def back():  # copy_to_host into a new array, then the scatter into another
            host = result.copy()
            ordered = np.empty_like(host)
            ordered[:, order] = host
            return ordered

    out["metrics_back"], _ = timed(back, repeat)
    out["total"] = sum(out.values())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000,10000000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shuffle", action="store_true", help="the grids in a random order")
    args = parser.parse_args()
    bars = synth_bars(N_BARS)
    sizes = [int(s) for s in args.sizes.split(",")]
    table = {n: stages(n, bars, args.repeat, args.shuffle) for n in sizes}
    names = list(table[sizes[0]])
    print("| stage | " + " | ".join(f"{n:,}" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{table[n][name]:.3f}" for n in sizes) + " |")


if __name__ == "__main__":
    main()
