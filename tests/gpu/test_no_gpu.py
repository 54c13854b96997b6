"""Without a GPU (and without the simulator) the CUDA path refuses clearly.

What such a machine does is checked in processes of their own, started without
``NUMBA_ENABLE_CUDASIM`` (numba reads it once, at import): ``cuda_problem()`` says why,
``barsweep run --backend cuda`` stops in one line naming each worker's reason before it
writes anything, and ``--backend auto`` runs on the CPU and records that reason. Where a
CUDA GPU works these tests are skipped.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml

from barsweep.engine import Execution, get_strategy
from barsweep.engine.gpu.sweep import cuda_problem, sweep_cuda
from barsweep.errors import BackendError
from barsweep.pipeline.cli import main

#: The environment of this process without numba's CUDA simulator (nor its no-JIT mode).
NO_SIMULATOR = {k: v for k, v in os.environ.items()
                if k not in ("NUMBA_ENABLE_CUDASIM", "NUMBA_DISABLE_JIT")}
#: The one line ``barsweep run --backend cuda`` prints on a machine without a GPU.
REFUSAL = re.compile(r"barsweep: error: run\.backend: 'cuda' needs a CUDA GPU on every "
                     r"worker: (?P<worker>\S+): (?P<reason>.+)\. Use backend 'cpu' or 'auto'")
PROBE = """
import json
from barsweep.engine.gpu.sweep import cuda_problem, require_cuda
from barsweep.errors import BackendError
try:
    require_cuda()
    refusal = None
except BackendError as exc:
    refusal = str(exc)
print(json.dumps({"problem": cuda_problem(), "refusal": refusal}))
"""


def run_without_simulator(args: list[str], cwd: Path, timeout: float = 300):
    """``python *args`` in ``cwd`` without the simulator: the finished process."""
    return subprocess.run([sys.executable, *args], cwd=cwd, env=NO_SIMULATOR,
                          capture_output=True, text=True, timeout=timeout)


def files_under(path: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``path``: its size and modification time, by relative name."""
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(path.rglob("*"))}


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    """``cuda_problem()`` and ``require_cuda()``'s refusal in a process without the
    simulator; skips the module's no-GPU tests where a CUDA GPU works."""
    proc = run_without_simulator(["-c", PROBE], tmp_path_factory.mktemp("probe"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.splitlines()[-1])
    if found["problem"] is None:
        pytest.skip("a CUDA GPU works here")
    return found


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    """A directory holding a tiny bar store and a spec of four ema_cross combos."""
    path = tmp_path_factory.mktemp("no_gpu")
    assert main(["data", "synth", "--symbol", "X", "--timeframe", "1h", "--bars", "300",
                 "--store", str(path / "bars")]) == 0
    (path / "spec.yaml").write_text(yaml.safe_dump({
        "data": {"store": "bars", "symbols": ["X"], "timeframe": "1h"},
        "strategy": "ema_cross", "grid": {"fast": [3, 5], "slow": [10, 20]}}))
    return path


def barsweep_run(where: Path, out: str, backend: str):
    """``barsweep run spec.yaml`` on a local cluster of one worker, in ``where``."""
    return run_without_simulator(["-m", "barsweep.pipeline.cli", "run", "spec.yaml", "--out",
                                  out, "--backend", backend, "--workers", "1",
                                  "--no-progress"], where)


@pytest.fixture(scope="module")
def cuda_refused(probe, sweep_dir):
    """``barsweep run --backend cuda``: the process, and the files before and after."""
    before = files_under(sweep_dir)
    proc = barsweep_run(sweep_dir, "cuda.zarr", "cuda")
    return proc, before, files_under(sweep_dir)


@pytest.mark.skipif(cuda_problem() is None, reason="a CUDA GPU (or the simulator) is here")
def test_sweep_cuda_without_a_gpu_names_the_problem():
    close = np.linspace(100.0, 120.0, 50)
    bars = dict(open=close, high=close, low=close, close=close)
    with pytest.raises(BackendError, match="backend 'cuda': .*use backend 'cpu' or 'auto'"):
        sweep_cuda(get_strategy("ema_cross"), bars, dict(fast=np.array([3]),
                                                         slow=np.array([10])), Execution(), 252.0)


def test_a_strategy_without_its_signal_and_scan_is_refused_for_the_gpu():
    from dataclasses import replace

    from barsweep.engine.gpu.sweep import strategy_functions
    from barsweep.errors import SpecError

    bare = replace(get_strategy("ema_cross"), signal=None, scan=None)
    with pytest.raises(SpecError, match="Strategy\\(..., signal=signal, scan=scan\\)"):
        strategy_functions(bare)
    # the signal in the 8-argument form the simulation calls, and the strategy's scan
    from barsweep.engine.strategies.kernels import compiled

    ema_cross = get_strategy("ema_cross")
    assert strategy_functions(ema_cross) == (compiled(ema_cross.signal).step, ema_cross.scan)


def test_cuda_problem_names_the_reason_and_require_cuda_refuses_with_it(probe):
    problem = probe["problem"]
    assert isinstance(problem, str)
    assert problem.startswith(("no usable CUDA GPU (", "a CUDA GPU is visible but numba.cuda"))
    assert "\n" not in problem and len(problem) < 300
    assert probe["refusal"] == f"backend 'cuda': {problem}; use backend 'cpu' or 'auto'"


@pytest.mark.slow
def test_cli_backend_cuda_is_refused_in_one_line_naming_the_reason(cuda_refused):
    proc = cuda_refused[0]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    refusal = REFUSAL.match(lines[0].rstrip())
    assert refusal, lines[0]
    assert re.search(r"NVIDIA driver|CUDA", refusal["reason"]), lines[0]
    assert "results in" not in proc.stdout


@pytest.mark.slow
def test_cli_backend_cuda_writes_nothing(cuda_refused, sweep_dir):
    _, before, after = cuda_refused
    assert after == before  # no results store, no lock, no bar touched
    assert not (sweep_dir / "cuda.zarr").exists()


@pytest.mark.slow
def test_cli_backend_auto_runs_on_the_cpu_and_says_why(cuda_refused, sweep_dir):
    refusal = REFUSAL.match(cuda_refused[0].stderr.strip())
    assert refusal, cuda_refused[0].stderr
    proc = barsweep_run(sweep_dir, "auto.zarr", "auto")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^4 combos in \d+ blocks on cpu: ", proc.stdout, re.M), proc.stdout
    attrs = xr.open_zarr(sweep_dir / "auto.zarr", consolidated=False).attrs
    assert attrs["backend"] == "cpu" and attrs["backend_requested"] == "auto"
    # the reason names the worker (a new cluster: another address) and the same problem
    assert re.fullmatch(rf"auto: CPU, since \S+: {re.escape(refusal['reason'])}",
                        attrs["backend_reason"]), attrs["backend_reason"]
