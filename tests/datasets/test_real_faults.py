"""Faults inflicted for real on the bar store's writer: a disk that fills up (a small real
tmpfs) and a writer SIGKILLed in the middle of its file. The stand-ins beside them in
test_datasets_verify.py (a replaced ``write_feather``, a failing ``os.replace``) stay for
what cannot be made here: a half-written file at the instant of the error, an I/O error
on rename."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from barsweep.datasets import open_bars, verify_store, write_synth
from barsweep.errors import DataError


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (root only: mounting needs it; CI runs as root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_disk_leaves_the_store_as_it_was(small_disk):
    store = small_disk / "bars"
    write_synth(store, "BTCUSDT", "1h", 1_000, seed=7)  # ~50 KB
    before = snapshot(store)
    # fill the disk but for ~200 KB: 20,000 bars (~1 MB) cannot fit
    filler = small_disk / "filler"
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    filler.write_bytes(b"\0" * (free - 200_000))
    with pytest.raises(DataError, match="No space left on device") as info:
        write_synth(store, "BTCUSDT", "1h", 20_000, seed=1)
    assert str(store) in str(info.value) and "\n" not in str(info.value)
    assert snapshot(store) == before  # the old file, its index entry, no temp file
    assert open_bars(store, "BTCUSDT", "1h").sizes["time"] == 1_000
    filler.unlink()  # with room again, the same write succeeds
    write_synth(store, "BTCUSDT", "1h", 20_000, seed=1)
    assert open_bars(store, "BTCUSDT", "1h").sizes["time"] == 20_000


def test_a_writer_killed_mid_file_leaves_the_old_bars(tmp_path):
    """SIGKILL a real `barsweep data synth` while its temporary file grows: the file under
    its final name and the index are untouched, and verify passes."""
    store = tmp_path / "bars"
    write_synth(store, "BTCUSDT", "1h", 1_000, seed=7)
    before = snapshot(store)
    writer = subprocess.Popen(
        [sys.executable, "-m", "barsweep.pipeline.cli", "data", "synth", "--symbol",
         "BTCUSDT", "--timeframe", "1h", "--bars", "20000000", "--seed", "1",
         "--store", str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    folder = store / "1h"
    t0 = time.monotonic()
    while True:  # until the temporary file holds some bytes, not all
        temps = [p for p in folder.glob(".BTCUSDT.*.tmp") if p.stat().st_size > 1_000_000]
        if temps or writer.poll() is not None or time.monotonic() - t0 > 120:
            break
        time.sleep(0.005)
    assert temps, ("the writer ended or never wrote", writer.poll())
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    after = snapshot(store)
    left = set(after) - set(before)
    assert all(Path(name).name.startswith(".BTCUSDT.") and name.endswith(".tmp")
               for name in left), left  # at most the hidden temporary file
    assert {k: v for k, v in after.items() if k not in left} == before
    assert open_bars(store, "BTCUSDT", "1h").sizes["time"] == 1_000
    assert all(r.ok for r in verify_store(store))
