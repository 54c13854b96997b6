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
from helpers.cdp import browse
from helpers.runs import run_spec_file

from barsweep.datasets import open_bars
from barsweep.engine import METRICS
from barsweep.pipeline.analysis.buyhold import buy_and_hold
from barsweep.pipeline.analysis.formatting import param, percent
from barsweep.pipeline.analysis.rank import pareto_front, rank
from barsweep.pipeline.cli import main
from barsweep.pipeline.run.results import open_results

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


def rows_of(stdout):
    return json.loads(stdout)


def refused(*argv):
    """``barsweep ARGV`` exits 2 with one ``barsweep: error:`` line (and, for an
    expression that does not parse, the expression with a caret under the problem):
    that line."""
    rc, out, err = barsweep(*argv, check=False)
    lines = err.strip().splitlines()
    assert rc == 2 and lines[0].startswith("barsweep: error: "), err
    assert len(lines) == 1 or (len(lines) == 3 and set(lines[2].strip()) == {"^"}), err
    assert out == ""
    return lines[0]


# ------------------------------------------------------------------ 9: --symbol, --where


def test_rank_symbol_and_a_string_where_pick_the_same_rows(stores):
    plain = stores / "plain.zarr"
    by_flag = rows_of(barsweep("rank", plain, "--symbol", "MSFT", "--top", "50", "--json")[1])
    by_where = rows_of(barsweep("rank", plain, "--where", "symbol == 'MSFT'", "--top", "50",
                                "--json")[1])
    assert by_flag == by_where and len(by_flag) == 14  # the combos with fast < slow
    assert {r["symbol"] for r in by_flag} == {"MSFT"}
    assert [r["sharpe"] for r in by_flag] == sorted((r["sharpe"] for r in by_flag),
                                                    reverse=True)
    others = rows_of(barsweep("rank", plain, "--where", 'symbol != "MSFT" and fast >= 10',
                              "--top", "50", "--json")[1])
    assert {r["symbol"] for r in others} == {"AAPL", "IBM"} and len(others) == 2 * 10
    assert all(r["fast"] >= 10 for r in others)
    assert "holds text" in refused("rank", plain, "--where", "symbol > 1")
    assert "== or != only" in refused("rank", plain, "--where", "symbol < 'MSFT'")
    assert "holds numbers" in refused("rank", plain, "--where", "fast == '10'")
    line = refused("rank", plain, "--symbol", "GOOG")
    assert "GOOG" in line and "AAPL, MSFT, IBM" in line
    pbo = barsweep("rank", plain, "--pbo", "--symbol", "IBM")[1].splitlines()
    assert len(pbo) == 1 and pbo[0].startswith("symbol=IBM: PBO ")
    # walkforward: --symbol chooses, and --where reads the symbol as text too
    wf = stores / "wf.zarr"
    doc = json.loads(barsweep("walkforward", wf, "--symbol", "IBM", "--json")[1])
    same = json.loads(barsweep("walkforward", wf, "--symbol", "IBM", "--where",
                               "symbol == 'IBM'", "--json")[1])
    assert doc["symbol"] == "IBM" and doc["windows"] == same["windows"]
    none = json.loads(barsweep("walkforward", wf, "--symbol", "IBM", "--where",
                               "symbol != 'IBM'", "--json")[1])
    assert none["stitched"]["n_windows"] == 0
    assert "--symbol" in refused("walkforward", wf)


def test_pareto_fronts_are_per_symbol_unless_across(stores):
    ds = open_results(stores / "plain.zarr")
    metrics = ["sharpe", "max_drawdown"]

    def front_of(points):
        """Brute force: the points no other point is at least as good as on both
        metrics and better on one (max_drawdown: higher is better too, it is <= 0)."""
        keep = []
        for i, a in enumerate(points):
            if not any(b[0] >= a[0] and b[1] >= a[1] and b != a for b in points):
                keep.append(i)
        return keep

    front = pareto_front(ds, metrics)
    for symbol in ("AAPL", "MSFT", "IBM"):
        one = ds.sel(symbol=symbol)
        combos = [(int(f), int(s)) for f in one.fast.values for s in one.slow.values
                  if np.isfinite(one.sharpe.sel(fast=f, slow=s))]
        points = [(float(one.sharpe.sel(fast=f, slow=s)),
                   float(one.max_drawdown.sel(fast=f, slow=s))) for f, s in combos]
        want = {combos[i] for i in front_of(points)}
        got = front[front["symbol"] == symbol]
        assert set(zip(got["fast"], got["slow"])) == want, symbol
        assert got["sharpe"].is_monotonic_decreasing
    # --across symbol: one front of the medians over the symbols
    rows = rows_of(barsweep("rank", stores / "plain.zarr", "--pareto", "sharpe,max_drawdown",
                            "--across", "symbol", "--json")[1])
    med = {m: ds[m].median("symbol") for m in metrics}
    combos = [(int(f), int(s)) for f in ds.fast.values for s in ds.slow.values if f < s]
    points = [tuple(float(med[m].sel(fast=f, slow=s)) for m in metrics) for f, s in combos]
    assert {(r["fast"], r["slow"]) for r in rows} == {combos[i] for i in front_of(points)}
    assert all("symbol" not in r and "sharpe_median" in r for r in rows)
    out = barsweep("rank", stores / "plain.zarr", "--pareto", "sharpe,max_drawdown")[1]
    assert "one front per symbol" in out


# ------------------------------------------------------------------ 10: walk-forward stores


def test_rank_on_a_walk_forward_store_ranks_train_samples_and_points_to_walkforward(stores):
    wf = stores / "wf.zarr"
    rc, out, err = barsweep("rank", wf, "--top", "500", "--json")
    rows = rows_of(out)
    assert {r["sample"] for r in rows} == {"train"} and {r["window"] for r in rows} == {0, 1, 2}
    assert "barsweep walkforward" in err and "--sample test" in err
    ds = open_results(wf)
    assert rows[0]["sharpe"] == float(ds.sharpe.sel(sample="train").max())
    assert len(rows) == int(ds.sharpe.sel(sample="train").notnull().sum())
    tests = rows_of(barsweep("rank", wf, "--sample", "test", "--symbol", "IBM", "--json")[1])
    assert {(r["sample"], r["symbol"]) for r in tests} == {("test", "IBM")}
    table = barsweep("rank", wf, "--top", "3")[1]
    head = table.splitlines()[0].split()
    assert head[:3] == ["symbol", "window", "sample"]
    assert "sample" in refused("rank", stores / "plain.zarr", "--sample", "test")


def test_plot_walkforward_draws_each_symbols_stitched_equity(stores, tmp_path):
    from matplotlib.image import imread

    out = tmp_path / "wf.png"
    assert "wrote" in barsweep("plot", "walkforward", stores / "wf.zarr", "--symbol", "MSFT",
                               "--out", out)[1]
    pixels = imread(str(out))
    assert pixels.shape[1] >= 1000 and (np.abs(pixels[..., :3] - 1).sum(axis=2) > 0.3).mean() > 0.05
    line = refused("plot", "walkforward", stores / "wf.zarr", "--out", tmp_path / "no.png")
    assert "--symbol" in line and not (tmp_path / "no.png").exists()


def test_plot_best_takes_a_symbol_and_names_it(stores, tmp_path):
    from barsweep.pipeline.analysis.plots import best_title
    from barsweep.pipeline.analysis.rebuild import best_backtest

    ds = open_results(stores / "plain.zarr")
    top = rank(ds, by="sharpe", top=1, symbol="IBM").iloc[0]
    result = best_backtest(ds, symbol="IBM")
    assert all(result.metrics[m] == top[m] or np.isnan(top[m]) for m in METRICS)
    title = best_title(ds, result, symbol="IBM")
    assert title.startswith(f"IBM ema_cross fast {param(top['fast'])}, slow "
                            f"{param(top['slow'])} (#1 by sharpe): total return "
                            f"{percent(top['total_return'])}")
    out = tmp_path / "best.png"
    barsweep("plot", "best", stores / "plain.zarr", "--symbol", "IBM", "--out", out)
    assert out.stat().st_size > 10_000


# ------------------------------------------------------------------ 12: buy and hold


def held(bars, init=10_000.0):
    """Buy and hold by hand: bought at bar 1's open (the signal of bar 0, filled at the
    next open) with the fee, marked at the last close."""
    open_, close = bars["open"].values.ravel(), bars["close"].values.ravel()
    return (init / (open_[1] * (1 + FEES))) * close[-1] / init - 1.0


def test_buy_and_hold_is_a_row_of_rank_per_symbol_and_window(stores):
    ds = open_results(stores / "plain.zarr")
    ref = buy_and_hold(ds)
    for symbol, row in zip(ref["symbol"], ref.itertuples(), strict=True):
        bars = open_bars(stores / "bars", symbol, "1d", start="2008-01-01")
        assert row.total_return == pytest.approx(held(bars), rel=1e-12)
        assert row.n_trades == 1 and row.beta == pytest.approx(1.0, abs=1e-3)
    table = barsweep("rank", stores / "plain.zarr", "--top", "3")[1].splitlines()
    ranked, refs = table[2:5], table[5:]
    assert [r.split()[0] for r in ranked] == ["1", "2", "3"]
    assert [r.split()[:3] for r in refs] == [["-", s, "buy&hold"] for s in
                                             dict.fromkeys(r.split()[1] for r in ranked)]
    for line in refs:
        symbol = line.split()[1]
        assert percent(ref.set_index("symbol").loc[symbol, "total_return"]) in line.split()
    # --json: combos only
    rows = rows_of(barsweep("rank", stores / "plain.zarr", "--json")[1])
    assert all(isinstance(r["fast"], int) for r in rows)
    # a walk-forward store: one row per symbol, window and sample shown, over its bars
    wf = open_results(stores / "wf.zarr")
    one = buy_and_hold(wf, [{"symbol": "AAPL", "window": 1, "sample": "test"}]).iloc[0]
    a, b = (int(wf[f"test_{e}_bar"].values[1]) for e in ("start", "end"))
    bars = open_bars(stores / "bars", "AAPL", "1d", start="2008-01-01").isel(time=slice(a, b))
    assert one.total_return == pytest.approx(held(bars), rel=1e-12)
    lines = barsweep("rank", stores / "wf.zarr", "--symbol", "AAPL", "--where", "window == 1",
                     "--sample", "test", "--top", "2")[1].splitlines()
    assert lines[-1].split()[:5] == ["-", "AAPL", "1", "test", "buy&hold"]
    assert percent(one.total_return) in lines[-1].split()


def test_no_buy_and_hold_row_says_why(stores, tmp_path):
    import shutil

    moved = tmp_path / "plain.zarr"
    shutil.copytree(stores / "plain.zarr", moved)
    spec = open_results(moved).attrs["spec"]
    import zarr

    zarr.open_group(str(moved), mode="r+").attrs["spec"] = spec.replace(
        str(stores / "bars"), str(tmp_path / "gone"))
    rc, out, err = barsweep("rank", moved, "--top", "2")
    assert "buy&hold" not in out and len(out.splitlines()) == 4
    assert err.startswith("barsweep: note: no buy&hold row: buy and hold of AAPL")


# ------------------------------------------------------------------ 13: numbers for people


def test_tables_print_numbers_for_people(stores):
    out = barsweep("rank", stores / "plain.zarr", "--top", "5")[1]
    assert not re.search(r"\d\.\d*0000\b", out)  # no 40.0000, 0.0300 as pandas printed
    first = out.splitlines()[2].split()
    ds = open_results(stores / "plain.zarr")
    top = rank(ds, top=1).iloc[0]
    assert first[2:4] == [str(top["fast"]), str(top["slow"])]
    assert percent(top["total_return"]) in first and percent(top["max_drawdown"]) in first
    assert f"{top['sharpe']:.3g}" in first


# ------------------------------------------------------------------ the report


def test_a_multi_symbol_walk_forward_report(stores, tmp_path):
    page = tmp_path / "wf.html"
    barsweep("report", stores / "wf.zarr", "--out", page)
    dom, console, _ = browse(page, tmp_path)
    assert console == [], console
    for symbol in ("AAPL", "MSFT", "IBM"):
        assert f"Walk-forward of {symbol}" in dom and f"sharpe of {symbol} over" in dom
    assert dom.count("Stitched out of sample") == 3 and dom.count("buy and hold, same bars") == 3
    assert dom.count("data:image/png;base64,") == 6  # a heatmap and an equity per symbol
    top = dom[dom.index("Top 20"):dom.index("sharpe of AAPL")]
    heads = re.findall(r"<th>([^<]*)</th>", top)
    assert heads[:4] == ["rank", "symbol", "window", "sample"]
    cells = re.findall(r"<td>([^<]*)</td>", top)
    assert "train" in cells and "test" not in cells and "buy&amp;hold" in cells
    assert not re.search(r"<td>-?[0-9,]+\.[0-9]*0000</td>", dom)  # no 40.0000
    assert re.search(r"<td>-?\d+(\.\d+)?%</td>", top)
    one = tmp_path / "msft.html"
    barsweep("report", stores / "wf.zarr", "--symbol", "MSFT", "--out", one)
    text = one.read_text()
    assert "Walk-forward of MSFT" in text and "Walk-forward of IBM" not in text


def test_a_multi_symbol_report_has_each_symbols_best(stores, tmp_path):
    page = tmp_path / "plain.html"
    barsweep("report", stores / "plain.zarr", "--out", page)
    dom, console, _ = browse(page, tmp_path)
    assert console == [], console
    for symbol in ("AAPL", "MSFT", "IBM"):
        assert f"Best combo of {symbol}" in dom
    assert dom.count('<tr class="reference">') >= 1
    assert "bars a year" in dom and "252" in dom


def test_rank_across_symbols_with_where_warns_nothing(stores):
    """Combos that --where or the constraints leave out on every symbol are NaN on every
    symbol: aggregated, they stay NaN, without numpy's "All-NaN slice" warning (every
    warning an error here)."""
    argv = [sys.executable, "-W", "error", "-m", "barsweep.pipeline.cli", "rank",
            stores / "plain.zarr", "--by", "sharpe", "--across", "symbol", "--where",
            "fast >= 10", "--json"]
    done = subprocess.run(list(map(str, argv)), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    rows = rows_of(done.stdout)
    assert rows and all(r["fast"] >= 10 and r["fast"] < r["slow"] for r in rows)
