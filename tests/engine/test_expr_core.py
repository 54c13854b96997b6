"""The expression core: one reader and one refusal for constraints, filters and rules, and
conditions evaluated over whole arrays (a block's constraint mask)."""

import numpy as np
import pytest

from barsweep.engine.expr import ExprError, evaluate, holds, program, read_expr
from barsweep.engine.rules import RuleError, parse_rule
from barsweep.errors import SpecError

# faults of the text both languages share (``close`` and ``open`` are names to a
# constraint, series to a rule)
SAME_FAULT = [
    "close ** 2 < 3",
    "close % 2 < 1",
    "close in open",
    "~(close < 1)",
    "close < open AND close < 3",
    "close < open && close < 3",
    "!(close < 1)",
    "close < open # note",
    "close < op\u00e9n",
    "close < < open",
    "close < (open",
    "close = open",
    "close < 0x10",
    "close < 1e400",
    "close < 'x'",
    "close < open and 2",
    "(close < open) * 2 > 1",
    "not close",
    "[close] < open",
    "close if open else close",
    "close < open <\n  (open + 1) ** 2",
]


def refusal(read, text):
    with pytest.raises(ExprError) as err:
        read(text)
    return str(err.value)


@pytest.mark.parametrize("text", SAME_FAULT)
def test_one_refusal_for_a_fault_of_either_language(text):
    """The words, the column and the carets of a refusal are the reader's own, whichever
    language reads the text: only the head and the language's name differ."""
    said = refusal(lambda t: read_expr(t, "constraints[0]"), text)
    ruled = refusal(lambda t: parse_rule(t, {}, "strategy.rule.entry"), text)
    first, *shown = said.split("\n")
    rule_first, *rule_shown = ruled.split("\n")
    assert first.startswith("constraints[0]: ") and rule_first.startswith("strategy.rule.entry: ")
    body = first.removeprefix("constraints[0]: ")
    rule_body = rule_first.removeprefix("strategy.rule.entry: ")
    summary = " (it has decimal numbers, names, + - * /, comparisons, and/or/not and parentheses)"
    assert rule_body == body.replace("the expression", "the rule").replace(summary, ""), (
        said, ruled)
    assert shown == rule_shown


def test_a_refusal_is_a_spec_error_and_a_rules_a_rule_error():
    assert issubclass(ExprError, SpecError) and issubclass(RuleError, ExprError)
    with pytest.raises(ExprError) as err:
        read_expr("fast <", "x")
    assert not isinstance(err.value, RuleError)


def test_the_rule_language_adds_to_the_core():
    """Calls, lags and True/False are the rule language's; the core refuses them, and
    ``&``/``|`` are the core's spellings of and/or that rules refuse."""
    for text in ("sma(close, 3) > close", "close[1] > close", "True"):
        parse_rule(text, {})
        with pytest.raises(ExprError, match="is not part of the expression language"):
            read_expr(text, "x")
    read_expr("a < b & b < c | a > 2", "x")
    with pytest.raises(RuleError, match="write `and` instead of `&`"):
        parse_rule("close < open & open < 3", {})


# ------------------------------------------------------------------ evaluation


A = np.array([0, 1, 2, 3, 4, 5], dtype=np.int64)
B = np.array([5, 1, 0, 3, 9, 2], dtype=np.int64)
X = np.array([0.5, np.nan, 2.0, 3.0, np.nan, -1.0])


@pytest.mark.parametrize(("text", "oracle"), [
    ("a < b", lambda: A < B),
    ("a * 2 + 1 <= b - 3 or not b != 3", lambda: (A * 2 + 1 <= B - 3) | (B == 3)),
    ("x != 2", lambda: (X < 2) | (X > 2)),  # NaN compares false, != too
    ("x == x", lambda: ~np.isnan(X)),
    ("a / (b - b) > 0", lambda: np.array([False, True, True, True, True, True])),  # inf, NaN
    ("-a < x", lambda: -A < X),
])
def test_evaluate_equals_numpy(text, oracle):
    with np.errstate(all="raise"):  # quiet: x / 0 is inf or NaN, as numpy gives it
        got = evaluate(read_expr(text, "x"), {"a": A, "b": B, "x": X})
    np.testing.assert_array_equal(got, oracle())


def test_holds_is_every_condition_over_the_combos():
    conditions = [read_expr(t, "x") for t in ("a < b", "b - a >= 1", "a < b and x == x")]
    env = {"a": A, "b": B, "x": X}
    want = np.logical_and.reduce([evaluate(c, env) for c in conditions])
    np.testing.assert_array_equal(holds(conditions, env), want)
    assert holds([], env).tolist() == [True] * 6
    assert holds([read_expr("1 < 2", "x")], {}).tolist() == [True]  # a box without axes
    with pytest.raises(SpecError, match="no values for name 'c'"):
        holds([read_expr("a < c", "x")], env)


def test_a_constraint_set_is_one_program_of_its_distinct_subtrees():
    """Compiled once per set (cached), each distinct subtree one numpy call: ``a`` and
    ``b`` and ``a < b`` are read once for the three conditions."""
    conditions = [read_expr(t, "x") for t in ("a < b", "(a < b) or b > 3", "not a < b")]
    steps, frees, results = program(conditions)
    assert [op for op, _, _ in steps] == ["name", "name", "<", "num", ">", "or", "not"]
    assert results == (2, 5, 6)
    assert program([read_expr(t, "y") for t in ("a<b", "(a<b)or b>3", "not(a<b)")]) is (
        program(conditions))
    # 3 and 3.0 are equal nodes but not the same arrays: int64 against float64
    ints, floats = (program([read_expr(f"a * {n} < b", "x")]) for n in ("3", "3.0"))
    assert ints is not floats and type(ints[0][1][1]) is int and type(floats[0][1][1]) is float
    # a value is dropped after the last step that reads it, unless it is a result
    assert all(i not in results for dropped in frees for i in dropped)
