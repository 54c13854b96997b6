"""The one-line run leaves out asyncio's report of a timeout nobody waited for."""

import subprocess
import sys

import pytest

LOST = """
import asyncio, gc, logging
logging.basicConfig(level=logging.WARNING, format="%(message)s")
if {quiet}:
    from barsweep.pipeline.run.orchestrate import quiet_client_logs
    quiet_client_logs()
loop = asyncio.new_event_loop()
future = loop.create_future()
future.set_exception({exc})
del future
gc.collect()
loop.close()
"""


def stderr_of(quiet: bool, exc: str) -> str:
    code = LOST.format(quiet=quiet, exc=exc)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stderr


@pytest.mark.parametrize("exc", ["TimeoutError('Timeout')",
                                 "__import__('distributed').comm.core.CommClosedError()"])
def test_a_lost_timeout_is_not_said(exc):
    assert "never retrieved" in stderr_of(False, exc)  # asyncio says it without the filter
    assert stderr_of(True, exc) == ""


def test_any_other_lost_exception_is_still_said():
    assert "ValueError: kept" in stderr_of(True, "ValueError('kept')")
