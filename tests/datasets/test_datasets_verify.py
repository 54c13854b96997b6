"""Bar files are verified against the store's index: cheaply on open, fully by `data verify`."""

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

import barsweep.datasets.index as index_module
from barsweep.datasets import (
    bar_path,
    fingerprint,
    import_file,
    mapped_arrays,
    open_bars,
    read_table,
    synth_bars,
    verify_store,
    write_bars,
    write_synth,
)
from barsweep.datasets.index import INDEX_NAME, read_index
from barsweep.errors import DataError
from barsweep.pipeline.cli import main


def raw_column(path, name):
    """A column of a bar file read with pyarrow directly (no verification)."""
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).read_all().column(name).to_numpy()


def set_highs(path, value=-0.15, n=8, mtime="later"):
    """Overwrite the first `n` highs in place: 8 * n bytes, the file's size unchanged.

    mtime: "later" (an edit made after the import: the mtime moves on), or "kept" (the
    old mtime put back with os.utime, as a deliberate same-size same-mtime edit).
    """
    data = path.read_bytes()
    offset = data.find(raw_column(path, "high")[:n].tobytes())
    assert offset > 0
    st = path.stat()
    with path.open("r+b") as fh:
        fh.seek(offset)
        fh.write(np.full(n, value).tobytes())
    # Timestamps are coarse (a clock tick): say explicitly when the edit happened.
    mtime_ns = st.st_mtime_ns + (10**9 if mtime == "later" else 0)
    os.utime(path, ns=(st.st_atime_ns, mtime_ns))
    assert path.stat().st_size == st.st_size
    assert (raw_column(path, "high")[:n] == value).all()


def patch_bytes(path, offset, data, keep_mtime=True):
    st = path.stat()
    with path.open("r+b") as fh:
        fh.seek(offset if offset >= 0 else st.st_size + offset)
        fh.write(data)
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.fixture(autouse=True)
def fresh_caches():
    """Each test starts as a new process would: nothing verified, nothing warned."""
    index_module.clear_caches()
    yield
    index_module.clear_caches()


@pytest.fixture
def store(tmp_path):
    store = tmp_path / "bars"
    write_synth(store, "BTCUSDT", "1h", 1_000, seed=7)
    return store


def cli(capsys, *args):
    rc = main(["data", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


# --- the index -------------------------------------------------------------------------


def test_write_records_size_mtime_and_hash_in_the_index(store):
    path = bar_path(store, "BTCUSDT", "1h")
    entry = read_index(store)["1h/BTCUSDT.arrow"]
    st = path.stat()
    assert (entry.bytes, entry.mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert entry.blake2b == fingerprint(store, "BTCUSDT", "1h")["files"][0]["blake2b"]
    document = json.loads((store / INDEX_NAME).read_text())
    assert document["format"] == "barsweep-bar-store-index" and document["version"] == 1
    assert sorted(p.name for p in store.iterdir()) == ["1h", INDEX_NAME]  # no temp files
    assert sorted(p.name for p in path.parent.iterdir()) == ["BTCUSDT.arrow"]


def _write_some(store, worker):
    for i in range(5):
        write_synth(store, f"S{worker}-{i}", "1h", 10, seed=i)


def test_concurrent_writers_lose_no_index_entry(tmp_path, capsys):
    """Writers in several processes update the index under the store's lock."""
    import multiprocessing

    store = tmp_path / "bars"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_write_some, args=(store, w)) for w in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    assert len(read_index(store)) == 20
    assert cli(capsys, "verify", "--store", store)[0] == 0


def test_index_keeps_every_file_and_import_records_too(store, tmp_path):
    write_synth(store, "ETH", "4h", 50, seed=2)
    csv = tmp_path / "x.csv"
    csv.write_text("time,open,high,low,close\n2020-01-01,1,2,0.5,1.5\n2020-01-02,1,2,0.5,1\n")
    import_file(csv, store, "X", "1d")
    assert sorted(read_index(store)) == ["1d/X.arrow", "1h/BTCUSDT.arrow", "4h/ETH.arrow"]
    write_synth(store, "ETH", "4h", 60, seed=2)  # replaced: its entry follows
    assert read_index(store)["4h/ETH.arrow"].bytes == bar_path(store, "ETH", "4h").stat().st_size


# --- the fault: a corrupted file went unnoticed -----------------------------------------


def test_flipped_bytes_are_refused_by_open_bars_and_the_task_path(store):
    """The issue's fault: 64 bytes changed in place made 8 highs -0.15, and a run used them."""
    path = bar_path(store, "BTCUSDT", "1h")
    set_highs(path, -0.15)
    for read in (
        lambda: open_bars(store, "BTCUSDT", "1h"),
        lambda: mapped_arrays(store, "BTCUSDT", "1h"),
        lambda: read_table(store, "BTCUSDT", "1h"),
        lambda: fingerprint(store, ["BTCUSDT"], "1h"),
    ):
        with pytest.raises(DataError) as info:
            read()
        message = str(info.value)
        assert str(path) in message
        assert "does not match the store's index" in message
        assert "changed or corrupted" in message and "barsweep data verify --store" in message
        assert "\n" not in message


def test_the_dask_task_path_refuses_it_too(store):
    from barsweep.pipeline.run.accounts import BarsRef

    set_highs(bar_path(store, "BTCUSDT", "1h"))
    with pytest.raises(DataError, match="BTCUSDT.arrow does not match the store's index"):
        BarsRef(str(store), "BTCUSDT", "1h").arrays()


@pytest.mark.parametrize("mtime", ["later", "kept"])
def test_barsweep_run_refuses_the_corrupted_store_in_one_line(store, tmp_path, capsys, mtime):
    """The issue's fault through the CLI: `barsweep run` ran on it with rc 0. The driver's
    full hash (the fingerprint it records) catches even a same-size same-mtime edit."""
    import yaml

    set_highs(bar_path(store, "BTCUSDT", "1h"), mtime=mtime)
    spec = tmp_path / "spec.yaml"
    out = tmp_path / "results.zarr"
    spec.write_text(yaml.safe_dump({
        "data": {"store": str(store), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross", "grid": {"fast": [5], "slow": [20]},
        "run": {"out": str(out)}}))
    rc = main(["run", str(spec), "--workers", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert rc != 0 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert "BTCUSDT.arrow does not match the store's index" in line
    assert not out.exists()


def test_a_replaced_file_is_refused(store, tmp_path):
    other = write_synth(tmp_path / "other", "BTCUSDT", "1h", 1_000, seed=8)
    path = bar_path(store, "BTCUSDT", "1h")
    os.replace(other, path)
    with pytest.raises(DataError, match="does not match the store's index"):
        open_bars(store, "BTCUSDT", "1h")


def test_a_same_size_same_mtime_edit_passes_the_cheap_check_but_not_verify(store, capsys):
    """Documented: open_bars trusts an unchanged size and mtime; verify hashes everything."""
    path = bar_path(store, "BTCUSDT", "1h")
    set_highs(path, -0.15, mtime="kept")
    assert open_bars(store, "BTCUSDT", "1h")["high"].values[0, 0] == -0.15  # not caught here
    with pytest.raises(DataError, match="does not match the store's index"):
        fingerprint(store, "BTCUSDT", "1h")  # a full hash: what `barsweep run` records
    rc, out, err = cli(capsys, "verify", "--store", store)
    assert rc == 1 and err == ""
    (line,) = out.strip().splitlines()[:-1]
    assert "1h/BTCUSDT.arrow" in line and "does not match the store's index" in line


def test_fingerprint_hashes_a_file_again_only_when_it_may_have_changed(store, monkeypatch):
    """Kept in the user's cache with size, mtime, ctime and inode: an unchanged file is
    not read again (a multi-GB store costs no seconds per run); any edit moves the
    ctime, so even one that put size and mtime back is hashed and refused."""
    monkeypatch.setenv("BARSWEEP_CACHE_DIR", str(store.parent / "cache"))
    calls = []
    original = index_module.file_blake2b
    monkeypatch.setattr(index_module, "file_blake2b",
                        lambda path: calls.append(path) or original(path))
    first = fingerprint(store, "BTCUSDT", "1h")
    assert len(calls) == 1 and index_module.hashes_path().is_file()
    assert fingerprint(store, "BTCUSDT", "1h") == first and len(calls) == 1
    set_highs(bar_path(store, "BTCUSDT", "1h"), -0.15, mtime="kept")
    with pytest.raises(DataError, match="does not match the store's index"):
        fingerprint(store, "BTCUSDT", "1h")
    assert len(calls) == 2


def test_the_hash_is_computed_once_per_file_and_process(store, monkeypatch):
    calls = []
    original = index_module.file_blake2b

    def counting(path):
        calls.append(path)
        return original(path)

    monkeypatch.setattr(index_module, "file_blake2b", counting)
    for _ in range(3):
        mapped_arrays(store, "BTCUSDT", "1h")
    assert calls == []  # size and mtime as recorded: no hash at all
    path = bar_path(store, "BTCUSDT", "1h")
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # e.g. a copy
    for _ in range(3):
        mapped_arrays(store, "BTCUSDT", "1h")
        open_bars(store, "BTCUSDT", "1h")
    assert len(calls) == 1  # hashed once, matched, remembered for (path, size, mtime)
    assert read_index(store)["1h/BTCUSDT.arrow"].mtime_ns == st.st_mtime_ns  # nothing written


def test_a_copied_store_opens_and_verify_update_index_refreshes_mtimes(store, tmp_path, capsys):
    copy = tmp_path / "copy"
    (copy / "1h").mkdir(parents=True)
    (copy / INDEX_NAME).write_bytes((store / INDEX_NAME).read_bytes())
    (copy / "1h" / "BTCUSDT.arrow").write_bytes(bar_path(store, "BTCUSDT", "1h").read_bytes())
    assert open_bars(copy, "BTCUSDT", "1h").sizes["time"] == 1_000
    assert cli(capsys, "verify", "--store", copy)[0] == 0
    rc, out, _ = cli(capsys, "verify", "--store", copy, "--update-index")
    assert rc == 0 and "mtime refreshed" in out
    entry = read_index(copy)["1h/BTCUSDT.arrow"]
    assert entry.mtime_ns == (copy / "1h" / "BTCUSDT.arrow").stat().st_mtime_ns


# --- corrupted headers and footers ------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "data"),
    [
        (0, b"XXXXXX"),  # the leading magic
        (-6, b"XXXXXX"),  # the trailing magic
        (-10, b"\xff\xff\xff\x7f"),  # the footer length
        (-120, b"\x00" * 16),  # the footer's schema
        (-200, bytes(range(64, 128))),  # the footer
    ],
)
def test_corrupted_headers_and_footers_give_one_line_naming_the_file(store, capsys, offset, data):
    """Even when size and mtime look unchanged, a broken file is one line, not a traceback.

    (The schema copy at the start of the file is read by no reader: damage there is for
    `data verify` to see, as in the random-damage test below.)
    """
    path = bar_path(store, "BTCUSDT", "1h")
    patch_bytes(path, offset, data, keep_mtime=True)
    with pytest.raises(DataError) as info:
        open_bars(store, "BTCUSDT", "1h")
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    rc, out, err = cli(capsys, "verify", "--store", store)
    assert rc == 1 and "Traceback" not in out + err and "1h/BTCUSDT.arrow" in out


def test_truncated_and_emptied_files(store, capsys):
    path = bar_path(store, "BTCUSDT", "1h")
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DataError, match="BTCUSDT.arrow"):
        mapped_arrays(store, "BTCUSDT", "1h")
    path.write_bytes(b"")
    with pytest.raises(DataError, match="BTCUSDT.arrow"):
        mapped_arrays(store, "BTCUSDT", "1h")
    rc, out, err = cli(capsys, "info", "--store", store)
    assert rc != 0 and len(err.strip().splitlines()) == 1 and "BTCUSDT.arrow" in err


@pytest.mark.parametrize("seed", range(6))
def test_random_damage_is_refused_or_caught_by_verify(tmp_path, capsys, seed):
    """Random bytes anywhere, size and mtime kept: never a traceback; verify always sees it."""
    store = tmp_path / "bars"
    path = write_synth(store, "BTCUSDT", "1h", 300, seed=seed)
    rng = np.random.default_rng(seed)
    size = path.stat().st_size
    for offset in rng.integers(0, size, 8):
        patch_bytes(path, int(offset), bytes([int(rng.integers(0, 256))]) * 4, keep_mtime=True)
    try:
        open_bars(store, "BTCUSDT", "1h")
    except DataError as exc:
        assert str(path) in str(exc)
    rc, out, err = cli(capsys, "verify", "--store", store)
    assert "Traceback" not in out + err
    assert rc == (0 if path.read_bytes() == write_synth(tmp_path / "b", "BTCUSDT", "1h", 300,
                                                          seed=seed).read_bytes() else 1)


# --- barsweep data verify ---------------------------------------------------------------


def test_verify_all_ok(store, capsys):
    write_synth(store, "ETH", "4h", 20, seed=1)
    rc, out, err = cli(capsys, "verify", "--store", store)
    assert rc == 0 and err == ""
    lines = out.strip().splitlines()
    assert lines[0].startswith("ok") and "1h/BTCUSDT.arrow" in lines[0]
    assert lines[1].startswith("ok") and "4h/ETH.arrow" in lines[1]
    assert "2 files, all ok" in lines[-1]


def test_verify_checks_the_bar_rules_on_the_content(tmp_path, capsys):
    """A file written by another tool (hash matches nothing) and a rule broken inside."""
    store = tmp_path / "bars"
    table = synth_bars(30, seed=1)
    high = table.column("high").to_numpy().copy()
    high[11] = -0.15
    bad = table.set_column(2, "high", pa.array(high))
    path = bar_path(store, "BTC", "1h")
    path.parent.mkdir(parents=True)
    import pyarrow.feather as feather

    feather.write_feather(bad, path, compression="uncompressed", chunksize=len(bad))
    rc, out, _ = cli(capsys, "verify", "--store", store)
    assert rc == 1
    (line,) = [x for x in out.splitlines() if "1h/BTC.arrow" in x]
    assert "row 12" in line and "non-positive price" in line
    assert "not in the store's index" in line


def test_verify_reports_files_the_index_lists_but_the_store_lacks(store, capsys):
    write_synth(store, "ETH", "1h", 20, seed=1)
    bar_path(store, "ETH", "1h").unlink()
    rc, out, _ = cli(capsys, "verify", "--store", store)
    assert rc == 1 and "1h/ETH.arrow" in out and "missing" in out
    rc, out, _ = cli(capsys, "verify", "--store", store, "--update-index")
    assert rc == 0 and "1h/ETH.arrow" in out
    assert sorted(read_index(store)) == ["1h/BTCUSDT.arrow"]


def test_verify_never_adopts_a_changed_file(store, capsys):
    set_highs(bar_path(store, "BTCUSDT", "1h"))
    for flags in ([], ["--update-index"]):
        rc, out, _ = cli(capsys, "verify", "--store", store, *flags)
        assert rc == 1 and "does not match the store's index" in out
    with pytest.raises(DataError):
        open_bars(store, "BTCUSDT", "1h")


def test_verify_refuses_a_missing_store_in_one_line(tmp_path, capsys):
    rc, out, err = cli(capsys, "verify", "--store", tmp_path / "nowhere")
    assert rc != 0 and len(err.strip().splitlines()) == 1 and "nowhere" in err


def test_verify_as_a_function(store):
    (report,) = verify_store(store)
    assert report.ok and report.name == "1h/BTCUSDT.arrow" and report.n_bars == 1_000


# --- stores written before the index (legacy) -------------------------------------------


def test_a_store_without_index_opens_with_one_warning_and_verify_adopts_it(store, capsys,
                                                                          caplog):
    (store / INDEX_NAME).unlink()
    with caplog.at_level(logging.WARNING, logger="barsweep.datasets"):
        for _ in range(3):
            assert open_bars(store, "BTCUSDT", "1h").sizes["time"] == 1_000
            mapped_arrays(store, "BTCUSDT", "1h")
    warnings = [r for r in caplog.records if "not in the store's index" in r.getMessage()]
    assert len(warnings) == 1 and "--update-index" in warnings[0].getMessage()
    rc, out, _ = cli(capsys, "verify", "--store", store)
    assert rc == 1 and "not in the store's index" in out
    rc, out, _ = cli(capsys, "verify", "--store", store, "--update-index")
    assert rc == 0 and "added to the index" in out
    assert cli(capsys, "verify", "--store", store)[0] == 0
    set_highs(bar_path(store, "BTCUSDT", "1h"))
    with pytest.raises(DataError, match="does not match"):
        open_bars(store, "BTCUSDT", "1h")


def test_a_broken_index_is_named(store, capsys):
    (store / INDEX_NAME).write_text("{not json")
    with pytest.raises(DataError, match=f"{INDEX_NAME}.*--update-index"):
        open_bars(store, "BTCUSDT", "1h")
    rc, out, _ = cli(capsys, "verify", "--store", store)
    assert rc == 1 and INDEX_NAME in out
    rc, out, _ = cli(capsys, "verify", "--store", store, "--update-index")
    assert rc == 0
    assert open_bars(store, "BTCUSDT", "1h").sizes["time"] == 1_000


# --- bad store paths: one line, nothing left behind -------------------------------------


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "ok.csv"
    path.write_text(textwrap.dedent("""\
        time,open,high,low,close
        2020-01-01,1,2,0.5,1.5
        2020-01-02,1.5,2,0.5,1
        """))
    return path


def bad_stores(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a store")
    return {
        "a file": a_file,
        "a file's child": a_file / "sub",
        "inside /proc": "/proc/barsweep-store",
        "inside /sys": "/sys/barsweep-store",
    }


@pytest.mark.parametrize("kind", ["a file", "a file's child", "inside /proc", "inside /sys"])
def test_bad_store_paths_are_one_line(tmp_path, capsys, csv_file, kind):
    store = bad_stores(tmp_path)[kind]
    before = (tmp_path / "a_file").read_bytes()
    commands = [
        ["import", csv_file, "--symbol", "X", "--timeframe", "1d", "--store", store],
        ["synth", "--symbol", "X", "--bars", "10", "--store", store],
        ["info", "--store", store],
        ["verify", "--store", store],
    ]
    for command in commands:
        rc, out, err = cli(capsys, *command)
        assert rc != 0, command
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, (command, err)
        assert str(store) in err, (command, err)
    assert (tmp_path / "a_file").read_bytes() == before


def test_an_unwritable_store_is_one_line(tmp_path, capsys, csv_file):
    """A store folder of mode 0500. Root writes anywhere through its capability
    CAP_DAC_OVERRIDE: as root (CI), the import runs in a process of the same user whose
    capabilities lack it (util-linux's ``setpriv``), so the folder stops it as it stops
    anyone else, while CAP_DAC_READ_SEARCH, kept, lets it reach the interpreter and the
    package wherever the clone lies (a home folder of mode 0700 included)."""
    store = tmp_path / "ro"
    store.mkdir()
    store.chmod(0o500)
    try:
        if os.geteuid() != 0:
            rc, _, err = cli(capsys, "import", csv_file, "--symbol", "X", "--timeframe", "1d",
                             "--store", store)
        else:
            setpriv = shutil.which("setpriv")
            assert setpriv, "setpriv (util-linux) drops root's CAP_DAC_OVERRIDE for this test"
            done = subprocess.run(
                [setpriv, "--inh-caps=-dac_override", "--bounding-set=-dac_override",
                 sys.executable, "-m", "barsweep.pipeline.cli", "data", "import",
                 str(csv_file), "--symbol", "X", "--timeframe", "1d", "--store", str(store)],
                capture_output=True, text=True, timeout=120)
            rc, err = done.returncode, done.stderr
    finally:
        store.chmod(0o700)
    assert rc != 0 and len(err.strip().splitlines()) == 1 and "not writable" in err, err
    assert list(store.iterdir()) == []


def test_an_unwritable_store_is_refused_before_reading(tmp_path, csv_file, monkeypatch):
    """Root can write anywhere: pretend the check says no, and see nothing was parsed."""
    from barsweep.datasets import importer

    store = tmp_path / "s"
    store.mkdir()
    monkeypatch.setattr(importer.os, "access", lambda *a, **k: False)
    monkeypatch.setattr(importer, "_read_source", lambda *a: pytest.fail("file was read"))
    with pytest.raises(DataError, match="not writable"):
        import_file(csv_file, store, "X", "1d")


def test_a_failed_write_leaves_no_partial_file(store, monkeypatch):
    """A write that fails half-way (disk full) leaves the old file, its entry, no temp file."""
    import pyarrow.feather as feather

    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}

    def half_write(table, dest, **kwargs):
        with open(dest, "wb") as fh:
            fh.write(b"ARROW1\x00\x00partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(feather, "write_feather", half_write)
    with pytest.raises(DataError, match="No space left on device") as info:
        write_synth(store, "BTCUSDT", "1h", 500, seed=1)
    assert str(store) in str(info.value)
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before


def test_a_failed_first_write_leaves_no_store_behind(tmp_path, monkeypatch):
    import pyarrow.feather as feather

    def no_space(table, dest, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(feather, "write_feather", no_space)
    with pytest.raises(DataError, match="nothing was changed"):
        write_synth(tmp_path / "new" / "bars", "BTCUSDT", "1h", 50, seed=1)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_rename_puts_the_old_index_entry_back(store, monkeypatch):
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    real_replace = os.replace

    def failing_replace(src, dst):
        if str(dst).endswith(".arrow"):
            raise OSError(5, "Input/output error")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(DataError, match="Input/output error"):
        write_synth(store, "BTCUSDT", "1h", 500, seed=1)
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
    assert open_bars(store, "BTCUSDT", "1h").sizes["time"] == 1_000


def test_write_bars_into_a_file_is_a_data_error(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(DataError, match="not a directory"):
        write_bars(tmp_path / "f", "X", "1h", synth_bars(5, seed=1))
