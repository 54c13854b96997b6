"""BacktestResult.plot(): three panels, a readable PNG, no pyplot state."""

import pytest
from bars import random_bars

from barsweep.engine import backtest

pytest.importorskip("matplotlib")


def test_plot_writes_png_with_three_panels(tmp_path):
    bars = random_bars(1500, seed=3, gap=0.003)
    res = backtest(bars, "ema_cross", dict(fast=12, slow=40), ppy=8760, direction="both",
                   fees=0.0005, stop_loss=0.03, take_profit=0.05)
    assert set(res.trades["side"]) == {-1, 1}
    path = tmp_path / "backtest.png"
    fig = res.plot(path=path, title="ema_cross 12/40")
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 10_000
    assert len(fig.axes) == 3
    assert fig.axes[0].get_shared_x_axes().joined(fig.axes[0], fig.axes[2])


def test_plot_without_times_uses_bar_numbers():
    bars = random_bars(300, seed=1)
    del bars["time"]
    res = backtest(bars, "ema_cross", dict(fast=5, slow=20), ppy=8760)
    fig = res.plot()
    assert len(fig.axes) == 3
    assert fig.axes[2].get_xlabel() == "bar"

