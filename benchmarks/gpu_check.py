"""GPU check: CUDA results against the CPU for every strategy, then the ema_cross sweep
timed at 100k, 1M and 10M combos on 26,280 bars, and `barsweep run` on a LocalCUDACluster.

    benchmarks/gpu_check.sh            # on the GPU machine (installs what is missing)
    python benchmarks/gpu_check.py [--sim] [--out GPU_RESULTS.md]

``--sim`` is a smoke run of this script itself in numba's CUDA simulator (tiny sizes;
set NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1), so it can be checked without a GPU.

Correctness: per strategy a few thousand combos under two execution settings (every
execution feature appears); trade counts must be identical and every metric within
RTOL = 1e-9 relative (ATOL 1e-12) of the CPU kernel: on a GPU NVVM fuses multiply-adds,
so the last bits differ (tests/gpu/test_cuda_ptx.py counts the fused ones). Exit 1 when
anything disagrees.

Speed: the GPU's figure is the kernel alone (device synchronized around it) and the
whole ``sweep_cuda`` call (hoisting, packing, copies, metrics back to the host); the CPU
figure is ``sweep_block()`` on every core at the smallest size (the CPU at 1M and 10M combos
is that same rate, extrapolated, and labelled so).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N_BARS = 26_280
RTOL, ATOL = 1e-9, 1e-12
PPY = 8760.0

EXECUTIONS = {
    "close, long, fees": dict(fill="close", fees=0.001),
    "next_open, both, fees+slippage+fixed fee": dict(fill="next_open", direction="both",
                                                     fees=0.0005, slippage=0.001,
                                                     fixed_fee=1.0),
    "close, short, stop+target": dict(fill="close", direction="short", fees=0.001,
                                      stop_loss=0.02, take_profit=0.04),
    "next_open, both, trailing+funding": dict(fill="next_open", direction="both", fees=0.001,
                                              trailing_stop=0.03, funding=True),
}


def synth_bars(n: int, seed: int = 7) -> dict[str, np.ndarray]:
    """A random walk with gaps, intrabar ranges and an 8-hourly funding rate."""
    rng = np.random.default_rng(seed)
    close = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.01, n)))
    prev = np.concatenate([[100.0], close[:-1]])
    open_ = prev * np.exp(rng.normal(0.0, 0.002, n))
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0.0, 0.004, n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0.0, 0.004, n)))
    funding = np.where(np.arange(n) % 8 == 0, rng.normal(1e-4, 2e-4, n), 0.0)
    return dict(open=open_, high=high, low=low, close=close, funding_rate=funding)


def product(limit: int, **axes) -> dict[str, np.ndarray]:
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    return {name: m.ravel()[:limit] for name, m in zip(axes, mesh)}


def strategy_grids(n: int) -> dict[str, dict[str, np.ndarray]]:
    """About ``n`` combos per strategy."""
    return {
        "buy_and_hold": {},
        "sma_cross": product(n, fast=np.arange(2, 52), slow=np.arange(60, 460, 5)),
        "ema_cross": product(n, fast=np.arange(2, 52), slow=np.arange(60, 460, 5)),
        "rsi": product(n, period=np.arange(2, 52), lower=np.arange(10.0, 45.0, 5.0),
                       upper=np.arange(55.0, 95.0, 5.0)),
        "trix": product(n, period=np.arange(2, 62), signal=np.arange(2, 62)),
        "macd": product(n, fast=np.arange(2, 22), slow=np.arange(23, 63, 2),
                        signal=np.arange(2, 12)),
        "bollinger": product(n, period=np.arange(5, 105), k=np.linspace(0.5, 3.5, 40)),
        "donchian": product(n, period=np.arange(2, 2 + n)),
    }


def compare(gpu: np.ndarray, cpu: np.ndarray) -> tuple[float, int, int]:
    """(max relative difference over finite pairs with |cpu| > ATOL, entries outside
    RTOL/ATOL, trade counts that differ); NaN and inf must agree (else they count as
    outside)."""
    from barsweep.engine import METRICS

    trades = METRICS.index("n_trades")
    both = np.isfinite(gpu) & np.isfinite(cpu)
    scale = np.abs(cpu)
    rel = np.where(both & (scale > ATOL), np.abs(gpu - cpu) / np.where(scale > 0, scale, 1.0),
                   0.0)
    close = np.isclose(gpu, cpu, rtol=RTOL, atol=ATOL, equal_nan=True)
    n_trade_diff = int((gpu[:, trades] != cpu[:, trades]).sum())
    return float(rel.max(initial=0.0)), int((~close).sum()), n_trade_diff


def check_correctness(bars, n_combos: int, rows: list, log) -> bool:
    from barsweep.engine import Execution, get_strategy, sweep_block
    from barsweep.engine.gpu import sweep_cuda

    names = list(EXECUTIONS)
    ok = True
    for i, (name, params) in enumerate(strategy_grids(n_combos).items()):
        for execution in (names[i % 4], names[(i + 1) % 4]):
            kwargs = EXECUTIONS[execution]
            strategy = get_strategy(name)
            cpu = sweep_block(strategy, bars, params, Execution(**kwargs), PPY)
            gpu = sweep_cuda(strategy, bars, params, Execution(**kwargs), PPY,
                             bars_key="check")
            max_rel, n_bad, n_trades = compare(gpu, cpu)
            passed = n_bad == 0 and n_trades == 0
            ok &= passed
            rows.append(["check", name, execution, f"{len(cpu):,}", "", "", "", "",
                         f"{max_rel:.1e}", "PASS" if passed else
                         f"FAIL ({n_bad} values, {n_trades} trade counts)"])
            log(f"check {name} / {execution}: max rel {max_rel:.1e}, "
                f"{'PASS' if passed else 'FAIL'}")
    return ok


def ema_params(n: int) -> dict[str, np.ndarray]:
    """``n`` ema_cross combos: fast 2.. x slow 502..2501 (2,000 slow periods)."""
    n_slow = min(2000, n)
    n_fast = -(-n // n_slow)
    fast, slow = np.meshgrid(np.arange(2, 2 + n_fast), np.arange(502, 502 + n_slow),
                             indexing="ij")
    return dict(fast=fast.ravel()[:n], slow=slow.ravel()[:n])


def time_sweeps(bars, sizes: list[int], rows: list, log) -> bool:
    from barsweep.engine import Execution, get_strategy, sweep_block
    from barsweep.engine.gpu import sweep_cuda

    strategy, execution = get_strategy("ema_cross"), Execution(fill="close", fees=0.001)
    n_bars = len(bars["close"])
    small = ema_params(min(sizes))
    t0 = time.perf_counter()
    cpu_small = sweep_block(strategy, bars, small, execution, PPY)
    cpu_rate = min(sizes) * n_bars / (time.perf_counter() - t0)
    import numba

    log(f"CPU ({numba.get_num_threads()} threads): {cpu_rate / 1e6:,.0f} M combo-bars/s")
    sweep_cuda(strategy, bars, ema_params(256), execution, PPY, bars_key="time")  # compile
    ok = True
    for n in sizes:
        params = ema_params(n)
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        gpu = sweep_cuda(strategy, bars, params, execution, PPY, bars_key="time",
                         timings=timings)
        total = time.perf_counter() - t0
        work = n * n_bars
        kernel_rate = work / timings["kernel"]
        if n == min(sizes):
            max_rel, n_bad, n_trades = compare(gpu, cpu_small)
        else:  # a strided sample of the combos, on the CPU
            pick = np.arange(0, n, max(1, n // 2000))
            cpu = sweep_block(strategy, bars, {k: v[pick] for k, v in params.items()}, execution,
                              PPY)
            max_rel, n_bad, n_trades = compare(gpu[pick], cpu)
        passed = n_bad == 0 and n_trades == 0
        ok &= passed
        rows.append([
            "speed", "ema_cross", "close, long, fees", f"{n:,}",
            f"{kernel_rate / 1e6:,.0f}", f"{work / total / 1e6:,.0f}",
            f"{cpu_rate / 1e6:,.0f}" + ("" if n == min(sizes) else " (extrapolated)"),
            f"{kernel_rate / cpu_rate:,.0f}x",
            f"{max_rel:.1e}", "PASS" if passed else f"FAIL ({n_bad}, {n_trades})"])
        stages = ", ".join(f"{k} {v:.3f} s" for k, v in timings.items())
        log(f"{n:,} combos: kernel {kernel_rate / 1e6:,.0f} M combo-bars/s, whole call "
            f"{work / total / 1e6:,.0f} ({stages})")
    return ok


def pipeline_run(n: int, rows: list, log, cluster: str) -> bool:
    """`barsweep run` (backend auto) on ``cluster``: the backend it chose, its speed, and
    a sample of its Zarr store against the CPU."""
    import xarray as xr

    from barsweep.datasets import bars_arrays, open_bars, write_synth
    from barsweep.engine import METRICS, Execution, get_strategy, sweep_block
    from barsweep.pipeline.config.model import parse_spec
    from barsweep.pipeline.run.cluster import connect
    from barsweep.pipeline.run.orchestrate import run_spec

    store = tempfile.mkdtemp(prefix="barsweep-gpu-")
    write_synth(store, "BTCUSDT", "1h", N_BARS, 7)
    out = store + "/results.zarr"
    n_fast = max(1, n // 2000)
    spec = parse_spec({
        "data": {"store": store, "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross", "cluster": cluster,
        "grid": {"fast": {"start": 2, "stop": 1 + n_fast, "step": 1},
                 "slow": {"start": 502, "stop": 2501, "step": 1}},
        "execution": {"fill": "close", "fees": 0.001}, "run": {"out": out},
    })
    with connect(cluster) as client:
        t0 = time.perf_counter()
        summary = run_spec(spec, client=client)
        seconds = time.perf_counter() - t0
    ds = xr.open_zarr(out, consolidated=False)
    stacked = ds.sel(symbol="BTCUSDT").stack(combo=("fast", "slow"))
    pick = np.arange(0, stacked.sizes["combo"], max(1, stacked.sizes["combo"] // 2000))
    params = {k: stacked[k].values[pick] for k in ("fast", "slow")}
    stored = np.column_stack([stacked[m].values[pick] for m in METRICS])
    bars = bars_arrays(open_bars(store, "BTCUSDT", "1h"), "BTCUSDT")
    cpu = sweep_block(get_strategy("ema_cross"), bars, params, Execution(fill="close", fees=0.001),
                      8760.0)
    max_rel, n_bad, n_trades = compare(stored, cpu)
    passed = n_bad == 0 and n_trades == 0 and ds.attrs["backend"] == "cuda"
    rows.append(["barsweep run", "ema_cross", f"cluster {cluster}: {ds.attrs['backend']} "
                 f"({ds.attrs['backend_reason']})", f"{summary.n_combos:,}", "",
                 f"{summary.n_combos * N_BARS / seconds / 1e6:,.0f} (whole run)", "", "",
                 f"{max_rel:.1e}", "PASS" if passed else "FAIL"])
    log(f"barsweep run: {summary.n_combos:,} combos in {seconds:.1f} s on "
        f"{ds.attrs['backend']}")
    return passed


def environment() -> str:
    import numba
    from numba import cuda

    device = cuda.get_current_device()
    name = getattr(device, "name", b"simulator")
    name = name.decode() if isinstance(name, bytes) else str(name)
    try:
        from importlib.metadata import version

        numba_cuda = version("numba-cuda")
    except Exception:
        numba_cuda = "built into numba"
    return (f"GPU {name}; Python {platform.python_version()}, numba {numba.__version__}, "
            f"numba-cuda {numba_cuda}; {os.cpu_count()} CPUs "
            f"({numba.get_num_threads()} numba threads for the CPU figures)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sim", action="store_true",
                        help="smoke run in the CUDA simulator: tiny sizes")
    parser.add_argument("--out", help="also write the markdown report here")
    parser.add_argument("--no-pipeline", action="store_true")
    args = parser.parse_args()
    t_start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[gpu_check {time.perf_counter() - t_start:6.1f}s] {msg}", flush=True)

    from barsweep.engine.gpu import require_cuda

    require_cuda()
    if args.sim:
        bars, check_n, sizes, pipe_n = synth_bars(300), 24, [64, 128], 0
    else:
        bars, check_n, sizes, pipe_n = synth_bars(N_BARS), 3000, [100_000, 1_000_000,
                                                                 10_000_000], 1_000_000
    rows: list[list[str]] = []
    ok = check_correctness(bars, check_n, rows, log)
    ok &= time_sweeps(bars, sizes, rows, log)
    if pipe_n and not args.no_pipeline:
        ok &= pipeline_run(pipe_n, rows, log, "cuda")
    head = ["what", "strategy", "execution", "combos", "GPU kernel M combo-bars/s",
            "GPU whole call M combo-bars/s", "CPU M combo-bars/s", "GPU kernel / CPU",
            "max rel diff vs CPU", "result"]
    lines = [
        f"# GPU check ({time.strftime('%Y-%m-%d %H:%M')})", "",
        f"`benchmarks/gpu_check.sh`{' --sim' if args.sim else ''} on: {environment()}.", "",
        f"{len(bars['close']):,} bars; tolerance vs the CPU kernel: rtol {RTOL:g}, atol "
        f"{ATOL:g}, trade counts identical. Target: >= 100,000 M combo-bars/s.", "",
        "| " + " | ".join(head) + " |", "|" + "---|" * len(head),
        *["| " + " | ".join(r) + " |" for r in rows], "",
        f"Result: **{'PASS' if ok else 'FAIL'}**; wall time {time.perf_counter() - t_start:.0f} s.",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
