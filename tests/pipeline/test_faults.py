"""Faults inflicted on real processes: a driver SIGKILLed then resumed, Ctrl-C, workers
SIGKILLed (LocalCluster and external `dask worker`s), a block that fails for good, a
cluster without workers. Each run's store must equal an undisturbed run's, bit for bit,
or the run must stop in one line, leaving a store that says it is incomplete."""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr
from helpers.compare import assert_same_store

from barsweep.engine import METRICS
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.model import parse_spec
from barsweep.pipeline.run.cluster import connect
from barsweep.pipeline.run.orchestrate import run_spec
from barsweep.pipeline.run.results import store_attrs, update_attrs

pytestmark = pytest.mark.slow

N_BARS = 150_000
N_BLOCKS = 25  # 4,263 combos in blocks of 200 (fast, slow) pairs, ~0.1-0.3 s each
CLI = [sys.executable, "-m", "barsweep.pipeline.cli"]


@pytest.fixture(scope="module")
def bars(tmp_path_factory):
    store = tmp_path_factory.mktemp("bars")
    assert main(["data", "synth", "--symbol", "BTCUSDT", "--timeframe", "1h", "--bars",
                 str(N_BARS), "--seed", "11", "--store", str(store)]) == 0
    return store


def write_spec(directory: Path, store: Path, name: str = "spec.yaml", **more) -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump({
        "data": {"store": str(store), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": {"start": 2, "stop": 50, "step": 1},
                 "slow": {"start": 10, "stop": 200, "step": 2}},
        "constraints": ["fast < slow"],
        "execution": {"fill": "next_open", "fees": 0.001},
        "run": {"block_size": 200, "out": str(directory / "results.zarr")},
        **more,
    }))
    return path


@pytest.fixture(scope="module")
def undisturbed(bars, tmp_path_factory):
    """The store of a run nothing happened to."""
    directory = tmp_path_factory.mktemp("undisturbed")
    assert main(["run", str(write_spec(directory, bars)), "--workers", "2",
                 "--no-progress"]) == 0
    return directory / "results.zarr"


def n_done(out: Path) -> int:
    flags = out / "done" / "c"
    return len(os.listdir(flags)) if flags.is_dir() else 0


def wait_for_blocks(out: Path, at_least: int, proc=None, timeout: float = 240.0) -> int:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if (count := n_done(out)) >= at_least:
            return count
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run ended first: {proc.communicate()}")
        time.sleep(0.02)
    raise AssertionError(f"fewer than {at_least} blocks done after {timeout} s")


def start_run(spec: Path, *args: str) -> subprocess.Popen:
    """`barsweep run` in its own process group, as a terminal would start it."""
    return subprocess.Popen([*CLI, "run", str(spec), "--no-progress", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def block_files(out: Path) -> dict[str, tuple[int, int, int]]:
    """(inode, mtime, size) of every chunk file of every block marked done."""
    group = zarr.open_group(str(out), mode="r")
    chunks = group[METRICS[0]].chunks
    counts = [-(-n // c) for n, c in zip(group[METRICS[0]].shape, chunks)]
    files = {}
    for block in np.flatnonzero(group["done"][:] == 1):
        s, rest = divmod(int(block), int(np.prod(counts[1:])))
        index = (s, *np.unravel_index(rest, counts[1:]))
        paths = [out / "done" / "c" / str(block)]
        paths += [out / name / "c" / "/".join(map(str, index)) for name in METRICS]
        for p in paths:
            if p.exists():
                st = p.stat()
                files[str(p)] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return files


def test_driver_sigkilled_then_resumed_equals_an_undisturbed_run(bars, undisturbed, tmp_path,
                                                                 capsys):
    spec = write_spec(tmp_path, bars)
    out = tmp_path / "results.zarr"
    proc = start_run(spec, "--workers", "1")
    wait_for_blocks(out, 3, proc)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and the workers it started
    proc.wait()
    done_before = block_files(out)
    n_before = sum("/done/c/" in p for p in done_before)
    assert 3 <= n_before < N_BLOCKS
    assert store_attrs(out)["complete"] is False
    assert main(["rank", str(out)]) == 2
    assert f"{N_BLOCKS - n_before} of {N_BLOCKS} blocks missing" in capsys.readouterr().err
    assert main(["run", str(spec), "--out", str(out)]) == 2  # neither flag: refused
    assert "pass --overwrite to replace it or --resume" in capsys.readouterr().err

    assert main(["run", str(spec), "--resume", "--workers", "2", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert (f"{n_before} of {N_BLOCKS} blocks already done, {N_BLOCKS - n_before} to "
            f"compute") in printed
    after = block_files(out)
    assert {p: after.get(p) for p in done_before} == done_before  # no done block rewritten
    assert_same_store(out, undisturbed)
    assert store_attrs(out)["blocks_resumed"] == n_before
    assert store_attrs(out)["n_combos"] == 4263


WALK_FORWARD = {"train": 30_000, "test": 30_000}  # 4 windows, each block runs all of them


def test_a_walk_forward_driver_sigkilled_then_resumed_equals_an_undisturbed_run(bars,
                                                                                tmp_path):
    (tmp_path / "whole").mkdir()
    whole = write_spec(tmp_path / "whole", bars, walk_forward=WALK_FORWARD)
    assert main(["run", str(whole), "--workers", "2", "--no-progress"]) == 0
    undisturbed = tmp_path / "whole" / "results.zarr"
    group = zarr.open_group(str(undisturbed), mode="r")
    assert group["window"].shape == (4,) and group["done"].shape == (N_BLOCKS,)
    spec = write_spec(tmp_path, bars, walk_forward=WALK_FORWARD)
    out = tmp_path / "results.zarr"
    proc = start_run(spec, "--workers", "1")
    wait_for_blocks(out, 3, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    n_before = n_done(out)
    assert 3 <= n_before < N_BLOCKS and store_attrs(out)["complete"] is False
    assert main(["run", str(spec), "--resume", "--workers", "2", "--no-progress"]) == 0
    assert store_attrs(out)["blocks_resumed"] == n_before
    assert_same_store(out, undisturbed)


def test_resume_refuses_another_spec_or_other_bars(bars, undisturbed, tmp_path, capsys):
    out = tmp_path / "results.zarr"
    shutil.copytree(undisturbed, out)
    spec = yaml.safe_load(write_spec(tmp_path, bars).read_text())
    spec["execution"]["fees"] = 0.002
    spec["grid"]["slow"]["stop"] = 150
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(spec))
    assert main(["run", str(tmp_path / "other.yaml"), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "execution.fees was 0.001, now 0.002" in err
    assert "grid.slow.stop was 200, now 150" in err
    assert "dask dashboard" not in (printed := capsys.readouterr().out)
    assert "no dashboard (--dashboard" not in printed

    other_bars = tmp_path / "bars"
    assert main(["data", "synth", "--symbol", "BTCUSDT", "--timeframe", "1h", "--bars",
                 str(N_BARS), "--seed", "12", "--store", str(other_bars)]) == 0
    stored = yaml.safe_load(store_attrs(out)["spec"])
    stored["run"]["out"] = str(out)
    stored["data"]["store"] = str(other_bars)
    (tmp_path / "moved.yaml").write_text(yaml.safe_dump(stored))
    assert main(["run", str(tmp_path / "moved.yaml"), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "the bars' fingerprint was" in err and "data.store was" in err

    update_attrs(str(out), {"barsweep_version": "0.0.1"})  # made by another version
    stored["data"]["store"] = str(bars)
    (tmp_path / "same.yaml").write_text(yaml.safe_dump(stored))
    assert main(["run", str(tmp_path / "same.yaml"), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "barsweep version was '0.0.1'" in err
    assert "fingerprint" not in err and "data." not in err


def test_ctrl_c_stops_in_one_line_and_workers_stop_writing(bars, undisturbed, tmp_path):
    spec = write_spec(tmp_path, bars)
    out = tmp_path / "results.zarr"
    proc = start_run(spec, "--workers", "2")
    wait_for_blocks(out, 2, proc)
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole process group
    stdout, stderr = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 30
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("barsweep: interrupted: ")
    assert f"blocks computed in {out}" in lines[0]
    assert f"barsweep run {spec} --out {out} --resume" in lines[0]
    files = block_files(out)
    count = n_done(out)
    time.sleep(2.0)
    assert n_done(out) == count and block_files(out) == files  # nobody writes any more
    assert store_attrs(out)["complete"] is False
    assert count < N_BLOCKS
    assert main(["run", str(spec), "--resume", "--workers", "2", "--no-progress"]) == 0
    assert_same_store(out, undisturbed)


def test_ctrl_c_counts_computed_blocks_and_says_excluded_ones_apart(bars, tmp_path):
    """Blocks the constraints exclude are never computed: the stop line counts the
    blocks computed of those to compute, and says the excluded ones apart."""
    spec = write_spec(tmp_path, bars, name="excl.yaml")
    config = yaml.safe_load(spec.read_text())
    config["constraints"] = ["fast < slow", "fast >= 30"]  # excludes whole blocks
    spec.write_text(yaml.safe_dump(config))
    out = tmp_path / "results.zarr"
    proc = start_run(spec, "--workers", "2")
    wait_for_blocks(out, 1, proc)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    flags = zarr.open_group(str(out), mode="r")["done"][:]
    computed, pending, excluded = ((flags == f).sum() for f in (1, 0, 2))
    assert excluded > 0 and pending > 0
    line = one_stop_line(stderr, "interrupted")
    assert (f"{computed} of {computed + pending} blocks computed in {out}; {excluded} "
            f"more are excluded by the constraints; resume with") in line


def kill_a_worker_when_blocks_are_done(client, out: Path, errors: list) -> None:
    try:
        wait_for_blocks(out, 2)
        pids = client.run(os.getpid)
        os.kill(sorted(pids.values())[0], signal.SIGKILL)
    except BaseException as exc:  # reported by the test
        errors.append(exc)


def test_a_worker_sigkilled_mid_run_local_cluster(bars, undisturbed, tmp_path):
    spec = parse_spec(yaml.safe_load(write_spec(tmp_path, bars).read_text()))
    out = tmp_path / "results.zarr"
    errors: list = []
    with connect("local", n_workers=2) as client:
        killer = threading.Thread(target=kill_a_worker_when_blocks_are_done,
                                  args=(client, out, errors))
        killer.start()
        run_spec(spec, client=client)
        killer.join()
        assert not errors
    assert_same_store(out, undisturbed)


@pytest.fixture
def external_cluster(dask_scheduler):
    """A `dask scheduler` started by hand, as on other machines (conftest's); yields
    (address, add_worker): ``add_worker(*flags)`` starts a `dask worker`, its process."""
    return dask_scheduler


def test_a_worker_sigkilled_mid_run_external_workers(bars, undisturbed, tmp_path,
                                                     external_cluster):
    from distributed import Client

    address, add_worker = external_cluster
    add_worker()
    add_worker()
    spec = write_spec(tmp_path, bars)
    out = tmp_path / "results.zarr"
    errors: list = []
    with Client(address) as client:
        client.wait_for_workers(2, timeout=60)
        killer = threading.Thread(target=kill_a_worker_when_blocks_are_done,
                                  args=(client, out, errors))
        killer.start()
        assert main(["run", str(spec), "--scheduler", address, "--no-progress"]) == 0
        killer.join()
    assert not errors
    assert_same_store(out, undisturbed)


def test_no_workers_at_all_stops_after_the_timeout(bars, tmp_path, external_cluster, capsys):
    address, _ = external_cluster
    spec = write_spec(tmp_path, bars)
    t0 = time.monotonic()
    assert main(["run", str(spec), "--scheduler", address, "--worker-timeout", "2",
                 "--no-progress"]) == 1
    assert time.monotonic() - t0 < 30
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert f"no Dask worker connected to {address} for 2 s" in err
    assert not (tmp_path / "results.zarr").exists()


def test_all_workers_lost_mid_run_stops_after_the_timeout(bars, tmp_path, external_cluster):
    address, add_worker = external_cluster
    worker = add_worker("--no-nanny")
    spec = write_spec(tmp_path, bars)
    out = tmp_path / "results.zarr"
    proc = start_run(spec, "--scheduler", address, "--worker-timeout", "3")
    wait_for_blocks(out, 1, proc)
    worker.kill()
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert f"no Dask worker connected to {address} for 3 s" in lines[0]
    assert store_attrs(out)["complete"] is False


def test_a_block_that_fails_for_good_stops_the_run_in_one_line(bars, tmp_path):
    store = tmp_path / "bars"
    shutil.copytree(bars, store)
    spec = write_spec(tmp_path, store)
    out = tmp_path / "results.zarr"
    proc = start_run(spec, "--workers", "1")
    wait_for_blocks(out, 1, proc)
    path = store / "1h" / "BTCUSDT.arrow"
    data = path.read_bytes()
    broken = path.with_suffix(".tmp")
    broken.write_bytes(data[: len(data) // 2])  # a truncated copy replaces the file
    os.replace(broken, path)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("barsweep: error: block ")
    assert "(BTCUSDT, fast " in lines[0] and "failed after 2 retries: " in lines[0]
    assert f"{path}" in lines[0]  # the cause names the file
    assert "tuple" not in lines[0] and "traceback object" not in lines[0]
    assert lines[0].endswith(f"resume with `barsweep run {spec} --out {out} --resume`")
    assert store_attrs(out)["complete"] is False


@pytest.fixture
def quick_connect_timeout(monkeypatch):
    """A refused connection is retried until the connect timeout: 2 s here, not 10, where
    only the refusal is read."""
    monkeypatch.setattr("barsweep.pipeline.run.cluster.CONNECT_TIMEOUT_S", 2)


@pytest.mark.usefixtures("quick_connect_timeout")
def test_an_unreachable_scheduler_is_one_line(bars, tmp_path, capsys):
    spec = yaml.safe_load(write_spec(tmp_path, bars).read_text())
    spec["cluster"] = "tcp://127.0.0.1:9"
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(spec))
    t0 = time.monotonic()
    assert main(["run", str(tmp_path / "s.yaml"), "--no-progress"]) == 2
    assert time.monotonic() - t0 < 30
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in err
    assert main(["run", str(tmp_path / "s.yaml"), "--scheduler", "bogus"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'bogus' is not a scheduler address" in err
    assert not (tmp_path / "results.zarr").exists()


def test_ctrl_c_on_the_driver_alone_stops_external_workers_writing(bars, tmp_path,
                                                                   external_cluster):
    """Workers started by hand outlive the driver: the blocks they are computing when it
    is stopped see their task cancelled and do not write."""
    address, add_worker = external_cluster
    add_worker()
    add_worker()
    spec = write_spec(tmp_path, bars)
    out = tmp_path / "results.zarr"
    proc = start_run(spec, "--scheduler", address)
    wait_for_blocks(out, 2, proc)
    proc.send_signal(signal.SIGINT)  # the driver only: the workers keep running
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr
    files, count = block_files(out), n_done(out)
    time.sleep(3.0)  # longer than a block: a block still running would have written by now
    assert n_done(out) == count and block_files(out) == files
    assert count < N_BLOCKS


def test_the_scheduler_lost_mid_run_is_one_line(bars, tmp_path, external_cluster):
    address, add_worker = external_cluster
    add_worker()
    spec = write_spec(tmp_path, bars)
    out = tmp_path / "results.zarr"
    proc = start_run(spec, "--scheduler", address, "--worker-timeout", "5")
    wait_for_blocks(out, 1, proc)
    from distributed import Client

    with Client(address) as client:  # the scheduler's own process
        pid = client.run_on_scheduler(os.getpid)
    os.kill(pid, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "--resume" in lines[0] and store_attrs(out)["complete"] is False


# ------------------------------------------------------------- SIGTERM, Ctrl-C, the lock


def lock_of(out: Path) -> Path:
    return out.parent / f".{out.name}.lock"


def wait_for(path: Path, proc: subprocess.Popen, timeout: float = 240.0) -> None:
    t0 = time.monotonic()
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended first: {proc.communicate()}")
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"no {path} after {timeout} s")
        time.sleep(0.01)


def group_gone(pgid: int, timeout: float = 30.0) -> bool:
    """Whether every process of the group (the driver, its Dask workers) has ended."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def one_stop_line(stderr: str, word: str) -> str:
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"barsweep: {word}: "), stderr
    return lines[0]


@pytest.mark.parametrize("cluster, to_group", [("threads", False), ("local", True)])
def test_sigterm_stops_as_ctrl_c_does_then_resume_equals_an_undisturbed_run(
        bars, undisturbed, tmp_path, cluster, to_group):
    """`kill PID` (the driver alone) on a run on threads; SIGTERM to the whole process
    group (as `timeout`, systemd and Kubernetes send it) on a local cluster."""
    spec = write_spec(tmp_path, bars)
    out = tmp_path / "results.zarr"
    proc = start_run(spec, "--cluster", cluster, "--workers", "2")
    wait_for_blocks(out, 2, proc)
    (os.killpg if to_group else os.kill)(proc.pid, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr
    line = one_stop_line(stderr, "terminated (SIGTERM)")
    assert f"blocks computed in {out}; resume with `barsweep run {spec} --out {out} " \
           f"--resume`" in line
    assert group_gone(proc.pid)
    assert not lock_of(out).exists()  # released
    files, count = block_files(out), n_done(out)
    time.sleep(2.0)
    assert n_done(out) == count and block_files(out) == files  # nobody writes any more
    assert count < N_BLOCKS and store_attrs(out)["complete"] is False
    assert main(["run", str(spec), "--resume", "--workers", "2", "--no-progress"]) == 0
    assert_same_store(out, undisturbed)


def write_long_spec(directory: Path, store: Path) -> Path:
    """A spec whose sweep (~8e9 combo-bars) never ends within the tests' 10 s."""
    spec = yaml.safe_load(write_spec(directory, store).read_text())
    spec["grid"]["fast"]["stop"] = 120
    spec["grid"]["slow"]["stop"] = 1000
    spec["run"]["block_size"] = 1000
    path = directory / "long.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_timeout_stops_a_local_cluster_run_in_one_line(bars, tmp_path):
    """`timeout 10 barsweep run ...`: timeout sends SIGTERM to its process group (the
    driver and its worker processes) wherever the run is (starting workers, compiling,
    computing); a sweep too long to finish in 10 s."""
    long = write_long_spec(tmp_path, bars)
    out = tmp_path / "results.zarr"
    proc = subprocess.Popen(["timeout", "10", *CLI, "run", str(long),
                             "--cluster", "local", "--workers", "2", "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 124, stderr  # timeout's own status: it did stop the run
    line = one_stop_line(stderr, "terminated (SIGTERM)")
    assert str(out) in line
    assert group_gone(proc.pid)
    assert not lock_of(out).exists()
    assert not list(tmp_path.glob(".results.zarr.*"))  # nothing half-made left beside it
    attrs = store_attrs(out)
    assert attrs is None or attrs["complete"] is False


CTRL_C_TRIES = 8


def test_ctrl_c_on_a_local_cluster_is_one_line_every_time(bars, tmp_path):
    """Ctrl-C (SIGINT to the run's whole process group, as a terminal sends it) at a
    different moment of each try: workers starting, the kernel compiling or loading,
    blocks computing. Every time: the one line, no worker's traceback, nothing left."""
    spec = write_long_spec(tmp_path, bars)
    # the kernel compiled first: a stop during that compile is the next test's case
    assert main(["warm", "ema_cross"]) == 0
    for i in range(CTRL_C_TRIES):
        out = tmp_path / f"r{i}.zarr"
        proc = start_run(spec, "--out", str(out), "--cluster", "local", "--workers", "2")
        wait_for(lock_of(out), proc)  # the run has begun: then 0 to 5 s more
        time.sleep(i * 5.0 / (CTRL_C_TRIES - 1))
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 130, (i, stderr)
        line = one_stop_line(stderr, "interrupted")
        assert str(out) in line, (i, line)
        assert group_gone(proc.pid), i
        assert not lock_of(out).exists(), i


def test_a_second_run_on_a_locked_out_is_refused_at_once(bars, undisturbed, tmp_path):
    spec = write_spec(tmp_path, bars)
    out = tmp_path / "results.zarr"
    proc = start_run(spec, "--cluster", "local", "--workers", "1")
    wait_for(lock_of(out), proc)
    for flags in (["--out", str(out), "--overwrite"], ["--resume"], []):
        t0 = time.monotonic()
        second = subprocess.run([*CLI, "run", str(spec), *flags, "--no-progress"],
                                capture_output=True, text=True, timeout=120)
        seconds = time.monotonic() - t0
        assert second.returncode == 2, second.stderr
        assert second.stderr.startswith(f"barsweep: error: --out {out} is being written by "
                                         f"another barsweep run (host "), second.stderr
        assert f"pid {proc.pid}); wait for it" in second.stderr
        assert second.stderr.count("\n") == 1 and second.stdout == ""
        assert seconds < (5 if "--out" in flags else 15), (flags, seconds)
    # each refusal named the first run's pid: it held the lock then; it goes on undisturbed
    # (on a loaded machine it may have finished by now, which is no fault)
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    assert_same_store(out, undisturbed)


def test_leftovers_of_a_driver_killed_while_making_the_store_are_cleared(bars, tmp_path):
    """SIGKILL at the moment the new store exists only under its hidden name: the next
    run on that --out removes it, and says so in one line."""
    spec = write_spec(tmp_path, bars)
    out = tmp_path / "results.zarr"
    for _ in range(10):  # the hidden store lives for a fraction of a second: catch it
        proc = start_run(spec, "--cluster", "threads", "--workers", "1")
        wait_for(lock_of(out), proc)  # then the bars are read, the store made
        hidden = []
        while not hidden and proc.poll() is None and not out.exists():
            hidden = [e.name for e in os.scandir(tmp_path) if ".results.zarr.new-" in e.name]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if hidden and not out.exists():
            break
        shutil.rmtree(out, ignore_errors=True)
        for leftover in tmp_path.glob(".results.zarr.*"):
            shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()
    else:
        pytest.fail("the driver was never caught with its store half-made")
    left = sorted(p.name for p in tmp_path.glob(".results.zarr.new-*"))
    assert left == hidden and lock_of(out).exists()  # as the killed run left them
    again = subprocess.run([*CLI, "run", str(spec), "--workers", "1", "--no-progress"],
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert again.stderr.strip() == (f"barsweep: removed {left[0]} beside {out}: left by a "
                                    f"killed run (a store being made or replaced)")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    assert store_attrs(out)["complete"] is True


def test_an_earlier_store_moved_aside_by_a_killed_overwrite_is_put_back(undisturbed,
                                                                         tmp_path, bars):
    """A run killed between create_store's two renames leaves the earlier store under
    ``.NAME.old-TAG`` and nothing at NAME (too brief a moment to catch by a real kill):
    the next run puts it back and, without --overwrite, refuses to replace it."""
    spec = write_spec(tmp_path, bars)
    out = tmp_path / "results.zarr"
    aside = tmp_path / ".results.zarr.old-0123abcd"
    shutil.copytree(undisturbed, aside)
    shutil.copytree(aside, tmp_path / ".results.zarr.new-4567cdef")
    again = subprocess.run([*CLI, "run", str(spec), "--no-progress"],
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 2
    lines = again.stderr.splitlines()
    assert lines[0] == (f"barsweep: put back {out} from {aside.name}: a run killed while "
                        f"replacing it (--overwrite) had moved it aside")
    assert lines[1] == (f"barsweep: removed .results.zarr.new-4567cdef beside {out}: left "
                        f"by a killed run (a store being made or replaced)")
    assert lines[2].startswith(f"barsweep: error: --out {out} holds the results of an "
                               f"earlier run (complete)")
    assert len(lines) == 3
    assert_same_store(out, undisturbed)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_ctrl_c_while_the_kernel_compiles_is_one_line(bars, tmp_path):
    """A first run on a machine compiles its kernel on the driver: Ctrl-C then (SIGINT to
    the group) is held until the compile ends, and the run stops in its one line, not in
    numba's or LLVM's half torn-down state."""
    spec = write_long_spec(tmp_path, bars)
    out = tmp_path / "results.zarr"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "fresh-numba-cache")}
    proc = subprocess.Popen([*CLI, "run", str(spec), "--no-progress", "--cluster", "local"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)
    for line in proc.stdout:
        if line.startswith("compiling the ema_cross kernel"):
            break
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert one_stop_line(stderr, "interrupted").endswith(
        f"stopped before the run began; nothing was written to {out}")
    assert group_gone(proc.pid)
    assert not lock_of(out).exists() and not out.exists()
    # held, not cut short: the compile ran to its end and its kernel is in the cache
    assert list((tmp_path / "fresh-numba-cache").rglob("*.kernel-*.nbi"))
