"""A cluster barsweep starts on this machine, attacked as another local user and as a
web page in the user's browser would, with real processes and sockets.

A ``local`` cluster speaks TLS with a key made for the run: a client without it (plain
TCP to the scheduler or a worker, or TLS with a certificate of its own) is refused, so
it cannot run code there; ``security: plain`` opts out. The dashboard's websockets
(the ``/barsweep`` page's and Dask's own) answer an upgrade whose ``Origin`` is the
dashboard itself, and refuse one from another site with 403.
"""

import asyncio
import json
import os
import re
import urllib.request

import pytest
from distributed import Client
from distributed.comm import connect as comm_connect
from distributed.security import Security
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from barsweep.errors import SpecError
from barsweep.pipeline.config.model import ClusterSpec, parse_spec
from barsweep.pipeline.config.overrides import with_cluster
from barsweep.pipeline.run.cluster import connect

STRANGER_TIMEOUT_S = 5


def as_tcp(address: str) -> str:
    """``address`` with the tcp:// scheme: what a client without credentials dials."""
    return "tcp://" + address.split("://", 1)[1]


def stranger_runs_code(address: str, **security) -> None:
    """Connect to the scheduler at ``address`` as another local user would, and run
    ``os.getpid`` on it (what a client that gets in can do)."""
    with Client(address, timeout=STRANGER_TIMEOUT_S, **security) as client:
        client.run_on_scheduler(os.getpid)


async def worker_answers(address: str) -> None:
    """Open a plain TCP comm to a worker and ask it who it is."""
    comm = await comm_connect(address, timeout=STRANGER_TIMEOUT_S)
    try:
        await comm.write({"op": "identity"})
        await asyncio.wait_for(comm.read(), STRANGER_TIMEOUT_S)
    finally:
        comm.abort()


@pytest.mark.slow
def test_a_local_cluster_refuses_clients_without_its_key():
    with connect(ClusterSpec(kind="local"), n_workers=1) as client:
        address = client.scheduler.address
        workers = client.scheduler_info()["workers"]
        assert address.startswith("tls://"), address
        assert all(w.startswith("tls://") and info["nanny"].startswith("tls://")
                   for w, info in workers.items())
        assert client.run_on_scheduler(os.getpid) == os.getpid()  # the run's own client
        with pytest.raises((OSError, TimeoutError)):
            stranger_runs_code(as_tcp(address))
        with pytest.raises((OSError, TimeoutError)):  # TLS, with a key of its own
            stranger_runs_code(address, security=Security.temporary())
        for worker in workers:
            with pytest.raises((OSError, TimeoutError)):
                asyncio.run(worker_answers(as_tcp(worker)))


@pytest.mark.slow
def test_plain_is_tcp_as_asked():
    spec = ClusterSpec.model_validate({"kind": "local", "security": "plain"})
    with connect(spec, n_workers=1) as client:
        address = client.scheduler.address
        assert address.startswith("tcp://"), address
        stranger_runs_code(address)  # what plain means: any local user gets in


# --------------------------------------------------------------------------- dashboard


def page_token(url: str) -> str:
    """The Bokeh session token a dashboard page at ``url`` hands its browser."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=30) as response:
        html = response.read().decode()
    return re.search(r'"token":\s*"([^"]+)"', html).group(1)


async def websocket_status(url: str, origin: str) -> int:
    """Open the Bokeh websocket of the page at ``url`` (``http://host:port/path``) as a
    browser showing a page of ``origin`` would: 101 when it opens, else the HTTP
    status of the refusal."""
    token = page_token(url)
    request = HTTPRequest(url.replace("http://", "ws://") + "/ws",
                          headers={"Origin": origin})
    try:
        ws = await websocket_connect(request, subprotocols=["bokeh", token])
    except HTTPClientError as err:
        return err.code
    ws.close()
    return 101


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["local", "threads"])
def test_dashboard_websockets_take_their_own_origin_only(kind):
    with connect(ClusterSpec(kind=kind), n_workers=1, dashboard=True) as client:
        port = client.dashboard_link.split("://", 1)[1].split("/")[0].rsplit(":", 1)[1]
        base = f"http://127.0.0.1:{port}"  # where it listens
        for page in ("barsweep", "status"):
            url = f"{base}/{page}"
            assert asyncio.run(websocket_status(url, "http://evil.example")) == 403, page
            assert asyncio.run(websocket_status(
                url, f"http://evil.example:{port}")) == 403, page
            # the dashboard seen under its other name: the origin is not the Host the
            # request names, so it is Bokeh's list that lets it in
            for seen, own in ((base, f"http://localhost:{port}"),
                              (f"http://localhost:{port}", f"http://127.0.0.1:{port}")):
                assert asyncio.run(websocket_status(f"{seen}/{page}", own)) == 101, (page, own)


# --------------------------------------------------------------------------- the spec


@pytest.mark.parametrize("cluster", [
    "local", {"kind": "local", "security": "temporary"}, {"kind": "auto", "security": "plain"},
    {"kind": "cuda", "security": "plain"}])
def test_security_modes_of_clusters_started_here(cluster, tmp_path):
    spec = parse_spec({"data": {"store": str(tmp_path), "symbols": ["X"], "timeframe": "1h"},
                       "strategy": "ema_cross", "grid": {"fast": [2], "slow": [5]},
                       "cluster": cluster})
    assert spec.cluster.encrypted_here == (json.dumps(cluster).find("plain") < 0)


@pytest.mark.parametrize(("cluster", "expected"), [
    ({"kind": "threads", "security": "plain"}, "a threads cluster runs in this process"),
    ({"kind": "scheduler", "address": "tls://h:8786", "security": "temporary"},
     "'temporary' applies to clusters barsweep starts here"),
    ({"kind": "slurm", "cores": 2, "memory": "4GB", "security": "plain"},
     "'plain' applies to clusters barsweep starts here"),
    ({"kind": "local", "security": "none"}, "cluster.security"),
])
def test_security_modes_elsewhere_are_refused(cluster, expected, tmp_path):
    with pytest.raises(SpecError) as info:
        parse_spec({"data": {"store": str(tmp_path), "symbols": ["X"], "timeframe": "1h"},
                    "strategy": "ema_cross", "grid": {"fast": [2], "slow": [5]},
                    "cluster": cluster}, source="s.yaml")
    assert expected in str(info.value), str(info.value)


def test_cluster_flag_keeps_the_specs_security_mode(tmp_path):
    spec = parse_spec({"data": {"store": str(tmp_path), "symbols": ["X"], "timeframe": "1h"},
                       "strategy": "ema_cross", "grid": {"fast": [2], "slow": [5]},
                       "cluster": {"kind": "auto", "security": "plain"}})
    assert with_cluster(spec, "local").cluster.security == "plain"
    assert with_cluster(spec, "threads").cluster.security is None
