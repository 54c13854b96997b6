"""`barsweep demo`: the sweep's top 10, then its best combo's deflated Sharpe and the
walk-forward of the shipped example spec, over the same synthetic bars."""

import re

import pytest
import xarray as xr

from barsweep.pipeline.analysis.walkforward import walkforward
from barsweep.pipeline.cli import main

pytestmark = pytest.mark.slow


def test_demo_ends_with_the_best_combos_dsr_and_a_walk_forward(tmp_path, capsys):
    assert main(["demo", "--dir", str(tmp_path), "--workers", "2"]) == 0
    printed = capsys.readouterr().out
    dsr = re.search(r"deflated sharpe \(DSR\) ([0-9.]+) after ([0-9,]+) trials", printed)
    assert dsr and 0.0 <= float(dsr[1]) <= 1.0 and int(dsr[2].replace(",", "")) > 4000
    wf = re.search(r"in each of (\d+) windows: out-of-sample cagr (-?[0-9.]+)%.*efficiency "
                   r"(-?[0-9.]+|nan)", printed)
    assert wf, printed
    ds = xr.open_zarr(tmp_path / "results_wf.zarr", consolidated=False)
    assert int(wf[1]) == ds.sizes["window"] >= 10
    again = walkforward(tmp_path / "results_wf.zarr", by="sharpe", where="n_trades >= 3")
    assert f"{again.stitched['cagr']:.1%}" == f"{wf[2]}%"
