"""The first run of a strategy on a machine says that it compiles, for how long, and
that it happens once; `barsweep warm` compiles ahead of time. Real processes with an
empty numba cache of their own."""

import os
import subprocess
import sys

import pytest
import yaml
from helpers.runs import synth

from barsweep.engine import get_strategy
from barsweep.engine.strategies import strategy_names
from barsweep.engine.warm import warm_params

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-m", "barsweep.pipeline.cli"]


@pytest.mark.parametrize("name", [n for n in strategy_names() if not n.startswith("_")])
def test_warm_params_are_valid(name):
    strategy = get_strategy(name)
    params = warm_params(strategy)
    assert set(params) == set(strategy.param_names)
    strategy.validate({k: v[0] for k, v in params.items()})


def test_first_run_says_it_compiles_once_and_warm_compiles_ahead(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    bars = synth(tmp_path / "bars", 500, seed=1)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "data": {"store": str(bars), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "buy_and_hold", "run": {"out": str(tmp_path / "r.zarr")}}))

    def barsweep(*args):
        done = subprocess.run([*CLI, *args], env=env, capture_output=True, text=True,
                              timeout=600, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout

    first = barsweep("run", str(spec), "--no-progress").splitlines()
    assert first.pop(0) == ("annualised with 8,760 bars a year, from the bars (bars on every "
                            "day: 365 days of bars); set data.year_days to override")
    assert first[0] == ("compiling the buy_and_hold kernel: once on this machine (numba "
                        "caches it; `barsweep warm` does it ahead of time)")
    assert first[1].startswith("compiled in ")  # on the driver, before any cluster
    assert first[2] == ("auto: 500 combo-bars, at most 5e+09: threads of this process; no "
                        "dashboard (--dashboard serves one)")
    assert not any(line.startswith(("compiling", "compiled")) for line in first[2:])
    assert barsweep("warm", "buy_and_hold").startswith("buy_and_hold: loaded from the cache")
    again = barsweep("run", str(spec), "--no-progress", "--overwrite")
    assert "compiling" not in again and "compiled in" not in again
    assert barsweep("warm", "sma_cross").startswith("sma_cross: compiled in ")


def test_a_portfolio_says_which_kernel_compiles_when_it_does(tmp_path):
    """A portfolio run compiles its portfolio kernel (not the single-symbol one its
    blocks never run), said before it starts and timed after; `plot best`, `trades` and
    `report` say on stderr, before it, that the recording kernels compile, the first time
    only. Real processes with an empty numba cache of their own."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    bars = tmp_path / "bars"
    for k, symbol in enumerate(("AAA", "BBB")):
        synth(bars, 400, seed=k + 3, symbol=symbol)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "data": {"store": str(bars), "symbols": ["AAA", "BBB"], "timeframe": "1h"},
        "strategy": "buy_and_hold", "portfolio": {"symbols": ["AAA", "BBB"]},
        "execution": {"fill": "close"}, "run": {"out": str(tmp_path / "r.zarr")}}))

    def barsweep(*args):
        done = subprocess.run([*CLI, *args], env=env, capture_output=True, text=True,
                              timeout=600, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done

    first = barsweep("run", str(spec), "--no-progress").stdout.splitlines()
    said = [line for line in first if line.startswith(("compiling", "compiled"))]
    assert said[0] == ("compiling the buy_and_hold portfolio kernel: once on this machine, "
                       "for any number of members (numba caches it)")
    assert said[1].startswith("compiled in ") and len(said) == 2, first
    again = barsweep("run", str(spec), "--no-progress", "--overwrite").stdout
    assert "compiling" not in again and "compiled in" not in again
    note = ("barsweep: compiling the recording portfolio kernel of buy_and_hold (first use "
            "on this machine, cached after) ...")
    done = barsweep("plot", "best", "r.zarr", "--out", "best.png")
    assert done.stderr.splitlines() == [note] and done.stdout == "wrote best.png\n"
    for args in (("plot", "best", "r.zarr", "--out", "best.png"), ("trades", "r.zarr"),
                 ("report", "r.zarr", "--out", "r.html")):
        assert barsweep(*args).stderr == "", args
