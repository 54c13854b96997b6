"""Cluster security with real processes, nothing mocked.

A `dask scheduler` and a `dask worker` speaking TLS, with a certificate authority and
certificates made here: `barsweep run` reaches them with the client's certificate (from
flags, or from the spec with paths relative to it) and writes the same results as a
local cluster, bit for bit; a client without a certificate, over plain TCP, with a
certificate of another authority, or trusting another authority is refused in one line,
before the connect timeout, leaving nothing at --out. A local cluster serves its
dashboard (and listens everywhere else) on 127.0.0.1 only, unless ``cluster.dashboard``
says otherwise. Nothing in a spec, a constraint or a ``rank`` filter is run as code. The
cluster keys a spec may not combine are refused in one line naming the key.
"""

import datetime as dt
import ipaddress
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from helpers.processes import DASK

from barsweep.datasets import write_synth
from barsweep.engine import METRICS
from barsweep.errors import SpecError
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.model import ClusterSpec, load_spec, parse_spec
from barsweep.pipeline.config.overrides import with_scheduler
from barsweep.pipeline.run.cluster import connect
from barsweep.pipeline.run.orchestrate import run_spec
from barsweep.pipeline.run.results import create_store, open_results, write_block

N_BARS = 400
CLI = [sys.executable, "-m", "barsweep.pipeline.cli"]


# --------------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class Pem:
    """One party's TLS files: the authority it trusts, its certificate and key."""

    ca: Path
    cert: Path
    key: Path

    def flags(self) -> list[str]:
        return ["--tls-ca", str(self.ca), "--tls-cert", str(self.cert),
                "--tls-key", str(self.key)]


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: str, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1)))


def make_ca(directory: Path, name: str):
    """A self-signed certificate authority, its certificate written to ``name.pem``."""
    key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                          content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False)
    cert = (_builder(name, _name(name), key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(usage, critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    path = directory / f"{name}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert, key, path


def make_signed(directory: Path, name: str, ca) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, for servers and clients, signed by
    ``ca``; written to ``name.pem`` and ``name.key``."""
    ca_cert, ca_key, _ = ca
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    purposes = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    cert = (_builder(name, ca_cert.subject, key.public_key())
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage(purposes), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Pem]:
    """The cluster's nodes and client (one authority); a stranger whose certificate
    another authority signed; a client that trusts that other authority."""
    directory = tmp_path_factory.mktemp("tls")
    ca, other = make_ca(directory, "ca"), make_ca(directory, "other-ca")
    node, client = make_signed(directory, "node", ca), make_signed(directory, "client", ca)
    stranger = make_signed(directory, "stranger", other)
    return {"node": Pem(ca[2], *node), "client": Pem(ca[2], *client),
            "stranger": Pem(ca[2], *stranger), "misled": Pem(other[2], *client)}


# --------------------------------------------------------------------------- cluster, bars


def tls_client(address: str, pem: Pem):
    """A Dask client of the TLS scheduler at ``address`` with ``pem``'s files (Dask's own
    ``Security``, not barsweep's)."""
    from distributed import Client
    from distributed.security import Security

    security = Security(tls_ca_file=str(pem.ca), tls_client_cert=str(pem.cert),
                        tls_client_key=str(pem.key), require_encryption=True)
    return Client(address, security=security, timeout=30)


@pytest.fixture(scope="module")
def tls_cluster(pki, tmp_path_factory, start_scheduler):
    """A TLS `dask scheduler` on 127.0.0.1 and one `dask worker`, started by hand as on
    other machines; their address once the worker has joined."""
    directory = tmp_path_factory.mktemp("tls-cluster")
    info = directory / "scheduler.json"
    node = pki["node"]
    tls = ["--tls-ca-file", str(node.ca), "--tls-cert", str(node.cert),
           "--tls-key", str(node.key)]
    logs = {name: directory / f"{name}.log" for name in ("scheduler", "worker")}
    procs = []

    def start(name, *argv):
        with logs[name].open("w") as log:
            procs.append(subprocess.Popen([DASK, *argv], cwd=directory, stdout=log,
                                          stderr=subprocess.STDOUT))

    def logged() -> str:
        return "\n".join(f"--- {name}\n{path.read_text()}" for name, path in logs.items()
                         if path.exists())

    try:
        with logs["scheduler"].open("w") as log:
            scheduler, address = start_scheduler(directory, "--protocol", "tls", *tls,
                                                 cwd=directory, log=log, logged=logged)
        procs.append(scheduler)
        assert address.startswith("tls://127.0.0.1:"), address
        start("worker", "worker", "--scheduler-file", str(info), *tls, "--nthreads", "1",
              "--host", "127.0.0.1", "--no-nanny", "--no-dashboard")
        with tls_client(address, pki["client"]) as client:
            try:
                client.wait_for_workers(1, timeout=60)
            except TimeoutError:
                pytest.fail(f"the TLS worker did not join in 60 s\n{logged()}")
        yield address
    finally:
        for proc in reversed(procs):
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def bars(tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("bars")
    write_synth(store, "BTCUSDT", "1h", N_BARS, 3)
    write_synth(store, "ETHUSDT", "1h", N_BARS, 4)
    return store


def spec_data(store: Path, out: str | Path, **extra) -> dict:
    return {
        "data": {"store": str(store), "symbols": ["BTCUSDT", "ETHUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": [3, 5, 8, 13], "slow": [10, 20, 30]},
        "constraints": ["fast < slow"],
        "execution": {"fill": "next_open", "fees": 0.001},
        "run": {"block_size": 4, "out": str(out)},
        **extra,
    }


def write_spec(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def local_results(bars, tmp_path_factory) -> Path:
    """The spec's results from a LocalCluster, the reference of the TLS runs."""
    out = tmp_path_factory.mktemp("local") / "results.zarr"
    with connect("local", n_workers=1) as client:
        run_spec(parse_spec(spec_data(bars, out)), client=client)
    return out


def barsweep(*args: str, cwd: Path, cli=CLI) -> tuple[int, str, str, float]:
    """`barsweep ...` in a process of its own: exit code, stdout, stderr, seconds."""
    t0 = time.monotonic()
    proc = subprocess.run([*cli, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0


#: A connect timeout far above what a refusal takes however busy the machine (process
#: start and imports included), and far below the subprocess's own timeout: a run
#: refused in less was refused by the handshake, not by the timeout.
SLOW_CONNECT_S = 150
#: `barsweep` with its connect timeout at SLOW_CONNECT_S.
CLI_SLOW_CONNECT = [sys.executable, "-c",
                    "import sys; import barsweep.pipeline.run.cluster as c; "
                    f"c.CONNECT_TIMEOUT_S = {SLOW_CONNECT_S}; "
                    "from barsweep.pipeline.cli import main; sys.exit(main(sys.argv[1:]))"]


def assert_same_results(ours: Path, reference: Path) -> None:
    """Every metric bit for bit, and the same coordinates."""
    a, b = open_results(ours), open_results(reference)
    for name in ("symbol", "fast", "slow"):
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)
    for name in METRICS:
        x, y = a[name].values, b[name].values
        assert x.dtype == y.dtype == np.float64 and x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), name
    assert np.isfinite(b["total_return"].values).sum() == 2 * 11  # 11 combos fast < slow


# --------------------------------------------------------------------------- TLS


@pytest.mark.slow
def test_tls_run_with_flags_equals_a_local_run(pki, tls_cluster, bars, local_results,
                                               tmp_path):
    out = tmp_path / "results.zarr"
    spec = write_spec(tmp_path / "spec.yaml", spec_data(bars, out))
    client = pki["client"]
    # the flags' paths are read relative to the current directory
    rc, stdout, stderr, _ = barsweep(
        "run", str(spec), "--scheduler", tls_cluster,
        *(arg if arg.startswith("--") else os.path.relpath(arg, tmp_path)
          for arg in client.flags()),
        "--no-progress", cwd=tmp_path)
    assert rc == 0, stderr
    assert "Traceback" not in stderr
    assert f"results in {out}" in stdout
    assert_same_results(out, local_results)


@pytest.mark.slow
def test_tls_run_from_the_spec_with_paths_relative_to_it(pki, tls_cluster, bars,
                                                         local_results, tmp_path):
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "tls").mkdir(parents=True)
    elsewhere.mkdir()
    client = pki["client"]
    for pem, name in ((client.ca, "ca.pem"), (client.cert, "client.pem"),
                      (client.key, "client.key")):
        shutil.copy(pem, project / "tls" / name)
    cluster = {"kind": "scheduler", "address": tls_cluster,
               "security": {"ca": "tls/ca.pem", "cert": "tls/client.pem",
                            "key": "tls/client.key"}}
    spec = write_spec(project / "spec.yaml",
                      spec_data(bars, "results.zarr", cluster=cluster))
    rc, stdout, stderr, _ = barsweep("run", str(spec), "--no-progress", cwd=elsewhere)
    assert rc == 0, stderr
    assert "Traceback" not in stderr
    assert_same_results(project / "results.zarr", local_results)
    assert os.listdir(elsewhere) == []


@pytest.mark.slow
@pytest.mark.parametrize("who", ["no certificate", "plain tcp", "a stranger's certificate",
                                 "trusting another authority"])
def test_tls_refuses_clients_without_the_cluster_certificates(who, pki, tls_cluster, bars,
                                                             tmp_path):
    spec = write_spec(tmp_path / "spec.yaml", spec_data(bars, tmp_path / "results.zarr"))
    before = sorted(os.listdir(tmp_path))
    address, flags = {
        "no certificate": (tls_cluster, []),
        "plain tcp": (tls_cluster.replace("tls://", "tcp://"), []),
        "a stranger's certificate": (tls_cluster, pki["stranger"].flags()),
        "trusting another authority": (tls_cluster, pki["misled"].flags()),
    }[who]
    rc, stdout, stderr, seconds = barsweep("run", str(spec), "--scheduler", address, *flags,
                                           "--no-progress", cwd=tmp_path,
                                           cli=CLI_SLOW_CONNECT)
    assert rc == 2, stderr
    assert "Traceback" not in stdout + stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("barsweep: error: "), stderr
    assert address in lines[0]
    if who == "no certificate":
        assert "--tls-ca, --tls-cert and --tls-key" in lines[0]
    else:
        assert f"cannot reach the Dask scheduler at {address}" in lines[0]
    # refused by the handshake, not by the connect timeout (process start included)
    assert seconds < SLOW_CONNECT_S, seconds
    assert sorted(os.listdir(tmp_path)) == before  # no store, no lock
    with tls_client(tls_cluster, pki["client"]) as client:  # refused: the cluster is up
        assert len(client.scheduler_info()["workers"]) == 1


# --------------------------------------------------------------------------- dashboard bind


def listening(pids) -> dict[int, set[str]]:
    """The addresses each listening TCP port of the processes ``pids`` is bound to."""
    ports: dict[int, set[str]] = {}
    for pid in pids:
        for conn in psutil.Process(pid).net_connections(kind="inet"):
            if conn.status == psutil.CONN_LISTEN:
                ports.setdefault(conn.laddr.port, set()).add(conn.laddr.ip)
    return ports


def port_of(address: str) -> int:
    return urllib.parse.urlsplit(address).port


def cluster_ports(client) -> tuple[int, set[int], set[int]]:
    """The dashboard's port; the scheduler's and nannies' (this process); the workers'
    (their own processes), each worker's address and its diagnostics server."""
    workers = client.scheduler_info()["workers"]
    here = {port_of(client.scheduler.address), *(port_of(w["nanny"]) for w in workers.values())}
    theirs = {port_of(a) for a in workers} | {w["services"]["dashboard"]
                                              for w in workers.values()}
    return port_of(client.dashboard_link), here, theirs


def other_address() -> str | None:
    """An IPv4 address of this machine that is not loopback, if it has one."""
    for addresses in psutil.net_if_addrs().values():
        for a in addresses:
            if a.family == socket.AF_INET and not ipaddress.ip_address(a.address).is_loopback:
                return a.address
    return None


def http_status(host: str, port: int) -> int:
    """The status of GET /health on the dashboard at ``host:port`` (no proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://{host}:{port}/health", timeout=10) as response:
        assert response.read() == b"ok"
        return response.status


@contextmanager
def port_taken(port: int, wait: float = 30.0):
    """``port`` on 127.0.0.1 held by this test. Held by another process (a cluster of a
    test running beside this one), it could be freed mid-test: it is waited for, up to
    ``wait`` seconds; one that holds it longer holds it for the test."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past connections' TIME_WAIT
    t0 = time.monotonic()
    while True:
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
            break
        except OSError:  # busy
            if time.monotonic() - t0 > wait:
                break
            time.sleep(0.1)
    try:
        yield
    finally:
        sock.close()


@pytest.mark.slow
def test_local_cluster_listens_on_loopback_only_by_default():
    assert ClusterSpec(kind="local").dashboard == "127.0.0.1:8787"
    # the default port busy (another run's dashboard): distributed takes another one,
    # on the same host
    with port_taken(8787), connect(ClusterSpec(kind="local"), n_workers=1) as client:
        dashboard, here, theirs = cluster_ports(client)
        worker_pids = set(client.run(os.getpid).values())
        ports = listening({os.getpid()} | worker_pids)
        assert dashboard != 8787 and client.dashboard_link.startswith("http://127.0.0.1:")
        for port in (dashboard, *here, *theirs):
            assert ports[port] == {"127.0.0.1"}, port
        assert set().union(*listening(worker_pids).values()) == {"127.0.0.1"}
        assert http_status("127.0.0.1", dashboard) == 200
        elsewhere = other_address()
        if elsewhere is not None:  # e.g. the machine's LAN address: nobody answers there
            with pytest.raises(urllib.error.URLError, match="refused"):
                http_status(elsewhere, dashboard)


@pytest.mark.slow
def test_dashboard_everywhere_when_the_spec_says_so(tmp_path):
    spec = parse_spec(spec_data(tmp_path, tmp_path / "r.zarr",
                                cluster={"kind": "local", "dashboard": "0.0.0.0:0"}))
    with connect(spec.cluster, n_workers=1) as client:
        dashboard, here, theirs = cluster_ports(client)
        ports = listening({os.getpid()} | set(client.run(os.getpid).values()))
        assert ports[dashboard] == {"0.0.0.0"}
        for port in (*here, *theirs):  # the rest stays on loopback
            assert ports[port] == {"127.0.0.1"}, port
        assert http_status("127.0.0.1", dashboard) == 200
        elsewhere = other_address()
        if elsewhere is not None:
            assert http_status(elsewhere, dashboard) == 200


# --------------------------------------------------------------------------- no code in specs

TOUCH = "touch {marker}"


def code_in_yaml(marker: Path) -> list[str]:
    """Specs whose YAML asks a loader to build Python objects; the first runs ``touch``
    under an unsafe loader (checked below, so that the payload is known to be live)."""
    touch = TOUCH.format(marker=marker)
    base = "data: {store: bars, symbols: [BTCUSDT], timeframe: 1h}\nstrategy: ema_cross\n"
    grid = "grid: {fast: [2, 3], slow: [10]}\n"
    return [
        f'{base}{grid}constraints: [!!python/object/apply:os.system ["{touch}"]]\n',
        f'{base}{grid}run: {{out: !!python/object/apply:os.system ["{touch}"]}}\n',
        f'x: !!python/object/apply:os.system ["{touch}"]\n{base}{grid}',
        f'{base}grid: {{fast: !!python/object/apply:subprocess.check_call '
        f'[[touch, "{marker}"]], slow: [10]}}\n',
        f'{base}{grid}constraints: [!!python/object/new:os.system ["{touch}"]]\n',
        f'{base}{grid}constraints: [!!python/name:os.system ""]\n',
        f'{base}{grid}constraints: [!!python/module:os ""]\n',
        f"{base}{grid}execution: !!python/object:types.SimpleNamespace {{fees: 0.1}}\n",
    ]


def test_yaml_python_tags_are_refused_and_never_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "X"
    texts = code_in_yaml(marker)
    for i, text in enumerate(texts):
        path = tmp_path / f"spec{i}.yaml"
        path.write_text(text)
        with pytest.raises(SpecError, match="not valid YAML.*could not determine a constructor "
                                            "for the tag 'tag:yaml.org,2002:python/"):
            parse_spec(text, source=path.name)
        with pytest.raises(SpecError, match=re.escape(f"{path}: not valid YAML")):
            load_spec(path)
        assert main(["run", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"barsweep: error: invalid sweep spec {path}: not valid YAML")
        assert "\n" not in err and not marker.exists()
    yaml.unsafe_load(texts[0])  # the payload is live: an unsafe loader runs it
    assert marker.exists()


CODE_CONSTRAINTS = [
    "__import__('os').system('{touch}')",
    "__import__('os').system('{touch}') == 0",
    "fast < slow and __import__('os').system('{touch}') == 0",
    "fast.__class__",
    "fast.__class__ == 1",
    "(lambda: 1)()",
    "(lambda: 1)() < fast",
    "fast[0] < slow",
    "fast < slow; __import__('os').system('{touch}')",
    "eval('1') < fast",
    "getattr(fast, 'real') < slow",
    "f'{{fast}}' < slow",
]


@pytest.mark.parametrize("constraint", CODE_CONSTRAINTS)
def test_constraints_are_not_code(constraint, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "X"
    text = constraint.format(touch=TOUCH.format(marker=marker))
    data = spec_data(tmp_path, "r.zarr", constraints=["fast < slow", text])
    with pytest.raises(SpecError, match=r"constraints\[1\]: cannot parse"):
        parse_spec(data)
    path = write_spec(tmp_path / "spec.yaml", data)
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err  # the refused text, with a caret under the column
    assert err.startswith(f"barsweep: error: invalid sweep spec {path}:")
    assert ": constraints[1]: cannot parse" in err.splitlines()[0] and "constraints[0]" not in err
    assert "Traceback" not in err and not marker.exists()
    assert sorted(os.listdir(tmp_path)) == ["spec.yaml"]


def test_rank_filters_are_not_code(tmp_path, capsys):
    marker = tmp_path / "X"
    path = str(tmp_path / "r.zarr")
    create_store(path, ["A"], [("fast", np.array([2, 3]))], (2,), 1, {"spec": "test"})
    write_block(path, (slice(0, 1), slice(0, 2)), np.ones((len(METRICS), 1, 2)), 0)
    touch = TOUCH.format(marker=marker)
    for flags in (["--where", f"__import__('os').system('{touch}') == 0"],
                  ["--where", "sharpe.__class__ == 1"],
                  ["--by", f"__import__('os').system('{touch}')"]):
        assert main(["rank", path, *flags]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("barsweep: error: ") and "Traceback" not in err, err
        assert not marker.exists()


# --------------------------------------------------------------------------- cluster keys


@pytest.fixture
def pem_files(tmp_path) -> dict[str, str]:
    """Three files standing in for PEM files (only their presence is checked here)."""
    files = {}
    for key in ("ca", "cert", "key"):
        (tmp_path / f"{key}.pem").write_text("-----BEGIN CERTIFICATE-----\n")
        files[key] = str(tmp_path / f"{key}.pem")
    return files


def refused_cluster(cluster, tmp_path) -> str:
    with pytest.raises(SpecError) as info:
        parse_spec(spec_data(tmp_path, "r.zarr", cluster=cluster), source="s.yaml")
    return str(info.value)


@pytest.mark.parametrize(("cluster", "expected"), [
    ({"kind": "scheduler", "address": "tcp://h:8786", "security": "PEM"},
     "cluster.security: TLS needs a tls:// address, got 'tcp://h:8786'"),
    ({"kind": "local", "security": "PEM"},
     "cluster.security: a cluster started here (local) takes 'temporary' (the default"),
    ({"kind": "cuda", "security": "PEM"}, "TLS files are for a remote scheduler or slurm/pbs"),
    ({"kind": "scheduler", "address": "tls://h:8786", "dashboard": "0.0.0.0:8787"},
     "cluster.dashboard: applies to clusters barsweep starts"),
    ({"kind": "local", "dashboard": "everywhere"}, "cluster.dashboard: expected HOST:PORT"),
    ({"kind": "slurm", "cores": 8}, "cluster.memory: kind 'slurm' needs memory"),
    ({"kind": "pbs", "memory": "16GB"}, "cluster.cores: kind 'pbs' needs cores"),
    ({"kind": "local", "cores": 8}, "cluster.cores: applies to kinds slurm and pbs"),
    ({"kind": "scheduler"}, "cluster.address: kind 'scheduler' needs the scheduler's address"),
    ({"kind": "local", "address": "tls://h:8786"}, "cluster.address: applies to kind"),
])
def test_cluster_refusals_are_one_line_naming_the_key(cluster, expected, pem_files, tmp_path):
    if cluster.get("security") == "PEM":
        cluster = {**cluster, "security": pem_files}
    message = refused_cluster(cluster, tmp_path)
    assert message == f"invalid sweep spec s.yaml: {message.split(': ', 1)[1]}"
    assert "\n" not in message and expected in message, message


def test_slurm_without_cores_or_memory_names_both(tmp_path):
    message = refused_cluster({"kind": "slurm"}, tmp_path)
    assert message.splitlines()[1:] == [
        "  cluster.cores: kind 'slurm' needs cores (per job), e.g. cores: 32, memory: 64GB",
        "  cluster.memory: kind 'slurm' needs memory (per job), e.g. cores: 32, memory: 64GB"]


def test_a_missing_tls_file_is_named(pem_files, tmp_path):
    os.remove(pem_files["cert"])
    security = {k: os.path.relpath(v, tmp_path) for k, v in pem_files.items()}
    path = write_spec(tmp_path / "spec.yaml", spec_data(tmp_path, "r.zarr", cluster={
        "kind": "scheduler", "address": "tls://h:8786", "security": security}))
    with pytest.raises(SpecError) as info:
        load_spec(path)  # relative to the spec's directory, named as the absolute path
    assert str(info.value) == (f"invalid sweep spec {path}: cluster.security.cert: "
                               f"no file at {pem_files['cert']}")
    spec = parse_spec(spec_data(tmp_path, "r.zarr"))
    with pytest.raises(SpecError, match=re.escape(f"key: no file at {tmp_path / 'nope.key'}")):
        with_scheduler(spec, "tls://h:8786", {**pem_files, "cert": pem_files["ca"],
                                              "key": str(tmp_path / "nope.key")})


@pytest.mark.parametrize(("flags", "missing"), [
    (["--tls-ca", "CA"], "--tls-cert, --tls-key missing"),
    (["--tls-ca", "CA", "--tls-key", "CA"], "--tls-cert missing"),
    (["--tls-cert", "CA", "--tls-key", "CA"], "--tls-ca missing"),
])
def test_tls_flags_go_together(flags, missing, pem_files, tmp_path, capsys):
    flags = [pem_files["ca"] if f == "CA" else f for f in flags]
    path = write_spec(tmp_path / "spec.yaml", spec_data(tmp_path, tmp_path / "r.zarr"))
    assert main(["run", str(path), "--scheduler", "tls://127.0.0.1:9", *flags]) == 2
    err = capsys.readouterr().err
    assert err == (f"barsweep: error: TLS needs --tls-ca, --tls-cert and --tls-key together: "
                   f"{missing}\n")
    assert not (tmp_path / "r.zarr").exists()


def test_tls_flags_need_a_tls_scheduler(pem_files, tmp_path, capsys):
    path = write_spec(tmp_path / "spec.yaml", spec_data(tmp_path, tmp_path / "r.zarr"))
    flags = ["--tls-ca", pem_files["ca"], "--tls-cert", pem_files["cert"],
             "--tls-key", pem_files["key"]]
    assert main(["run", str(path), "--scheduler", "tcp://127.0.0.1:9", *flags]) == 2
    assert capsys.readouterr().err == (
        "barsweep: error: --scheduler/--tls-*: cluster.security: TLS needs a tls:// address, "
        "got 'tcp://127.0.0.1:9'\n")
    assert main(["run", str(path), *flags]) == 2  # and a local cluster takes none
    err = capsys.readouterr().err
    assert err.startswith("barsweep: error: --scheduler/--tls-*: cluster.security: a cluster "
                          "started here (auto) takes 'temporary'") and err.count("\n") == 1
    assert not (tmp_path / "r.zarr").exists()
