"""A sweep run: spec -> grid -> blocks -> Dask tasks -> Zarr store.

:func:`plan` is pure (spec in, block tasks out); :func:`execute` submits them to a
Dask client and reports progress; :func:`run_sweep` does both around the store.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from distributed import Client, as_completed

import barsweep
from barsweep.datasets import fingerprint, open_bars, periods_per_year, to_ns
from barsweep.engine import METRICS, Execution
from barsweep.errors import BackendError

from .blocks import BarsRef, BlockReport, BlockTask, run_block, warm_block
from .grid import Grid
from .results import check_done, create_store, mark_excluded, update_attrs
from .spec import Spec, build_grid


@dataclass(frozen=True)
class Plan:
    """The blocks of a run: those to compute and those the constraints exclude."""

    grid: Grid
    chunks: tuple[int, ...]
    n_blocks: int
    tasks: tuple[BlockTask, ...]
    excluded: tuple[int, ...]
    n_combos: int


@dataclass(frozen=True)
class RunSummary:
    out: str
    n_combos: int
    n_blocks: int
    combo_bars: int
    seconds: float
    backend: str

    @property
    def combo_bars_per_second(self) -> float:
        return self.combo_bars / self.seconds if self.seconds > 0 else float("nan")


def resolve_backend(requested: str, client: Client) -> tuple[str, str]:
    """The backend a run uses and why: ``(backend, reason)``.

    ``cpu`` is taken as asked. Otherwise every worker is asked (they may be other
    machines) whether it can run CUDA kernels and which GPU it would use. ``cuda`` needs
    all of them to have one, else :class:`BackendError` names each worker's problem.
    ``auto`` picks ``cuda`` when every worker has a GPU of its own, as dask-cuda's
    ``LocalCUDACluster`` (``cluster: cuda``) arranges; workers that would share a GPU
    (a ``LocalCluster`` of one CPU worker per core on a GPU machine) stay on the CPU,
    which they would otherwise leave idle. The reason goes into the run's attributes.
    """
    if requested == "cpu":
        return "cpu", "run.backend is cpu"
    return choose_backend(requested, client.run(worker_gpu))


def choose_backend(requested: str, answers: dict[str, dict]) -> tuple[str, str]:
    """:func:`resolve_backend`'s decision from the workers' :func:`worker_gpu` answers."""
    bad = {worker: a["problem"] for worker, a in answers.items() if a["problem"]}
    if requested == "cuda":
        if bad or not answers:
            detail = "; ".join(f"{w}: {p}" for w, p in sorted(bad.items())) or "no workers"
            raise BackendError(f"run.backend: 'cuda' needs a CUDA GPU on every worker: "
                               f"{detail}. Use backend 'cpu' or 'auto', or a cluster of GPU "
                               f"workers (cluster: cuda, with the [cuda] extra)")
        return "cuda", f"run.backend is cuda; all {len(answers)} workers see a CUDA GPU"
    if not answers:
        return "cpu", "auto: CPU, since the cluster has no workers"
    if bad:
        worker, problem = sorted(bad.items())[0]
        return "cpu", f"auto: CPU, since {worker}: {problem}"
    users: dict[str, int] = {}
    for a in answers.values():
        users[a["gpu"]] = users.get(a["gpu"], 0) + 1
    gpu, n = max(users.items(), key=lambda item: item[1])
    if n > 1:
        return "cpu", (f"auto: CPU, since {n} workers would share GPU {gpu}; use cluster: cuda "
                       f"(one worker per GPU), or backend: cuda to share it anyway")
    return "cuda", f"auto: each of the {len(answers)} workers has a CUDA GPU of its own"


def worker_gpu() -> dict:
    """On a worker: ``{"problem": why CUDA kernels cannot run here or None, "gpu": the
    GPU it would use, as "host:device"}`` (the first of ``CUDA_VISIBLE_DEVICES``, which
    dask-cuda sets per worker)."""
    import os
    import socket

    try:
        problem = worker_cuda_problem()
    except Exception as exc:  # a broken CUDA install: the CPU still works
        problem = f"checking CUDA failed ({type(exc).__name__}: {exc})"
    device = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
    return {"problem": problem, "gpu": f"{socket.gethostname()}:{device}"}


def worker_cuda_problem() -> str | None:
    """Why CUDA kernels cannot run in this process, or None if they can.

    Without the simulator and without any trace of an NVIDIA driver (Linux's
    ``/proc/driver/nvidia/version`` or ``/dev/nvidiactl``, WSL2's ``/dev/dxg``) this
    answers without importing numba.cuda (which costs a CPU worker ~0.2-0.4 s).
    """
    import os

    traces = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/dxg")
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0") and not any(
            Path(p).exists() for p in traces):
        return f"no NVIDIA driver on this machine (none of {', '.join(traces)})"
    from barsweep.engine.gpu import cuda_problem

    return cuda_problem()


#: A block should compute for well over a Dask task's ~2-3 ms of overhead, and there
#: should be several blocks per worker so that the last ones balance.
MIN_BLOCK_COMBO_BARS = 50_000_000
BLOCKS_PER_WORKER = 4
MAX_BLOCK_COMBOS = 1 << 20


def auto_block_size(n_combos: int, n_bars: int, n_workers: int) -> int:
    """Combos per block: ~BLOCKS_PER_WORKER blocks per worker, but no block shorter than
    MIN_BLOCK_COMBO_BARS combo-bars (about 0.25 s of kernel) nor larger than MAX_BLOCK_COMBOS.

    Examples
    --------
    >>> auto_block_size(1_000_000, 26_280, 2)
    125000
    >>> auto_block_size(4_000, 26_280, 2)
    1903
    """
    spread = -(-n_combos // max(1, n_workers * BLOCKS_PER_WORKER))
    floor = -(-MIN_BLOCK_COMBO_BARS // max(1, n_bars))
    return int(max(1, min(max(spread, floor), MAX_BLOCK_COMBOS, n_combos)))


def plan(spec: Spec, out: str, block_size: int | None = None,
         grid: Grid | None = None, backend: str = "cpu", bars_hash: str = "") -> Plan:
    """Cut the spec's grid into blocks (block = Dask task = Zarr chunk) for every symbol.

    ``block_size`` overrides the spec's (needed when the spec says ``auto``); ``grid``
    is ``build_grid(spec)`` when the caller has it already; ``backend`` is the resolved
    one (``cpu`` or ``cuda``) and ``bars_hash`` the store's fingerprint hash (GPU
    workers key their device copy of the bars on it).
    """
    grid = grid if grid is not None else build_grid(spec)
    size = block_size if block_size is not None else spec.run.block_size
    if size == "auto":
        size = 65_536
    chunks = grid.chunks(size)
    per_symbol = grid.n_blocks(chunks)
    execution = Execution(**spec.execution.model_dump())
    ppy = periods_per_year(spec.data.timeframe, spec.data.year_days)
    boxes = []  # (block id within a symbol, region slices, axes slices, combos kept)
    for b, slices in grid.blocks(chunks):
        axes = tuple((name, values[sl]) for (name, values), sl in zip(grid.axes, slices))
        boxes.append((b, slices, axes, Grid(axes, grid.constraints).count_valid()))
    tasks, excluded, n_combos = [], [], 0
    for s, symbol in enumerate(spec.data.symbols):
        bars = BarsRef(spec.data.store, symbol, spec.data.timeframe,
                       to_ns(spec.data.start, "data.start"), to_ns(spec.data.end, "data.end"),
                       bars_hash)
        for b, slices, axes, n_valid in boxes:
            block_id = s * per_symbol + b
            if n_valid == 0:
                excluded.append(block_id)
                continue
            n_combos += n_valid
            tasks.append(BlockTask(block_id, out, bars, spec.strategy, axes,
                                   (slice(s, s + 1), *slices), grid.constraints, execution, ppy,
                                   tuple(spec.modules), backend=backend))
    return Plan(grid, chunks, per_symbol * len(spec.data.symbols), tuple(tasks),
                tuple(excluded), n_combos)


def execute(client: Client, tasks: tuple[BlockTask, ...],
            on_done: Callable[[BlockReport], None] | None = None) -> list[BlockReport]:
    """Run every block as one Dask task; return their reports in completion order.

    Task keys are unique to this call, so two runs sharing a scheduler never
    attach to each other's tasks.
    """
    run_id = uuid.uuid4().hex[:12]
    futures = client.map(run_block, tasks,
                         key=[f"barsweep-block-{run_id}-{t.block_id}" for t in tasks],
                         pure=False)
    reports = []
    for future in as_completed(futures):
        report = future.result()
        reports.append(report)
        if on_done is not None:
            on_done(report)
    return reports


def run_sweep(spec: Spec, client: Client, *, out: str | None = None,
              progress: bool = True) -> RunSummary:
    """Run a whole sweep on ``client`` and leave the results in a Zarr store."""
    t0 = time.perf_counter()
    out = str(Path(out or spec.run.out))
    backend, backend_reason = resolve_backend(spec.run.backend, client)
    n_bars = 0
    for symbol in spec.data.symbols:  # refuse a missing symbol or empty range up front
        ds = open_bars(spec.data.store, symbol, spec.data.timeframe, spec.data.start,
                       spec.data.end)
        n_bars = max(n_bars, ds.sizes["time"])
    grid = build_grid(spec)
    block_size = spec.run.block_size
    if block_size == "auto":
        n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        block_size = auto_block_size(grid.count_valid(), n_bars, n_workers)
    prints = fingerprint(spec.data.store, spec.data.symbols, spec.data.timeframe)
    the_plan = plan(spec, out, block_size, grid, backend, prints["blake2b"])
    attrs = {
        "spec": spec.to_yaml(),
        "barsweep_version": barsweep.__version__,
        "bars_fingerprint": json.dumps(prints),
        "backend": backend,
        "backend_requested": spec.run.backend,
        "backend_reason": backend_reason,
        "metrics": json.dumps(list(METRICS)),
    }
    create_store(out, spec.data.symbols, the_plan.grid.axes, the_plan.chunks,
                 the_plan.n_blocks, attrs)
    mark_excluded(out, the_plan.excluded)
    warm_up(client, the_plan.tasks)
    t_plan = time.perf_counter()
    bar = ProgressBar(len(the_plan.tasks), the_plan.n_combos) if progress else None
    reports = execute(client, the_plan.tasks, bar.update if bar else None)
    if bar:
        bar.close()
    t_done = time.perf_counter()
    check_done(out)
    update_attrs(out, {"timings_s": {
        "plan_and_create": round(t_plan - t0, 4),
        "compute_and_write": round(t_done - t_plan, 4),
        "task_seconds_sum": round(sum(r.seconds for r in reports), 4),
        "total": round(t_done - t0, 4),
    }})
    combo_bars = sum(r.n_combos * r.n_bars for r in reports)
    return RunSummary(out, the_plan.n_combos, len(the_plan.tasks), combo_bars,
                      t_done - t_plan, backend)


def warm_up(client: Client, tasks: tuple[BlockTask, ...]) -> None:
    """Load (or compile) the kernel once per cluster, not once per task: one worker
    compiles it into numba's on-disk cache, then every worker loads it in parallel.

    CUDA kernels are built in memory (not cached on disk), so on ``cuda`` every worker
    compiles its own, all at once.
    """
    if not tasks:
        return
    workers = list(client.scheduler_info().get("workers", {}))
    if workers and tasks[0].backend != "cuda":
        client.submit(warm_block, tasks[0], workers=workers[:1], pure=False).result()
    client.run(warm_block, tasks[0])


class ProgressBar:
    """A one-line progress bar on stderr: blocks done, combos done, throughput."""

    def __init__(self, n_blocks: int, n_combos: int, width: int = 30) -> None:
        self.n_blocks, self.n_combos, self.width = n_blocks, n_combos, width
        self.blocks = self.combos = 0
        self.t0 = time.perf_counter()
        self._draw()

    def update(self, report: BlockReport) -> None:
        self.blocks += 1
        self.combos += report.n_combos
        self._draw()

    def close(self) -> None:
        sys.stderr.write("\n")
        sys.stderr.flush()

    def _draw(self) -> None:
        frac = self.blocks / self.n_blocks if self.n_blocks else 1.0
        filled = int(frac * self.width)
        rate = self.combos / max(time.perf_counter() - self.t0, 1e-9)
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (self.width - filled)}] {self.blocks}/{self.n_blocks} "
            f"blocks, {self.combos:,}/{self.n_combos:,} combos, {rate:,.0f} combos/s"
        )
        sys.stderr.flush()
