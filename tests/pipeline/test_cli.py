"""The CLI's small commands and its error path (no cluster needed)."""

import numpy as np
import yaml

from barsweep.engine import METRICS
from barsweep.pipeline.analysis.rank import rank
from barsweep.pipeline.cli import main
from barsweep.pipeline.run.results import create_store, write_block


def test_data_synth_then_info(tmp_path, capsys):
    store = tmp_path / "bars"
    assert main(["data", "synth", "--symbol", "ETHUSDT", "--timeframe", "4h", "--bars", "500",
                 "--store", str(store)]) == 0
    arrow = store / "4h" / "ETHUSDT.arrow"
    assert capsys.readouterr().out == f"wrote 500 4h bars of ETHUSDT (seed 7) to {arrow}\n"
    assert main(["data", "info", "--store", str(store)]) == 0
    # 500 bars 4 h apart from 2020-01-01: the last opens 499 * 4 h = 83 days 4 h later
    mib = arrow.stat().st_size / 2**20
    assert capsys.readouterr().out.splitlines() == [
        f"{'symbol':<12} {'tf':<4} {'bars':>10} {'start':<26} {'end':<26} {'MiB':>8}",
        f"{'ETHUSDT':<12} {'4h':<4} {500:>10} {'2020-01-01 00:00:00+00:00':<26} "
        f"{'2020-03-24 04:00:00+00:00':<26} {mib:>8.2f}",
    ]


def test_bad_spec_exits_2_naming_the_key(tmp_path, capsys):
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump({
        "data": {"store": "bars", "symbols": ["X"], "timeframe": "1h"},
        "strategy": "ema_cross", "grid": {"fast": [5], "slow": [20]},
        "execution": {"fees": -0.1}}))
    assert main(["run", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "execution.fees" in err and str(spec) in err


def test_import_error_exits_2_naming_file_and_row(tmp_path, capsys):
    csv = tmp_path / "bad.csv"
    csv.write_text("time,open,high,low,close\n2020-01-01,1,2,0.5,1.5\n2020-01-02,1,0.9,0.5,1\n")
    assert main(["data", "import", str(csv), "--symbol", "X", "--timeframe", "1d",
                 "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "row 2" in err


def test_rank_orders_and_never_puts_nan_first(small_store):
    path, metrics = small_store
    top = rank(path, by="sharpe", top=20)
    assert len(top) == 11                   # 12 combos, one NaN
    assert top.iloc[0][["symbol", "fast", "slow"]].tolist() == ["B", 4, 20]
    assert top["sharpe"].is_monotonic_decreasing
    low = rank(path, by="volatility", top=1)  # lower is better
    assert low.iloc[0]["volatility"] == -99.0
    assert rank(path, by="sharpe", top=1, ascending=True).iloc[0]["sharpe"] == np.nanmin(
        metrics[3])


def test_rank_where_over_metrics_and_params(small_store, capsys):
    path, _ = small_store
    top = rank(path, by="sharpe", top=20, where="slow == 10 and fast >= 3")
    assert set(top["slow"]) == {10} and set(top["fast"]) <= {3, 4}
    assert main(["rank", path, "--by", "sharpe", "--top", "3"]) == 0
    table = capsys.readouterr().out
    assert "symbol" in table and "sharpe" in table
    assert main(["rank", path, "--by", "nope"]) == 2
    assert "unknown metric 'nope'" in capsys.readouterr().err
    assert main(["rank", path, "--where", "bogus > 1"]) == 2
    assert "bogus" in capsys.readouterr().err


def test_rank_ties_prefer_the_lower_index_and_json_has_no_infinity(tmp_path, capsys):
    import json

    path = str(tmp_path / "t.zarr")
    create_store(path, ["A"], [("p", np.arange(6))], (6,), 1, {"spec": "t"})
    metrics = np.zeros((len(METRICS), 1, 6))
    metrics[METRICS.index("n_trades")] = 3.0
    metrics[3, 0] = [1.0, 5.0, 5.0, 5.0, 2.0, 5.0]   # sharpe: four-way tie at the top
    metrics[1, 0, 1] = np.inf                         # cagr overflow on a tiny run
    write_block(path, (slice(0, 1), slice(0, 6)), metrics, 0)
    assert rank(path, by="sharpe", top=2)["p"].tolist() == [1, 2]
    assert main(["rank", path, "--by", "sharpe", "--top", "1", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)[0]
    assert record["p"] == 1 and record["cagr"] is None
