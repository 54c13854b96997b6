"""The ema_cross CUDA sweep kernel fits 128 registers per thread for sm_90, without spills.

``ptx_registers.py`` (its own process: it answers numba's one question to a device with
9.0) lowers the kernel to PTX with the launch bounds ``barsweep.engine.gpu.sweep`` builds it
with, and assembles it with the toolkit wheel's ``ptxas -v --gpu-name sm_90``. At 128
registers 16 warps fit on a multiprocessor (65,536 registers); above, 12 or fewer.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.ptx import parse

from barsweep.engine.gpu import sweep as gpu

HERE = Path(__file__).resolve().parent
MAX_REGISTERS = 128


@pytest.fixture(scope="module")
def report() -> dict:
    proc = subprocess.run([sys.executable, str(HERE / "ptx_registers.py"), "ema_cross"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return json.loads(next(line[10:] for line in proc.stdout.splitlines()
                           if line.startswith("REGISTERS ")))["ema_cross"]


def test_ema_cross_kernel_fits_128_registers_without_spills(report):
    assert 0 < report["registers"] <= MAX_REGISTERS, report
    assert report["spill_stores"] == 0 and report["spill_loads"] == 0, report
    assert report["functions"] >= 1, report


def test_launch_bounds_allow_the_register_count():
    # the bounds ptxas is given: one block of THREADS_PER_BLOCK, MIN_BLOCKS_PER_SM of them
    # on an SM's 65,536 registers, at MAX_REGISTERS each
    assert gpu.THREADS_PER_BLOCK * gpu.MIN_BLOCKS_PER_SM * MAX_REGISTERS <= 65_536
    blocks, threads = gpu.launch_shape(10_000)
    assert threads == gpu.THREADS_PER_BLOCK and blocks >= 1


def test_parse_reads_ptxas_report():
    log = ("ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
           "ptxas info    : Function properties for k\n"
           "    8 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads\n"
           "ptxas info    : Used 128 registers, used 0 barriers\n"
           "ptxas info    : Function properties for __internal_accurate_pow\n"
           "    0 bytes stack frame, 0 bytes spill stores, 4 bytes spill loads\n")
    assert parse(log) == {"registers": 128, "stack": 8, "spill_stores": 40,
                          "spill_loads": 40, "functions": 2}
