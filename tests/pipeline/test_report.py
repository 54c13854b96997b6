"""barsweep report: one self-contained HTML page, opened in a real headless Chromium
(Debian's `chromium`, which .ci/run installs when missing): no console error, a
screenshot that is not blank, the top combo in the page's text."""

import re

import numpy as np
import pytest
from helpers.cdp import browse
from helpers.runs import run_spec_file, synth

from barsweep.pipeline.analysis.rank import rank
from barsweep.pipeline.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    synth(root / "bars", 2000, seed=6)
    base = {"data": {"store": str(root / "bars"), "symbols": ["BTCUSDT"], "timeframe": "1h"},
            "strategy": "ema_cross",
            "grid": {"fast": {"start": 2, "stop": 20, "step": 2},
                     "slow": {"start": 10, "stop": 80, "step": 10}, "stop_loss": [0.03, 0.1]},
            "constraints": ["fast < slow"]}
    for name, extra in (("plain", {}), ("wf", {"walk_forward": {"train": 800, "test": 300}})):
        run_spec_file({**base, **extra, "run": {"out": str(root / f"{name}.zarr")}},
                      root / f"{name}.yaml")
    return root


def test_the_report_opens_in_chromium_with_the_top_combo(stores, tmp_path, capsys):
    from matplotlib.image import imread

    page = tmp_path / "report.html"
    assert main(["report", str(stores / "plain.zarr"), "--out", str(page)]) == 0
    text = page.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # nothing fetched
    assert text.count("data:image/png;base64,") >= 2  # a heatmap and the best combo
    dom, console, shot = browse(page, tmp_path)
    assert console == [], console
    best = rank(stores / "plain.zarr", by="sharpe", top=1).iloc[0]
    row = f"<td>BTCUSDT</td><td>{best['fast']}</td><td>{best['slow']}</td>"
    assert row in dom.replace(" ", "")
    for fact in ("combos", "backend", "block phase: kernel", "bars of BTCUSDT", "Spec"):
        assert fact in dom
    pixels = imread(str(shot))
    assert (np.abs(pixels[..., :3] - 1.0).sum(axis=2) > 0.3).mean() > 0.05


def test_a_walk_forward_report_has_its_table(stores, tmp_path, capsys):
    page = tmp_path / "wf.html"
    assert main(["report", str(stores / "wf.zarr"), "--out", str(page)]) == 0
    dom, console, _ = browse(page, tmp_path)
    assert console == [] and "Walk-forward" in dom and "Stitched out of sample" in dom
    assert "efficiency" in dom
