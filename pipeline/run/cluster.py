"""Clusters: turn the spec's friendly ``cluster`` value into a Dask client.

``auto`` (the default) is ``threads`` for a small sweep and ``local`` for a large one
(:func:`choose`); ``threads`` starts one Dask worker inside this process, a thread per
core and no dashboard, which costs milliseconds where a process cluster costs seconds
(the kernels release the GIL; each task still limits its kernel to one thread);
``local`` starts a ``LocalCluster`` of processes with one thread each (each task
limits the kernels to one thread, see ``engine.backend.limit_threads``, so cores are not
oversubscribed), over TLS with a key made for the run (``cluster.security``:
``temporary``, the default, or ``plain``), its dashboard bound to 127.0.0.1 unless
``cluster.dashboard`` says otherwise; ``cuda`` starts dask-cuda's ``LocalCUDACluster``
(the ``[cuda]`` extra), with the same TLS;
``slurm`` and ``pbs`` submit batch jobs of workers through dask-jobqueue (the ``[hpc]``
extra); ``scheduler`` reaches a running scheduler, over TLS with ``cluster.security``.
docs/deploy.md has the recipes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from distributed import Client, LocalCluster, Nanny, Worker, WorkerPlugin
from distributed.security import Security

from ...engine.backend import cuda_problem_here
from ...errors import BackendError, one_line
from ..config.cluster import STARTED_HERE, ClusterSpec, check_address
from .dashboard import install_on, origins_kept_to_localhost
from .internals import gc_diagnosis_off, logging_disabled_level, start_resource_tracker

CONNECT_TIMEOUT_S = 10
#: Where a ``threads`` run asked for a dashboard (``--dashboard``) serves it: this
#: machine only (a busy port: distributed takes another, and the link says which).
THREADS_DASHBOARD = "127.0.0.1:8787"
#: Where a ``threads`` cluster without a dashboard binds its scheduler's HTTP server,
#: which distributed starts whatever the dashboard (its /health and /metrics routes)
#: and, given no address, binds to port 8787 on every interface: a port the system
#: picks, on this machine only.
THREADS_NO_DASHBOARD = "127.0.0.1:0"
#: ``auto`` runs a sweep of at most this many combo-bars (combos x bars each runs, all
#: symbols and walk-forward runs counted) on threads of this process: about 15-30 s of
#: kernel on two cores, where starting worker processes (2-4 s, each loading the
#: kernel) would cost more than their isolation and dashboard are worth.
THREADS_MAX_COMBO_BARS = 5e9


class LoopbackWorker(Worker):
    """A ``threads`` cluster's worker: distributed's ``Worker``, its HTTP server (the
    /health and /metrics routes a worker serves whatever the dashboard) bound to a port
    the system picks on this machine only, where an in-process worker given no address
    listens on every interface. (``LocalCluster``'s ``worker_dashboard_address`` would
    bind it so too, but it also starts the worker's Bokeh pages: a second's import.)"""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **{**kwargs, "dashboard_address": THREADS_NO_DASHBOARD})


def choose(cluster: ClusterSpec, combo_bars: float,
           backend: str = "cpu") -> tuple[ClusterSpec, str]:
    """The cluster to start for ``cluster`` and a sweep of ``combo_bars`` on ``backend``
    (``run.backend``), and why: ``auto`` becomes ``threads`` up to
    :data:`THREADS_MAX_COMBO_BARS` on the CPU, else ``local`` (also wherever the run may
    use a GPU: one process per GPU); any other kind is kept, as asked.

    >>> choose(ClusterSpec(), 1e8)[0].kind
    'threads'
    >>> choose(ClusterSpec(), 1e12)[1]
    'auto: 1e+12 combo-bars, over 5e+09: worker processes'
    """
    if cluster.kind != "auto":
        return cluster, f"{cluster.kind}: as the spec or --cluster asks"
    if backend == "cuda" or (backend == "auto" and cuda_problem_here() is None):
        return cluster.model_copy(update={"kind": "local"}), (
            f"auto: worker processes, since run.backend {backend} may use a GPU")
    small = combo_bars <= THREADS_MAX_COMBO_BARS
    kind = "threads" if small else "local"
    return cluster.model_copy(update={"kind": kind}), (
        f"auto: {combo_bars:.3g} combo-bars, {'at most' if small else 'over'} "
        f"{THREADS_MAX_COMBO_BARS:.3g}: "
        f"{'threads of this process' if small else 'worker processes'}")


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def security_of(cluster: ClusterSpec) -> Security | None:
    """Dask's ``Security`` for ``cluster``, encryption required. A running scheduler's
    (``scheduler``): this client's TLS files (``cluster.security``; None without them:
    Dask's own configuration then applies). A cluster started here (``local``, ``cuda``,
    ``auto``): a key and self-signed certificate made now for this run
    (``Security.temporary``), for the scheduler, its workers and this client alike,
    held in memory; None when ``security`` is ``plain`` (TCP), and for ``threads`` (in
    this process: no connection to secure).
    """
    tls = cluster.security
    if cluster.kind in STARTED_HERE:
        if cluster.kind == "threads" or not cluster.encrypted_here:
            return None
        return Security.temporary()  # encryption required
    if tls is None:
        return None
    return Security(tls_ca_file=tls.ca, tls_client_cert=tls.cert, tls_client_key=tls.key,
                    require_encryption=True)


@contextmanager
def connect(cluster: ClusterSpec | str = "local", n_workers: int | None = None,
            dashboard: bool = False) -> Iterator[Client]:
    """A Dask client for the run, closed (with any cluster it started) on exit. A
    cluster started here has the ``/barsweep`` page on its dashboard
    (:mod:`~barsweep.pipeline.run.dashboard`), whose live updates (Bokeh's websockets,
    its workers' pages' too) answer only pages the dashboard served itself
    (:func:`~barsweep.pipeline.run.dashboard.keep_origins`).

    Parameters
    ----------
    cluster : ClusterSpec or str
        The spec's ``cluster`` (a bare ``"local"``, ``"threads"``, ``"cuda"``, ``"slurm"``,
        ``"pbs"`` or address is read as the spec would); ``auto`` starts ``local`` (pass
        the result of :func:`choose` to size it to the work).
    n_workers : int, optional
        Workers of a cluster started here (local, cuda); default one per core (per GPU).
    dashboard : bool
        Serve the dashboard of a ``threads`` cluster too (from this process, on
        127.0.0.1); other clusters started here always serve one.
    """
    if isinstance(cluster, str):
        cluster = ClusterSpec.model_validate(cluster)
    if cluster.kind == "scheduler":
        with reach(cluster) as client:
            yield client
        return
    disabled = logging_disabled_level()
    try:
        with ExitStack() as stack:
            stack.enter_context(logs_kept())
            stack.enter_context(environment_kept())
            with stop_signals_kept_from_workers(processes=cluster.kind != "threads"):
                with origins_kept_to_localhost(), warnings.catch_warnings():
                    # a busy dashboard port: distributed picks another (the printed link
                    # shows it) and warns in four lines; the run need not
                    warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
                    started = stack.enter_context(start_cluster(cluster, n_workers, dashboard))
                stack.push(workers_closed_in_time(started))  # after the client, before it
                client = stack.enter_context(Client(started, security=started.security))
                install_on(client, own_origins_only=True)
                if cluster.kind in ("auto", "threads", "local", "cuda"):
                    client.register_plugin(LeaveCtrlCToTheDriver(), name="barsweep-ctrl-c")
                # the scheduler (and a threads worker) here hook distributed's GC
                # diagnosis into every garbage collection, where Python swallows a
                # KeyboardInterrupt ("Exception ignored in ... _gc_callback"): a Ctrl-C
                # or SIGTERM landing there was lost. It only times collections for a log.
                gc_diagnosis_off()
            try:
                yield client
            except KeyboardInterrupt:
                # closing a cluster under Ctrl-C logs lost fetches and workers slow to
                # stop: not news; the caller says in one line what is done
                logging.disable(logging.ERROR)
                raise
    except KeyboardInterrupt:
        logging.disable(logging.ERROR)  # stopped as the cluster started: same
        raise
    finally:
        logging.disable(disabled)


#: The loggers a run quiets in this process, its own and a threads worker's (levels and
#: filters: :class:`LeaveCtrlCToTheDriver`, :func:`quiet_memory_logs`,
#: :func:`quiet_cut_handshakes`), given back as found when its cluster closes.
QUIETED = ("distributed.worker", "distributed.worker.state_machine",
           "distributed.worker.memory", "distributed.nanny.memory", "distributed.comm.tcp")


@contextmanager
def logs_kept(names: tuple[str, ...] = QUIETED) -> Iterator[None]:
    """Run the body, then give the loggers ``names`` back their levels and filters as
    they were: a run from a notebook leaves the notebook's own Dask logs as it found
    them."""
    saved = [(lg, lg.level, list(lg.filters)) for lg in map(logging.getLogger, names)]
    try:
        yield
    finally:
        for lg, level, filters in saved:
            lg.setLevel(level)
            for added in [f for f in lg.filters if f not in filters]:
                lg.removeFilter(added)
            for lost in [f for f in filters if f not in lg.filters]:
                lg.addFilter(lost)


@contextmanager
def environment_kept() -> Iterator[None]:
    """Run the body, then give ``os.environ`` back the values it had: distributed's
    nannies set the variables their workers start with (``OMP_NUM_THREADS=1``,
    ``PYTHONHASHSEED``, ``MALLOC_TRIM_THRESHOLD_``...) in the process that starts them,
    and leave them there; a notebook's later processes would inherit them."""
    before = dict(os.environ)
    try:
        yield
    finally:
        for name in [n for n in os.environ if n not in before]:
            del os.environ[name]
        os.environ.update({n: v for n, v in before.items() if os.environ.get(n) != v})


def start_cluster(cluster: ClusterSpec, n_workers: int | None, dashboard: bool = False):
    """The Dask cluster :func:`connect` starts for ``cluster`` (not a ``scheduler``); a
    ``threads`` one serves a dashboard (on 127.0.0.1) only with ``dashboard``. A
    ``local`` or ``cuda`` one speaks TLS with credentials made for it unless
    ``cluster.security`` is ``plain`` (:func:`security_of`)."""
    if cluster.kind == "cuda":
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError as exc:
            raise BackendError(
                "cluster: 'cuda' needs dask-cuda; install barsweep with the [cuda] extra"
            ) from exc
        return LocalCUDACluster(n_workers=n_workers, dashboard_address=cluster.dashboard,
                                security=security_of(cluster))
    if cluster.kind in ("slurm", "pbs"):
        cm = jobqueue_cluster(cluster)
        cm.scale(jobs=cluster.jobs)
        return cm
    if cluster.kind == "threads":
        return LocalCluster(n_workers=1, threads_per_worker=n_workers or default_workers(),
                            processes=False, worker_class=LoopbackWorker,
                            dashboard_address=THREADS_DASHBOARD if dashboard else None,
                            scheduler_kwargs=None if dashboard else {
                                "dashboard_address": THREADS_NO_DASHBOARD})
    quiet_cut_handshakes()  # its scheduler listens here: a stop cuts handshakes short
    return LocalCluster(
        n_workers=n_workers or default_workers(),
        threads_per_worker=1,
        processes=True,
        dashboard_address=cluster.dashboard,
        security=security_of(cluster),
    )


#: Seconds a worker process of a cluster started here has to exit once its run is done
#: before its nanny kills it. distributed's own close gives it 4 s, which a worker that
#: ran numba kernels can pass while it tears down on a busy machine: the nanny then
#: logs "Worker process still alive after 4.0 seconds, killing" under a finished run.
WORKER_EXIT_S = 30.0


def workers_closed_in_time(cluster, timeout: float = WORKER_EXIT_S):
    """An exit callback (for ``ExitStack.push``) that, when the run ended normally,
    closes ``cluster``'s worker processes through their nannies with ``timeout`` seconds
    to exit before the cluster itself closes (a worker that exits sooner is not waited
    for); after an exception (a failed run, Ctrl-C) the cluster closes as distributed
    does, killing what has not exited after 4 s."""

    def close(exc_type, exc, tb) -> bool:
        nannies = [w for w in getattr(cluster, "workers", {}).values() if isinstance(w, Nanny)]
        if exc_type is None and nannies:
            cluster.sync(_close_nannies, nannies, timeout)
        return False

    return close


async def _close_nannies(nannies: list, timeout: float) -> None:
    await asyncio.gather(*(nanny.close(timeout=timeout, reason="barsweep-run-done")
                           for nanny in nannies))


#: The signals a terminal (Ctrl-C) or a supervisor (``timeout``, systemd, SLURM,
#: Kubernetes: SIGTERM) sends to every process of a run; the driver alone handles them.
STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextmanager
def stop_signals_kept_from_workers(processes: bool = True) -> Iterator[None]:
    """Block :data:`STOP_SIGNALS` in this (the main) thread while a cluster starts, so
    that the threads it starts (Dask's event loop, the nannies' process watchers) inherit
    the block, and so do the worker processes they fork (a signal mask survives fork and
    exec): Ctrl-C or a SIGTERM sent to the run's process group then reaches the driver
    alone, from the workers' first instant to their last (restarted ones included), and
    the driver stops them (the nannies ask them to close, then SIGKILL; a worker whose
    driver died exits by itself). A signal that arrives meanwhile is delivered here once
    the cluster is up and held for closing. Outside the main thread (which handles no
    signals) nothing is changed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # multiprocessing starts its resource tracker with the first process, unblocking
    # SIGINT and SIGTERM in the thread that starts it: started here first, it does not
    # (a threads cluster starts no process, and no tracker)
    if processes:
        start_resource_tracker()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextmanager
def reach(cluster: ClusterSpec) -> Iterator[Client]:
    """A client of the running scheduler at ``cluster.address`` (TLS with
    ``cluster.security``); BackendError in one line when it cannot be reached."""
    address = check_address(str(cluster.address), "cluster.address")
    security = security_of(cluster)
    # without certificates (here or in Dask's configuration) distributed fails a tls://
    # connection with a TypeError about a missing ssl_context
    if address.startswith("tls://") and (
            security or Security()).get_connection_args("client")["ssl_context"] is None:
        raise BackendError(
            f"{address} is a TLS address but no TLS files were given: pass --tls-ca, "
            f"--tls-cert and --tls-key, or give cluster.security {{ca, cert, key}} in the spec")
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT_S, security=security)
    except (OSError, TimeoutError) as err:
        reason = one_line(err)
        if "SSL" in reason or "certificate" in reason.lower():
            raise BackendError(f"cannot reach the Dask scheduler at {address}: the TLS "
                               f"handshake failed ({reason}); are the TLS files the "
                               f"cluster's?") from None
        raise BackendError(
            f"cannot reach the Dask scheduler at {address} within {CONNECT_TIMEOUT_S} s "
            f"({reason}); is it running, is the address right"
            f"{', and are the TLS files its' if cluster.security else ''}?") from None
    with client:
        yield client


def jobqueue_cluster(cluster: ClusterSpec):
    """A dask-jobqueue ``SLURMCluster`` or ``PBSCluster`` for ``cluster`` (no job is
    submitted until it is scaled): each job runs ``cores`` single-threaded workers that
    share ``memory``, with this Python (``sys.executable``: a shared virtual environment),
    and the dashboard where ``cluster.dashboard`` says."""
    try:
        import dask_jobqueue
    except ImportError as exc:
        raise BackendError(f"cluster kind {cluster.kind!r} needs dask-jobqueue; install "
                           f"barsweep with the [hpc] extra") from exc
    kind = {"slurm": dask_jobqueue.SLURMCluster, "pbs": dask_jobqueue.PBSCluster}[cluster.kind]
    tls = cluster.security
    # the scheduler starts here and the workers in the jobs: each role needs the
    # certificate (a client-only Security leaves the scheduler without one: it cannot start)
    security = None if tls is None else Security(
        tls_ca_file=tls.ca, require_encryption=True,
        **{f"tls_{role}_{part}": path for role in ("client", "scheduler", "worker")
           for part, path in (("cert", tls.cert), ("key", tls.key))})
    return kind(
        cores=cluster.cores,
        processes=cluster.cores,  # one thread per worker, as in a local cluster
        memory=cluster.memory,
        walltime=cluster.walltime,
        queue=cluster.queue,
        account=cluster.account,
        interface=cluster.interface,
        job_extra_directives=list(cluster.job_directives),
        job_script_prologue=["export DASK_LOGGING__DISTRIBUTED=warning"],
        scheduler_options={"dashboard_address": cluster.dashboard},
        security=security,
    )


class LeaveCtrlCToTheDriver(WorkerPlugin):
    """On the workers of a cluster barsweep starts: stay quiet about tasks cancelled as
    the run stops and about failed tasks (the driver reports them).

    Ctrl-C and SIGTERM do not reach these workers at all (they start with both blocked,
    :func:`stop_signals_kept_from_workers`): the driver alone handles them, cancels the
    run and closes the cluster, which stops the workers. Clusters barsweep only connects
    to keep their own signal handling and logging.
    """

    def setup(self, worker) -> None:
        import logging

        # a task cancelled by Ctrl-C or a failed block logs a warning as the worker closes
        logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)
        logging.getLogger("distributed.worker").addFilter(_not_for_people)
        quiet_memory_logs()
        quiet_cut_handshakes()


#: What a worker of a cluster barsweep starts logs that the driver says better: a failed
#: block (the driver names block and cause in one line), and a heartbeat cut off as the
#: driver closes the cluster (the worker's connections close under the heartbeat in
#: flight; distributed logs that as an error, with tracebacks).
_WORKER_NOISE = ("Compute Failed", "Failed to communicate with scheduler during heartbeat")


def quiet_cut_handshakes() -> None:
    """A TLS handshake cut off (a process of the run stopped while it connected, as at
    Ctrl-C) is logged by distributed as a warning of its listener: dropped in this
    process (the run says why it stopped, in one line)."""
    tcp = logging.getLogger("distributed.comm.tcp")
    if _handshake_cut not in tcp.filters:
        tcp.addFilter(_handshake_cut)


def _handshake_cut(record) -> bool:
    """A logging filter: False for "TLS handshake failed" records."""
    return "TLS handshake failed" not in str(record.msg)


def quiet_memory_logs() -> None:
    """Dask's memory warnings ("Unmanaged memory use is high", "Pausing worker", "Memory
    use is high but worker has no data to store to disk") are for Dask's operators, not
    for a progress line: silenced in this process; a nanny restarting a worker that
    passed its memory limit says so in one line of ours (:func:`_memory_in_our_words`).
    """
    logging.getLogger("distributed.worker.memory").setLevel(logging.ERROR)
    nanny = logging.getLogger("distributed.nanny.memory")
    if _memory_in_our_words not in nanny.filters:
        nanny.addFilter(_memory_in_our_words)


def _memory_in_our_words(record) -> bool:
    """A logging filter: a worker restarted for memory, said in one line of ours; the
    nanny's other lines about it dropped."""
    if "exceeded" not in str(record.msg):
        return False
    record.msg, record.args = (
        "barsweep: a worker ran out of memory and is restarted (its block is retried); "
        "set run.memory_per_block lower or give the workers more memory", ())
    return True


def _not_for_people(record) -> bool:
    """A logging filter: False for :data:`_WORKER_NOISE` records."""
    return not str(record.msg).startswith(_WORKER_NOISE)
