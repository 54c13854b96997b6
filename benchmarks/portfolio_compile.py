"""What a portfolio's first run waits for as its members grow: ``barsweep check`` and
``barsweep run`` of one portfolio spec at N members, each a child process.

    python benchmarks/portfolio_compile.py [--symbols 5,20,50] [--bars 500] [--out DIR]

Synthetic 1h bars (``--bars`` per symbol, seeds 7, 8, ...), ``ema_cross`` on 4 combos,
fills at close, ``cluster: threads``. numba's cache is a fresh folder under ``--out``
(``NUMBA_CACHE_DIR``), warmed first by a run of a 2-member portfolio (its seconds are
printed, not compared): every later figure is then what a user whose machine has run a
portfolio before waits for at N members, the compile of whatever depends on N
included. Run it with ``PYTHONPATH`` pointing at another tree to compare two trees (the
child processes inherit it). Nothing is written outside ``--out`` (a temporary folder
by default).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _common import header, table


def write_universe(store: Path, n_symbols: int, n_bars: int) -> list[str]:
    """``n_symbols`` synthetic symbols ``S0``, ``S1``, ... into ``store`` (written once)."""
    from barsweep.datasets import write_synth

    symbols = [f"S{k}" for k in range(n_symbols)]
    for k, symbol in enumerate(symbols):
        if not (store / "1h" / f"{symbol}.arrow").exists():
            write_synth(store, symbol, "1h", n_bars, 7 + k)
    return symbols


def write_spec(folder: Path, store: Path, symbols: list[str]) -> Path:
    spec = folder / f"portfolio_{len(symbols)}.yaml"
    spec.write_text(yaml.safe_dump({
        "data": {"store": str(store), "symbols": symbols, "timeframe": "1h"},
        "strategy": "ema_cross", "grid": {"fast": [5, 10], "slow": [20, 40]},
        "execution": {"fill": "close", "fees": 0.001}, "portfolio": {"weight": "equal"},
        "cluster": {"kind": "threads"},
        "run": {"out": str(folder / f"portfolio_{len(symbols)}.zarr")}}))
    return spec


def timed(args: list[str], env: dict) -> float:
    """Seconds of ``barsweep ARGS`` in a child process (refused: the error is raised)."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "barsweep.pipeline.cli", *args], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"barsweep {' '.join(args)}: {done.stderr.strip()}")
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--symbols", default="5,20,50")
    parser.add_argument("--bars", type=int, default=500)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    counts = [int(n) for n in args.symbols.split(",")]
    out = Path(args.out or tempfile.mkdtemp(prefix="portfolio_compile_"))
    store = out / "bars"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(out / f"numba-{time.time_ns()}")}
    warm_spec = write_spec(out, store, write_universe(store, 2, args.bars))
    warm = timed(["run", str(warm_spec), "--overwrite", "--quiet"], env)
    rows = []
    for n in counts:
        spec = write_spec(out, store, write_universe(store, n, args.bars))
        check = timed(["check", str(spec)], env)
        run = timed(["run", str(spec), "--overwrite", "--quiet"], env)
        rows.append([f"{n}", f"{check:.1f}", f"{run:.1f}"])
        print(f"{n} members: check {check:.1f} s, run {run:.1f} s", flush=True)
    print(header("A portfolio's first run as its members grow"))
    print(f"ema_cross, 4 combos, {args.bars:,} 1h bars per member, cluster threads; each a "
          f"child process (its Python start and imports included); numba's cache warmed "
          f"by a 2-member portfolio run first ({warm:.1f} s).\n")
    print(table(["members", "barsweep check s", "barsweep run s"], rows))


if __name__ == "__main__":
    main()
