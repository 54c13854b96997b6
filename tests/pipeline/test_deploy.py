"""The deployment recipes (docs/deploy.md, docs/deploy/) held to the code they drive.

The Kubernetes manifest and the Dockerfile are read as data and checked field by field;
the SLURM and PBS job scripts are rendered from a spec by ``jobqueue_cluster`` (a local
scheduler starts, no job is ever submitted) and checked line by line, and a rendered
script is run with ``bash`` to see its workers join (plain and TLS). Every command line,
spec and job script shown in docs/deploy.md is parsed with the real parsers, validated
or compared with what the code renders, so the page cannot drift from the code.
"""

from __future__ import annotations

import operator
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import psutil
import pytest
import yaml
from dask.utils import parse_bytes
from distributed import Client
from distributed.cli.dask_scheduler import main as dask_scheduler_cli
from distributed.cli.dask_worker import main as dask_worker_cli

from barsweep.errors import BackendError
from barsweep.pipeline.cli import build_parser
from barsweep.pipeline.config.model import Spec, load_spec, parse_spec
from barsweep.pipeline.config.overrides import with_scheduler
from barsweep.pipeline.run.cluster import check_address, jobqueue_cluster

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deploy.md"
MANIFEST = ROOT / "docs" / "deploy" / "kubernetes.yaml"
DOCKERFILE = ROOT / "docs" / "deploy" / "Dockerfile"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]

# a busy 8787 moves a rendered cluster's dashboard elsewhere, with a warning
pytestmark = pytest.mark.filterwarnings("ignore:Port \\d+ is already in use")

BASE = {
    "data": {"store": "bars/", "symbols": ["BTCUSDT"], "timeframe": "1h"},
    "strategy": "ema_cross",
    "grid": {"fast": [5, 10], "slow": [20, 40]},
    "constraints": ["fast < slow"],
}
JOBQUEUE = {"cores": 4, "memory": "8GB", "walltime": "00:30:00", "jobs": 2,
            "queue": "short", "account": "proj"}
TLS_FILES = {"ca": "tls/ca.pem", "cert": "tls/cert.pem", "key": "tls/key.pem"}


# --------------------------------------------------------------------------- helpers


def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def fenced(text: str, lang: str) -> list[str]:
    """The bodies of the ```lang fenced blocks of markdown ``text`` (lang "" : plain)."""
    return [m.group(2) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S)
            if m.group(1) == lang]


def commands(block: str):
    """Each shell command of ``block`` as tokens: backslash continuations joined, quotes
    spanning lines kept whole, comments and leading ``VAR=value`` assignments dropped."""
    pending = ""
    for line in block.replace("\\\n", " ").splitlines():
        pending = f"{pending}\n{line}" if pending else line
        try:
            tokens = shlex.split(pending, comments=True)
        except ValueError:  # a quote open across lines
            continue
        pending = ""
        while tokens and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", tokens[0]):
            tokens.pop(0)
        if tokens:
            yield tokens
    assert not pending, f"unbalanced quotes in a command of docs/deploy.md: {pending!r}"


def doc_commands(program: str) -> list[list[str]]:
    """Commands of docs/deploy.md's bash blocks and inline code that run ``program``
    (``"barsweep"``, ``"dask scheduler"``...), as tokens; ``$(nproc)`` made 4."""
    text = doc_text()
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    # inline code of more than two words is a command; `barsweep run` is a name
    inline = [" ".join(m.group(1).split()) for m in re.finditer(r"`([^`]+)`", prose)
              if len(m.group(1).split()) > 2]
    sources = fenced(text, "bash") + inline
    words = program.split()
    found = []
    for source in sources:
        for tokens in commands(source.replace("$(nproc)", "4")):
            if tokens[:len(words)] == words and len(tokens) > len(words):  # not a name
                found.append(tokens)
    return found


def spec_blocks() -> list[dict]:
    """The YAML blocks of docs/deploy.md, each a whole spec or a part of one."""
    return [yaml.safe_load(block) for block in fenced(doc_text(), "yaml")]


def write_spec(directory: Path, data: dict) -> Path:
    """``data`` as spec.yaml in ``directory``, with the TLS files it names made there
    (relative to the spec, as load_spec resolves them)."""
    cluster = data.get("cluster")
    security = cluster.get("security") if isinstance(cluster, dict) else None
    for path in (security or {}).values():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_text("PEM\n")
    path = directory / "spec.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def doc_jobqueue_spec() -> dict:
    """The doc's whole SLURM spec."""
    [spec] = [s for s in spec_blocks()
              if isinstance(s.get("cluster"), dict) and s["cluster"].get("kind") == "slurm"]
    return spec


def rendered(cluster_spec) -> str:
    """The job script ``jobqueue_cluster`` renders; the cluster (a local scheduler) is
    closed again and nothing is submitted."""
    with jobqueue_cluster(cluster_spec) as cluster:
        return cluster.job_script()


def worker_line(script: str) -> list[str]:
    [line] = [line for line in script.splitlines() if "distributed.cli.dask_worker" in line]
    return shlex.split(line)


def normalized(script: str) -> str:
    """``script`` with the worker command's Python and scheduler address as
    placeholders (they differ per machine and per run)."""
    return re.sub(r"^\S+ -m distributed\.cli\.dask_worker \S+://\S+ ",
                  "PYTHON -m distributed.cli.dask_worker ADDRESS ", script.strip(), flags=re.M)


def option(tokens: list[str], name: str) -> str:
    assert name in tokens, f"{name} missing from {tokens}"
    return tokens[tokens.index(name) + 1]


def manifest() -> dict:
    return yaml.safe_load(MANIFEST.read_text(encoding="utf-8"))


def container(part: str) -> dict:
    [one] = manifest()["spec"][part]["spec"]["containers"]
    return one


def ports(c: dict) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in c.get("ports", [])}


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuations joined."""
    text = DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory) -> Path:
    """A CA and a certificate made by docs/deploy.md's OpenSSL recipe, run as written."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    [recipe] = [b for b in fenced(doc_text(), "bash") if "openssl req -x509" in b]
    base = tmp_path_factory.mktemp("recipe")
    subprocess.run(["bash", "-euo", "pipefail", "-c", recipe], cwd=base, check=True,
                   capture_output=True, timeout=120)
    tls = base / "tls"
    for name in ("ca.pem", "cert.pem", "key.pem"):
        assert (tls / name).is_file(), name
    verified = subprocess.run(["openssl", "verify", "-x509_strict", "-CAfile", "ca.pem",
                               "cert.pem"], cwd=tls, capture_output=True, text=True)
    assert verified.returncode == 0, verified.stderr
    return tls


# --------------------------------------------------------------------------- Kubernetes


def test_manifest_is_a_dask_operator_cluster():
    m = manifest()
    assert m["apiVersion"] == "kubernetes.dask.org/v1"
    assert m["kind"] == "DaskCluster"
    assert m["metadata"]["name"] == "barsweep"
    replicas = m["spec"]["worker"]["replicas"]
    assert type(replicas) is int and replicas > 0


def test_manifest_workers_run_one_single_threaded_worker_each():
    worker = container("worker")
    args = worker["args"]
    assert args[:2] == ["dask", "worker"]
    assert option(args, "--nthreads") == "1"
    assert "--nworkers" not in args or option(args, "--nworkers") == "1"
    # the operator sets DASK_WORKER_NAME (and DASK_SCHEDULER_ADDRESS) in the container
    assert option(args, "--name") == "$(DASK_WORKER_NAME)"
    assert ports(worker)["http-dashboard"] == int(option(args, "--dashboard-address"))
    # the real `dask worker` parser accepts the arguments
    params = dask_worker_cli.make_context(
        "dask worker", [a.replace("$(DASK_WORKER_NAME)", "w-1") for a in args[2:]]).params
    assert params["nthreads"] == 1 and params["name"] == "w-1"
    assert params["scheduler"] is None  # taken from DASK_SCHEDULER_ADDRESS
    env = {e["name"]: e["value"] for e in worker.get("env", [])}
    assert env.get("DASK_LOGGING__DISTRIBUTED") == "warning"
    assert not {"DASK_WORKER_NAME", "DASK_SCHEDULER_ADDRESS"} & set(env)  # the operator's
    resources = worker["resources"]
    assert resources["requests"]["cpu"] == resources["limits"]["cpu"] == "1"
    assert resources["limits"]["memory"] == resources["requests"]["memory"]


def test_manifest_scheduler_ports_probes_and_service():
    scheduler = container("scheduler")
    assert scheduler["args"][:2] == ["dask", "scheduler"]
    dask_scheduler_cli.make_context("dask scheduler", scheduler["args"][2:])
    named = ports(scheduler)
    assert named == {"tcp-comm": 8786, "http-dashboard": 8787}
    for probe in ("readinessProbe", "livenessProbe"):
        get = scheduler[probe]["httpGet"]
        assert get["path"] == "/health"
        assert get["port"] == "http-dashboard"
    service = manifest()["spec"]["scheduler"]["service"]
    assert service["type"] == "ClusterIP"
    assert service["selector"] == {"dask.org/cluster-name": manifest()["metadata"]["name"],
                                   "dask.org/component": "scheduler"}
    by_port = {p["port"]: p for p in service["ports"]}
    assert set(by_port) == {8786, 8787}
    for p in service["ports"]:
        assert named[p["targetPort"]] == p["port"]


def test_manifest_image_is_the_documented_build_of_this_version():
    [build] = doc_commands("docker build")
    tag = option(build, "-t")
    assert tag == f"barsweep:{VERSION}"
    assert ROOT / option(build, "-f") == DOCKERFILE
    assert build[-1] == "."  # built from the repository root: the Dockerfile's COPY paths
    assert container("worker")["image"] == container("scheduler")["image"] == tag
    # the Dockerfile's own comment shows the same command
    comment = re.search(r"^#\s+(docker build .*)$", DOCKERFILE.read_text(), re.M)
    assert comment and shlex.split(comment.group(1)) == build


def test_doc_reaches_the_manifests_service_and_worker_group():
    name = manifest()["metadata"]["name"]
    service_ports = {p["port"] for p in manifest()["spec"]["scheduler"]["service"]["ports"]}
    kubectl = doc_commands("kubectl")
    [forward] = [c for c in kubectl if c[1] == "port-forward"]
    assert forward[2] == f"svc/{name}-scheduler"  # the operator names the service so
    local = {}
    for pair in forward[3:]:
        here, there = map(int, pair.split(":"))
        assert there in service_ports
        local[there] = here
    [scale] = [c for c in kubectl if c[1] == "scale"]
    assert scale[-2:] == ["daskworkergroup", f"{name}-default"]
    assert re.fullmatch(r"--replicas=\d+", scale[2])
    for c in kubectl:
        if "-f" in c:
            assert (ROOT / option(c, "-f")) == MANIFEST
    runs = [c for c in doc_commands("barsweep") if "localhost" in " ".join(c)]
    assert runs and all(option(c, "--scheduler") == f"tcp://localhost:{local[8786]}"
                        for c in runs)


# --------------------------------------------------------------------------- Dockerfile


def test_dockerfile_installs_barsweep_from_the_checkout_on_python_311():
    instructions = dockerfile()
    assert instructions[0][0] == "FROM"
    assert re.fullmatch(r"python:3\.11(-slim)?", instructions[0][1])
    copied = set()
    for keyword, rest in instructions:
        if keyword == "COPY":
            *sources, _ = shlex.split(rest)
            copied.update(s.rstrip("/") for s in sources)
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"barsweep": "."}  # the root is the package
    folders = {name.split(".", 1)[1].replace(".", "/") for name in setuptools["packages"]
               if "." in name}
    needed = {"pyproject.toml", PYPROJECT["project"]["readme"], *folders,
              *(path.name for path in ROOT.glob("*.py"))}
    lacking = [path for path in needed
               if not any(path == c or path.startswith(f"{c}/") for c in copied)]
    assert not lacking, f"the image lacks {lacking}"
    runs = " ; ".join(rest for keyword, rest in instructions if keyword == "RUN")
    assert re.search(r"\bpip install\b[^;&]*\s\.(\s|$)", runs), runs
    users = [rest for keyword, rest in instructions if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    # dask and distributed come with barsweep: the `dask` command the pods run
    deps = {re.split(r"[<>=!~\[ ]", d)[0] for d in PYPROJECT["project"]["dependencies"]}
    assert {"dask", "distributed"} <= deps


# --------------------------------------------------------------------------- SLURM, PBS


def jobqueue_spec(kind: str, **extra) -> Spec:
    directives = ["--constraint=avx2"] if kind == "slurm" else ["-l place=scatter"]
    cluster = {"kind": kind, **JOBQUEUE, "job_directives": directives, **extra}
    return parse_spec({**BASE, "cluster": cluster})


def header(script: str, prefix: str) -> list[str]:
    return [line[len(prefix):].strip() for line in script.splitlines()
            if line.startswith(prefix)]


def check_worker_command(script: str, cores: int, memory_bytes: float) -> list[str]:
    lines = script.splitlines()
    assert "export DASK_LOGGING__DISTRIBUTED=warning" in lines
    tokens = worker_line(script)
    assert tokens[:3] == [sys.executable, "-m", "distributed.cli.dask_worker"]
    check_address(tokens[3], "job script")
    assert option(tokens, "--nworkers") == str(cores)
    assert option(tokens, "--nthreads") == "1"
    per_worker = parse_bytes(option(tokens, "--memory-limit"))
    assert abs(per_worker - memory_bytes / cores) < 0.01 * memory_bytes / cores
    # the export precedes the worker command
    assert lines.index("export DASK_LOGGING__DISTRIBUTED=warning") < next(
        i for i, line in enumerate(lines) if "dask_worker" in line)
    return tokens


@pytest.mark.requires_jobqueue
def test_slurm_job_script():
    script = rendered(jobqueue_spec("slurm").cluster)
    assert script.startswith("#!/usr/bin/env bash")
    assert header(script, "#SBATCH") == [
        "-J dask-worker", "-p short", "-A proj", "-n 1", "--cpus-per-task=4", "--mem=8G",
        "-t 00:30:00", "--constraint=avx2"]
    tokens = check_worker_command(script, cores=4, memory_bytes=8e9)
    assert tokens[3].startswith("tcp://")
    assert "--tls-cert" not in tokens


@pytest.mark.requires_jobqueue
def test_pbs_job_script():
    script = rendered(jobqueue_spec("pbs").cluster)
    assert header(script, "#PBS") == [
        "-N dask-worker", "-q short", "-A proj", "-l select=1:ncpus=4:mem=7630MB",
        "-l walltime=00:30:00", "-l place=scatter"]
    check_worker_command(script, cores=4, memory_bytes=8e9)


@pytest.mark.requires_jobqueue
def test_jobqueue_scheduler_dashboard_stays_on_localhost():
    spec = jobqueue_spec("slurm")
    with jobqueue_cluster(spec.cluster) as cluster:
        assert cluster.scheduler_spec["options"]["dashboard_address"] == "127.0.0.1:8787"
        port = cluster.scheduler.http_server.port
        process = psutil.Process()
        sockets = getattr(process, "net_connections", None) or process.connections
        listening = {c.laddr.ip for c in sockets("tcp")
                     if c.status == psutil.CONN_LISTEN and c.laddr.port == port}
        assert listening == {"127.0.0.1"}
    spec = jobqueue_spec("slurm", dashboard="0.0.0.0:0")
    with jobqueue_cluster(spec.cluster) as cluster:
        assert cluster.scheduler_spec["options"]["dashboard_address"] == "0.0.0.0:0"


@pytest.mark.requires_jobqueue
def test_jobqueue_tls_gives_scheduler_and_workers_the_certificate(tls_dir):
    tls = {k: str(tls_dir / Path(v).name) for k, v in TLS_FILES.items()}
    spec = jobqueue_spec("slurm", security=tls)
    # a Security with only the client's certificate left the scheduler without one:
    # it could not start ("TLS expects a `ssl_context` argument")
    with jobqueue_cluster(spec.cluster) as cluster:
        assert cluster.scheduler_address.startswith("tls://")
        tokens = worker_line(cluster.job_script())
    assert tokens[3].startswith("tls://")
    assert option(tokens, "--protocol") == "tls://"
    assert option(tokens, "--tls-ca-file") == tls["ca"]
    assert option(tokens, "--tls-cert") == tls["cert"]
    assert option(tokens, "--tls-key") == tls["key"]


@pytest.mark.requires_jobqueue
@pytest.mark.slow
@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
def test_rendered_job_script_starts_workers_that_join(tmp_path, tls, request):
    """The script a job would run, run here with bash (never submitted): its workers
    join the scheduler, one thread each, with this Python and the quiet logging."""
    extra = {}
    if tls:
        tls_dir = request.getfixturevalue("tls_dir")
        extra["security"] = {k: str(tls_dir / Path(v).name) for k, v in TLS_FILES.items()}
    spec = parse_spec({**BASE, "cluster": {"kind": "slurm", "cores": 2, "memory": "2GB",
                                           "dashboard": "127.0.0.1:0", **extra}})
    with jobqueue_cluster(spec.cluster) as cluster, \
            Client(cluster, security=cluster.security) as client:
        script = tmp_path / "job.sh"
        script.write_text(cluster.job_script())
        log = (tmp_path / "job.log").open("w")
        job = subprocess.Popen(["bash", str(script)], stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True, cwd=tmp_path)
        try:
            client.wait_for_workers(2, timeout=90)
            workers = client.scheduler_info(n_workers=-1)["workers"]
            assert len(workers) == 2
            assert all(address.startswith("tls://" if tls else "tcp://")
                       for address in workers)
            assert {w["nthreads"] for w in workers.values()} == {1}
            assert all(abs(w["memory_limit"] - 1e9) < 1e7 for w in workers.values())
            assert set(client.run(lambda: sys.executable).values()) == {sys.executable}
            assert set(client.run(
                lambda: os.environ.get("DASK_LOGGING__DISTRIBUTED")).values()) == {"warning"}
            assert client.submit(operator.add, 1, 2).result(timeout=30) == 3
        finally:
            os.killpg(job.pid, signal.SIGTERM)
            job.wait(timeout=60)
            log.close()


def test_hpc_extra_names_dask_jobqueue():
    hpc = PYPROJECT["project"]["optional-dependencies"]["hpc"]
    assert any(re.match(r"dask-jobqueue\b", req) for req in hpc), hpc
    assert "[hpc]" in doc_text()


def test_missing_dask_jobqueue_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)  # import fails
    with pytest.raises(BackendError, match=r"\[hpc\] extra"):
        jobqueue_cluster(jobqueue_spec("slurm").cluster)


# --------------------------------------------------------------------------- the doc


@pytest.fixture
def tls_files_here(tmp_path, monkeypatch) -> None:
    """A current directory holding the doc's tls/ files (flags are relative to it)."""
    monkeypatch.chdir(tmp_path)
    for path in TLS_FILES.values():
        Path(path).parent.mkdir(exist_ok=True)
        Path(path).write_text("PEM\n")


@pytest.mark.usefixtures("tls_files_here")
def test_every_barsweep_command_in_the_doc_parses():
    base = parse_spec(BASE)
    found = doc_commands("barsweep")
    assert len(found) >= 6 and "run" in {c[1] for c in found}
    parser = build_parser()
    for tokens in found:
        line = shlex.join(tokens)
        try:
            args = parser.parse_args(tokens[1:])
        except SystemExit:
            pytest.fail(f"docs/deploy.md: `{line}` does not parse")
        if args.command == "run":
            if args.scheduler is not None:
                check_address(args.scheduler, "--scheduler")
            # the flags combine as the CLI combines them (TLS needs all three, tls://)
            with_scheduler(base, args.scheduler,
                           {"ca": args.tls_ca, "cert": args.tls_cert, "key": args.tls_key})


@pytest.mark.usefixtures("tls_files_here")
def test_every_dask_command_in_the_doc_parses():
    schedulers = doc_commands("dask scheduler")
    workers = doc_commands("dask worker")
    assert len(schedulers) >= 2 and len(workers) >= 2
    for cli, found in ((dask_scheduler_cli, schedulers), (dask_worker_cli, workers)):
        for tokens in found:
            try:
                params = cli.make_context(" ".join(tokens[:2]), tokens[2:]).params
            except click.ClickException as err:
                pytest.fail(f"docs/deploy.md: `{shlex.join(tokens)}`: {err.format_message()}")
            if cli is dask_worker_cli:
                assert params["nthreads"] == 1, shlex.join(tokens)
                check_address(params["scheduler"], "dask worker")
            else:
                assert params["dashboard_address"].startswith("127.0.0.1:")
            tls = params["tls_ca_file"] is not None
            assert tls == (params.get("protocol") == "tls" or
                           str(params.get("scheduler")).startswith("tls://"))


def test_every_spec_in_the_doc_validates(tmp_path):
    blocks = spec_blocks()
    assert len(blocks) >= 3
    kinds = set()
    for i, data in enumerate(blocks):
        assert isinstance(data, dict) and set(data) <= set(Spec.model_fields), data
        whole = {**BASE, **data} if not {"data", "strategy"} <= set(data) else data
        directory = tmp_path / f"spec{i}"
        directory.mkdir()
        spec = load_spec(write_spec(directory, whole))
        kinds.add(spec.cluster.kind)
        if spec.cluster.security is not None:  # relative to the spec file
            assert spec.cluster.security.ca == str(directory / "tls" / "ca.pem")
    assert {"scheduler", "slurm", "cuda"} <= kinds


@pytest.mark.requires_jobqueue
def test_doc_job_script_is_what_the_doc_command_renders(tmp_path):
    """The page's command that prints the job script runs, and prints the script the
    page shows (Python and scheduler address aside)."""
    write_spec(tmp_path, doc_jobqueue_spec())
    [command] = [c for b in fenced(doc_text(), "bash") for c in commands(b)
                 if "job_script()" in " ".join(c)]
    assert command[1] == "-c"
    out = subprocess.run([sys.executable, "-c", command[2]], cwd=tmp_path, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    [shown] = [b for b in fenced(doc_text(), "") if b.startswith("#!/usr/bin/env bash")]
    assert normalized(out) == normalized(shown)
    assert worker_line(shown)[0] == command[0]  # the same shared environment's Python
    # the PBS header the page quotes
    pbs = parse_spec({**doc_jobqueue_spec(), "cluster": {
        **doc_jobqueue_spec()["cluster"], "kind": "pbs", "job_directives": []}})
    lines = rendered(pbs.cluster).splitlines()
    quoted = re.findall(r"`(#PBS [^`]+)`", doc_text())
    assert len(quoted) >= 4 and all(q in lines for q in quoted), (quoted, lines)


def test_doc_names_test_files_that_exist():
    named = set(re.findall(r"tests/pipeline/test_\w+\.py", doc_text()))
    assert {"tests/pipeline/test_deploy.py", "tests/pipeline/test_cluster_security.py",
            "tests/pipeline/test_cluster_data.py"} <= named
    for path in named:
        assert (ROOT / path).is_file(), path
