"""The CUDA kernels compile for a real GPU (PTX for compute capability 9.0), without one.

``ptx_compile.py`` runs in its own process (it answers numba's one question to a device
with 9.0). The [test] extra installs numba-cuda and the NVVM/NVRTC wheels it needs.
"""

import json
import subprocess
import sys
from pathlib import Path

from helpers.gpu_cases import PARAMS

from barsweep.engine.gpu.hoist import DEVICE_INDICATORS

HERE = Path(__file__).resolve().parent


def test_every_kernel_compiles_to_ptx():
    proc = subprocess.run([sys.executable, str(HERE / "ptx_compile.py")], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    report = json.loads(next(line[4:] for line in proc.stdout.splitlines()
                             if line.startswith("PTX ")))
    expected = set(PARAMS) | {f"hoist_{k}" for k in DEVICE_INDICATORS}  # every builtin + custom
    assert set(report) == expected
    for name, entry in report.items():
        assert entry["ptx_chars"] > 10_000, name
    # NVVM fuses multiply-adds (no fastmath needed): why a GPU is held to 1e-9, not 1e-12
    assert report["ema_cross"]["fma"] > 0
