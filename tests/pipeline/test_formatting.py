"""Numbers for people (pipeline/analysis/formatting.py) and the heatmap's ticks at the grid's
values."""

import math

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from barsweep.pipeline.analysis.formatting import (
    cells,
    column_metric,
    count,
    metric,
    param,
    percent,
    ranking_cells,
    significant,
)


@pytest.mark.parametrize(("value", "text"), [
    (1.0234, "1.02"), (-0.08531, "-0.0853"), (0.9996, "1.00"), (9.996, "10.0"),
    (99.96, "100"), (123.4, "123"), (1234.5, "1,234"), (-1234567.0, "-1,234,567"),
    (0.0, "0"), (3.2e-7, "3.20e-07"), (math.nan, "-"), (None, "-"), (math.inf, "inf"),
    (np.float64(2.5), "2.50"),
])
def test_significant_digits(value, text):
    assert significant(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (0.351, "35.1%"), (-0.0052, "-0.520%"), (2.54, "254%"), (12.3456, "1,235%"),
    (-1.0, "-100%"), (0.0, "0%"), (math.nan, "-"),
])
def test_percentages(value, text):
    assert percent(value) == text


@pytest.mark.parametrize(("value", "text"), [
    (40, "40"), (40.0, "40"), (np.int64(7), "7"), (np.float64(0.05), "0.05"),
    (0.1 + 0.2, "0.3"), (1e-05, "1e-05"), (2.5, "2.5"), ("MSFT", "MSFT"), (math.nan, "-"),
])
def test_parameters_as_the_grid_wrote_them(value, text):
    assert param(value) == text


def test_metrics_by_kind_and_columns_by_metric():
    assert [metric(m, v) for m, v in (("total_return", 0.5), ("max_drawdown", -0.234),
                                      ("n_trades", 1234.0), ("sharpe", 1.2345),
                                      ("win_rate", 1.0), ("ruined", 0.0))] == [
        "50.0%", "-23.4%", "1,234", "1.23", "100%", "0"]
    assert count(12345.0) == "12,345"
    assert [column_metric(c) for c in ("sharpe_smooth", "cagr_median", "cagr[MSFT]",
                                       "sharpe_smooth_min", "psr")] == [
        "sharpe", "cagr", "cagr", "sharpe", "psr"]
    frame = pd.DataFrame({"symbol": ["A"], "fast": [10.0], "cagr_mean": [0.1]})
    assert cells(frame, ["symbol", "fast"]).iloc[0].tolist() == ["A", "10", "10.0%"]


def test_a_reference_row_is_unranked_and_labelled():
    frame = pd.DataFrame({"symbol": ["A", "B"], "fast": [5, 10], "slow": [20.0, 40.0],
                          "sharpe": [1.5, 1.25], "total_return": [0.5, 0.25]},
                         index=pd.RangeIndex(1, 3, name="rank"))
    ref = pd.DataFrame({"symbol": ["A"], "sharpe": [0.5], "total_return": [1.2]})
    table = ranking_cells(frame, ["sharpe", "total_return"], ref)
    assert table.index.tolist() == [1, 2, "-"]
    assert table.loc["-"].tolist() == ["A", "buy&hold", "", "0.500", "120%"]
    assert table.iloc[1].tolist() == ["B", "10", "40", "1.25", "25.0%"]
    # a strategy without parameters: the label is the row's index, the symbol its own
    table = ranking_cells(frame[["symbol", "sharpe", "total_return"]],
                          ["sharpe", "total_return"], ref)
    assert table.index.tolist() == [1, 2, "buy&hold"]
    assert table.loc["buy&hold"].tolist() == ["A", "0.500", "120%"]


def test_heatmap_ticks_are_the_grids_values(tmp_path):
    from barsweep.pipeline.analysis.plots import MAX_TICKS, plot_heatmap

    fast = np.arange(2, 50)                     # 48 values: every 3rd labelled
    stop = np.array([0.01, 0.02, 0.05, 0.1])
    grid = xr.DataArray(np.random.default_rng(0).normal(size=(4, 48)), dims=("stop", "fast"),
                        coords={"stop": stop, "fast": fast}, name="sharpe")
    fig = plot_heatmap(grid, tmp_path / "h.png")
    ax = fig.axes[0]
    xs = [t.get_text() for t in ax.get_xticklabels()]
    assert xs == [str(v) for v in fast[::3]] and len(xs) <= MAX_TICKS
    assert ax.get_xticks().tolist() == fast[::3].tolist()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0.01", "0.02", "0.05", "0.1"]
    line = plot_heatmap(grid.isel(stop=0, drop=True), tmp_path / "l.png")
    assert [t.get_text() for t in line.axes[0].get_xticklabels()] == [str(v) for v in fast[::3]]
