"""`rank` read slab by slab equals the ranking of the whole grid in memory, on stores
written by real runs (complete, incomplete, several symbols, a walk-forward one)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import zarr
from helpers.compare import pending_copy
from helpers.processes import capped
from helpers.rank_reference import rank_whole
from helpers.runs import run_spec_file, synth

from barsweep.pipeline.analysis import stream
from barsweep.pipeline.analysis.rank import rank


def assert_same(got, want):
    """The same rows in the same order with the same values; ``dsr`` to 1e-12 (its
    trials' variance is summed slab by slab, so in another order than numpy's)."""
    pd.testing.assert_frame_equal(got.drop(columns="dsr", errors="ignore"),
                                  want.drop(columns="dsr", errors="ignore"),
                                  check_exact=True)
    if "dsr" in want:
        np.testing.assert_allclose(got["dsr"], want["dsr"], rtol=1e-12, atol=1e-15)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``plain.zarr`` (two symbols, 5x7-combo blocks), ``partial.zarr`` (the same with
    a third of its blocks pending) and ``wf.zarr`` (walk-forward)."""
    root = tmp_path_factory.mktemp("stream")
    synth(root / "bars", 900, seed=3, symbol="AAA")
    synth(root / "bars", 900, seed=4, symbol="BBB")
    base = {"data": {"store": str(root / "bars"), "symbols": ["AAA", "BBB"],
                     "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": {"fast": {"start": 2, "stop": 30, "step": 1},
                     "slow": {"start": 10, "stop": 80, "step": 3}},
            "constraints": ["fast < slow"],
            "execution": {"fill": "next_open", "fees": 0.001}}
    for name, extra in (("plain", {}), ("wf", {"walk_forward": {"train": 400,
                                                                 "test": 200}})):
        run_spec_file({**base, **extra, "run": {"out": str(root / f"{name}.zarr"),
                                                 "block_size": 35}},
                      root / f"{name}.yaml", "--cluster", "threads")
    pending_copy(root / "plain.zarr", root / "partial.zarr")
    return root


CASES = [
    {},
    {"by": "volatility"},                      # lower is better, doing nothing wins
    {"by": "total_return", "ascending": True},
    {"by": "sharpe", "top": 10_000},           # every combo: the whole order, ties too
    {"by": "n_trades", "top": 10_000},         # many ties, broken by position
    {"by": "calmar", "where": "n_trades >= 3 and fast < slow / 2"},
    {"by": "sharpe", "where": "symbol == 'BBB' and win_rate > 0.3"},
    {"by": "sortino", "symbol": "AAA"},
    {"by": "dsr", "top": 50},
    {"by": "psr", "top": 50},
    {"by": "total_return", "where": "dsr > 0.05 and psr < 0.999"},
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}"
                                                               for k, v in c.items()))
@pytest.mark.parametrize("store", ["plain", "partial", "wf"])
def test_streamed_rank_equals_the_whole_grid_ranking(stores, monkeypatch, store, case):
    monkeypatch.setattr(stream, "SLAB_CELLS", 40)  # many slabs of a block or two
    path = stores / f"{store}.zarr"
    partial = store == "partial"
    want = rank_whole(path, partial=partial, **case)
    got = rank(path, partial=partial, **case)
    assert len(want) > 0
    assert_same(got, want)


def test_streamed_rank_reads_slabs_not_the_grid(stores, monkeypatch):
    """Each slab holds at most one block (the budget is one cell) and the top is the same."""
    seen = []
    read = stream.Slab.__init__

    def spy(self, ds, region, *args):
        read(self, ds, region, *args)
        seen.append(self.shape)

    monkeypatch.setattr(stream, "SLAB_CELLS", 1)
    monkeypatch.setattr(stream.Slab, "__init__", spy)
    path = stores / "partial.zarr"
    got = rank(path, by="dsr", partial=True, where="n_trades > 1")
    assert_same(got, rank_whole(path, by="dsr", partial=True, where="n_trades > 1"))
    chunks = zarr.open_group(str(path), mode="r")["sharpe"].chunks
    assert len(seen) > 10
    assert max(int(np.prod(s)) for s in seen) <= int(np.prod(chunks))


#: The address space `rank` runs in below: the streamed rank of the 10^7-combo store
#: needs 1.2-1.5 GiB of it (mostly the interpreter, numba and dask), the whole-grid
#: ranking more than 2.5 GiB.
@pytest.mark.slow
def test_rank_under_a_memory_cap_of_a_store_bigger_than_it(tmp_path):
    """A real 10^7-combo store (1000 x 10000 on 120 bars): ranked within a cap under
    which ranking the whole grid in memory fails."""
    import json
    import sys

    synth(tmp_path / "bars", 120, seed=1, symbol="AAA")
    out = run_spec_file(
        {"data": {"store": str(tmp_path / "bars"), "symbols": ["AAA"], "timeframe": "1h"},
         "strategy": "ema_cross",
         "grid": {"fast": {"start": 2, "stop": 1001, "step": 1},
                  "slow": {"start": 2, "stop": 10001, "step": 1}},
         "execution": {"fill": "next_open", "fees": 0.001},
         "run": {"out": str(tmp_path / "big.zarr")}},
        tmp_path / "big.yaml", "--cluster", "threads")
    whole = capped(sys.executable, "-c", "import sys; sys.path[:0] = sys.argv[1:2]; "
                   "from helpers.rank_reference import rank_whole; "
                   "rank_whole(sys.argv[2], by='dsr')", str(Path(__file__).parents[1]), str(out))
    assert whole.returncode != 0 and "MemoryError" in whole.stderr
    streamed = capped(sys.executable, "-m", "barsweep.pipeline.cli", "rank", str(out),
                      "--by", "dsr", "--where", "n_trades >= 1", "--json")
    assert streamed.returncode == 0, streamed.stderr
    rows = json.loads(streamed.stdout)
    want = rank(out, by="dsr", where="n_trades >= 1")
    assert [(r["fast"], r["slow"]) for r in rows] == list(zip(want["fast"], want["slow"]))
