"""Each builtin strategy written as a rule gives the builtin's metrics bit for bit: over
whole runs, walk-forward spans and PBO segments, with every execution setting."""

import numpy as np
import pytest
from helpers.bars import random_bars

from barsweep.engine import Execution, get_strategy, sweep_block
from barsweep.engine.rules import compile_rule
from barsweep.engine.rules.builtins import BUILTIN_RULES
from barsweep.engine.strategies import strategy_names

PPY = 8760.0

#: A small grid of each builtin (valid combos only: the builtins' requirements hold).
GRIDS = {
    "buy_and_hold": {},
    "sma_cross": dict(fast=[3, 5, 10], slow=[12, 20, 40]),
    "ema_cross": dict(fast=[3, 5, 10], slow=[12, 20, 40]),
    "rsi": dict(period=[5, 14], lower=[20.0, 30.0, 35.5], upper=[60.0, 70.0]),
    "trix": dict(period=[3, 5, 12], signal=[2, 4, 9]),
    "macd": dict(fast=[3, 5, 12], slow=[13, 26], signal=[2, 9]),
    "bollinger": dict(period=[5, 10, 20], k=[1.0, 1.5, 2.25]),
    "donchian": dict(period=[2, 5, 7, 20]),
}

EXECUTIONS = [
    dict(fill="close", fees=0.001),
    dict(fill="next_open", direction="both", fees=0.0005, slippage=0.0002),
    dict(fill="close", direction="both", stop_loss=0.02, take_profit=0.04, trailing_stop=0.03),
    dict(fill="next_open", direction="short", trailing_stop=0.02, fixed_fee=1.0, funding=True),
]


def combos(name: str) -> dict[str, np.ndarray]:
    grid = GRIDS[name]
    if not grid:
        return {}
    mesh = np.meshgrid(*grid.values(), indexing="ij")
    return {k: m.ravel() for k, m in zip(grid, mesh, strict=True)}


def kinds(name: str) -> dict[str, str]:
    return {p.name: p.kind for p in get_strategy(name).params}


def test_every_builtin_has_its_rule():
    assert set(BUILTIN_RULES) == {n for n in strategy_names() if n in GRIDS}
    assert set(GRIDS) == set(BUILTIN_RULES)


def _stops(settings: dict) -> bool:
    return any(k in settings for k in ("stop_loss", "take_profit", "trailing_stop"))


#: buy_and_hold as a rule enters again after a stop: compared without stops only
CASES = [(name, k) for name in sorted(BUILTIN_RULES) for k, settings in enumerate(EXECUTIONS)
         if not (name == "buy_and_hold" and _stops(settings))]


@pytest.mark.parametrize(("name", "execution"), CASES)
def test_builtin_as_rule_is_bit_identical(name, execution):
    settings = EXECUTIONS[execution]
    bars = random_bars(3_000, seed=11)
    params = combos(name)
    rule = compile_rule(BUILTIN_RULES[name], kinds(name))
    builtin = get_strategy(name)
    exe = Execution(**settings)
    got = sweep_block(rule, bars, params, exe, PPY)
    want = sweep_block(builtin, bars, params, exe, PPY)
    np.testing.assert_array_equal(got, want)
    assert np.isfinite(want).any()
    # buy_and_hold's builtin enters on bar 0 of the series only; as a rule, on the first
    # bar of any run: compared over spans that start there
    spans = [(0, 1000), (0, 2000)] if name == "buy_and_hold" else [
        (0, 1000), (1000, 2000), (700, 3000)]
    np.testing.assert_array_equal(sweep_block(rule, bars, params, exe, PPY, spans=spans),
                                  sweep_block(builtin, bars, params, exe, PPY, spans=spans))
    n = max(1, len(next(iter(params.values()), [0])))
    segs_rule, segs_builtin = np.empty((n, 4, 2)), np.empty((n, 4, 2))
    sweep_block(rule, bars, params, exe, PPY, seg_sums=segs_rule)
    sweep_block(builtin, bars, params, exe, PPY, seg_sums=segs_builtin)
    np.testing.assert_array_equal(segs_rule, segs_builtin)


def test_the_builtins_trade_in_these_tests():
    """The comparison is not of idle runs: every builtin trades on these bars."""
    bars = random_bars(3_000, seed=11)
    from barsweep.engine import METRICS

    trades = METRICS.index("n_trades")
    for name in BUILTIN_RULES:
        out = sweep_block(get_strategy(name), bars, combos(name), Execution(fill="close"), PPY)
        assert (out[:, trades] > 0).mean() > 0.5, name


def test_buy_and_hold_as_a_rule_enters_again_after_a_stop():
    bars = random_bars(3_000, seed=11)
    exe = Execution(fill="close", stop_loss=0.02)
    from barsweep.engine import METRICS

    trades = METRICS.index("n_trades")
    rule = compile_rule(BUILTIN_RULES["buy_and_hold"], {})
    assert sweep_block(get_strategy("buy_and_hold"), bars, {}, exe, PPY)[0, trades] == 1
    assert sweep_block(rule, bars, {}, exe, PPY)[0, trades] > 1
