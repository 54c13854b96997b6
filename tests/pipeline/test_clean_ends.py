"""A run that ends well ends quietly: its store opens with ``xr.open_zarr`` without a
warning (and again after ``--resume``), its worker processes exit without being killed,
and a search sends Dask no large graph."""

import json
import shutil
import warnings

import numpy as np
import pytest
import xarray as xr
import zarr
from helpers.compare import assert_same_store
from helpers.runs import run_spec_file, synth

from barsweep.pipeline.config.model import parse_spec
from barsweep.pipeline.run.results import PENDING

pytestmark = pytest.mark.slow


def spec(bars, out, **more) -> dict:
    return {"data": {"store": str(bars), "symbols": ["BTCUSDT"], "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": {"fast": {"start": 2, "stop": 30, "step": 2},
                     "slow": {"start": 10, "stop": 120, "step": 5}},
            "constraints": ["fast < slow"],
            "execution": {"fees": 0.001},
            "run": {"out": str(out), "block_size": 60}, **more}


@pytest.fixture(scope="module")
def bars(tmp_path_factory):
    return synth(tmp_path_factory.mktemp("bars"), 2_000, seed=5)


def opened_strictly(path) -> xr.Dataset:
    """``xr.open_zarr(path)`` as a user types it, every warning an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return xr.open_zarr(path).load()


def test_a_finished_store_opens_without_a_warning_and_resumes(bars, tmp_path):
    out = run_spec_file(spec(bars, tmp_path / "s.zarr"), tmp_path / "s.yaml",
                        "--cluster", "threads")
    ds = opened_strictly(out)
    assert ds.attrs["complete"] is True
    plain = xr.open_zarr(out, consolidated=False).load()
    xr.testing.assert_identical(ds, plain)

    # an interrupted resume of it: some blocks pending again, and the metadata it had
    # consolidated gone stale (an attribute no array holds)
    again = tmp_path / "again.zarr"
    shutil.copytree(out, again)
    group = zarr.open_group(str(again), mode="r+")
    flags = group["done"][:]
    flags[::2] = PENDING
    group["done"][:] = flags
    group.attrs["complete"] = False
    root = again / "zarr.json"
    doc = json.loads(root.read_text())
    doc["consolidated_metadata"]["metadata"]["sharpe"]["attributes"]["stale"] = True
    root.write_text(json.dumps(doc))
    data = spec(bars, again)
    run_spec_file(data, tmp_path / "again.yaml", "--cluster", "threads", "--resume")
    assert_same_store(again, out)
    resumed = opened_strictly(again)
    assert "stale" not in resumed["sharpe"].attrs  # consolidated afresh as it finished
    assert resumed.attrs["complete"] is True
    np.testing.assert_array_equal(resumed["sharpe"].values, ds["sharpe"].values)


def slow_to_exit(seconds: float = 5.0) -> None:
    """On a worker: take ``seconds`` to exit (as a worker that ran numba kernels can,
    tearing down on a busy machine), past distributed's 4 s."""
    import atexit
    import time

    atexit.register(time.sleep, seconds)


def test_workers_slow_to_exit_are_not_killed_at_the_end(bars, tmp_path, capfd):
    import logging

    from distributed import default_client

    from barsweep.pipeline.run.orchestrate import run_spec
    from barsweep.pipeline.run.stages import Voice

    heard = []

    def say(line: str) -> None:  # heard while the run's cluster is up
        if line.startswith("dask dashboard"):
            default_client().run(slow_to_exit)
            heard.append(line)

    class Kept(logging.Handler):
        def emit(self, record):
            heard.append(record.getMessage())

    nanny, kept = logging.getLogger("distributed.nanny"), Kept(logging.WARNING)
    nanny.addHandler(kept)
    try:
        summary = run_spec(parse_spec(spec(bars, tmp_path / "s.zarr", cluster="local")),
                           n_workers=2, voice=Voice(say=say))
    finally:
        nanny.removeHandler(kept)
    assert summary.n_blocks > 1 and heard[0].startswith("dask dashboard")
    said = "\n".join(heard) + capfd.readouterr().err
    assert "still alive" not in said and "killing" not in said, said


def test_a_search_sends_no_large_graph(bars, tmp_path):
    """A search's first rung carries each drawn combo's parameter values (here ~1.4 MB,
    over a threshold lowered to 1 MB as a budget of ~400,000 combos passes the default
    10 MB): they go to the scheduler in graphs below distributed's threshold, and it
    says nothing."""
    import dask

    from barsweep.pipeline.run.orchestrate import run_spec
    from barsweep.pipeline.run.results import open_results

    data = spec(bars, tmp_path / "s.zarr", cluster="local",
                search={"method": "random", "budget": 60_000, "seed": 1})
    data["grid"] = {"fast": {"start": 2, "stop": 400, "step": 1},
                    "slow": {"start": 10, "stop": 1500, "step": 1}}
    data["run"].pop("block_size")
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1MB"}), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = run_spec(parse_spec(data), n_workers=2)
    assert summary.n_combos == 60_000
    large = [str(w.message) for w in caught if "large graph" in str(w.message)]
    assert large == []
    assert int(np.isfinite(open_results(summary.out)["n_trades"].values).sum()) == 60_000
