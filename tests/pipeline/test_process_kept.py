"""``barsweep.sweep()`` from a notebook leaves the process as it found it: warnings
filters, GC callbacks, logging, signal handlers and mask, hooks, environment, working
directory and Dask's configuration, compared before and after each of two sweeps on a
real cluster (threads in this process, and local worker processes over TLS), in a child
interpreter of its own (``process_state.py``)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.runs import synth

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("cluster", ["threads", "local"])
def test_a_sweep_leaves_the_process_as_it_found_it(tmp_path, cluster):
    synth(tmp_path / "bars", 800, seed=3, symbol="AAA")
    done = subprocess.run([sys.executable, str(HERE / "process_state.py"),
                           str(tmp_path / "bars"), cluster, str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    changes = json.loads(done.stdout.strip().splitlines()[-1])
    assert changes == [{}, {}], json.dumps(changes, indent=1)[:4000]
