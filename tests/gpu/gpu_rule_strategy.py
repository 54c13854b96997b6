"""rule_state: a strategy written as rules (lags, nested indicators, crosses, min/max,
the position state), so the simulator and PTX tests cover the generated signal; rule_hold:
rules whose entry and exit of one side often hold on the same bar (a state entry, an exit
by time), so each ``execution.conflict`` mode resolves something; rule_account: rules
that read the account (``equity``, the pending entry order and its level), an 11-argument
signal. Registered on import."""

from barsweep.engine import register
from barsweep.engine.rules import Rule, compile_rule

RULE = Rule(
    "cross_above(ema(rsi(close, period), 3), 50) and close > close[lag] and position == 0",
    "bars_held >= hold or close < entry_price * (1 - k) or "
    "min(open, close) > max(highest(high, period)[1], sma(close, period) + stdev(close, 10))",
    short_entry="cross_below(ema(rsi(close, period), 3), 50) and not (close > close[lag])",
    short_exit="bars_held >= hold or close > entry_price * (1 + k)",
    name="rule_state")

STRATEGY = register(compile_rule(RULE, {"period": "int", "lag": "int", "hold": "int",
                                        "k": "float"}))

HOLD_RULE = Rule("close > sma(close, period)", "bars_held >= hold",
                 short_entry="close < sma(close, period)", short_exit="bars_held >= hold",
                 name="rule_hold")

HOLD_STRATEGY = register(compile_rule(HOLD_RULE, {"period": "int", "hold": "int"}))

ACCOUNT_RULE = Rule("close > sma(close, period) and pending == 0 and equity > floor",
                    "close < sma(close, period) or close > pending_price * (1 + k) or "
                    "quantity * close > equity * 1.5",
                    short_entry="close < sma(close, period) and pending == 0",
                    short_exit="close > sma(close, period) or equity < floor",
                    name="rule_account")

ACCOUNT_STRATEGY = register(compile_rule(ACCOUNT_RULE, {"period": "int", "floor": "float",
                                                        "k": "float"}))
