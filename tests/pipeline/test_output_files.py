"""``report --out``, ``plot --out`` and ``trades --csv`` through the command line, on
a real store: each replaces only an earlier output of its own kind, writes nothing
inside a bar or results store, and refuses anything else in one line unless
``--overwrite``; a directory is one line; a write that fails midway (a real file size
limit, in a subprocess) leaves the earlier file whole and no temporary file."""

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.runs import synth

from barsweep.pipeline.analysis.outputs import (
    PICTURE,
    REPORT,
    TRADES_CSV,
    TRADES_HEADERS,
    check_output,
)
from barsweep.pipeline.cli import main

N_BARS = 600


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A user's folder: bars, a spec, a notes CSV and the spec's results store."""
    root = tmp_path_factory.mktemp("outputs")
    synth(root / "bars", N_BARS, seed=3)
    (root / "spec.yaml").write_text(yaml.safe_dump({
        "data": {"store": "bars", "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": [3, 5, 8], "slow": [20, 40]},
        "run": {"out": "results.zarr"},
    }))
    (root / "notes.csv").write_text("date,note\n2024-01-01,mine\n")
    assert main(["run", str(root / "spec.yaml"), "--cluster", "threads", "--quiet"]) == 0
    return root


def digest(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes()).hexdigest()


def files(root: Path) -> dict[str, str]:
    """Every file under ``root`` with a hash of its bytes (hidden ones too)."""
    return {str(p.relative_to(root)): digest(p) for p in sorted(root.rglob("*"))
            if p.is_file()}


def one_line(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    return lines[0]


def report(work: Path, out, *flags: str) -> int:
    return main(["report", str(work / "results.zarr"), "--out", str(out), *flags])


def heatmap(work: Path, out, *flags: str) -> int:
    return main(["plot", "heatmap", str(work / "results.zarr"), "--x", "fast", "--y", "slow",
                 "--out", str(out), *flags])


def trades(work: Path, csv, *flags: str) -> int:
    return main(["trades", str(work / "results.zarr"), "--csv", str(csv), *flags])


@pytest.mark.parametrize(("command", "target", "needle"), [
    (report, "spec.yaml", "exists and is not a report barsweep wrote"),
    (heatmap, "notes.csv", "exists and is not a picture barsweep drew"),
    (trades, "notes.csv", "exists and is not a trades CSV barsweep wrote"),
    (trades, "bars/1h/BTCUSDT.arrow", "is inside the bar store"),
    (trades, "bars/1h/new.csv", "is inside the bar store"),
    (report, "results.zarr/report.html", "is inside the results store"),
    (heatmap, "results.zarr/fast/heat.png", "is inside the results store"),
])
def test_outputs_refuse_what_is_not_theirs(work, capsys, command, target, needle):
    before = files(work)
    assert command(work, work / target) == 2
    line = one_line(capsys)
    assert line.startswith("barsweep: error: --") and needle in line, line
    assert "pass --overwrite" in line
    assert files(work) == before  # nothing replaced, nothing made, no temporary file


def test_a_symlink_is_not_followed_or_replaced(work, tmp_path, capsys):
    link = tmp_path / "link.html"
    link.symlink_to(work / "spec.yaml")
    before = digest(work / "spec.yaml")
    assert report(work, link) == 2
    assert "is a symbolic link" in one_line(capsys)
    assert link.is_symlink() and digest(work / "spec.yaml") == before


def test_each_replaces_its_own_earlier_output(work, tmp_path, capsys):
    for command, name in ((report, "r.html"), (heatmap, "h.png"), (trades, "t.csv")):
        out = tmp_path / name
        assert command(work, out) == 0
        inode = out.stat().st_ino
        assert command(work, out) == 0, capsys.readouterr().err
        assert out.stat().st_ino != inode  # a new file renamed over the earlier one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.png", "r.html", "t.csv"]
    capsys.readouterr()
    assert check_output(tmp_path / "r.html", REPORT) == tmp_path / "r.html"
    assert check_output(tmp_path / "h.png", PICTURE) == tmp_path / "h.png"
    assert check_output(tmp_path / "t.csv", TRADES_CSV) == tmp_path / "t.csv"
    assert (tmp_path / "t.csv").read_text().splitlines()[0] in TRADES_HEADERS
    # one kind's output is not another's
    assert report(work, tmp_path / "h.png") == 2
    assert "is not a report" in one_line(capsys)


def test_overwrite_replaces_anything_but_a_directory(work, tmp_path, capsys):
    mine = tmp_path / "mine.txt"
    mine.write_text("not a report\n")
    assert report(work, mine) == 2
    one_line(capsys)
    assert mine.read_text() == "not a report\n"
    assert report(work, mine, "--overwrite") == 0
    assert "barsweep report" in mine.read_text()
    capsys.readouterr()
    assert report(work, tmp_path, "--overwrite") == 2
    assert "is a directory" in one_line(capsys)


def test_report_onto_a_directory_is_one_line_and_leaves_nothing(work, tmp_path, capsys):
    folder = tmp_path / "reports"
    folder.mkdir()
    assert report(work, folder) == 2
    line = one_line(capsys)
    assert line == (f"barsweep: error: --out {folder} is a directory; give a file name, "
                    f"e.g. {folder / 'report.html'}")
    assert list(tmp_path.iterdir()) == [folder] and list(folder.iterdir()) == []
    assert report(work, tmp_path / "nowhere" / "r.html") == 2
    assert "does not exist" in one_line(capsys)


FSIZE_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from barsweep.pipeline.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize(("command", "name", "limit"), [
    ("report", "r.html", 30_000), ("plot", "h.png", 4_000), ("trades", "t.csv", 300)])
def test_a_write_failing_midway_keeps_the_earlier_file(work, tmp_path, command, name, limit):
    out = tmp_path / name
    write = {"report": report, "plot": heatmap, "trades": trades}[command]
    assert write(work, out) == 0
    earlier = out.read_bytes()
    assert len(earlier) > limit  # the limit cuts the new file midway
    args = {"report": ["report", str(work / "results.zarr"), "--out", str(out)],
            "plot": ["plot", "heatmap", str(work / "results.zarr"), "--x", "fast", "--y",
                     "slow", "--out", str(out)],
            "trades": ["trades", str(work / "results.zarr"), "--csv", str(out)]}[command]
    done = subprocess.run([sys.executable, "-c", FSIZE_LIMITED, str(limit), *args],
                          capture_output=True, text=True, cwd=work, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot write it (File too large)" in lines[0], done.stderr
    assert out.read_bytes() == earlier
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary file left
