"""The ``/barsweep`` dashboard page in a headless Chromium (its DevTools protocol) during
real runs: on the LocalCluster barsweep starts, on a `dask scheduler --preload
barsweep.pipeline.run.dashboard` started by hand with `dask worker`s, and on a threads run
asked for it (`barsweep run --dashboard`). The page loads with no console error and is in
the dashboard's menu; its counts grow as blocks end; its final table is `rank`'s top rows.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from helpers.cdp import CHROMIUM, Browser
from helpers.processes import DASK, stop
from helpers.runs import synth

from barsweep.pipeline.analysis.rank import rank
from barsweep.pipeline.config.grid import Grid
from barsweep.pipeline.config.model import load_spec
from barsweep.pipeline.run.cluster import connect
from barsweep.pipeline.run.dashboard import SweepWatch
from barsweep.pipeline.run.orchestrate import run_spec
from barsweep.pipeline.run.watch import TOP, TOPIC, heatmap_pair

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed "
                                    "here (.ci/run installs Debian's chromium)")

BLOCKS = re.compile(r"(\d+)/(\d+) blocks")
STATUS = "Bokeh.documents[0].get_model_by_name('barsweep-status').text"
TABLE = "Bokeh.documents[0].get_model_by_name('barsweep-top').text"
WORKERS = ("(d => (d instanceof Map ? d.get('worker') : d.worker).length)("
           "Bokeh.documents[0].get_model_by_name('barsweep-workers').data)")


@pytest.fixture(scope="module")
def bars(tmp_path_factory):
    return synth(tmp_path_factory.mktemp("bars") / "bars", 6000, seed=5)


def spec_file(tmp_path: Path, bars: Path, cluster: str = "local", slow_stop: int = 250) -> Path:
    """A sweep of ~30 blocks of 150 combos: a few seconds on two cores."""
    tmp_path.mkdir(exist_ok=True)
    spec = {"data": {"store": str(bars), "symbols": ["BTCUSDT"], "timeframe": "1h"},
            "strategy": "ema_cross", "cluster": cluster,
            "grid": {"fast": {"start": 2, "stop": 40, "step": 1},
                     "slow": {"start": 10, "stop": slow_stop, "step": 2}},
            "run": {"out": str(tmp_path / "r.zarr"), "block_size": 150}}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


class Cells(HTMLParser):
    """The rows of the page's top table, as lists of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs) -> None:
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag) -> None:
        if tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data) -> None:
        if self.cell is not None:
            self.cell.append(data)


def table_rows(html: str) -> list[dict[str, str]]:
    parser = Cells()
    parser.feed(html)
    head, *rows = parser.rows
    return [dict(zip(head, row)) for row in rows]


def blocks_of(status: str | None) -> tuple[int, int] | None:
    found = BLOCKS.search(status or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def watch_run(browser: Browser, page: str, running, shots: Path) -> list[tuple[int, int]]:
    """Open ``page``, then follow its counts while ``running()`` holds and until the run
    is done, with a screenshot mid-run and one at the end; returns the counts seen."""
    browser.open(page)
    browser.wait_for("window.Bokeh && Bokeh.documents.length > 0 && "
                     "Bokeh.documents[0].get_model_by_name('barsweep-status') !== null")
    assert browser.evaluate("document.querySelector('a[href=\"barsweep\"]') !== null")
    seen: list[tuple[int, int]] = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 240:
        counts = blocks_of(browser.evaluate(STATUS))
        if counts and (not seen or counts != seen[-1]):
            seen.append(counts)
            if 0 < counts[0] < counts[1] and not (shots / "mid.png").exists():
                browser.screenshot(shots / "mid.png")
        if counts and counts[0] == counts[1] and "done" in browser.evaluate(STATUS):
            break
        if not running() and time.monotonic() - t0 > 200:
            break
        time.sleep(0.1)
    browser.screenshot(shots / "end.png")
    return seen


def check_counts_and_table(browser: Browser, seen, out: Path) -> None:
    """The counts grew to the total; the table is `rank`'s top rows; no console error."""
    mid = [c for c in seen if 0 < c[0] < c[1]]
    assert mid, f"no count seen mid-run: {seen}"
    assert seen[-1][0] == seen[-1][1] > mid[0][0], seen
    assert [c[0] for c in seen] == sorted(c[0] for c in seen), seen
    rows = table_rows(browser.evaluate(TABLE))
    top = rank(out, top=TOP)
    assert len(rows) == len(top) == TOP
    for row, (_, want) in zip(rows, top.iterrows()):
        assert (row["symbol"], int(row["fast"]), int(row["slow"])) == (
            want["symbol"], want["fast"], want["slow"])
        assert row["sharpe"] == f"{want['sharpe']:.4f}"
    assert browser.errors == []


@pytest.mark.slow
@needs_chromium
def test_the_page_on_the_local_cluster_barsweep_starts(tmp_path, bars):
    spec = load_spec(str(spec_file(tmp_path, bars)))
    shots = tmp_path / "shots"
    shots.mkdir()
    with connect(spec.cluster, 2) as client, Browser(tmp_path / "chromium") as browser:
        run = threading.Thread(target=run_spec, args=(spec,),
                               kwargs={"client": client, "cluster": ("local", "a test")})
        page = client.dashboard_link.rsplit("/", 1)[0] + "/barsweep"
        browser.open(page)  # before the run: the page waits for one
        run.start()
        try:
            seen = watch_run(browser, page, run.is_alive, shots)
        finally:
            run.join(timeout=240)
        check_counts_and_table(browser, seen, tmp_path / "r.zarr")


@pytest.mark.slow
@needs_chromium
def test_the_page_on_a_scheduler_started_by_hand_with_the_preload(tmp_path, bars,
                                                                   start_scheduler):
    from distributed import Client

    spec = load_spec(str(spec_file(tmp_path, bars)))
    shots = tmp_path / "shots"
    shots.mkdir()
    scheduler, address = start_scheduler(tmp_path, "--preload",
                                         "barsweep.pipeline.run.dashboard")
    workers = [subprocess.Popen([DASK, "worker", "--scheduler-file",
                                 str(tmp_path / "scheduler.json"), "--nthreads", "1",
                                 "--host", "127.0.0.1", "--no-dashboard"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True) for _ in range(2)]
    try:
        with Client(address) as client, Browser(tmp_path / "chromium") as browser:
            client.wait_for_workers(2, timeout=120)
            port = client.scheduler_info(n_workers=0)["services"]["dashboard"]
            run = threading.Thread(target=run_spec, args=(spec,), kwargs={
                "client": client, "cluster": (address, "a test")})
            run.start()
            try:
                seen = watch_run(browser, f"http://127.0.0.1:{port}/barsweep", run.is_alive,
                                 shots)
            finally:
                run.join(timeout=240)
            check_counts_and_table(browser, seen, tmp_path / "r.zarr")
            assert browser.evaluate(WORKERS) == 2
    finally:
        for proc in (*workers, scheduler):
            stop(proc)


RUNGS = "Bokeh.documents[0].get_model_by_name('barsweep-rungs')"


@pytest.mark.slow
@needs_chromium
def test_a_search_shows_its_rungs_and_ends_on_ranks_top_rows(tmp_path, bars):
    spec = yaml.safe_load(spec_file(tmp_path, bars).read_text())
    spec["search"] = {"method": "halving", "budget": 1200, "seed": 3, "by": "sharpe",
                      "eta": 3, "rungs": 3}
    spec["run"]["block_size"] = 300
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    spec = load_spec(str(tmp_path / "spec.yaml"))
    with connect(spec.cluster, 2) as client, Browser(tmp_path / "chromium") as browser:
        browser.open(client.dashboard_link.rsplit("/", 1)[0] + "/barsweep")
        browser.wait_for("window.Bokeh && Bokeh.documents.length > 0 && "
                         f"{RUNGS} !== null")
        run_spec(spec, client=client, cluster=("local", "a test"))
        # done, and every rung's row full: a block's event may reach the scheduler after
        # the run's end on a loaded machine, and counts in its rung when it comes
        browser.wait_for(f"{STATUS}.includes('done') && {RUNGS}.visible && "
                         f"{RUNGS}.text.includes('<tr><td>2</td>') && "
                         f"[...{RUNGS}.text.matchAll(/<td>(\\d+)\\/(\\d+)<\\/td>/g)]"
                         f".every(m => m[1] === m[2])", timeout=60)
        rungs = re.findall(r"<tr><td>(\d+)</td><td>(\d+)/(\d+)</td>",
                           browser.evaluate(f"{RUNGS}.text"))
        assert [(r, done == blocks) for r, done, blocks in rungs] == [
            ("0", True), ("1", True), ("2", True)], rungs
        rows = table_rows(browser.evaluate(TABLE))
        top = rank(tmp_path / "r.zarr", top=TOP)
        assert len(rows) == len(top) == TOP
        for row, (_, want) in zip(rows, top.iterrows()):
            assert (int(row["fast"]), int(row["slow"])) == (want["fast"], want["slow"])
            assert row["sharpe"] == f"{want['sharpe']:.4f}"
            # in percent, as rank's tables show it
            assert row["total_return"] == f"{want['total_return'] * 100:.2f}%"
            assert row["max_drawdown"] == f"{want['max_drawdown'] * 100:.2f}%"
        assert browser.errors == []


def test_a_blocks_late_event_counts_in_its_own_rung_and_ends_the_run():
    """A stage's end waits for its events a while, not for ever: a block's event that
    comes after the next rung's start, or after the run's end, still counts in its own
    rung, and the run reads as done once it has come."""
    watch = SweepWatch()
    meta = {"by": "sharpe", "ascending": False, "idle_wins": False, "pair": ["fast"],
            "axes": [[1, 2]], "params": ["fast"]}

    def block(rung: int, block_id: int) -> dict:
        return {"run": "r", "kind": "block", "t": 1.0, "block": block_id, "rung": rung,
                "combos": 5, "bars": 10, "worker": "w", "rows": [row(block_id, 1.0, 1)]}

    for rung, blocks in ((0, (0, 1)), (1, (2, 3))):
        watch.log_event(TOPIC, {"run": "r", "kind": "stage", "t": 0.0, "blocks": 2,
                                "combos": 10, "rung": rung, **meta})
        if rung == 1:
            watch.log_event(TOPIC, block(0, 1))  # rung 0's last, late
        watch.log_event(TOPIC, block(rung, blocks[0]))
    watch.log_event(TOPIC, {"run": "r", "kind": "end", "t": 2.0})
    state = watch.state
    assert [(r, s["done"], s["blocks"]) for r, s in sorted(state.stages.items())] == [
        (0, 2, 2), (1, 1, 2)]
    assert not state.ended
    watch.log_event(TOPIC, block(1, 3))  # rung 1's last, after the end
    assert state.stages[1]["done"] == 2 and state.ended
    assert [r["position"] for r in state.rows[1]] == [2, 3]


def test_the_page_shows_fractions_in_percent_as_rank_does():
    from barsweep.pipeline.analysis.formatting import PERCENT as RANKS_PERCENT
    from barsweep.pipeline.run.dashboard_page import PERCENT, cell_text

    assert PERCENT == RANKS_PERCENT
    meta = {"params": ["fast"]}
    assert cell_text(0.30603, "total_return", meta) == "30.60%"
    assert cell_text(-0.0675, "max_drawdown", meta) == "-6.75%"
    assert cell_text(1.23456, "sharpe", meta) == "1.2346"
    assert cell_text(25.0, "n_trades", meta) == "25"


@pytest.mark.slow
@needs_chromium
def test_a_threads_run_serves_the_page_only_when_asked(tmp_path, bars):
    path = spec_file(tmp_path, bars, cluster="threads")
    command = [sys.executable, "-m", "barsweep.pipeline.cli", "run", str(path),
               "--workers", "2", "--no-progress"]
    small = spec_file(tmp_path / "small", bars, cluster="threads", slow_stop=20)
    plain = subprocess.run([*command[:4], str(small), *command[5:]], capture_output=True,
                           text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    assert "no dashboard (--dashboard serves one)" in plain.stdout + plain.stderr
    proc = subprocess.Popen([*command, "--overwrite", "--dashboard"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        line = ""
        while "this run: " not in line:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "no dashboard line"
        page = re.search(r"this run: (\S+?)\)", line).group(1)
        assert page.startswith("http://127.0.0.1:") and page.endswith("/barsweep")
        with Browser(tmp_path / "chromium") as browser:
            browser.open(page)
            browser.wait_for(f"Bokeh.documents.length && {STATUS}.includes('blocks')")
            assert blocks_of(browser.evaluate(STATUS)) is not None
            assert browser.errors == []
        assert proc.wait(timeout=300) == 0
    finally:
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------- the state


def row(position: int, sharpe: float, fast: int, ruined: bool = False) -> dict:
    return {"symbol": "X", "fast": fast, "sharpe": sharpe, "position": position,
            "ruined": ruined, "traded": True}


def test_the_plugin_folds_each_block_once_and_ranks_rows_as_rank_does():
    watch = SweepWatch()
    meta = {"by": "sharpe", "ascending": False, "idle_wins": False, "pair": ["fast"],
            "axes": [[1, 2, 3]], "params": ["fast"]}
    watch.log_event(TOPIC, {"run": "r1", "kind": "stage", "t": 0.0, "blocks": 3,
                            "combos": 30, "rung": -1, **meta})
    one = {"run": "r1", "kind": "block", "t": 1.0, "block": 0, "combos": 10, "bars": 100,
           "worker": "w1", "rows": [row(5, 1.0, 1), row(2, 1.0, 2), row(7, 9.0, 3, True)],
           "cells": [[1.0, 0.0, 1.0], [2.0, 0.0, 1.0]]}
    watch.log_event(TOPIC, one)
    watch.log_event(TOPIC, one)  # a block's event again (a retried fetch): counted once
    watch.log_event(TOPIC, {**one, "block": 1, "worker": "w2", "rows": [row(9, 2.0, 1)],
                            "cells": [[1.0, 0.0, 2.0], [2.0, 0.0, 0.5]]})
    watch.log_event("other", {"run": "r1", "kind": "block", "block": 2})
    watch.log_event(TOPIC, {"run": "r0", "kind": "block", "block": 2})  # an earlier run's
    state = watch.state
    assert state.totals() == (2, 3, 20, 30)
    assert state.workers == {"w1": 1, "w2": 1}
    assert state.combo_bars == 2000
    # best first; equal sharpe by position; ruined last whatever its sharpe
    assert [r["position"] for r in state.rows[-1]] == [9, 2, 5, 7]
    assert state.cells[-1] == {(1.0, 0.0): 2.0, (2.0, 0.0): 1.0}
    watch.log_event(TOPIC, {"run": "r1", "kind": "end", "t": 2.0})
    assert not state.ended  # a block is missing
    watch.log_event(TOPIC, {"run": "r2", "kind": "stage", "t": 3.0, "blocks": 1,
                            "combos": 1, "rung": -1, **meta, "ascending": True})
    assert watch.state.run == "r2" and watch.state.totals() == (0, 1, 0, 1)


def test_the_heatmap_takes_the_two_parameters_with_the_most_values():
    import numpy as np

    grid = Grid((("a", np.arange(3)), ("b", np.arange(9)), ("c", np.arange(5)),
                 ("d", np.arange(1))))
    assert heatmap_pair(grid) == ("b", "c")
    assert heatmap_pair(Grid((("a", np.arange(3)), ("d", np.arange(1))))) == ("a",)


def test_a_blocks_top_rows_are_rank_orders_first_ones():
    """Ties, infinite values, ruined combos and combos that never traded (where idling
    would win): the few rows a block sorts are the first of the whole order."""
    import numpy as np

    from barsweep.pipeline.run.order import rank_order
    from barsweep.pipeline.run.watch import Watch, top_order

    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(0, 120))
        score = rng.integers(-4, 4, n).astype(float)
        score[rng.random(n) < 0.1] = np.inf
        score[rng.random(n) < 0.05] = -np.inf
        ruined, traded = rng.random(n) < 0.2, rng.random(n) < 0.7
        for ascending in (False, True):
            for idle_wins in (False, True):
                watch = Watch("x", ascending, idle_wins, (), (), (1,),
                              top=int(rng.integers(1, 30)))
                want = rank_order(score, ascending, idle_wins, ruined, traded)[:watch.top]
                assert top_order(score, watch, ruined, traded).tolist() == want.tolist()


def test_store_positions_are_the_stores_flat_cells():
    import types

    import numpy as np

    from barsweep.pipeline.run.watch import Watch, store_positions

    watch = Watch("sharpe", False, False, (), (), (3, 7, 9))
    box = types.SimpleNamespace(watch=watch, cells=None, region=(slice(2, 3), slice(4, 7),
                                                                 slice(5, 9)),
                                axes=(("a", np.arange(3)), ("b", np.arange(4))))
    want = np.arange(3 * 7 * 9).reshape(3, 7, 9)[2:3, 4:7, 5:9].ravel()
    assert store_positions(box, np.arange(12)).tolist() == want.tolist()
    search = types.SimpleNamespace(watch=Watch("sharpe", False, False, (), (), (3, 50)),
                                   cells=np.array([0, 2]), region=(slice(1, 2), slice(10, 20)))
    assert store_positions(search, np.array([0, 2])).tolist() == [60, 62]
