"""The exit status of a handled stop under ``python -m``.

A KeyboardInterrupt that leaves code run by ``exec()`` of a string sets CPython's
"unhandled KeyboardInterrupt" flag even when a caller catches it; under ``python -m`` the
interpreter then kills itself with SIGINT at exit (status -2), after barsweep printed its
one line and chose 130. That is how a Ctrl-C landing while dataclasses, numba or Dask
generate code ended a run (1 try in ~15 on a loaded machine).
:func:`barsweep.pipeline.cli.stop_handled` clears the flag.
"""

import subprocess
import sys

import pytest

MODULE = """
import os, signal, sys
from barsweep.pipeline.cli import stop_handled
try:
    exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nfor _ in range(10**7): pass")
except KeyboardInterrupt:
    print("caught", file=sys.stderr)
sys.exit(stop_handled(130) if sys.argv[1:] == ["handled"] else 130)
"""


@pytest.mark.parametrize(("args", "status"), [([], -2), (["handled"], 130)])
def test_a_stop_caught_after_exec_exits_with_its_own_status(tmp_path, args, status):
    """Without :func:`stop_handled`, the interpreter ends itself by SIGINT (-2): the
    mechanism is real on this Python; with it, the status is the one chosen."""
    (tmp_path / "stopper.py").write_text(MODULE)
    done = subprocess.run([sys.executable, "-m", "stopper", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.stderr.strip() == "caught"
    assert done.returncode == status
