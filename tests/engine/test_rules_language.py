"""The rule language: what it refuses (one message, a caret under the text at fault),
and its indicators, nested, equal to TA-Lib's Python functions."""

import re

import numpy as np
import pytest
import talib
from helpers.bars import random_bars

from barsweep.engine.core.hoist import hoist
from barsweep.engine.rules import Rule, RuleError, compile_rule, parse_rule
from barsweep.engine.rules.lower import text
from barsweep.errors import SpecError

KINDS = {"n": "int", "m": "int", "k": "float", "lag": "int", "level": "float"}


def refusal(rule: str, kinds=KINDS) -> str:
    with pytest.raises(RuleError) as err:
        parse_rule(rule, kinds, "strategy.rule.entry")
    return str(err.value)


def caret_under(message: str) -> str:
    """The text the caret line marks, read from the message's last two lines."""
    *_, line, marks = message.split("\n")
    start = marks.index("^")
    return line[start:start + marks.count("^")]


@pytest.mark.parametrize(("rule", "said", "marked"), [
    ("rsi(close, nn) < 30", "unknown name 'nn' (did you mean 'n'?)", "nn"),
    ("close > smaa(close, n)", "unknown function 'smaa' (did you mean 'sma'?)", "smaa"),
    ("sma(close) > 1", "sma takes 2 arguments, got 1", "sma(close)"),
    ("macd(close, 1, 2).hist > 0", "macd takes 4 arguments, got 3", "macd(close, 1, 2)"),
    ("close > sma(close, k)", "grid axis 'k' has values that are not whole numbers", "k"),
    ("close > sma(close, 2.5)", "a whole number >= 1, got 2.5", "2.5"),
    ("close[-2] > open", "a lag must be a non-negative integer", "-2"),
    ("close[k] > open", "a lag must be a non-negative integer literal or an int", "k"),
    ("close > 1 and 2", "each side of `and` must be true or false", "2"),
    ("(close > open) * 2 > 1", "the left side of * must be a number, not true/false",
     "close > open"),
    ("sma(close > open, n) > 1", "sma's x must be a number, not true/false", "close > open"),
    ("close + open", "a rule must be true or false at each bar", "close + open"),
    ("bbands(close, n, k).width > 0", "bbands has no output 'width'", "width"),
    ("close.real > 0", "attributes name the outputs of bbands", "close.real"),
    ("close.__class__ > 0", "attributes name the outputs of bbands", "close.__class__"),
    ("bbands(close, n, k) > 0", "bbands has several outputs: name one", "bbands(close, n, k)"),
    ("print(close) > 0", "unknown function 'print'", "print"),
    ("__import__('os') > 0", "unknown function '__import__'", "__import__"),
    ("(lambda: 1)() > 0", "only the rule language's functions can be called", "(lambda: 1)()"),
    ("[c for c in close] > 0", "a comprehension is not part of the rule language",
     "[c for c in close]"),
    ("level[1] > 0", "only a series has past values", "level"),
    ("close[1:3] > 0", "slices are not part of the rule language", "1:3"),
    ("bars_held[1] > 2", "the state has no past values", "bars_held"),
    ("sma(close - entry_price, n) > 0", "cannot read the position state", "close - entry_price"),
    ("sma(close, timeperiod=n) > 0", "arguments are positional", "sma(close, timeperiod=n)"),
    ("close ** 2 > 1", "the operator `**` is not part of the rule language (+ - * / only)",
     "**"),
    ("close > open AND close > sma(close, n)", "write `and` instead of `AND`", "AND"),
    ("close > open Or close > 1", "write `or` instead of `Or`", "Or"),
    ("NOT close > open", "write `not` instead of `NOT`", "NOT"),
    ("close > open && close > 1", "write `and` instead of `&&`", "&&"),
    ("close > open || close > 1", "write `or` instead of `||`", "||"),
    ("!(close > open)", "write `not` instead of `!`", "!"),
    ("close > open & close > sma(close, n)", "write `and` instead of `&`", "&"),
    ("(close > open) | (close > 1)", "write `or` instead of `|`", "|"),
    ("~(close > open)", "write `not` instead of `~`", "~"),
    ("AND", "write `and` instead of `AND`", "AND"),
    ("RSI(close, n) < 30", "unknown function 'RSI' (did you mean 'rsi'?)", "RSI"),
    ("close > Sma(close, n)", "unknown function 'Sma' (did you mean 'sma'?)", "Sma"),
    ("Close > open", "unknown name 'Close' (did you mean 'close'?)", "Close"),
    ("close > entry_price * (1 + take_profit)", "'take_profit' is a stop (execution."
     "take_profit, or a grid axis of that name), applied by the simulation inside each bar: "
     "a rule cannot read it", "take_profit"),
    ("'a' > 'b'", "a string is not part of the rule language", "'a'"),
    ("close > sma(3, n)", "sma's x must be a series", "3"),
    ("close > sma(close, n + 1)", "a number or a parameter (no arithmetic)", "n + 1"),
    ("cross_above(n, m)", "cross_above needs a series", "cross_above(n, m)"),
    ("cross_above(bars_held, n)", "not the position state", "cross_above(bars_held, n)"),
    ("close > sma", "sma is a function: call it, e.g. sma(x, timeperiod)", "sma"),
    ("close if open else high", "`x if c else y` is not part of the rule language",
     "close if open else high"),
])
def test_refused_in_one_message_with_a_caret(rule, said, marked):
    message = refusal(rule)
    first, *rest = message.split("\n")
    assert first.startswith("strategy.rule.entry: ") and said in first, message
    assert len(rest) == 2 and rest[0].strip() == rule, message
    assert caret_under(message) == marked, message


def test_caret_points_into_the_line_of_a_multiline_rule():
    message = refusal("close > open and\n  rsi(close, nn) < 30")
    assert message.split("\n")[0].endswith("(line 2, column 14)")
    assert message.split("\n")[1].strip() == "rsi(close, nn) < 30"
    assert caret_under(message) == "nn"


def test_a_refusal_says_its_column():
    assert refusal("close > smaa(close, n)").split("\n")[0].endswith("(column 9)")


def test_a_syntax_error_is_refused_where_the_parser_stopped():
    for rule in ("close > > 1", "close > > 1 and open != 1 or not open"):
        message = refusal(rule)
        assert "unexpected '>' (column 9)" in message.split("\n")[0], message
        assert caret_under(message) == ">"


def test_a_grid_axis_the_run_applies_is_named_so_in_a_rule():
    message = refusal("close > open * (1 + max_positions)", {"n": "int"})
    with pytest.raises(RuleError) as err:
        parse_rule("close > open * max_positions", {"n": "int"}, "strategy.rule.entry",
                   elsewhere=("max_positions",))
    first = str(err.value).split("\n")[0]
    assert "'max_positions' is a grid axis the run applies itself, not a parameter of the " \
           "rule: a rule cannot read it" in first, first
    assert first.endswith("the grid's other axes (n) (column 16)"), first
    assert "unknown name 'max_positions'" in message  # not one the caller named


@pytest.mark.parametrize(("axis", "reserved"), [
    ("close", "reserved for the series (open, high, low, close, volume, hour, minute, "
              "weekday, day, month): in a rule, close is the bars' close"),
    ("weekday", "reserved for the series (open, high, low, close, volume, hour, minute, "
                "weekday, day, month): in a rule, weekday is the weekday of the bar's time "
                "stamp (UTC)"),
    ("volume", "reserved for the series"),
    ("bars_held", "reserved for the state"),
    ("sma", "reserved for the rule language's functions: in a rule, sma calls "
            "sma(x, timeperiod)"),
    ("not", "reserved for the rule language's words"),
])
def test_a_grid_axis_named_as_the_language_is_refused(axis, reserved):
    with pytest.raises(SpecError) as err:
        compile_rule(Rule("close > sma(close, n)", "False"), {"n": "int", axis: "int"})
    message = str(err.value)
    assert message.startswith(f"grid.{axis}: the name '{axis}' is {reserved}"), message
    assert message.endswith(f"give the grid axis another name, e.g. '{axis}_level'"), message


def test_canonical_text_is_one_spelling_per_meaning():
    a = parse_rule("close>sma(close,n)and not open<1", KINDS)
    b = parse_rule("(close > sma( close , n )) and (not (open < 1.0))", KINDS)
    assert text(a) == text(b) == "((close > sma(close, n)) and (not (open < 1)))"


def test_unused_and_missing_parameters_are_refused():
    with pytest.raises(SpecError, match="no rule uses the parameter 'm'"):
        compile_rule(Rule("close > sma(close, n)", "False"), {"n": "int", "m": "int"})
    with pytest.raises(SpecError, match="unknown name 'm'"):
        compile_rule(Rule("close > sma(close, m)", "False"), {"n": "int"})
    # a stop swept as a grid axis is not the rule's parameter
    compile_rule(Rule("close > sma(close, n)", "False"), {"n": "int", "stop_loss": "float"},
                 extra=("stop_loss",))


def test_a_rule_missing_a_key_is_refused():
    with pytest.raises(SpecError, match=r"missing \['exit'\]"):
        Rule.of({"entry": "True"})
    with pytest.raises(SpecError, match=r"unknown \['exits'\]"):
        Rule.of({"entry": "True", "exit": "False", "exits": "x"})


# ------------------------------------------------------------- indicators vs TA-Lib

BARS = random_bars(600, seed=5)
C, H, L, O = (BARS[c] for c in ("close", "high", "low", "open"))

NESTED = [
    ("sma(close, n)", lambda n, m: talib.SMA(C, n)),
    ("ema(close, n)", lambda n, m: talib.EMA(C, n)),
    ("wma(close, n)", lambda n, m: talib.WMA(C, n)),
    ("rsi(close, n)", lambda n, m: talib.RSI(C, n)),
    ("roc(close, n)", lambda n, m: talib.ROC(C, n)),
    ("trix(close, n)", lambda n, m: talib.TRIX(C, n)),
    ("atr(high, low, close, n)", lambda n, m: talib.ATR(H, L, C, n)),
    ("bbands(close, n, 2.5).upper", lambda n, m: talib.BBANDS(C, n, 2.5, 2.5, 0)[0]),
    ("bbands(close, n, 2.5).middle", lambda n, m: talib.BBANDS(C, n, 2.5, 2.5, 0)[1]),
    ("bbands(close, n, 2.5).lower", lambda n, m: talib.BBANDS(C, n, 2.5, 2.5, 0)[2]),
    ("macd(close, n, m, 4).macd", lambda n, m: talib.MACD(C, n, m, 4)[0]),
    ("macd(close, n, m, 4).signal", lambda n, m: talib.MACD(C, n, m, 4)[1]),
    ("macd(close, n, m, 4).hist", lambda n, m: talib.MACD(C, n, m, 4)[2]),
    ("stoch(high, low, close, m, n, 3).k", lambda n, m: talib.STOCH(H, L, C, m, n, 0, 3, 0)[0]),
    ("stoch(high, low, close, m, n, 3).d", lambda n, m: talib.STOCH(H, L, C, m, n, 0, 3, 0)[1]),
    ("stdev(close, n)", lambda n, m: talib.STDDEV(C, n, 1.0)),
    ("highest(high, n)", lambda n, m: talib.MAX(H, n)),
    ("lowest(low, n)", lambda n, m: talib.MIN(L, n)),
    ("stdev(rsi(close, n), m)", lambda n, m: talib.STDDEV(talib.RSI(C, n), m, 1.0)),
    ("highest(ema(high, m) - close, n)", lambda n, m: talib.MAX(talib.EMA(H, m) - C, n)),
    ("ema(rsi(close, n), m)", lambda n, m: talib.EMA(talib.RSI(C, n), m)),
    ("sma(close - open, n)", lambda n, m: talib.SMA(C - O, n)),
    ("rsi(ema(close, m), n)", lambda n, m: talib.RSI(talib.EMA(C, m), n)),
    ("trix(sma(close, m), n)", lambda n, m: talib.TRIX(talib.SMA(C, m), n)),
    ("wma(abs(close - open) / close, n)", lambda n, m: talib.WMA(np.abs(C - O) / C, n)),
    ("sma(close[2], n)", lambda n, m: talib.SMA(np.concatenate([[np.nan] * 2, C[:-2]]), n)),
    ("ema(max(high - low, abs(close - open)), n)",
     lambda n, m: talib.EMA(np.maximum(H - L, np.abs(C - O)), n)),
    ("atr(ema(high, m), ema(low, m), sma(close, n), n)",
     lambda n, m: talib.ATR(talib.EMA(H, m), talib.EMA(L, m), talib.SMA(C, n), n)),
    ("macd(rsi(close, n), m, 20, 5).hist", lambda n, m: talib.MACD(talib.RSI(C, n), m, 20, 5)[2]),
    ("bbands(ema(rsi(close, n), m), n, 1.5).lower",
     lambda n, m: talib.BBANDS(talib.EMA(talib.RSI(C, n), m), n, 1.5, 1.5, 0)[2]),
]


@pytest.mark.parametrize(("expression", "oracle"), NESTED, ids=[e for e, _ in NESTED])
def test_indicator_rows_equal_talib(expression, oracle):
    kinds = {k: "int" for k in ("n", "m") if re.search(rf"\b{k}\b", expression)}
    strategy = compile_rule(Rule(f"{expression} > 0", "False"), kinds)
    params = {p.name: np.array([9, 14, 9]) if p.name == "n" else np.array([5, 5, 7])
              for p in strategy.params}
    ind, rows = hoist(strategy, BARS, params, 3)
    for c in range(3):
        values = {k: int(v[c]) for k, v in params.items()}
        want = oracle(values.get("n", 0), values.get("m", 0))
        np.testing.assert_allclose(ind[rows[c, 0]], want, rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(np.isnan(ind[rows[c, 0]]), np.isnan(want))


def test_a_compiled_rule_pickles_as_its_rule():
    import pickle

    strategy = compile_rule(Rule("rsi(close, n) < k", "bars_held >= m"),
                            {"n": "int", "k": "float", "m": "int"})
    data = pickle.dumps(strategy)
    assert b"signal" not in data and len(data) < 1_000
    again = pickle.loads(data)
    assert again is strategy  # compiled once per process
    assert [p.name for p in again.params] == ["n", "k", "m"]
