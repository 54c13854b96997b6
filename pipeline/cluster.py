"""Clusters: turn the spec's friendly ``cluster`` value into a Dask client.

``local`` starts a ``LocalCluster`` of processes with one thread each (each task
limits numba to one thread, see ``blocks.limit_threads``, so cores are not
oversubscribed), its dashboard bound to 127.0.0.1; ``cuda`` starts dask-cuda's
``LocalCUDACluster`` (the ``[cuda]`` extra); any other value is the address of a running
scheduler.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from distributed import Client, LocalCluster

from barsweep.errors import BackendError

DASHBOARD = "127.0.0.1:8787"


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
        with Client(address) as client:
            yield client
        return
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
        yield client
