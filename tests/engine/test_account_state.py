"""Rules and signals that read the account (docs/RULES.md, "The state"): ``equity``, the
account's value at the close, and ``pending`` / ``pending_price``, the entry order that
would still work in the next bar if the close did nothing.

Held to the slow reference (tests/helpers/reference.py and rule_reference.py, the rule
evaluated bar by bar in Python with the reference simulator's account) over whole runs:
market entries with sizes and leverage, limit and stop entries on both sides at the close
and at the next open; a portfolio's rule reads the whole account's equity
(tests/helpers/portfolio_cases.py, ``account_rule``, in the portfolio tests). Hand-built
bars pin what ``pending`` is on an order's last bar and what ``equity`` is at a close; an
11-argument Python signal runs as a rule does; the reads are shown to change the trades."""

import numpy as np
import pytest
from helpers.bars import random_bars
from helpers.compare import assert_metrics_match
from helpers.portfolio_cases import CASES as PORTFOLIO_CASES
from helpers.portfolio_cases import SYMBOLS
from helpers.rule_reference import reference_run
from numba import njit

from barsweep.engine import (
    METRICS,
    Execution,
    Indicator,
    Param,
    Strategy,
    backtest,
    sweep_block,
    sweep_portfolio,
)
from barsweep.engine.rules import Rule, compile_rule
from barsweep.engine.strategies import kernels
from barsweep.errors import SpecError

PPY = 8760.0

#: name -> (rule, kinds, combos)
RULES = {
    # equity: enter only while the account is above a floor; leave a position whose
    # value outgrows a multiple of the account (levered), or when the account reaches a cap
    "equity": (Rule("close > sma(close, n) and equity > floor",
                    "close < sma(close, n) or abs(quantity) * close > equity * share or "
                    "equity > cap",
                    short_entry="close < sma(close, n) and equity > floor",
                    short_exit="close > sma(close, n) or equity > cap"),
               {"n": "int", "floor": "float", "share": "float", "cap": "float"},
               [dict(n=10, floor=9_500.0, share=1.2, cap=11_000.0),
                dict(n=24, floor=9_900.0, share=0.9, cap=10_400.0),
                dict(n=5, floor=0.0, share=10.0, cap=1e9)]),
    # pending: place an order only when none works (no replacing it while it waits), and
    # cancel it when the close runs away from its level
    "pending": (Rule("close > sma(close, n) and pending == 0",
                     "close < sma(close, n) or close > pending_price * (1 + run)",
                     short_entry="close < sma(close, n) and pending == 0",
                     short_exit="close > sma(close, n) or close < pending_price * (1 - run)"),
                {"n": "int", "run": "float"},
                [dict(n=8, run=0.004), dict(n=20, run=0.02), dict(n=4, run=1.0)]),
}

EXECUTIONS = {
    "close_percent_levered": dict(fill="close", direction="both", fees=0.001,
                                  size=dict(type="percent", value=0.7), leverage=2.0,
                                  borrow_rate=0.1, maintenance_margin=0.3),
    "open_stops": dict(fill="next_open", direction="both", fees=0.0005, slippage=0.0003,
                       stop_loss=0.02, take_profit=0.04),
    "limit_open": dict(fill="next_open", direction="both", fees=0.001,
                       entry_order=dict(type="limit", offset=0.003, valid_bars=4)),
    "stop_close": dict(fill="close", direction="both", fees=0.0005, slippage=0.0002,
                       entry_order=dict(type="stop", offset=0.002, valid_bars=6)),
    "limit_atr_long": dict(fill="close", fees=0.001, stop_loss=0.03,
                           entry_order=dict(type="limit", offset=0.5, valid_bars=3,
                                            unit="atr")),
}


def reference_settings(execution: dict) -> dict:
    """``ref_simulate``'s keywords for an execution's settings."""
    settings = dict(execution)
    size = settings.pop("size", None)
    if size:
        settings.update(size=size["type"], size_value=size["value"])
    order = settings.pop("entry_order", None)
    if order:
        settings.update(entry_order=order["type"], entry_offset=order["offset"],
                        valid_bars=order["valid_bars"],
                        offset_unit=order.get("unit", "close"))
    return settings


@pytest.fixture(scope="module")
def bars():
    return random_bars(1_200, seed=7, gap=0.003)


def _atr(bars, window=14):
    import talib

    return list(talib.ATR(bars["high"], bars["low"], bars["close"], window))


@pytest.mark.parametrize("execution", sorted(EXECUTIONS))
@pytest.mark.parametrize("name", sorted(RULES))
def test_rule_reading_the_account_equals_the_reference(bars, name, execution):
    rule, kinds, combos = RULES[name]
    settings = EXECUTIONS[execution]
    params = {k: np.array([c[k] for c in combos]) for k in kinds}
    ours = sweep_block(compile_rule(rule, kinds), bars, params, Execution(**settings), PPY)
    extra = reference_settings(settings)
    if extra.get("offset_unit") == "atr":
        extra["atr"] = _atr(bars)
    traded = 0
    for i, combo in enumerate(combos):
        metrics, equity, trades = reference_run(rule, kinds, combo, bars, PPY, **extra)
        where = f"{name} {combo} {execution}"
        assert_metrics_match(dict(zip(METRICS, ours[i], strict=True)), metrics, where=where)
        one = backtest(bars, rule, combo, ppy=PPY, **settings)
        np.testing.assert_allclose(one.equity.to_numpy(), equity, rtol=1e-12, err_msg=where)
        traded += len(trades) > 0
    assert traded >= 2, "the comparison must not be of idle runs"


def _without(rule: Rule, name: str) -> Rule:
    """``rule`` with its account reads made neutral (always true / never true)."""
    if name == "equity":
        return Rule("close > sma(close, n) and floor >= 0",
                    "close < sma(close, n) or (share < 0 and cap < 0)",
                    short_entry="close < sma(close, n)", short_exit="close > sma(close, n)")
    return Rule("close > sma(close, n)", "close < sma(close, n) or run < 0",
                short_entry="close < sma(close, n)", short_exit="close > sma(close, n)")


@pytest.mark.parametrize(("name", "execution"), [("equity", "close_percent_levered"),
                                                 ("pending", "limit_open"),
                                                 ("pending", "stop_close")])
def test_the_reads_change_the_trades(bars, name, execution):
    """The account's reads decide something in these cases: the same rules without them
    give other metrics for the first two combos."""
    rule, kinds, combos = RULES[name]
    params = {k: np.array([c[k] for c in combos[:2]]) for k in kinds}
    settings = Execution(**EXECUTIONS[execution])
    with_reads = sweep_block(compile_rule(rule, kinds), bars, params, settings, PPY)
    without = sweep_block(compile_rule(_without(rule, name), kinds), bars, params, settings,
                          PPY)
    for c in range(2):
        assert not np.array_equal(with_reads[c], without[c], equal_nan=True), (name, c)


def test_a_rule_reading_the_account_compiles_to_the_longest_signal():
    equity = compile_rule(RULES["equity"][0], RULES["equity"][1])
    plain = compile_rule(Rule("close > sma(close, n)", "bars_held > 3"), {"n": "int"})
    assert kernels.signal_arity(equity.signal) == 11
    assert kernels.compiled(equity.signal).ACCOUNT is True
    assert kernels.signal_arity(plain.signal) == 8
    assert kernels.compiled(plain.signal).ACCOUNT is False


# ----------------------------------------------------------------- by hand

def _flat_bars(n: int, low_at: dict[int, float]) -> dict[str, np.ndarray]:
    """Bars at 100 (open, high, low, close) but for the lows ``low_at`` gives."""
    close = np.full(n, 100.0)
    low = close.copy()
    for t, value in low_at.items():
        low[t] = value
    return dict(open=close.copy(), high=close + 0.5, low=low, close=close)


@pytest.mark.parametrize("valid_bars", [2, 3])
def test_an_order_on_its_last_bar_is_not_pending(valid_bars):
    """A limit 5% under the close, placed at bar 0's close and valid ``valid_bars`` bars,
    works in bars 1..valid_bars. At its last bar's close it is no longer pending, so
    ``pending == 0`` places it again there, and it fills at 95 in bar 4 (a low of 94),
    after which no order is pending. Had the rule seen it pending at that close, the
    order would have lapsed and nothing filled."""
    bars = _flat_bars(8, {4: 94.0})
    rule = Rule("pending == 0 and position == 0", "close < 0")
    result = backtest(bars, rule, {}, ppy=PPY, fill="close",
                      entry_order=dict(type="limit", offset=0.05, valid_bars=valid_bars))
    trades = result.trades
    assert trades["entry_bar"].tolist() == [4]
    assert trades["entry_price"].tolist() == [95.0]
    # with valid_bars 3 the order placed at bar 0 works in bars 1-3; a rule that never
    # re-places it (the entry true at bar 0 only) fills nothing
    once = Rule("pending == 0 and position == 0 and not (close[1] > 0)", "close < 0")
    assert backtest(bars, once, {}, ppy=PPY, fill="close",
                    entry_order=dict(type="limit", offset=0.05,
                                     valid_bars=valid_bars)).trades.empty


def test_pending_price_is_the_order_level():
    """A limit placed at a close of 100 with offset 2% rests at 98: a rule that exits
    (cancelling it) when its level is under 98.5 cancels it at the next close, so the
    dip to 97 in bar 2 fills nothing; one whose bound is 97.5 keeps it and fills at 98."""
    bars = _flat_bars(6, {2: 97.0})
    order = dict(type="limit", offset=0.02, valid_bars=5)
    cancels = Rule("position == 0 and pending == 0 and not (close[1] > 0)",
                   "pending_price < 98.5")
    keeps = Rule("position == 0 and pending == 0 and not (close[1] > 0)",
                 "pending_price < 97.5")
    assert backtest(bars, cancels, {}, ppy=PPY, fill="close", entry_order=order).trades.empty
    kept = backtest(bars, keeps, {}, ppy=PPY, fill="close", entry_order=order).trades
    assert kept["entry_price"].tolist() == [98.0]


def test_equity_is_the_account_at_the_close():
    """Long all-in from bar 1 at the close (100, fees 0): equity at a close is
    ``shares * close``; the exit ``equity > 11_000`` acts at the first close above 110."""
    close = np.array([100.0, 100.0, 104.0, 109.0, 111.0, 112.0, 108.0])
    bars = dict(open=close.copy(), high=close + 0.5, low=close - 0.5, close=close)
    rule = Rule("position == 0 and close > 99", "equity > 11000")
    result = backtest(bars, rule, {}, ppy=PPY, fill="close", init_cash=10_000.0)
    trades = result.trades
    assert trades["entry_bar"].tolist()[:1] == [0]
    assert trades["exit_bar"].tolist()[:1] == [4]  # 100 shares x 111
    np.testing.assert_allclose(result.equity.to_numpy()[:5],
                               [10_000.0, 10_000.0, 10_400.0, 10_900.0, 11_100.0])


# ----------------------------------------------------------------- Python signals

@njit(cache=True)
def budget_signal(ind, rows, fparams, bars, t, position, entry_price, entry_bar, equity,
                  pending, pending_price):
    """Long above the SMA while the account is above ``floor``; out below it."""
    close, sma = bars[3][t], ind[rows[0], t]
    flat = position == 0.0
    return (flat and close > sma and equity > fparams[1] and pending == 0.0,
            close < sma, False, False)


BUDGET = Strategy(
    name="sma_budget",
    params=(Param("period", "int", 2, 100_000), Param("floor", "float", 0.0, 1e12)),
    indicators=(Indicator("sma", ("period",)),),
    signal=budget_signal,
    doc="long above the SMA while the account is above a floor",
)


def test_an_eleven_argument_signal_runs_as_the_rule_that_says_it(bars):
    """A Python signal of 11 arguments gives what the same rule gives, bit for bit, in a
    sweep and in a portfolio."""
    rule = Rule("position == 0 and close > sma(close, period) and equity > floor and "
                "pending == 0", "close < sma(close, period)", short_entry="close < 0",
                short_exit="close < 0")
    kinds = {"period": "int", "floor": "float"}
    params = {"period": np.array([5, 12, 30]), "floor": np.array([9_000.0, 9_950.0, 0.0])}
    for execution in (Execution(fill="close", fees=0.001),
                      Execution(fill="next_open", fees=0.001,
                                entry_order=dict(type="stop", offset=0.002, valid_bars=3))):
        np.testing.assert_array_equal(sweep_block(BUDGET, bars, params, execution, PPY),
                                      sweep_block(compile_rule(rule, kinds), bars, params,
                                                  execution, PPY))
    universe = {s: random_bars(600, seed=50 + i, gap=0.003) for i, s in enumerate(SYMBOLS)}
    ours, _ = sweep_portfolio(BUDGET, universe, params, Execution(fill="close", fees=0.001),
                              PPY)
    theirs, _ = sweep_portfolio(compile_rule(rule, kinds), universe, params,
                                Execution(fill="close", fees=0.001), PPY)
    np.testing.assert_array_equal(ours, theirs)


def test_a_signal_of_another_length_is_refused_naming_the_forms():
    @njit
    def ten(ind, rows, fparams, bars, t, position, entry_price, entry_bar, equity, pending):
        return False, False, False, False

    with pytest.raises(SpecError, match=r"takes \(ind, rows, .*pending\); a signal takes 5 "
                                        r"arguments .* or 11 \(and position, entry_price, "
                                        r"entry_bar, equity, pending, pending_price\)"):
        kernels.signal_arity(ten)


def test_the_portfolio_account_rule_reads_the_account():
    """The portfolio tests' ``account_rule`` (held to the portfolio reference there)
    decides something through ``equity``: without its reads the metrics differ."""
    make, combos, _ = PORTFOLIO_CASES["account_rule"]
    universe = {s: random_bars(800, seed=10 + i, gap=0.003) for i, s in enumerate(SYMBOLS)}
    params = {k: np.array([c[k] for c in combos]) for k in combos[0]}
    execution = Execution(fill="close", fees=0.001)
    ours, _ = sweep_portfolio(make(), universe, params, execution, PPY)
    plain = compile_rule(Rule("close > sma(close, n) and floor >= 0",
                              "close < sma(close, n) or share < 0"),
                         {"n": "int", "floor": "float", "share": "float"})
    theirs, _ = sweep_portfolio(plain, universe, params, execution, PPY)
    for c in range(len(combos)):
        assert not np.array_equal(ours[c], theirs[c], equal_nan=True), c
