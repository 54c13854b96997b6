"""Processes the tests start: `dask` schedulers and workers started by hand, as on
another machine, and commands run under a cap on their memory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

#: The `dask` command of this Python.
DASK = str(Path(sys.executable).parent / "dask")

#: This process's environment without PYTHONPATH: a process started with it finds only
#: what is installed, as one started on another machine would.
WITHOUT_PYTHONPATH = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

#: The address space :func:`capped` allows a command.
CAP_BYTES = int(1.75 * 2**30)


def scheduler_address(info: Path, proc: subprocess.Popen, timeout: float = 60.0,
                      logged: Callable[[], str] = lambda: "") -> str:
    """The address in the scheduler file ``info`` once the scheduler ``proc`` has written
    it; fails at once if the scheduler exits first, or after ``timeout`` seconds, showing
    ``logged()`` (its log, where it has one)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if info.exists():
            try:
                return json.loads(info.read_text())["address"]
            except (ValueError, KeyError):  # caught half written
                pass
        if proc.poll() is not None:
            pytest.fail(f"the dask scheduler exited ({proc.returncode}) before writing "
                        f"{info}\n{logged()}")
        time.sleep(0.02)
    pytest.fail(f"no scheduler file after {timeout:g} s\n{logged()}")


def stop(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc`` and its session (a nanny's worker, `unshare`'s child with it)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # all gone already
        pass
    proc.kill()
    proc.wait()


def capped(*argv: str) -> subprocess.CompletedProcess:
    """``argv`` run in a process whose address space is capped at :data:`CAP_BYTES`."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (CAP_BYTES, CAP_BYTES))

    return subprocess.run(argv, preexec_fn=limit, capture_output=True, text=True,
                          timeout=600)
