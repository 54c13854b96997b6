"""The progress line of a real `barsweep run`: redrawn in place on a terminal (a
pseudo-terminal here), whole lines every `run.progress_every` seconds in a log (a pipe)."""

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time

import pytest
import yaml
from helpers.runs import synth

pytestmark = pytest.mark.slow

EVERY_S = 0.5
PROGRESS = re.compile(r"(\d+)/(\d+) blocks, [\d,]+/[\d,]+ combos, [\d,]+ combos/s")


def spec_file(tmp_path, every_s: float = EVERY_S):
    """A sweep of ~100 blocks that computes for a few seconds on two cores."""
    synth(tmp_path / "bars", 8000, seed=3)
    spec = {"data": {"store": str(tmp_path / "bars"), "symbols": ["BTCUSDT"],
                     "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": {"fast": {"start": 2, "stop": 60, "step": 1},
                     "slow": {"start": 10, "stop": 400, "step": 1}},
            "run": {"out": str(tmp_path / "r.zarr"), "block_size": 200,
                    "progress_every": every_s}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def barsweep(*args: str) -> list[str]:
    return [sys.executable, "-m", "barsweep.pipeline.cli", *args]


def test_in_a_log_progress_is_a_line_every_few_seconds_and_a_final_one(tmp_path):
    spec = spec_file(tmp_path)
    started = time.monotonic()
    proc = subprocess.Popen(barsweep("run", str(spec), "--cluster", "threads"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen: list[tuple[float, bytes]] = []  # (when it arrived, the line)

    def read():
        for line in iter(proc.stderr.readline, b""):
            seen.append((time.monotonic(), line))

    reader = threading.Thread(target=read)
    reader.start()
    proc.wait(timeout=300)  # stderr is the reader's alone: communicate() would race it
    lasted = time.monotonic() - started
    out = proc.stdout.read()  # a few lines: they never fill the pipe
    reader.join(timeout=10)
    err = b"".join(line for _, line in seen).decode()
    assert proc.returncode == 0, err
    assert "\r" not in err
    lines = [(t, line.decode()) for t, line in seen if PROGRESS.match(line.decode())]
    n_blocks = int(re.search(r" in (\d+) blocks", out.decode()).group(1))
    assert n_blocks > 50
    assert len(lines) >= 3, err  # the start, some on the way (the run takes seconds), the end
    first, last = PROGRESS.match(lines[0][1]), PROGRESS.match(lines[-1][1])
    assert first.group(1) == "0" and last.group(1) == last.group(2) == str(n_blocks), err
    assert PROGRESS.match(lines[-2][1]).group(1) != str(n_blocks), err  # the final one once
    assert "ETA" not in lines[-1][1] and "elapsed" in lines[-1][1]
    assert "best sharpe" in lines[-1][1] and "worker" in lines[-1][1]
    done = [int(PROGRESS.match(line).group(1)) for _, line in lines]
    assert done == sorted(done)
    # not a line per block but at most one per EVERY_S, and the final one (on a busy
    # machine whose blocks take longer than EVERY_S, a line per block is right): counted
    # over the sweep's own time
    # as its lines say it (whole seconds, so one more), not over arrival times, since a
    # busy machine may hold one line in the pipe and hand it over with the next
    elapsed = [seconds(re.search(r"(\S+) elapsed", line).group(1)) for _, line in lines]
    assert elapsed == sorted(elapsed) and elapsed[-1] <= lasted + 1, (elapsed, lasted)
    assert len(lines) - 1 <= (elapsed[-1] - elapsed[0] + 1) / EVERY_S + 1, err
    # and no long silence between the first line and the last: its blocks last well under
    # a second each (the margin grows with the sweep's time, which a busy machine
    # stretches along with any silence)
    gaps = [b[0] - a[0] for a, b in zip(lines, lines[1:])]
    span = lines[-1][0] - lines[0][0]
    assert max(gaps) < EVERY_S + max(2.0, 0.5 * span), (gaps, span)


def seconds(text: str) -> int:
    """The progress line's elapsed time (``42s``, ``3m05s``, ``2h07m``) in seconds."""
    h, m, s = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text).groups(default="0")
    return int(h) * 3600 + int(m) * 60 + int(s)


def run_in_terminal(tmp_path, columns: int) -> tuple[str, str]:
    """`barsweep run` with its stderr on a pseudo-terminal ``columns`` wide (0: a size
    the terminal does not report); its stderr as the terminal saw it, and its stdout."""
    spec = spec_file(tmp_path)
    master, slave = os.openpty()
    if columns:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(barsweep("run", str(spec), "--cluster", "threads"),
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if not ready:
            if proc.poll() is not None:
                break
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal is gone
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 0, seen.decode(errors="replace")
    return seen.decode(), out


@pytest.mark.parametrize("columns", [100, 0])
def test_on_a_terminal_progress_redraws_one_line(tmp_path, columns):
    seen, out = run_in_terminal(tmp_path, columns)
    n_blocks = int(re.search(r" in (\d+) blocks", out).group(1))
    assert seen.endswith("\r\n")  # the terminal's newline: the line is left when done
    body = seen[:-2]
    assert "\n" not in body  # one line, redrawn
    draws = [d.rstrip() for d in body.split("\r") if d.strip()]
    assert len(draws) >= 4, seen
    assert all(d.startswith("|") and "blocks, " in d for d in draws), draws
    assert f"| {n_blocks}/{n_blocks} blocks" in draws[-1]
    if columns:  # each draw fits the terminal: it stays one line
        assert max(len(d) for d in draws) <= columns, draws
    else:
        assert "best sharpe" in draws[-1]


def test_progress_every_must_be_positive(tmp_path, capsys):
    from barsweep.pipeline.cli import main

    spec = spec_file(tmp_path)
    capsys.readouterr()
    assert main(["run", str(spec), "--progress-every", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("barsweep: error: ") and "progress_every" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "r.zarr").exists()
