"""`plot heatmap`, `walkforward` and `report` read the store slab by slab: the heatmap's
grid equals the whole grid reduced in memory at once, the walk-forward choices are
those of the whole train grid ranked in memory, and the report leaks no numpy warning;
on stores written by real runs (several symbols, constraints, a walk-forward one, an
incomplete one, one with combos that never trade)."""

import warnings

import numpy as np
import pytest
import zarr
from helpers.compare import pending_copy
from helpers.runs import run_spec_file, synth

from barsweep.engine import BEST_WHEN_IDLE, LOWER_IS_BETTER, METRICS
from barsweep.pipeline.analysis import stream
from barsweep.pipeline.analysis.plots import idle_cells, metric_grid
from barsweep.pipeline.analysis.rank import _where_mask, rank_order
from barsweep.pipeline.analysis.walkforward import walkforward
from barsweep.pipeline.cli import main
from barsweep.pipeline.run.results import open_results

REDUCERS = {"max": np.nanmax, "mean": np.nanmean, "median": np.nanmedian}


def metric_grid_whole(ds, metric, x, y=None, *, symbol=None, reduce="max", sample=None,
                      window=None):
    """The heatmap's grid from the whole grid read into memory at once (the reference:
    select, transpose, reshape, one numpy reduction)."""
    da = ds[metric]
    if "symbol" in da.dims:
        da = da.sel(symbol=symbol or ds["symbol"].values[0])
    for dim, value in (("sample", sample), ("window", window)):
        if dim in da.dims:
            da = da.sel({dim: value if value is not None else (
                "test" if dim == "sample" else da[dim].values[0])})
    kept = [x] if y is None else [y, x]
    others = [d for d in da.dims if d not in kept]
    values = np.asarray(da.transpose(*kept, *others).values, dtype=np.float64)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        flat = values.reshape(*values.shape[:len(kept)], -1)
        return REDUCERS[reduce](flat, axis=-1) if others else flat[..., 0]


def choose_whole(ds, symbol, w, by, where):
    """Window ``w``'s choice from its whole train grid ranked in memory (the reference)."""
    train = ds[list(METRICS)].sel(symbol=symbol).isel(window=w).sel(sample="train")
    params = tuple(d for d in train[METRICS[0]].dims)
    shape = tuple(train.sizes[p] for p in params)
    score = np.asarray(train[by].transpose(*params).values, dtype=np.float64).ravel()
    keep = ~np.isnan(score)
    if where:
        one = train.drop_vars("symbol", errors="ignore").expand_dims(symbol=[symbol])
        keep &= _where_mask(one, where, ("symbol", *params), (1, *shape))
    candidates = np.flatnonzero(keep)
    if not len(candidates):
        return -1

    def column(name):
        return np.asarray(train[name].transpose(*params).values).ravel()[candidates]

    ascending = by in LOWER_IS_BETTER
    order = rank_order(score[candidates], ascending, ascending or by in BEST_WHEN_IDLE,
                       column("ruined") == 1.0, column("n_trades") > 0.0)
    return int(candidates[order[0]])


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``plain.zarr`` (two symbols, constraints, stop_loss a third parameter, blocks of
    a few combos), ``partial.zarr`` (the same, a third of its blocks pending), ``wf.zarr``
    (walk-forward), ``idle.zarr`` (300 bars: the slowest averages never cross) and
    ``never.zarr`` (DDD's 80 bars: none of its combos ever trades)."""
    root = tmp_path_factory.mktemp("views")
    synth(root / "bars", 900, seed=3, symbol="AAA")
    synth(root / "bars", 900, seed=4, symbol="BBB")
    synth(root / "bars", 300, seed=4, symbol="CCC")
    base = {"data": {"store": str(root / "bars"), "symbols": ["AAA", "BBB"],
                     "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": {"fast": {"start": 2, "stop": 30, "step": 2},
                     "slow": {"start": 10, "stop": 80, "step": 5},
                     "stop_loss": [0.01, 0.03, 0.1]},
            "constraints": ["fast < slow"],
            "execution": {"fill": "next_open", "fees": 0.001}}
    idle = {"data": {**base["data"], "symbols": ["CCC"]},
            "grid": {"fast": {"start": 2, "stop": 400, "step": 40},
                     "slow": {"start": 10, "stop": 1000, "step": 90},
                     "stop_loss": [0.02, 0.2]},
            "constraints": ["fast < slow", "slow < 900"]}
    synth(root / "bars", 80, seed=9, symbol="DDD")
    never = {"data": {**base["data"], "symbols": ["AAA", "DDD"]},
             "grid": {"fast": {"start": 50, "stop": 90, "step": 10},
                      "slow": {"start": 100, "stop": 400, "step": 50},
                      "stop_loss": [0.02, 0.2]}}
    for name, extra in (("plain", {}), ("wf", {"walk_forward": {"train": 300, "test": 150}}),
                        ("idle", idle), ("never", never)):
        run_spec_file({**base, **extra, "run": {"out": str(root / f"{name}.zarr"),
                                                 "block_size": 40}},
                      root / f"{name}.yaml", "--cluster", "threads")
    pending_copy(root / "plain.zarr", root / "partial.zarr")
    return root


GRIDS = [
    ("plain", {"x": "fast", "y": "slow"}),
    ("plain", {"x": "slow", "y": "stop_loss", "symbol": "BBB"}),
    ("plain", {"x": "stop_loss"}),
    ("partial", {"x": "fast", "y": "slow", "symbol": "BBB"}),
    ("partial", {"x": "stop_loss", "y": "fast"}),
    ("wf", {"x": "fast", "y": "slow"}),
    ("wf", {"x": "slow", "y": "fast", "window": 1, "sample": "train", "symbol": "BBB"}),
    ("idle", {"x": "slow", "y": "fast"}),
]


@pytest.mark.parametrize("reduce", ["max", "mean", "median"])
@pytest.mark.parametrize(("store", "case"), GRIDS, ids=[f"{s}-{'-'.join(map(str, c.values()))}"
                                                        for s, c in GRIDS])
@pytest.mark.parametrize("metric", ["sharpe", "max_drawdown"])
def test_streamed_heatmap_grid_equals_the_whole_grid_reduced(stores, monkeypatch, store, case,
                                                            reduce, metric):
    monkeypatch.setattr(stream, "SLAB_CELLS", 30)  # many slabs of a block or two
    path = stores / f"{store}.zarr"
    partial = store == "partial"
    kw = {k: v for k, v in case.items() if k not in ("x", "y")}
    if store != "idle":
        kw.setdefault("symbol", "AAA")
    want = metric_grid_whole(open_results(path, partial=partial).load(), metric, case["x"],
                             case.get("y"), reduce=reduce, **kw)
    ds = stream.open_store(path, partial=partial)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = metric_grid(ds, metric, case["x"], case.get("y"), reduce=reduce, **kw)
    assert got.dims == ((case["x"],) if "y" not in case else (case["y"], case["x"]))
    if case.get("y") == "slow":
        assert np.isnan(want).any()  # fast >= slow: excluded by the constraints
    if reduce == "mean":  # a running sum: another order of additions than numpy's
        np.testing.assert_allclose(got.values, want, rtol=1e-12, atol=1e-15)
    else:
        np.testing.assert_array_equal(got.values, want)
    idle = idle_cells(ds, case["x"], case.get("y"), **kw)
    want_idle = metric_grid_whole(open_results(path, partial=partial), "n_trades", case["x"],
                                  case.get("y"), **kw) == 0
    np.testing.assert_array_equal(idle, want_idle)
    if store == "idle" and metric == "sharpe":
        assert idle.any() and (np.isnan(want) & ~idle).any()  # never traded; excluded


def test_the_heatmap_reads_slabs_not_the_grid(stores, monkeypatch):
    """Slabs of at most one block (max), of one band of cells with the other dims whole
    (median); the grid is the same."""
    seen = []
    read = stream.Slab.__init__

    def spy(self, ds, region, *args):
        read(self, ds, region, *args)
        seen.append(self.shape)

    monkeypatch.setattr(stream, "SLAB_CELLS", 1)
    monkeypatch.setattr(stream.Slab, "__init__", spy)
    path = stores / "plain.zarr"
    chunks = zarr.open_group(str(path), mode="r")["sharpe"].chunks  # symbol, fast, slow, sl
    ds = stream.open_store(path)
    got = metric_grid(ds, "sharpe", "fast", "slow", symbol="BBB")
    np.testing.assert_array_equal(got.values, metric_grid_whole(
        open_results(path), "sharpe", "fast", "slow", symbol="BBB"))
    assert len(seen) > 10 and max(int(np.prod(s)) for s in seen) <= int(np.prod(chunks))
    seen.clear()
    metric_grid(ds, "sharpe", "fast", "slow", reduce="median", symbol="BBB")
    band = chunks[1] * chunks[2] * ds.sizes["stop_loss"]
    assert len(seen) > 10 and max(int(np.prod(s)) for s in seen) <= band


@pytest.mark.parametrize(("by", "where"), [("sharpe", None), ("volatility", None),
                                           ("total_return", "n_trades >= 3 and fast < 10"),
                                           ("n_trades", None), ("calmar", "win_rate > 2")])
@pytest.mark.parametrize("symbol", ["AAA", "BBB"])
def test_walkforward_chooses_as_the_whole_train_grid_ranked(stores, monkeypatch, by, where,
                                                            symbol):
    monkeypatch.setattr(stream, "SLAB_CELLS", 30)
    path = stores / "wf.zarr"
    wf = walkforward(path, by=by, where=where, symbol=symbol)
    ds = open_results(path)
    want = [choose_whole(ds, symbol, w, by, where) for w in range(ds.sizes["window"])]
    assert wf.windows["combo"].tolist() == want
    assert (max(want) >= 0) == (where != "win_rate > 2")


@pytest.mark.parametrize("store", ["plain", "wf", "idle", "never"])
def test_report_leaks_no_warning(stores, monkeypatch, tmp_path, store, capsys):
    """Every warning is an error here: the report of a store with excluded cells, combos
    that never trade, a symbol none of whose combos trades, or windows, is written all
    the same."""
    monkeypatch.setattr(stream, "SLAB_CELLS", 30)
    page = tmp_path / "r.html"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(["report", str(stores / f"{store}.zarr"), "--out", str(page)]) == 0
    text = page.read_text()
    assert text.count("data:image/png;base64,") >= 2
    assert capsys.readouterr().err == ""
    assert ("No combo of DDD has a defined sharpe" in text) == (store == "never")


@pytest.mark.parametrize(("n_x", "start"), [(9996, 5), (2500, 2), (48, 2), (300, 100_000)])
def test_x_tick_labels_of_a_wide_heatmap_do_not_overlap(tmp_path, n_x, start):
    """1000 x 9996 cells (and narrower, longer-labelled ones): the x labels, drawn, stand
    apart from each other, and there are at least three of them."""
    import xarray as xr

    from barsweep.pipeline.analysis.plots import plot_heatmap

    ys, xs = np.arange(2, 1002), np.arange(start, start + n_x)
    values = np.sin(ys[:, None] / 97.0) * np.cos(xs[None, :] / 1500.0)
    grid = xr.DataArray(values, dims=("fast", "slow"), coords={"fast": ys, "slow": xs},
                        name="sharpe")
    fig = plot_heatmap(grid, tmp_path / "wide.png")
    renderer = fig.canvas.get_renderer()
    for labels in (fig.axes[0].get_xticklabels(), fig.axes[0].get_yticklabels()):
        boxes = sorted((t.get_window_extent(renderer) for t in labels if t.get_text()),
                       key=lambda b: (b.x0, b.y0))
        assert len(boxes) >= 3
        assert not any(a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


@pytest.mark.slow
def test_heatmap_under_a_memory_cap_of_a_store_bigger_than_it(tmp_path):
    """A real 10^7-combo store (1000 x 10000 on 120 bars; its variables, uncompressed, take
    more than the cap): its heatmap and its median heatmap drawn in a process capped at
    helpers.processes.CAP_BYTES, in many small slabs, equal to the whole grid reduced."""
    import sys

    from helpers.processes import CAP_BYTES, capped

    synth(tmp_path / "bars", 120, seed=1, symbol="AAA")
    out = run_spec_file(
        {"data": {"store": str(tmp_path / "bars"), "symbols": ["AAA"], "timeframe": "1h"},
         "strategy": "ema_cross",
         "grid": {"fast": {"start": 2, "stop": 1001, "step": 1},
                  "slow": {"start": 2, "stop": 10001, "step": 1}},
         "constraints": ["fast < slow"],
         "execution": {"fill": "next_open", "fees": 0.001},
         "run": {"out": str(tmp_path / "big.zarr")}},
        tmp_path / "big.yaml", "--cluster", "threads")
    ds = open_results(out)
    assert ds.nbytes > CAP_BYTES
    for reduce in ("max", "median"):
        grid = tmp_path / f"{reduce}.npy"
        code = ("import sys; import numpy as np; from barsweep.pipeline.analysis import stream;"
                "from barsweep.pipeline.analysis.plots import metric_grid, plot_heatmap;"
                "stream.SLAB_CELLS = 1 << 16; ds = stream.open_store(sys.argv[1]);"
                "g = metric_grid(ds, 'sharpe', 'slow', 'fast', reduce=sys.argv[2]);"
                "np.save(sys.argv[3], g.values); plot_heatmap(g, sys.argv[4])")
        done = capped(sys.executable, "-c", code, str(out), reduce, str(grid),
                      str(tmp_path / f"{reduce}.png"))
        assert done.returncode == 0, done.stderr
        want = metric_grid_whole(ds, "sharpe", "slow", "fast", reduce=reduce)
        np.testing.assert_array_equal(np.load(grid), want)


@pytest.mark.parametrize("walk", [False, True])
def test_check_says_the_size_and_time_line_the_run_says(tmp_path, capsys, walk):
    import yaml

    synth(tmp_path / "bars", 700, seed=2, symbol="AAA")
    spec = {"data": {"store": str(tmp_path / "bars"), "symbols": ["AAA"], "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": {"fast": {"start": 2, "stop": 30, "step": 2},
                     "slow": {"start": 10, "stop": 80, "step": 5}},
            "constraints": ["fast < slow"],
            "run": {"out": str(tmp_path / "r.zarr")},
            **({"walk_forward": {"train": 300, "test": 150}} if walk else {})}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    capsys.readouterr()
    assert main(["check", str(path)]) == 0
    said = [line.split("run: ", 1)[1] for line in capsys.readouterr().out.splitlines()
            if line.startswith("  run: ")]
    assert main(["run", str(path), "--cluster", "threads", "--no-progress"]) == 0
    out = capsys.readouterr()
    ran = [line for line in (out.out + out.err).splitlines() if " combos: ~" in line]
    assert len(said) == 1 and said == ran
