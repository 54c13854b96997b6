"""What a user of daily stock bars reads: dates without ``00:00:00`` in tables and
errors, refusals in one line with exit status 2, a buy-and-hold store's table with the
symbol in its column, and the equity of a stock that grew 100x on a log axis. Real
daily AAPL bars (bokeh_sampledata), imported, swept and read by the CLI in processes of
their own."""

import gzip
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from barsweep.pipeline.analysis.rebuild import best_backtest

pytestmark = pytest.mark.slow
CLI = [sys.executable, "-m", "barsweep.pipeline.cli"]


def barsweep(*args, cwd=None):
    done = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    import bokeh_sampledata

    root = tmp_path_factory.mktemp("daily")
    source = Path(bokeh_sampledata.__file__).parent / "_data" / "stocks.csv.gz"
    with gzip.open(source, "rt") as fh:
        header, *rows = fh.read().splitlines()
    (root / "AAPL.csv").write_text("\n".join([header, *(r for r in rows
                                                       if r.startswith("AAPL,"))]))
    done = barsweep("data", "import", root / "AAPL.csv", "--symbol", "AAPL", "--timeframe",
                    "1d", "--store", root / "bars", "--price-column", "adj_close")
    assert done.returncode == 0, done.stderr
    (root / "hold.yaml").write_text(yaml.safe_dump({
        "data": {"store": "bars", "symbols": ["AAPL"], "timeframe": "1d", "year_days": 252},
        "strategy": "buy_and_hold", "run": {"out": "hold.zarr"}}))
    done = barsweep("run", "hold.yaml", "--cluster", "threads", "--quiet", cwd=root)
    assert done.returncode == 0, done.stderr
    return root


def test_daily_tables_print_dates(root):
    done = barsweep("data", "info", "--store", root / "bars")
    assert done.returncode == 0, done.stderr
    row = done.stdout.splitlines()[1].split()
    assert row[:5] == ["AAPL", "1d", "3,270", "2000-03-01", "2013-03-01"], row
    done = barsweep("trades", root / "hold.zarr")
    assert done.returncode == 0, done.stderr
    assert "00:00" not in done.stdout
    assert done.stdout.startswith("AAPL buy_and_hold (rank 1 by sharpe)"), done.stdout
    trade = done.stdout.splitlines()[-1].split()
    assert trade[0] == "1" and trade[2] == "2013-03-01", trade
    assert re.fullmatch(r"2000-03-0\d", trade[1]), trade


def test_a_buy_and_hold_stores_table_keeps_the_symbol_in_its_column(root):
    done = barsweep("rank", root / "hold.zarr")
    assert done.returncode == 0, done.stderr
    header, first, held = done.stdout.splitlines()[0], *done.stdout.splitlines()[-2:]
    assert header.split()[0] == "symbol"
    assert first.split()[:2] == ["1", "AAPL"]
    assert held.split()[:2] == ["buy&hold", "AAPL"], held


def test_an_error_naming_times_prints_dates_and_a_refusal_exits_2(root):
    spec = yaml.safe_load((root / "hold.yaml").read_text())
    spec["data"]["start"] = "2020-01-01"
    spec["run"]["out"] = "late.zarr"
    (root / "late.yaml").write_text(yaml.safe_dump(spec))
    done = barsweep("run", "late.yaml", "--cluster", "threads", cwd=root)
    err = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(err) == 1, done.stderr
    assert err[0].startswith("barsweep: error: ")
    assert err[0].endswith("the store holds 2000-03-01 to 2013-03-01"), err[0]
    assert "00:00" not in err[0] and "ns" not in err[0].split()


def test_plot_best_draws_a_100x_equity_on_a_log_axis(root, tmp_path):
    done = barsweep("plot", "best", root / "hold.zarr", "--out", tmp_path / "best.png")
    assert done.returncode == 0, done.stderr
    fig = best_backtest(root / "hold.zarr").plot()
    assert fig.axes[1].get_yscale() == "log" and fig.axes[1].get_ylabel() == "equity (log)"


def test_a_daily_walk_forward_prints_dates_in_its_table_and_report(root, tmp_path):
    (root / "wf.yaml").write_text(yaml.safe_dump({
        "data": {"store": "bars", "symbols": ["AAPL"], "timeframe": "1d", "year_days": 252},
        "strategy": "ema_cross", "grid": {"fast": [5, 10], "slow": [20, 40]},
        "walk_forward": {"train": "2y", "test": "1y"}, "run": {"out": "wf.zarr"}}))
    done = barsweep("run", "wf.yaml", "--cluster", "threads", "--quiet", cwd=root)
    assert done.returncode == 0, done.stderr
    done = barsweep("walkforward", root / "wf.zarr", "--by", "sharpe")
    assert done.returncode == 0, done.stderr
    assert "00:00" not in done.stdout, done.stdout
    assert re.search(r"2000-03-01\.\.2002-0\d-\d\d", done.stdout), done.stdout
    stitched = next(line for line in done.stdout.splitlines() if "stitched" in line)
    assert re.search(r"2,520 bars \(2002-03-07\.\.2012-03-07\)", stitched), stitched
    done = barsweep("report", root / "wf.zarr", "--out", tmp_path / "wf.html")
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "wf.html").read_text()
    assert not re.search(r"\d\d 00:00", page) and "bars from 2000-03-01 to 2013-03-01" in page
    assert re.search(r"2,520 \(2002-03-07 to 2012-03-07\)", page)
