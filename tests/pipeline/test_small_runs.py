"""Small sweeps run on threads of the calling process (cluster auto/threads): the same
results as worker processes, the choice and its reason kept in the store."""

import numpy as np
import pytest
import xarray as xr
import zarr
from helpers.runs import run_spec_file, synth
from zarr.codecs import Crc32cCodec, ZstdCodec

from barsweep.errors import SpecError
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.cluster import ClusterSpec
from barsweep.pipeline.config.model import parse_spec
from barsweep.pipeline.config.overrides import with_cluster
from barsweep.pipeline.run.cluster import THREADS_MAX_COMBO_BARS, choose
from barsweep.pipeline.run.results import store_attrs

pytestmark = pytest.mark.slow


def spec(bars, out, **more) -> dict:
    return {"data": {"store": str(bars), "symbols": ["BTCUSDT"], "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": {"fast": {"start": 2, "stop": 30, "step": 2},
                     "slow": {"start": 10, "stop": 120, "step": 5}},
            "constraints": ["fast < slow"],
            "execution": {"fill": "next_open", "fees": 0.001},
            "run": {"out": str(out), "block_size": 60}, **more}


@pytest.mark.parametrize("more", [{}, {"walk_forward": {"train": 800, "test": 400}}],
                         ids=["plain", "walk-forward"])
def test_threads_and_processes_write_the_same_store(tmp_path, more):
    bars = synth(tmp_path / "bars", 3_000, seed=5)
    stores = {}
    for cluster in ("threads", "local", None):
        out = tmp_path / f"{cluster or 'default'}.zarr"
        flags = ("--cluster", cluster) if cluster else ()
        stores[cluster] = run_spec_file(spec(bars, out, **more), tmp_path / "spec.yaml", *flags)
    attrs = {k: store_attrs(v) for k, v in stores.items()}
    assert attrs["threads"]["cluster"] == "threads"
    assert attrs["local"]["cluster"] == "local"
    assert attrs["local"]["cluster_reason"] == "local: as the spec or --cluster asks"
    # the default (auto) runs this small sweep on threads, and says why
    assert attrs[None]["cluster"] == "threads"
    assert attrs[None]["cluster_reason"].startswith("auto: ")
    assert "at most 5e+09: threads of this process" in attrs[None]["cluster_reason"]
    sets = {k: xr.open_zarr(v, consolidated=False).load() for k, v in stores.items()}
    for name in sets["local"].data_vars:
        for other in ("threads", None):
            np.testing.assert_array_equal(sets[other][name].values, sets["local"][name].values,
                                          err_msg=f"{name} ({other})")
    assert int((sets["threads"]["done"] == 1).sum()) > 3  # several blocks, several threads


def test_auto_starts_processes_for_large_work():
    small, why = choose(ClusterSpec(), THREADS_MAX_COMBO_BARS)
    large, why_large = choose(ClusterSpec(), 2 * THREADS_MAX_COMBO_BARS)
    assert (small.kind, large.kind) == ("threads", "local")
    assert why_large == "auto: 1e+10 combo-bars, over 5e+09: worker processes"
    gpu, why_gpu = choose(ClusterSpec(), 1e6, "cuda")  # one process per GPU
    assert gpu.kind == "local" and why_gpu == ("auto: worker processes, since run.backend "
                                               "cuda may use a GPU")
    asked, reason = choose(ClusterSpec(kind="threads"), 1e15)
    assert asked.kind == "threads" and reason == "threads: as the spec or --cluster asks"


def test_cluster_flag_and_spec(tmp_path, capsys):
    base = parse_spec(spec(tmp_path, tmp_path / "r.zarr",
                           cluster={"kind": "local", "dashboard": "127.0.0.1:0"}))
    assert with_cluster(base, "threads").cluster.kind == "threads"
    assert with_cluster(base, "local").cluster.dashboard == "127.0.0.1:0"  # kept
    assert with_cluster(base, "tcp://h:8786").cluster.address == "tcp://h:8786"
    with pytest.raises(SpecError, match="--cluster: .*cluster must be 'auto', 'threads'"):
        with_cluster(base, "yarn")
    with pytest.raises(SpecError, match="cluster.dashboard: a threads cluster serves no"):
        parse_spec(spec(tmp_path, tmp_path / "r.zarr",
                        cluster={"kind": "threads", "dashboard": "0.0.0.0:8787"}))
    path = tmp_path / "s.yaml"
    path.write_text("{}")
    assert main(["run", str(path), "--cluster", "local", "--scheduler", "tcp://h:8786"]) == 2
    assert "--scheduler and --cluster both say where to run" in capsys.readouterr().err


def test_resume_refuses_a_store_cut_into_other_blocks(tmp_path, capsys):
    """A walk-forward store made with a block per window (before blocks spanned
    windows) has more block flags than this run plans: --resume refuses it by name."""
    bars = synth(tmp_path / "bars", 3_000, seed=5)
    data = spec(bars, tmp_path / "wf.zarr", walk_forward={"train": 800, "test": 400})
    out = run_spec_file(data, tmp_path / "spec.yaml")
    group = zarr.open_group(str(out), mode="r+")
    n_planned = group["done"].shape[0]
    del group["done"]  # as an older layout left it: one flag per window and box, pending
    group.create_array("done", shape=(n_planned * 5,), chunks=(1,), dtype="int8",
                       fill_value=0, dimension_names=["block"],
                       compressors=(ZstdCodec(level=0, checksum=False), Crc32cCodec()))
    assert main(["run", str(tmp_path / "spec.yaml"), "--resume", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"has {n_planned * 5} blocks, this run plans {n_planned}" in err
    assert "use --overwrite to start again" in err


def test_a_threads_run_without_a_dashboard_binds_nothing_but_loopback(tmp_path):
    """distributed's scheduler serves HTTP (/health, /metrics) whatever the dashboard:
    a threads run without ``--dashboard`` binds it, and its worker's, to a port the
    system picks on 127.0.0.1, not to 8787 (nor any port) on every interface."""
    import os

    import psutil
    from distributed import default_client

    from barsweep.pipeline.run.orchestrate import run_spec
    from barsweep.pipeline.run.stages import Voice

    bars = synth(tmp_path / "bars", 1_000, seed=5)
    seen = {}

    def say(line: str) -> None:  # heard while the run's cluster is up
        if "no dashboard" in line:
            info = default_client().scheduler_info()
            seen["port"] = info["services"]["dashboard"]
            seen["worker_ports"] = [w["services"]["dashboard"] for w in info["workers"].values()]
            seen["bound"] = {(c.laddr.ip, c.laddr.port) for c in
                             psutil.Process(os.getpid()).net_connections(kind="inet")
                             if c.status == psutil.CONN_LISTEN}
            seen["line"] = line

    run_spec(parse_spec(spec(bars, tmp_path / "t.zarr", cluster="threads")), voice=Voice(say=say))
    assert "no dashboard (--dashboard serves one)" in seen["line"]
    assert seen["port"] != 8787
    assert {ip for ip, port in seen["bound"] if port == seen["port"]} == {"127.0.0.1"}
    assert not [ip for ip, port in seen["bound"] if port == 8787]
    # the worker's own HTTP server too: on loopback, and nothing else of the run's
    assert seen["worker_ports"] and all(
        {ip for ip, port in seen["bound"] if port == p} == {"127.0.0.1"}
        for p in seen["worker_ports"])
    assert {ip for ip, _ in seen["bound"]} == {"127.0.0.1"}, seen["bound"]
