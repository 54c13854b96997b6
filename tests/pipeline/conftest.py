"""What the pipeline's tests share: a small results store on disk, and a scheduler and
worker started by hand."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers.processes import WITHOUT_PYTHONPATH, stop

from barsweep.engine import METRICS
from barsweep.pipeline.run.results import create_store, write_block


@pytest.fixture
def small_store(tmp_path):
    """A two-symbol store (fast x slow, 3 x 2) with random metrics: one combo NaN, the best
    sharpe at (B, 4, 20), the lowest volatility at (B, 3, 20); ``(path, metrics)``."""
    path = str(tmp_path / "r.zarr")
    axes = [("fast", np.array([2, 3, 4])), ("slow", np.array([10, 20]))]
    create_store(path, ["A", "B"], axes, (3, 2), 2, {"spec": "test"})
    rng = np.random.default_rng(0)
    metrics = rng.normal(size=(len(METRICS), 2, 3, 2))
    metrics[METRICS.index("ruined")] = 0.0  # none went bankrupt
    metrics[METRICS.index("n_trades")] = 5.0  # all traded
    metrics[:, 0, 0, 0] = np.nan            # an excluded combo
    metrics[3, 1, 2, 1] = 99.0              # the best sharpe
    metrics[2, 1, 1, 1] = -99.0             # the lowest volatility
    for s in range(2):
        write_block(path, (slice(s, s + 1), slice(0, 3), slice(0, 2)), metrics[:, s:s + 1], s)
    return path, metrics


@pytest.fixture
def hand_started(tmp_path):
    """``start(hide=(), env={})``: a `dask scheduler` and one `dask worker` started by
    hand, as on another machine: in an unrelated folder, without PYTHONPATH (``env``
    added), this checkout's Python; with ``hide``, the worker runs in a mount namespace of
    its own with a tmpfs over each of those folders. Returns the scheduler's address;
    everything is stopped at the end."""
    procs = []
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def start(hide=(), env=None) -> str:
        env = {**WITHOUT_PYTHONPATH, **(env or {})}
        info = elsewhere / "scheduler.json"
        dask = [sys.executable, "-m", "dask"]
        procs.append(subprocess.Popen(
            [*dask, "scheduler", "--scheduler-file", str(info), "--host", "127.0.0.1",
             "--port", "0", "--dashboard-address", "127.0.0.1:0"], cwd=elsewhere, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
        worker = [*dask, "worker", "--scheduler-file", str(info), "--nthreads", "1",
                  "--host", "127.0.0.1"]
        if hide:
            steps = [f"mount -t tmpfs tmpfs {shlex.quote(str(d))}" for d in hide]
            worker = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                      " && ".join([*steps, "exec " + shlex.join(worker)])]
        log = (tmp_path / "worker.log").open("w")
        procs.append(subprocess.Popen(worker, cwd=elsewhere, env=env, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True))
        t0 = time.monotonic()
        while not info.exists():
            assert time.monotonic() - t0 < 60, "no scheduler file after 60 s"
            time.sleep(0.05)
        time.sleep(0.2)  # written whole
        return json.loads(info.read_text())["address"]

    try:
        yield start
    finally:
        for proc in reversed(procs):
            stop(proc)
