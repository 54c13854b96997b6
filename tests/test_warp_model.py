"""benchmarks/warp_model.py runs on a small grid: its replay agrees with sweep_block's trade
counts (it exits otherwise) and its table holds lane efficiencies a model can give."""

import subprocess
import sys
from pathlib import Path

MODEL = Path(__file__).resolve().parents[1] / "benchmarks" / "warp_model.py"


def test_the_warp_model_replays_the_kernels_trades_and_prints_its_table():
    proc = subprocess.run([sys.executable, str(MODEL), "--sizes", "4000", "--warps", "8"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = [[c.strip() for c in line.strip("|").split("|")]
            for line in proc.stdout.splitlines() if line.startswith("| 4,000")]
    designs = {(r[2], r[3]): float(r[4]) for r in rows}
    assert set(designs) == {(order, design) for order in ("locality", "lanes")
                            for design in ("(a) own pace", "(b) warp-synchronous")}
    for order in ("locality", "lanes"):
        own, synchronous = designs[order, "(a) own pace"], designs[order, "(b) warp-synchronous"]
        assert 0 < own <= synchronous <= 1, designs
