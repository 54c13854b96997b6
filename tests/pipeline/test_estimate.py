"""A run says its store's size and its time before it starts: the size held to a real
store's bytes on disk, the line to the plan's numbers."""

import re

import pytest
import yaml
from helpers.runs import synth

from barsweep.pipeline.cli import main
from barsweep.pipeline.run.estimate import (
    RATE_PER_WORKER,
    human_bytes,
    human_seconds,
    run_seconds,
    size_line,
    store_bytes,
)

N_BARS = 8000


def disk_bytes(path) -> int:
    """What `du --apparent-size` counts: the bytes of every file under ``path``."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@pytest.mark.parametrize("walk_forward", [None, {"train": 3000, "test": 1000}])
def test_the_said_store_size_is_within_a_factor_2_of_the_real_store(tmp_path, capsys,
                                                                    walk_forward):
    synth(tmp_path / "bars", N_BARS, seed=9)
    spec = {"data": {"store": str(tmp_path / "bars"), "symbols": ["BTCUSDT"],
                     "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": {"fast": {"start": 2, "stop": 80, "step": 1},
                     "slow": {"start": 10, "stop": 200, "step": 1}},
            "constraints": ["fast < slow"],
            "run": {"out": str(tmp_path / "r.zarr")}}
    if walk_forward:  # trading combos with results of their own: little Zstd can share
        spec["walk_forward"] = walk_forward
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    assert main(["run", str(tmp_path / "s.yaml"), "--workers", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out
    said = re.search(r"^([\d,]+) combos: ~([\d.,]+) (kB|MB) store, ~\S+ \S+ on (\d+) "
                     r"workers? \(at 200 M combo-bars/s each\)$", out, re.M)
    assert said, out
    size = float(said[2].replace(",", "")) * {"kB": 1e3, "MB": 1e6}[said[3]]
    real = disk_bytes(tmp_path / "r.zarr")
    assert real / 2 <= size <= 2 * real, (size, real)
    n_valid = sum(f < s for f in range(2, 81) for s in range(10, 201))
    assert said[1] == f"{n_valid:,}"


def test_the_line_of_a_big_grid():
    cells = 312_687_500
    line = size_line(cells, cells, 0, cells * 26_280.0, 2)
    assert line.startswith("312,687,500 combos: ~")
    assert human_bytes(store_bytes(cells, 0)) in line
    assert human_seconds(run_seconds(cells * 26_280.0, 2)) in line
    assert run_seconds(cells * 26_280.0, 2) == cells * 26_280.0 / (2 * RATE_PER_WORKER)
    assert line.endswith("on 2 workers (at 200 M combo-bars/s each)")


def test_sizes_and_times_in_words():
    assert [human_bytes(n) for n in (512, 1.5e3, 1.03e11, 2.5e13)] == [
        "512 B", "1.5 kB", "100 GB", "25 TB"]
    assert [human_seconds(s) for s in (0.2, 90, 14_400, 10**7)] == [
        "0.2 s", "1.5 min", "4 h", "120 days"]
