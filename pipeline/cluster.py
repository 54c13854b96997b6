"""Clusters: turn the spec's friendly ``cluster`` value into a Dask client.

``local`` starts a ``LocalCluster`` of processes with one thread each (each task
limits numba to one thread, see ``blocks.limit_threads``, so cores are not
oversubscribed), its dashboard bound to 127.0.0.1; ``cuda`` starts dask-cuda's
``LocalCUDACluster`` (the ``[cuda]`` extra); any other value is the address of a running
scheduler.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from distributed import Client, LocalCluster, WorkerPlugin

from barsweep.errors import BackendError

DASHBOARD = "127.0.0.1:8787"
CONNECT_TIMEOUT_S = 10
_ADDRESS = re.compile(r"^(tcp|tls|ucx|ws|wss|inproc)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+)"
                      r"(:\d{1,5})?(/\S*)?$")


def check_address(address: str, what: str) -> str:
    """``address`` if it reads as a Dask scheduler address (``tcp://host:8786``), else
    BackendError naming ``what`` (``--scheduler``, ``cluster``)."""
    if not _ADDRESS.match(address):
        raise BackendError(f"{what}: {address!r} is not a scheduler address; expected "
                           f"e.g. tcp://host:8786 or tls://host:8786")
    return address


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


@contextmanager
def connect(cluster: str = "local", n_workers: int | None = None,
            scheduler: str | None = None) -> Iterator[Client]:
    """A Dask client for the run, closed (with any cluster it started) on exit.

    Parameters
    ----------
    cluster : {"local", "cuda"} or str
        The spec's ``cluster`` value; an address connects to that scheduler.
    n_workers : int, optional
        Workers of a cluster started here; default one per core.
    scheduler : str, optional
        An address (``--scheduler``) that overrides ``cluster``.
    """
    address = scheduler or (cluster if cluster not in ("local", "cuda") else None)
    if address:
        check_address(address, "--scheduler" if scheduler else "cluster")
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as err:
            raise BackendError(
                f"cannot reach the Dask scheduler at {address} within {CONNECT_TIMEOUT_S} s "
                f"({' '.join(str(err).split()) or type(err).__name__}); is it running, and "
                f"is the address right?") from None
        with client:
            yield client
        return
    # a busy dashboard port: distributed picks another (the printed link shows it) and
    # warns in four lines; the run need not
    warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
    if cluster == "cuda":
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError as exc:
            raise BackendError(
                "cluster: 'cuda' needs dask-cuda; install barsweep with the [cuda] extra"
            ) from exc
        cm = LocalCUDACluster(n_workers=n_workers, dashboard_address=DASHBOARD)
    else:
        cm = LocalCluster(
            n_workers=n_workers or default_workers(),
            threads_per_worker=1,
            processes=True,
            dashboard_address=DASHBOARD,
        )
    with cm as local, Client(local) as client:
        client.register_plugin(LeaveCtrlCToTheDriver(), name="barsweep-ctrl-c")
        yield client


class LeaveCtrlCToTheDriver(WorkerPlugin):
    """On the workers of a cluster barsweep starts: ignore SIGINT, and stay quiet about
    tasks cancelled as the run stops and about failed tasks (the driver reports them).

    Ctrl-C in a terminal reaches every process of its group, the worker processes too,
    which would each print a traceback; the driver alone handles it (it cancels the run
    and closes the cluster, which stops the workers). Clusters barsweep only connects to
    keep their own signal handling.
    """

    def setup(self, worker) -> None:
        import logging
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        # a task cancelled by Ctrl-C or a failed block logs a warning as the worker closes
        logging.getLogger("distributed.worker.state_machine").setLevel(logging.ERROR)
        # a failing block is reported by the driver, in one line naming block and cause
        logging.getLogger("distributed.worker").addFilter(_not_compute_failed)


def _not_compute_failed(record) -> bool:
    return not str(record.msg).startswith("Compute Failed")
