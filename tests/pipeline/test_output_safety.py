"""Output is never destroyed, and an incomplete store is visibly incomplete.

`--out` faults are tried through the CLI in-process: each must be refused in one line,
before any cluster starts, with the directory it names left exactly as it was.
"""

import hashlib
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

from barsweep.engine import METRICS
from barsweep.errors import ResultsError, RunError
from barsweep.pipeline.cli import main
from barsweep.pipeline.run.results import (
    check_out,
    create_store,
    finish_store,
    open_results,
    out_lock,
    store_attrs,
    write_block,
)

N_BARS = 600


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a hash of its bytes."""
    return {str(p.relative_to(root)): hashlib.blake2b(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A user's directory: bars, a spec with relative paths, notes."""
    monkeypatch.chdir(tmp_path)
    assert main(["data", "synth", "--symbol", "BTCUSDT", "--timeframe", "1h", "--bars",
                 str(N_BARS), "--store", "bars"]) == 0
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump({
        "data": {"store": "bars", "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": [5, 10], "slow": [20, 40]},
        "run": {"out": "results.zarr", "block_size": 2},
    }))
    (tmp_path / "notes.txt").write_text("my notes\n")
    return tmp_path


def assert_one_line_refusal(capsys, *needles: str) -> str:
    captured = capsys.readouterr()
    err = captured.err
    assert "Traceback" not in err + captured.out
    assert "dask dashboard" not in captured.out  # refused before any cluster started
    assert "no dashboard (--dashboard" not in captured.out
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("out, needle", [
    (".", "is not a barsweep results store"),
    ("bars", "is not a barsweep results store"),
    ("notes.txt", "is a file"),
    ("notes.txt/x.zarr", "is a file, so nothing can be made inside it"),
    ("/proc/x.zarr", "virtual filesystem"),
    ("/sys/x.zarr", "virtual filesystem"),
])
def test_out_refuses_what_is_not_a_results_store(workdir, capsys, out, needle):
    before = snapshot(workdir)
    assert main(["run", "spec.yaml", "--out", out, "--no-progress"]) == 2
    assert_one_line_refusal(capsys, needle)
    assert snapshot(workdir) == before
    for flag in ("--overwrite", "--resume"):  # neither flag lets it touch them
        assert main(["run", "spec.yaml", "--out", out, flag, "--no-progress"]) == 2
        assert_one_line_refusal(capsys)
        assert snapshot(workdir) == before


def test_run_out_in_the_spec_is_checked_too(workdir, capsys):
    spec = yaml.safe_load((workdir / "spec.yaml").read_text())
    spec["run"]["out"] = "bars"
    (workdir / "spec2.yaml").write_text(yaml.safe_dump(spec))
    before = snapshot(workdir)
    assert main(["run", "spec2.yaml", "--no-progress"]) == 2
    assert_one_line_refusal(capsys, "bars", "not a barsweep results store")
    assert snapshot(workdir) == before


def test_a_refused_run_leaves_no_folder_for_its_out(workdir, capsys):
    """--out in folders that do not exist yet: the lock is taken in them before the
    bars are read; a run refused after that (here: a symbol the store lacks) leaves
    nothing, the folders made for the lock included."""
    spec = yaml.safe_load((workdir / "spec.yaml").read_text())
    spec["data"]["symbols"] = ["NOPE"]
    (workdir / "spec3.yaml").write_text(yaml.safe_dump(spec))
    before = snapshot(workdir)
    assert main(["run", "spec3.yaml", "--out", "sub/dir/r.zarr", "--no-progress"]) == 2
    assert_one_line_refusal(capsys, "NOPE")
    assert snapshot(workdir) == before and not (workdir / "sub").exists()


def test_an_unwritable_directory_is_refused(workdir, capsys):
    target = workdir / "ro"
    target.mkdir()
    if os.geteuid() == 0:  # root writes through permissions: a read-only mount is needed
        made = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs",
                               str(target)], capture_output=True)
        if made.returncode != 0:
            pytest.skip(f"cannot mount a read-only tmpfs here: {made.stderr.decode().strip()}")
    else:
        target.chmod(0o500)
    try:
        assert main(["run", "spec.yaml", "--out", "ro/results.zarr", "--no-progress"]) == 2
        assert_one_line_refusal(capsys, "cannot write in", "ro")
    finally:
        if os.geteuid() == 0:
            subprocess.run(["umount", str(target)], check=True)
        else:
            target.chmod(0o700)


def test_check_out_accepts_new_paths_and_empty_directories(tmp_path):
    assert check_out(tmp_path / "a" / "b" / "r.zarr") == str(tmp_path / "a" / "b" / "r.zarr")
    assert not (tmp_path / "a").exists()  # nothing is made while checking
    (tmp_path / "empty").mkdir()
    assert check_out(tmp_path / "empty") == str(tmp_path / "empty")
    with pytest.raises(ResultsError, match=exactly(
            f"--resume: no results store at {tmp_path / 'new.zarr'} to resume")) as new:
        check_out(tmp_path / "new.zarr", resume=True)
    assert type(new.value) is ResultsError
    with pytest.raises(ResultsError, match=exactly(
            f"--resume: {tmp_path / 'empty'} is empty, there is no run to resume")) as empty:
        check_out(tmp_path / "empty", resume=True)
    assert type(empty.value) is ResultsError


def exactly(message: str) -> str:
    """A ``pytest.raises(match=...)`` pattern that matches ``message`` and nothing more."""
    return f"^{re.escape(message)}$"


def small_store(path: Path, n_blocks_written: int, total: int = 3) -> None:
    axes = [("p", np.arange(total * 2))]
    create_store(str(path), ["A"], axes, (2,), total,
                 {"spec": "strategy: x\n", "barsweep_version": "test",
                  "spec_path": "/some/spec.yaml", "n_combos": 2 * total})
    rng = np.random.default_rng(0)
    for b in range(n_blocks_written):
        metrics = rng.normal(size=(len(METRICS), 1, 2))
        write_block(str(path), (slice(0, 1), slice(2 * b, 2 * b + 2)), metrics, b)


def test_an_incomplete_store_is_refused_by_readers_unless_partial(tmp_path, capsys):
    path = tmp_path / "r.zarr"
    small_store(path, 1)
    attrs = store_attrs(path)
    assert attrs["complete"] is False and attrs["barsweep_results"] == 2
    with pytest.raises(ResultsError, match=exactly(
            f"{path} is incomplete: 2 of 3 blocks missing; finish it with `barsweep run "
            f"/some/spec.yaml --out {path} --resume`, or pass --partial to read what is "
            f"there")) as incomplete:
        open_results(path)
    assert type(incomplete.value) is ResultsError
    assert main(["rank", str(path)]) == 2
    line = assert_one_line_refusal(capsys, "2 of 3 blocks missing",
                                   f"barsweep run /some/spec.yaml --out {path} --resume",
                                   "--partial")
    assert line.startswith("barsweep: error:")
    assert main(["rank", str(path), "--partial", "--json"]) == 0
    captured = capsys.readouterr()
    assert "2 of 3 blocks missing; ranking the 2 of 6 combos computed so far" in captured.err
    assert len(yaml.safe_load(captured.out)) == 2


def test_a_store_with_no_block_done_says_so(tmp_path, capsys):
    path = tmp_path / "r.zarr"
    small_store(path, 0)
    assert main(["rank", str(path), "--partial"]) == 1
    captured = capsys.readouterr()
    assert "Empty DataFrame" not in captured.out
    assert "no combo of" in captured.err and "Traceback" not in captured.err


def test_complete_is_set_only_when_every_block_is_done(tmp_path):
    path = tmp_path / "r.zarr"
    small_store(path, 2)
    with pytest.raises(RunError, match=exactly(
            f"{path}: 1 block(s) were not written (first ids: [2]); the run did not "
            f"complete")) as pending:
        finish_store(str(path), {})
    assert type(pending.value) is RunError
    assert store_attrs(path)["complete"] is False
    rng = np.random.default_rng(1)
    write_block(str(path), (slice(0, 1), slice(4, 6)), rng.normal(size=(len(METRICS), 1, 2)), 2)
    finish_store(str(path), {"timings_s": {"total": 1}})
    assert store_attrs(path)["complete"] is True
    assert open_results(path)["p"].size == 6


def test_a_store_is_never_half_made_under_its_final_name(tmp_path):
    """create_store builds under a hidden name and renames: an existing store is
    replaced whole, and nothing else is left beside it."""
    path = tmp_path / "r.zarr"
    small_store(path, 3)
    finish_store(str(path), {})
    small_store(path, 0)  # replaced (as --overwrite does)
    assert store_attrs(path)["complete"] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.zarr"]


@pytest.mark.slow
def test_demo_runs_again_replacing_only_its_own_results(tmp_path, capsys):
    demo = tmp_path / "demo"
    for _ in range(2):
        assert main(["demo", "--dir", str(demo), "--workers", "2"]) == 0
        captured = capsys.readouterr()
        assert "top 10 of" in captured.out
        # progress: the demo runs on one in-process worker with a thread per worker asked
        assert "blocks, " in captured.err and ", 1 worker (2 threads)" in captured.err
    assert store_attrs(demo / "results.zarr")["complete"] is True
    (demo / "results.zarr").rename(demo / "mine")
    (demo / "results.zarr").mkdir()
    (demo / "results.zarr" / "notes.txt").write_text("not a results store")
    assert main(["demo", "--dir", str(demo), "--workers", "2"]) == 2
    assert "is not a barsweep results store" in capsys.readouterr().err
    assert (demo / "results.zarr" / "notes.txt").read_text() == "not a results store"


def test_a_second_run_on_the_same_store_is_refused(tmp_path):
    out = str(tmp_path / "r.zarr")
    with out_lock(out):
        with pytest.raises(ResultsError, match=rf"being written by another barsweep run "
                                               rf"\(host .*, pid {os.getpid()}\)"):
            with out_lock(out):
                pass
    (tmp_path / ".r.zarr.lock").write_text(f"{socket.gethostname()} 999999999")
    with out_lock(out):  # a lock whose process is gone is taken over
        assert (tmp_path / ".r.zarr.lock").read_text().endswith(f" {os.getpid()}")
    assert not (tmp_path / ".r.zarr.lock").exists()


def test_what_appears_at_out_after_the_check_is_not_replaced(tmp_path):
    out = tmp_path / "r.zarr"
    assert check_out(out) == str(out)
    out.mkdir()  # someone puts their work there while the cluster starts
    (out / "thesis.tex").write_text("months of work")
    with pytest.raises(ResultsError, match="changed since the run was checked"):
        small_store(out, 0)
    assert (out / "thesis.tex").read_text() == "months of work"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.zarr"]


def test_partial_hides_metrics_of_blocks_not_marked_done(tmp_path):
    path = tmp_path / "r.zarr"
    small_store(path, 1)
    group = zarr.open_group(str(path), mode="r+")
    group["sharpe"][0, 2:4] = [7.0, 8.0]  # a block cut short after one metric
    ds = open_results(path, partial=True)
    assert np.isnan(ds["sharpe"].values[0, 2:]).all()
    assert not np.isnan(ds["sharpe"].values[0, :2]).any()


def test_damaged_stores_and_symlinks_are_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.zarr"
    bad.mkdir()
    (bad / "zarr.json").write_text("[]")
    assert main(["rank", str(bad)]) == 2
    assert_one_line_refusal(capsys, "is not a barsweep results store")
    store = tmp_path / "r.zarr"
    small_store(store, 3)
    shutil.rmtree(store / "done")
    assert main(["rank", str(store)]) == 2
    assert_one_line_refusal(capsys, "damaged results store")
    link = tmp_path / "link.zarr"
    link.symlink_to(store)
    with pytest.raises(ResultsError, match="is a symbolic link"):
        check_out(link, overwrite=True)
