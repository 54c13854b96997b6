"""A user's own strategy, as a user writes and runs one: a package beside the spec,
``barsweep run`` (and ``barsweep check``) started from another folder without PYTHONPATH,
on a `dask worker` started by hand in an unrelated folder; a wrong signal refused before
any store or cluster exists, in a few lines naming its module and function."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from helpers.processes import WITHOUT_PYTHONPATH
from helpers.runs import synth

from barsweep.engine import METRICS
from barsweep.pipeline.run.shipping import files_digest, module_files

EXAMPLE = Path(__file__).resolve().parents[1] / "engine" / "custom_strategy_example.py"

WRONG_SIGNALS = {
    "three_values": ('''
@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    if t == 0:
        return False, False, False
    close, sma = bars[3], ind[rows[0]]
    return close[t] > sma[t], close[t] < sma[t], False
''', ["signal must return (long_entry, long_exit, short_entry, short_exit), a tuple of 4 "
      "booleans; it returns a tuple of 3: (bool, bool, bool)", "line 7"]),
    "typo": ('''
@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    close, sma = bars[3], ind[rows[0]]
    up = cross_abov(close[t - 1], sma[t - 1], close[t], sma[t])
    return up, False, False, False
''', ["NameError: name 'cross_abov' is not defined", "line 7"]),
    "types": ('''
@njit(cache=True)
def signal(ind, rows, fparams, bars, t):
    close = bars[3]
    return close[t] > "a", False, False, False
''', ["No implementation of function", "gt(float64, ", "line 10: return close[t] > \"a\""]),
}

HEADER = '''"""A strategy with a mistake in its signal."""

from numba import njit

from barsweep.engine import Indicator, Param, Strategy, register
'''

FOOTER = '''

register(Strategy(name="wrong", params=(Param("period", "int", 2, 1000),),
                  indicators=(Indicator("sma", ("period",)),), signal=signal))
'''


def barsweep(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """The ``barsweep`` command line in ``cwd``, without PYTHONPATH."""
    return subprocess.run([sys.executable, "-m", "barsweep.pipeline.cli", *args], cwd=cwd,
                          env=WITHOUT_PYTHONPATH, capture_output=True, text=True, timeout=timeout)


def user_folder(root: Path, module: str = "sma_trend", source: str | None = None,
                strategy: str = "sma_trend") -> Path:
    """``root/project``: bars, the package ``my_strategies`` and ``spec.yaml`` naming
    ``my_strategies.<module>`` with relative paths, as a user lays them out."""
    project = root / "project"
    package = project / "my_strategies"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / f"{module}.py").write_text(source or EXAMPLE.read_text())
    synth(project / "bars", 2_000, seed=5)
    (project / "spec.yaml").write_text(yaml.safe_dump({
        "data": {"store": "bars", "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "modules": [f"my_strategies.{module}"],
        "strategy": strategy,
        "grid": {"period": [5, 10, 20, 40]},
        "execution": {"direction": "both", "fees": 0.001},
        "run": {"out": "results.zarr", "block_size": 2},
    }))
    return project


def metrics(store: Path) -> dict[str, np.ndarray]:
    ds = xr.open_zarr(store, consolidated=False)
    return {m: ds[m].values for m in METRICS}


# --------------------------------------------------------------------------- item 8


def test_modules_beside_the_spec_run_from_anywhere_on_a_hand_started_worker(
        tmp_path, hand_started):
    """`modules: [my_strategies.sma_trend]` with `my_strategies/` beside the spec:
    `barsweep run` from another folder without PYTHONPATH imports it, and a `dask worker`
    started by hand in an unrelated folder runs it; the same results as a threads run."""
    project = user_folder(tmp_path)
    cwd = tmp_path / "somewhere_else"
    cwd.mkdir()
    address = hand_started()
    remote = barsweep("run", str(project / "spec.yaml"), "--scheduler", address,
                      "--out", str(project / "remote.zarr"), "--no-progress", cwd=cwd)
    assert remote.returncode == 0, remote.stderr
    here = barsweep("run", str(project / "spec.yaml"), "--cluster", "threads",
                    "--out", str(project / "threads.zarr"), "--no-progress", cwd=cwd)
    assert here.returncode == 0, here.stderr
    attrs = xr.open_zarr(project / "remote.zarr", consolidated=False).attrs
    assert attrs["cluster"] == address
    got, want = metrics(project / "remote.zarr"), metrics(project / "threads.zarr")
    for name in METRICS:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert np.isfinite(got["sharpe"]).all() and (got["n_trades"] > 0).all()


def test_an_edited_module_reaches_a_worker_that_ran_the_old_one(tmp_path, hand_started):
    """The same hand-started worker, the strategy edited between two runs: the second run
    computes with the new signal there too (the worker drops the version it imported)."""
    project = user_folder(tmp_path)
    address = hand_started()
    spec = str(project / "spec.yaml")
    first = barsweep("run", spec, "--scheduler", address, "--out", str(project / "a.zarr"),
                     "--no-progress", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    source = project / "my_strategies" / "sma_trend.py"
    source.write_text(source.read_text().replace("return up, down, down, up",
                                                 "return down, up, up, down"))
    for name, where in (("b", ["--scheduler", address]), ("c", ["--cluster", "threads"])):
        done = barsweep("run", spec, *where, "--out", str(project / f"{name}.zarr"),
                        "--no-progress", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    old, new, want = (metrics(project / f"{n}.zarr") for n in "abc")
    for name in METRICS:
        np.testing.assert_array_equal(new[name], want[name], err_msg=name)
    assert not np.array_equal(old["total_return"], new["total_return"])


@pytest.mark.requires_unshare
def test_a_worker_that_cannot_see_the_spec_folder_gets_the_modules(tmp_path, hand_started):
    """The worker sees none of the project's folder (another machine): the modules are
    shipped to it as the bars are, and it runs the strategy from its copy."""
    project = user_folder(tmp_path)
    address = hand_started(hide=(project,))
    remote = barsweep("run", str(project / "spec.yaml"), "--scheduler", address,
                      "--out", str(project / "remote.zarr"), "--no-progress", cwd=tmp_path)
    assert remote.returncode == 0, remote.stderr + (tmp_path / "worker.log").read_text()
    here = barsweep("run", str(project / "spec.yaml"), "--cluster", "threads",
                    "--out", str(project / "threads.zarr"), "--no-progress", cwd=tmp_path)
    assert here.returncode == 0, here.stderr
    attrs = xr.open_zarr(project / "remote.zarr", consolidated=False).attrs
    assert attrs["bars_shipped_to"]  # it could not read the bars either
    files = module_files(str(project), ["my_strategies"])
    copy = Path(tempfile.gettempdir(), f"barsweep-modules-{os.getuid()}", files_digest(files))
    assert (copy / "my_strategies" / "sma_trend.py").read_bytes() == EXAMPLE.read_bytes()
    assert stat.S_IMODE(copy.parent.stat().st_mode) == 0o700
    got, want = metrics(project / "remote.zarr"), metrics(project / "threads.zarr")
    for name in METRICS:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_a_module_that_is_not_there_names_the_key_and_where_it_looked(tmp_path):
    project = user_folder(tmp_path)
    spec = yaml.safe_load((project / "spec.yaml").read_text())
    spec["modules"] = ["my_strategies.sma_trend", "my_stratgies.sma_trend"]
    (project / "typo.yaml").write_text(yaml.safe_dump(spec))
    for command in ("run", "check"):
        done = barsweep(command, str(project / "typo.yaml"), cwd=tmp_path)
        assert done.returncode == 2
        err = done.stderr
        assert err.startswith("barsweep: error: invalid sweep spec "), err
        assert "modules[1]: cannot import strategy module 'my_stratgies.sma_trend'" in err
        assert f"looked for my_stratgies/ and my_stratgies.py in {project}" in err
        assert "Traceback" not in err and "modules[0]" not in err
    assert not (project / "results.zarr").exists()


def test_module_dir_is_a_path_of_the_spec_and_a_module_may_be_one_file(tmp_path):
    """`module_dir: ../code` in `project/specs/spec.yaml` is `project/code`, which holds
    the module as one file, `sma_one.py`; checked from another folder."""
    project = user_folder(tmp_path)
    (project / "code").mkdir()
    (project / "code" / "sma_one.py").write_text(EXAMPLE.read_text().replace(
        'name="sma_trend"', 'name="sma_one"'))
    spec = yaml.safe_load((project / "spec.yaml").read_text())
    (project / "specs").mkdir()
    spec.update(module_dir="../code", modules=["sma_one"], strategy="sma_one")
    spec["data"]["store"] = "../bars"
    (project / "specs" / "spec.yaml").write_text(yaml.safe_dump(spec))
    done = barsweep("check", str(project / "specs" / "spec.yaml"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "strategy 'sma_one' (module sma_one, function signal): compiles" in done.stdout


# --------------------------------------------------------------------------- item 7


@pytest.mark.parametrize("mistake", sorted(WRONG_SIGNALS))
def test_a_wrong_signal_is_refused_before_any_store_or_cluster(tmp_path, mistake):
    """The error names the module, the function and what is wrong in a few lines; no
    --resume advice; nothing at --out (no store, no hidden folder, no lock); no cluster
    was started (no dashboard line). For GPUs too (the signal typed, no CPU kernel)."""
    body, expected = WRONG_SIGNALS[mistake]
    project = user_folder(tmp_path, "wrong", HEADER + body + FOOTER, strategy="wrong")
    before = sorted(p.name for p in project.iterdir())
    for command in (["run", "--cluster", "local"], ["run", "--backend", "cuda"], ["check"]):
        done = barsweep(command[0], str(project / "spec.yaml"), *command[1:], cwd=tmp_path)
        assert done.returncode == 2, done.stdout + done.stderr
        err = done.stderr
        assert err.startswith("barsweep: error: strategy 'wrong' (module my_strategies.wrong, "
                              "function signal): "), err
        for text in expected:
            assert text in err, err
        assert len(err.strip().splitlines()) <= 3, err
        assert "--resume" not in err and "Traceback" not in err
        assert "dask dashboard" not in done.stdout and "OK" not in done.stdout
        assert sorted(p.name for p in project.iterdir()) == before


def test_check_says_ok_and_what_it_checked(tmp_path):
    project = user_folder(tmp_path)
    done = barsweep("check", str(project / "spec.yaml"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"OK: {project / 'spec.yaml'}" in lines
    assert ("  strategy 'sma_trend' (module my_strategies.sma_trend, function signal): "
            "compiles (") in done.stdout
    assert "BTCUSDT (2,000 bars)" in done.stdout and "4 combos per symbol" in done.stdout
    assert not (project / "results.zarr").exists()
    assert sorted(p.name for p in project.iterdir()) == ["bars", "my_strategies", "spec.yaml"]
    again = barsweep("check", str(project / "spec.yaml"), cwd=tmp_path)
    assert "compiles (its kernel is in numba's cache)" in again.stdout, again.stdout
    assert "compiling" not in again.stdout


def test_help_names_check():
    done = barsweep("--help", cwd=Path.cwd())
    assert "check" in done.stdout
    sub = barsweep("check", "--help", cwd=Path.cwd())
    assert "the sweep spec (YAML) to check" in sub.stdout and "``" not in sub.stdout
