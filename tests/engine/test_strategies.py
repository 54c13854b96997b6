"""Every strategy: sweep == backtest() == reference simulator fed TA-Lib-based signals."""


import pkgutil
from importlib import import_module

import numpy as np
import pytest
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.ref_strategies import EXAMPLES, ref_signals
from helpers.reference import ref_simulate

from barsweep.engine import METRICS, Execution, backtest, get_strategy, strategy_names, sweep_block
from barsweep.errors import SpecError

PPY = 8760.0
EXECUTIONS = [
    dict(fill="close", fees=0.001),
    dict(fill="next_open", direction="both", fees=0.0005, slippage=0.0002, stop_loss=0.03,
         take_profit=0.05),
    dict(fill="next_open", direction="short", trailing_stop=0.02, fixed_fee=1.0, funding=True),
]


def builtin_strategy_names() -> set[str]:
    """The strategies barsweep ships: the ``STRATEGY`` of every module in its strategies
    package (strategies that tests register, e.g. a custom module's, are not counted)."""
    import barsweep.engine.strategies as package

    found = set()
    for module in pkgutil.iter_modules(package.__path__):
        strategy = getattr(import_module(f"{package.__name__}.{module.name}"), "STRATEGY", None)
        if strategy is not None:
            found.add(strategy.name)
    return found


def test_every_strategy_has_examples():
    assert set(strategy_names()) >= set(EXAMPLES)
    assert builtin_strategy_names() == set(EXAMPLES)


@pytest.mark.parametrize("execution", EXECUTIONS, ids=["close", "both-stops", "short-trail"])
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_strategy_equals_reference(name, execution):
    bars = random_bars(1500, seed=len(name), gap=0.003)
    strategy = get_strategy(name)
    examples = EXAMPLES[name]
    params = {p: np.array([ex[p] for ex in examples]) for p in strategy.param_names}
    swept = sweep_block(strategy, bars, params, Execution(**execution), PPY)
    for example, row in zip(examples, swept):
        ours = dict(zip(METRICS, row))
        le, lx, se, sx = ref_signals(name, bars, example)
        ref, _, trades = ref_simulate(list(bars["open"]), list(bars["close"]), le, lx, se, sx,
                                      high=list(bars["high"]), low=list(bars["low"]),
                                      funding_rate=list(bars["funding_rate"]), ppy=PPY,
                                      **execution)
        assert_metrics_match(ours, ref, where=(name, example))
        single = backtest(bars, name, example, ppy=PPY, **execution)
        assert single.metrics == pytest.approx(ours, rel=0, abs=0, nan_ok=True)
        assert len(trades) == ours["n_trades"]
    if name != "buy_and_hold":
        assert swept[:, METRICS.index("n_trades")].min() > 0


@pytest.mark.parametrize(
    "name, params, key",
    [
        ("ema_cross", dict(fast=0, slow=10), "fast"),
        ("sma_cross", dict(fast=5, slow=1), "slow"),
        ("rsi", dict(period=14, lower=70.0, upper=30.0), "lower < upper"),
        ("rsi", dict(period=14, lower=-5.0, upper=30.0), "lower"),
        ("macd", dict(fast=26, slow=12, signal=9), "fast < slow"),
        ("bollinger", dict(period=20, k=0.0), "k"),
        ("donchian", dict(period=0), "period"),
        ("trix", dict(period=5, signal=2.5), "signal"),
    ],
)
def test_bad_parameters_are_refused_naming_them(name, params, key):
    bars = random_bars(100, seed=1)
    with pytest.raises(SpecError, match=key):
        backtest(bars, name, params, ppy=PPY)
