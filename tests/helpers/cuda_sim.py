"""The CUDA kernels run in numba's CUDA simulator, each in a process of its own (the
simulator must be switched on before numba is imported), and their metrics held to the
CPU kernel's."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from barsweep.engine import METRICS

#: In the simulator the device functions run as plain Python, float64 step by step like
#: the CPU's (no fused multiply-adds): every metric equal to this, relative.
RTOL = 1e-12
SIM_ENV = {"NUMBA_ENABLE_CUDASIM": "1", "NUMBA_DISABLE_JIT": "1"}


def run_simulated(*args: str, timeout: float = 900) -> str:
    """Run ``python *args`` under the CUDA simulator; its stdout (fails with its output)."""
    env = {**os.environ, **SIM_ENV}
    proc = subprocess.run([sys.executable, *args], capture_output=True,
                          text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return proc.stdout


def assert_same_metrics(gpu: np.ndarray, cpu: np.ndarray, rtol: float, label: str) -> None:
    """Identical trade counts and NaN positions; every metric to ``rtol`` relative."""
    assert gpu.shape == cpu.shape, label
    trades = METRICS.index("n_trades")
    np.testing.assert_array_equal(gpu[:, trades], cpu[:, trades], err_msg=label)
    for m, name in enumerate(METRICS):
        np.testing.assert_allclose(gpu[:, m], cpu[:, m], rtol=rtol, atol=1e-300,
                                   equal_nan=True, err_msg=f"{label}: {name}")
