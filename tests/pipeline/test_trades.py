"""barsweep trades: real daily MSFT and IBM bars (bokeh_sampledata) imported and swept by
the CLI, then one combo's stats and trades, chosen by rank or by parameter values,
printed and written as CSV by ``barsweep trades`` in a process of its own."""

import gzip
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from barsweep.datasets import open_bars
from barsweep.engine import METRICS, backtest
from barsweep.pipeline.analysis.rank import rank
from barsweep.pipeline.analysis.rebuild import best_backtest
from barsweep.pipeline.analysis.trades import combo_backtest, format_stat
from barsweep.pipeline.run.results import open_results

BARSWEEP = str(Path(sys.executable).parent / "barsweep")
EXECUTION = {"fill": "next_open", "fees": 0.0005}


def barsweep(*args, cwd=None):
    return subprocess.run([BARSWEEP, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def refusal_lines(stderr: str) -> list[str]:
    """stderr's lines but the note that a kernel compiles (said before a command runs,
    on a cold numba cache, whether or not it then refuses)."""
    return [line for line in stderr.strip().splitlines()
            if not line.startswith("barsweep: compiling")]


def write_spec(root: Path, name: str, **extra) -> Path:
    spec = {"data": {"store": "bars", "symbols": ["MSFT", "IBM"], "timeframe": "1d",
                     "start": "2004-01-01", "year_days": 252},
            "strategy": "ema_cross",
            "grid": {"fast": [5, 10, 20], "slow": [20, 50, 100], "take_profit": [0.1, 0.25]},
            "constraints": ["fast < slow"], "execution": EXECUTION,
            "run": {"out": f"{name}.zarr"}, **extra}
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    import bokeh_sampledata

    root = tmp_path_factory.mktemp("trades")
    source = Path(bokeh_sampledata.__file__).parent / "_data" / "stocks.csv.gz"
    with gzip.open(source, "rt") as fh:
        header, *rows = fh.read().splitlines()
    for symbol in ("MSFT", "IBM"):
        csv = root / f"{symbol}.csv"
        csv.write_text("\n".join([header, *(r for r in rows if r.startswith(f"{symbol},"))]))
        done = barsweep("data", "import", csv, "--symbol", symbol, "--timeframe", "1d",
                        "--store", root / "bars", "--price-column", "Adj Close")
        assert done.returncode == 0, done.stderr
    done = barsweep("run", write_spec(root, "r"), "--cluster", "threads", "--quiet", cwd=root)
    assert done.returncode == 0, done.stderr
    return root / "r.zarr"


def read_trades_csv(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path)
    for column in ("entry_time", "exit_time"):
        frame[column] = pd.to_datetime(frame[column], utc=True).astype("datetime64[ns, UTC]")
    return frame


def stat_rows(stdout: str) -> dict[str, list[str]]:
    """The printed stats block: entry name -> its values (combo, buy and hold)."""
    rows = {}
    for line in stdout.splitlines()[2:]:
        if not line.strip():
            break
        name, *values = line.split("  ")
        rows[name.strip()] = [v.strip() for v in values if v.strip()]
    return rows


def test_rank_1_prints_stats_beside_buy_and_hold_and_writes_the_trades(store, tmp_path):
    csv = tmp_path / "f.csv"
    done = barsweep("trades", store, "--symbol", "MSFT", "--rank", "1", "--csv", csv)
    assert done.returncode == 0, done.stderr
    # nothing on stderr but, the first time on a machine, that the recording kernels compile
    assert all(line.startswith("barsweep: compiling the recording kernel")
               for line in done.stderr.splitlines()), done.stderr
    rebuilt = best_backtest(open_results(store).sel(symbol=["MSFT"]), rank=1, by="sharpe")
    # the CSV round-trips to the trades table of the same combo, times as timestamps
    written = read_trades_csv(csv)
    pd.testing.assert_frame_equal(written, rebuilt.trades, check_exact=True)
    assert str(written["entry_time"].dtype) == "datetime64[ns, UTC]"
    assert len(written) > 5
    header, table_head = done.stdout.splitlines()[:2]
    assert header.startswith("MSFT ema_cross fast=") and "rank 1 by sharpe" in header
    assert "252 bars a year" in header
    assert table_head.split() == ["combo", "buy", "and", "hold"]
    rows = stat_rows(done.stdout)
    stats = rebuilt.stats(buy_and_hold=False)
    assert set(METRICS) <= set(rows)
    for name in stats.index:
        assert rows[name][0] == format_stat(name, stats[name]), name
    # buy and hold beside it: the builtin strategy over the same bars and execution,
    # run here from the bars themselves
    bars = open_bars(store.parent / "bars", "MSFT", "1d", "2004-01-01")
    held = backtest(bars, "buy_and_hold", ppy=rebuilt.ppy, **EXECUTION)
    assert rows["total_return"][1] == f"{held.metrics['total_return']:.2%}"
    assert rows["n_trades"] == [f"{len(written)}", "1"]
    first_bar = pd.Timestamp(bars["time"].values[0], tz="UTC")
    assert rows["start"][0] == rows["start"][1] == format_stat("start", first_bar)
    assert done.stdout.rstrip().endswith(f"wrote {len(written)} trades to {csv}")
    # without --csv the table is printed, one line a trade after its header
    done = barsweep("trades", store, "--symbol", "MSFT")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = lines.index(f"{len(written)} trades (times UTC):")
    assert len(lines) == at + 2 + len(written)
    first = rebuilt.trades.iloc[0]
    # daily bars: every time at midnight, so times print as dates
    assert lines[at + 2].split()[:3] == ["1", first["entry_time"].strftime("%Y-%m-%d"),
                                         first["exit_time"].strftime("%Y-%m-%d")]
    assert "00:00" not in done.stdout


def test_params_picks_that_combo(store, tmp_path):
    csv = tmp_path / "p.csv"
    done = barsweep("trades", store, "--symbol", "IBM", "--params",
                    "slow=50, fast=10,take_profit=0.25", "--csv", csv)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("IBM ema_cross fast=10 slow=50 take_profit=0.25 "
                                  "(chosen by --params)")
    ds = open_results(store)
    stored = {m: float(ds[m].sel(symbol="IBM", fast=10, slow=50, take_profit=0.25))
              for m in METRICS}
    rows = stat_rows(done.stdout)
    for name in ("total_return", "sharpe", "max_drawdown", "n_trades", "win_rate"):
        assert rows[name][0] == format_stat(name, stored[name]), name
    # the same combo run here, from the bars and the spec's execution settings
    bars = open_bars(store.parent / "bars", "IBM", "1d", "2004-01-01")
    ours = backtest(bars, "ema_cross", dict(fast=10, slow=50), ppy=252.0,
                    take_profit=0.25, **EXECUTION)
    assert ours.metrics == pytest.approx(stored, rel=0, abs=0, nan_ok=True)
    pd.testing.assert_frame_equal(read_trades_csv(csv), ours.trades, check_exact=True)
    assert (ours.trades["exit_reason"] == "target").any()  # the take_profit axis counts
    # from Python: numbers or text
    combo = combo_backtest(store, {"fast": 10, "slow": 50, "take_profit": 0.25}, symbol="IBM")
    assert combo.params == {"fast": 10, "slow": 50, "take_profit": 0.25}
    pd.testing.assert_frame_equal(combo.result.trades, ours.trades, check_exact=True)


def test_rank_by_where_picks_the_ranked_combo(store):
    done = barsweep("trades", store, "--symbol", "IBM", "--rank", "2", "--by", "cagr",
                    "--where", "n_trades >= 10")
    assert done.returncode == 0, done.stderr
    row = rank(open_results(store).sel(symbol=["IBM"]), by="cagr", top=2,
               where="n_trades >= 10").iloc[1]
    said = f"fast={row['fast']} slow={row['slow']} take_profit={row['take_profit']:g}"
    assert done.stdout.startswith(f"IBM ema_cross {said} (rank 2 by cagr where n_trades >= 10)")
    assert stat_rows(done.stdout)["cagr"][0] == format_stat("cagr", row["cagr"])


@pytest.mark.parametrize("args, words", [
    (["--params", "fast=7,slow=50,take_profit=0.1"], ["fast=7", "5, 10, 20"]),
    (["--params", "fast=10,slow=50,take_profit=0.3"], ["take_profit=0.3", "0.1, 0.25"]),
    (["--params", "fast=10"], ["slow and take_profit", "20, 50, 100", "0.1, 0.25"]),
    (["--params", "fats=10,slow=50"], ["'fats'", "fast, slow, take_profit"]),
    (["--params", "fast=20,slow=20,take_profit=0.1"], ["constraints", "fast < slow"]),
    (["--params", "fast:10"], ["NAME=VALUE"]),
    (["--params", "fast=10,slow=50,take_profit=0.1", "--by", "cagr"], ["--rank"]),
    (["--rank", "99"], ["--rank 99", "only 16 combos"]),
])
def test_bad_choices_are_refused_in_one_line(store, tmp_path, args, words):
    csv = tmp_path / "no.csv"
    done = barsweep("trades", store, "--symbol", "MSFT", *args, "--csv", csv)
    assert done.returncode == 2
    assert done.stdout == ""
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("barsweep: error: "), done.stderr
    for word in words:
        assert word in err[0]
    assert not csv.exists()


def test_symbol_is_needed_among_several_and_must_be_there(store, tmp_path):
    params = ["--params", "fast=10,slow=50,take_profit=0.25"]
    for command, args, words in (
            (["trades"], params, ["2 symbols", "MSFT, IBM", "--symbol"]),
            (["trades"], ["--symbol", "AAPL"], ["'AAPL'", "MSFT, IBM"]),
            (["plot", "best"], ["--symbol", "AAPL", "--out", tmp_path / "no.png"],
             ["'AAPL'", "MSFT, IBM"])):
        done = barsweep(*command, store, *args)
        err = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(err) == 1, done.stderr
        assert all(word in err[0] for word in words), err[0]
    assert not (tmp_path / "no.png").exists()


def test_rank_without_symbol_ranks_every_symbol_as_plot_best_does(store, tmp_path):
    """One rule for `trades --rank N` and `plot best --rank N` on a store of several
    symbols: without --symbol both take combo N of every symbol's combos ranked together
    (as `barsweep rank` ranks them), its own symbol with it; --symbol ranks one's."""
    ds = open_results(store)
    for n in (1, 2):
        row = rank(ds, by="sharpe", top=n).iloc[n - 1]
        done = barsweep("trades", store, "--rank", n)
        assert done.returncode == 0, done.stderr
        header = done.stdout.splitlines()[0]
        said = " ".join(f"{p}={row[p]:g}" for p in ("fast", "slow", "take_profit"))
        assert header.startswith(f"{row['symbol']} ema_cross {said} (rank {n} by sharpe "
                                 f"among every symbol's combos)"), header
        drawn = best_backtest(ds, rank=n)  # what plot best --rank n draws
        assert stat_rows(done.stdout)["total_return"][0] == format_stat(
            "total_return", drawn.metrics["total_return"])
        picture = tmp_path / f"best{n}.png"
        done = barsweep("plot", "best", store, "--rank", n, "--out", picture)
        assert done.returncode == 0 and picture.exists(), done.stderr
    # the two symbols' best differ, so the rule is seen at work: --symbol ranks one's
    other = "IBM" if rank(ds, top=1).iloc[0]["symbol"] == "MSFT" else "MSFT"
    done = barsweep("trades", store, "--rank", "1", "--symbol", other)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{other} ema_cross ")
    assert "(rank 1 by sharpe)" in done.stdout.splitlines()[0]


def test_a_walk_forward_store_takes_a_window_and_sample(store, tmp_path):
    root = store.parent
    done = barsweep("run", write_spec(root, "wf", walk_forward={"train": 500, "test": 250}),
                    "--cluster", "threads", "--quiet", cwd=root)
    assert done.returncode == 0, done.stderr
    wf = root / "wf.zarr"
    for args, words in (([], ["--window", "0 to 6", "barsweep walkforward"]),
                        (["--window", "7"], ["--window", "0 to 6"])):
        done = barsweep("trades", wf, "--symbol", "MSFT", *args)
        err = refusal_lines(done.stderr)
        assert done.returncode == 2 and len(err) == 1, done.stderr
        assert all(word in err[0] for word in words), err[0]
    done = barsweep("trades", store, "--symbol", "MSFT", "--window", "1")
    assert done.returncode == 2 and "walk-forward" in done.stderr
    # window 2's test bars, one combo: the trades of backtest() over those bars only
    csv = tmp_path / "w.csv"
    done = barsweep("trades", wf, "--symbol", "MSFT", "--window", "2", "--sample", "test",
                    "--params", "fast=5,slow=50,take_profit=0.25", "--csv", csv)
    assert done.returncode == 0, done.stderr
    assert "(window 2 test, chosen by --params)" in done.stdout.splitlines()[0]
    ds = open_results(wf)
    span = (int(ds["test_start_bar"][2]), int(ds["test_end_bar"][2]))
    bars = open_bars(root / "bars", "MSFT", "1d", "2004-01-01")
    ours = backtest(bars, "ema_cross", dict(fast=5, slow=50), ppy=252.0, span=span,
                    take_profit=0.25, **EXECUTION)
    stored = {m: float(ds[m].sel(symbol="MSFT", window=2, sample="test", fast=5, slow=50,
                                 take_profit=0.25)) for m in METRICS}
    assert ours.metrics == pytest.approx(stored, rel=0, abs=0, nan_ok=True)
    pd.testing.assert_frame_equal(read_trades_csv(csv), ours.trades, check_exact=True)
    rows = stat_rows(done.stdout)
    assert rows["n_bars"] == [f"{span[1] - span[0]}"] * 2
    # by rank: window 4's train sample, as walkforward chooses
    done = barsweep("trades", wf, "--symbol", "IBM", "--window", "4")
    assert done.returncode == 0, done.stderr
    assert "(window 4 train, rank 1 by sharpe)" in done.stdout.splitlines()[0]
    # plot best of a walk-forward store: a window's sample ranked, its combo drawn
    picture = tmp_path / "best.png"
    done = barsweep("plot", "best", wf, "--symbol", "IBM", "--window", "4", "--out", picture)
    assert done.returncode == 0 and picture.stat().st_size > 10_000, done.stderr
    done = barsweep("plot", "best", wf, "--out", tmp_path / "no.png")
    err = refusal_lines(done.stderr)
    assert done.returncode == 2 and len(err) == 1 and "--window" in err[0], done.stderr


def test_trades_is_in_the_help_with_every_option_explained():
    done = barsweep("--help")
    assert "trades" in done.stdout
    done = barsweep("trades", "--help")
    assert done.returncode == 0
    for option in ("--rank", "--params", "--symbol", "--by", "--where", "--window",
                   "--sample", "--csv"):
        assert option in done.stdout
    lines = done.stdout.split("positional arguments:")[1].splitlines()
    for line, after in zip(lines, [*lines[1:], ""]):
        if line.startswith("  ") and not line.startswith("   "):  # an argument's first line
            # its help text beside it, or on the next line
            assert re.search(r"\S {2,}\S", line) or after.startswith(" " * 8), line
    assert "``" not in done.stdout and ":func:" not in done.stdout
