"""Memory at size, through the CLI on a real 2-worker LocalCluster: wall time,
combo-bars/s, the peak RSS of the driver and of each worker process, the store's size.

    python benchmarks/memory_cases.py CASE [options]

Cases (bars are the project's own synthetic ones, ``barsweep data synth``, seed 7):

- ``a``: ``ema_cross`` fast 2..101 x slow 100..SLOW_STOP step 2 (``fast < slow``;
  95,098 combos with the default 2000) on 2,000,000 one-minute bars.
- ``b``: ``ema_cross`` fast 2..40,000 x slow 2..25,001 (999,975,000 combos, just under
  ``run.max_combos``) on 26,280 hourly bars, stopped with SIGINT (Ctrl-C) after
  ``--time-limit`` seconds; its partial store is kept for ``d``.
- ``c``: ``ema_cross`` fast 2..5,001 x slow 502..2,501 (10,000,000 combos) on ``--bars``
  hourly bars, run by each ``--venv`` in turn, ``--repeats`` times, alternating.
- ``d``: ``barsweep rank --by sharpe`` and ``--by dsr`` (with ``--partial`` if given) of
  each ``--store`` by its ``--venv`` (the n-th store by the n-th venv): the driver's
  peak RSS.

Every command runs as a child process; a thread reads, every 50 ms, the RSS and the
kernel's high-water mark (``VmHWM`` of ``/proc/PID/status``, the true peak of a process
however short the spike) of the child and of every process under it. A worker is a
process started by ``multiprocessing``'s spawn (Dask's nannies start them that way).
The child's stderr is kept in the work directory and searched for Dask's memory
warnings. One JSON line per command is printed (``BENCH_JSON``) and appended to
``WORK/results.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
from _common import JSON_TAG, dir_size, load_avg, table

DASK_WARNINGS = ("Unmanaged memory", "Pausing worker", "distributed.worker.memory",
                 "Worker is at", "Restarting worker", "KilledWorker")
GRIDS = {
    "a": {"fast": {"start": 2, "stop": 101, "step": 1},
          "slow": {"start": 100, "stop": 2000, "step": 2}},
    "b": {"fast": {"start": 2, "stop": 40000, "step": 1},
          "slow": {"start": 2, "stop": 25001, "step": 1}},
    "c": {"fast": {"start": 2, "stop": 5001, "step": 1},
          "slow": {"start": 502, "stop": 2501, "step": 1}},
}


def hwm_bytes(pid: int) -> int:
    """The peak resident memory of process ``pid`` so far (``VmHWM``), bytes; 0 if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def role(proc: psutil.Process, root: int) -> str:
    """'driver', 'worker' (a multiprocessing spawn child) or 'other'."""
    if proc.pid == root:
        return "driver"
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return "other"
    return "worker" if "spawn_main" in cmd else "other"


class TreeSampler(threading.Thread):
    """Peak RSS of a process and its descendants, read every ``every`` seconds."""

    def __init__(self, root: int, every: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.root, self.every, self.done = root, every, threading.Event()
        self.peaks: dict[int, dict] = {}

    def sample(self) -> None:
        try:
            top = psutil.Process(self.root)
            procs = [top, *top.children(recursive=True)]
        except psutil.Error:
            return
        for proc in procs:
            try:
                rss = proc.memory_info().rss
            except psutil.Error:
                continue
            entry = self.peaks.setdefault(proc.pid, {"role": role(proc, self.root),
                                                     "rss": 0, "hwm": 0})
            entry["rss"] = max(entry["rss"], rss)
            entry["hwm"] = max(entry["hwm"], hwm_bytes(proc.pid))

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.sample()


def default_sigint() -> None:
    """In the child before exec: SIGINT acts (a shell's background job starts with it
    ignored, and Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def measure(cmd: list[str], log: Path, time_limit: float | None = None,
            cwd: Path | None = None) -> dict:
    """Run ``cmd``, sampling its process tree; SIGINT it after ``time_limit`` seconds.

    Returns wall seconds, exit code, whether it was interrupted, the peak RSS (MiB) of
    the driver and of each worker (the larger of the sampled RSS and ``VmHWM``), the
    Dask memory warnings found in its stderr and the last lines of its output.
    """
    load_before = load_avg()
    with open(log, "w") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=cwd,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                                preexec_fn=default_sigint)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        interrupted = False
        try:
            out, _ = proc.communicate(timeout=time_limit)
        except subprocess.TimeoutExpired:
            interrupted = True
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=600)
        wall = time.perf_counter() - t0
        sampler.done.set()
        sampler.join()
    stderr = log.read_text()
    mib = 2**20
    peaks = sorted(sampler.peaks.values(), key=lambda e: e["role"])
    return {
        "cmd": cmd, "rc": proc.returncode, "wall_s": round(wall, 2), "interrupted": interrupted,
        "driver_mib": next((round(max(e["rss"], e["hwm"]) / mib) for e in peaks
                            if e["role"] == "driver"), None),
        "workers_mib": [round(max(e["rss"], e["hwm"]) / mib) for e in peaks
                        if e["role"] == "worker"],
        "dask_warnings": sorted({w for w in DASK_WARNINGS if w in stderr}),
        "stdout_tail": out.strip().splitlines()[-6:],
        "stderr_tail": stderr.strip().splitlines()[-8:],
        "load_before": round(load_before, 2), "load_after": round(load_avg(), 2),
    }


def synth(venv: Path, work: Path, timeframe: str, bars: int) -> Path:
    """A bar store of ``bars`` synthetic BTCUSDT bars (seed 7), written once."""
    store = work / f"bars_{timeframe}_{bars}"
    if not store.exists():
        subprocess.run([str(venv / "bin/barsweep"), "data", "synth", "--symbol", "BTCUSDT",
                        "--timeframe", timeframe, "--bars", str(bars), "--store", str(store)],
                       check=True, capture_output=True)
    return store


def write_spec(path: Path, store: Path, timeframe: str, grid: dict, constraint: bool) -> Path:
    """A sweep spec (JSON is YAML) of ``ema_cross`` over ``grid``."""
    spec = {"data": {"store": str(store), "symbols": ["BTCUSDT"], "timeframe": timeframe,
                     "year_days": 365},
            "strategy": "ema_cross", "grid": grid,
            "execution": {"fill": "close", "fees": 0.001}}
    if constraint:
        spec["constraints"] = ["fast < slow"]
    path.write_text(json.dumps(spec, indent=1))
    return path


def sweep(venv: Path, spec: Path, out: Path, log: Path, time_limit: float | None) -> dict:
    """``barsweep run`` of ``spec`` on a 2-worker LocalCluster, measured; the store's size."""
    cmd = [str(venv / "bin/barsweep"), "run", str(spec), "--out", str(out), "--overwrite",
           "--cluster", "local", "--workers", "2", "--progress-every", "30"]
    record = measure(cmd, log, time_limit)
    apparent, allocated = dir_size(out) if out.exists() else (0, 0)
    record.update(store_mib=round(apparent / 2**20), store_disk_mib=round(allocated / 2**20))
    return record


def report(record: dict, work: Path) -> None:
    print(JSON_TAG + json.dumps(record), flush=True)
    with open(work / "results.jsonl", "a") as fh:
        fh.write(json.dumps(record) + "\n")


def progress(record: dict) -> tuple[int, float] | None:
    """(combos done, seconds) of the last progress line of a run's stderr."""
    for line in reversed(record.get("stderr_tail", [])):
        match = re.match(r"\d+/\d+ blocks, ([\d,]+)/[\d,]+ combos.* (?:(\d+)m)?(\d+)s elapsed",
                         line)
        if match:
            return int(match[1].replace(",", "")), 60 * int(match[2] or 0) + int(match[3])
    return None


def rows(work: Path) -> str:
    """A markdown table of every record in ``WORK/results.jsonl``."""
    cells = []
    for rec in map(json.loads, (work / "results.jsonl").read_text().splitlines()):
        bars = {"a": 2_000_000, "b": 26_280}.get(rec["case"])
        if rec["case"] == "c":
            bars = int(rec["bars_store"].rsplit("_", 1)[1])
        done = progress(rec) if bars else None
        rate = f"{done[0] * bars / done[1] / 1e6:,.0f}" if done and done[1] else "—"
        what = " ".join(rec["cmd"][1:3]) + (f" --by {rec['by']}" if "by" in rec else "")
        cells.append([rec["case"], Path(rec["venv"]).parent.name, what, f"{rec['wall_s']:,.0f}",
                      f"{done[0]:,}" if done else "—", rate, str(rec["driver_mib"]),
                      ", ".join(map(str, rec["workers_mib"])) or "—",
                      str(rec.get("store_mib", "—")), str(rec["rc"]),
                      ", ".join(rec["dask_warnings"]) or "none",
                      f"{rec['load_before']} → {rec['load_after']}"])
    return table(["case", "tree", "command", "wall s", "combos done", "M combo-bars/s",
                  "driver MiB", "workers MiB", "store MiB", "rc", "Dask warnings", "load"],
                 cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("case", choices=["a", "b", "c", "d", "table"])
    parser.add_argument("--work", type=Path, default=Path("/tmp/memory_cases"))
    parser.add_argument("--venv", type=Path, action="append",
                        help="a virtual environment with barsweep (repeatable; default: this one)")
    parser.add_argument("--slow-stop", type=int, default=2000, help="case a: last slow period")
    parser.add_argument("--bars", type=int, default=26_280, help="case c: hourly bars")
    parser.add_argument("--repeats", type=int, default=2, help="case c: runs per venv")
    parser.add_argument("--time-limit", type=float, default=None, help="SIGINT after S s")
    parser.add_argument("--store", type=Path, action="append",
                        help="case d: the store each --venv ranks (repeatable, in order)")
    parser.add_argument("--partial", action="store_true", help="case d: rank --partial")
    parser.add_argument("--keep", action="store_true", help="case c: keep every store")
    args = parser.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    venvs = [v.resolve() for v in args.venv or [Path(sys.prefix)]]
    if args.case == "table":
        print(rows(work))
        return
    if args.case == "d":
        for venv, store in zip(venvs, args.store, strict=True):
            for by in ("sharpe", "dsr"):
                cmd = [str(venv / "bin/barsweep"), "rank", str(store), "--by", by,
                       "--top", "20", *(["--partial"] if args.partial else [])]
                rec = measure(cmd, work / f"d_{venv.parent.name}_{by}.err", args.time_limit)
                report({"case": "d", "venv": str(venv), "by": by, "store": str(store),
                        **rec}, work)
        return
    grid = dict(GRIDS[args.case])
    if args.case == "a":
        grid["slow"] = {**grid["slow"], "stop": args.slow_stop}
        store, timeframe = synth(venvs[0], work, "1m", 2_000_000), "1m"
    else:
        bars = args.bars if args.case == "c" else 26_280
        store, timeframe = synth(venvs[0], work, "1h", bars), "1h"
    spec = write_spec(work / f"{args.case}.yaml", store, timeframe, grid, args.case == "a")
    runs = [(i, venv) for i in range(args.repeats if args.case == "c" else 1) for venv in venvs]
    for i, venv in runs:
        out = work / f"{args.case}_{venv.parent.name}.zarr"
        rec = sweep(venv, spec, out, work / f"{args.case}_{venv.parent.name}_{i}.err",
                    args.time_limit)
        report({"case": args.case, "venv": str(venv), "repeat": i, "grid": grid,
                "bars_store": str(store), **rec}, work)
        if args.case == "c" and not args.keep and i < args.repeats - 1:
            subprocess.run(["rm", "-rf", str(out)], check=True)


if __name__ == "__main__":
    main()
