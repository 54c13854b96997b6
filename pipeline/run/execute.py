"""A sweep run: spec -> grid -> blocks -> Dask tasks -> Zarr store.

:func:`plan` is pure (spec in, block tasks out); :func:`execute` submits them to a
Dask client and reports progress; :func:`run_sweep` does both around the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import math
import time
import uuid
from collections.abc import Callable
from concurrent.futures import CancelledError
from dataclasses import dataclass

import dask
import numpy as np
from distributed import Client, as_completed

from ...datasets import mapped_arrays, periods_per_year, to_ns
from ...engine import METRICS
from ...engine.backend import process_gpu
from ...engine.simulate import segment_bounds
from ...errors import BackendError, BarsweepError, ResultsError, RunError
from ...version import __version__
from ..config.grid import Grid
from ..config.model import Spec, build_grid
from .blocks import BarsRef, BlockReport, BlockTask, run_block, warm_block
from .lock import out_lock
from .prepare import Prepared, prepare_run
from .progress import ProgressBar
from .results import (
    PENDING,
    check_out,
    create_store,
    done_flags,
    finish_store,
    store_attrs,
    write_block,
)
from .shipping import BarsShipper, BarsUnavailable, module_shipper


@dataclass(frozen=True)
class Plan:
    """The blocks of a run: those to compute and those the constraints exclude.

    ``n_combos`` is the number of combos the tasks compute when ``n_combos_exact``,
    else an upper bound (counting stopped at :data:`barsweep.pipeline.config.count.COUNT_BUDGET`;
    each task reports its exact count as it finishes). ``task_combos`` holds the same
    per task, in ``tasks`` order. ``excluded`` lists the blocks proven empty.
    """

    grid: Grid
    chunks: tuple[int, ...]
    n_blocks: int
    tasks: tuple[BlockTask, ...]
    excluded: tuple[int, ...]
    n_combos: int
    n_combos_exact: bool = True
    task_combos: tuple[int, ...] = ()


@dataclass(frozen=True)
class RunSummary:
    out: str
    n_combos: int
    n_blocks: int
    combo_bars: int
    seconds: float
    backend: str
    blocks_skipped: int = 0

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
    return choose_backend(requested, client.run(process_gpu))


def choose_backend(requested: str, answers: dict[str, dict]) -> tuple[str, str]:
    """:func:`resolve_backend`'s decision from the workers' answers (each one's
    :func:`~barsweep.engine.backend.process_gpu`)."""
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


#: A block should compute for well over a Dask task's ~2-3 ms of overhead, and there
#: should be several blocks per worker so that the last ones balance.
MIN_BLOCK_COMBO_BARS = 50_000_000
BLOCKS_PER_WORKER = 4
MAX_BLOCK_COMBOS = 1 << 20


def auto_block_size(n_combos: int, n_bars: int, n_workers: int) -> int:
    """Combos per block: ~BLOCKS_PER_WORKER blocks per worker, but no block shorter than
    MIN_BLOCK_COMBO_BARS combo-bars (about 0.25 s of kernel) nor larger than MAX_BLOCK_COMBOS;
    where that floor decides, a multiple of ``n_workers`` (worker threads) blocks, so that
    every worker computes the same number of blocks.

    ``n_combos`` is the grid's valid combos, or an upper bound of them such as
    :meth:`~barsweep.pipeline.config.grid.Grid.estimate_valid` gives without enumerating.

    Examples
    --------
    >>> auto_block_size(1_000_000, 26_280, 2)
    125000
    >>> auto_block_size(4_000, 26_280, 2)
    2000
    """
    n_workers = max(1, n_workers)
    spread = -(-n_combos // (n_workers * BLOCKS_PER_WORKER))
    floor = -(-MIN_BLOCK_COMBO_BARS // max(1, n_bars))
    if floor > spread:  # few blocks: a multiple of the workers
        n_blocks = max(n_workers, -(-n_combos // floor) // n_workers * n_workers)
        floor = -(-n_combos // n_blocks)
    return int(max(1, min(max(spread, floor), MAX_BLOCK_COMBOS, n_combos)))


def store_coords(spec: Spec, symbol_bars: tuple[int, ...]) -> dict:
    """Coordinates of the store beyond its dims: ``n_bars`` over ``symbol`` (the bars
    each symbol's runs cover) and, with PBO segments, ``seg_n`` over ``(symbol,
    segment)`` (the bars of each segment, as the kernels cut them)."""
    coords = {"n_bars": (("symbol",), np.asarray(symbol_bars, dtype=np.int64))}
    n_segs = spec.analysis.pbo_segments
    if n_segs and spec.walk_forward is None:
        seg_n = [np.diff(segment_bounds(0, n, n_segs), axis=1)[:, 0] for n in symbol_bars]
        coords["seg_n"] = (("symbol", "segment"), np.asarray(seg_n, dtype=np.int64))
    return coords


def plan(spec: Spec, out: str, block_size: int,
         grid: Grid | None = None, backend: str = "cpu", prints: dict | None = None,
         run_id: str = "", store_id: str = "", windows: np.ndarray | None = None) -> Plan:
    """Cut the spec's grid into blocks (block = Dask task = Zarr chunk) for every symbol.

    ``block_size`` is the combos per block, resolved (the spec's ``auto`` is
    :func:`auto_block_size`'s, which :func:`run_prepared` applies); ``grid`` is
    ``build_grid(spec)`` by default; ``backend`` is the resolved
    one (``cpu`` or ``cuda``). ``prints`` is the bars' fingerprint: workers check the
    files they see against it (and GPU workers key their device copy of the bars on it);
    ``run_id`` names the Dask datasets of bars shipped to workers that cannot read them,
    and ``store_id`` is the results store's id (workers write only that store).
    ``windows`` (walk-forward: ``(W, 4)`` train and test bounds) makes a block of each
    box and group of :func:`windows_per_block` windows: their train and test runs (the
    indicators hoisted once for all), the store's ``window``/``sample`` dims.

    The grid is never enumerated: each block is decided by interval bounds and counted
    by :meth:`~barsweep.pipeline.config.grid.Grid.block_counts` within a fixed budget, so
    planning a 10^9-combo grid takes about a second and memory in proportion to the
    number of blocks (``benchmarks/plan_size.py``).
    """
    grid = grid if grid is not None else build_grid(spec)
    chunks = grid.chunks(block_size)
    per_symbol = grid.n_blocks(chunks)
    execution = spec.execution
    if spec.data.year_days is None:
        raise ValueError("plan() takes a prepared spec: data.year_days is measured from the "
                         "bars by prepare_run")
    ppy = periods_per_year(spec.data.timeframe, spec.data.year_days)
    counts, exact = grid.block_counts(chunks)
    per_axis = [-(-n // c) for n, c in zip(grid.shape, chunks, strict=True)]
    pieces = [[((name, values[i * c:(i + 1) * c]), slice(i * c, min((i + 1) * c, len(values))))
               for i in range(k)]  # each axis's chunks once, shared by every block
              for (name, values), c, k in zip(grid.axes, chunks, per_axis, strict=True)]
    boxes = []  # (block id within a symbol, axes slices, region slices, combos kept)
    block_combos = counts.tolist()
    for b in counts.nonzero()[0].tolist():
        position, rest = [], b
        for k in reversed(per_axis):
            rest, i = divmod(rest, k)
            position.append(i)
        chosen = [axis[i] for axis, i in zip(pieces, reversed(position), strict=True)]
        boxes.append((b, tuple(a for a, _ in chosen), tuple(sl for _, sl in chosen),
                      block_combos[b]))
    empty = (counts == 0).nonzero()[0].tolist()
    tasks, task_combos, excluded = [], [], []
    modules = tuple(spec.modules)
    files = (prints or {}).get("files", [{}] * len(spec.data.symbols))
    if windows is None:
        groups = [(slice(0, 0), None)]
    else:
        step = windows_per_block(len(windows), math.prod(chunks))
        groups = [(slice(w, min(w + step, len(windows))), tuple(
            span for a, b, c, d in windows[w:w + step].tolist() for span in ((a, b), (c, d))))
            for w in range(0, len(windows), step)]
    segments = spec.analysis.pbo_segments if windows is None else 0
    for s, symbol in enumerate(spec.data.symbols):
        bars = BarsRef(spec.data.store, symbol, spec.data.timeframe,
                       to_ns(spec.data.start, "data.start"), to_ns(spec.data.end, "data.end"),
                       (prints or {}).get("blake2b", ""), files[s].get("blake2b", ""),
                       f"barsweep-bars-{run_id}-{s}" if run_id else "")
        for g, (group, span) in enumerate(groups):
            first = (s * len(groups) + g) * per_symbol  # block ids: symbol, windows, box
            lead = (slice(s, s + 1),) if span is None else (
                slice(s, s + 1), group, slice(0, 2))
            for b, axes, slices, n_valid in boxes:
                tasks.append(BlockTask(first + b, out, bars, spec.strategy, axes,
                                       (*lead, *slices), grid.constraints, execution, ppy,
                                       modules, backend=backend, store_id=store_id,
                                       spans=span, segments=segments))
                task_combos.append(n_valid)
            excluded.extend(first + b for b in empty)
    n_blocks = per_symbol * len(spec.data.symbols) * len(groups)
    return Plan(grid, chunks, n_blocks, tuple(tasks),
                tuple(excluded), sum(task_combos), bool(exact.all()), tuple(task_combos))


def execute(client: Client, tasks: tuple[BlockTask, ...],
            on_done: Callable[[BlockReport], None] | None = None, *,
            worker_timeout: float = 60.0,
            on_workers: Callable[[int, int], None] | None = None,
            ship: Callable[[], object] | None = None) -> list[BlockReport]:
    """Run every block as one Dask task; return their reports in completion order.

    Task keys are unique to this call, so two runs sharing a scheduler never attach to
    each other's tasks. A task that raises is retried ``RETRIES`` times (a worker that
    dies is covered by the scheduler's own ``allowed-failures``); a block that still
    fails stops the run with :class:`RunError` naming the block and the cause, and the
    other blocks are cancelled (a running block sees it and does not write). When no
    worker is connected for ``worker_timeout`` seconds the run stops too.
    ``on_workers`` hears the number of connected workers (and of their threads) as it
    changes.

    A block whose worker returns its metrics (it cannot write the store) is written
    here. A block that failed because its worker could not read the bars
    (:class:`~barsweep.pipeline.run.shipping.BarsUnavailable`: a worker that joined after
    the bars were shipped) is run again, up to ``RETRIES`` times, after ``ship()``.
    """
    run_id = uuid.uuid4().hex[:12]
    futures = []
    for where, group in itertools.groupby(tasks, key=block_annotations):
        group = list(group)
        with dask.annotate(**where):  # the dashboard's task info: symbol (and window)
            futures += client.map(run_block, group, key=[block_key(t, run_id) for t in group],
                                  pure=False, retries=RETRIES)
    task_of = {future.key: task for future, task in zip(futures, tasks)}
    again = {}  # block id -> times run again for want of bars
    # results are fetched as each task ends and its future released at once: a worker
    # that dies later then holds no result that Dask would recompute (rewriting a block)
    pending = as_completed(futures, with_results=True)
    running = {future.key: future for future in futures}
    del futures
    reports: list[BlockReport] = []
    watch = WorkerWatch(client, worker_timeout, on_workers)
    try:
        while not pending.is_empty():
            batch = pending.next_batch(block=False) if pending.has_ready() else []
            for future, report in batch:
                running.pop(future.key, None)
                task = task_of.pop(future.key)
                if not isinstance(report, BlockReport):  # how it failed
                    n = again.get(task.block_id, 0)
                    if ship is None or n >= RETRIES or not lacks_bars(report):
                        raise block_failure(task, report, client)
                    ship()
                    again[task.block_id] = n + 1
                    with dask.annotate(**block_annotations(task)):
                        retry = client.submit(run_block, task, pure=False, retries=RETRIES,
                                              key=f"{block_key(task, run_id)}-{n}")
                    task_of[retry.key], running[retry.key] = task, retry
                    pending.add(retry)
                    continue
                if report.metrics is not None:  # its worker cannot write the store
                    write_block(task.out, task.region, report.metrics, task.block_id)
                    report = dataclasses.replace(report, metrics=None,
                                                 written_by_driver=True)
                reports.append(report)
                if on_done is not None:
                    on_done(report)
            del batch
            watch.check()
            time.sleep(POLL_S)
    except BaseException:
        client.cancel(list(running.values()))
        raise
    return reports


#: A walk-forward block runs at most this many combos x runs (two per window): its
#: metrics then take at most MAX_BLOCK_RUNS x 18 x 8 B (150 MB), as a plain block's.
MAX_BLOCK_RUNS = 1 << 20


def windows_per_block(n_windows: int, box_combos: int) -> int:
    """Walk-forward windows per block: all of them where the block's combos x train and
    test runs stay within :data:`MAX_BLOCK_RUNS` (one block then hoists the indicators
    once and writes once for every window), fewer for large boxes.

    >>> windows_per_block(15, 36), windows_per_block(15, 100_000)
    (15, 5)
    """
    return max(1, min(n_windows, MAX_BLOCK_RUNS // max(1, 2 * box_combos)))


def block_key(task: BlockTask, run_id: str) -> str:
    """The Dask key of a block: ``sweep-<strategy>-<block id>-<run id>``, whose prefix
    (``dask.utils.key_split``: the hyphenated words before the first number) names the
    phase and the strategy on the dashboard, e.g. ``sweep-ema-cross``. A word of 8
    letters that begins with a-f would read as a hex token there and end the prefix, so
    it is capitalised (``sweep-Donchian``)."""
    words = [w.capitalize() if len(w) == 8 and w[0] in "abcdef" else w
             for w in task.strategy.replace("_", "-").split("-") if w]
    words = [w for w in words if w.isalpha()]  # what key_split keeps
    return "-".join(["sweep", *words, str(task.block_id), run_id])


def block_annotations(task: BlockTask) -> dict:
    """What the dashboard shows of a block besides its key: its symbol, and its
    walk-forward windows (``"0-14"``) when it has some."""
    where = {"symbol": task.bars.symbol}
    if task.spans is not None:
        where["windows"] = f"{task.region[1].start}-{task.region[1].stop - 1}"
    return where


def lacks_bars(failure) -> bool:
    """Whether a failed task's ``(type, exception, traceback)`` says its worker could
    not read the bars."""
    return isinstance(failure, tuple) and isinstance(failure[1], BarsUnavailable)


#: Retries of a task that raised (a corrupt file, a full disk) before the run fails.
RETRIES = 2
POLL_S = 0.05


class WorkerWatch:
    """Counts the workers a run has (and their threads), and stops it when none is there
    for ``timeout`` s; ``on_change(workers, threads)`` hears the counts as they change."""

    def __init__(self, client: Client, timeout: float,
                 on_change: Callable[[int, int], None] | None = None) -> None:
        self.client, self.timeout, self.on_change = client, timeout, on_change
        self.n_workers = -1
        self.alone_since: float | None = None
        self.next_look = 0.0

    def check(self) -> None:
        now = time.monotonic()
        if now < self.next_look:
            return
        self.next_look = now + 1.0
        workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        n = len(workers)
        if n != self.n_workers:
            self.n_workers = n
            if self.on_change is not None:
                self.on_change(n, sum(w.get("nthreads", 1) for w in workers.values()))
        if n:
            self.alone_since = None
        elif self.alone_since is None:
            self.alone_since = now
        elif now - self.alone_since > self.timeout:
            raise RunError(no_workers_message(self.client, self.timeout))


def no_workers_message(client: Client, timeout: float) -> str:
    address = client.scheduler.address if client.scheduler else "the scheduler"
    return (f"no Dask worker connected to {address} for {timeout:g} s "
            f"(run.worker_timeout, --worker-timeout): start workers with "
            f"`dask worker {address}`, or raise the timeout")


def block_failure(task: BlockTask, failure, client: Client) -> RunError:
    """The one-line error of a block that failed for good: ``failure`` is what
    ``as_completed(with_results=True)`` gives for it (an ``(type, exception, traceback)``
    tuple when it raised, a CancelledError when the scheduler went away)."""
    exc = failure[1] if isinstance(failure, tuple) and len(failure) == 3 else failure
    where = describe_block(task)
    if isinstance(exc, CancelledError | asyncio.CancelledError):
        address = client.scheduler.address if client.scheduler else "the scheduler"
        return RunError(f"lost the Dask scheduler at {address} while block {task.block_id} "
                        f"({where}) was pending")
    if type(exc).__name__ == "KilledWorker":
        cause = (f"it was running on {task_allowed_failures()} workers that died "
                 f"(out of memory, or killed); see the workers' logs")
    elif isinstance(exc, BarsweepError):
        cause = str(exc)
    else:
        cause = f"{type(exc).__name__}: {exc}"
    return RunError(f"block {task.block_id} ({where}) failed after {RETRIES} retries: "
                    f"{' '.join(cause.split())}")


def task_allowed_failures() -> int:
    import dask

    return int(dask.config.get("distributed.scheduler.allowed-failures", 3)) + 1


def describe_block(task: BlockTask) -> str:
    """``BTCUSDT, fast 2..10, slow 10..120``: where a block lies in the grid."""
    parts = [task.bars.symbol]
    for name, values in task.axes:
        lo, hi = values[0].item(), values[-1].item()
        parts.append(f"{name} {lo}" if len(values) == 1 else f"{name} {lo}..{hi}")
    return ", ".join(parts)


def run_sweep(spec: Spec, client: Client, *, out: str | None = None, progress: bool = True,
              overwrite: bool = False, resume: bool = False) -> RunSummary:
    """Run a whole sweep on ``client`` and leave the results in a Zarr store.

    ``out`` (default ``spec.run.out``) must be new, or an earlier results store with
    ``overwrite`` (replaced) or ``resume`` (its missing blocks are computed).
    """
    prepared = prepare_run(spec, out=out, overwrite=overwrite, resume=resume)
    return run_prepared(prepared, client, progress=progress)


def run_prepared(prepared: Prepared, client: Client, *, progress: bool = True,
                 on_start: Callable[[str], None] | None = None,
                 cluster: tuple[str, str] | None = None, locked: bool = False) -> RunSummary:
    """Run a :func:`prepare_run` checked sweep on ``client``: make (or reopen) the store,
    compute every pending block, then mark the store complete. The store is locked for
    the run (:func:`~barsweep.pipeline.run.results.out_lock`): a second run is refused.
    ``locked``: the caller holds that lock already, taken before :func:`prepare_run`
    (as ``barsweep run`` does, so that a second run is refused before any work).
    ``cluster``: what ``client`` is and why (store attributes ``cluster`` and
    ``cluster_reason``); default: the scheduler's address, "a client given"."""
    cluster = cluster or (client.scheduler.address, "a client given")
    if locked:
        with shipped_modules(client, prepared.spec):
            return _run_locked(prepared, client, progress, on_start, cluster)
    with out_lock(prepared.out) as cleared, shipped_modules(client, prepared.spec):
        for line in cleared:
            if on_start is not None:
                on_start(line)
        if cleared:  # an earlier store put back since prepare_run checked the path
            check_out(prepared.out, overwrite=prepared.overwrite,
                      resume=prepared.resume_chunks is not None)
        return _run_locked(prepared, client, progress, on_start, cluster)


def _run_locked(prepared: Prepared, client: Client, progress: bool,
                on_start: Callable[[str], None] | None, cluster: tuple[str, str]
                ) -> RunSummary:
    t0 = time.perf_counter()
    spec, out, grid = prepared.spec, prepared.out, prepared.grid
    wait_for_workers(client, spec.run.worker_timeout)
    backend, backend_reason = resolve_backend(spec.run.backend, client)
    if prepared.resume_chunks is not None:
        block_size = math.prod(prepared.resume_chunks)
        stored = (store_attrs(out) or {}).get("backend")
        if stored and stored != backend:
            raise ResultsError(f"--resume: {out} was computed on {stored}, this run would use "
                               f"{backend} ({backend_reason}); pass --backend {stored}")
    else:
        block_size = spec.run.block_size
        if block_size == "auto":
            workers = client.scheduler_info(n_workers=-1).get("workers", {}).values()
            n_workers = max(1, sum(w.get("nthreads", 1) for w in workers))  # threads
            block_size = auto_block_size(prepared.valid_combos, prepared.n_bars, n_workers)
    run_id = uuid.uuid4().hex[:12]
    store_id = ((store_attrs(out) or {}).get("store_id", "") if prepared.resume_chunks
                is not None else uuid.uuid4().hex)
    the_plan = plan(spec, out, block_size, grid, backend, prepared.prints, run_id, store_id,
                    prepared.windows)
    if prepared.resume_chunks is not None:
        if the_plan.chunks != prepared.resume_chunks:  # pragma: no cover - a planning bug
            raise ResultsError(f"--resume: {out} has blocks of {prepared.resume_chunks}, "
                               f"this run plans {the_plan.chunks}")
        done = done_flags(out)  # read under the lock: no other run writes them now
        if len(done) != the_plan.n_blocks:  # e.g. walk-forward blocks of another release
            raise ResultsError(f"--resume: {out} has {len(done)} blocks, this run plans "
                               f"{the_plan.n_blocks}; use --overwrite to start again")
        todo = tuple(t for t in the_plan.tasks if done[t.block_id] == PENDING)
        skipped = len(the_plan.tasks) - len(todo)
        if on_start is not None:
            on_start(f"resuming {out}: {skipped} of {len(the_plan.tasks)} blocks already "
                     f"done, {len(todo)} to compute")
    else:
        attrs = {
            "store_id": store_id,
            "spec": spec.to_yaml(),
            "spec_path": prepared.spec_path or "",
            "barsweep_version": __version__,
            "bars_fingerprint": json.dumps(prepared.prints),
            "backend": backend,
            "backend_requested": spec.run.backend,
            "backend_reason": backend_reason,
            "cluster": cluster[0],
            "cluster_reason": cluster[1],
            "metrics": json.dumps(list(METRICS)),
            "n_combos": the_plan.n_combos,  # exact once complete; maybe a bound until then
            "n_combos_exact": the_plan.n_combos_exact,
            "periods_per_year": periods_per_year(spec.data.timeframe, spec.data.year_days),
            "annualised": prepared.annualised,
        }
        windows = prepared.windows
        create_store(out, spec.data.symbols, the_plan.grid.axes, the_plan.chunks,
                     the_plan.n_blocks, attrs, excluded=the_plan.excluded,
                     segments=spec.analysis.pbo_segments if windows is None else 0,
                     coords={**store_coords(spec, prepared.symbol_bars),
                             **(prepared.window_times or {})},
                     lead=() if windows is None else (
                         ("window", np.arange(len(windows)),
                          windows_per_block(len(windows), math.prod(the_plan.chunks))),
                         ("sample", np.array(["train", "test"], dtype=object), 2)))
        todo, skipped = the_plan.tasks, 0
    shipper = BarsShipper(client, dict.fromkeys(t.bars for t in the_plan.tasks))
    try:
        shipped = shipper.ensure() if todo else None
        if shipped and on_start is not None:
            on_start(shipped)
        compiling = bool(todo) and the_plan.tasks[0].backend == "cpu" and not kernel_cached(
            spec.strategy)
        if compiling and on_start is not None:
            on_start(f"compiling the {spec.strategy} kernel: once on this machine (numba "
                     f"caches it; `barsweep warm` does it ahead of time)")
        t_warm = time.perf_counter()
        warm_up(client, todo)
        t_plan = time.perf_counter()
        if compiling and on_start is not None:
            on_start(f"compiled in {t_plan - t_warm:.1f} s")
        combos_of = dict(zip((t.block_id for t in the_plan.tasks), the_plan.task_combos))
        todo_ids = {t.block_id for t in todo}
        bar = ProgressBar(len(todo), sum(combos_of[b] for b in todo_ids),
                          every_s=spec.run.progress_every) if progress and todo else None
        try:
            reports = execute(client, todo, bar.update if bar else None,
                              worker_timeout=spec.run.worker_timeout,
                              on_workers=bar.workers if bar else None, ship=shipper.ensure)
        finally:
            if bar:
                bar.close()
    finally:
        shipper.close()
    t_done = time.perf_counter()
    n_combos = sum(r.n_combos for r in reports) + sum(  # exact: the plan's may be a bound
        c for b, c in combos_of.items() if b not in todo_ids)
    finish_store(out, {"timings_s": {
        "plan_and_create": round(t_plan - t0, 4),
        "compute_and_write": round(t_done - t_plan, 4),
        "task_seconds_sum": round(sum(r.seconds for r in reports), 4),
        "total": round(t_done - t0, 4),
    }, "block_phases_s": phase_summary(reports), "blocks_resumed": skipped, "n_combos": n_combos,
        "bars_shipped_to": sorted(shipper.shipped_to),
        "blocks_written_by_driver": sum(r.written_by_driver for r in reports),
        "n_combos_exact": the_plan.n_combos_exact or not skipped})
    combo_bars = sum(r.n_combos * r.n_bars for r in reports)
    return RunSummary(out, n_combos, len(the_plan.tasks), combo_bars,
                      t_done - t_plan, backend, skipped)


@contextlib.contextmanager
def shipped_modules(client: Client, spec: Spec):
    """The spec's strategy modules found in its ``module_dir`` on every worker of
    ``client`` for the run, those that join later too (a
    :class:`~barsweep.pipeline.run.shipping.ModuleShipper` registered, then removed);
    RunError naming the problem when a worker cannot take them."""
    modules = module_shipper(spec)
    if modules is None:
        yield
        return
    try:
        client.register_plugin(modules)
    except Exception as exc:
        raise RunError(f"could not ship the strategy modules {', '.join(modules.tops)} "
                       f"({modules.root}) to the workers: "
                       f"{' '.join(str(exc).split()) or type(exc).__name__}") from None
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # the scheduler is gone: nothing to undo
            client.unregister_worker_plugin(modules.name)


def kernel_cached(name: str) -> bool:
    """Whether this machine's numba cache holds strategy ``name``'s kernel (True when it
    cannot tell: then nothing is said about compiling)."""
    from ...engine.strategies import get_strategy
    from ...engine.warm import is_compiled

    try:
        return is_compiled(get_strategy(name))
    except Exception:  # a strategy this driver cannot build: its workers will say
        return True


def wait_for_workers(client: Client, timeout: float) -> None:
    """Return once the cluster has a worker; RunError after ``timeout`` seconds without."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (TimeoutError, OSError):
        raise RunError(no_workers_message(client, timeout)) from None


def warm_up(client: Client, tasks: tuple[BlockTask, ...]) -> None:
    """Load (or compile) the kernel once per cluster, not once per task: one worker
    compiles it into numba's on-disk cache, then every worker loads it in parallel.

    CUDA kernels are built in memory (not cached on disk), so on ``cuda`` every worker
    compiles its own, all at once.
    """
    if not tasks:
        return
    head = bars_head(tasks[0].bars)
    workers = list(client.scheduler_info(n_workers=-1).get("workers", {}))
    if workers and tasks[0].backend != "cuda":
        first = client.submit(warm_block, tasks[0], head, workers=workers[:1],
                              allow_other_workers=True, pure=False, retries=RETRIES)
        try:
            first.result()
        except Exception as exc:  # a worker lost mid-compile is retried by Dask itself
            raise RunError(f"preparing the kernel on a worker failed: "
                           f"{' '.join(str(exc).split()) or type(exc).__name__}") from None
    # every worker loads it now rather than in its first block; one that fails (or dies
    # meanwhile) simply loads it then, and reports any real problem through its block
    client.run(warm_block, tasks[0], head, on_error="ignore")


def bars_head(ref: BarsRef, n_bars: int = 64) -> dict:
    """The first bars of ``ref``, read on the driver: what a worker compiles the kernel
    on (:func:`~barsweep.pipeline.run.blocks.warm_block`), whether or not it can read the
    store."""
    arrays = mapped_arrays(ref.store, ref.symbol, ref.timeframe, ref.start_ns, ref.end_ns)
    return {name: values[:n_bars].copy() for name, values in arrays.items()}


def phase_summary(reports: list[BlockReport]) -> dict:
    """Per phase of a block (``open_bars``, ``indicators``, ``kernel``, ``write``; the
    GPU's stages on ``cuda``): the total seconds over the blocks and the 50th, 90th and
    100th percentiles of one block's, for the report and the store's attributes."""
    phases: dict[str, list[float]] = {}
    for report in reports:
        for name, seconds in report.phases.items():
            phases.setdefault(name, []).append(seconds)
    return {name: {"total": round(float(np.sum(s)), 6),
                   **{f"p{q}": round(float(np.percentile(s, q)), 6) for q in (50, 90, 100)}}
            for name, s in phases.items()}
