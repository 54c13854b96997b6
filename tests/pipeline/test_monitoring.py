"""What the Dask dashboard shows of a run: task keys whose prefix names the phase and the
strategy, and each block's symbol (and window) as annotations, on a real LocalCluster."""

import numpy as np
import pytest
from dask.utils import key_split
from distributed.diagnostics.plugin import SchedulerPlugin

from barsweep.engine.strategies import strategy_names
from barsweep.pipeline.cli import main
from barsweep.pipeline.config.model import parse_spec
from barsweep.pipeline.run.accounts import BarsRef, SymbolAccount
from barsweep.pipeline.run.blocks import BlockTask
from barsweep.pipeline.run.cluster import connect
from barsweep.pipeline.run.execute import block_key
from barsweep.pipeline.run.orchestrate import run_spec

pytestmark = pytest.mark.slow


def task(strategy: str, block_id: int = 7) -> BlockTask:
    return BlockTask(block_id, "out.zarr", SymbolAccount(BarsRef("bars", "BTCUSDT", "1h")),
                     strategy, (),
                     (slice(0, 1),), (), None, 8760.0)


@pytest.mark.parametrize("name", strategy_names())
def test_the_key_prefix_names_the_phase_and_the_strategy(name):
    key = block_key(task(name), "ab12cd34ef56")
    words = [w for w in name.replace("_", "-").split("-") if w]  # "_test_x": test, x
    assert key_split(key).lower() == "-".join(["sweep", *words])
    assert key_split(block_key(task(name), "abcdefabcdef")) == key_split(key)  # all-letter id


def test_an_eight_letter_word_from_a_to_f_stays_in_the_prefix():
    assert key_split(block_key(task("donchian"), "0a1b2c3d4e5f")) == "sweep-Donchian"
    assert key_split(block_key(task("bollinger"), "0a1b2c3d4e5f")) == "sweep-bollinger"


class Seen(SchedulerPlugin):
    """Records each task's key prefix and annotations as the scheduler first sees it."""

    name = "barsweep-test-seen"

    def __init__(self):
        self.seen = {}

    async def start(self, scheduler):
        self.scheduler = scheduler

    def transition(self, key, start, finish, *args, **kwargs):
        if start == "released" and key not in self.seen:
            ts = self.scheduler.tasks.get(key)
            self.seen[key] = dict(ts.annotations) if ts is not None else {}


def test_a_run_shows_its_strategy_symbol_and_window_on_the_dashboard(tmp_path):
    assert main(["data", "synth", "--symbol", "BTCUSDT", "--timeframe", "1h", "--bars", "800",
                 "--seed", "1", "--store", str(tmp_path / "bars")]) == 0
    spec = parse_spec({
        "data": {"store": str(tmp_path / "bars"), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross", "grid": {"fast": [3, 5], "slow": [20, 30, 40]},
        "walk_forward": {"train": 300, "test": 100},
        "run": {"out": str(tmp_path / "r.zarr"), "block_size": 3}})
    with connect("local", n_workers=1) as client:
        plugin = Seen()
        client.register_plugin(plugin)
        run_spec(spec, client=client)
        seen = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.plugins[
            Seen.name].seen)
    blocks = {k: v for k, v in seen.items() if key_split(k) == "sweep-ema-cross"}
    assert len(blocks) == 2  # 2 boxes of 3 combos, each over the 5 windows
    assert {v["symbol"] for v in blocks.values()} == {"BTCUSDT"}
    assert {v["windows"] for v in blocks.values()} == {"0-4"}
    assert np.all([k.startswith("sweep-ema-cross-") for k in blocks])


def small_spec(tmp_path) -> str:
    assert main(["data", "synth", "--symbol", "BTCUSDT", "--timeframe", "1h", "--bars", "600",
                 "--seed", "2", "--store", str(tmp_path / "bars")]) == 0
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"data: {{store: {tmp_path / 'bars'}, symbols: [BTCUSDT], timeframe: 1h}}\n"
                    "strategy: ema_cross\ngrid: {fast: [3, 5], slow: [20, 30]}\n"
                    f"run: {{out: {tmp_path / 'r.zarr'}, block_size: 2}}\n")
    return str(spec)


def test_quiet_prints_only_the_summary_and_version_works(tmp_path, capsys):
    spec = small_spec(tmp_path)
    capsys.readouterr()
    assert main(["run", spec, "--quiet", "--workers", "1"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("4 combos in 2 blocks on cpu")
    assert lines[1] == f"results in {tmp_path / 'r.zarr'}" and err == ""
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("barsweep ")


def test_dask_info_only_with_verbose(tmp_path):
    import subprocess
    import sys

    spec = small_spec(tmp_path)
    run = [sys.executable, "-m", "barsweep.pipeline.cli"]
    plain = subprocess.run([*run, "run", spec, "--no-progress", "--workers", "1"],
                           capture_output=True, text=True, timeout=120)
    loud = subprocess.run([*run, "-v", "run", spec, "--no-progress", "--workers", "1",
                           "--overwrite"], capture_output=True, text=True, timeout=120)
    assert plain.returncode == loud.returncode == 0, plain.stderr + loud.stderr
    assert "Scheduler at" not in plain.stderr and "Scheduler at" in loud.stderr


def test_the_progress_line_has_eta_workers_and_the_best_sharpe(capsys):
    from barsweep.pipeline.run.blocks import BlockReport
    from barsweep.pipeline.run.progress import ProgressBar, eta_text

    assert [eta_text(s) for s in (4.4, 185, 7620)] == ["4s", "3m05s", "2h07m"]
    bar = ProgressBar(4, 400, every_s=0)
    bar.workers(2)
    bar.update(BlockReport(0, 100, 500, 0.1, best_sharpe=0.8))
    bar.update(BlockReport(1, 100, 500, 0.1, best_sharpe=np.nan))
    bar.close()
    line = capsys.readouterr().err.splitlines()[-1]
    assert "2/4 blocks, 200/400 combos" in line and "2 workers" in line
    assert "ETA " in line and "best sharpe 0.800" in line


def test_block_phase_timings_are_kept_in_the_store(tmp_path, capsys):
    import json

    import zarr

    spec = small_spec(tmp_path)
    assert main(["run", spec, "--quiet", "--workers", "2"]) == 0
    phases = json.loads(zarr.open_group(str(tmp_path / "r.zarr")).attrs["block_phases_s"])
    assert set(phases) == {"open_bars", "indicators", "kernel", "write"}
    for stats in phases.values():
        assert 0 <= stats["p50"] <= stats["p90"] <= stats["p100"] <= stats["total"]
    assert phases["kernel"]["total"] > 0


def test_results_carry_metric_metadata_in_the_metric_tables_order(tmp_path, capsys):
    from barsweep.engine import LOWER_IS_BETTER, METRICS
    from barsweep.pipeline.run.results import open_results

    spec = small_spec(tmp_path)
    assert main(["run", spec, "--quiet", "--workers", "1"]) == 0
    ds = open_results(tmp_path / "r.zarr")
    assert list(ds.data_vars)[:len(METRICS)] == list(METRICS)
    for name in METRICS:
        attrs = ds[name].attrs
        assert attrs["long_name"] and attrs["better"] == (
            "lower" if name in LOWER_IS_BETTER else "higher")
    assert ds["ulcer_index"].attrs["units"] == "percent" and "units" not in ds["sharpe"].attrs
    assert ds["max_drawdown"].attrs["better"] == "higher"


def test_perf_report_writes_dasks_performance_report(tmp_path, capsys):
    spec = small_spec(tmp_path)
    report = tmp_path / "perf.html"
    assert main(["run", spec, "--quiet", "--workers", "1", "--perf-report", str(report)]) == 0
    html = report.read_text()
    assert "<html" in html.lower() and "Dask Performance Report" in html
