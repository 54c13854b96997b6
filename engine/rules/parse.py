"""Read a rule's text into a typed tree, refusing anything outside the language.

The rule language is a dialect of the expression core (:mod:`barsweep.engine.expr`): the
text is parsed by Python's :mod:`ast` (never evaluated) and walked through the core's
whitelist, to which this reader adds the series, the position state, the grid's
parameters, indicator calls, helpers, crosses, lags and ``True``/``False``. Every node is a
:class:`~barsweep.engine.expr.Node` that knows its type (``num`` or ``bool``), whether it
changes from bar to bar, whether it reads the position state, and where it is in the text.
A refusal is a :class:`RuleError`: one line saying what is wrong, then the rule with a
caret under the offending text.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Collection, Mapping

from ..core.execution import STOP_PARAMS
from ..expr.read import MAX_CHARS, MAX_DEPTH, MAX_NODES, ExprError, Node, Reader, combine, instead
from .functions import FUNCTIONS, HELPERS, SERIES, STATE, known_names

__all__ = ["MAX_BARS", "MAX_CHARS", "MAX_DEPTH", "MAX_NODES", "Node", "RuleError",
           "parse_rule", "suggest", "usage"]

#: The largest period (an indicator's int argument) or lag, in bars.
MAX_BARS = 10_000_000


class RuleError(ExprError):
    """A rule refused: the message, then the rule's text with a caret under the part
    at fault."""


def parse_rule(text: str, params: Mapping[str, str], where: str = "rule",
               elsewhere: Collection[str] = ()) -> Node:
    """The typed tree of a rule's boolean expression.

    Parameters
    ----------
    text : str
        The rule, e.g. ``"rsi(close, period) < lower and close > sma(close, trend)"``.
    params : mapping of name to {"int", "float"}
        The parameters (grid axes) a bare name may refer to, with their kinds.
    where : str
        What the rule is, for messages (``strategy.rule.entry``).
    elsewhere : collection of str
        Grid axes the run applies itself, not the rule (a portfolio's settings; the
        stops always are): a rule that reads one is told so.

    Raises
    ------
    RuleError
        Naming what is wrong, with a caret under it.

    Examples
    --------
    >>> tree = parse_rule("close > sma(close, n)", {"n": "int"})
    >>> tree.kind, tree.type, tree.args[1].value
    ('cmp', 'bool', ('sma', ''))
    """
    return _Reader(text, params, where, elsewhere).parse()


class _Reader(Reader):
    """The core's walk, with the rule language's names, calls, outputs and lags."""

    language = "the rule language"
    noun = "rule"
    summary = ""
    advice = "split it, or move a part into an indicator"
    logic_symbols = False  # `&` and `|` are refused, saying to write and/or
    booleans = True
    error = RuleError

    def __init__(self, text: str, params: Mapping[str, str], where: str,
                 elsewhere: Collection[str] = ()) -> None:
        super().__init__(text, where)
        self.params = dict(params)
        self.elsewhere = frozenset(elsewhere)

    def not_a_condition(self, node: Node) -> str:
        return ("a rule must be true or false at each bar (a comparison, a cross, "
                "and/or/not); this is a number")

    def name(self, node: ast.Name) -> Node:
        name, span = node.id, self.span(node)
        if name in SERIES:
            return Node("col", name, bar=True, span=span)
        if name in STATE:
            return Node("state", name, bar=True, state=True, span=span)
        if name in self.params:
            return Node("param", name, span=span)
        if name in FUNCTIONS or name in HELPERS:
            self.fail(f"{name} is a function: call it, e.g. {usage(name)}", span)
        if name in STOP_PARAMS or name in self.elsewhere:
            what = (f"a stop (execution.{name}, or a grid axis of that name), applied by "
                    "the simulation inside each bar" if name in STOP_PARAMS
                    else "a grid axis the run applies itself, not a parameter of the rule")
            self.fail(f"{name!r} is {what}: a rule cannot read it (to read a level in a "
                      f"rule, give its grid axis another name, "
                      f"e.g. '{name}_level'); a rule reads the series ({', '.join(SERIES)}),"
                      f" the state ({', '.join(STATE)}) and the grid's other axes "
                      f"({_listed(self.params)})", span)
        if name.lower() in ("and", "or", "not"):
            self.fail(instead(name, self.language), span)
        self.fail(f"unknown name {name!r}{suggest(name, (*known_names(), *self.params))}; "
                  f"names are the series ({', '.join(SERIES)}), the state "
                  f"({', '.join(STATE)}) and the grid's axes ({_listed(self.params)})", span)

    def _Subscript(self, node: ast.Subscript) -> Node:
        target = self.read(node.value)
        if not target.bar:
            self.fail("only a series has past values: [k] reads the value k bars ago of "
                      "a series (close[1], rsi(close, n)[2])", target.span)
        if target.state:
            self.fail("the state has no past values (it is read at this bar)",
                      target.span)
        lag = self._lag(node.slice)
        if lag.kind == "num" and lag.value == 0:
            return target
        return combine("lag", None, (target, lag), target.type, self.span(node))

    def _lag(self, node: ast.AST) -> Node:
        if isinstance(node, ast.Slice):
            self.fail("slices are not part of the rule language: x[k] is one past value",
                      self.span(node))
        lag = self.num(node, "a lag")
        if lag.kind == "num" and isinstance(lag.value, int) and 0 <= lag.value <= MAX_BARS:
            return lag
        if lag.kind == "num" and lag.value > MAX_BARS:  # (an int beyond int64 is a float)
            self.fail(f"a lag is at most {MAX_BARS:,} bars", lag.span)
        if lag.kind == "num" and isinstance(lag.value, int | float) and lag.value < 0:
            self.fail("a lag must be a non-negative integer: x[k] is the value k bars ago",
                      lag.span)
        if lag.kind == "param" and self.params[lag.value] == "int":
            return lag
        self.fail("a lag must be a non-negative integer literal or an int parameter (a grid "
                  "axis of whole numbers)", lag.span)

    def _Attribute(self, node: ast.Attribute) -> Node:
        call = node.value
        name = call.func.id if isinstance(call, ast.Call) and isinstance(
            call.func, ast.Name) else None
        function = FUNCTIONS.get(name)
        if function is None or "" in function.outputs:
            self.fail(f".{node.attr}: attributes name the outputs of bbands, macd, stoch "
                      "and donchian only", self.span(node))
        if node.attr not in function.outputs:
            end = self.span(node)[1]
            self.fail(f"{name} has no output {node.attr!r}{suggest(node.attr, function.outputs)}"
                      f"; its outputs: {', '.join(function.outputs)}",
                      (end - len(node.attr), end))
        return self._indicator(call, name, node.attr, self.span(node))

    def _Call(self, node: ast.Call) -> Node:
        if not isinstance(node.func, ast.Name):
            self.fail("only the rule language's functions can be called", self.span(node))
        name, span = node.func.id, self.span(node)
        if node.keywords:
            self.fail(f"arguments are positional, in TA-Lib's order: {usage(name)}", span)
        if name in HELPERS:
            return self._helper(node, name, span)
        function = FUNCTIONS.get(name)
        if function is None:
            self.fail(f"unknown function {name!r}"
                      f"{suggest(name, (*FUNCTIONS, *HELPERS))}; functions: "
                      f"{', '.join((*FUNCTIONS, *HELPERS))}", self.span(node.func))
        if "" not in function.outputs:
            self.fail(f"{name} has several outputs: name one, {usage(name)}", span)
        return self._indicator(node, name, "", span)

    def _helper(self, node: ast.Call, name: str, span) -> Node:
        fewest, most = HELPERS[name]
        if not fewest <= len(node.args) <= most:
            count = f"{fewest}" if fewest == most else f"{fewest} to {most}"
            self.fail(f"{name} takes {count} arguments, got {len(node.args)}", span)
        args = tuple(self.num(a, f"an argument of {name}") for a in node.args)
        if name.startswith("cross_"):
            if not any(a.bar for a in args):
                self.fail(f"{name} needs a series: nothing here changes from bar to bar", span)
            if any(a.state for a in args):
                self.fail(f"{name} compares this bar with the one before: not the position "
                          "state", span)
            return combine("cross", name, args, "bool", span)
        return combine("helper", name, args, "num", span)

    def _indicator(self, node: ast.Call, name: str, output: str, span) -> Node:
        function = FUNCTIONS[name]
        if len(node.args) != function.arity:
            self.fail(f"{name} takes {function.arity} arguments, got {len(node.args)}: "
                      f"{function.usage(name)}", self.span(node))
        args = []
        for arg, label in zip(node.args, function.series, strict=False):
            series = self.num(arg, f"{name}'s {label}")
            if not series.bar:
                self.fail(f"{name}'s {label} must be a series (a column or an expression of "
                          "one), not a constant", series.span)
            if series.state:
                self.fail(f"{name}'s {label} cannot read the position state (indicators are "
                          "computed once for every bar, before the simulation)", series.span)
            args.append(series)
        for arg, (label, kind) in zip(node.args[len(function.series):], function.scalars,
                                      strict=True):
            args.append(self._scalar(arg, name, label, kind))
        return Node("call", (name, output), tuple(args), "num", True, False, span)

    def _scalar(self, node: ast.AST, name: str, label: str, kind: str) -> Node:
        value = self.num(node, f"{name}'s {label}")
        if value.bar:
            self.fail(f"{name}'s {label} must be a number or a parameter, not a series",
                      value.span)
        if value.kind not in ("num", "param"):
            self.fail(f"{name}'s {label} must be a number or a parameter (no arithmetic)",
                      value.span)
        if kind != "int":
            return value
        if value.kind == "param" and self.params[value.value] != "int":
            self.fail(f"{name}'s {label} is a period, an integer: grid axis {value.value!r} "
                      "has values that are not whole numbers", value.span)
        if value.kind == "num" and value.value > MAX_BARS:  # (beyond int64: a float)
            self.fail(f"{name}'s {label} is a period of at most {MAX_BARS:,} bars, got "
                      f"{value.value!r}", value.span)
        if value.kind == "num" and (not isinstance(value.value, int) or value.value < 1):
            self.fail(f"{name}'s {label} is a period, a whole number >= 1, got "
                      f"{value.value!r}", value.span)
        return value


def suggest(name: str, known) -> str:
    """`` (did you mean 'x'?)`` for the known name spelled as ``name`` but for its case,
    else the closest one (:func:`difflib.get_close_matches`, case aside), or ``""``.

    >>> suggest("RSI", ("rsi", "roc")), suggest("smaa", ("sma", "ema")), suggest("q", ("sma",))
    (" (did you mean 'rsi'?)", " (did you mean 'sma'?)", '')
    """
    known = list(known)
    same = [k for k in known if k.lower() == name.lower()]
    lowered = {k.lower(): k for k in reversed(known)}
    close = same or [lowered[k] for k in difflib.get_close_matches(
        name.lower(), list(lowered), n=1, cutoff=0.6)]
    return f" (did you mean {close[0]!r}?)" if close else ""


def usage(name: str) -> str:
    if name in FUNCTIONS:
        return FUNCTIONS[name].usage(name)
    if name.startswith("cross_"):
        return f"{name}(a, b)"
    return f"{name}(x)" if name == "abs" else f"{name}(a, b)"


def _listed(params: Mapping[str, str]) -> str:
    return ", ".join(params) if params else "none"
