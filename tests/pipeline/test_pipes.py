"""`barsweep ... --json | head`: a reader that closes the pipe early ends the command
quietly, as Unix tools end (exit status 141, nothing on stderr)."""

import subprocess
import sys
from pathlib import Path

import pytest
from helpers.runs import run_spec_file, synth

pytestmark = pytest.mark.slow

BARSWEEP = str(Path(sys.executable).parent / "barsweep")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A sweep's store (1,900 combos) and a walk-forward store (some 200 windows): each
    one's ``--json`` output is far larger than a pipe's buffer (64 KiB)."""
    root = tmp_path_factory.mktemp("pipes")
    bars = synth(root / "bars", 26_280, 3)
    data = {"store": str(bars), "symbols": ["BTCUSDT"], "timeframe": "1h"}
    sweep = run_spec_file({
        "data": data, "strategy": "ema_cross",
        "grid": {"fast": {"start": 2, "stop": 40, "step": 1},
                 "slow": {"start": 10, "stop": 200, "step": 2}},
        "constraints": ["fast < slow"],
        "run": {"out": str(root / "sweep.zarr")},
    }, root / "sweep.yaml")
    wf = run_spec_file({
        "data": data, "strategy": "ema_cross",
        "grid": {"fast": {"start": 5, "stop": 20, "step": 5},
                 "slow": {"start": 40, "stop": 80, "step": 20}},
        "constraints": ["fast < slow"],
        "walk_forward": {"train": "30d", "test": "5d"},
        "run": {"out": str(root / "wf.zarr")},
    }, root / "wf.yaml")
    return sweep, wf


def piped_to_head(command: str, tmp_path: Path) -> tuple[int, str, str]:
    """``command | head -1`` in bash: barsweep's exit status, head's output, stderr."""
    status = tmp_path / "status"
    shell = subprocess.run(
        ["bash", "-c", f"{command} | head -1; echo ${{PIPESTATUS[0]}} > {status}"],
        capture_output=True, text=True, timeout=300)
    return int(status.read_text()), shell.stdout, shell.stderr


@pytest.mark.parametrize("command", ["rank {sweep} --json --top 2000",
                                     "walkforward {wf} --json"])
def test_json_piped_to_head_ends_quietly(stores, tmp_path, command):
    sweep, wf = stores
    line = f"{BARSWEEP} {command.format(sweep=sweep, wf=wf)}"
    full = subprocess.run(line, shell=True, capture_output=True, text=True, timeout=300)
    assert full.returncode == 0 and len(full.stdout) > 256 * 1024, full.stderr
    code, out, err = piped_to_head(line, tmp_path)
    assert out == full.stdout.splitlines(keepends=True)[0]
    assert err == ""  # no Traceback, no BrokenPipeError, no "Exception ignored"
    assert code == 141  # 128 + SIGPIPE: the pipe did close under it
