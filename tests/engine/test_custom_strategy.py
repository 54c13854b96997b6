"""The custom-strategy example of docs/STRATEGIES.md: registered from its own module, it
backtests, sweeps and parses in a spec like a builtin, and the page shows its code
verbatim."""

import re
from pathlib import Path

import custom_strategy_example
import numpy as np
import pytest
import talib
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.ref_strategies import _crosses, _events
from helpers.reference import ref_simulate

from barsweep.engine import METRICS, Execution, backtest, get_strategy, strategy_names, sweep_block
from barsweep.pipeline.config.model import parse_spec

PPY = 8760.0
STRATEGIES = Path(__file__).resolve().parents[2] / "docs" / "STRATEGIES.md"


def test_registered_on_import():
    assert "sma_trend" in strategy_names()
    assert get_strategy("sma_trend") is custom_strategy_example.STRATEGY


def test_backtest_equals_sweep_and_reference():
    bars = random_bars(1500, seed=11, gap=0.003)
    res = backtest(bars, "sma_trend", {"period": 20}, ppy=PPY)
    swept = sweep_block(custom_strategy_example.STRATEGY, bars, {"period": np.array([20])},
                        Execution(), PPY)
    assert res.metrics == pytest.approx(dict(zip(METRICS, swept[0])), rel=0, abs=0, nan_ok=True)
    assert res.metrics["n_trades"] > 0
    assert len(res.trades) == res.metrics["n_trades"]

    close = bars["close"]
    le, lx, se, sx = _events(*_crosses(close, talib.SMA(close, 20)))
    ref, _, _ = ref_simulate(list(bars["open"]), list(close), le, lx, se, sx,
                             high=list(bars["high"]), low=list(bars["low"]), ppy=PPY)
    assert_metrics_match(res.metrics, ref)


def test_spec_with_custom_strategy_parses():
    spec = parse_spec({
        "data": {"store": "bars/", "symbols": ["BTCUSDT"], "timeframe": "1h"},
        "strategy": "sma_trend",
        "grid": {"period": [10, 20]},
    })
    assert spec.strategy == "sma_trend"
    assert spec.param_grid.shape == (2,)


def test_strategies_page_shows_the_module_verbatim():
    text = STRATEGIES.read_text(encoding="utf-8")
    section = text.split("## Your own strategy", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1, (
        "docs/STRATEGIES.md's 'Your own strategy' needs exactly one python block")
    source = Path(custom_strategy_example.__file__).read_text(encoding="utf-8")
    assert blocks[0].strip() == source.strip(), (
        "docs/STRATEGIES.md's 'Your own strategy' block and "
        "tests/engine/custom_strategy_example.py "
        "differ; keep them identical"
    )
