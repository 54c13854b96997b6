"""BacktestResult.plot(): three panels, a readable PNG, no pyplot state."""

import pytest
from helpers.bars import random_bars

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



@pytest.mark.parametrize(("growth", "scale"), [(30.0, "log"), (3.0, "linear")])
def test_equity_reads_on_one_axis_rule_for_a_symbol_and_a_portfolio(tmp_path, growth, scale):
    """One symbol's equity and a portfolio's are drawn by the same rule: a log axis when
    what the panel draws spans more than 10x, linear otherwise (plot best, report)."""
    import numpy as np

    from barsweep.engine.backtest.portfolio import backtest_portfolio

    close = 100.0 * np.exp(np.linspace(0.0, np.log(growth), 600)
                           + 0.01 * np.sin(np.arange(600)))
    bars = {"open": close, "high": close * 1.001, "low": close * 0.999, "close": close}
    one = backtest(bars, "ema_cross", dict(fast=5, slow=20), ppy=252, fill="close")
    both = backtest_portfolio({"A": bars, "B": {k: v[::-1].copy() for k, v in bars.items()}},
                              "ema_cross", dict(fast=5, slow=20), ppy=252, fill="close")
    # a symbol's equity panel is its second; a portfolio's its first
    for ax in (one.plot(tmp_path / "one.png").axes[1],
               both.plot(tmp_path / "both.png").axes[0]):
        assert ax.get_yscale() == scale
        assert ax.get_ylabel() == ("equity (log)" if scale == "log" else "equity")
