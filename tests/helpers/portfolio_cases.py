"""The portfolio tests' cases (tests/engine/test_portfolio*.py): four symbols, the
strategies with the reference signals each is held to, the executions, and the two ways
a value series is read back (the engine's metrics; vectorbt's ``from_orders``)."""

import math

import numpy as np
import pandas as pd
import pytest

from barsweep.engine import get_strategy
from barsweep.engine.rules import Rule, compile_rule

from .ref_strategies import ref_signals
from .rule_reference import RuleReference

PPY = 8760.0
SYMBOLS = ("AAA", "BBB", "CCC", "DDD")

STATE_RULE = Rule("cross_above(close, bbands(close, n, k).upper) and position == 0",
                  "bars_held >= hold or close < entry_price * (1 - stop)")
STATE_KINDS = {"n": "int", "k": "float", "hold": "int", "stop": "float"}

#: A rule reading the account's equity (the whole account's, at the close): it enters
#: only while the account is above a floor and leaves a position grown past a share of it.
ACCOUNT_RULE = Rule("close > sma(close, n) and equity > floor",
                    "close < sma(close, n) or quantity * close > equity * share")
ACCOUNT_KINDS = {"n": "int", "floor": "float", "share": "float"}


def fixed_signals(signals):
    """Signals that read no state, as ``signal_at(t, position, entry_price, entry_bar)``."""
    rows = list(zip(*signals, strict=True))
    return lambda t, position, entry_price, entry_bar: rows[t]


#: name -> (strategy, combos, reference signals of one symbol's bars and one combo)
CASES = {
    "ema_cross": (lambda: get_strategy("ema_cross"),
                  [dict(fast=5, slow=20), dict(fast=12, slow=40), dict(fast=3, slow=9)],
                  lambda bars, combo: fixed_signals(ref_signals("ema_cross", bars, combo))),
    "rsi": (lambda: get_strategy("rsi"),
            [dict(period=14, lower=30.0, upper=70.0), dict(period=7, lower=40.0, upper=60.0)],
            lambda bars, combo: fixed_signals(ref_signals("rsi", bars, combo))),
    "state_rule": (lambda: compile_rule(STATE_RULE, STATE_KINDS),
                   [dict(n=10, k=1.0, hold=5, stop=0.01), dict(n=20, k=0.5, hold=12, stop=0.03)],
                   lambda bars, combo: RuleReference(STATE_RULE, STATE_KINDS, combo,
                                                     bars).signal_at),
    "account_rule": (lambda: compile_rule(ACCOUNT_RULE, ACCOUNT_KINDS),
                     [dict(n=20, floor=9_000.0, share=0.55),
                      dict(n=40, floor=9_600.0, share=0.8)],
                     lambda bars, combo: RuleReference(ACCOUNT_RULE, ACCOUNT_KINDS, combo,
                                                       bars).signal_at),
}

EXECUTIONS = {
    "close": dict(fill="close"),
    "close_costs": dict(fill="close", fees=0.001, fixed_fee=2.0, slippage=0.0005),
    "next_open_costs": dict(fill="next_open", fees=0.0005, slippage=0.0003),
}


def assert_portfolio_matches(metrics, per_symbol, ref, symbols, where):
    """One combo's account metrics (a row of ``METRICS``) and its members' ``n_trades``
    (exactly) and ``exposure`` (1e-12) as the reference's ``ref``
    (:func:`~helpers.portfolio_reference.ref_portfolio`) has them."""
    from barsweep.engine import METRICS

    from .compare import assert_metrics_match

    assert_metrics_match(dict(zip(METRICS, metrics, strict=True)), ref["metrics"], where=where)
    for i, s in enumerate(symbols):
        n_trades, exposure = ref["per_symbol"][s]
        assert per_symbol[i, 0] == n_trades, where
        assert per_symbol[i, 1] == pytest.approx(exposure, rel=1e-12), where


def engine_way(value, init_cash, ppy):
    """total_return, max_drawdown and sharpe of a value series, as the engine computes
    them (returns against the previous value, the first against init_cash)."""
    value = np.asarray(value, dtype=np.float64)
    r = value / np.concatenate([[init_cash], value[:-1]]) - 1
    return {"total_return": value[-1] / init_cash - 1,
            "max_drawdown": float(np.min(value / np.maximum.accumulate(value) - 1)),
            "sharpe": r.mean() / r.std(ddof=1) * math.sqrt(ppy)}


def vectorbt_value(universe, targets, fees, init_cash, slippage=0.0, fixed_fee=0.0):
    """The value series of vectorbt's ``from_orders`` with ``targets`` (bars x symbols) as
    target percents, one group, cash sharing and an automatic call sequence."""
    vbt = pytest.importorskip("vectorbt")
    n = len(next(iter(universe.values()))["close"])
    index = pd.date_range("2000-01-01", periods=n, freq="1D")
    close = pd.DataFrame({s: b["close"] for s, b in universe.items()}, index=index)
    size = pd.DataFrame(targets, index=index, columns=close.columns)
    pf = vbt.Portfolio.from_orders(close, size=size, size_type="targetpercent", group_by=True,
                                   cash_sharing=True, call_seq="auto", fees=fees,
                                   fixed_fees=fixed_fee, slippage=slippage,
                                   init_cash=init_cash, freq="1D")
    return pf.value().to_numpy()
