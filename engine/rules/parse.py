"""Read a rule's text into a typed tree, refusing anything outside the language.

The text is parsed by Python's :mod:`ast` (never evaluated) and walked through a
whitelist: every node becomes a :class:`Node` that knows its type (``num`` or ``bool``),
whether it changes from bar to bar, whether it reads the position state, and where it
is in the text. A refusal is a :class:`RuleError`: one line saying what is wrong, then
the rule with a caret under the offending text.
"""

from __future__ import annotations

import ast
import difflib
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from ...errors import SpecError
from ..execution import STOP_PARAMS
from .functions import FUNCTIONS, HELPERS, SERIES, STATE, known_names

_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
#: Python's bitwise operators, which other languages' rules write for and/or.
_BITWISE = {ast.BitAnd: "&", ast.BitOr: "|"}
#: Python's other binary operators, named in a refusal.
_OTHER_BINARY = {ast.Pow: "**", ast.Mod: "%", ast.FloorDiv: "//", ast.BitXor: "^",
                 ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@"}
_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==",
            ast.NotEq: "!="}


#: The most characters a rule's text may have.
MAX_CHARS = 4_000
#: The most nodes (names, numbers, operators, calls) a rule may have.
MAX_NODES = 500
#: The deepest a rule's nesting (operators within operators, calls within calls) may go.
MAX_DEPTH = 100
#: The largest period (an indicator's int argument) or lag, in bars.
MAX_BARS = 10_000_000
#: Characters the language never uses (its text is printable ASCII: a comment, a
#: backslash, a control or non-ASCII character is refused, not read around).
_OUTSIDE = re.compile(r"[^\t\n\r -~]|[#\\]")


class RuleError(SpecError):
    """A rule refused: the message, then the rule's text with a caret under the part
    at fault."""


@dataclass(frozen=True)
class Node:
    """One node of a rule.

    Attributes
    ----------
    kind : str
        ``num`` (a number), ``col`` (a bar column), ``param``, ``state``, ``call`` (an
        indicator), ``op`` (``+ - * /``), ``neg``, ``helper`` (``abs min max``),
        ``cmp``, ``and``, ``or``, ``not``, ``lag``, ``cross`` (``cross_above/below``).
    value : object
        The number, the name, the operator, ``(function, output)`` of a call, the
        helper's name.
    args : tuple of Node
    type : {"num", "bool"}
    bar : bool
        Whether it changes from bar to bar.
    state : bool
        Whether it reads the position state.
    span : (int, int)
        Its place in the rule's text, ``[start, end)``.
    """

    kind: str
    value: object
    args: tuple[Node, ...] = ()
    type: str = "num"
    bar: bool = False
    state: bool = False
    span: tuple[int, int] = field(default=(0, 0), compare=False)


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
    reader = _Reader(text, params, where, elsewhere)
    _check_text(reader)
    try:  # in parentheses: a rule may span lines (a YAML block)
        tree = ast.parse(f"({text}\n)" if text.strip() else text, mode="eval")
    except SyntaxError as err:
        _check_foreign_logic(reader)
        offset = min(reader.offset(err.lineno or 1, (err.offset or 1) - 1),
                     max(len(text) - 1, 0))
        reader.fail(f"not a valid expression ({err.msg})", (offset, offset + 1))
    except (RecursionError, MemoryError):  # MemoryError: the parser's stack overflowed
        reader.fail(f"nested too deeply (at most {MAX_DEPTH} levels)", (0, len(text)))
    _check_size(reader, tree.body)
    node = reader.read(tree.body)
    if node.type != "bool":
        reader.fail("a rule must be true or false at each bar (a comparison, a cross, "
                    "and/or/not); this is a number", node.span)
    return node


def _check_text(reader: _Reader) -> None:
    """Refuse a text too long to be a rule, or holding a character the language never
    uses (with a caret under it)."""
    text = reader.text
    if len(text) > MAX_CHARS:
        raise RuleError(f"{reader.where}: a rule has at most {MAX_CHARS:,} characters, this "
                        f"one {len(text):,}; split it, or move a part into an indicator")
    found = _OUTSIDE.search(text)
    if found is None:
        return
    char = found.group()
    why = {"#": "comments are not part of the rule language (write them in the YAML, "
                "outside the rule's text)",
           "\\": "a backslash is not part of the rule language (a rule may span lines "
                  "as it is)"}.get(char, f"the character {char!r} (U+{ord(char):04X}) is not "
                                       "part of the rule language, written in ASCII")
    reader.fail(why, found.span())


#: How other languages write the rule language's logic (``AND``, ``&&``, ``!``): the
#: word or symbol, and what to write instead.
_FOREIGN_LOGIC = re.compile(r"\b(?:and|or|not)\b|&&|\|\||!(?!=)", re.IGNORECASE)
_LOGIC_WORDS = {"&&": "and", "||": "or", "!": "not", "&": "and", "|": "or", "~": "not"}


def _check_foreign_logic(reader: _Reader) -> None:
    """Refuse a text Python could not parse that writes and/or/not as another language
    does (``AND``, ``Or``, ``&&``, ``||``, ``!``), with a caret under the first one; return
    when it has none (then the parser's own message says what is wrong)."""
    for found in _FOREIGN_LOGIC.finditer(reader.text):
        written = found.group()
        if written in ("and", "or", "not"):
            continue
        reader.fail(_instead(written), found.span())


def _instead(written: str) -> str:
    """What to write for a foreign ``written`` and/or/not."""
    word = _LOGIC_WORDS.get(written, written.lower())
    return (f"write `{word}` instead of `{written}`: the rule language's logic is `and`, "
            "`or`, `not`, in lowercase as in Python")


def _check_size(reader: _Reader, tree: ast.AST) -> None:
    """Refuse a parsed rule with more than :data:`MAX_NODES` nodes or nested deeper than
    :data:`MAX_DEPTH` (walked without recursion, before the reader recurses)."""
    count, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            reader.fail(f"nested too deeply: a rule has at most {MAX_DEPTH} levels of "
                        "operators and calls (a sum of n terms is n levels)",
                        reader.span(node))
        if count > MAX_NODES:
            raise RuleError(f"{reader.where}: a rule has at most {MAX_NODES} terms (names, "
                            "numbers, operators, calls); split it, or move a part into an "
                            "indicator")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node)
                     if not isinstance(child, ast.expr_context | ast.operator | ast.boolop
                                       | ast.cmpop | ast.unaryop))


class _Reader:
    """The walk of one rule's ast: each visitor returns a Node or refuses."""

    def __init__(self, text: str, params: Mapping[str, str], where: str,
                 elsewhere: Collection[str] = ()) -> None:
        self.text, self.params, self.where = text, dict(params), where
        self.elsewhere = frozenset(elsewhere)
        self.starts = [0]
        for line in text.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, col: int) -> int:
        """The place in the text of a column of the parsed line (the first line was
        parsed after an opening parenthesis)."""
        col -= lineno == 1
        return min(self.starts[min(lineno, len(self.starts)) - 1] + max(col, 0),
                   len(self.text))

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.offset(node.lineno, node.col_offset)
        end = self.offset(node.end_lineno or node.lineno, node.end_col_offset or 0)
        return start, max(end, start + 1)

    def fail(self, message: str, span: tuple[int, int]):
        raise RuleError(caret(f"{self.where}: {message}", self.text, span))

    # ------------------------------------------------------------------ visitors

    def read(self, node: ast.AST) -> Node:
        visit = getattr(self, f"_{type(node).__name__}", None)
        if visit is None:
            self.fail(f"{_describe(node)} is not part of the rule language", self.span(node))
        return visit(node)

    def num(self, node: ast.AST, what: str) -> Node:
        """``node`` read, refused unless it is a number."""
        out = self.read(node)
        if out.type != "num":
            self.fail(f"{what} must be a number, not true/false", out.span)
        return out

    def boolean(self, node: ast.AST, what: str) -> Node:
        out = self.read(node)
        if out.type != "bool":
            self.fail(f"{what} must be true or false (a comparison), not a number",
                      out.span)
        return out

    def _Constant(self, node: ast.Constant) -> Node:
        value = node.value
        if isinstance(value, bool):
            return Node("num", value, type="bool", span=self.span(node))
        if isinstance(value, int | float) and not isinstance(value, complex):
            try:
                finite = math.isfinite(float(value))
            except OverflowError:  # an int beyond float64
                finite = False
            if not finite:
                self.fail("a number beyond float64's range (about 1.8e308)", self.span(node))
            return Node("num", value, span=self.span(node))
        self.fail(f"{type(value).__name__} constants are not part of the rule language",
                  self.span(node))

    def _Name(self, node: ast.Name) -> Node:
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
                      f" the position state ({', '.join(STATE)}) and the grid's other axes "
                      f"({_listed(self.params)})", span)
        if name.lower() in ("and", "or", "not"):
            self.fail(_instead(name), span)
        self.fail(f"unknown name {name!r}{suggest(name, (*known_names(), *self.params))}; "
                  f"names are the series ({', '.join(SERIES)}), the position state "
                  f"({', '.join(STATE)}) and the grid's axes ({_listed(self.params)})", span)

    def _BinOp(self, node: ast.BinOp) -> Node:
        op = _BINARY.get(type(node.op))
        logic = _BITWISE.get(type(node.op))
        if logic is not None:
            self.fail(_instead(logic), self._operator_span(node, logic))
        if op is None:
            self.fail(f"the operator {_OTHER_BINARY.get(type(node.op), '?')} is not part of "
                      "the rule language (+ - * / only)", self.span(node))
        left = self.num(node.left, f"the left side of {op}")
        right = self.num(node.right, f"the right side of {op}")
        return _combine("op", op, (left, right), "num", self.span(node))

    def _UnaryOp(self, node: ast.UnaryOp) -> Node:
        if isinstance(node.op, ast.Not):
            arg = self.boolean(node.operand, "what `not` negates")
            return _combine("not", "not", (arg,), "bool", self.span(node))
        if isinstance(node.op, ast.USub | ast.UAdd):
            arg = self.num(node.operand, "a signed value")
            if isinstance(node.op, ast.UAdd):
                return arg
            if arg.kind == "num":
                return Node("num", -arg.value, span=self.span(node))
            return _combine("neg", "-", (arg,), "num", self.span(node))
        self.fail(_instead("~"), (self.span(node)[0], self.span(node)[0] + 1))

    def _operator_span(self, node: ast.BinOp, symbol: str) -> tuple[int, int]:
        """Where ``symbol``, the operator of ``node``, is in the text: the first one
        between its two sides."""
        start, end = self.span(node.left)[1], self.span(node.right)[0]
        at = self.text.find(symbol, start, end)
        return (at, at + len(symbol)) if at >= 0 else self.span(node)

    def _BoolOp(self, node: ast.BoolOp) -> Node:
        kind = "and" if isinstance(node.op, ast.And) else "or"
        args = tuple(self.boolean(v, f"each side of `{kind}`") for v in node.values)
        return _combine(kind, kind, args, "bool", self.span(node))

    def _Compare(self, node: ast.Compare) -> Node:
        sides = [node.left, *node.comparators]
        read = [self.num(s, "each side of a comparison") for s in sides]
        pairs = []
        for i, op in enumerate(node.ops):
            symbol = _COMPARE.get(type(op))
            if symbol is None:
                self.fail("only < <= > >= == != compare numbers", self.span(node))
            span = (read[i].span[0], read[i + 1].span[1])
            pairs.append(_combine("cmp", symbol, (read[i], read[i + 1]), "bool", span))
        if len(pairs) == 1:
            return pairs[0]
        return _combine("and", "and", tuple(pairs), "bool", self.span(node))

    def _Subscript(self, node: ast.Subscript) -> Node:
        target = self.read(node.value)
        if not target.bar:
            self.fail("only a series has past values: [k] reads the value k bars ago of "
                      "a series (close[1], rsi(close, n)[2])", target.span)
        if target.state:
            self.fail("the position state has no past values (it is read at this bar)",
                      target.span)
        lag = self._lag(node.slice)
        if lag.kind == "num" and lag.value == 0:
            return target
        return _combine("lag", None, (target, lag), target.type, self.span(node))

    def _lag(self, node: ast.AST) -> Node:
        if isinstance(node, ast.Slice):
            self.fail("slices are not part of the rule language: x[k] is one past value",
                      self.span(node))
        lag = self.num(node, "a lag")
        if lag.kind == "num" and isinstance(lag.value, int) and 0 <= lag.value <= MAX_BARS:
            return lag
        if lag.kind == "num" and isinstance(lag.value, int) and lag.value > MAX_BARS:
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
            return _combine("cross", name, args, "bool", span)
        return _combine("helper", name, args, "num", span)

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
        if value.kind == "num" and (not isinstance(value.value, int) or value.value < 1):
            self.fail(f"{name}'s {label} is a period, a whole number >= 1, got "
                      f"{value.value!r}", value.span)
        if value.kind == "num" and value.value > MAX_BARS:
            self.fail(f"{name}'s {label} is a period of at most {MAX_BARS:,} bars, got "
                      f"{value.value!r}", value.span)
        return value


def _combine(kind: str, value, args: tuple[Node, ...], type_: str, span) -> Node:
    return Node(kind, value, args, type_, any(a.bar for a in args),
                any(a.state for a in args), span)


def caret(message: str, text: str, span: tuple[int, int]) -> str:
    """``message``, then the line of ``text`` holding ``span`` with carets under it."""
    start, end = span
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", start)
    line_end = len(text) if line_end < 0 else line_end
    line = text[line_start:line_end]
    width = max(1, min(end, line_end) - start)
    return f"{message}\n    {line}\n    {' ' * (start - line_start)}{'^' * width}"


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


def _describe(node: ast.AST) -> str:
    names = {ast.Lambda: "a lambda", ast.ListComp: "a comprehension",
             ast.GeneratorExp: "a comprehension", ast.DictComp: "a comprehension",
             ast.SetComp: "a comprehension", ast.IfExp: "`x if c else y`",
             ast.NamedExpr: "`:=`", ast.JoinedStr: "an f-string", ast.List: "a list",
             ast.Tuple: "a tuple", ast.Dict: "a dict", ast.Set: "a set",
             ast.Starred: "`*`", ast.Await: "await"}
    return names.get(type(node), f"`{type(node).__name__}`")
