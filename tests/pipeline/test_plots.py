"""barsweep plot heatmap: a real run (LocalCluster) drawn as a PNG; the grid drawn is the
metric reduced over the other dims, excluded cells blank."""

import numpy as np
import pytest
from helpers.runs import run_spec_file, synth

from barsweep.errors import SpecError
from barsweep.pipeline.analysis.plots import metric_grid
from barsweep.pipeline.cli import main
from barsweep.pipeline.run.results import open_results

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("plots")
    synth(root / "bars", 1200, seed=5)
    spec = {"data": {"store": str(root / "bars"), "symbols": ["BTCUSDT"], "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": {"fast": {"start": 2, "stop": 20, "step": 2},
                     "slow": {"start": 10, "stop": 60, "step": 5},
                     "stop_loss": [0.02, 0.05]},
            "constraints": ["fast < slow"], "run": {"out": str(root / "r.zarr")}}
    return run_spec_file(spec, root / "spec.yaml")


def png_pixels(path):
    from matplotlib.image import imread

    return imread(str(path))


@pytest.mark.parametrize("reduce", ["max", "mean", "median"])
def test_the_grid_is_the_metric_reduced_over_the_other_dims(results, reduce):
    ds = open_results(results)
    grid = metric_grid(ds, "sharpe", "fast", "slow", reduce=reduce)
    raw = ds["sharpe"].values[0]  # fast, slow, stop_loss
    fast, slow = np.meshgrid(ds["fast"].values, ds["slow"].values, indexing="ij")
    assert grid.dims == ("slow", "fast")
    assert np.isnan(grid.values.T[fast >= slow]).all()  # excluded: blank
    finite = fast < slow
    reduced = {"max": np.max, "mean": np.mean, "median": np.median}[reduce](raw, axis=2)
    np.testing.assert_allclose(grid.values.T[finite], reduced[finite], rtol=1e-12)


def test_plot_heatmap_and_line_write_pictures_that_are_not_blank(results, tmp_path, capsys):
    heat, line = tmp_path / "heat.png", tmp_path / "line.png"
    assert main(["plot", "heatmap", str(results), "--x", "fast", "--y", "slow",
                 "--metric", "total_return", "--out", str(heat)]) == 0
    assert main(["plot", "heatmap", str(results), "--x", "slow", "--out", str(line)]) == 0
    for path in (heat, line):
        pixels = png_pixels(path)
        assert pixels.shape[0] >= 300 and pixels.shape[1] >= 600
        coloured = (np.abs(pixels[..., :3] - 1.0).sum(axis=2) > 0.3).mean()
        assert coloured > 0.02, path  # more than a frame and its labels


def test_bad_plot_flags_are_one_line(results, tmp_path, capsys):
    for argv, flag in ((["--x", "nope"], "--x"), (["--x", "fast", "--metric", "nah"], "--metric"),
                       (["--x", "fast", "--window", "1"], "--window"),
                       (["--x", "fast", "--reduce", "min"], "--reduce")):
        assert main(["plot", "heatmap", str(results), *argv, "--out",
                     str(tmp_path / "x.png")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and flag in err[0]
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(SpecError, match="same parameter"):
        metric_grid(open_results(results), "sharpe", "fast", "fast")


def test_plot_best_rebuilds_the_ranked_combo_and_checks_its_metrics(results, tmp_path, capsys):
    import shutil

    import zarr

    from barsweep.engine import METRICS
    from barsweep.pipeline.analysis.rank import rank
    from barsweep.pipeline.analysis.rebuild import best_backtest

    second = rank(results, by="sharpe", top=2).iloc[1]
    rebuilt = best_backtest(results, rank=2, by="sharpe")
    assert all(rebuilt.metrics[m] == float(second[m]) or np.isnan(second[m]) for m in METRICS)
    out = tmp_path / "best.png"
    assert main(["plot", "best", str(results), "--rank", "2", "--out", str(out)]) == 0
    pixels = png_pixels(out)
    assert (np.abs(pixels[..., :3] - 1.0).sum(axis=2) > 0.3).mean() > 0.02
    # a store whose numbers no longer match its bars: refused, exit 1, nothing drawn
    moved = tmp_path / "moved.zarr"
    shutil.copytree(results, moved)
    ds = open_results(moved)
    top = rank(ds, by="sharpe", top=1).iloc[0]
    index = (0, *(int(np.flatnonzero(ds[d].values == top[d])[0]) for d in ("fast", "slow",
                                                                           "stop_loss")))
    zarr.open_group(str(moved), mode="r+")["total_return"][index] = 12.0
    assert main(["plot", "best", str(moved), "--out", str(tmp_path / "no.png")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "total_return" in err[0] and "changed since the run" in err[0]
    assert not (tmp_path / "no.png").exists()


def bin_best_loop(values, factors, better_low):
    """A literal loop: each bin's best finite cell, NaN when none."""
    fy, fx = factors
    ny, nx = -(-values.shape[0] // fy), -(-values.shape[1] // fx)
    out = np.full((ny, nx), np.nan)
    for i in range(ny):
        for j in range(nx):
            cell = values[i * fy:(i + 1) * fy, j * fx:(j + 1) * fx]
            cell = cell[np.isfinite(cell)]
            if cell.size:
                out[i, j] = cell.min() if better_low else cell.max()
    return out


@pytest.mark.parametrize("better_low", [False, True])
@pytest.mark.parametrize("factors", [(1, 1), (2, 3), (7, 16)])
def test_bins_are_each_the_best_of_their_cells_without_warning(better_low, factors):
    import warnings

    from barsweep.pipeline.analysis.plots import bin_best

    rng = np.random.default_rng(3)
    values = rng.normal(size=(45, 101))
    values[rng.random(values.shape) < 0.3] = np.nan
    values[:14, :40] = np.nan  # whole bins excluded
    values[20, 5] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = bin_best(values, factors, better_low)
    np.testing.assert_array_equal(got, bin_best_loop(values, factors, better_low))


def test_a_grid_of_ten_million_cells_is_drawn_binned_with_idle_and_excluded_apart(tmp_path):
    """1000 x 9996 cells into an 800 x 550 figure: at most MAX_BINS bins drawn, each its
    best cell; never-traded cells grey, excluded ones white, both in the legend."""
    import warnings

    import xarray as xr

    from barsweep.pipeline.analysis.plots import IDLE_COLOUR, MAX_BINS, plot_heatmap

    ys, xs = np.arange(2, 1002), np.arange(5, 10_001)
    fast, slow = np.meshgrid(ys, xs, indexing="ij")
    values = np.sin(fast / 97.0) * np.cos(slow / 1500.0)
    idle = slow > 8000                      # the slowest combos never trade
    values[idle] = np.nan
    values[fast >= slow] = np.nan           # excluded: none of them
    values[fast > 900] = np.nan
    idle &= fast <= 900
    grid = xr.DataArray(values, dims=("fast", "slow"), coords={"fast": ys, "slow": xs},
                        name="sharpe")
    png = tmp_path / "big.png"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plot_heatmap(grid, png, idle=idle)
    drawn = fig.axes[0].collections
    assert len(drawn) == 2                  # idle bins, then the metric's
    rows, cols = drawn[-1].get_array().shape
    assert rows <= MAX_BINS[1] and cols <= MAX_BINS[0] and rows * cols < values.size
    assert drawn[-1].get_array().max() == pytest.approx(np.nanmax(values))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels[1:] == ["never traded", "excluded by the constraints"]
    pixels = png_pixels(png)[..., :3]
    grey = np.isclose(pixels, float(IDLE_COLOUR), atol=0.01).all(axis=-1)
    assert grey.sum() > 20_000              # the idle band, ~1/5 of the axes
    assert (pixels == 1.0).all(axis=-1).sum() > 20_000  # white: excluded, and the margins


def test_a_real_run_draws_never_traded_cells_apart(tmp_path, capsys):
    """A run on 300 bars where the slowest EMAs never cross: its heatmap shows grey
    cells and says so in its legend, through the CLI."""
    from barsweep.pipeline.analysis.plots import IDLE_COLOUR

    synth(tmp_path / "bars", 300, seed=4)
    out = run_spec_file({
        "data": {"store": str(tmp_path / "bars"), "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "ema_cross",
        "grid": {"fast": {"start": 2, "stop": 400, "step": 20},
                 "slow": {"start": 10, "stop": 1000, "step": 50}},
        "constraints": ["fast < slow", "slow < 900"],
        "run": {"out": str(tmp_path / "r.zarr")}}, tmp_path / "s.yaml")
    ds = open_results(out)
    assert (ds["n_trades"] == 0).any() and ds["n_trades"].isnull().any()
    png = tmp_path / "h.png"
    assert main(["plot", "heatmap", str(out), "--x", "slow", "--y", "fast",
                 "--out", str(png)]) == 0
    pixels = png_pixels(png)[..., :3]
    assert np.isclose(pixels, float(IDLE_COLOUR), atol=0.01).all(axis=-1).sum() > 10_000
