"""Stops per position in a portfolio (docs/EXECUTION.md "Portfolios"): the kernel held to
the slow reference of tests/helpers/portfolio_reference.py (1e-12) for each stop kind, with gaps,
fees, slippage, ``next_open`` and ``max_positions``, stops as grid axes; and tied to the
single-symbol engine: a portfolio of one symbol is the single-symbol run with the same
stops, and one of three copies of a symbol without costs is that run too."""

import numpy as np
import pytest
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.portfolio_cases import (
    EXECUTIONS,
    PPY,
    SYMBOLS,
    assert_portfolio_matches,
    fixed_signals,
)
from helpers.portfolio_reference import ref_portfolio
from helpers.ref_strategies import ref_signals
from helpers.rule_reference import RuleReference

from barsweep.engine import METRICS, Execution, get_strategy, sweep_block, sweep_portfolio
from barsweep.engine.rules import Rule, compile_rule

#: A rule that reads the position state the stops change (a stopped symbol is flat).
STATE_RULE = Rule("cross_above(close, sma(close, n)) and position == 0",
                  "bars_held >= hold or close > entry_price * (1 + gain)")
STATE_KINDS = {"n": "int", "hold": "int", "gain": "float"}

#: name -> (strategy, combos, reference signals of one symbol's bars and one combo)
CASES = {
    "ema_cross": (lambda: get_strategy("ema_cross"),
                  [dict(fast=5, slow=20), dict(fast=3, slow=9)],
                  lambda bars, combo: fixed_signals(ref_signals("ema_cross", bars, combo))),
    "state_rule": (lambda: compile_rule(STATE_RULE, STATE_KINDS),
                   [dict(n=10, hold=30, gain=0.05), dict(n=5, hold=12, gain=0.02)],
                   lambda bars, combo: RuleReference(STATE_RULE, STATE_KINDS, combo,
                                                     bars).signal_at),
}

STOPS = {
    "stop_loss": dict(stop_loss=0.01),
    "take_profit": dict(take_profit=0.012),
    "trailing_stop": dict(trailing_stop=0.02),
    "all": dict(stop_loss=0.02, take_profit=0.04, trailing_stop=0.03),
}

#: the exit reasons each stop setting must produce in the reference's runs
REASONS = {"stop_loss": {"stop"}, "take_profit": {"target"}, "trailing_stop": {"trail"},
           "all": {"stop", "target", "trail"}}


@pytest.fixture(scope="module")
def universe():
    """Hourly bars whose opens gap (0.6% sd) often enough to open through a level."""
    return {s: random_bars(1_000, seed=30 + i, gap=0.006) for i, s in enumerate(SYMBOLS)}


def _params(combos):
    return {k: np.array([c[k] for c in combos]) for k in combos[0]}


def _check(universe, name, combos, params, execution, stops_of, max_positions=None):
    """The kernel's metrics and per-symbol results of ``params`` equal the reference's,
    combo ``c`` run with the stops ``stops_of(c)``; returns the reference's trades."""
    make, _, signals_of = CASES[name]
    ours, per_symbol = sweep_portfolio(make(), universe, params, execution, PPY,
                                       max_positions=max_positions)
    trades = []
    for c, combo in enumerate(combos):
        settings = {**execution.model_dump(include={"fill", "fees", "fixed_fee", "slippage",
                                                    "init_cash"}), **stops_of(c)}
        ref = ref_portfolio({s: signals_of(universe[s], combo) for s in universe}, universe,
                            ppy=PPY, max_positions=max_positions, **settings)
        where = f"{name} {combo} {settings} max_positions={max_positions}"
        assert_portfolio_matches(ours[c], per_symbol[c], ref, list(universe), where)
        trades += ref["trades"]
    return trades


@pytest.mark.parametrize("execution", sorted(EXECUTIONS))
@pytest.mark.parametrize("stops", sorted(STOPS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_stop_kind_equals_the_reference(universe, name, stops, execution):
    _, combos, _ = CASES[name]
    trades = _check(universe, name, combos, _params(combos),
                    Execution(**EXECUTIONS[execution], **STOPS[stops]), lambda c: STOPS[stops])
    reasons = [t["reason"] for t in trades]
    for reason in REASONS[stops]:
        assert reasons.count(reason) >= 5, (reason, "the stops must fire")
    assert reasons.count("signal") >= 5, "the rules must still exit"
    assert any(t.get("gap") for t in trades), "some bar must open through a level"


@pytest.mark.parametrize("execution", ["close_costs", "next_open_costs"])
@pytest.mark.parametrize("max_positions", [1, 2])
def test_stops_with_max_positions_equal_the_reference(universe, execution, max_positions):
    """A stop frees a slot: the next entry may take it (on this very close with
    ``fill: close``)."""
    _, combos, _ = CASES["ema_cross"]
    _check(universe, "ema_cross", combos, _params(combos),
           Execution(**EXECUTIONS[execution], **STOPS["all"]), lambda c: STOPS["all"],
           max_positions=max_positions)


@pytest.mark.parametrize("execution", ["close_costs", "next_open_costs"])
def test_stops_as_axes_equal_the_reference(universe, execution):
    """``stop_loss`` and ``trailing_stop`` as grid axes (one value per combo) beside
    ``take_profit`` as an execution setting: each combo runs with its own stops."""
    _, base, _ = CASES["ema_cross"]
    combos = [dict(c, stop_loss=sl, trailing_stop=ts) for c in base for sl in (0.01, 0.03)
              for ts in (0.006, 0.02)]
    params = _params(combos)
    execution = Execution(**EXECUTIONS[execution], take_profit=0.025)
    _check(universe, "ema_cross", combos, params, execution,
           lambda c: dict(stop_loss=params["stop_loss"][c],
                          trailing_stop=params["trailing_stop"][c], take_profit=0.025))


def test_hand_computed_stop_then_reentry_on_the_same_close():
    """Two symbols, a rule entering whenever flat and never exiting, fill at the close,
    stop_loss 10%. Bar 0: A buys 500 at 10 and B 250 at 20 (half of 10,000 each), cash
    0. Bar 1 opens A at 9.5 and its low 8.5 passes the level 9: A sells 500 at 9, cash
    4,500; B's level 18 is not reached. At bar 1's close A (flat) re-enters: half the
    value marked there, (4,500 + 250 * 20.2) / 2 = 4,775, is more than the cash, so it
    buys what 4,500 pays for at 9.2. Bar 2's low 9.3 stays above A's new level 8.28."""
    a = dict(open=np.array([10.0, 9.5, 9.4]), high=np.array([10.0, 9.6, 9.9]),
             low=np.array([10.0, 8.5, 9.3]), close=np.array([10.0, 9.2, 9.8]))
    b = dict(open=np.array([20.0, 20.0, 21.0]), high=np.array([20.0, 20.5, 21.5]),
             low=np.array([20.0, 19.5, 20.5]), close=np.array([20.0, 20.2, 21.0]))
    rule = Rule("position == 0", "close < 0")
    metrics, per_symbol = sweep_portfolio(compile_rule(rule, {}), {"A": a, "B": b}, {},
                                          Execution(fill="close", stop_loss=0.1), 252.0)
    equity = [10_000.0, 4_500.0 + 250 * 20.2, 4_500.0 / 9.2 * 9.8 + 250 * 21.0]
    m = dict(zip(METRICS, metrics[0], strict=True))
    assert m["total_return"] == pytest.approx(equity[2] / 10_000 - 1, rel=1e-14)
    assert m["max_drawdown"] == pytest.approx(equity[1] / equity[0] - 1, rel=1e-14)
    assert m["n_trades"] == 3  # A's stopped trade, A's and B's open at the end
    assert m["win_rate"] == pytest.approx(2 / 3, rel=1e-15)  # A lost 500; both held gain
    np.testing.assert_array_equal(per_symbol[0], [[2.0, 1.0], [1.0, 1.0]])


@pytest.mark.parametrize("execution", [
    dict(fill="close", fees=0.001, stop_loss=0.01, take_profit=0.02),
    dict(fill="close", slippage=0.0005, fixed_fee=1.0, trailing_stop=0.012),
    dict(fill="next_open", fees=0.0005, slippage=0.0003, stop_loss=0.015, trailing_stop=0.01,
         take_profit=0.015),
])
def test_one_symbol_is_the_single_symbol_run(universe, execution):
    """A portfolio of one symbol puts all of its value in each entry and checks its stops
    as the single-symbol kernel does: every metric equals ``sweep_block``'s with the same
    stops, as execution settings and as axes."""
    strategy = get_strategy("ema_cross")
    params = {"fast": np.array([5, 12, 3]), "slow": np.array([20, 40, 9])}
    one = {"AAA": universe["AAA"]}
    ours, per_symbol = sweep_portfolio(strategy, one, params, Execution(**execution), PPY)
    single = sweep_block(strategy, universe["AAA"], params, Execution(**execution), PPY)
    for c in range(3):
        assert_metrics_match(dict(zip(METRICS, ours[c], strict=True)),
                             dict(zip(METRICS, single[c], strict=True)), where=str(c))
    np.testing.assert_array_equal(per_symbol[:, 0, 0], single[:, METRICS.index("n_trades")])
    assert single[:, METRICS.index("n_trades")].min() > 10
    stops = {k: v for k, v in execution.items() if "stop" in k or "profit" in k}
    costs = Execution(**{k: v for k, v in execution.items() if k not in stops})
    axes = {**params, **{k: np.full(3, v) for k, v in stops.items()}}
    as_axes, _ = sweep_portfolio(strategy, one, axes, costs, PPY)
    np.testing.assert_array_equal(as_axes, ours)
    free, _ = sweep_portfolio(strategy, one, params, costs, PPY)
    assert not np.array_equal(free, ours), "the stops must change the run"


def test_copies_of_one_symbol_are_the_single_symbol_run(universe):
    """Three copies of one symbol, no costs: each entry takes a third of the value, the
    three stop out on the same bars at the same levels, so the account is the
    single-symbol run (every trade three times)."""
    strategy = get_strategy("ema_cross")
    params = {"fast": np.array([5, 3]), "slow": np.array([20, 9]),
              "stop_loss": np.array([0.01, 0.02]), "trailing_stop": np.array([0.02, 0.008])}
    execution = Execution(fill="next_open", take_profit=0.015)
    copies = {f"AAA{k}": universe["AAA"] for k in range(3)}
    ours, per_symbol = sweep_portfolio(strategy, copies, params, execution, PPY)
    single = sweep_block(strategy, universe["AAA"], params, execution, PPY)
    trades = METRICS.index("n_trades")
    for c in range(2):
        expected = dict(zip(METRICS, single[c], strict=True))
        expected["n_trades"] *= 3
        assert_metrics_match(dict(zip(METRICS, ours[c], strict=True)), expected,
                             where=str(c))
        np.testing.assert_array_equal(per_symbol[c, :, 0], single[c, trades])
