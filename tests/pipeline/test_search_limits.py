"""A search refuses what it would not use or could not run, before anything runs: a
halving search whose rung 0 is shorter than the indicators' warm-up, and a ``search``
key its method does not read (``budget`` of a grid: every combo runs). Through the
real CLI on real synthetic bars, in a child process: one line, exit 2, no store."""

import subprocess
import sys

import pytest
import yaml

from barsweep.errors import SpecError
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.model import parse_spec

CLI = [sys.executable, "-m", "barsweep.pipeline.cli"]
#: ema_cross's slowest EMA is 40 bars: 39 NaN bars before its first value.
GRID = {"fast": {"start": 2, "stop": 10, "step": 1}, "slow": {"start": 20, "stop": 40, "step": 1}}


@pytest.fixture(scope="module")
def bars(tmp_path_factory):
    store = tmp_path_factory.mktemp("bars")
    assert main(["data", "synth", "--symbol", "AAA", "--bars", "2000", "--store",
                 str(store)]) == 0
    return store


def write_spec(tmp_path, bars, search, name="s", grid=GRID):
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(yaml.safe_dump({
        "data": {"store": str(bars), "symbols": ["AAA"], "timeframe": "1h"},
        "strategy": "ema_cross", "grid": grid, "constraints": ["fast < slow"],
        "search": search, "run": {"out": str(tmp_path / f"{name}.zarr")}}))
    return spec


def refused(*args) -> str:
    """The one line a CLI child process refuses with (exit 2, no traceback)."""
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_a_halving_search_whose_first_rung_is_shorter_than_the_warm_up_is_refused(
        bars, tmp_path):
    spec = write_spec(tmp_path, bars, {"method": "halving", "budget": 100, "rungs": 12,
                                       "eta": 2})
    for command in ("check", "run"):
        line = refused(command, str(spec), *(["--no-progress"] if command == "run" else []))
        assert "search.rungs" in line and "search.eta" in line, line
        assert "runs 1 bar of the 2,000" in line and "the 39 bars" in line, line
        assert "6 rungs at most" in line and "63 bars" in line, line
    assert not (tmp_path / "s.zarr").exists()


def test_a_rules_lags_count_in_the_first_rungs_warm_up(bars, tmp_path):
    """A lag reads back past the indicators: ``close[k]`` at k = 150 needs 150 bars
    before rung 0's first signal, more than the 125 of rung 0 (2,000 bars, eta 2, 5
    rungs), though its indicator warms up in 19."""
    spec = tmp_path / "lag.yaml"
    spec.write_text(yaml.safe_dump({
        "data": {"store": str(bars), "symbols": ["AAA"], "timeframe": "1h"},
        "strategy": {"name": "lagged", "rule": {"entry": "close > close[k]",
                                                "exit": "close < sma(close, n)"}},
        "grid": {"k": [10, 150], "n": [5, 20]},
        "search": {"method": "halving", "budget": 2, "rungs": 5, "eta": 2},
        "run": {"out": str(tmp_path / "lag.zarr")}}))
    line = refused("check", str(spec))
    assert "runs 125 bars of the 2,000" in line and "the 169 bars" in line, line
    assert "4 rungs at most" in line, line


def test_check_refuses_a_draw_larger_than_the_grid_as_run_does(bars, tmp_path):
    small = {"fast": [2, 3], "slow": [20, 30, 40, 50]}
    spec = write_spec(tmp_path, bars, {"method": "halving", "budget": 16, "rungs": 2,
                                       "eta": 2}, grid=small)
    for command in ("check", "run"):
        line = refused(command, str(spec), *(["--no-progress"] if command == "run" else []))
        assert "the grid holds 8 valid combos, fewer than the 16 the search draws" in line
    assert not (tmp_path / "s.zarr").exists()


def test_a_rule_period_in_the_grid_is_capped_as_in_the_rule(bars, tmp_path):
    spec = tmp_path / "period.yaml"
    spec.write_text(yaml.safe_dump({
        "data": {"store": str(bars), "symbols": ["AAA"], "timeframe": "1h"},
        "strategy": {"name": "long_sma", "rule": {"entry": "close > sma(close, n)",
                                                  "exit": "close < sma(close, n)"}},
        "grid": {"n": [5, 10 ** 18]}, "run": {"out": str(tmp_path / "p.zarr")}}))
    line = refused("check", str(spec))
    assert "grid.n: n must be <= 10,000,000, got 1000000000000000000" in line, line


def test_the_rungs_it_suggests_pass_the_check(bars, tmp_path):
    spec = write_spec(tmp_path, bars, {"method": "halving", "budget": 30, "rungs": 6,
                                       "eta": 2})  # draws 160 of the 189 valid combos
    done = subprocess.run([*CLI, "check", str(spec)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert "in 6 rungs" in done.stdout


@pytest.mark.parametrize(("search", "drawn"), [
    ({"method": "random", "budget": 300, "seed": 2}, "300 combos drawn, searched in each symbol"),
    ({"method": "halving", "budget": 300, "rungs": 3, "eta": 3},
     "900 combos drawn, searched in each symbol in 3 rungs of 900, 300, 100"),
])
def test_check_sizes_what_a_search_evaluates_as_its_run_says(bars, tmp_path, capsys, search,
                                                             drawn):
    box = {**GRID, "stop_loss": {"start": 0.001, "stop": 0.5, "step": 0.00001}}
    spec = write_spec(tmp_path, bars, search, grid=box)
    assert main(["check", str(spec)]) == 0
    checked = capsys.readouterr().out
    assert main(["run", str(spec), "--cluster", "threads", "--no-progress"]) == 0
    said = capsys.readouterr()
    started = next(line for line in (said.out + said.err).splitlines()
                   if " search: " in line and " combos drawn (seed " in line)
    combos = drawn.split()[0]
    assert f"{combos} of the grid's 9,431,289 combos drawn" in started, started
    run_line = next(line for line in checked.splitlines() if line.startswith("  run: "))
    # the check says the run's own words: its combos, store and time (on this machine's
    # cores; a threads cluster has as many threads)
    assert run_line.removeprefix("  run: ") == started.split("; ", 1)[1], (checked, started)
    assert run_line.startswith(f"  run: {combos} combos: ~"), run_line
    assert ("  grid: 9,431,289 combos per symbol, 9,431,289 valid: the space the "
            "search draws from") in checked, checked
    assert f"  search: {search['method']}, seed {search.get('seed', 0)}: {drawn}\n" in checked
    assert "9,431,289 combos:" not in checked, checked


@pytest.mark.parametrize(("search", "key"), [
    ({"method": "grid", "budget": 100}, "search.budget"),
    ({"method": "grid", "seed": 3}, "search.seed"),
    ({"method": "random", "budget": 100, "eta": 2}, "search.eta"),
    ({"method": "sobol", "budget": 100, "rungs": 3}, "search.rungs"),
])
def test_a_search_key_its_method_does_not_use_is_refused(bars, tmp_path, search, key):
    line = refused("check", str(write_spec(tmp_path, bars, search)))
    assert f"{key}: method {search['method']} does not use it" in line, line
    if search["method"] == "grid":
        assert "it runs every combo (" in line, line


def test_keys_every_method_reads_and_defaults_written_out_in_full_pass(bars, tmp_path):
    base = yaml.safe_load(write_spec(tmp_path, bars, {"method": "grid", "by": "sortino"})
                          .read_text())
    spec = parse_spec(base)
    assert parse_spec(spec.to_yaml()).search == spec.search  # budget: null, eta: 3, ...
    with pytest.raises(SpecError, match="search.budget"):
        parse_spec({**base, "search": {"method": "grid", "budget": 100}})
