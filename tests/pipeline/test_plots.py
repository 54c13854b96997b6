"""barsweep plot heatmap: a real run (LocalCluster) drawn as a PNG; the grid drawn is the
metric reduced over the other dims, excluded cells blank."""

import numpy as np
import pytest
from runs import run_spec_file, synth

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
