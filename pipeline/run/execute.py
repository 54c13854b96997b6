"""Blocks on a Dask cluster: the backend the workers can run, the kernel warmed once per
cluster, every block submitted as one task, its failures retried or reported in one line,
and the strategy modules shipped to the workers.

:func:`execute` knows nothing of specs or stores beyond the tasks it is given; the
sequence of a whole run is :mod:`barsweep.pipeline.run.orchestrate`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import time
import uuid
from collections.abc import Callable
from concurrent.futures import CancelledError

import dask
from distributed import Client, as_completed
from distributed.protocol.pickle import dumps

from ...datasets import mapped_arrays
from ...engine.backend import process_gpu
from ...errors import BackendError, BarsweepError, RunError
from ..config.model import Spec
from .accounts import BarsRef
from .blocks import BlockReport, BlockTask, run_block, warm_block
from .results import write_block
from .shipping import BarsUnavailable, module_shipper


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
    limit = graph_bytes()
    for where, group in itertools.groupby(tasks, key=block_annotations):
        for batch in batches(group, limit):
            with dask.annotate(**where):  # the dashboard's task info: symbol (and window)
                futures += client.map(run_block, batch,
                                      key=[block_key(t, run_id) for t in batch],
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
                    write_block(task.out, task.region, report.metrics, task.block_id,
                                task.cells)
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


def graph_bytes() -> int:
    """The most bytes of tasks :func:`execute` sends the scheduler in one graph: a
    quarter of distributed's ``admin.large-graph-warning-threshold`` (10 MB by
    default), below which it does not warn "Sending large graph"; the rest is headroom
    for the keys and annotations."""
    from dask.utils import parse_bytes

    return parse_bytes(dask.config.get("distributed.admin.large-graph-warning-threshold")) // 4


def batches(tasks, limit: int):
    """``tasks`` in consecutive lists of at most ``limit`` pickled bytes each (a task
    larger than ``limit`` alone): a search's first rung carries each drawn combo's
    parameter values, megabytes in all, which one graph would send the scheduler at
    once."""
    batch, size = [], 0
    for task in tasks:
        n = len(dumps(task))  # as distributed pickles it
        if batch and size + n > limit:
            yield batch
            batch, size = [], 0
        batch.append(task)
        size += n
    if batch:
        yield batch


def block_key(task: BlockTask, run_id: str) -> str:
    """The Dask key of a block: ``sweep-<strategy>-<block id>-<run id>``, whose prefix
    (``dask.utils.key_split``: the hyphenated words before the first number) names the
    phase and the strategy on the dashboard, e.g. ``sweep-ema-cross``. A word of 8
    letters that begins with a-f would read as a hex token there and end the prefix, so
    it is capitalised (``sweep-Donchian``)."""
    words = [w.capitalize() if len(w) == 8 and w[0] in "abcdef" else w
             for w in strategy_label(task.strategy).replace("_", "-").split("-") if w]
    words = [w for w in words if w.isalpha()]  # what key_split keeps
    return "-".join(["sweep", *words, str(task.block_id), run_id])


def block_annotations(task: BlockTask) -> dict:
    """What the dashboard shows of a block besides its key: its symbol, and its
    walk-forward windows (``"0-14"``) when it has some."""
    where = {"symbol": task.account.label}
    if task.rung >= 0:
        where["rung"] = task.rung
    if len(task.lead) > 1:
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
    parts = [task.account.label]
    for name, values in task.axes:
        lo, hi = values[0].item(), values[-1].item()
        parts.append(f"{name} {lo}" if len(values) == 1 else f"{name} {lo}..{hi}")
    return ", ".join(parts)


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


def strategy_label(strategy) -> str:
    """A task's strategy by name: a registered name, or a compiled Strategy's."""
    return strategy if isinstance(strategy, str) else strategy.name


def kernel_cached(strategy, portfolio: bool = False) -> bool:
    """Whether this machine's numba cache holds the kernel of ``strategy`` (a registered
    name or a Strategy) that the blocks run: its sweep kernel, or with ``portfolio`` its
    portfolio kernel (True when it cannot tell: then nothing is said about compiling)."""
    from ...engine.strategies import resolve
    from ...engine.warm import is_compiled, portfolio_compiled

    try:
        resolved = resolve(strategy)
        return portfolio_compiled(resolved) if portfolio else is_compiled(resolved)
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
