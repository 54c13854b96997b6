"""`rank` with ``smooth`` and ``across``, `pareto_front` and `pbo_table` read slab by
slab equal the whole-grid implementations (tests/helpers/rank_reference.py) on stores written
by real runs: several symbols, ``where``, incomplete and walk-forward stores, slabs of a
block or two (and of one cell's budget)."""

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import zarr
from helpers.processes import capped
from helpers.rank_reference import pareto_whole, pbo_whole, rank_whole
from helpers.runs import run_spec_file, synth

from barsweep.pipeline.analysis import stream, stream_more
from barsweep.pipeline.analysis.rank import pareto_front, pbo_table, rank
from barsweep.pipeline.run.results import PENDING, open_results


def assert_same(got, want):
    """The same rows in the same order with the same values; columns computed from
    ``dsr`` to 1e-12 (its trials' variance is summed slab by slab)."""
    near = [c for c in want.columns if "dsr" in c]
    pd.testing.assert_frame_equal(got.drop(columns=near), want.drop(columns=near),
                                  check_exact=True)
    for c in near:
        np.testing.assert_allclose(got[c], want[c], rtol=1e-12, atol=1e-15)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``plain.zarr`` (three symbols, 5x7-combo blocks, 4 PBO segments), ``partial.zarr``
    (the same with a fifth of its blocks pending) and ``wf.zarr`` (walk-forward)."""
    root = tmp_path_factory.mktemp("stream_more")
    for seed, symbol in enumerate(("AAA", "BBB", "CCC")):
        synth(root / "bars", 900, seed=seed + 3, symbol=symbol)
    base = {"data": {"store": str(root / "bars"), "symbols": ["AAA", "BBB", "CCC"],
                     "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": {"fast": {"start": 2, "stop": 30, "step": 1},
                     "slow": {"start": 10, "stop": 80, "step": 3}},
            "constraints": ["fast < slow"],
            "execution": {"fill": "next_open", "fees": 0.001}}
    for name, extra in (("plain", {}), ("wf", {"walk_forward": {"train": 400,
                                                                 "test": 200}})):
        if name == "plain":
            extra = {"analysis": {"pbo_segments": 4}}
        run_spec_file({**base, **extra, "run": {"out": str(root / f"{name}.zarr"),
                                                 "block_size": 35}},
                      root / f"{name}.yaml", "--cluster", "threads")
    shutil.copytree(root / "plain.zarr", root / "partial.zarr")
    done = zarr.open_group(str(root / "partial.zarr"), mode="r+")["done"]
    flags = done[:]
    flags.flat[::5] = PENDING
    done[:] = flags
    return root


RANKS = [
    {"smooth": 1},
    {"smooth": 2, "by": "volatility"},
    {"smooth": 4, "by": "total_return", "top": 10_000},      # boxes of 9: pairwise sums
    {"smooth": 1, "by": "calmar", "where": "n_trades >= 3 and fast < slow / 2"},
    {"smooth": 1, "by": "dsr", "where": "symbol != 'BBB'"},
    {"smooth": 3, "by": "sharpe", "symbol": "CCC", "top": 10_000},
    {"across": "symbol"},
    {"across": "symbol", "agg": "mean", "by": "volatility", "top": 10_000},
    {"across": "symbol", "agg": "min", "by": "n_trades", "top": 10_000},   # ties
    {"across": "symbol", "agg": "median", "by": "psr", "where": "win_rate > 0.3"},
    {"across": "symbol", "agg": "mean", "smooth": 1, "by": "sortino"},
    {"across": "symbol", "agg": "min", "smooth": 2, "where": "fast >= 4", "top": 10_000},
]


#: The slab budget (cells) per store: slabs of a block or two, of one block, of a few.
BUDGET = {"plain": 40, "partial": 1, "wf": 70}


@pytest.mark.parametrize("case", RANKS, ids=lambda c: ",".join(f"{k}={v}"
                                                               for k, v in c.items()))
@pytest.mark.parametrize("store", ["plain", "partial", "wf"])
def test_smooth_and_across_rank_equal_the_whole_grid(stores, monkeypatch, store, case):
    monkeypatch.setattr(stream, "SLAB_CELLS", BUDGET[store])
    path = stores / f"{store}.zarr"
    partial = store == "partial"
    want = rank_whole(path, partial=partial, **case)
    got = rank(path, partial=partial, **case)
    assert len(want) > 0
    assert_same(got, want)
    if store == "wf" and "symbol" not in case:
        assert_same(rank(path, sample="test", **case), rank_whole(path, sample="test", **case))


def test_smooth_reads_haloed_slabs_not_the_grid(stores, monkeypatch):
    """Each slab holds one block and its halo, and the top is the same."""
    seen = []
    read = stream.Slab.__init__

    def spy(self, ds, region, *args):
        read(self, ds, region, *args)
        seen.append(self.shape)

    monkeypatch.setattr(stream, "SLAB_CELLS", 1)
    monkeypatch.setattr(stream_more.Slab, "__init__", spy)
    path = stores / "plain.zarr"
    assert_same(rank(path, smooth=2, across="symbol", top=50),
                rank_whole(path, smooth=2, across="symbol", top=50))
    chunks = zarr.open_group(str(path), mode="r")["sharpe"].chunks
    most = 3 * (chunks[1] + 4) * (chunks[2] + 4)       # every symbol, a halo of 2
    assert len(seen) > 10 and max(int(np.prod(s)) for s in seen) <= most


FRONTS = [
    {"metrics": ["sharpe", "max_drawdown"]},
    {"metrics": ["total_return", "volatility"], "where": "n_trades >= 2"},
    {"metrics": ["sharpe", "max_drawdown", "win_rate"], "symbol": "BBB"},
    {"metrics": ["dsr", "n_trades"]},
    {"metrics": ["sharpe", "max_drawdown"], "across": "symbol"},
    {"metrics": ["calmar", "volatility", "n_trades"], "across": "symbol", "agg": "min",
     "where": "fast < 20"},
    {"metrics": ["sortino", "ulcer_index"], "across": "symbol", "agg": "mean"},
]


@pytest.mark.parametrize("case", FRONTS, ids=lambda c: ",".join(
    f"{k}={','.join(v) if k == 'metrics' else v}" for k, v in c.items()))
@pytest.mark.parametrize("store", ["plain", "partial", "wf"])
def test_streamed_pareto_front_equals_the_whole_grid(stores, monkeypatch, store, case):
    monkeypatch.setattr(stream, "SLAB_CELLS", BUDGET[store])
    path = stores / f"{store}.zarr"
    # an incomplete store is given opened (its pending blocks hidden), as the CLI can't
    results = open_results(path, partial=True) if store == "partial" else path
    want = pareto_whole(results, **case)
    got = pareto_front(results, **case)
    assert len(want) > 1
    assert_same(got, want)


def assert_same_pbo(got, want):
    """Bit-identical PBO results, group by group."""
    assert [labels for labels, _ in got] == [labels for labels, _ in want]
    for (_, a), (_, b) in zip(got, want):
        for field in dataclasses.fields(a):
            x, y = getattr(a, field.name), getattr(b, field.name)
            if isinstance(y, np.ndarray):
                np.testing.assert_array_equal(x, y, strict=True)
            else:
                assert x == y or (x != x and y != y), field.name


@pytest.mark.parametrize("budget", [200, 1])
@pytest.mark.parametrize("case", [{}, {"where": "n_trades >= 3 and slow > 20"},
                                  {"where": "fast > 5", "max_splits": 3, "seed": 2}])
def test_streamed_pbo_equals_the_whole_grid(stores, monkeypatch, case, budget):
    monkeypatch.setattr(stream, "SLAB_CELLS", budget)
    for results in (stores / "plain.zarr", open_results(stores / "partial.zarr",
                                                        partial=True)):
        want = pbo_whole(results, **case)
        got = pbo_table(results, **case)
        assert len(want) == 3 and want[0][1].n_combos > 10
        assert_same_pbo(got, want)


def test_pbo_of_a_symbol_without_trials_is_refused_as_before(stores):
    from barsweep.errors import SpecError

    for call in (pbo_whole, pbo_table):
        with pytest.raises(SpecError, match=r"\{'symbol': 'AAA'\}: fewer than two combos"):
            call(stores / "plain.zarr", where="symbol != 'AAA'")


def test_pbo_and_pareto_refuse_an_incomplete_store_given_as_a_path(stores):
    from barsweep.pipeline.run.results import ResultsError

    for call in (lambda p: pbo_table(p), lambda p: pareto_front(p, ["sharpe", "calmar"])):
        with pytest.raises(ResultsError, match="incomplete"):
            call(stores / "partial.zarr")


def test_pending_slabs_are_not_read(stores, monkeypatch):
    """A store whose blocks are all pending but one reads that block's slabs only."""
    path = stores / "mostly_pending.zarr"
    shutil.copytree(stores / "plain.zarr", path)
    done = zarr.open_group(str(path), mode="r+")["done"]
    flags = done[:]
    flags[1:] = PENDING
    done[:] = flags
    seen = []
    read = stream.Slab.__init__

    def spy(self, ds, region, *args):
        read(self, ds, region, *args)
        seen.append(region)

    monkeypatch.setattr(stream, "SLAB_CELLS", 1)
    monkeypatch.setattr(stream.Slab, "__init__", spy)
    for kwargs in ({}, {"smooth": 1}, {"across": "symbol"}):
        seen.clear()
        got = rank(path, partial=True, top=1000, **kwargs)
        assert_same(got, rank_whole(path, partial=True, top=1000, **kwargs))
        assert 1 <= len(seen) <= 2, kwargs       # (trials_sr0 reads it too)


@pytest.mark.slow
def test_smooth_across_pareto_pbo_under_a_memory_cap_of_a_store_bigger_than_it(tmp_path):
    """A real 10^7-combo store (10 symbols x 1000 x 1000 on 1200 bars, 10 PBO segments:
    about 3 GiB of arrays): each analysis runs within the cap of test_rank_stream, under
    which the whole-grid implementations fail, and prints what they print."""
    import subprocess
    import sys


    symbols = [f"S{k:02d}" for k in range(10)]
    for k, symbol in enumerate(symbols):
        synth(tmp_path / "bars", 1200, seed=k + 1, symbol=symbol)
    out = run_spec_file(
        {"data": {"store": str(tmp_path / "bars"), "symbols": symbols, "timeframe": "1h"},
         "strategy": "ema_cross",
         "grid": {"fast": {"start": 2, "stop": 1001, "step": 1},
                  "slow": {"start": 2, "stop": 1001, "step": 1}},
         "execution": {"fill": "next_open", "fees": 0.001},
         "run": {"out": str(tmp_path / "big.zarr")}},
        tmp_path / "big.yaml", "--cluster", "threads")
    cli = [sys.executable, "-m", "barsweep.pipeline.cli", "rank", str(out), "--json"]
    for flags in (["--smooth", "1"], ["--across", "symbol", "--agg", "mean"],
                  ["--pareto", "sharpe,max_drawdown"], ["--pbo"]):
        streamed = capped(*cli, *flags)
        assert streamed.returncode == 0, (flags, streamed.stderr)
        free = subprocess.run([*cli, *flags], capture_output=True, text=True, timeout=600)
        assert streamed.stdout == free.stdout, flags
    whole = capped(sys.executable, "-c", "import sys; sys.path[:0] = sys.argv[1:2]; "
                   "from helpers.rank_reference import pbo_whole; pbo_whole(sys.argv[2])",
                   str(Path(__file__).parents[1]), str(out))
    assert whole.returncode != 0 and "MemoryError" in whole.stderr
