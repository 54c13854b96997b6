"""GPU check, one step per call: ``probe``, ``speed``, ``check``, ``pipeline``, ``table``.

    benchmarks/gpu_check.sh [--simulate]      # runs every step, each under a timeout
    python benchmarks/gpu_check.py STEP --out DIR [options]

``gpu_check.sh`` runs each step in a process of its own and appends what it finds to
``DIR``: ``probe`` writes ``probe.json`` (which driver, runtime, NVVM and libdevice
numba-cuda uses, the GPU, whether the carried packages import) and ``probe.env`` (for
the shell); ``speed``, ``check`` and ``pipeline`` append table rows to ``rows.jsonl`` as
they go, so a step stopped at its limit keeps the rows it finished; ``table`` writes
``GPU_RESULTS.md`` from them and the shell's ``steps.jsonl``.

Correctness (``check``): per strategy (the builtins, and one written as rules:
``rule_state`` of tests/gpu) a few thousand combos under two execution settings
(every execution feature appears); trade counts must be identical and every metric within
RTOL = 1e-9 relative (ATOL 1e-12) of the CPU kernel: on a GPU NVVM fuses multiply-adds,
so the last bits differ (tests/gpu/test_cuda_ptx.py counts the fused ones).

Speed (``speed``): the ema_cross sweep; the GPU's figure is the kernel alone (device
synchronized around it) and the whole ``sweep_cuda`` call (preparation, copies, metrics
back to the host); the CPU figure is ``sweep_block()`` on every core at the smallest size
(at larger sizes that same rate, labelled extrapolated). A size whose time, estimated
from the size before, does not fit the step's deadline is capped (or dropped), and the
row says so.

``pipeline``: ``barsweep run`` with backend cuda on dask-cuda's LocalCUDACluster if
dask-cuda imports, else on a LocalCluster of one worker process (the GPU machine's image
has no dask-cuda); a sample of its Zarr store against the CPU.

Under ``NUMBA_ENABLE_CUDASIM=1 NUMBA_DISABLE_JIT=1`` every step runs in numba's CUDA
simulator (``gpu_check.sh --simulate``, with tiny sizes).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from gpu_report import emit, log, probe, table

N_BARS = 26_280  # the check's bars: three years of hours
SLOW0 = 502  # ema_cross grids: the first slow period
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
    """About ``n`` combos per builtin strategy, per :data:`RULE_STRATEGY`, per
    ``rule_hold`` and per ``rule_account`` (all of tests/gpu/gpu_rule_strategy.py)."""
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
        # written as rules (tests/gpu/gpu_rule_strategy.py): lags, nested indicators,
        # crosses, min/max and the position state in a generated signal
        RULE_STRATEGY: product(n, period=np.arange(4, 44), lag=np.array([1, 2, 4, 8]),
                               hold=np.array([2, 6, 20, 50]), k=np.array([0.01, 0.03])),
        # rules whose entry and exit hold together: execution.conflict decides each bar
        "rule_hold": product(n, period=np.arange(4, 204), hold=np.arange(1, 41)),
        # rules that read the account (equity, the pending order): an 11-argument signal
        "rule_account": product(n, period=np.arange(4, 204),
                                floor=np.array([0.0, 9_000.0, 9_900.0]),
                                k=np.array([0.002, 0.01])),
    }


#: The strategy written as rules that the check runs beside the builtins.
RULE_STRATEGY = "rule_state"


def register_rule_strategy() -> None:
    """Register :data:`RULE_STRATEGY` in this process (its module lives in tests/gpu)."""
    folder = str(Path(__file__).resolve().parents[1] / "tests" / "gpu")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    import gpu_rule_strategy  # noqa: F401  (registers on import)


def ema_params(n: int, slow0: int = SLOW0) -> dict[str, np.ndarray]:
    """``n`` ema_cross combos: fast 2.. x slow ``slow0``.. (at most 2,000 slow periods)."""
    n_slow = min(2000, n)
    n_fast = -(-n // n_slow)
    fast, slow = np.meshgrid(np.arange(2, 2 + n_fast), np.arange(slow0, slow0 + n_slow),
                             indexing="ij")
    return dict(fast=fast.ravel()[:n], slow=slow.ravel()[:n])


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


def rate(combo_bars_per_s: float) -> str:
    """M combo-bars/s as the table shows them: whole numbers, three digits below 100."""
    m = combo_bars_per_s / 1e6
    return f"{m:,.0f}" if m >= 100 else f"{m:.3g}"


def verdict(n_bad: int, n_trades: int) -> str:
    return "PASS" if n_bad == 0 and n_trades == 0 else \
        f"FAIL ({n_bad} values, {n_trades} trade counts)"


# -- speed ---------------------------------------------------------------------------

def cpu_rate(strategy, bars, params, execution) -> float:
    """combo-bars/s of ``sweep_block`` on every core (compiled beforehand on a few combos)."""
    from barsweep.engine import sweep_block

    sweep_block(strategy, bars, {k: v[:8] for k, v in params.items()}, execution, PPY)
    t0 = time.perf_counter()
    sweep_block(strategy, bars, params, execution, PPY)
    return len(params["fast"]) * len(bars["close"]) / (time.perf_counter() - t0)


def fit_size(n: int, prev: tuple[int, float] | None, deadline: float) -> tuple[int, str]:
    """The size to run instead of ``n`` so that it ends before ``deadline`` (0: none fits),
    from the seconds the size before took (scaled linearly, with a 30% margin), and why."""
    if prev is None:
        return n, ""
    prev_n, prev_s = prev
    estimate = 1.3 * prev_s * n / prev_n + 5.0
    left = deadline - time.time() - 10.0
    if estimate <= left:
        return n, ""
    fit = int(left / estimate * n) // 100_000 * 100_000 if n >= 1_000_000 else 0
    why = f"estimate {estimate:.0f} s > {left:.0f} s left"
    if fit < 2 * prev_n:
        return 0, f"not run: {why}"
    return fit, f"capped from {n:,}: {why}"


def speed(args) -> int:
    """The ema_cross sweep timed at each of ``args.sizes`` combos."""
    from barsweep.engine import Execution, get_strategy, sweep_block
    from barsweep.engine.gpu.sweep import sweep_cuda

    bars = synth_bars(args.bars)
    strategy, execution = get_strategy("ema_cross"), Execution(fill="close", fees=0.001)
    sizes = sorted(args.sizes)
    t0 = time.perf_counter()
    sweep_cuda(strategy, bars, ema_params(256, args.slow0), execution, PPY, bars_key="t")
    log(f"ema_cross kernel compiled and run on 256 combos: {time.perf_counter() - t0:.1f} s")
    small = ema_params(sizes[0], args.slow0)
    cpu_speed = cpu_rate(strategy, bars, small, execution)
    import numba

    log(f"CPU ({numba.get_num_threads()} threads): {rate(cpu_speed)} M combo-bars/s")
    ok, prev = True, None
    for asked in sizes:
        n, note = fit_size(asked, prev, args.deadline)
        if n == 0:
            emit(args.out, ["speed", "ema_cross", "close, long, fees", f"{asked:,}",
                            "", "", "", "", "", "not run", note], True)
            log(f"{asked:,} combos: {note}")
            continue
        params = ema_params(n, args.slow0)
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        gpu = sweep_cuda(strategy, bars, params, execution, PPY, bars_key="t", timings=timings)
        total = time.perf_counter() - t0
        prev = (n, total)
        pick = np.arange(0, n, max(1, n // 2000))  # a strided sample, on the CPU
        cpu = sweep_block(strategy, bars, {k: v[pick] for k, v in params.items()}, execution,
                          PPY)
        max_rel, n_bad, n_trades = compare(gpu[pick], cpu)
        ok &= n_bad == 0 and n_trades == 0
        work = n * args.bars
        kernel_rate = work / max(timings["kernel"], 1e-9)
        stages = ", ".join(f"{k} {v:.3f}" for k, v in timings.items())
        emit(args.out, [
            "speed", "ema_cross", "close, long, fees", f"{n:,}",
            rate(kernel_rate), rate(work / total),
            rate(cpu_speed) + ("" if n == sizes[0] else " (extrapolated)"),
            f"{kernel_rate / cpu_speed:,.1f}x", f"{max_rel:.1e}", verdict(n_bad, n_trades),
            "; ".join(x for x in (note, f"s: {stages}, whole {total:.3f}") if x)],
            n_bad == 0 and n_trades == 0)
        log(f"{n:,} combos: kernel {rate(kernel_rate)} M combo-bars/s, whole call "
            f"{rate(work / total)} ({stages}; whole {total:.3f} s) {note}")
        if n <= OWN_PACE_MAX and fit_size(n, prev, args.deadline)[0] == n:
            ok &= own_pace(args, strategy, bars, params, execution, gpu, timings["kernel"])
    return 0 if ok else 1


#: The own-pace kernel (each thread scans its stretches as the CPU does) is timed beside
#: the lockstep one up to this many combos: the warp model's two designs, measured.
OWN_PACE_MAX = 1_000_000


def own_pace(args, strategy, bars, params, execution, lockstep_out, lockstep_s) -> bool:
    """Time the own-pace kernel on the same sweep; its row holds its kernel rate, the
    lockstep kernel's speed over it, and whether the two agree: identical trade counts,
    metrics within RTOL (the two kernels are compiled apart, and NVVM may fuse their
    multiply-adds differently)."""
    from barsweep.engine.gpu.sweep import sweep_cuda

    n = len(params["fast"])
    timings: dict[str, float] = {}
    sweep_cuda(strategy, bars, ema_params(256, args.slow0), execution, PPY, bars_key="t",
               lockstep=False)  # compiled first
    out = sweep_cuda(strategy, bars, params, execution, PPY, bars_key="t", timings=timings,
                     lockstep=False)
    max_rel, n_bad, n_trades = compare(out, lockstep_out)
    same = n_bad == 0 and n_trades == 0
    work = n * args.bars
    emit(args.out, ["speed", "ema_cross, own pace", "close, long, fees", f"{n:,}",
                    rate(work / max(timings["kernel"], 1e-9)), "", "",
                    f"lockstep {timings['kernel'] / max(lockstep_s, 1e-9):,.2f}x as fast",
                    f"{max_rel:.1e}", verdict(n_bad, n_trades),
                    "same metrics as lockstep" if same else "differs from lockstep"], same)
    log(f"{n:,} combos, own pace: kernel {timings['kernel']:.3f} s, lockstep "
        f"{lockstep_s:.3f} s; identical: {same}")
    return same


# -- check ---------------------------------------------------------------------------

def check_pairs() -> list[tuple[str, str]]:
    """The (strategy, execution) pairs the check runs: two executions per builtin, in
    turn, so that every execution feature appears."""
    names = list(EXECUTIONS)
    return [(name, names[(i + k) % len(names)])
            for i, name in enumerate(strategy_grids(1)) for k in (0, 1)]


def cpu_reference(name: str, execution: str, n_bars: int, n_combos: int) -> np.ndarray:
    """The CPU kernel's metrics for one pair of the check (in a worker process, which
    compiles it while the GPU's kernels compile in the main one)."""
    from barsweep.engine import Execution, get_strategy, sweep_block
    from barsweep.engine.backend import limit_threads

    limit_threads(2)
    register_rule_strategy()
    return sweep_block(get_strategy(name), synth_bars(n_bars), strategy_grids(n_combos)[name],
                       Execution(**EXECUTIONS[execution]), PPY)


def check(args) -> int:
    """Every builtin strategy, and one written as rules, on the GPU against the CPU, two
    execution settings each
    (the CPU's side in a pool of processes meanwhile); strategies that would not finish
    before the deadline are listed as not run."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from barsweep.engine.strategies import strategy_names

    register_rule_strategy()
    ok = True
    for name in sorted(set(strategy_names()) - set(strategy_grids(1))):
        emit(args.out, ["check", name, "", "", "", "", "", "", "", "FAIL",
                        "no grid in gpu_check.py: not checked"], False)
        ok = False
    workers = max(1, min(8, (os.cpu_count() or 2) // 2))
    pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"))
    try:
        cpu = {pair: pool.submit(cpu_reference, *pair, args.bars, args.combos)
               for pair in check_pairs()}
        ok &= check_on_gpu(args, cpu)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return 0 if ok else 1


def check_on_gpu(args, cpu: dict) -> bool:
    """:func:`check`'s GPU side: each pair's metrics against the CPU's (``cpu``: futures
    by pair); a row per pair. True if all ran and agree."""
    from barsweep.engine import Execution, get_strategy
    from barsweep.engine.gpu.sweep import sweep_cuda

    bars, grids = synth_bars(args.bars), strategy_grids(args.combos)
    ok, slowest, started = True, 0.0, {}
    for name, execution in cpu:
        t0 = time.perf_counter()
        left = args.deadline - time.time()
        if name not in started and 1.5 * slowest + 5.0 > left:
            emit(args.out, ["check", name, execution, "", "", "", "", "", "", "not run",
                            f"budget: {left:.0f} s left"], False)
            log(f"check {name} / {execution}: not run (budget)")
            ok = False
            continue
        started.setdefault(name, t0)
        try:
            gpu = sweep_cuda(get_strategy(name), bars, grids[name],
                             Execution(**EXECUTIONS[execution]), PPY, bars_key="check")
            ref = cpu[name, execution].result(timeout=max(1.0, args.deadline - time.time()))
        except Exception as exc:
            emit(args.out, ["check", name, execution, "", "", "", "", "", "", "FAIL",
                            f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"],
                 False)
            log(f"check {name} / {execution}: {type(exc).__name__}: {exc}")
            ok = False
            continue
        max_rel, n_bad, n_trades = compare(gpu, ref)
        ok &= n_bad == 0 and n_trades == 0
        emit(args.out, ["check", name, execution, f"{len(ref):,}", "", "", "", "",
                        f"{max_rel:.1e}", verdict(n_bad, n_trades)],
             n_bad == 0 and n_trades == 0)
        log(f"check {name} / {execution}: max rel {max_rel:.1e}, {verdict(n_bad, n_trades)} "
            f"({time.perf_counter() - t0:.1f} s)")
        slowest = max(slowest, time.perf_counter() - started[name])
    return ok


# -- pipeline ------------------------------------------------------------------------

def pipeline_client():
    """A Dask client of one GPU worker: dask-cuda's LocalCUDACluster if it imports,
    else a LocalCluster of one worker process; and a word on which."""
    from barsweep.pipeline.run.cluster import connect

    try:
        import dask_cuda  # noqa: F401

        return connect("cuda"), "cuda (LocalCUDACluster)"
    except ImportError:
        return connect("local", n_workers=1), "local, 1 worker (no dask-cuda)"


def pipeline(args) -> int:
    """`barsweep run` with backend cuda: its speed, and a sample of its Zarr store
    against the CPU."""
    import xarray as xr

    from barsweep.datasets import bars_arrays, open_bars, write_synth
    from barsweep.engine import METRICS, Execution, get_strategy, sweep_block
    from barsweep.pipeline.config.model import parse_spec
    from barsweep.pipeline.run.orchestrate import run_spec

    store = tempfile.mkdtemp(prefix="barsweep-gpu-")
    write_synth(store, "BTCUSDT", "1h", args.bars, 7)
    out = store + "/results.zarr"
    n_slow = min(2000, args.combos)
    spec = parse_spec({
        "data": {"store": store, "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross", "cluster": "local",
        "grid": {"fast": {"start": 2, "stop": 1 + max(1, args.combos // n_slow), "step": 1},
                 "slow": {"start": args.slow0, "stop": args.slow0 + n_slow - 1, "step": 1}},
        "execution": {"fill": "close", "fees": 0.001},
        "run": {"out": out, "backend": "cuda"},
    })
    client_cm, cluster = pipeline_client()
    t0 = time.perf_counter()
    with client_cm as client:
        log(f"cluster {cluster} up: {time.perf_counter() - t0:.1f} s")
        t1 = time.perf_counter()
        summary = run_spec(spec, client=client)
        seconds = time.perf_counter() - t1
    ds = xr.open_zarr(out, consolidated=False)
    stacked = ds.sel(symbol="BTCUSDT").stack(combo=("fast", "slow"))
    pick = np.arange(0, stacked.sizes["combo"], max(1, stacked.sizes["combo"] // 2000))
    params = {k: stacked[k].values[pick] for k in ("fast", "slow")}
    stored = np.column_stack([stacked[m].values[pick] for m in METRICS])
    bars = bars_arrays(open_bars(store, "BTCUSDT", "1h"), "BTCUSDT")
    cpu = sweep_block(get_strategy("ema_cross"), bars, params,
                      Execution(fill="close", fees=0.001), PPY)
    max_rel, n_bad, n_trades = compare(stored, cpu)
    passed = n_bad == 0 and n_trades == 0 and ds.attrs["backend"] == "cuda"
    emit(args.out, ["barsweep run", "ema_cross", "close, long, fees",
                    f"{summary.n_combos:,}", "",
                    f"{rate(summary.n_combos * args.bars / seconds)} (whole run)", "", "",
                    f"{max_rel:.1e}", "PASS" if passed else verdict(n_bad, n_trades),
                    f"cluster {cluster}; backend {ds.attrs['backend']} "
                    f"({ds.attrs['backend_reason']}); {seconds:.1f} s"], passed)
    log(f"barsweep run: {summary.n_combos:,} combos in {seconds:.1f} s on "
        f"{ds.attrs['backend']}")
    return 0 if passed else 1


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=list(STEPS))
    parser.add_argument("--out", type=Path, required=True, help="the results folder")
    parser.add_argument("--bars", type=int, default=N_BARS)
    parser.add_argument("--combos", type=int, default=3000,
                        help="check: combos per strategy; pipeline: the grid's size")
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")],
                        default=[100_000, 1_000_000, 10_000_000], help="speed: combos")
    parser.add_argument("--slow0", type=int, default=SLOW0,
                        help="ema_cross grids: the first slow period")
    parser.add_argument("--deadline", type=float,
                        default=float(os.environ.get("GPU_CHECK_DEADLINE", "inf")),
                        help="check, speed: epoch seconds by which to have finished "
                             "(default: $GPU_CHECK_DEADLINE, which gpu_check.sh sets)")
    parser.add_argument("--mode-flag", default="", help="table: how the shell was called")
    return parser.parse_args(argv)


STEPS = {"probe": probe, "speed": speed, "check": check, "pipeline": pipeline,
         "table": table}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.step not in ("probe", "table"):
        from barsweep.engine.gpu.sweep import require_cuda

        require_cuda()
    return STEPS[args.step](args)


if __name__ == "__main__":
    sys.exit(main())
