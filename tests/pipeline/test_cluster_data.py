"""Bars and results on a cluster that does not share the driver's view of the files:
`dask worker`s started by hand in another directory holding other bars, and workers in
their own mount namespace (`unshare -m`) with a tmpfs over the driver's project
directory, where the bars and the results store are missing or are other files. Every
run's store must equal a LocalCluster run's, bit for bit."""

import json
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

from barsweep.engine import METRICS
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.model import load_spec
from barsweep.pipeline.run.execute import execute
from barsweep.pipeline.run.plan import plan
from barsweep.pipeline.run.prepare import prepare_run
from barsweep.pipeline.run.results import create_store, finish_store, store_attrs
from barsweep.pipeline.run.shipping import BarsShipper

pytestmark = pytest.mark.slow

N_BARS = 6_000
N_BLOCKS = 6  # 432 of 18 x 26 (fast, slow) pairs, in blocks of 78


def synth(store: Path, seed: int) -> None:
    assert main(["data", "synth", "--symbol", "BTCUSDT", "--timeframe", "1h", "--bars",
                 str(N_BARS), "--seed", str(seed), "--store", str(store)]) == 0


def write_spec(directory: Path, store: str = "bars/", out: str = "results.zarr") -> Path:
    """A spec whose paths are relative to its own directory."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump({
        "data": {"store": store, "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": {"start": 3, "stop": 20, "step": 1},
                 "slow": {"start": 10, "stop": 60, "step": 2}},
        "constraints": ["fast < slow"],
        "execution": {"fill": "next_open", "fees": 0.001, "direction": "both"},
        "run": {"block_size": 78, "out": out},
    }))
    return path


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """``proj/`` with the bars and the spec, ``decoy/bars`` with other bars of the same
    symbol, and the results of a LocalCluster run of the spec (``reference``)."""
    root = tmp_path_factory.mktemp("cluster-data")
    synth(root / "proj" / "bars", seed=11)
    synth(root / "decoy" / "bars", seed=99)
    reference = root / "reference"
    spec = write_spec(reference, store=str(root / "proj" / "bars"))
    assert main(["run", str(spec), "--workers", "2", "--no-progress"]) == 0
    return root


@pytest.fixture
def scheduler(dask_scheduler):
    """conftest's `dask scheduler` started by hand; yields (address, add_worker).

    ``add_worker(cwd, hide=(), then="")`` starts one `dask worker` in ``cwd``; with
    ``hide`` it runs in its own mount namespace with a tmpfs over each directory (and
    runs the shell commands ``then`` before it starts, e.g. to put other files there).
    """
    address, add_worker = dask_scheduler
    return address, lambda cwd, hide=(), then="": add_worker(cwd=cwd, hide=hide, then=then)


def wait_for(address: str, n_workers: int):
    from distributed import Client

    client = Client(address, timeout=30)
    client.wait_for_workers(n_workers, timeout=90)
    return client


def assert_same_store(a: Path, b: Path) -> None:
    ga, gb = zarr.open_group(str(a), mode="r"), zarr.open_group(str(b), mode="r")
    for name in (*METRICS, "done", "fast", "slow"):
        np.testing.assert_array_equal(ga[name][:], gb[name][:], err_msg=name)
    assert store_attrs(a)["complete"] is True and store_attrs(b)["complete"] is True
    assert int(np.count_nonzero(ga["done"][:] == 1)) == N_BLOCKS


def fresh_copy(project: Path, tmp_path: Path) -> Path:
    """The project (bars and spec) copied where this test may write its results."""
    proj = tmp_path / "proj"
    shutil.copytree(project / "proj", proj)
    write_spec(proj)
    return proj


def test_workers_started_elsewhere_read_the_spec_dirs_bars_not_their_own(
        project, tmp_path, scheduler, monkeypatch, capsys):
    """Workers whose directory holds other `bars/`: the spec's relative `bars/` is the
    spec directory's, resolved on the driver, never the workers'."""
    address, add_worker = scheduler
    proj = fresh_copy(project, tmp_path)
    decoy = tmp_path / "decoy"
    shutil.copytree(project / "decoy", decoy)
    add_worker(decoy)
    add_worker(decoy)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the driver too runs from another directory
    with wait_for(address, 2):
        assert main(["run", "../proj/spec.yaml", "--scheduler", address,
                     "--no-progress"]) == 0
    assert "shipped" not in capsys.readouterr().out
    out = proj / "results.zarr"
    assert_same_store(out, project / "reference" / "results.zarr")
    attrs = store_attrs(out)
    assert yaml.safe_load(attrs["spec"])["data"]["store"] == str(proj / "bars")
    assert json.loads(attrs["bars_shipped_to"]) == []  # they all saw the driver's files
    assert attrs["blocks_written_by_driver"] == 0
    assert not (elsewhere / "results.zarr").exists() and not (decoy / "results.zarr").exists()


@pytest.mark.requires_unshare
def test_workers_that_cannot_see_the_drivers_files(project, tmp_path, scheduler, capsys):
    """One worker sees an empty directory where the driver's project is, the other sees
    other bars (and no results store) at the very same paths: the driver ships both the
    bars, and writes the metrics they return."""
    address, add_worker = scheduler
    proj = fresh_copy(project, tmp_path)
    add_worker(tmp_path, hide=[proj])
    other_bars = shlex.quote(str(project / "decoy" / "bars"))
    add_worker(tmp_path, hide=[proj], then=f"cp -r {other_bars} {shlex.quote(str(proj))}/")
    with wait_for(address, 2) as client:
        sees = client.run(lambda path: Path(path).exists(), str(proj / "bars" / "1h"))
        assert sorted(sees.values()) == [False, True]  # the second sees the decoy's
        sees_spec = client.run(lambda path: Path(path).exists(), str(proj / "spec.yaml"))
        assert not any(sees_spec.values())
        assert main(["run", str(proj / "spec.yaml"), "--scheduler", address,
                     "--no-progress"]) == 0
        workers = sorted(sees)
    printed = capsys.readouterr().out
    assert "2 of 2 workers cannot read the bars at" in printed
    assert "holds other bars" in printed or "no file" in printed
    out = proj / "results.zarr"
    assert_same_store(out, project / "reference" / "results.zarr")
    attrs = store_attrs(out)
    assert json.loads(attrs["bars_shipped_to"]) == workers
    assert attrs["blocks_written_by_driver"] == N_BLOCKS


@pytest.mark.requires_unshare
def test_a_worker_that_joins_after_the_bars_were_checked_gets_them(project, tmp_path,
                                                                  scheduler):
    """Blocks sent to a worker that cannot read the bars before the driver has shipped
    any (a worker that joined after the check): they fail for want of bars, the driver
    ships the bars and runs them again."""
    address, add_worker = scheduler
    proj = fresh_copy(project, tmp_path)
    add_worker(tmp_path, hide=[proj])
    spec = load_spec(proj / "spec.yaml")
    prepared = prepare_run(spec)
    out = prepared.out
    spec = prepared.spec  # data.year_days measured from the bars
    the_plan = plan(spec, out, 78, prepared.grid, "cpu", prepared.bars_fingerprint, "late",
                    "id-late")
    create_store(out, spec.data.symbols, the_plan.grid.axes, the_plan.chunks,
                 the_plan.n_blocks, {"store_id": "id-late", "spec": spec.to_yaml(),
                                     "barsweep_version": "test"},
                 excluded=the_plan.excluded, segments=spec.analysis.pbo_segments)
    with wait_for(address, 1) as client:
        shipper = BarsShipper(client, {t.bars: None for t in the_plan.tasks})
        calls = []

        def ship():
            calls.append(shipper.ensure())

        try:
            reports = execute(client, the_plan.tasks, ship=ship)
        finally:
            shipper.close()
    assert calls and calls[0].startswith("1 of 1 workers cannot read the bars")
    assert len(reports) == N_BLOCKS and all(r.written_by_driver for r in reports)
    finish_store(out, {})
    assert_same_store(Path(out), project / "reference" / "results.zarr")
