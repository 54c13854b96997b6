"""What the whole suite shares: the ``requires_*`` markers, `dask` processes started by
hand, and the order in which ``pytest -n 2`` (pytest-xdist, in the addopts) hands out the
test files.

Markers (registered in pyproject.toml), each a skip with the reason and the fix:

- ``requires_unshare``: `unshare -m` works here (root or CAP_SYS_ADMIN), to hide files
  from a worker in a mount namespace of its own;
- ``requires_jobqueue``: dask-jobqueue is installed (the ``[hpc]`` extra).

Under ``CI=true`` (``.ci/run`` sets it) a skip is a failure: there every oracle (TA-Lib,
vectorbt, bokeh_sampledata, matplotlib, Chromium) is installed, and a broken install must
not pass as a green run without them. Skips stay for developer machines.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shlex
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.processes import DASK, scheduler_address, stop


def pytest_configure(config: pytest.Config) -> None:
    # A shell without job control starts a background command (`pytest ... &`) with
    # SIGINT ignored, and every process started from it inherits that: the tests that
    # press Ctrl-C on a `barsweep run` would see it ignored. A terminal's default here.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# --------------------------------------------------------------------------- markers


@functools.cache
def can_unshare() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# marker -> (is it met here?, why a test is skipped when it is not)
REQUIREMENTS: dict[str, tuple[Callable[[], bool], str]] = {
    "requires_unshare": (can_unshare, "needs `unshare -m` (root or CAP_SYS_ADMIN) to hide "
                                      "files from a worker in its own mount namespace"),
    "requires_jobqueue": (lambda: importlib.util.find_spec("dask_jobqueue") is not None,
                          "needs dask-jobqueue: pip install '.[hpc]'"),
}


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers():
        if marker.name in REQUIREMENTS:
            met, reason = REQUIREMENTS[marker.name]
            if not met():
                pytest.skip(reason)


# --------------------------------------------------------------------------- CI: no skips


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def _skips_fail_in_ci(report) -> None:
    if report.skipped and in_ci() and not hasattr(report, "wasxfail"):
        reason = report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (f"skipped under CI=true, where every oracle and tool the suite "
                           f"uses must be installed: {reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _skips_fail_in_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield  # a module-level importorskip skips the whole file here
    _skips_fail_in_ci(outcome.get_result())


# --------------------------------------------------------------------------- xdist order

# The longest files, alone on 2 cores with warm caches (`pytest --durations`): under
# xdist (`--dist loadfile`: a file's tests, and so its module-scoped fixtures, in one
# worker) they start first, so that no worker is left running one of them at the end.
LONGEST_FIRST = (
    "tests/pipeline/test_faults.py",  # ~120 s: real clusters, SIGKILLs, resumed runs
    "tests/gpu/test_cuda_sim.py",  # ~50 s: the CUDA simulator, in processes of its own
    "tests/gpu/test_cuda_ptx.py",  # ~40 s: every kernel through NVVM
    "tests/gpu/test_gpu_check.py",  # ~40 s: benchmarks/gpu_check.sh --simulate end to end
    "tests/engine/test_kernel_cache.py",  # ~35 s: an engine copied and compiled cold
    "tests/engine/test_vectorbt_directions.py",  # ~33 s: vectorbt compiles its simulators
    "tests/pipeline/test_end_to_end.py",  # ~30 s
    "tests/pipeline/test_cluster_data.py",  # ~28 s
    "tests/pipeline/test_cluster_security.py",  # ~25 s
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker: collection order
        return
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


# --------------------------------------------------------------------------- dask by hand


@pytest.fixture(scope="session")
def start_scheduler():
    """``start_scheduler(directory, *flags, cwd=None, log=DEVNULL, logged=str)``: a
    `dask scheduler` on 127.0.0.1 (ports chosen by the system) writing
    ``directory/scheduler.json``, started as on another machine, in a session of its own,
    its output to the file ``log``; returns its process and its address once it listens
    (failing with ``logged()`` if it does not). The caller stops it."""

    def start(directory: Path, *flags: str, cwd: Path | None = None, log=subprocess.DEVNULL,
              logged: Callable[[], str] = lambda: "") -> tuple[subprocess.Popen, str]:
        info = directory / "scheduler.json"
        proc = subprocess.Popen(
            [DASK, "scheduler", "--scheduler-file", str(info), "--host", "127.0.0.1",
             "--port", "0", "--dashboard-address", "127.0.0.1:0", *flags],
            cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return proc, scheduler_address(info, proc, logged=logged)
        except BaseException:
            stop(proc)
            raise

    return start


@pytest.fixture
def dask_scheduler(tmp_path, start_scheduler):
    """A plain-TCP `dask scheduler` started by hand on 127.0.0.1; yields (address,
    add_worker), all stopped (SIGKILL) at the end.

    ``add_worker(*flags, cwd=tmp_path, hide=(), then="")`` starts one single-threaded
    `dask worker` in ``cwd``, in a session of its own, and returns its process; with
    ``hide`` it runs in a mount namespace of its own with a tmpfs over each of those
    directories, after the shell commands ``then`` (e.g. to put other files there; needs
    ``requires_unshare``).
    """
    scheduler, address = start_scheduler(tmp_path)
    info = tmp_path / "scheduler.json"
    procs = [scheduler]

    def add_worker(*flags: str, cwd: Path = tmp_path, hide=(), then: str = ""):
        worker = [DASK, "worker", "--scheduler-file", str(info), "--nthreads", "1",
                  "--host", "127.0.0.1", *flags]
        if hide:
            steps = [f"mount -t tmpfs tmpfs {shlex.quote(str(d))}" for d in hide]
            steps += [then] if then else []
            steps.append("exec " + shlex.join(worker))
            worker = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                      " && ".join(steps)]
        procs.append(subprocess.Popen(worker, cwd=cwd, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
        return procs[-1]

    try:
        yield address, add_worker
    finally:
        for proc in reversed(procs):
            stop(proc)
