"""A rule that reads ``volume``, bare, k bars ago and inside an indicator, through the
real command line on bars with a volume column: ``check``, ``run``, ``trades`` and a
portfolio's ``trades``, ``plot best`` and ``report``; every combo's metrics equal to the
slow reference (TA-Lib on the bars, a Python loop: tests/helpers/rule_reference.py). Bars
without volume (imported without the column: NaN) are refused in one line naming the
symbol, before any store exists."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from helpers.compare import assert_metrics_match
from helpers.reference import ref_simulate
from helpers.rule_reference import RuleReference

from barsweep.datasets import open_bars
from barsweep.engine import METRICS
from barsweep.engine.rules import Rule, compile_rule
from barsweep.engine.warm import signal_problem

RULE = {"entry": "volume > sma(volume, n) and volume[1] < volume and close > open",
        "exit": "sma(volume, n) < sma(volume, m) or bars_held >= 5"}
GRID = {"n": [5, 10], "m": [20, 30]}
EXECUTION = {"fill": "next_open", "fees": 0.001}


def barsweep(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "barsweep.pipeline.cli", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=600)


def spec_file(folder: Path, name: str, symbols: list[str], **sections) -> Path:
    spec = {"data": {"store": "bars", "symbols": symbols, "timeframe": "1d"},
            "strategy": {"name": "volume_rule", "rule": RULE}, "grid": GRID,
            "execution": EXECUTION, "run": {"out": f"{name}.zarr"},
            "cluster": "threads", **sections}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("volume")
    for seed, symbol in ((3, "AAA"), (4, "BBB")):
        done = barsweep("data", "synth", "--symbol", symbol, "--timeframe", "1d", "--bars",
                        "500", "--seed", seed, "--store", "bars", cwd=folder)
        assert done.returncode == 0, done.stderr
    return folder


def test_the_compile_check_reads_volume_inside_an_indicator_and_bare():
    """The warm-up bars that ``check`` types and compiles a rule on carry volume."""
    strategy = compile_rule(RULE, {"n": "int", "m": "int"})
    assert signal_problem(strategy) is None


def test_a_volume_rule_runs_through_the_cli_equal_to_the_reference(folder):
    spec = spec_file(folder, "one", ["AAA"])
    for command in (("check", spec), ("run", spec, "--quiet")):
        done = barsweep(*command, cwd=folder)
        assert done.returncode == 0, done.stderr
    bars = open_bars(str(folder / "bars"), "AAA", "1d").isel(symbol=0)
    columns = {c: bars[c].values for c in ("open", "high", "low", "close", "volume")}
    assert np.isfinite(columns["volume"]).all()
    ds = xr.open_zarr(folder / "one.zarr", consolidated=False)
    ppy = float(ds.attrs["periods_per_year"])
    traded = 0
    for n in GRID["n"]:
        for m in GRID["m"]:
            ref = RuleReference(Rule(**RULE), {"n": "int", "m": "int"}, {"n": n, "m": m},
                                columns)
            want, _, trades = ref_simulate(
                list(columns["open"]), list(columns["close"]), high=list(columns["high"]),
                low=list(columns["low"]), ppy=ppy, signal=ref.signal_at, **EXECUTION)
            got = {k: float(ds[k].sel(symbol="AAA", n=n, m=m)) for k in METRICS}
            assert_metrics_match(got, want, where=f"n={n} m={m}")
            traded += len(trades) > 0
    assert traded >= 2, "the comparison must not be of idle runs"
    done = barsweep("trades", "one.zarr", "--rank", "1", cwd=folder)
    assert done.returncode == 0, done.stderr


def test_a_volume_rule_portfolio_rebalanced_is_rebuilt_by_every_reader(folder):
    """``trades``, ``plot best`` and ``report`` rebuild a portfolio combo that rebalances
    (the rebuild reads the bars' times) and whose rule reads volume."""
    spec = spec_file(folder, "book", ["AAA", "BBB"], portfolio={"rebalance": "1M"})
    done = barsweep("run", spec, "--quiet", cwd=folder)
    assert done.returncode == 0, done.stderr
    for command in (("trades", "book.zarr", "--rank", "1"),
                    ("plot", "best", "book.zarr", "--out", "best.png"),
                    ("report", "book.zarr", "--out", "report.html")):
        done = barsweep(*command, cwd=folder)
        assert done.returncode == 0, (command, done.stderr)
    assert (folder / "best.png").stat().st_size > 0
    assert (folder / "report.html").stat().st_size > 0


@pytest.mark.parametrize("command", ["check", "run"])
def test_bars_without_volume_are_refused_naming_the_symbol(folder, command):
    (folder / "novol.csv").write_text(textwrap.dedent("""\
        time,open,high,low,close
        2020-01-01,1,2,0.5,1.5
        2020-01-02,1.5,2,0.5,1
        2020-01-03,1,2,0.5,1.5
        """))
    done = barsweep("data", "import", "novol.csv", "--symbol", "NOVOL", "--timeframe", "1d",
                    "--store", "bars", "--replace", cwd=folder)
    assert done.returncode == 0, done.stderr
    spec = spec_file(folder, f"novol_{command}", ["NOVOL"])
    done = barsweep(command, spec, cwd=folder)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1 and "NOVOL" in lines[0] and "volume" in lines[0], done.stderr
    assert not (folder / f"novol_{command}.zarr").exists()


def test_bare_volume_is_read_by_backtest_equal_to_the_reference():
    """A rule reading volume only bare (no indicator of it) types and runs."""
    from helpers.bars import random_bars

    from barsweep.engine import backtest

    bars = random_bars(400, seed=5)
    bars["volume"] = 1000.0 * np.exp(np.random.default_rng(5).normal(0.0, 0.5, 400))
    rule = Rule("volume > volume[1] * 1.2 and close > open", "volume < volume[2]")
    one = backtest(bars, rule, {}, ppy=252.0, **EXECUTION)
    ref = RuleReference(rule, {}, {}, bars)
    want, equity, trades = ref_simulate(
        list(bars["open"]), list(bars["close"]), high=list(bars["high"]),
        low=list(bars["low"]), ppy=252.0, signal=ref.signal_at, **EXECUTION)
    assert_metrics_match(one.metrics, want, where="bare volume")
    np.testing.assert_allclose(one.equity.to_numpy(), equity, rtol=1e-12)
    assert len(trades) >= 5


def test_backtest_refuses_a_volume_that_is_nan_throughout():
    from helpers.bars import random_bars

    from barsweep.engine import backtest
    from barsweep.errors import SpecError

    bars = random_bars(50, seed=5)
    bars["volume"] = np.full(50, np.nan)
    with pytest.raises(SpecError, match="volume is NaN throughout"):
        backtest(bars, Rule("volume > 0", "close < open"), {}, ppy=252.0)
