"""What a user of daily stock bars does with a multi-symbol store and a walk-forward one:
`--symbol` and string `--where` on rank, plot best, report and walkforward; Pareto fronts
per symbol; rank on a walk-forward store; buy and hold beside the combos; numbers printed
for people. Real bars (bokeh_sampledata's AAPL, MSFT, IBM), imported and swept by the
real `barsweep` CLI."""

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from runs import run_spec_file

from barsweep.datasets import open_bars
from barsweep.pipeline.cli import main

pytestmark = pytest.mark.slow
SYMBOLS = ("AAPL", "MSFT", "IBM")
FEES = 0.0005


def barsweep(*argv, check=True):
    """``barsweep ARGV`` in a process of its own: (rc, stdout, stderr)."""
    done = subprocess.run([sys.executable, "-m", "barsweep.pipeline.cli", *map(str, argv)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if check:
        assert done.returncode == 0, done.stderr
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``plain.zarr`` (three symbols) and ``wf.zarr`` (the same, walk-forward)."""
    import bokeh_sampledata

    root = tmp_path_factory.mktemp("multi")
    source = Path(bokeh_sampledata.__file__).parent / "_data" / "stocks.csv.gz"
    with gzip.open(source, "rt") as fh:
        header, *rows = fh.read().splitlines()
    for symbol in SYMBOLS:
        csv = root / f"{symbol}.csv"
        csv.write_text("\n".join([header, *(r for r in rows if r.startswith(f"{symbol},"))]))
        assert main(["data", "import", str(csv), "--symbol", symbol, "--timeframe", "1d",
                     "--price-column", "adj_close",
                     "--store", str(root / "bars")]) == 0
    base = {"data": {"store": str(root / "bars"), "symbols": list(SYMBOLS), "timeframe": "1d",
                     "start": "2008-01-01", "year_days": 252},
            "strategy": "ema_cross",
            "grid": {"fast": [5, 10, 20, 40], "slow": [20, 50, 100, 200]},
            "constraints": ["fast < slow"],
            "execution": {"fill": "next_open", "fees": FEES}}
    for name, extra in (("plain", {}), ("wf", {"walk_forward": {"train": 500, "test": 250}})):
        run_spec_file({**base, **extra, "run": {"out": str(root / f"{name}.zarr")}},
                      root / f"{name}.yaml", "--cluster", "threads")
    return root
